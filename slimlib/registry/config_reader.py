"""Reads a Hugging Face ``config.json`` (as a dict) into the fields of an `Architecture` (no network).

Styles (from ``model_type``, else ``architectures``): OPT, Phi-1/2, GPT-J, BLOOM, Falcon (`_read_classic`), and the
Llama lineage with its mixture-of-experts and latent-attention descendants (`_read_decoder`): Llama 2/3.x, Mistral,
Qwen2/2.5/3, MiMo, Granite, Gemma 1/2/3, Phi-3, Mixtral, Llama 4, Qwen3-MoE, DeepSeek-V2/V3/R1, Kimi-K2, gpt-oss,
MiniMax-M2 and Step-3.x-Flash; DeepSeek-V4 (`_read_deepseek_v4`: compressed attention, hyper-connections),
MiniMax-M3 (`_read_minimax_m3`: block-sparse attention with a K-only indexer) and the hybrid and heterogeneous styles have readers of their own (`_OWN_READERS`). Multimodal wrappers (Llama 4, Qwen3-VL, Kimi-K2.5, ...) are read from their
``text_config``: the language model that serves the tokens, as vLLM serves it text-only (``--language-model-only``,
or every ``--limit-mm-per-prompt`` modality 0, does not load the multimodal modules); the vision tower
(``vision_config``, a few hundred million parameters, loaded when images are served) is not read and not counted. Multi-token-prediction layers (``num_nextn_predict_layers``, ``num_mtp_modules``) are not counted:
vLLM serves them only with speculative decoding, which is off by default.

A feature the model cannot represent (`UNSUPPORTED`: Mamba / state-space layers, hybrid linear attention, DeepSeek
sparse attention with an indexer, per-layer heterogeneous blocks, ...) is refused in one line naming the file, the
key and the feature, as is a shape key (`STRUCTURE_KEYS`) that the config's style does not read: nothing is read as
a dense model it is not. An unknown ``model_type`` with the standard keys of a dense decoder (`STANDARD_KEYS`) and
no structure key is read as Llama-style with an `UnknownStyleWarning`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from slimlib.errors import DataError
from slimlib.registry.param_count import (
    CSA_RATIO,
    HCA_RATIO,
    attention_params,
    block_sparse_indexer_params,
    compressed_attention_params,
    compressor_params,
    count_decoder,
    count_parameters,
    ffn_params,
    gated_deltanet_params,
    hyper_connection_params,
    indexer_params,
    mamba2_params,
    mla_params,
    router_params,
    v4_indexer_params,
)

__all__ = [
    "STANDARD_KEYS",
    "STRUCTURE_KEYS",
    "TORCH_DTYPE_BYTES",
    "UNSUPPORTED",
    "UnknownStyleWarning",
    "quantization_from_hf_quant_config",
    "shapes_from_config",
]

#: a config's (and a kernel table's) dtype name -> bytes per element
TORCH_DTYPE_BYTES = {
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float32": 4,
    "fp32": 4,
    "float": 4,
}

#: Llama-lineage model_type -> family conventions (see `_read_decoder`); "style" of the classic ones
_DECODER_FAMILIES = (
    "llama", "mistral", "qwen2", "granite", "mixtral", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "mimo",
    "llama4_text", "qwen3_moe", "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "minimax_m2", "step3p7",
    "qwen3_vl_text", "qwen3_vl_moe_text", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_next", "deepseek_v32",
    "glm_moe_dsa",
)  # fmt: skip
_STYLE_BY_MODEL_TYPE = {
    **{t: "decoder" for t in _DECODER_FAMILIES},
    "nemotron_h": "mamba_hybrid",
    "nemotron-nas": "heterogeneous",
    "mimo_v2_flash": "per_kind_attention",
    "gemma4_text": "gemma4",
    "deepseek_v4": "deepseek_v4",
    "deepseek_ref": "deepseek_v4",
    "minimax_m3": "minimax_m3",
    "opt": "opt",
    "phi": "phi",
    "gptj": "gptj",
    "bloom": "bloom",
    "falcon": "falcon",
    "refinedwebmodel": "falcon",
    "refinedweb": "falcon",
}
#: the language model's model_type where the wrapper's text_config does not name one
_TEXT_MODEL_TYPE = {"llama4": "llama4_text", "qwen3_vl": "qwen3_vl_text", "qwen3_vl_moe": "qwen3_vl_moe_text",
                    "kimi_k25": "kimi_k2", "minimax_m3_vl": "minimax_m3", "qwen3_5": "qwen3_5_text",
                    "qwen3_5_moe": "qwen3_5_moe_text", "gemma4": "gemma4_text"}  # fmt: skip

_STYLE_BY_ARCHITECTURE = {
    "OPTForCausalLM": "opt",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "GraniteForCausalLM": "granite",
    "MixtralForCausalLM": "mixtral",
    "Qwen3ForCausalLM": "qwen3",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "Phi3ForCausalLM": "phi3",
    "PhiForCausalLM": "phi",
    "GPTJForCausalLM": "gptj",
    "BloomForCausalLM": "bloom",
    "FalconForCausalLM": "falcon",
    "RWForCausalLM": "falcon",
}

#: keys every dense decoder config of the Llama lineage has; an unknown model_type with all of them (and no
#: `STRUCTURE_KEYS`) is read as Llama-style, with a warning
STANDARD_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")

#: keys that change the shapes, with what they mean: a config holding one its style does not read is refused
STRUCTURE_KEYS = {
    "num_local_experts": "mixture-of-experts expert count",
    "num_experts": "mixture-of-experts expert count",
    "n_routed_experts": "mixture-of-experts expert count",
    "num_experts_per_tok": "mixture-of-experts routing (top-k)",
    "moe_intermediate_size": "mixture-of-experts expert width",
    "n_shared_experts": "shared experts",
    "shared_expert_intermediate_size": "shared experts",
    "shared_intermediate_size": "shared experts",
    "share_expert_dim": "shared experts",
    "first_k_dense_replace": "dense-then-MoE layer layout",
    "moe_layer_freq": "MoE layer layout",
    "decoder_sparse_step": "MoE layer layout",
    "mlp_only_layers": "MoE layer layout",
    "interleave_moe_layer_step": "interleaved MoE layer layout",
    "intermediate_size_mlp": "interleaved MoE layer layout",
    "kv_lora_rank": "multi-head latent attention (latent rank)",
    "q_lora_rank": "multi-head latent attention (query rank)",
    "qk_rope_head_dim": "multi-head latent attention (RoPE head width)",
    "qk_nope_head_dim": "multi-head latent attention",
    "v_head_dim": "value heads of their own width",
    "sliding_window": "sliding-window attention",
    "use_sliding_window": "sliding-window attention",
    "sliding_window_pattern": "sliding-window layer layout",
    "layer_types": "per-layer attention types",
    "attention_chunk_size": "chunked local attention",
    "no_rope_layers": "chunked local attention layout",
    "linear_num_value_heads": "hybrid linear attention (Gated DeltaNet)",
    "linear_num_key_heads": "hybrid linear attention (Gated DeltaNet)",
    "linear_key_head_dim": "hybrid linear attention (Gated DeltaNet)",
    "linear_value_head_dim": "hybrid linear attention (Gated DeltaNet)",
    "linear_conv_kernel_dim": "hybrid linear attention (Gated DeltaNet)",
    "full_attention_interval": "hybrid linear/full attention layout",
    "mamba_ssm_dtype": "recurrent-state precision",
    "attn_output_gate": "gated attention output",
    "index_topk": "DeepSeek sparse attention (lightning indexer)",
    "index_n_heads": "DeepSeek sparse attention (lightning indexer)",
    "index_head_dim": "DeepSeek sparse attention (lightning indexer)",
    "indexer_types": "DeepSeek sparse attention layout (layers with their own indexer)",
    "mlp_layer_types": "MoE layer layout",
    "index_topk_freq": "DeepSeek sparse attention layout (layers with their own indexer)",
    "index_skip_topk_offset": "DeepSeek sparse attention layout (layers with their own indexer)",
    "index_topk_pattern": "DeepSeek sparse attention layout (layers with their own indexer)",
    "moe_latent_size": "latent mixture of experts (experts at a reduced width)",
}

#: features no style represents, refused wherever they appear: (key, feature), checked in this order
UNSUPPORTED = (
    ("compress_ratios", "DeepSeek-V4 compressed sparse attention"),
    ("hc_mult", "hyper-connections (DeepSeek-V4)"),
    ("hybrid_override_pattern", "hybrid Mamba (state-space) layers"),
    ("layers_block_type", "hybrid Mamba (state-space) layers"),
    ("block_configs", "per-layer heterogeneous blocks (DeciLM / Nemotron-NAS)"),
    ("linear_attn_config", "hybrid linear attention (Kimi delta attention)"),
    ("sparse_attention_config", "block-sparse attention with an indexer"),
    ("hybrid_layer_pattern", "hybrid sliding/full layers with their own head counts"),
    ("global_head_dim", "full-attention layers with their own head width and KV heads"),
    ("hidden_size_per_layer_input", "per-layer input embeddings"),
    ("ssm_state_size", "state-space (Mamba) layers"),
    ("state_size", "state-space (Mamba) layers"),
    ("ssm_cfg", "state-space (Mamba) layers"),
    ("mamba_num_heads", "state-space (Mamba) layers"),
    ("mamba_d_ssm", "state-space (Mamba) layers"),
)
#: model_type values of Mamba hybrids read by `_read_mamba_hybrid`, and the keys of `UNSUPPORTED` they may hold
_MAMBA_HYBRID_TYPES = ("nemotron_h",)
_MAMBA_HYBRID_KEYS = ("hybrid_override_pattern", "layers_block_type", "ssm_state_size", "mamba_num_heads")
#: tokens per chunk of vLLM's Mamba-2 chunked scan that the model prices (``chunk_size`` of every Nemotron-H and
#: Nemotron 3 config published; `slimlib.model.equations.ssd_prefill_flops`): a config with another is refused
MAMBA2_CHUNK = 128
#: the mamba_* / ssm_* keys a Nemotron-H reading reads (any other one is refused as an unread state-space key)
_MAMBA_READ_KEYS = ("mamba_num_heads", "mamba_head_dim", "mamba_ssm_cache_dtype", "mamba_proj_bias", "mamba_hidden_act",
                    "ssm_state_size")  # fmt: skip
#: model_type -> the keys of `UNSUPPORTED` its own reader reads
_OWN_KEYS = {
    **{t: _MAMBA_HYBRID_KEYS for t in _MAMBA_HYBRID_TYPES},
    "nemotron-nas": ("block_configs",),
    "mimo_v2_flash": ("hybrid_layer_pattern",),
    "gemma4_text": ("global_head_dim",),
    "deepseek_v4": ("compress_ratios", "hc_mult"),
    "deepseek_ref": ("compress_ratios", "hc_mult"),  # SGLang's name for the same layout (sgl-project's FP8)
    "minimax_m3": ("sparse_attention_config",),
}
#: the sub-keys of a Nemotron-NAS block whose feature SLIM does not model (refused when set)
_NAS_ATTENTION_FEATURES = ("replace_with_linear", "sparsify", "window_length", "num_sink_tokens", "unshifted_sink",
                           "use_prefill_window_in_sink_attention")  # fmt: skip
_NAS_FFN_FEATURES = ("replace_with_linear", "sparsify")
#: Nemotron-H block letters of ``hybrid_override_pattern`` -> the ``layers_block_type`` names
_BLOCK_LETTERS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
#: model_type values of state-space models (refused even without their keys)
_SSM_TYPES = ("mamba", "mamba2", "falcon_mamba", "rwkv", "rwkv5", "rwkv6", "xlstm")
_LAYER_TYPES = ("full_attention", "sliding_attention")


def _present(value: Any) -> bool:
    """A key's value that says something: not null, false, 0 or empty."""
    return value is not None and value is not False and value != 0 and value != [] and value != {}


#: the most a whole-number key may hold (no shape, count or length of a model comes near it): a bound that keeps a
#: mistaken value from reaching the arithmetic
MAX_INTEGER = 10**12
#: tighter bounds of the size keys: about 80x the most layers (126), 60x the widest hidden size (16,384) and 38x
#: the largest vocabulary (262,144) of the 117 published configs in the data mirror
MAX_SIZE = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers"), 10_000),
    **dict.fromkeys(("hidden_size", "n_embd", "n_embed", "d_model"), 1_000_000),
    **dict.fromkeys(("vocab_size", "padded_vocab_size"), 10_000_000),
}


