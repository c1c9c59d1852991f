"""The scaled-down OPT family served (with random weights) in the CPU-engine campaign: OPT shapes divided by 8.

``opt-X-s8`` is OPT-X with depth, width, head count, FFN width and vocabulary divided by 8 (head width kept), so the
family keeps OPT's depth/width ratios and head widths; ``slim bench model opt-X --divide 8`` writes the servable
folder of the same shapes. There are no trained weights: vLLM fills them at random (``--load-format dummy``), so
measurements on these models are measurements of the engine on these shapes. bfloat16, as the CPU engine runs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ENGINE_MODEL_SPECS", "ENGINE_MODELS"]

#: OPT base model -> (hidden size, layers, heads) of the full model (facebook/opt-* config.json)
_OPT_SHAPES = {"opt-1.3b": (2048, 24, 32), "opt-2.7b": (2560, 32, 32), "opt-6.7b": (4096, 32, 32),
               "opt-13b": (5120, 40, 40)}  # fmt: skip
_DIVIDE = 8


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


#: smallest to largest; the campaign's model-transfer target is the last
ENGINE_MODELS = tuple(f"{m}-s{_DIVIDE}" for m in _OPT_SHAPES)
#: registry specs (name, id, aliases, config subset), in the layout of `slimlib.registry.architectures`
ENGINE_MODEL_SPECS: tuple[tuple[str, str, tuple[str, ...], dict[str, Any]], ...] = tuple(
    (f"{m}-s{_DIVIDE}", f"slim-engine/{m}-s{_DIVIDE}", (), _scaled(*shape))
    for m, shape in _OPT_SHAPES.items()
)
