"""Mamba-2 hybrids (Nemotron-H, Nemotron 3): blocks read as layers of one mixer, exact parameters, the Mamba-2
state in vLLM's hybrid pool, FLOPs per token that equal twice the weights a token multiplies, and refusals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from config_files import write_config as _write

from slimlib.errors import DataError
from slimlib.model.features import model_features
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import architecture_from_config

PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"  # Nemotron 3 Nano's 52 blocks


def _nano() -> dict:
    """The shape keys of nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16's published config.json."""
    return {
        "model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "hidden_size": 2688,
        "num_hidden_layers": 52, "hybrid_override_pattern": PATTERN, "num_attention_heads": 32,
        "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 1856, "vocab_size": 131072,
        "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
        "expand": 2, "chunk_size": 128, "mamba_ssm_cache_dtype": "float32", "use_conv_bias": True,
        "mamba_proj_bias": False, "use_bias": False, "mlp_bias": False, "attention_bias": False,
        "mlp_hidden_act": "relu2", "n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
        "n_shared_experts": 1, "moe_shared_expert_intermediate_size": 3712, "n_group": 1, "topk_group": 1,
        "norm_topk_prob": True, "routed_scaling_factor": 2.5, "tie_word_embeddings": False,
        "max_position_embeddings": 262144, "torch_dtype": "bfloat16", "sliding_window": None,
    }  # fmt: skip


def test_nano_blocks_and_exact_parameters(tmp_path):
    a = architecture_from_config(_write(tmp_path, _nano()))
    # 23 Mamba-2 + 6 attention blocks are the layers; 23 MoE blocks their FFNs; 6 attention blocks have none
    assert (a.n_layers, a.n_linear_layers, a.n_attention_layers, a.n_ffnless_layers) == (29, 23, 6, 6)
    assert (a.linear_kind, a.n_moe_layers, a.ffn_kind, a.state_bytes) == ("mamba2", 23, "mlp", 4)
    d, v = 2688, 131072
    inner, bc = 64 * 64, 2 * 8 * 128
    mamba = d * (2 * inner + bc + 64) + (inner + bc) * (4 + 1) + 3 * 64 + inner + inner * d
    attention = d * 32 * 128 + 2 * d * 2 * 128 + 32 * 128 * d
    expert = 2 * d * 1856  # up and down, squared ReLU
    moe = d * 128 + 128 + 128 * expert + 2 * d * 3712  # router with its score bias, experts, shared expert
    norms = 52 * d + d  # one per block and the final one
    total = 2 * v * d + norms + 23 * mamba + 6 * attention + 23 * moe
    assert a.n_params == total and a.expert_params == 23 * 128 * expert
    assert a.active_params == total - 23 * (128 - 6) * expert
    # the Nemotron 3 Nano card: 31.6B total, 3.2B active without the embedding (3.6B with it)
    assert a.n_params == pytest.approx(31.6e9, rel=0.005)
    assert a.active_params - v * d == pytest.approx(3.2e9, rel=0.02)


def test_layers_block_type_reads_as_the_pattern(tmp_path):
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    cfg = {**_nano(), "layers_block_type": [names[x] for x in PATTERN]}
    del cfg["hybrid_override_pattern"], cfg["num_hidden_layers"]
    assert (
        architecture_from_config(_write(tmp_path, cfg)).identity
        == architecture_from_config(_write(tmp_path, _nano(), "p.json")).identity
    )


def test_flops_per_token_are_twice_the_weights_a_token_multiplies(tmp_path):
    """Dense (attention blocks without an MLP), MoE and latent MoE: the linear-layer FLOPs of one token equal 2 x
    its active weights but the embedding and LM head, within the norms, convolution taps and routers (< 1%)."""
    dense = {**_nano(), "hybrid_override_pattern": "M-M-M*-M-M*-", "num_hidden_layers": 12}
    for k in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
              "moe_shared_expert_intermediate_size"):  # fmt: skip
        del dense[k]
    latent = {**_nano(), "moe_latent_size": 1024}
    for name, cfg in (("nano", _nano()), ("dense", dense), ("latent", latent)):
        a = architecture_from_config(_write(tmp_path, cfg, f"{name}.json"))
        s = serving_config(a, "h200")
        matmul = a.active_params - 2 * a.vocab_size * a.hidden_size
        assert s.linear_flops_per_token == pytest.approx(2 * matmul, rel=0.01), name
    d = architecture_from_config(_write(tmp_path, dense, "dense.json"))
    assert (d.n_layers, d.n_ffnless_layers, d.mean_ffn_width) == (7, 2, 1856 * 5 / 7)
    la = architecture_from_config(_write(tmp_path, latent, "latent.json"))
    nano = architecture_from_config(_write(tmp_path, _nano()))
    # latent experts: 128 experts of 2 x 1024 x 1856 and the two projections (2 x 2688 x 1024) per MoE layer
    assert la.expert_params == 23 * 128 * 2 * 1024 * 1856
    assert la.n_params - nano.n_params == 23 * (128 * 2 * (1024 - 2688) * 1856 + 2 * 2688 * 1024)


