"""Gemma-4: sliding layers and full layers with their own head width, KV heads and shared key/value projection,
a dense MLP beside the routed experts; parameters, KV bytes per kind and refusals."""

from __future__ import annotations

import pytest
from config_files import write_config as _write

from slimlib.errors import DataError
from slimlib.model.features import attention_width
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import architecture_from_config

TYPES = (["sliding_attention"] * 5 + ["full_attention"]) * 2


def _gemma4(moe: bool = True) -> dict:
    """gemma-4-26B-A4B's text_config shape keys (12 layers) in its multimodal wrapper."""
    text = {"model_type": "gemma4_text", "hidden_size": 2816, "num_hidden_layers": 12, "num_attention_heads": 16,
            "num_key_value_heads": 8, "num_global_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512,
            "attention_k_eq_v": True, "intermediate_size": 2112, "vocab_size": 262144, "sliding_window": 1024,
            "layer_types": TYPES, "enable_moe_block": moe, "num_experts": 128 if moe else None,
            "top_k_experts": 8 if moe else None, "moe_intermediate_size": 704 if moe else None,
            "hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0, "use_double_wide_mlp": False,
            "tie_word_embeddings": True, "max_position_embeddings": 262144, "dtype": "bfloat16"}  # fmt: skip
    return {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "text_config": text,
            "tie_word_embeddings": True}  # fmt: skip


def test_layer_kinds_and_parameters(tmp_path):
    a = architecture_from_config(_write(tmp_path, _gemma4()))
    assert (a.n_sliding_layers, a.sliding_window, a.head_dim, a.sliding_head_dim) == (10, 1024, 512, 256)
    assert (a.n_kv_heads, a.sliding_kv_heads, a.shared_kv_projection) == (2, 8, True)
    assert (a.n_experts, a.experts_per_token, a.n_shared_experts, a.shared_ffn_size) == (128, 8, 1, 2112)
    d, v = 2816, 262144
    sliding = d * 16 * 256 * 2 + d * 8 * 256 * 2 + 2 * 256  # q, o, k, v; q and k norms
    full = d * 16 * 512 * 2 + d * 2 * 512 + 2 * 512  # no value projection: the key's serves
    mlp, expert = 3 * d * 2112, 3 * d * 704
    layer = (
        4 * d + 1 + mlp + 3 * d + d * 128 + d + 128 + 128 * expert
    )  # norms, scalar, MLP, MoE norms, router
    total = v * d + d + 10 * sliding + 2 * full + 12 * layer
    assert a.n_params == total and a.active_params == total - 12 * 120 * expert
    # KV: the cache holds keys and values in every layer, at each kind's heads and width
    assert a.kv_values_per_token == 2 * 2 * 2 * 512 + 10 * 8 * 2 * 256
    assert attention_width(a) == 16 * (2 * 1024 + 10 * 512) / (2 * 12)


def test_kv_bytes_and_flops_per_kind(tmp_path):
    a = architecture_from_config(_write(tmp_path, _gemma4(moe=False)))
    s = serving_config(a, "h200", tensor_parallel=2)
    assert s.kv_bytes_full == 2 * 1 * 1024 * 2  # 2 global KV heads over 2 GPUs, key and value of 512, bf16
    assert s.kv_bytes_window == 10 * 4 * 512 * 2
    matmul = a.n_params - a.vocab_size * a.hidden_size  # the tied LM head counted once, in its own term
    assert s.linear_flops_per_token * 2 == pytest.approx(2 * matmul, rel=1e-3)


@pytest.mark.parametrize(
    "change, words",
    [
        ({"num_kv_shared_layers": 4}, "'num_kv_shared_layers' > 0"),
        ({"hidden_size_per_layer_input": 256}, "'hidden_size_per_layer_input'"),
        ({"use_double_wide_mlp": True}, "'use_double_wide_mlp' true"),
        ({"layer_types": ["full_attention"] * 12}, "has 0 sliding layers of 12"),
        ({"enable_moe_block": False}, "'num_experts' is set but 'enable_moe_block' is false"),
        ({"num_key_value_heads": 5}, "'num_key_value_heads' (5) does not divide the 16 query heads"),
        ({"top_k_experts": 200}, "key 'top_k_experts' (200) exceeds 'num_experts' (128)"),
    ],
)
def test_variants_not_read_are_refused_naming_the_key(tmp_path, change, words):
    cfg = _gemma4()
    cfg["text_config"].update(change)
    with pytest.raises(DataError) as err:
        architecture_from_config(_write(tmp_path, cfg))
    assert words in str(err.value) and "\n" not in str(err.value)