class _Keys:
    """Keyed access to a config dict whose errors name the file and the key; records the keys read."""

    def __init__(self, data: dict[str, Any], where: str, style: str) -> None:
        self.data = data
        self.where = where
        self.style = style
        self.read: set[str] = set()

    def get(self, *keys: str, default: Any = None) -> Any:
        self.read.update(keys)
        for k in keys:
            if self.data.get(k) is not None:
                return self.data[k]
        return default

    def require(self, *keys: str) -> Any:
        value = self.get(*keys)
        if value is None:
            alt = f" (or {', '.join(repr(k) for k in keys[1:])})" if len(keys) > 1 else ""
            raise DataError(
                f"{self.where}: missing key {keys[0]!r}{alt}, needed for a {self.style}-style config; "
                "add it with the value of the model's Hugging Face config.json"
            )
        return value

    def found(self, *keys: str) -> str:
        """The first of `keys` the config sets (not null), else the first: the key a message names."""
        return next((k for k in keys if self.data.get(k) is not None), keys[0])

    def integer(self, *keys: str, default: int | None = None) -> int:
        """A non-negative whole number at most `MAX_INTEGER` (the lower `MAX_SIZE` of the key, where it has one);
        NaN, infinity, a bool, a fraction or a value above the bound is refused, naming the key."""
        value = self.require(*keys) if default is None else self.get(*keys, default=default)
        key = self.found(*keys)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (isinstance(value, float) and not math.isfinite(value))
            or int(value) != value
            or value < 0
        ):
            raise DataError(f"{self.where}: key {key!r} must be a non-negative integer, got {value!r}")
        limit = min(MAX_SIZE.get(k, MAX_INTEGER) for k in keys)
        if value > limit:
            raise DataError(f"{self.where}: key {key!r} is {int(value)}, above the {limit:,} SLIM reads for it; "
                            "fix the config's value")  # fmt: skip
        return int(value)

    def positive(self, *keys: str, default: int | None = None) -> int:
        """`integer`, and above 0: a count or width of 0 is refused, naming the key."""
        value = self.integer(*keys, default=default)
        if value == 0:
            raise DataError(f"{self.where}: key {self.found(*keys)!r} must be a positive integer, got 0")
        return value

    def optional_positive(self, key: str) -> int:
        """`positive` where the key is set, 0 where it is absent or null (the feature is off): a 0 is refused,
        as it is no size of the feature (null, not 0, says "none")."""
        if self.get(key) is None:
            return 0
        value = self.integer(key)
        if value == 0:
            raise DataError(f"{self.where}: key {key!r} is 0, which is no valid size; set it to null (or leave it "
                            "out) where the model has no such feature")  # fmt: skip
        return value

    def int_list(self, key: str, length: int) -> list[int]:
        """A per-layer list of integers (0/1 flags, indices) of `length` entries, or a DataError naming the key."""
        value = self.get(key, default=[])
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise DataError(f"{self.where}: key {key!r} must be a list of integers, got {value!r}")
        if length and len(value) != length:
            raise DataError(f"{self.where}: key {key!r} has {len(value)} entries for {length} layers")
        return list(value)

    def unread_structure(self) -> None:
        """DataError for a shape key (`STRUCTURE_KEYS`) present in the config that the reading did not use."""
        for key, what in STRUCTURE_KEYS.items():
            if key not in self.read and _present(self.data.get(key)):
                raise DataError(
                    f"{self.where}: key {key!r} ({what}) is not part of a {self.style}-style config and SLIM "
                    "does not read it; this model cannot be read (remove the key only if the model does not have "
                    "that feature)"
                )


class UnknownStyleWarning(UserWarning):
    """A config.json of an unknown model_type read as a Llama-style decoder from its standard keys."""


def _refuse_unsupported(data: dict[str, Any], where: str) -> None:
    """DataError naming the first key of a feature no style represents (`UNSUPPORTED`, SSM model types, layer
    types other than full and sliding attention, Gated DeltaNet's linear attention with its head keys and DeepSeek
    sparse attention with its indexer keys)."""
    model_type = str(data.get("model_type") or "").lower()
    if model_type in _SSM_TYPES or "mamba" in model_type:
        raise DataError(
            f"{where}: model_type {data.get('model_type')!r} is a state-space (Mamba) model; SLIM models "
            "attention decoders only"
        )
    own = _OWN_KEYS.get(model_type, ())
    for key, feature in UNSUPPORTED:
        if key not in own and _present(data.get(key)):
            raise DataError(
                f"{where}: key {key!r}: {feature}, which SLIM cannot represent; this model is refused"
            )
    layer_types = data.get("layer_types")
    if isinstance(layer_types, list):
        known = set(_LAYER_TYPES)
        if _present(data.get("linear_num_value_heads")):
            known.add("linear_attention")
        if _present(data.get("index_topk")):
            known.add("deepseek_sparse_attention")
        other = sorted({str(t) for t in layer_types} - set(known))
        if other:
            raise DataError(
                f"{where}: key 'layer_types' has {', '.join(repr(t) for t in other)} layers (hybrid "
                f"{'linear attention' if any('linear' in t for t in other) else 'layers'}), which SLIM cannot "
                "represent: it models full and sliding-window attention layers only"
            )
    for key in data:
        if (
            key.startswith(("mamba_", "ssm_"))
            and key not in STRUCTURE_KEYS
            and not (model_type in _MAMBA_HYBRID_TYPES and key in _MAMBA_READ_KEYS)
            and _present(data[key])
        ):
            raise DataError(
                f"{where}: key {key!r}: state-space (Mamba) layers, which SLIM cannot represent; this model is "
                "refused"
            )


def _detect_style(data: dict[str, Any], where: str) -> tuple[str, str]:
    """(style, model_type); an unknown model_type with `STANDARD_KEYS` and no structure key is read as Llama."""
    model_type = str(data.get("model_type") or "").lower()
    if model_type in _STYLE_BY_MODEL_TYPE:
        style = _STYLE_BY_MODEL_TYPE[model_type]
        return style, model_type if style in ("decoder", *_OWN_READERS) else style
    for arch in data.get("architectures") or []:
        if arch in _STYLE_BY_ARCHITECTURE:
            family = _STYLE_BY_ARCHITECTURE[arch]
            style = _STYLE_BY_MODEL_TYPE[family]
            return style, family if style == "decoder" else style
    what = f"model_type {data.get('model_type')!r}" if data.get("model_type") else "no 'model_type'"
    missing = [k for k in STANDARD_KEYS if data.get(k) is None]
    if not missing:
        odd = [k for k in STRUCTURE_KEYS if _present(data.get(k))]
        if odd:
            raise DataError(
                f"{where}: {what} is not a known style and its key {odd[0]!r} ({STRUCTURE_KEYS[odd[0]]}) is "
                "not understood for it; SLIM refuses it rather than read it as a dense Llama-style decoder"
            )
        warnings.warn(
            f"{where}: {what} is not a known style; read as a Llama-style decoder (gated FFN, RMSNorm, no biases "
            "unless attention_bias/mlp_bias say so) from its standard keys: check n_params in `slim models`",
            UnknownStyleWarning,
            stacklevel=5,
        )
        return "decoder", model_type or "llama"
    known = ", ".join(sorted(_STYLE_BY_MODEL_TYPE))
    raise DataError(
        f"{where}: {what} and architectures {data.get('architectures')!r} are not a supported style, and the "
        f"config lacks the standard key(s) {', '.join(missing)} a dense decoder is read from; supported "
        f"model_type values: {known}"
    )


def _dtype_bytes(c: _Keys) -> int:
    dtype = c.get("torch_dtype", "dtype", default="float16")
    key = str(dtype).lower().removeprefix("torch.")
    if key not in TORCH_DTYPE_BYTES:
        raise DataError(
            f"{c.where}: torch_dtype {dtype!r} is not one of {', '.join(sorted(TORCH_DTYPE_BYTES))}; "
            "set it to the dtype the model is served in"
        )
    return TORCH_DTYPE_BYTES[key]


def _head_dim(c: _Keys, hidden: int, heads: int, explicit: int | None = None) -> int:
    if explicit is not None:
        return explicit
    if heads == 0 or hidden % heads:
        raise DataError(f"{c.where}: hidden size {hidden} is not divisible by {heads} heads; add 'head_dim'")
    return hidden // heads


#: per-family conventions of `_read_decoder`: tied-embedding default (the transformers config class's), norms per
#: layer, q/k/v biases always on, q/k norms ("head": width d_h each; "minimax": per_layer / per_head by the config),
#: sliding-window layout ("qwen": ``use_sliding_window`` from ``max_window_layers`` on; "gemma2": every other layer;
#: "gemma3": all but every ``sliding_window_pattern``-th; "chunked": Llama 4's chunked local attention), the MoE
#: layout (see `_moe_layers`), latent attention, attention sinks, Gated DeltaNet layers ("linear", `_linear_layers`)
#: and the full-attention layers' output gate
_CONVENTIONS: dict[str, dict[str, Any]] = {
    "qwen2": {"qkv_bias": True, "window": "qwen"},
    "mimo": {"qkv_bias": True, "window": "qwen"},
    "qwen3": {"qk_norm": "head", "window": "qwen"},
    "qwen3_vl_text": {"qk_norm": "head"},
    "qwen3_moe": {"qk_norm": "head", "window": "qwen", "moe": "qwen"},
    "qwen3_vl_moe_text": {"qk_norm": "head", "moe": "qwen"},
    "qwen3_5_text": {"qk_norm": "head", "linear": True, "output_gate": True},
    "qwen3_5_moe_text": {"qk_norm": "head", "linear": True, "output_gate": True, "moe": "qwen_shared"},
    "qwen3_next": {"qk_norm": "head", "linear": True, "output_gate": True, "moe": "qwen_shared"},
    "gemma": {"tied": True},
    "gemma2": {"tied": True, "norms": 4, "window": "gemma2"},  # input, post-attention, pre-/post-feedforward
    "gemma3_text": {"tied": True, "norms": 4, "qk_norm": "head", "window": "gemma3"},
    "mixtral": {"moe": "all"},
    "minimax_m2": {"moe": "all", "qk_norm": "minimax", "router_bias": "use_routing_bias"},
    "gpt_oss": {"moe": "all", "sinks": True, "expert_bias": True, "router_bias": True},
    "llama4_text": {"moe": "llama4", "window": "chunked"},
    "deepseek_v2": {"moe": "deepseek", "mla": True, "router_bias": "noaux_tc"},
    "deepseek_v3": {"moe": "deepseek", "mla": True, "router_bias": "noaux_tc"},
    "deepseek_v32": {"moe": "deepseek", "mla": True, "router_bias": "noaux_tc", "sparse": True},
    "glm_moe_dsa": {"moe": "deepseek", "mla": True, "router_bias": "noaux_tc", "sparse": True},
    "kimi_k2": {"moe": "deepseek", "mla": True, "router_bias": "noaux_tc"},
    "step3p7": {"moe": "step", "router_bias": "use_moe_router_bias"},
}


#: keys that give the longest sequence a model takes
POSITION_KEYS = ("max_position_embeddings", "n_positions", "seq_length")
#: the most routed experts a config may declare: 18x the most of the 117 published configs in the data mirror
#: (896, Kimi-K3); more is refused as a mistake
MAX_EXPERTS = 16384


