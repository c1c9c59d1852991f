"""Gated DeltaNet hybrids (Qwen3.5 / Qwen3.6): the config read into layer kinds and exact parameter counts, the
state a sequence holds, vLLM's hybrid pool layout, the decode traffic that grows with the batch and not the
context, and the refusals of configs the reader cannot represent."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from config_files import write_config as _write

from slimlib.errors import DataError
from slimlib.model.features import model_features
from slimlib.model.serving import serving_config
from slimlib.model.terms.recommended import attention_bytes
from slimlib.registry.architectures import architecture_from_config
from slimlib.registry.gpus import get_gpu


def _qwen35_27b() -> dict:
    """The shape keys of Qwen/Qwen3.5-27B's published config.json (its text_config, in the multimodal wrapper)."""
    layers = 64
    text = {
        "model_type": "qwen3_5_text", "hidden_size": 5120, "num_hidden_layers": layers,
        "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 17408,
        "vocab_size": 248320, "max_position_embeddings": 262144, "attn_output_gate": True, "dtype": "bfloat16",
        "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
        "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_value_head_dim": 128,
        "mamba_ssm_dtype": "float32", "mlp_only_layers": [], "tie_word_embeddings": False,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
    }  # fmt: skip
    return {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": text,
            "tie_word_embeddings": False, "vision_config": {"depth": 27, "hidden_size": 1152}}  # fmt: skip


def test_qwen35_27b_layer_kinds_and_exact_parameters(tmp_path):
    a = architecture_from_config(_write(tmp_path, _qwen35_27b()))
    assert (a.n_layers, a.n_linear_layers, a.n_attention_layers) == (64, 48, 16)
    assert a.attn_output_gate and a.state_bytes == 4 and a.linear_conv_channels == 2 * 16 * 128 + 48 * 128
    d, v, hd = 5120, 248320, 256
    # full attention: q and its gate (2 x 24 heads), k, v (4 heads), o; q/k norms of the head width
    full = d * 2 * 24 * hd + 2 * d * 4 * hd + 24 * hd * d + 2 * hd
    # Gated DeltaNet: q,k (16 x 128 each), v and z (48 x 128 each), b and a (48 each); conv over q,k,v; A_log,
    # dt_bias; the gated norm (128); out
    conv = 2 * 16 * 128 + 48 * 128
    linear = d * (conv + 48 * 128 + 2 * 48) + conv * 4 + 2 * 48 + 128 + 48 * 128 * d
    ffn = 3 * d * 17408
    total = 2 * v * d + d + 16 * full + 48 * linear + 64 * (ffn + 2 * d)
    assert a.n_params == total and a.active_params == total
    assert a.n_params == pytest.approx(27e9, rel=0.03)  # the card's 27B counts the vision encoder too


def test_qwen35_moe_shared_expert_behind_its_gate(tmp_path):
    cfg = _qwen35_27b()
    t = cfg["text_config"]
    layers = 40
    t.update(model_type="qwen3_5_moe_text", hidden_size=2048, num_hidden_layers=layers, num_attention_heads=16,
             num_key_value_heads=2, linear_num_value_heads=32, num_experts=256, num_experts_per_tok=8,
             moe_intermediate_size=512, shared_expert_intermediate_size=512,
             layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)])  # fmt: skip
    del t["intermediate_size"]
    cfg["model_type"] = "qwen3_5_moe"
    a = architecture_from_config(_write(tmp_path, cfg))
    d, expert = 2048, 3 * 2048 * 512
    assert (a.n_experts, a.experts_per_token, a.n_shared_experts, a.n_moe_layers) == (256, 8, 1, 40)
    assert a.expert_params == 40 * 256 * expert
    # per MoE layer: router (256 x D), the shared expert and its one-output gate
    assert a.n_params - a.active_params == 40 * (256 - 8) * expert
    base = architecture_from_config(
        _write(tmp_path, {**cfg, "text_config": {**t, "shared_expert_intermediate_size": 0}}, "b.json")
    )
    assert a.n_params - base.n_params == 40 * (expert + d)