def test_mamba_state_in_the_hybrid_pool(tmp_path):
    a = architecture_from_config(_write(tmp_path, _nano()))
    s = serving_config(a, "h200")
    page_token = 2 * 2 * 128 * 2  # keys and values of 2 KV heads, bf16, one attention layer
    layer_state = 64 * 64 * 128 * 4 + (64 * 64 + 2 * 8 * 128) * 3 * 2  # fp32 SSM state, bf16 conv taps
    assert s.state_bytes == 23 * layer_state
    assert s.block_size == 16 * math.ceil(layer_state / (16 * page_token)) == 2096
    # groups of min(6, 23) = 6 layers: 1 attention group, 4 state groups
    assert (s.attention_groups, s.state_groups) == (1, 4)
    df = pd.DataFrame({"model": [str(tmp_path / "config.json")] * 2, "batch_size": [8, 8],
                       "input_len": [1000, 8000], "output_len": [24, 192], "gpu": ["h200"] * 2})  # fmt: skip
    f = model_features(df)
    assert np.allclose(f["attention_layer_share"], 6 / 29) and (f["state_tokens"] == 4 * 2096).all()
    # the FFN feature is the width averaged over the layers (6 of 29 have none)
    assert f["ffn_size"][0] == pytest.approx(a.ffn_size_active * 23 / 29)
    with pytest.raises(DataError, match="does not divide .* 8 linear-attention heads \\(n_groups\\)"):
        serving_config(a, "h200", tensor_parallel=16)


@pytest.mark.parametrize(
    "change, words",
    [
        (
            {"hybrid_override_pattern": "MEM?M*E"},
            "'hybrid_override_pattern' must be a string of the block letters",
        ),
        ({"num_hidden_layers": 50}, "'num_hidden_layers' is 50 but the block layout lists 52"),
        ({"hybrid_override_pattern": "MEMEME", "num_hidden_layers": 6}, "a hybrid needs both"),
        ({"hybrid_override_pattern": "M*EEE", "num_hidden_layers": 5}, "3 FFN blocks for 2 mixer blocks"),
        ({"layers_block_type": ["mamba"] * 52}, "disagree"),
        (
            {"hybrid_override_pattern": None, "layers_block_type": [{"a": 1}] * 52},
            "'layers_block_type' must list",
        ),
        ({"mlp_hidden_act": "silu"}, "'mlp_hidden_act'"),
        ({"mamba_num_heads": 60}, "not a multiple of 'n_groups'"),
        ({"use_conv_bias": False}, "'use_conv_bias'"),
        ({"mamba_ssm_cache_dtype": "int3"}, "'mamba_ssm_cache_dtype'"),
        ({"num_experts_per_tok": 200}, "key 'num_experts_per_tok' (200) exceeds 'n_routed_experts' (128)"),
        ({"mamba_d_state": 64}, "key 'mamba_d_state': state-space"),
        ({"ssm_state_size": 0}, "'ssm_state_size'"),
    ],
)
def test_inconsistent_configs_are_refused_naming_the_key(tmp_path, change, words):
    with pytest.raises(DataError) as err:
        architecture_from_config(_write(tmp_path, {**_nano(), **change}))
    msg = str(err.value)
    assert words in msg and "config.json" in msg and "\n" not in msg


def test_mamba_keys_and_latent_experts_outside_nemotron_h_are_refused(tmp_path):
    llama = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8,
             "intermediate_size": 1024, "vocab_size": 1000}  # fmt: skip
    with pytest.raises(DataError, match="key 'ssm_state_size': state-space"):
        architecture_from_config(_write(tmp_path, {**llama, "ssm_state_size": 128}))
    with pytest.raises(DataError, match="key 'moe_latent_size'"):
        architecture_from_config(_write(tmp_path, {**llama, "moe_latent_size": 128}))


@pytest.mark.parametrize("method", ["paper", "imai-ood-lr"])
def test_methods_that_price_kv_over_every_layer_refuse_a_mamba_hybrid(tmp_path, method):
    from slimlib.model.methods import make_model

    rows = pd.DataFrame({"model": [str(_write(tmp_path, _nano()))] * 4, "batch_size": [1, 2, 4, 8],
                         "input_len": 512, "output_len": 128, "gpu": "h200", "throughput_tok_s": [50.0, 95, 180, 330],
                         "e2e_s": [2.6, 2.7, 2.8, 3.1]})  # fmt: skip
    with pytest.raises(DataError, match="row 0: the model has linear-attention"):
        make_model(method, gpu="h200").fit(rows)