def _moe_layers(c: _Keys, layout: str, layers: int) -> tuple[list[bool], dict[str, Any]]:
    """Which layers are MoE, and the expert shapes: (flags, {n_experts, top_k, width, dense_width, n_shared,
    shared_width, shared_gate}): routed experts of `width`, dense layers of `dense_width`, `n_shared` shared experts
    of `shared_width` (behind a one-output gate projection where `shared_gate`)."""
    shared_gate = False
    if layout == "all":  # Mixtral, MiniMax-M2, gpt-oss: every layer, experts of width intermediate_size
        keys = (
            "num_local_experts",
            "intermediate_size",
            "intermediate_size",
        )  # experts, their width, dense width
        n_exp, width = c.integer(keys[0]), c.positive(keys[1])
        flags, dense_width, n_shared, shared = [True] * layers, width, 0, width
        if c.integer("shared_intermediate_size", default=0):
            raise DataError(f"{c.where}: key 'shared_intermediate_size' > 0 (shared experts) is not read for a "
                            f"{c.style} config; this model is refused")  # fmt: skip
    elif layout in ("qwen", "qwen_shared"):
        # Qwen3-MoE: layer i is MoE unless in mlp_only_layers, every decoder_sparse_step-th; Qwen3.5 / Qwen3-Next
        # ("qwen_shared") add one shared expert of shared_expert_intermediate_size behind a scalar sigmoid gate
        keys = ("num_experts", "moe_intermediate_size", "intermediate_size")
        n_exp, width = c.integer(keys[0]), c.positive(keys[1])
        step, only = c.positive("decoder_sparse_step", default=1), set(c.int_list("mlp_only_layers", 0))
        flags = [i not in only and (i + 1) % step == 0 for i in range(layers)]
        dense_width, n_shared, shared = c.integer("intermediate_size", default=0), 0, width
        if layout == "qwen_shared":
            shared = c.integer("shared_expert_intermediate_size", default=0)
            n_shared, shared_gate = (1, True) if shared else (0, False)
        elif c.integer("shared_expert_intermediate_size", default=0):
            raise DataError(f"{c.where}: key 'shared_expert_intermediate_size' > 0 (a gated shared expert) is not "
                            "read for a qwen3_moe config; this model is refused")  # fmt: skip
    elif layout == "llama4":  # Llama 4: every interleave_moe_layer_step-th layer, one shared expert beside
        keys = ("num_local_experts", "intermediate_size", "intermediate_size_mlp")
        n_exp, width = c.integer(keys[0]), c.positive(keys[1])
        step = c.positive("interleave_moe_layer_step", default=1)
        flags = [(i + 1) % step == 0 for i in range(layers)]
        dense_width, n_shared, shared = c.integer("intermediate_size_mlp"), 1, width
    elif layout == "deepseek":  # DeepSeek-V2/V3, Kimi-K2: dense first_k_dense_replace layers, then MoE
        keys = ("n_routed_experts", "moe_intermediate_size", "intermediate_size")
        n_exp, width = c.integer(keys[0]), c.positive(keys[1])
        alias = c.get("num_experts")  # a copy some checkpoints carry (NVIDIA's GLM-5.2): it must agree
        if alias is not None and alias != n_exp:
            raise DataError(
                f"{c.where}: key 'num_experts' ({alias}) differs from 'n_routed_experts' ({n_exp})"
            )
        first, freq = c.integer("first_k_dense_replace", default=0), c.positive("moe_layer_freq", default=1)
        flags = [i >= first and i % freq == 0 for i in range(layers)]
        given = c.get("mlp_layer_types")  # GLM-5.2's spelled-out layout: it must agree
        if given is not None and given != ["sparse" if f else "dense" for f in flags]:
            raise DataError(f"{c.where}: key 'mlp_layer_types' does not match 'first_k_dense_replace' {first} and "
                            f"'moe_layer_freq' {freq}; fix either")  # fmt: skip
        dense_width, shared = c.integer("intermediate_size"), width
        n_shared = c.integer("n_shared_experts", default=0)
    else:  # step: Step-3.x-Flash: dense first_k_dense_replace layers, shared experts of share_expert_dim
        keys = ("num_experts", "moe_intermediate_size", "intermediate_size")
        n_exp, width = c.integer(keys[0]), c.positive(keys[1])
        first = c.integer("first_k_dense_replace", default=0)
        flags = [i >= first for i in range(layers)]
        n_shared = c.integer("n_shared_experts", default=0)
        dense_width, shared = c.integer("intermediate_size"), c.integer("share_expert_dim", default=width)
    top_k = c.integer("num_experts_per_tok")
    if not 2 <= n_exp <= MAX_EXPERTS:
        raise DataError(f"{c.where}: key {keys[0]!r} is {n_exp}: a mixture of experts routes among 2 to "
                        f"{MAX_EXPERTS} experts; a dense model's config has no expert keys")  # fmt: skip
    if not 1 <= top_k <= n_exp:
        raise DataError(f"{c.where}: key 'num_experts_per_tok' is {top_k}: a token is routed to 1 to {n_exp} "
                        f"experts ({keys[0]!r})")  # fmt: skip
    _expert_groups(c, keys[0], n_exp, top_k)
    if not any(flags):
        raise DataError(f"{c.where}: no layer of the {layers} is a mixture of experts (see "
                        "'first_k_dense_replace', 'mlp_only_layers' and the MoE layer step); refused")  # fmt: skip
    if dense_width == 0 and not all(flags):
        raise DataError(f"{c.where}: key {keys[-1]!r} (the dense layers' FFN width) must be a positive integer, "
                        "got 0")  # fmt: skip
    shapes = dict(n_experts=n_exp, top_k=top_k, width=width, dense_width=dense_width, n_shared=n_shared,
                  shared_width=shared, shared_gate=shared_gate)  # fmt: skip
    return flags, shapes


def _expert_groups(c: _Keys, experts_key: str, n_exp: int, top_k: int) -> None:
    """Grouped routing (``n_group`` groups of experts, the best ``topk_group`` of them searched, as vLLM's
    grouped top-k): the groups must split the experts evenly and hold the top-k; absent or null is one group."""
    if c.get("n_group") is None or c.get("topk_group") in (None, 0):
        groups = c.positive("n_group", default=1)
        best = groups  # one group, or every group searched
    else:
        groups, best = c.positive("n_group"), c.positive("topk_group")
    if best > groups:
        raise DataError(f"{c.where}: key 'topk_group' ({best}) exceeds 'n_group' ({groups}); a token searches at "
                        "most every group: lower 'topk_group' or raise 'n_group'")  # fmt: skip
    if n_exp % groups:
        raise DataError(f"{c.where}: key 'n_group' ({groups}) does not divide {experts_key!r} ({n_exp}); the "
                        "expert groups must be of one size: fix either key")  # fmt: skip
    if top_k > best * (n_exp // groups):
        raise DataError(f"{c.where}: key 'num_experts_per_tok' ({top_k}) exceeds the {best * (n_exp // groups)} "
                        f"experts of the 'topk_group' ({best}) groups searched; fix either key")  # fmt: skip


def _sliding_layers(c: _Keys, window_rule: str, layers: int) -> tuple[int, int]:
    """(window, layers attending to the last `window` tokens only); (0, 0) for full attention everywhere."""
    window = c.optional_positive("sliding_window")
    layer_types = c.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != layers:
            raise DataError(
                f"{c.where}: key 'layer_types' must list one type for each of the {layers} layers"
            )
        n = sum(t == "sliding_attention" for t in layer_types)
    elif window_rule == "chunked":  # Llama 4: RoPE layers attend within chunks of attention_chunk_size tokens
        window = c.optional_positive("attention_chunk_size")
        given = c.get(
            "no_rope_layers"
        )  # 1: a RoPE (chunked) layer; default: every 4th layer is global (NoPE)
        rope = (
            c.int_list("no_rope_layers", layers) if given else [int((i + 1) % 4 != 0) for i in range(layers)]
        )
        n = sum(rope) if window else 0
    elif window_rule == "qwen":  # transformers' Qwen2/Qwen3 configs: sliding from max_window_layers on
        use = bool(c.get("use_sliding_window", default=False))
        n = layers - min(c.integer("max_window_layers", default=layers), layers) if use else 0
    elif window_rule == "gemma2":
        n = layers // 2 if window else 0  # layers 0, 2, 4, ...
    elif window_rule == "gemma3":
        pattern = c.integer("sliding_window_pattern", default=6)
        n = sum(1 for i in range(layers) if pattern and (i + 1) % pattern) if window else 0
    else:  # one window for every layer (Mistral, Phi-3), as vLLM applies a config's sliding_window
        n = layers if window else 0
    if n and not window:
        raise DataError(f"{c.where}: {n} sliding-window layers but no positive 'sliding_window'")
    return (window, n) if n and window else (0, 0)


def _state_bytes(c: _Keys, key: str, model_bytes: int) -> int:
    """Bytes of one recurrent-state element: the config's `key` dtype, else the model's (vLLM's "auto")."""
    dtype = c.get(key)
    name = str(dtype).lower().removeprefix("torch.") if dtype is not None else ""
    if name and name not in TORCH_DTYPE_BYTES:
        raise DataError(
            f"{c.where}: key {key!r} is {dtype!r}, not one of {', '.join(sorted(TORCH_DTYPE_BYTES))}"
        )
    return TORCH_DTYPE_BYTES[name] if name else model_bytes


def _linear_layers(c: _Keys, layers: int, model_bytes: int) -> dict[str, Any]:
    """Gated DeltaNet layers of a hybrid (Qwen3.5 / Qwen3.6 / Qwen3-Next): which layers are linear attention
    (``layer_types``, else all but every ``full_attention_interval``-th), their head shapes and the recurrent
    state's bytes per element (``mamba_ssm_dtype``; absent: the model's dtype, as vLLM's "auto" cache dtype)."""
    types, interval = c.get("layer_types"), c.get("full_attention_interval")
    if interval is not None:
        interval = c.positive("full_attention_interval")
        pattern = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(layers)]
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise DataError(
                f"{c.where}: key 'layer_types' must list one type for each of the {layers} layers"
            )
        if interval is not None and types != pattern:
            raise DataError(f"{c.where}: key 'layer_types' does not match 'full_attention_interval' {interval} "
                            "(every interval-th layer full attention, the others linear); fix either key")  # fmt: skip
    else:
        types = pattern if interval is not None else c.require("layer_types")
    n_linear = sum(t == "linear_attention" for t in types)
    if not 0 < n_linear < layers:
        raise DataError(
            f"{c.where}: {n_linear} of the {layers} layers are linear attention; a hybrid needs both linear and "
            "full-attention layers (see 'layer_types' or 'full_attention_interval')"
        )
    hk, hv = c.positive("linear_num_key_heads"), c.positive("linear_num_value_heads")
    if hv % hk:
        raise DataError(
            f"{c.where}: key 'linear_num_value_heads' ({hv}) is not a multiple of 'linear_num_key_heads' ({hk})"
        )
    return dict(n_linear_layers=n_linear, linear_kind="gated_deltanet", linear_key_heads=hk, linear_value_heads=hv,
                linear_key_head_dim=c.positive("linear_key_head_dim"),
                linear_value_head_dim=c.positive("linear_value_head_dim"),
                linear_conv_kernel=c.positive("linear_conv_kernel_dim"),
                state_bytes=_state_bytes(c, "mamba_ssm_dtype", model_bytes))  # fmt: skip


def _indexers(c: _Keys, layers: int) -> dict[str, Any]:
    """DeepSeek sparse attention's shapes: the indexer's heads and width, the tokens each query reads, and the layers
    with an indexer of their own (``indexer_types`` "full"; "shared" layers reuse the previous selection)."""
    kinds = c.get("layer_types")
    if kinds is not None and set(kinds) != {"deepseek_sparse_attention"}:
        raise DataError(f"{c.where}: key 'layer_types' mixes {sorted(set(kinds))}: a sparse-attention model is read "
                        "with every layer 'deepseek_sparse_attention'; refused")  # fmt: skip
    # vLLM's schedule: layer i runs its own indexer where max(i - offset + 1, 0) % freq == 0, else shares the last
    if c.get("index_topk_pattern") is not None:
        raise DataError(
            f"{c.where}: key 'index_topk_pattern' (an indexer schedule of its own) is not read; refused"
        )
    freq, offset = c.positive("index_topk_freq", default=1), c.integer("index_skip_topk_offset", default=0)
    schedule = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(layers)]
    types = c.get("indexer_types")
    if types is None:
        types = schedule
    elif not isinstance(types, list) or len(types) != layers or not set(types) <= {"full", "shared"}:
        raise DataError(f"{c.where}: key 'indexer_types' must list 'full' or 'shared' for each of the {layers} "
                        "layers")  # fmt: skip
    elif c.data.get("index_topk_freq") is not None and types != schedule:
        raise DataError(f"{c.where}: key 'indexer_types' does not match 'index_topk_freq' {freq} and "
                        f"'index_skip_topk_offset' {offset}; fix either")  # fmt: skip
    if types[0] != "full":
        raise DataError(f"{c.where}: key 'indexer_types': the first layer has no earlier selection to share")
    n = types.count("full")
    return dict(n_indexer_layers=n, index_heads=c.positive("index_n_heads"),
                index_head_dim=c.positive("index_head_dim"), index_topk=c.positive("index_topk"))  # fmt: skip


