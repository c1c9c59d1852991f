"""Model-architecture registry, exact parameter counts, and a reader of Hugging Face ``config.json`` files.

Each registry entry is the subset of its model's Hugging Face ``config.json`` (same key names and values) that fixes
the shapes; the registry and `architecture_from_config` share one parser, so a model described by a file and the
same model taken from the registry agree. No network and no `transformers` dependency.

Supported config styles (inferred from ``model_type``, else ``architectures``): OPT, Llama (Llama 2/3.x, Mistral,
Qwen2/2.5, Qwen3, Granite, Gemma 1/2/3, Phi-3), Phi-1/2, GPT-J, BLOOM, Falcon (including the older
``RefinedWebModel`` configs), Mixtral (mixture of experts). Each family's conventions: ``head_dim`` where the config
gives it (Gemma, Qwen3: not ``hidden / heads``), the tied-embedding default of its `transformers` config class
(Gemma: tied), its norms per layer and biases. An unknown ``model_type`` whose config has the standard keys
(`STANDARD_KEYS`) is read as Llama-style with an `UnknownStyleWarning`.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from slimlib.errors import DataError, UnknownNameError, close_matches_message
from slimlib.registry.engine_models import ENGINE_MODEL_SPECS

__all__ = [
    "Architecture",
    "architecture_from_config",
    "count_parameters",
    "get_architecture",
    "list_architectures",
    "architecture_names",
]

FFN_KINDS = ("mlp", "gated")


@dataclass(frozen=True)
class Architecture:
    """Shapes of a decoder-only transformer, as SLIM needs them.

    `n_heads` query heads and `n_kv_heads` key/value heads of width `head_dim`; `ffn_kind` is "mlp" (two matrices,
    e.g. OPT) or "gated" (three, SwiGLU); `n_params` is the exact parameter count (see `count_parameters`);
    `kv_bytes`/`weight_bytes` are bytes per element; `max_position` is the context the config allows (0: not fixed,
    e.g. ALiBi); `source` says where the shapes come from. Mixture-of-experts models (Mixtral) have `n_experts`
    FFN experts per layer of width `ffn_size`, `experts_per_token` of which process each token;
    `n_active_params` counts the parameters one token uses (0 in a hand-built entry: the same as `n_params`).
    `embedding_params` counts the token (and learned position) embeddings and the untied LM head: the weights
    vLLM's fp8 quantization leaves in the serving dtype (`slimlib.registry.precision`).
    """

    name: str
    hf_id: str
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_size: int
    ffn_kind: str
    vocab_size: int
    n_params: int
    kv_bytes: int = 2
    weight_bytes: int = 2
    max_position: int = 0
    source: str = ""
    family: str = ""
    aliases: tuple[str, ...] = ()
    n_experts: int = 1
    experts_per_token: int = 1
    n_active_params: int = 0
    embedding_params: int = 0
    # mixture of experts beyond Mixtral (DeepSeek-V3, Qwen3-MoE, gpt-oss, ...): `n_experts` routed experts of width
    # `moe_ffn_size` (0: `ffn_size`) in `n_layers - n_dense_layers` layers, `n_shared_experts` always-active experts
    # of width `shared_ffn_size` (0: `moe_ffn_size`) beside them; `ffn_size` is the dense layers' FFN width;
    # `expert_params` counts all routed-expert parameters (the part expert parallelism splits)
    moe_ffn_size: int = 0
    n_shared_experts: int = 0
    shared_ffn_size: int = 0
    n_dense_layers: int = 0
    expert_params: int = 0
    # multi-head latent attention (DeepSeek-V2/V3): a token caches `kv_lora_rank + qk_rope_head_dim` values per
    # layer (the latent and the decoupled RoPE key), not `2 D_kv`; 0: not MLA
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    q_lora_rank: int = 0
    # sliding-window attention: `n_sliding_layers` of the layers attend to the last `sliding_window` tokens only;
    # `attention_sinks`: learned per-head sink logits (gpt-oss)
    sliding_window: int = 0
    n_sliding_layers: int = 0
    attention_sinks: bool = False
    #: the checkpoint's own quantization (``quantization_config.quant_method`` normalized to a vLLM
    #: ``--quantization`` value, e.g. "fp8", "mxfp4", "modelopt_fp4"); '' for an unquantized checkpoint
    quantization: str = ""
    #: identity of the shapes: a digest of every field but name/hf_id/source/aliases (two configs with the same
    #: content are one model whatever their folders are called; two different ones never are)
    identity: str = ""

    @property
    def d_kv(self) -> int:
        """Key/value width ``D_kv = H_kv d_h`` (Eq. 4)."""
        return self.n_kv_heads * self.head_dim

    @property
    def r_ff(self) -> float:
        """FFN expansion ratio ``r_ff = D_ff / D``."""
        return self.ffn_size / self.hidden_size

    @property
    def n_ffn_matrices(self) -> int:
        """Weight matrices in one FFN block: 2 for "mlp", 3 for "gated"."""
        return 3 if self.ffn_kind == "gated" else 2

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model (more than one FFN expert per layer)."""
        return self.n_experts > 1

    @property
    def ffn_size_active(self) -> int:
        """FFN width one token passes through: ``experts_per_token * ffn_size`` (``ffn_size`` for a dense model)."""
        return self.experts_per_token * self.ffn_size

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (a compressed KV latent per token and layer)."""
        return self.kv_lora_rank > 0

    @property
    def kv_values_per_token_layer(self) -> int:
        """Values one token caches per attention layer: ``2 D_kv`` (keys and values), or ``kv_lora_rank +
        qk_rope_head_dim`` for MLA (precision-free; bytes are the serving configuration's)."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.is_mla else 2 * self.d_kv

    @property
    def n_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts (0 for a dense model)."""
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    @property
    def active_params(self) -> int:
        """Parameters one token uses (`n_active_params`, or `n_params` for a dense model)."""
        return self.n_active_params or self.n_params


# ---------------------------------------------------------------------------------------------------------------
# Parameter count
# ---------------------------------------------------------------------------------------------------------------
def count_parameters(
    *,
    n_layers: int,
    hidden_size: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    ffn_size: int,
    ffn_kind: str,
    vocab_size: int,
    tied_embeddings: bool,
    embed_dim: int | None = None,
    learned_positions: int = 0,
    qkv_bias: bool = False,
    out_bias: bool = False,
    ffn_bias: bool = False,
    norm: str = "rms",
    norms_per_layer: int = 2,
    final_norm: bool = True,
    embed_norm: bool = False,
    lm_head_bias: bool = False,
    n_experts: int = 1,
    qk_norm: bool = False,
) -> int:
    """Exact parameter count of a decoder-only transformer from its shapes.

    With ``D`` hidden size, ``E`` token-embedding width (``embed_dim``, default ``D``; OPT-350M has E=512 and
    projections E<->D), ``V`` vocabulary, ``P`` learned position rows, ``L`` layers, ``H``/``H_kv`` query/KV heads
    of width ``d_h``, FFN width ``F`` with ``m`` = 2 ("mlp") or 3 ("gated") matrices, and ``n`` = ``D`` parameters
    per norm for "rms" or ``2D`` for "layer" (weight and bias), and ``X`` = `n_experts` FFN experts per layer (a
    mixture of experts adds a bias-free router of ``D X`` parameters per layer; `qk_norm` (Qwen3, Gemma 3) adds
    RMS norms of width ``d_h`` on the queries and keys, ``2 d_h`` per layer)::

        N = V E + P D + [E != D] 2 E D + [embed_norm] n
            + L (A + X M + [X > 1] D X + norms_per_layer n) + [final_norm] n + [not tied] V E + [lm_head_bias] V
        A = 2 D H d_h + 2 D H_kv d_h + [qkv_bias] (H + 2 H_kv) d_h + [out_bias] D + [qk_norm] 2 d_h
        M = m D F + [ffn_bias] ((m - 1) F + D)
    """
    if ffn_kind not in FFN_KINDS:
        raise ValueError(f"ffn_kind must be one of {FFN_KINDS}, got {ffn_kind!r}")
    if norm not in ("rms", "layer"):
        raise ValueError(f"norm must be 'rms' or 'layer', got {norm!r}")
    d = hidden_size
    e = d if embed_dim is None else embed_dim
    q_width = n_heads * head_dim
    kv_width = n_kv_heads * head_dim
    m = 3 if ffn_kind == "gated" else 2
    n = d if norm == "rms" else 2 * d

    attention = 2 * d * q_width + 2 * d * kv_width
    attention += (q_width + 2 * kv_width) if qkv_bias else 0
    attention += d if out_bias else 0
    attention += 2 * head_dim if qk_norm else 0
    ffn = m * d * ffn_size + (((m - 1) * ffn_size + d) if ffn_bias else 0)
    layer = attention + n_experts * ffn + norms_per_layer * n
    layer += d * n_experts if n_experts > 1 else 0

    total = vocab_size * e + learned_positions * d
    total += 2 * e * d if e != d else 0
    total += n if embed_norm else 0
    total += n_layers * layer
    total += n if final_norm else 0
    total += 0 if tied_embeddings else vocab_size * e
    total += vocab_size if lm_head_bias else 0
    return int(total)


# ---------------------------------------------------------------------------------------------------------------
# config.json parsing
# ---------------------------------------------------------------------------------------------------------------
_DTYPE_BYTES = {
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float32": 4,
    "fp32": 4,
    "float": 4,
}

_STYLE_BY_MODEL_TYPE = {
    "opt": "opt",
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "llama",
    "granite": "llama",
    "mixtral": "llama",
    "qwen3": "llama",
    "gemma": "llama",
    "gemma2": "llama",
    "gemma3_text": "llama",
    "phi3": "llama",
    "phi": "phi",
    "gptj": "gptj",
    "bloom": "bloom",
    "falcon": "falcon",
    "refinedwebmodel": "falcon",
    "refinedweb": "falcon",
}

_STYLE_BY_ARCHITECTURE = {
    "OPTForCausalLM": "opt",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "llama",
    "Qwen2ForCausalLM": "llama",
    "GraniteForCausalLM": "llama",
    "MixtralForCausalLM": "llama",
    "Qwen3ForCausalLM": "llama",
    "GemmaForCausalLM": "llama",
    "Gemma2ForCausalLM": "llama",
    "Gemma3ForCausalLM": "llama",
    "Phi3ForCausalLM": "llama",
    "PhiForCausalLM": "phi",
    "GPTJForCausalLM": "gptj",
    "BloomForCausalLM": "bloom",
    "FalconForCausalLM": "falcon",
    "RWForCausalLM": "falcon",
}


class _Keys:
    """Keyed access to a config dict whose errors name the file and the key."""

    def __init__(self, data: dict[str, Any], where: str, style: str) -> None:
        self.data = data
        self.where = where
        self.style = style

    def get(self, *keys: str, default: Any = None) -> Any:
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

    def integer(self, *keys: str, default: int | None = None) -> int:
        value = self.require(*keys) if default is None else self.get(*keys, default=default)
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 0:
            raise DataError(f"{self.where}: key {keys[0]!r} must be a non-negative integer, got {value!r}")
        return int(value)


#: keys every dense decoder config of the Llama lineage has; an unknown model_type with all of them is read as
#: Llama-style, with a warning
STANDARD_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")

#: per model_type conventions of the Llama-style reader: tied-embedding default (the transformers config class's),
#: RMS norms per layer, q/k norms, q/k/v biases always on
_LLAMA_CONVENTIONS: dict[str, dict[str, Any]] = {
    "qwen2": {"qkv_bias": True},
    "qwen3": {"qk_norm": True},
    "gemma": {"tied": True},
    "gemma2": {"tied": True, "norms": 4},  # input, post-attention, pre- and post-feedforward
    "gemma3_text": {"tied": True, "norms": 4, "qk_norm": True},
}


class UnknownStyleWarning(UserWarning):
    """A config.json of an unknown model_type read as a Llama-style decoder from its standard keys."""


def _detect_style(data: dict[str, Any], where: str) -> str:
    model_type = str(data.get("model_type") or "").lower()
    if model_type in _STYLE_BY_MODEL_TYPE:
        return _STYLE_BY_MODEL_TYPE[model_type]
    for arch in data.get("architectures") or []:
        if arch in _STYLE_BY_ARCHITECTURE:
            return _STYLE_BY_ARCHITECTURE[arch]
    what = f"model_type {data.get('model_type')!r}" if data.get("model_type") else "no 'model_type'"
    missing = [k for k in STANDARD_KEYS if data.get(k) is None]
    if not missing:
        warnings.warn(
            f"{where}: {what} is not a known style; read as a Llama-style decoder (gated FFN, RMSNorm, no biases "
            "unless attention_bias/mlp_bias say so) from its standard keys: check n_params in `slim models`",
            UnknownStyleWarning,
            stacklevel=4,
        )
        return "llama"
    known = ", ".join(sorted(_STYLE_BY_MODEL_TYPE))
    raise DataError(
        f"{where}: {what} and architectures {data.get('architectures')!r} are not a supported style, and the "
        f"config lacks the standard key(s) {', '.join(missing)} a dense decoder is read from; supported "
        f"model_type values: {known}"
    )


def _dtype_bytes(c: _Keys) -> int:
    dtype = c.get("torch_dtype", "dtype", default="float16")
    key = str(dtype).lower().removeprefix("torch.")
    if key not in _DTYPE_BYTES:
        raise DataError(
            f"{c.where}: torch_dtype {dtype!r} is not one of {', '.join(sorted(_DTYPE_BYTES))}; "
            "set it to the dtype the model is served in"
        )
    return _DTYPE_BYTES[key]


def _head_dim(c: _Keys, hidden: int, heads: int, explicit: int | None = None) -> int:
    if explicit is not None:
        return explicit
    if heads == 0 or hidden % heads:
        raise DataError(f"{c.where}: hidden size {hidden} is not divisible by {heads} heads; add 'head_dim'")
    return hidden // heads


def _shapes_from_config(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Architecture fields (all but name/hf_id/source/aliases) from a config dict."""
    style = _detect_style(data, where)
    c = _Keys(data, where, style)
    model_type = str(data.get("model_type") or "").lower()
    kw: dict[str, Any] = {}

    if style == "opt":
        d = c.integer("hidden_size")
        layers = c.integer("num_hidden_layers")
        heads = c.integer("num_attention_heads")
        ffn = c.integer("ffn_dim")
        vocab = c.integer("vocab_size")
        max_pos = c.integer("max_position_embeddings", default=2048)
        embed = c.integer("word_embed_proj_dim", default=d)
        bias = bool(c.get("enable_bias", default=True))
        pre_norm = bool(c.get("do_layer_norm_before", default=True))
        final = pre_norm and not bool(c.get("_remove_final_layer_norm", default=False))
        hd = _head_dim(c, d, heads)
        kw = dict(n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=heads, head_dim=hd, ffn_size=ffn)
        kw.update(ffn_kind="mlp", vocab_size=vocab, max_position=max_pos)
        count: dict[str, Any] = dict(
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
    elif style == "llama":
        d = c.integer("hidden_size")
        layers = c.integer("num_hidden_layers")
        heads = c.integer("num_attention_heads")
        kv = c.integer("num_key_value_heads", default=heads)
        ffn = c.integer("intermediate_size")
        vocab = c.integer("vocab_size")
        hd = _head_dim(c, d, heads, c.integer("head_dim") if c.get("head_dim") is not None else None)
        conv = _LLAMA_CONVENTIONS.get(model_type, {})
        attn_bias = bool(c.get("attention_bias", default=False))
        qkv_bias = True if conv.get("qkv_bias") else attn_bias  # Qwen2 always has q/k/v biases, no o bias
        kw = dict(n_layers=layers, hidden_size=d, n_heads=heads, n_kv_heads=kv, head_dim=hd, ffn_size=ffn)
        kw.update(
            ffn_kind="gated", vocab_size=vocab, max_position=c.integer("max_position_embeddings", default=0)
        )
        experts = c.integer("num_local_experts", default=1)
        kw.update(n_experts=experts, experts_per_token=c.integer("num_experts_per_tok", default=1))
        count = dict(
            n_experts=experts,
            tied_embeddings=bool(c.get("tie_word_embeddings", default=conv.get("tied", False))),
            qkv_bias=qkv_bias,
            out_bias=attn_bias and not conv.get("qkv_bias"),
            ffn_bias=bool(c.get("mlp_bias", default=False)),
            norm="rms",
            norms_per_layer=conv.get("norms", 2),
            final_norm=True,
            qk_norm=bool(conv.get("qk_norm", False)),
        )
    elif style == "phi":  # Phi-1/1.5/2: parallel attention and MLP off one LayerNorm, biases everywhere
        d = c.integer("hidden_size")
        layers = c.integer("num_hidden_layers")
        heads = c.integer("num_attention_heads")
        kv = c.integer("num_key_value_heads", default=heads)
        ffn = c.integer("intermediate_size")
        vocab = c.integer("vocab_size")
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
        d = c.integer("n_embd")
        layers = c.integer("n_layer")
        heads = c.integer("n_head")
        ffn = c.integer("n_inner", default=4 * d)
        vocab = c.integer("vocab_size")
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
        d = c.integer("hidden_size", "n_embed")
        layers = c.integer("n_layer", "num_hidden_layers")
        heads = c.integer("n_head", "num_attention_heads")
        vocab = c.integer("vocab_size")
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
        d = c.integer("hidden_size")
        layers = c.integer("num_hidden_layers", "n_layer")
        heads = c.integer("num_attention_heads", "n_head")
        new_arch = bool(c.get("new_decoder_architecture", default=False))
        if new_arch:
            kv = c.integer("num_kv_heads", "n_head_kv", default=heads)
        elif bool(c.get("multi_query", default=True)):
            kv = 1
        else:
            kv = heads
        ffn = c.integer("ffn_hidden_size", default=4 * d)
        vocab = c.integer("vocab_size")
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

    nbytes = _dtype_bytes(c)
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
    kw["n_params"] = count_parameters(**{k: kw[k] for k in shape_keys}, **count)
    if kw.get("n_experts", 1) > 1:  # a token passes through experts_per_token of the experts
        kw["n_active_params"] = (
            count_parameters(
                **{k: kw[k] for k in shape_keys}, **{**count, "n_experts": kw["experts_per_token"]}
            )
            + (kw["n_experts"] - kw["experts_per_token"]) * kw["hidden_size"] * kw["n_layers"]
        )  # full router
    else:
        kw["n_active_params"] = kw["n_params"]
    e = count.get("embed_dim") or kw["hidden_size"]
    tables = 1 if count.get("tied_embeddings") else 2
    kw["embedding_params"] = (
        tables * kw["vocab_size"] * e + count.get("learned_positions", 0) * kw["hidden_size"]
    )
    family = (
        model_type if style == "llama" and model_type else style
    )  # llama, mistral, qwen2, qwen3, gemma, ...
    kw.update(kv_bytes=nbytes, weight_bytes=nbytes, family=family)
    if kw["n_kv_heads"] == 0 or kw["n_heads"] % kw["n_kv_heads"]:
        raise DataError(
            f"{where}: {kw['n_heads']} query heads are not a multiple of {kw['n_kv_heads']} KV heads"
        )
    return kw


_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def architecture_from_config(path: str | os.PathLike[str]) -> Architecture:
    """Architecture from a Hugging Face ``config.json`` file, or a folder holding one (no network).

    ``torch_dtype`` (or ``dtype``) sets the KV and weight bytes: float16/bfloat16 -> 2, float32 -> 4, absent -> 2.
    Keys the style does not need (rope, dropout, ...) are ignored; missing optional keys take the defaults of the
    model's `transformers` config class (e.g. ``num_key_value_heads`` = heads, GPT-J ``n_inner`` = 4 ``n_embd``).
    Raises DataError naming the file for a missing file, bad JSON, an unsupported style or a missing key.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise DataError(
            f"no config file at {str(p)!r}; pass a Hugging Face config.json or the folder holding it"
        )
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{p}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise DataError(f"{p}: expected a JSON object at the top level")
    where = f"config file {str(p)!r}"
    fields = _shapes_from_config(data, where)
    name_or_path = str(data.get("_name_or_path") or "")
    hf_id = name_or_path if _HF_ID.match(name_or_path) else ""
    if name_or_path:
        name = Path(name_or_path).name.lower()
    else:
        name = (p.parent.name if p.name == "config.json" and p.parent.name else p.stem).lower()
    return Architecture(name=name, hf_id=hf_id, source=f"config.json file {p}", **fields)


# ---------------------------------------------------------------------------------------------------------------
# Registry: the shape-fixing keys of each model's Hugging Face config.json
# ---------------------------------------------------------------------------------------------------------------
def _opt(d: int, layers: int, heads: int, embed: int | None = None, pre_norm: bool = True) -> dict[str, Any]:
    return {
        "model_type": "opt",
        "hidden_size": d,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "ffn_dim": 4 * d,
        "vocab_size": 50272,
        "max_position_embeddings": 2048,
        "word_embed_proj_dim": d if embed is None else embed,
        "do_layer_norm_before": pre_norm,
        "torch_dtype": "float16",
    }


def _llama_like(
    model_type: str,
    d: int,
    layers: int,
    heads: int,
    kv: int,
    ffn: int,
    vocab: int,
    max_pos: int,
    dtype: str,
    tie: bool = False,
) -> dict[str, Any]:
    return {
        "model_type": model_type,
        "hidden_size": d,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": ffn,
        "vocab_size": vocab,
        "max_position_embeddings": max_pos,
        "tie_word_embeddings": tie,
        "torch_dtype": dtype,
    }


# (name, Hugging Face id, extra aliases, config subset)
_REGISTRY_SPECS: tuple[tuple[str, str, tuple[str, ...], dict[str, Any]], ...] = (
    ("opt-125m", "facebook/opt-125m", (), _opt(768, 12, 12)),
    ("opt-350m", "facebook/opt-350m", (), _opt(1024, 24, 16, embed=512, pre_norm=False)),
    ("opt-1.3b", "facebook/opt-1.3b", (), _opt(2048, 24, 32)),
    ("opt-2.7b", "facebook/opt-2.7b", (), _opt(2560, 32, 32)),
    ("opt-6.7b", "facebook/opt-6.7b", (), _opt(4096, 32, 32)),
    ("opt-13b", "facebook/opt-13b", (), _opt(5120, 40, 40)),
    ("opt-30b", "facebook/opt-30b", (), _opt(7168, 48, 56)),
    ("opt-66b", "facebook/opt-66b", (), _opt(9216, 64, 72)),
    (
        "llama-2-7b",
        "meta-llama/Llama-2-7b-hf",
        ("llama2-7b", "llama-2-7b-chat", "llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-chat-hf"),
        _llama_like("llama", 4096, 32, 32, 32, 11008, 32000, 4096, "float16"),
    ),
    (
        "llama-2-13b",
        "meta-llama/Llama-2-13b-hf",
        ("llama2-13b", "llama-2-13b-chat", "llama-2-13b-chat-hf", "meta-llama/Llama-2-13b-chat-hf"),
        _llama_like("llama", 5120, 40, 40, 40, 13824, 32000, 4096, "float16"),
    ),
    (
        "llama-2-70b",
        "meta-llama/Llama-2-70b-hf",
        ("llama2-70b", "llama-2-70b-chat", "llama-2-70b-chat-hf", "meta-llama/Llama-2-70b-chat-hf"),
        _llama_like("llama", 8192, 80, 64, 8, 28672, 32000, 4096, "float16"),
    ),
    (
        "llama-3-8b",
        "meta-llama/Meta-Llama-3-8B",
        (
            "llama3-8b",
            "llama-3-8b-instruct",
            "meta-llama-3-8b-instruct",
            "meta-llama/Meta-Llama-3-8B-Instruct",
        ),
        _llama_like("llama", 4096, 32, 32, 8, 14336, 128256, 8192, "bfloat16"),
    ),
    (
        "llama-3-70b",
        "meta-llama/Meta-Llama-3-70B",
        (
            "llama3-70b",
            "llama-3-70b-instruct",
            "meta-llama-3-70b-instruct",
            "meta-llama/Meta-Llama-3-70B-Instruct",
        ),
        _llama_like("llama", 8192, 80, 64, 8, 28672, 128256, 8192, "bfloat16"),
    ),
    (
        "mistral-7b",
        "mistralai/Mistral-7B-v0.1",
        ("mistral-7b-v0.1",),
        _llama_like("mistral", 4096, 32, 32, 8, 14336, 32000, 32768, "bfloat16"),
    ),
    (
        "granite-8b",
        "ibm-granite/granite-3.0-8b-instruct",
        ("granite-3.0-8b", "granite-3.0-8b-base", "ibm-granite/granite-3.0-8b-base"),
        _llama_like("granite", 4096, 40, 32, 8, 12800, 49155, 4096, "bfloat16", tie=True),
    ),
    (
        "qwen2-7b",
        "Qwen/Qwen2-7B",
        (),
        _llama_like("qwen2", 3584, 28, 28, 4, 18944, 152064, 131072, "bfloat16"),
    ),
    (
        "qwen2-72b",
        "Qwen/Qwen2-72B",
        (),
        _llama_like("qwen2", 8192, 80, 64, 8, 29568, 152064, 131072, "bfloat16"),
    ),
    (
        "mixtral-8x7b",
        "mistralai/Mixtral-8x7B-v0.1",
        ("mixtral-8x7b-v0.1", "mixtral-8x7b-instruct", "mistralai/Mixtral-8x7B-Instruct-v0.1"),
        {
            **_llama_like("mixtral", 4096, 32, 32, 8, 14336, 32000, 32768, "bfloat16"),
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
        },
    ),
)


def _registry_entry(name: str, hf_id: str, aliases: tuple[str, ...], config: dict[str, Any]) -> Architecture:
    source = f"https://huggingface.co/{hf_id}/blob/main/config.json"
    fields = _shapes_from_config(config, f"registry entry {name!r}")
    return Architecture(name=name, hf_id=hf_id, source=source, aliases=aliases, **fields)


_REGISTRY: tuple[Architecture, ...] = tuple(_registry_entry(*spec) for spec in _REGISTRY_SPECS)
_REGISTRY += (
    tuple(  # the CPU-engine campaign's scaled OPT family (no hub entry; slimlib.registry.engine_models)
        replace(
            _registry_entry(*spec), source="OPT shapes / 8, slimlib.registry.engine_models (random weights)"
        )
        for spec in ENGINE_MODEL_SPECS
    )
)


def _normalize(name: str) -> str:
    return re.sub(r"[\s_]+", "-", str(name).strip().lower())


def _build_index() -> dict[str, Architecture]:
    index: dict[str, Architecture] = {}
    for arch in _REGISTRY:
        keys = {arch.name, arch.hf_id, arch.hf_id.split("/")[-1], *arch.aliases}
        for key in keys:
            k = _normalize(key)
            if k in index and index[k] is not arch:
                raise RuntimeError(f"architecture alias {key!r} is used twice")  # pragma: no cover
            index[k] = arch
    return index


_INDEX = _build_index()


def architecture_names() -> list[str]:
    """Canonical registry names, in registry order (family, then size)."""
    return [a.name for a in _REGISTRY]


def get_architecture(name_or_path: str | os.PathLike[str] | Architecture) -> Architecture:
    """An architecture by short name or Hugging Face id (case-insensitive), or from a config.json path.

    A path to an existing file, or to a folder holding config.json, is parsed with `architecture_from_config`;
    anything else is looked up in the registry. Unknown names raise UnknownNameError listing the closest names.
    """
    if isinstance(name_or_path, Architecture):
        return name_or_path
    text = os.fspath(name_or_path)
    p = Path(text)
    if p.is_file() or (p.is_dir() and (p / "config.json").is_file()):
        return architecture_from_config(p)
    arch = _INDEX.get(_normalize(text))
    if arch is not None:
        return arch
    if text.lower().endswith(".json"):
        raise DataError(
            f"no config file at {text!r}; pass a Hugging Face config.json or the folder holding it"
        )
    raise UnknownNameError(
        close_matches_message("model", text, architecture_names())
        + "; see `slim models`, or pass the path of a config.json"
    )


def list_architectures(names: Iterable[str | os.PathLike[str]] | None = None) -> pd.DataFrame:
    """The registry as a table, one row per model in registry order, with d_kv (bytes served per GPU are the
    serving configuration's, `slimlib.model.serving`).

    `names` (optional): only these models, in the given order; each may be a name, an HF id or a config.json path.
    """
    archs = _REGISTRY if names is None else [get_architecture(n) for n in names]
    rows = [
        {
            "name": a.name,
            "hf_id": a.hf_id,
            "family": a.family,
            "n_layers": a.n_layers,
            "hidden_size": a.hidden_size,
            "n_heads": a.n_heads,
            "n_kv_heads": a.n_kv_heads,
            "head_dim": a.head_dim,
            "d_kv": a.d_kv,
            "ffn_size": a.ffn_size,
            "ffn_kind": a.ffn_kind,
            "vocab_size": a.vocab_size,
            "n_params": a.n_params,
            "kv_bytes": a.kv_bytes,
            "weight_bytes": a.weight_bytes,
            "max_position": a.max_position,
            "n_experts": a.n_experts,
            "experts_per_token": a.experts_per_token,
            "n_active_params": a.active_params,
            "aliases": ", ".join(a.aliases),
            "source": a.source,
        }
        for a in archs
    ]
    return pd.DataFrame(rows)