def test_hybrid_pool_layout_follows_vllm_page_rule(tmp_path):
    a = architecture_from_config(_write(tmp_path, _qwen35_27b()))
    s = serving_config(a, "h200", tensor_parallel=1)
    page_token = 2 * 4 * 256 * 2  # one token of one attention layer, bf16
    layer_state = (
        48 * 128 * 128 * 4 + (2 * 16 * 128 + 48 * 128) * 3 * 2
    )  # fp32 recurrent state, bf16 conv taps
    block = 16 * math.ceil(layer_state / (16 * page_token))
    assert (s.block_size, block) == (784, 784)
    assert s.state_bytes == 48 * layer_state
    assert (s.attention_groups, s.state_groups) == (1, 3)  # groups of min(16, 48) = 16 layers
    assert s.block_bytes == 16 * 784 * page_token
    # a request of c tokens: ceil(c / 784) attention blocks and one block per state group
    for c, blocks in ((1, 4), (784, 4), (785, 5), (8192, 14)):
        assert s.request_blocks(c) == blocks
        assert s.kv_bytes(c) == blocks * s.block_bytes
    # at TP 2 the heads and so the state halve; the page rule gives the same block size
    s2 = serving_config(a, "h200", tensor_parallel=2)
    assert s2.state_bytes == s.state_bytes / 2 and s2.block_size == 784
    # the features' KV per token hold the same blocks
    df = pd.DataFrame({"model": [str(tmp_path / "config.json")] * 2, "batch_size": [8, 8],
                       "input_len": [1000, 8000], "output_len": [24, 192], "gpu": ["h200"] * 2})  # fmt: skip
    f = model_features(df)
    ctx = np.array([1024.0, 8192.0])
    assert np.allclose(f["kv_bytes_per_token"], s.kv_bytes(ctx) / ctx)
    # the pool's whole blocks in attention-block tokens, and the state pages a request adds in the same tokens
    assert (f["kv_token_capacity"] == s.num_gpu_blocks * 784).all() and (f["state_tokens"] == 3 * 784).all()
    assert f["attention_layer_share"][0] == 0.25


def test_hybrid_decode_state_traffic_grows_with_steps_not_context(tmp_path):
    a = architecture_from_config(_write(tmp_path, _qwen35_27b()))
    s = serving_config(a, "h200")
    df = pd.DataFrame({"model": [str(tmp_path / "config.json")] * 3, "batch_size": [1, 1, 1],
                       "input_len": [1000, 8000, 1000], "output_len": [100, 100, 200], "gpu": ["h200"] * 3})  # fmt: skip
    f = model_features(df)
    got = attention_bytes(f, get_gpu("h200"))
    full = s.kv_bytes_full * (
        f["output_len"] * (f["input_len"] + 1) + f["output_len"] * (f["output_len"] - 1) / 2
    )
    assert np.allclose(got - full, 2 * s.state_bytes * f["output_len"])
    assert s.kv_bytes_full == 16 * 2 * 4 * 256 * 2  # only the full-attention layers cache keys and values


@pytest.mark.parametrize(
    "change, words",
    [
        ({"full_attention_interval": 3}, "does not match 'full_attention_interval'"),
        ({"linear_num_key_heads": 5}, "not a multiple of 'linear_num_key_heads'"),
        ({"layer_types": ["linear_attention"] * 64, "full_attention_interval": None}, "a hybrid needs both"),
        ({"mamba_ssm_dtype": "int3"}, "'mamba_ssm_dtype'"),
        ({"linear_value_head_dim": 0}, "'linear_value_head_dim'"),
    ],
)
def test_inconsistent_hybrid_configs_are_refused_naming_the_key(tmp_path, change, words):
    cfg = _qwen35_27b()
    cfg["text_config"].update(change)
    with pytest.raises(DataError) as err:
        architecture_from_config(_write(tmp_path, cfg, "q.json"))
    msg = str(err.value)
    assert "q.json" in msg and words in msg and "\n" not in msg


def test_linear_layers_in_a_family_without_them_are_refused(tmp_path):
    cfg = _qwen35_27b()["text_config"]
    cfg["model_type"] = "qwen3"
    for key in ("attn_output_gate", "mamba_ssm_dtype"):
        cfg.pop(key)
    with pytest.raises(DataError, match="'layer_types' has 'linear_attention' layers, which a qwen3 config"):
        architecture_from_config(_write(tmp_path, cfg, "q3.json"))
    cfg.pop("layer_types")
    with pytest.raises(DataError, match=r"'linear_\w+' \(hybrid linear attention \(Gated DeltaNet\)\)"):
        architecture_from_config(_write(tmp_path, cfg, "q3.json"))


def test_tensor_parallel_must_split_the_linear_heads(tmp_path):
    cfg = _qwen35_27b()
    cfg["text_config"].update(num_attention_heads=24, linear_num_key_heads=3, linear_num_value_heads=6)
    a = architecture_from_config(_write(tmp_path, cfg))
    with pytest.raises(DataError, match=r"tensor_parallel = 2 does not divide .* 3 linear-attention heads"):
        serving_config(a, "h200", tensor_parallel=2)