def _read_decoder(c: _Keys, family: str) -> dict[str, Any]:
    """Fields of a Llama-lineage decoder (dense, MoE, MLA) and its exact parameter counts (`count_decoder`)."""
    conv = _CONVENTIONS.get(family, {})
    d, layers = c.positive("hidden_size"), c.positive("num_hidden_layers")
    heads, vocab = c.positive("num_attention_heads"), c.positive("vocab_size")
    kv = c.integer("num_key_value_heads", default=heads)
    indexers = 0
    kw: dict[str, Any] = dict(n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=kv, ffn_kind="gated",
                              vocab_size=vocab, max_position=c.integer("max_position_embeddings", default=0))  # fmt: skip
    if conv.get("mla"):  # multi-head latent attention: the KV heads are the query heads, over the latent
        mla = dict(q_lora_rank=c.optional_positive("q_lora_rank"), kv_lora_rank=c.positive("kv_lora_rank"),
                   qk_nope_head_dim=c.positive("qk_nope_head_dim"), qk_rope_head_dim=c.positive("qk_rope_head_dim"),
                   v_head_dim=c.positive("v_head_dim"))  # fmt: skip
        attention = mla_params(d, heads, **mla)
        kw.update(mla, n_kv_heads=heads, head_dim=mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"])
        if conv.get("sparse"):  # the lightning indexer beside the latent attention
            sparse = _indexers(c, layers)
            if not mla["q_lora_rank"]:
                raise DataError(
                    f"{c.where}: key 'q_lora_rank' is null: the lightning indexer reads the query latent"
                )
            indexers = sparse["n_indexer_layers"] * indexer_params(
                d, mla["q_lora_rank"], sparse["index_heads"], sparse["index_head_dim"])  # fmt: skip
            kw.update(sparse)
        if bool(c.get("attention_bias", default=False)):
            raise DataError(f"{c.where}: key 'attention_bias' true is not read for latent attention; refused")
    else:
        hd = _head_dim(c, d, heads, c.positive("head_dim") if c.get("head_dim") is not None else None)
        attn_bias = bool(c.get("attention_bias", default=False))
        qk = conv.get("qk_norm")
        if qk == "minimax":
            on, kind = bool(c.get("use_qk_norm", default=False)), c.get("qk_norm_type", default="per_layer")
            qk_norm = ((heads + kv) * hd if kind == "per_layer" else 2 * hd) if on else 0
        else:
            c.get("use_qk_norm")  # Llama 4: an L2 norm without weights
            qk_norm = 2 * hd if qk == "head" else 0
        attention = attention_params(d, heads, kv, hd, qkv_bias=attn_bias or bool(conv.get("qkv_bias")),
                                     out_bias=attn_bias and not conv.get("qkv_bias"), qk_norm=qk_norm,
                                     sinks=bool(conv.get("sinks")))  # fmt: skip
        gate = bool(c.get("attn_output_gate", default=conv.get("output_gate", False)))
        if gate and not conv.get("output_gate"):
            raise DataError(f"{c.where}: key 'attn_output_gate' is not read for a {family} config; refused")
        attention += d * heads * hd if gate else 0  # the gate's half of the doubled query projection
        kw.update(head_dim=hd, attention_sinks=bool(conv.get("sinks")), attn_output_gate=gate)
    window, n_sliding = _sliding_layers(c, conv.get("window", ""), layers)
    kw.update(sliding_window=window, n_sliding_layers=n_sliding)
    linear: dict[str, Any] = {"n_linear_layers": 0, "linear_attention": 0, "indexers": indexers}
    if conv.get("linear"):
        if n_sliding:
            raise DataError(
                f"{c.where}: sliding-window and linear-attention layers together are not read; refused"
            )
        shapes = _linear_layers(c, layers, _dtype_bytes(c))
        kw.update(shapes)
        linear |= {"n_linear_layers": shapes["n_linear_layers"], "linear_attention": gated_deltanet_params(
            d, shapes["linear_key_heads"], shapes["linear_value_heads"], shapes["linear_key_head_dim"],
            shapes["linear_value_head_dim"], shapes["linear_conv_kernel"])}  # fmt: skip
    elif "linear_attention" in (c.get("layer_types") or []):
        raise DataError(f"{c.where}: key 'layer_types' has 'linear_attention' layers, which a {family} config "
                        "does not have; refused")  # fmt: skip

    mlp_bias = bool(c.get("mlp_bias", default=False))
    tied = bool(c.get("tie_word_embeddings", default=conv.get("tied", False)))
    common: dict[str, Any] = dict(n_layers=layers, hidden_size=d, vocab_size=vocab, tied_embeddings=tied, attention=attention,
                  norms_per_layer=conv.get("norms", 2), **linear)  # fmt: skip
    if conv.get("moe"):
        flags, m = _moe_layers(c, conv["moe"], layers)
        rb = conv.get(
            "router_bias"
        )  # a learned router bias, or the e_score_correction_bias of noaux_tc routing
        if rb == "noaux_tc":
            router_bias = c.get("topk_method") == "noaux_tc"
        else:
            router_bias = bool(c.get(rb, default=False)) if isinstance(rb, str) else bool(rb)
        expert = ffn_params(d, m["width"], "gated", bool(conv.get("expert_bias")))
        counts = count_decoder(**common, dense_ffn=ffn_params(d, m["dense_width"], "gated", mlp_bias),
                               n_dense_layers=flags.count(False), expert=expert, n_experts=m["n_experts"],
                               experts_per_token=m["top_k"],
                               router=router_params(d, m["n_experts"], router_bias) + (d if m["shared_gate"] else 0),
                               shared=m["n_shared"] * ffn_params(d, m["shared_width"]))  # fmt: skip
        n_dense = flags.count(False)
        kw.update(ffn_size=m["dense_width"] if n_dense else m["width"], moe_ffn_size=m["width"],
                  n_experts=m["n_experts"], experts_per_token=m["top_k"], n_dense_layers=n_dense,
                  n_shared_experts=m["n_shared"], shared_ffn_size=m["shared_width"] if m["n_shared"] else 0)  # fmt: skip
    else:
        ffn = c.positive("intermediate_size")
        counts = count_decoder(**common, dense_ffn=ffn_params(d, ffn, "gated", mlp_bias))
        kw.update(ffn_size=ffn)
    kw.update(n_params=counts.total, n_active_params=counts.active, expert_params=counts.experts,
              embedding_params=counts.embedding)  # fmt: skip
    return kw


def _blocks(c: _Keys) -> list[str]:
    """Nemotron-H's blocks in order ("mamba", "attention", "mlp", "moe"): ``layers_block_type``, else the letters
    of ``hybrid_override_pattern`` (M, *, -, E); checked against ``num_hidden_layers`` where the config has it."""
    pattern, types = c.get("hybrid_override_pattern"), c.get("layers_block_type")
    if isinstance(pattern, str) and pattern and set(pattern) <= set(_BLOCK_LETTERS):
        from_pattern = [_BLOCK_LETTERS[x] for x in pattern]
    elif pattern is not None:
        raise DataError(f"{c.where}: key 'hybrid_override_pattern' must be a string of the block letters "
                        f"{''.join(_BLOCK_LETTERS)} (Mamba-2, attention, MLP, MoE), got {str(pattern)[:80]!r}")  # fmt: skip
    if types is not None:
        if (
            not isinstance(types, list)
            or not types
            or not all(isinstance(t, str) and t in _BLOCK_LETTERS.values() for t in types)
        ):
            raise DataError(f"{c.where}: key 'layers_block_type' must list blocks of the types "
                            f"{', '.join(_BLOCK_LETTERS.values())}, got {str(types)[:80]}")  # fmt: skip
        if pattern is not None and types != from_pattern:
            raise DataError(
                f"{c.where}: keys 'layers_block_type' and 'hybrid_override_pattern' disagree; fix either"
            )
        blocks = list(types)
    elif pattern is not None:
        blocks = from_pattern
    else:
        raise DataError(f"{c.where}: missing key 'hybrid_override_pattern' (or 'layers_block_type'), the block "
                        "layout of a Nemotron-H config")  # fmt: skip
    n = c.get("num_hidden_layers")
    if n is not None and c.positive("num_hidden_layers") != len(blocks):
        raise DataError(
            f"{c.where}: key 'num_hidden_layers' is {n} but the block layout lists {len(blocks)} blocks"
        )
    return blocks


def _read_mamba_hybrid(c: _Keys) -> dict[str, Any]:
    """Fields of a Nemotron-H config (Nemotron-H, Nemotron 3): single-operation blocks (Mamba-2 mixer, attention,
    MLP or MoE, each behind one RMS norm), read as layers of one mixer each (Mamba-2 or attention), the MLP and
    MoE blocks their FFNs (mixer blocks with no FFN block after them counted in `n_ffnless_layers`). MLPs and
    experts are two-matrix squared-ReLU FFNs; the routed experts of a latent MoE work at ``moe_latent_size``."""
    blocks = _blocks(c)
    n_mamba, n_attn = blocks.count("mamba"), blocks.count("attention")
    n_mlp, n_moe = blocks.count("mlp"), blocks.count("moe")
    layers = n_mamba + n_attn
    if not n_mamba or not n_attn:
        raise DataError(f"{c.where}: key 'hybrid_override_pattern' / 'layers_block_type' lists {n_mamba} Mamba-2 and "
                        f"{n_attn} attention blocks; a hybrid needs both")  # fmt: skip
    if n_mlp + n_moe > layers:
        raise DataError(f"{c.where}: key 'hybrid_override_pattern' / 'layers_block_type' lists {n_mlp + n_moe} FFN "
                        f"blocks for {layers} mixer blocks; SLIM reads at most one FFN block per Mamba-2 or attention "
                        "block")  # fmt: skip
    for key in ("attention_bias", "mlp_bias", "use_bias", "mamba_proj_bias"):
        if bool(c.get(key, default=False)):
            raise DataError(f"{c.where}: key {key!r} true is not read for a Nemotron-H config; refused")
    if not bool(c.get("use_conv_bias", default=True)):
        raise DataError(
            f"{c.where}: key 'use_conv_bias' false is not read (the published models have it); refused"
        )
    act = c.get("mlp_hidden_act", default="relu2")
    if act != "relu2":
        raise DataError(f"{c.where}: key 'mlp_hidden_act' {act!r}: only squared-ReLU (relu2) FFNs are read")
    c.get("expand", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor")
    chunk = c.get("chunk_size", default=MAMBA2_CHUNK)
    if chunk != MAMBA2_CHUNK:
        raise DataError(f"{c.where}: key 'chunk_size' {chunk!r}: the Mamba-2 scan's prefill is priced at chunks of "
                        f"{MAMBA2_CHUNK} tokens only (every published Nemotron-H and Nemotron 3 config); refused")  # fmt: skip
    d, vocab = c.positive("hidden_size"), c.positive("vocab_size")
    heads = c.positive("num_attention_heads")
    kv = c.integer("num_key_value_heads", default=heads)
    hd = (
        c.positive("head_dim", "attention_head_dim")
        if c.get("head_dim", "attention_head_dim")
        else d // heads
    )
    groups, mheads = c.positive("n_groups"), c.positive("mamba_num_heads")
    state, mdim, kernel = (
        c.positive("ssm_state_size"),
        c.positive("mamba_head_dim"),
        c.positive("conv_kernel"),
    )
    if mheads % groups:
        raise DataError(
            f"{c.where}: key 'mamba_num_heads' ({mheads}) is not a multiple of 'n_groups' ({groups})"
        )
    kw: dict[str, Any] = dict(
        n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=kv, head_dim=hd, ffn_kind="mlp", vocab_size=vocab,
        max_position=c.integer("max_position_embeddings", default=0), n_linear_layers=n_mamba, linear_kind="mamba2",
        linear_key_heads=groups, linear_value_heads=mheads, linear_key_head_dim=state, linear_value_head_dim=mdim,
        linear_conv_kernel=kernel, state_bytes=_state_bytes(c, "mamba_ssm_cache_dtype", _dtype_bytes(c)),
        n_ffnless_layers=layers - n_mlp - n_moe,
    )  # fmt: skip
    common: dict[str, Any] = dict(n_layers=layers, hidden_size=d, vocab_size=vocab,
                  tied_embeddings=bool(c.get("tie_word_embeddings", default=False)),
                  attention=attention_params(d, heads, kv, hd), n_linear_layers=n_mamba,
                  linear_attention=mamba2_params(d, groups, mheads, state, mdim, kernel),
                  n_ffnless_layers=layers - n_mlp - n_moe)  # fmt: skip
    dense = ffn_params(d, c.positive("intermediate_size"), "mlp") if n_mlp else 0
    if not n_moe:
        counts = count_decoder(**common, dense_ffn=dense)
        kw.update(ffn_size=c.positive("intermediate_size"))
    else:
        n_experts, top_k = c.positive("n_routed_experts"), c.positive("num_experts_per_tok")
        width, latent = c.positive("moe_intermediate_size"), c.integer("moe_latent_size", default=0)
        n_shared = c.integer("n_shared_experts", default=0)
        shared_width = c.positive("moe_shared_expert_intermediate_size") if n_shared else 0
        if top_k > n_experts or n_experts > MAX_EXPERTS:
            raise DataError(f"{c.where}: key 'num_experts_per_tok' ({top_k}) exceeds 'n_routed_experts' ({n_experts}), "
                            f"or that is above {MAX_EXPERTS}; refused")  # fmt: skip
        _expert_groups(c, "n_routed_experts", n_experts, top_k)
        counts = count_decoder(**common, dense_ffn=dense, n_dense_layers=n_mlp,
                               expert=ffn_params(latent or d, width, "mlp"), n_experts=n_experts,
                               experts_per_token=top_k, router=router_params(d, n_experts, True),
                               shared=n_shared * ffn_params(d, shared_width, "mlp") + 2 * d * latent)  # fmt: skip
        kw.update(ffn_size=c.positive("intermediate_size") if n_mlp else width, moe_ffn_size=width,
                  n_experts=n_experts, experts_per_token=top_k, n_dense_layers=n_mlp, n_shared_experts=n_shared,
                  shared_ffn_size=shared_width, moe_latent_size=latent)  # fmt: skip
    kw.update(n_params=counts.total, n_active_params=counts.active, expert_params=counts.experts,
              embedding_params=counts.embedding)  # fmt: skip
    return kw


def _nas_ffn_width(mult: float, d: int) -> int:
    """DeciLM's FFN width of an ``ffn_mult``: ``int(2 mult D / 3)`` rounded up to a multiple of 256."""
    width = int(2 * mult * d / 3)
    return -(-width // 256) * 256


def _read_heterogeneous(c: _Keys) -> dict[str, Any]:
    """Fields of a Nemotron-NAS (DeciLM) config: ``block_configs`` gives each layer's attention (GQA with
    ``n_heads_in_group`` query heads per KV head, or none: ``no_op``) and gated FFN (width from ``ffn_mult``, or
    none); a layer has an RMS norm before each part it has. Layers without attention are `n_mixerless_layers`, the
    FFN widths' sum `ffn_width_sum`."""
    d, layers = c.positive("hidden_size"), c.positive("num_hidden_layers")
    heads, vocab = c.positive("num_attention_heads"), c.positive("vocab_size")
    blocks = c.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != layers:
        raise DataError(f"{c.where}: key 'block_configs' must list one block for each of the {layers} layers")
    for key in ("attention_bias", "mlp_bias"):
        if bool(c.get(key, default=False)):
            raise DataError(f"{c.where}: key {key!r} true is not read for a Nemotron-NAS config; refused")
    groups, widths, mixerless, ffnless = set(), [], 0, 0
    for i, b in enumerate(blocks):
        att, ffn = (b.get(part) if isinstance(b, dict) else None for part in ("attention", "ffn"))
        if not isinstance(att, dict) or not isinstance(ffn, dict):
            raise DataError(f"{c.where}: key 'block_configs[{i}]' needs an 'attention' and an 'ffn' object")
        for part, values, features, read in (
            ("attention", att, _NAS_ATTENTION_FEATURES, ("no_op", "n_heads_in_group")),
            ("ffn", ffn, _NAS_FFN_FEATURES, ("no_op", "ffn_mult")),
        ):
            for key in values:
                if key not in read and (key not in features or _present(values[key])):
                    raise DataError(f"{c.where}: key 'block_configs[{i}].{part}.{key}' ({str(values[key])[:40]!r}) is "
                                    "not read: SLIM does not model that variant of a block; refused")  # fmt: skip
        if att.get("no_op"):
            mixerless += 1
        else:
            g = att.get("n_heads_in_group")
            if isinstance(g, bool) or not isinstance(g, int) or g <= 0 or heads % g:
                raise DataError(f"{c.where}: key 'block_configs[{i}].attention.n_heads_in_group' must be a positive "
                                f"divisor of the {heads} heads, got {g!r}")  # fmt: skip
            groups.add(g)
        if ffn.get("no_op"):
            ffnless += 1
        else:
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, int | float) or not 0 < mult < 1e6:
                raise DataError(f"{c.where}: key 'block_configs[{i}].ffn.ffn_mult' must be a positive number below 1e6, "
                                f"got {mult!r}")  # fmt: skip
            widths.append(_nas_ffn_width(float(mult), d))
    if len(groups) != 1:
        raise DataError(f"{c.where}: key 'block_configs': the attention layers have "
                        f"{'no' if not groups else 'different'} KV head counts (n_heads_in_group "
                        f"{sorted(groups)}); SLIM reads one KV width for every attention layer")  # fmt: skip
    kv = heads // groups.pop()
    hd = _head_dim(c, d, heads, c.positive("head_dim") if c.get("head_dim") is not None else None)
    counts = count_decoder(n_layers=layers, hidden_size=d, vocab_size=vocab,
                           tied_embeddings=bool(c.get("tie_word_embeddings", default=False)),
                           attention=attention_params(d, heads, kv, hd), n_ffnless_layers=ffnless,
                           n_mixerless_layers=mixerless)  # fmt: skip
    ffn_total = sum(ffn_params(d, w, "gated") for w in widths)
    uniform = len(set(widths)) <= 1
    return dict(
        n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=kv, head_dim=hd, ffn_kind="gated", vocab_size=vocab,
        max_position=c.integer("max_position_embeddings", default=0),
        ffn_size=widths[0] if uniform and widths else round(sum(widths) / max(len(widths), 1)),
        ffn_width_sum=0 if uniform else sum(widths), n_ffnless_layers=ffnless, n_mixerless_layers=mixerless,
        n_params=counts.total + ffn_total, n_active_params=counts.active + ffn_total, expert_params=0,
        embedding_params=counts.embedding,
    )  # fmt: skip


def _read_per_kind_attention(c: _Keys) -> dict[str, Any]:
    """Fields of a MiMo-V2-Flash config: full and sliding-window layers (``hybrid_layer_pattern`` 1: sliding) with
    their own KV heads (``swa_num_key_value_heads``) and value heads of their own width (``v_head_dim``), learned sink
    logits where ``add_*_attention_sink_bias`` says, and MoE layers where the ``moe_layer_freq`` list has 1 (routed
    experts with a score-correction bias, no shared expert)."""
    d, layers = c.positive("hidden_size"), c.positive("num_hidden_layers")
    heads, vocab = c.positive("num_attention_heads"), c.positive("vocab_size")
    kv, hd, vd = c.positive("num_key_value_heads"), c.positive("head_dim"), c.positive("v_head_dim")
    pattern = c.int_list("hybrid_layer_pattern", layers)
    if not pattern or set(pattern) - {0, 1} or all(pattern) or not any(pattern):
        raise DataError(f"{c.where}: key 'hybrid_layer_pattern' must flag each of the {layers} layers 0 (full) or "
                        "1 (sliding window), with both kinds present")  # fmt: skip
    for key, full in (("swa_num_attention_heads", heads), ("swa_head_dim", hd), ("swa_v_head_dim", vd)):
        if c.get(key) is not None and c.positive(key) != full:
            raise DataError(f"{c.where}: key {key!r} ({c.get(key)}) differs from the full layers' {full}: SLIM reads "
                            "per-kind KV heads only; refused")  # fmt: skip
    skv = c.positive("swa_num_key_value_heads", default=kv)
    if heads % skv:
        raise DataError(
            f"{c.where}: key 'swa_num_key_value_heads' ({skv}) does not divide the {heads} query heads"
        )
    window = c.positive("sliding_window", "sliding_window_size")
    for key in ("sliding_window_size", "attention_chunk_size"):
        if c.get(key) is not None and c.positive(key) != window:
            raise DataError(
                f"{c.where}: key {key!r} ({c.get(key)}) differs from 'sliding_window' ({window}); refused"
            )
    for key in ("attention_bias", "mlp_bias"):
        if bool(c.get(key, default=False)):
            raise DataError(f"{c.where}: key {key!r} true is not read for a MiMo-V2 config; refused")
    c.get("attention_value_scale", "partial_rotary_factor", "swa_rope_theta", "n_group", "topk_group", "scoring_func",
          "norm_topk_prob", "routed_scaling_factor")  # fmt: skip
    n_swa = sum(pattern)
    sinks = {k: bool(c.get(f"add_{k}_attention_sink_bias", default=False)) for k in ("full", "swa")}

    def attention(kv_heads: int, sink: bool) -> int:  # q, k, v, o, and one sink logit per head
        return d * heads * hd + d * kv_heads * (hd + vd) + heads * vd * d + (heads if sink else 0)

    flags = c.int_list("moe_layer_freq", layers)
    if not flags or set(flags) - {0, 1} or not any(flags):
        raise DataError(
            f"{c.where}: key 'moe_layer_freq' must flag each of the {layers} layers 0 (dense) or 1 (MoE)"
        )
    n_moe = sum(flags)
    n_exp, top_k = c.positive("n_routed_experts"), c.positive("num_experts_per_tok")
    if top_k > n_exp or n_exp > MAX_EXPERTS:
        raise DataError(f"{c.where}: key 'num_experts_per_tok' ({top_k}) exceeds 'n_routed_experts' ({n_exp}), or that "
                        f"is above {MAX_EXPERTS}; refused")  # fmt: skip
    _expert_groups(c, "n_routed_experts", n_exp, top_k)
    if c.integer("n_shared_experts", default=0):
        raise DataError(f"{c.where}: key 'n_shared_experts' > 0 is not read for a MiMo-V2 config; refused")
    width, dense = c.positive("moe_intermediate_size"), c.positive("intermediate_size")
    expert = ffn_params(d, width, "gated")
    tied = bool(c.get("tie_word_embeddings", default=False))
    embedding = vocab * d * (1 if tied else 2)
    bias = c.get("topk_method") == "noaux_tc"
    total = (embedding + d + (layers - n_swa) * attention(kv, sinks["full"]) + n_swa * attention(skv, sinks["swa"])
             + 2 * layers * d + (layers - n_moe) * ffn_params(d, dense, "gated")
             + n_moe * (router_params(d, n_exp, bias) + n_exp * expert))  # fmt: skip
    return dict(
        n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=kv, head_dim=hd, v_head_dim=vd, ffn_kind="gated",
        vocab_size=vocab, max_position=c.integer("max_position_embeddings", default=0), sliding_window=window,
        n_sliding_layers=n_swa, sliding_kv_heads=skv if skv != kv else 0, attention_sinks=any(sinks.values()),
        ffn_size=dense, moe_ffn_size=width, n_experts=n_exp, experts_per_token=top_k, n_dense_layers=layers - n_moe,
        n_params=total, n_active_params=total - n_moe * (n_exp - top_k) * expert, expert_params=n_moe * n_exp * expert,
        embedding_params=embedding,
    )  # fmt: skip


def _read_gemma4(c: _Keys) -> dict[str, Any]:
    """Fields of a Gemma-4 language model: sliding-window layers (``head_dim``, ``num_key_value_heads``) and full
    layers with their own head width and KV heads (``global_head_dim``, ``num_global_key_value_heads``) whose value
    projection is the key's (``attention_k_eq_v``); per-head query and key norms; four norms per layer; a gated
    GeLU MLP in every layer and, with ``enable_moe_block``, routed experts beside it (three more norms, a router with
    an input scale and per-expert scales). Per-layer input embeddings, KV-shared layers and double-wide MLPs are
    refused."""
    d, layers = c.positive("hidden_size"), c.positive("num_hidden_layers")
    heads, vocab = c.positive("num_attention_heads"), c.positive("vocab_size")
    for key in ("num_kv_shared_layers", "hidden_size_per_layer_input"):
        if c.integer(key, default=0):
            raise DataError(f"{c.where}: key {key!r} > 0 (KV-shared layers / per-layer input embeddings) is not "
                            "read; refused")  # fmt: skip
    for key in ("use_double_wide_mlp", "attention_bias"):
        if bool(c.get(key, default=False)):
            raise DataError(f"{c.where}: key {key!r} true is not read for a Gemma-4 config; refused")
    c.get(
        "vocab_size_per_layer_input",
        "final_logit_softcapping",
        "hidden_activation",
        "use_bidirectional_attention",
    )
    skv, shd = c.positive("num_key_value_heads"), c.positive("head_dim")
    if heads % skv:
        raise DataError(
            f"{c.where}: key 'num_key_value_heads' ({skv}) does not divide the {heads} query heads"
        )
    hd = c.positive("global_head_dim", default=shd)
    shared = bool(c.get("attention_k_eq_v", default=False))
    kv = c.positive("num_global_key_value_heads", default=skv) if shared else skv
    window, n_sliding = _sliding_layers(c, "types", layers)
    if not 0 < n_sliding < layers:
        raise DataError(f"{c.where}: key 'layer_types' has {n_sliding} sliding layers of {layers}; a Gemma-4 config "
                        "has both kinds")  # fmt: skip
    sliding = d * heads * shd * 2 + d * skv * shd * 2 + 2 * shd  # q, o, k, v; the q and k norms
    full = d * heads * hd * 2 + d * kv * hd * (1 if shared else 2) + 2 * hd
    ffn = c.positive("intermediate_size")
    per_layer = 4 * d + 1 + ffn_params(d, ffn, "gated")  # four norms, the layer scalar, the MLP
    moe = bool(c.get("enable_moe_block", default=False))
    tied = bool(c.get("tie_word_embeddings", default=True))
    embedding = vocab * d * (1 if tied else 2)
    base = embedding + d + n_sliding * sliding + (layers - n_sliding) * full + layers * per_layer
    kw: dict[str, Any] = dict(
        n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=kv, head_dim=hd, ffn_kind="gated", vocab_size=vocab,
        max_position=c.integer("max_position_embeddings", default=0), sliding_window=window, n_sliding_layers=n_sliding,
        sliding_kv_heads=skv if skv != kv else 0, sliding_head_dim=shd if shd != hd else 0,
        shared_kv_projection=shared, ffn_size=ffn, embedding_params=embedding,
    )  # fmt: skip
    if not moe:
        for key in ("num_experts", "top_k_experts", "moe_intermediate_size"):
            if _present(c.get(key)):
                raise DataError(f"{c.where}: key {key!r} is set but 'enable_moe_block' is false; fix either")
        return kw | dict(n_params=base, n_active_params=base)
    n_exp, top_k, width = (
        c.positive("num_experts"),
        c.positive("top_k_experts"),
        c.positive("moe_intermediate_size"),
    )
    if top_k > n_exp or n_exp > MAX_EXPERTS:
        raise DataError(f"{c.where}: key 'top_k_experts' ({top_k}) exceeds 'num_experts' ({n_exp}), or that is above "
                        f"{MAX_EXPERTS}; refused")  # fmt: skip
    expert = ffn_params(d, width, "gated")
    router = d * n_exp + d + n_exp  # projection, input scale, per-expert scales
    total = base + layers * (3 * d + router + n_exp * expert)
    return kw | dict(
        ffn_size=width, moe_ffn_size=width, n_experts=n_exp, experts_per_token=top_k, n_shared_experts=1,
        shared_ffn_size=ffn, n_params=total, n_active_params=total - layers * (n_exp - top_k) * expert,
        expert_params=layers * n_exp * expert,
    )  # fmt: skip


#: DeepSeek-V4 ``compress_ratios`` values vLLM's ``deepseek_v4`` layers take: 0 (sliding window only), CSA, HCA
_V4_RATIOS = (0, CSA_RATIO, HCA_RATIO)
#: (head_dim, qk_rope_head_dim) of vLLM's DeepSeek-V4 attention: its 584-byte fp8_ds_mla entry holds 448 fp8
#: values and 64 bf16 RoPE values
V4_HEAD = (512, 64)


def _read_deepseek_v4(c: _Keys) -> dict[str, Any]:
    """Fields of a DeepSeek-V4 config (vLLM's ``deepseek_v4.py``) and its exact parameter counts.

    ``compress_ratios`` holds one ratio per layer, the multi-token-prediction layers (``num_nextn_predict_layers``,
    not served) last: 0 a sliding-window-only layer, 4 compressed sparse attention (a lightning indexer selects
    ``index_topk`` of the 4:1 compressed entries), 128 heavily compressed attention (every 128:1 entry); every layer
    also attends to its last ``sliding_window`` tokens. One KV head of ``head_dim`` (``num_key_value_heads`` 1),
    low-rank queries, a grouped low-rank output projection, ``hc_mult`` residual copies mixed per layer, and a MoE
    in every layer (the first ``num_hash_layers`` route by token hash: their token-to-expert table is not counted,
    the others carry the router's correction bias of ``noaux_tc``)."""
    d, layers = c.positive("hidden_size"), c.positive("num_hidden_layers")
    heads, vocab = c.positive("num_attention_heads"), c.positive("vocab_size")
    if c.integer("num_key_value_heads", default=1) != 1:
        raise DataError(
            f"{c.where}: key 'num_key_value_heads' must be 1: DeepSeek-V4 attention has one KV head"
        )
    hd, rope = c.positive("head_dim"), c.positive("qk_rope_head_dim")
    if (hd, rope) != V4_HEAD:
        raise DataError(f"{c.where}: keys 'head_dim' {hd} and 'qk_rope_head_dim' {rope}: vLLM's DeepSeek-V4 cache "
                        f"entry (584 bytes) and compressors take {V4_HEAD[0]} and {V4_HEAD[1]} only; refused")  # fmt: skip
    q_rank, groups, o_rank = c.positive("q_lora_rank"), c.positive("o_groups"), c.positive("o_lora_rank")
    if heads % groups:
        raise DataError(f"{c.where}: key 'o_groups' ({groups}) does not divide the {heads} attention heads")
    hc = c.positive("hc_mult")
    window = c.positive("sliding_window")
    mtp = c.integer("num_nextn_predict_layers", default=0)
    ratios = c.int_list("compress_ratios", 0)
    if len(ratios) != layers + mtp:
        raise DataError(f"{c.where}: key 'compress_ratios' has {len(ratios)} entries; it needs one per layer, "
                        f"{layers} ('num_hidden_layers') + {mtp} ('num_nextn_predict_layers')")  # fmt: skip
    odd = sorted(set(ratios) - set(_V4_RATIOS))
    if odd:
        raise DataError(f"{c.where}: key 'compress_ratios' has ratio(s) {odd}; vLLM's DeepSeek-V4 layers take "
                        f"{', '.join(map(str, _V4_RATIOS))}")  # fmt: skip
    served = ratios[:layers]
    n_csa, n_hca = served.count(CSA_RATIO), served.count(HCA_RATIO)
    if not n_csa + n_hca:
        raise DataError(f"{c.where}: key 'compress_ratios' names no compressed layer ({CSA_RATIO} or {HCA_RATIO}) "
                        "among the served layers: a DeepSeek-V4 layout without compression is not priced; refused")  # fmt: skip
    index: dict[str, int] = {}
    if n_csa:
        index = dict(index_heads=c.positive("index_n_heads"), index_head_dim=c.positive("index_head_dim"),
                     index_topk=c.positive("index_topk"))  # fmt: skip
    for key in ("attention_bias", "tie_word_embeddings"):
        if bool(c.get(key, default=False)):
            raise DataError(
                f"{c.where}: key {key!r} true is not part of DeepSeek-V4 (vLLM builds none); refused"
            )
    act = c.get("hidden_act", default="silu")
    if act != "silu":
        raise DataError(f"{c.where}: key 'hidden_act' is {act!r}; vLLM's DeepSeek-V4 takes silu only")
    n_exp, top_k = c.integer("n_routed_experts"), c.integer("num_experts_per_tok")
    width, n_shared = c.positive("moe_intermediate_size"), c.integer("n_shared_experts", default=0)
    if not 2 <= n_exp <= MAX_EXPERTS or not 1 <= top_k <= n_exp:
        raise DataError(f"{c.where}: keys 'n_routed_experts' ({n_exp}) and 'num_experts_per_tok' ({top_k}): a "
                        f"token is routed to 1 to {MAX_EXPERTS} experts among 2 or more")  # fmt: skip
    hashed = c.integer("num_hash_layers", default=0)
    if hashed > layers:
        raise DataError(f"{c.where}: key 'num_hash_layers' ({hashed}) exceeds the {layers} layers")
    bias = n_exp if c.get("topk_method") == "noaux_tc" else 0  # e_score_correction_bias, not in hash layers
    expert = ffn_params(d, width)
    per_layer = (compressed_attention_params(d, heads, hd, q_rank, groups, o_rank) + 2 * d
                 + hyper_connection_params(d, hc) + router_params(d, n_exp) + n_shared * expert)  # fmt: skip
    compress = n_csa * compressor_params(d, CSA_RATIO, hd) + n_hca * compressor_params(d, HCA_RATIO, hd)
    indexers = n_csa * v4_indexer_params(
        d, q_rank, index.get("index_heads", 0), index.get("index_head_dim", 0)
    )
    head = d + hc * hc * d + hc + 1  # the final norm and the hyper-connection head (``hc_head_*``)
    embedding = 2 * vocab * d  # untied: the embedding and the LM head
    experts = layers * n_exp * expert
    total = embedding + head + layers * per_layer + (layers - hashed) * bias + compress + indexers + experts
    return dict(n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=1, head_dim=hd, ffn_size=width,
                ffn_kind="gated", vocab_size=vocab, max_position=c.integer("max_position_embeddings", default=0),
                n_experts=n_exp, experts_per_token=top_k, moe_ffn_size=width, n_shared_experts=n_shared,
                shared_ffn_size=width if n_shared else 0, q_lora_rank=q_rank, qk_rope_head_dim=rope,
                sliding_window=window, n_sliding_layers=layers, attention_sinks=True, n_indexer_layers=n_csa,
                **index, n_csa_layers=n_csa, n_hca_layers=n_hca, o_groups=groups, o_lora_rank=o_rank,
                hc_mult=hc, n_params=total, n_active_params=total - layers * (n_exp - top_k) * expert,
                expert_params=experts, embedding_params=embedding)  # fmt: skip


def _deepseek_v4_quantization(c: _Keys, side: str) -> str:
    """A DeepSeek-V4 checkpoint's precision label (`slimlib.registry.precision`): vLLM serves ``quant_method``
    fp8 of a ``deepseek_v4`` config as ``deepseek_v4_fp8`` (``DeepseekV4FP8Config.override_quantization_method``),
    its linear layers fp8 with 128x128 block scales and its routed experts by ``expert_dtype`` (absent: fp4, as
    vLLM defaults it): fp8, MXFP4 ("fp8-mxfp4-experts"), or NVFP4 where ``moe_quant_algo`` says so and the
    ``hf_quant_config.json`` beside it is ModelOpt's MIXED_PRECISION ("fp8-nvfp4-experts"). SGLang's
    ``deepseek_ref`` configs name no expert dtype: their experts are read at the fp8 of their
    ``quantization_config``. `side`: the sibling file's value ('' for none)."""
    qc = c.get("quantization_config")
    if qc is None:
        if side:
            raise DataError(f"{c.where}: no 'quantization_config' beside an hf_quant_config.json ({side!r})")
        return ""
    if not isinstance(qc, dict) or str(qc.get("quant_method", "")).lower() != "fp8":
        method = qc.get("quant_method") if isinstance(qc, dict) else qc
        raise DataError(f"{c.where}: key 'quantization_config.quant_method' is {method!r}; vLLM serves DeepSeek-V4 "
                        "checkpoints of fp8 linear layers only (deepseek_v4_fp8)")  # fmt: skip
    moe = qc.get("moe_quant_algo")
    if moe not in (None, "NVFP4"):
        raise DataError(f"{c.where}: key 'quantization_config.moe_quant_algo' is {moe!r}, not NVFP4; refused")
    if (side == "modelopt") != (moe == "NVFP4") or side not in ("", "modelopt"):
        raise DataError(f"{c.where}: key 'quantization_config.moe_quant_algo' is {moe!r} but its "
                        f"hf_quant_config.json says {side or 'nothing'!r}; NVFP4 experts come with ModelOpt's "
                        "MIXED_PRECISION")  # fmt: skip
    default = "fp4" if c.data.get("model_type") == "deepseek_v4" else "fp8"
    experts = c.get("expert_dtype", default=default)
    if experts not in ("fp4", "fp8"):
        raise DataError(f"{c.where}: key 'expert_dtype' is {experts!r}; vLLM takes fp4 or fp8")
    if experts == "fp8":
        if moe:
            raise DataError(f"{c.where}: key 'expert_dtype' fp8 with 'moe_quant_algo' {moe!r}; refused")
        return "fp8"
    return "fp8-nvfp4-experts" if moe else "fp8-mxfp4-experts"


#: the one block-sparse block size and block score vLLM's MiniMax-M3 kernels take (``SPARSE_BLOCK_SIZE`` = the KV
#: page, 128, and ``score_type`` "max" in ``vllm/models/minimax_m3/common/ops/index_topk.py``)
MSA_BLOCK_SIZE = 128
#: the index head width vLLM's MiniMax-M3 indexer kernels take
MSA_INDEX_DIM = 128
MSA_SCORE_TYPES = ("max",)


def _flags(c: _Keys, sub: dict[str, Any], key: str, layers: int, where: str) -> list[int]:
    """A per-layer list of 0/1 flags `key` of `sub` (`where` names the object in errors), one per layer."""
    value = sub.get(key)
    if not isinstance(value, list) or not all(v in (0, 1) and not isinstance(v, bool) for v in value):
        raise DataError(f"{c.where}: key '{where}{key}' must be a list of 0/1 per layer, got {value!r}")
    if len(value) != layers:
        raise DataError(f"{c.where}: key '{where}{key}' has {len(value)} entries for {layers} layers "
                        "('num_hidden_layers')")  # fmt: skip
    return list(value)


def _read_minimax_m3(c: _Keys) -> dict[str, Any]:
    """Fields of a MiniMax-M3 language model (vLLM's ``vllm/models/minimax_m3/nvidia/model.py``) and its exact
    parameter counts. GQA attention with per-head q/k norms in every layer; the layers flagged in
    ``sparse_attention_config.sparse_attention_freq`` are block-sparse (MiniMax Sparse Attention): a K-only indexer
    (``sparse_num_index_heads`` query heads, one per KV head, of ``sparse_index_dim``, and one cached key head of the
    same width) scores each 128-token block by the max over its tokens and each KV head attends to its
    ``sparse_topk_blocks`` best blocks, the init and local blocks forced among them. ``moe_layer_freq`` flags the
    MoE layers (routed experts of ``intermediate_size``, one shared expert of ``intermediate_size x
    n_shared_experts``); the others have a dense MLP of ``dense_intermediate_size``. The multi-token-prediction
    modules (``num_mtp_modules``, ``num_nextn_predict_layers``) are not served layers and not counted."""
    d, layers = c.positive("hidden_size"), c.positive("num_hidden_layers")
    heads, kv, hd = (
        c.positive("num_attention_heads"),
        c.positive("num_key_value_heads"),
        c.positive("head_dim"),
    )
    vocab = c.positive("vocab_size")
    if heads % kv:
        raise DataError(
            f"{c.where}: key 'num_key_value_heads' ({kv}) does not divide the {heads} query heads"
        )
    for key in ("attention_output_gate", "attention_bias"):
        if bool(c.get(key, default=False)):
            raise DataError(
                f"{c.where}: key {key!r} true is not part of MiniMax-M3 (vLLM builds none); refused"
            )
    if c.get("qk_norm_type", default="per_head") != "per_head" or not c.get("use_qk_norm", default=True):
        raise DataError(f"{c.where}: key 'qk_norm_type' is {c.get('qk_norm_type')!r}; vLLM's MiniMax-M3 takes "
                        "per_head q/k norms only")  # fmt: skip
    act = c.get("hidden_act", default="swigluoai")
    if act != "swigluoai":
        raise DataError(f"{c.where}: key 'hidden_act' is {act!r}; vLLM's MiniMax-M3 takes swigluoai only")
    c.get("partial_rotary_factor", "rotary_dim", "num_mtp_modules", "num_nextn_predict_layers")
    sac = c.get("sparse_attention_config")
    if not isinstance(sac, dict) or sac.get("use_sparse_attention") is False:
        raise DataError(f"{c.where}: key 'sparse_attention_config' must be an object with use_sparse_attention "
                        f"true, got {sac!r}")  # fmt: skip
    at = "sparse_attention_config."
    sparse = _flags(c, sac, "sparse_attention_freq", layers, at)
    no_value = (  # vLLM never reads it: absent is no index value branch
        sparse if sac.get("sparse_disable_index_value") is None
        else _flags(c, sac, "sparse_disable_index_value", layers, at)
    )  # fmt: skip
    if any(s and not v for s, v in zip(sparse, no_value, strict=True)):
        raise DataError(f"{c.where}: key '{at}sparse_disable_index_value' is 0 on a sparse layer: an index value "
                        "branch, which vLLM's MiniMax-M3 never builds; refused")  # fmt: skip
    sub = _Keys(sac, f"{c.where}: {at.rstrip('.')}", c.style)
    block, topk = sub.positive("sparse_block_size"), sub.positive("sparse_topk_blocks")
    if block != MSA_BLOCK_SIZE:
        raise DataError(f"{c.where}: key '{at}sparse_block_size' is {block}; vLLM's MiniMax-M3 kernels take "
                        f"{MSA_BLOCK_SIZE} (one block per KV page)")  # fmt: skip
    i_heads, i_dim = sub.positive("sparse_num_index_heads"), sub.positive("sparse_index_dim")
    if i_dim != MSA_INDEX_DIM:
        raise DataError(f"{c.where}: key '{at}sparse_index_dim' is {i_dim}; vLLM's MiniMax-M3 indexer takes index "
                        f"heads of {MSA_INDEX_DIM} only")  # fmt: skip
    if i_heads != kv:
        raise DataError(f"{c.where}: key '{at}sparse_num_index_heads' ({i_heads}) must equal "
                        f"'num_key_value_heads' ({kv}): vLLM splits the index heads with the KV heads, one each")  # fmt: skip
    score = sac.get("sparse_score_type", "max")
    if score not in MSA_SCORE_TYPES:
        raise DataError(f"{c.where}: key '{at}sparse_score_type' is {score!r}; vLLM's MiniMax-M3 indexer scores "
                        f"blocks by {', '.join(MSA_SCORE_TYPES)} only")  # fmt: skip
    forced = sub.integer("sparse_init_block", default=0) + sub.integer("sparse_local_block", default=0)
    if forced > topk:
        raise DataError(f"{c.where}: keys '{at}sparse_init_block' + 'sparse_local_block' ({forced}) exceed "
                        f"'sparse_topk_blocks' ({topk}): the forced blocks are selected among the top-k")  # fmt: skip
    n_sparse = sum(sparse)
    if not n_sparse:
        raise DataError(f"{c.where}: key '{at}sparse_attention_freq' flags no sparse layer; refused")
    moe = c.int_list("moe_layer_freq", layers)
    if any(v not in (0, 1) for v in moe):
        raise DataError(f"{c.where}: key 'moe_layer_freq' must hold 0/1 per layer, got {sorted(set(moe))}")
    first = c.get("first_k_dense_replace")
    if first is not None and moe != [int(i >= first) for i in range(layers)]:
        raise DataError(f"{c.where}: key 'moe_layer_freq' does not match 'first_k_dense_replace' {first}")
    n_dense = layers - sum(moe)
    n_exp, top_k = c.integer("num_local_experts"), c.integer("num_experts_per_tok")
    if not 2 <= n_exp <= MAX_EXPERTS or not 1 <= top_k <= n_exp:
        raise DataError(f"{c.where}: keys 'num_local_experts' ({n_exp}) and 'num_experts_per_tok' ({top_k}): a "
                        f"token is routed to 1 to {MAX_EXPERTS} experts among 2 or more")  # fmt: skip
    width, n_shared = c.positive("intermediate_size"), c.integer("n_shared_experts", default=0)
    for key, want in (
        ("moe_intermediate_size", width),
        ("shared_intermediate_size", width * n_shared or None),
    ):
        given = c.get(key)
        if given is not None and want is not None and given != want:
            raise DataError(f"{c.where}: key {key!r} ({given}) differs from the {want} vLLM builds from "
                            "'intermediate_size' and 'n_shared_experts'")  # fmt: skip
    dense_width = c.positive("dense_intermediate_size") if n_dense else 0
    tied = bool(c.get("tie_word_embeddings", default=False))
    expert = ffn_params(d, width)
    attention = attention_params(d, heads, kv, hd, qk_norm=2 * hd)
    router = router_params(d, n_exp, bool(c.get("use_routing_bias", default=False)))
    embedding = vocab * d * (1 if tied else 2)
    total = (embedding + d + layers * (attention + 2 * d) + n_sparse * block_sparse_indexer_params(d, i_heads, i_dim)
             + n_dense * ffn_params(d, dense_width) + sum(moe) * (router + n_shared * ffn_params(d, width)
                                                                 + n_exp * expert))  # fmt: skip
    return dict(n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=kv, head_dim=hd,
                ffn_size=dense_width or width, ffn_kind="gated", vocab_size=vocab,
                max_position=c.integer("max_position_embeddings", default=0), n_experts=n_exp,
                experts_per_token=top_k, moe_ffn_size=width, n_dense_layers=n_dense, n_shared_experts=n_shared,
                shared_ffn_size=width * n_shared, n_indexer_layers=n_sparse, index_heads=i_heads,
                index_head_dim=i_dim, index_topk=topk * block, sparse_block_size=block, n_params=total,
                n_active_params=total - sum(moe) * (n_exp - top_k) * expert, expert_params=sum(moe) * n_exp * expert,
                embedding_params=embedding)  # fmt: skip


def _minimax_m3_quantization(c: _Keys, side: str) -> str:
    """A MiniMax-M3 checkpoint's precision label: NVIDIA's ModelOpt MIXED_PRECISION checkpoint (its
    ``quantized_layers`` NVFP4 on every routed expert, MXFP8 on every other linear layer; vLLM's ``modelopt_mixed``)
    is "mxfp8-nvfp4-experts"; any other quantization block is read as for every model (`_quantization`). `side`:
    the sibling hf_quant_config.json's value ('' for none)."""
    qc = c.get("quantization_config")
    if not isinstance(qc, dict) or qc.get("quant_algo") != "MIXED_PRECISION":
        return _quantization(qc, c.where, "quantization_config")
    layers = qc.get("quantized_layers")
    if not isinstance(layers, dict) or not layers:
        raise DataError(
            f"{c.where}: key 'quantization_config.quantized_layers' must name the layers' precisions"
        )
    algos = {(".experts." in name, str((v or {}).get("quant_algo"))) for name, v in layers.items()}
    if algos != {(True, "NVFP4"), (False, "MXFP8")}:
        raise DataError(f"{c.where}: key 'quantization_config.quantized_layers' holds {sorted(algos)} (routed "
                        "expert?, algorithm); SLIM prices MiniMax-M3's NVFP4 experts beside MXFP8 layers only")  # fmt: skip
    if side not in ("", "modelopt"):
        raise DataError(f"{c.where}: key 'quantization_config' is MIXED_PRECISION but its hf_quant_config.json "
                        f"says {side!r}")  # fmt: skip
    return "mxfp8-nvfp4-experts"


#: style -> its own reader (the styles whose layers are not one attention and one FFN of one shape)
_OWN_READERS = {
    "mamba_hybrid": _read_mamba_hybrid,
    "heterogeneous": _read_heterogeneous,
    "per_kind_attention": _read_per_kind_attention,
    "gemma4": _read_gemma4,
    "deepseek_v4": _read_deepseek_v4,
    "minimax_m3": _read_minimax_m3,
}


def _read_classic(c: _Keys, style: str) -> dict[str, Any]:
    """Fields of an OPT, Phi-1/2, GPT-J, BLOOM or Falcon config and its parameter count (`count_parameters`)."""
    kw: dict[str, Any]
    count: dict[str, Any]
    if style == "opt":
        d = c.positive("hidden_size")
        layers = c.positive("num_hidden_layers")
        heads = c.positive("num_attention_heads")
        ffn = c.positive("ffn_dim")
        vocab = c.positive("vocab_size")
        max_pos = c.integer("max_position_embeddings", default=2048)
        embed = c.integer("word_embed_proj_dim", default=d)
        bias = bool(c.get("enable_bias", default=True))
        pre_norm = bool(c.get("do_layer_norm_before", default=True))
        final = pre_norm and not bool(c.get("_remove_final_layer_norm", default=False))
        hd = _head_dim(c, d, heads)
        kw = dict(n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=heads, head_dim=hd, ffn_size=ffn)
        kw.update(ffn_kind="mlp", vocab_size=vocab, max_position=max_pos)
        count = dict(
            tied_embeddings=bool(c.get("tie_word_embeddings", default=True)),
            embed_dim=embed,
            learned_positions=max_pos + 2,  # OPT's learned positions carry an offset of 2 rows
            qkv_bias=bias,
            out_bias=bias,
            ffn_bias=bias,
            norm="layer",
            norms_per_layer=2,
            final_norm=final,
        )
    elif style == "phi":  # Phi-1/1.5/2: parallel attention and MLP off one LayerNorm, biases everywhere
        d = c.positive("hidden_size")
        layers = c.positive("num_hidden_layers")
        heads = c.positive("num_attention_heads")
        kv = c.integer("num_key_value_heads", default=heads)
        ffn = c.positive("intermediate_size")
        vocab = c.positive("vocab_size")
        hd = _head_dim(c, d, heads)
        kw = dict(n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=kv, head_dim=hd, ffn_size=ffn)
        kw.update(
            ffn_kind="mlp", vocab_size=vocab, max_position=c.integer("max_position_embeddings", default=2048)
        )
        count = dict(
            tied_embeddings=bool(c.get("tie_word_embeddings", default=False)),
            qkv_bias=True,
            out_bias=True,
            ffn_bias=True,
            norm="layer",
            norms_per_layer=1,
            final_norm=True,
            lm_head_bias=True,
        )
    elif style == "gptj":
        d = c.positive("n_embd")
        layers = c.positive("n_layer")
        heads = c.positive("n_head")
        ffn = c.integer("n_inner", default=4 * d)
        vocab = c.positive("vocab_size")
        hd = _head_dim(c, d, heads)
        kw = dict(n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=heads, head_dim=hd, ffn_size=ffn)
        kw.update(ffn_kind="mlp", vocab_size=vocab, max_position=c.integer("n_positions", default=2048))
        count = dict(
            tied_embeddings=bool(c.get("tie_word_embeddings", default=False)),
            ffn_bias=True,
            norm="layer",
            norms_per_layer=1,  # attention and MLP run in parallel off one LayerNorm
            final_norm=True,
            lm_head_bias=True,
        )
    elif style == "bloom":
        d = c.positive("hidden_size", "n_embed")
        layers = c.positive("n_layer", "num_hidden_layers")
        heads = c.positive("n_head", "num_attention_heads")
        vocab = c.positive("vocab_size")
        hd = _head_dim(c, d, heads)
        kw = dict(
            n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=heads, head_dim=hd, ffn_size=4 * d
        )
        max_pos = c.integer("max_position_embeddings", "seq_length", default=0)  # ALiBi: no fixed limit
        kw.update(ffn_kind="mlp", vocab_size=vocab, max_position=max_pos)
        count = dict(
            tied_embeddings=bool(c.get("tie_word_embeddings", default=True)),
            qkv_bias=True,
            out_bias=True,
            ffn_bias=True,
            norm="layer",
            norms_per_layer=2,
            final_norm=True,
            embed_norm=True,
        )
    else:  # falcon
        d = c.positive("hidden_size")
        layers = c.positive("num_hidden_layers", "n_layer")
        heads = c.positive("num_attention_heads", "n_head")
        new_arch = bool(c.get("new_decoder_architecture", default=False))
        if new_arch:
            kv = c.integer("num_kv_heads", "n_head_kv", default=heads)
        elif bool(c.get("multi_query", default=True)):
            kv = 1
        else:
            kv = heads
        ffn = c.integer("ffn_hidden_size", default=4 * d)
        vocab = c.positive("vocab_size")
        hd = _head_dim(c, d, heads)
        bias = bool(c.get("bias", default=False))
        if new_arch and c.get("num_ln_in_parallel_attn", default=2) == 2:
            norms = 2  # ln_attn and ln_mlp
        else:
            norms = 1 if bool(c.get("parallel_attn", default=True)) else 2
        kw = dict(n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=kv, head_dim=hd, ffn_size=ffn)
        kw.update(
            ffn_kind="mlp", vocab_size=vocab, max_position=c.integer("max_position_embeddings", default=2048)
        )
        count = dict(
            tied_embeddings=bool(c.get("tie_word_embeddings", default=True)),
            qkv_bias=bias,
            out_bias=bias,
            ffn_bias=bias,
            norm="layer",
            norms_per_layer=norms,
            final_norm=True,
        )

    shape_keys = (
        "n_layers",
        "hidden_size",
        "n_heads",
        "n_kv_heads",
        "head_dim",
        "ffn_size",
        "ffn_kind",
        "vocab_size",
    )
    kw["n_params"] = kw["n_active_params"] = count_parameters(**{k: kw[k] for k in shape_keys}, **count)
    e = count.get("embed_dim") or kw["hidden_size"]
    tables = 1 if count.get("tied_embeddings") else 2
    kw["embedding_params"] = (
        tables * kw["vocab_size"] * e + count.get("learned_positions", 0) * kw["hidden_size"]
    )
    return kw


#: ``quantization_config.quant_method`` -> vLLM ``--quantization`` value
_QUANT_METHODS = {"fp8": "fp8", "mxfp4": "mxfp4", "compressed-tensors": "compressed-tensors", "awq": "awq",
                  "gptq": "gptq", "bitsandbytes": "bitsandbytes"}  # fmt: skip
#: NVIDIA ModelOpt ``quant_algo`` -> vLLM ``--quantization`` value (MIXED_PRECISION: per-layer precisions, vLLM's
#: "modelopt" method; FP8 weights are named by their precision, "fp8")
_MODELOPT_ALGOS = {"FP8": "fp8", "NVFP4": "modelopt_fp4", "MIXED_PRECISION": "modelopt"}


def _quantization(qc: Any, where: str, key: str) -> str:
    """The vLLM ``--quantization`` value of a quantization block (`key` names it in errors); '' for None."""
    if qc is None:
        return ""
    if not isinstance(qc, dict):
        raise DataError(f"{where}: key {key!r} must be an object, got {qc!r}")
    method = str(qc.get("quant_method") or "").lower()
    if method == "modelopt" or (not method and qc.get("quant_algo") is not None):
        algo = str(qc.get("quant_algo"))
        if algo not in _MODELOPT_ALGOS:
            raise DataError(
                f"{where}: key '{key}.quant_algo' is {algo!r}, not one of {', '.join(_MODELOPT_ALGOS)}; SLIM "
                "cannot name its vLLM quantization"
            )
        return _MODELOPT_ALGOS[algo]
    if method not in _QUANT_METHODS:
        raise DataError(
            f"{where}: key '{key}.quant_method' is {method!r}, not one of {', '.join(_QUANT_METHODS)} or "
            "modelopt; SLIM cannot name its vLLM quantization"
        )
    if method == "compressed-tensors":
        return _compressed_tensors_scheme(qc, where, key)
    return _QUANT_METHODS[method]


def _compressed_tensors_scheme(qc: dict[str, Any], where: str, key: str) -> str:
    """A compressed-tensors block's scheme: ``w4a16`` (4-bit integer weights, 16-bit activations), or
    ``w4a16-experts`` where it leaves the attention out (the routed experts only, as Kimi-K2.5's ``ignore`` list
    does: attention, shared experts, dense MLPs); any other scheme stays ``compressed-tensors``, which the precision
    table does not price."""
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return "compressed-tensors"
    for name, g in groups.items():
        w = g.get("weights") if isinstance(g, dict) else None
        if not isinstance(w, dict):
            raise DataError(f"{where}: key '{key}.config_groups.{name}.weights' must be an object")
        if (w.get("num_bits"), str(w.get("type")).lower(), g.get("input_activations")) != (4, "int", None):
            return "compressed-tensors"
    ignore = qc.get("ignore") or []
    if not isinstance(ignore, list):
        raise DataError(f"{where}: key '{key}.ignore' must be a list of module names or 're:' patterns")
    return "w4a16-experts" if any("self_attn" in str(x) for x in ignore) else "w4a16"


def quantization_from_hf_quant_config(data: dict[str, Any], where: str) -> str:
    """The vLLM ``--quantization`` value an NVIDIA ModelOpt ``hf_quant_config.json`` (its ``quantization``
    object) declares: ``quant_algo`` NVFP4 -> "modelopt_fp4", FP8 -> "fp8", MIXED_PRECISION -> "modelopt"."""
    if not isinstance(data.get("quantization"), dict):
        raise DataError(f"{where}: missing object 'quantization' of an hf_quant_config.json")
    return _quantization(data["quantization"], where, "quantization")


def _language_model(data: dict[str, Any], where: str) -> tuple[dict[str, Any], str]:
    """The config of the language model: a multimodal wrapper's ``text_config`` (with the wrapper's dtype, tied
    embeddings and quantization where the text config lacks them), else the config itself."""
    text = data.get("text_config")
    if not isinstance(text, dict):
        return data, where
    text = dict(text)
    for key in ("torch_dtype", "dtype", "tie_word_embeddings", "quantization_config"):
        if text.get(key) is None and data.get(key) is not None:
            text[key] = data[key]
    wrapper = str(data.get("model_type") or "").lower()
    if not text.get("model_type") and wrapper in _TEXT_MODEL_TYPE:
        text["model_type"] = _TEXT_MODEL_TYPE[wrapper]
    return text, f"{where}, text_config"


def _rope_factor(c: _Keys) -> None:
    """A RoPE scaling block's ``factor`` (``rope_scaling``, or ``rope_parameters`` and its per-layer-type blocks)
    must be a finite number above 0 where it is set: 0 or below stretches no context."""
    for key in ("rope_scaling", "rope_parameters"):
        block = c.get(key)
        blocks = [(key, block)] if isinstance(block, dict) else []
        blocks += (
            [(f"{key}.{k}", v) for k, v in (block or {}).items() if isinstance(v, dict)] if blocks else []
        )
        for name, b in blocks:
            f = b.get("factor")
            if f is None:
                continue
            if isinstance(f, bool) or not isinstance(f, int | float) or not math.isfinite(f) or f <= 0:
                raise DataError(f"{c.where}: key '{name}.factor' must be a positive number, got {f!r}; set the "
                                "model's scaling factor, or drop the scaling block for none")  # fmt: skip


def shapes_from_config(data: dict[str, Any], where: str, quantization: str = "") -> dict[str, Any]:
    """Architecture fields (all but name/hf_id/source/aliases/identity) from a config dict.

    `quantization`: the vLLM ``--quantization`` value of a sibling ``hf_quant_config.json``
    (`quantization_from_hf_quant_config`), used where the config has no ``quantization_config`` of its own.
    Raises DataError naming `where` and the key for an unsupported feature, a shape key its style does not read,
    a missing or malformed key.
    """
    _refuse_unsupported(data, where)
    text, where = _language_model(data, where)
    if text is not data:
        _refuse_unsupported(text, where)
    style, family = _detect_style(text, where)
    c = _Keys(text, where, family)
    _rope_factor(c)
    if style == "decoder":
        kw = _read_decoder(c, family)
    else:
        kw = _OWN_READERS[style](c) if style in _OWN_READERS else _read_classic(c, style)
    c.unread_structure()
    if style == "deepseek_v4":
        own, quantization = _deepseek_v4_quantization(c, quantization), ""
    elif style == "minimax_m3":
        own = _minimax_m3_quantization(c, quantization)
        quantization = "" if own == "mxfp8-nvfp4-experts" else quantization
    else:
        own = _quantization(text.get("quantization_config"), where, "quantization_config")
    if own and quantization and own != quantization:
        raise DataError(
            f"{where}: key 'quantization_config' says {own!r} but its hf_quant_config.json says {quantization!r}"
        )
    nbytes = _dtype_bytes(c)
    kw.update(kv_bytes=nbytes, weight_bytes=nbytes, family=family, quantization=own or quantization)
    for key in POSITION_KEYS:
        if key in text and text[key] is not None and not isinstance(text[key], bool) and text[key] == 0:
            raise DataError(f"{where}: key {key!r} is 0: the longest sequence the model takes must be positive "
                            "(leave the key out where it has no limit)")  # fmt: skip
    if kw["n_kv_heads"] == 0 or kw["n_heads"] % kw["n_kv_heads"]:
        raise DataError(
            f"{where}: {kw['n_heads']} query heads are not a multiple of {kw['n_kv_heads']} KV heads"
        )
    return kw
