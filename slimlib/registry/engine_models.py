"""The model families served (with random weights) in the CPU-engine campaign: scaled OPT and a Qwen3-style GQA family.

``opt-X-s8`` is OPT-X with depth, width, head count, FFN width and vocabulary divided by 8 (head width kept), so the
family keeps OPT's depth/width ratios and head widths; ``slim bench model opt-X --divide 8`` writes the servable
folder of the same shapes.

``qwen3s-hD`` (D = 512, 768, 1024) are small grouped-query-attention models in Qwen3's style, not a scaled published
model: the fields of Qwen3's ``config.json`` (e.g. Qwen/Qwen3-8B) that set the shapes are followed: ``head_dim`` 128
decoupled from the hidden size, ``num_key_value_heads`` 2 (fewer than ``num_attention_heads`` = D / 128), a SwiGLU
FFN (``hidden_act`` silu, ``intermediate_size`` = 3 D), RMSNorm with per-head q/k norms (``model_type`` qwen3),
``rope_theta`` 1e6, ``rms_norm_eps`` 1e-6, untied embeddings (``tie_word_embeddings`` false), bfloat16; 6 layers,
vocabulary 18992 (Qwen3's 151936 / 8) and ``max_position_embeddings`` 4096 (prompts to 2048 tokens).

There are no trained weights: vLLM fills them at random (``--load-format dummy``), so measurements on these models
are measurements of the engine on these shapes. bfloat16, as the CPU engine runs.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ENGINE_MODEL_SPECS",
    "ENGINE_MODELS",
    "GQA_ENGINE_MODELS",
    "ALL_ENGINE_MODELS",
    "ENGINE_MODEL_SOURCES",
]

#: OPT base model -> (hidden size, layers, heads) of the full model (facebook/opt-* config.json)
_OPT_SHAPES = {"opt-1.3b": (2048, 24, 32), "opt-2.7b": (2560, 32, 32), "opt-6.7b": (4096, 32, 32),
               "opt-13b": (5120, 40, 40)}  # fmt: skip
_DIVIDE = 8
#: the GQA family's hidden sizes (query heads = hidden / head_dim)
_GQA_HIDDEN = (512, 768, 1024)
_GQA_HEAD_DIM = 128
_GQA_KV_HEADS = 2
_GQA_LAYERS = 6
_QWEN3_VOCAB = 151936  # Qwen/Qwen3-8B config.json vocab_size
_GQA_WINDOW = 4096


def _scaled(d: int, layers: int, heads: int, k: int = _DIVIDE) -> dict[str, Any]:
    return {
        "model_type": "opt",
        "hidden_size": d // k,
        "num_hidden_layers": layers // k,
        "num_attention_heads": heads // k,
        "ffn_dim": 4 * d // k,
        "vocab_size": 50272 // k,
        "max_position_embeddings": 2048,
        "word_embed_proj_dim": d // k,
        "do_layer_norm_before": True,
        "torch_dtype": "bfloat16",
    }


def _qwen3_style(d: int) -> dict[str, Any]:
    """A Qwen3-style config of hidden size `d` (fields as in Qwen3's config.json)."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": d,
        "num_hidden_layers": _GQA_LAYERS,
        "num_attention_heads": d // _GQA_HEAD_DIM,
        "num_key_value_heads": _GQA_KV_HEADS,
        "head_dim": _GQA_HEAD_DIM,
        "intermediate_size": 3 * d,
        "hidden_act": "silu",
        "vocab_size": _QWEN3_VOCAB // _DIVIDE,
        "max_position_embeddings": _GQA_WINDOW,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "attention_bias": False,
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "torch_dtype": "bfloat16",
    }


#: the OPT family, smallest to largest; its model-transfer target is the last
ENGINE_MODELS = tuple(f"{m}-s{_DIVIDE}" for m in _OPT_SHAPES)
#: the Qwen3-style GQA family, smallest to largest
GQA_ENGINE_MODELS = tuple(f"qwen3s-h{d}" for d in _GQA_HIDDEN)
ALL_ENGINE_MODELS = ENGINE_MODELS + GQA_ENGINE_MODELS
#: registry specs (name, id, aliases, config subset), in the layout of `slimlib.registry.architectures`
ENGINE_MODEL_SPECS: tuple[tuple[str, str, tuple[str, ...], dict[str, Any]], ...] = tuple(
    (f"{m}-s{_DIVIDE}", f"slim-engine/{m}-s{_DIVIDE}", (), _scaled(*shape))
    for m, shape in _OPT_SHAPES.items()
) + tuple((f"qwen3s-h{d}", f"slim-engine/qwen3s-h{d}", (), _qwen3_style(d)) for d in _GQA_HIDDEN)
#: where each engine model's shapes come from (the registry's `source`)
ENGINE_MODEL_SOURCES = {
    **{m: "OPT shapes / 8, slimlib.registry.engine_models (random weights)" for m in ENGINE_MODELS},
    **{
        m: "Qwen3-style GQA shapes (Qwen3 config.json fields), slimlib.registry.engine_models (random weights)"
        for m in GQA_ENGINE_MODELS
    },
}
