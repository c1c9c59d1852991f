"""MiMo-V2-Flash: full and sliding-window layers with their own KV heads, value heads of their own width, sinks
on the sliding layers: exact parameters, KV bytes per kind, and refusals naming the key."""

from __future__ import annotations

import pytest
from config_files import write_config as _write

from slimlib.errors import DataError
from slimlib.model.features import attention_width
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import architecture_from_config

PATTERN = [0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0]


def _mimo() -> dict:
    """MiMo-V2-Flash's shape keys (its published config.json), on 12 layers."""
    return {"model_type": "mimo_v2_flash", "architectures": ["MiMoV2FlashForCausalLM"], "num_hidden_layers": 12,
            "hidden_size": 4096, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192,
            "v_head_dim": 128, "intermediate_size": 16384, "vocab_size": 152576, "max_position_embeddings": 262144,
            "sliding_window": 128, "sliding_window_size": 128, "attention_chunk_size": 128,
            "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
            "hybrid_layer_pattern": PATTERN, "moe_layer_freq": [0] + [1] * 11, "moe_intermediate_size": 2048,
            "n_routed_experts": 256, "n_shared_experts": None, "num_experts_per_tok": 8, "topk_method": "noaux_tc",
            "add_swa_attention_sink_bias": True, "add_full_attention_sink_bias": False, "attention_bias": False,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16"}  # fmt: skip


def test_layer_kinds_and_exact_parameters(tmp_path):
    a = architecture_from_config(_write(tmp_path, _mimo()))
    assert (a.n_sliding_layers, a.sliding_window, a.sliding_kv_heads, a.n_kv_heads) == (9, 128, 8, 4)
    assert (a.value_head_dim, a.n_dense_layers, a.n_moe_layers, a.attention_sinks) == (128, 1, 11, True)
    d, v = 4096, 152576
    full = d * 64 * 192 + d * 4 * (192 + 128) + 64 * 128 * d
    sliding = d * 64 * 192 + d * 8 * (192 + 128) + 64 * 128 * d + 64  # and one sink logit per head
    expert = 3 * d * 2048
    moe = d * 256 + 256 + 256 * expert  # router with its score-correction bias
    total = 2 * v * d + d + 3 * full + 9 * sliding + 12 * 2 * d + 3 * d * 16384 + 11 * moe
    assert a.n_params == total and a.active_params == total - 11 * 248 * expert
    assert a.kv_values_per_token == 3 * 4 * 320 + 9 * 8 * 320
    assert attention_width(a) == 64 * (192 + 128) / 2  # the heads' own FLOPs per pair, not the hidden size


def test_kv_bytes_per_kind(tmp_path):
    s = serving_config(architecture_from_config(_write(tmp_path, _mimo())), "h200", tensor_parallel=2)
    assert s.kv_bytes_full == 3 * 2 * (192 + 128) * 2  # 4 KV heads over 2 GPUs, bf16
    assert s.kv_bytes_window == 9 * 4 * (192 + 128) * 2  # 8 KV heads over 2 GPUs
    assert float(s.kv_bytes(1000)) == 1000 * s.kv_bytes_full + 128 * s.kv_bytes_window


@pytest.mark.parametrize(
    "change, words",
    [
        ({"hybrid_layer_pattern": [0] * 12}, "with both kinds present"),
        ({"hybrid_layer_pattern": [0, 2] * 6}, "'hybrid_layer_pattern' must flag"),
        ({"swa_head_dim": 128}, "'swa_head_dim' (128) differs"),
        ({"attention_chunk_size": 256}, "'attention_chunk_size' (256) differs from 'sliding_window'"),
        ({"moe_layer_freq": [0] * 12}, "'moe_layer_freq' must flag"),
        ({"n_shared_experts": 1}, "'n_shared_experts' > 0"),
        ({"v_head_dim": 0}, "'v_head_dim'"),
        ({"swa_num_key_value_heads": 7}, "'swa_num_key_value_heads' (7) does not divide the 64 query heads"),
    ],
)
def test_inconsistent_configs_are_refused_naming_the_key(tmp_path, change, words):
    with pytest.raises(DataError) as err:
        architecture_from_config(_write(tmp_path, {**_mimo(), **change}))
    assert words in str(err.value) and "\n" not in str(err.value)