def test_a_pool_below_one_sequences_blocks_is_refused_with_the_arithmetic(tmp_path):
    a = architecture_from_config(_write(tmp_path, _qwen35_27b()))
    s = serving_config(a, "h200")
    assert "146.8 MiB linear-attention state per sequence" in s.explain()
    # a pool of two blocks: the weights fit, one sequence's 1 attention + 3 state blocks do not
    util = (s.weights + s.reserve + 2.5 * s.block_bytes) / s.capacity
    small = serving_config(a, "h200", gpu_memory_utilization=util)
    assert small.num_gpu_blocks == 2 and not small.fits
    with pytest.raises(DataError) as err:
        small.check_fits("row 3")
    msg = str(err.value)
    assert msg.startswith("row 3: one sequence of") and "needs 4 blocks" in msg and "784 tokens" in msg


def test_kv_slots_count_a_hybrids_whole_blocks_and_state(tmp_path):
    from slimlib.advisor.launch import launch_settings
    from slimlib.model.terms.batch import kv_slots

    a = architecture_from_config(_write(tmp_path, _qwen35_27b()))
    s = serving_config(a, "h100")
    df = pd.DataFrame({"model": [str(tmp_path / "config.json")] * 2, "batch_size": [64, 64],
                       "input_len": [1024, 128], "output_len": [1024, 128], "gpu": ["h100"] * 2})  # fmt: skip
    f = model_features(df)
    f["static_batch"] = np.array([1.0, 0.0])
    slots = kv_slots(f, 0.5)
    # static: the whole request (2048 tokens: 3 attention blocks) and its 3 state blocks; continuous: the context
    # at half the output (192 tokens: 1 block), the state still whole
    assert slots[0] == s.num_gpu_blocks / (3 + 3) and slots[1] == s.num_gpu_blocks / (1 + 3)
    flags = launch_settings(s, 32, 1024, 1024).flags
    assert "--no-enable-prefix-caching" in flags  # prefix caching would hold more state pages per request
    dense = serving_config(architecture_from_config(_write(tmp_path, {**_qwen35_27b()["text_config"],
        "model_type": "qwen3", "attn_output_gate": False, "mamba_ssm_dtype": None, "layer_types": None,
        "full_attention_interval": None, **{k: None for k in ("linear_conv_kernel_dim", "linear_key_head_dim",
        "linear_num_key_heads", "linear_num_value_heads", "linear_value_head_dim")}}, "d.json")), "h100")  # fmt: skip
    assert "--no-enable-prefix-caching" not in launch_settings(dense, 8, 1024, 1024).flags


@pytest.mark.parametrize("method", ["paper", "imai-ood-lr"])
def test_methods_that_price_kv_over_every_layer_refuse_a_hybrid(tmp_path, method):
    from slimlib.model.methods import make_model

    rows = pd.DataFrame({"model": [str(_write(tmp_path, _qwen35_27b()))] * 4, "batch_size": [1, 2, 4, 8],
                         "input_len": 512, "output_len": 128, "gpu": "h200", "throughput_tok_s": [50.0, 95, 180, 330],
                         "e2e_s": [2.6, 2.7, 2.8, 3.1]})  # fmt: skip
    with pytest.raises(DataError) as err:
        make_model(method, gpu="h200").fit(rows)
    msg = str(err.value)
    assert msg.startswith("row 0: the model has linear-attention") and method in msg and "\n" not in msg
    sparse = rows.assign(model="deepseek-v3.2", gpu="h200", tensor_parallel=8, input_len=4096)
    with pytest.raises(DataError, match=r"row 0: the model has sparse attention \(DeepSeek.s lightning"):
        make_model(method, gpu="h200").fit(sparse)


def test_pool_layout_of_close_layer_counts_and_fp8_kv(tmp_path):
    # 13 linear + 12 full layers: vLLM groups them by the larger count (13), padding the attention group
    cfg = _qwen35_27b()
    layers = ["linear_attention"] * 13 + ["full_attention"] * 12
    cfg["text_config"].update(num_hidden_layers=25, layer_types=layers, full_attention_interval=None)
    s = serving_config(architecture_from_config(_write(tmp_path, cfg, "c.json")), "h200")
    assert (s.attention_groups, s.state_groups) == (1, 1) and s.block_bytes == 13 * 784 * 4096
    # Qwen3.5-35B-A3B's shapes with an fp8 KV cache: 2096-token blocks (1 KiB per attention token and layer)
    cfg = _qwen35_27b()
    cfg["text_config"].update(num_key_value_heads=2, linear_num_value_heads=32)
    s = serving_config(
        architecture_from_config(_write(tmp_path, cfg, "f.json")), "h200", kv_cache_dtype="fp8"
    )
    assert s.block_size == 2096
