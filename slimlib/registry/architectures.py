"""Model-architecture registry, and the `Architecture` of a Hugging Face ``config.json`` file (no network).

Each registry entry is the subset of its model's Hugging Face ``config.json`` (same key names and values) that fixes
the shapes; the registry and `architecture_from_config` share one parser (`slimlib.registry.config_reader`, which
lists the supported families and what it refuses), so a model described by a file and the same model taken from the
registry agree. Parameter counts come from `slimlib.registry.param_count`. An architecture's `identity` is a digest
of its content: two files with the same shapes are one model whatever their folders are called.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from slimlib.errors import DataError, UnknownNameError, close_matches_message
from slimlib.registry.config_reader import (
    STANDARD_KEYS,
    UnknownStyleWarning,
    quantization_from_hf_quant_config,
    shapes_from_config,
)
from slimlib.registry.engine_models import ENGINE_MODEL_SOURCES, ENGINE_MODEL_SPECS
from slimlib.registry.param_count import (
    CSA_RATIO,
    HCA_RATIO,
    compressor_params,
    count_parameters,
    gated_deltanet_params,
    indexer_params,
    mamba2_params,
    v4_indexer_params,
)

__all__ = [
    "Architecture",
    "architecture_from_config",
    "count_parameters",
    "get_architecture",
    "list_architectures",
    "architecture_names",
    "STANDARD_KEYS",
    "UnknownStyleWarning",
]

#: fields that name or locate a model rather than shape it (left out of `Architecture.identity`)
_NAMING_FIELDS = ("name", "hf_id", "source", "aliases", "identity")


@dataclass(frozen=True)
class Architecture:
    """Shapes of a decoder-only transformer, as SLIM needs them.

    `n_heads` query heads and `n_kv_heads` key/value heads of width `head_dim`; `ffn_kind` is "mlp" (two matrices,
    e.g. OPT) or "gated" (three, SwiGLU); `n_params` is the exact parameter count (see `count_parameters`);
    `kv_bytes`/`weight_bytes` are bytes per element; `max_position` is the context the config allows (0: not fixed,
    e.g. ALiBi); `source` says where the shapes come from. Mixture-of-experts models have `n_experts` routed
    experts per MoE layer of width `moe_ffn_size`, `experts_per_token` of which process each token (the fields
    below say more); `n_active_params` counts the parameters one token uses, the token embedding included (0 in a
    hand-built entry: the same as `n_params`); multi-token-prediction layers are not counted (vLLM serves them only
    for speculative decoding). `embedding_params` counts the token (and learned position) embeddings and the
    untied LM head: the weights vLLM's fp8 quantization leaves in the serving dtype (`slimlib.registry.precision`).
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
    # sliding-window attention: `n_sliding_layers` of the layers attend to the last `sliding_window` tokens only
    # (Llama 4's chunked local attention is recorded as a window of its chunk: the most a token attends to and a
    # layer caches); `attention_sinks`: learned per-head sink logits (gpt-oss)
    sliding_window: int = 0
    n_sliding_layers: int = 0
    attention_sinks: bool = False
    # per-kind attention (MiMo-V2): the sliding layers' own KV heads (0: `n_kv_heads`); `v_head_dim` (above) is
    # then the value heads' width of every attention layer (0: `head_dim`)
    sliding_kv_heads: int = 0
    # Gemma-4: the sliding layers' own head width (0: `head_dim`), and full layers whose value projection is their
    # key projection (``attention_k_eq_v``: no value weights; the cache still holds both)
    sliding_head_dim: int = 0
    shared_kv_projection: bool = False
    # hybrid linear attention (Gated DeltaNet: Qwen3.5, Qwen3.6): `n_linear_layers` of the layers keep a fixed-size
    # recurrent state per sequence instead of a KV cache, `linear_value_heads` states of `linear_key_head_dim` x
    # `linear_value_head_dim` elements of `state_bytes` bytes (the config's ``mamba_ssm_dtype``), beside a causal
    # convolution of `linear_conv_kernel` taps over the query, key and value channels (`linear_conv_channels`);
    # `attn_output_gate`: the full-attention layers' query projection also yields a per-channel output gate
    # Mamba-2 layers (Nemotron-H, Nemotron 3) fill the same fields (`linear_kind` "mamba2"): heads and head width
    # as the value heads, ``n_groups`` as the key heads, ``ssm_state_size`` as the key head width
    n_linear_layers: int = 0
    linear_kind: str = ""
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    state_bytes: int = 0
    attn_output_gate: bool = False
    # single-operation blocks (Nemotron-H): `n_ffnless_layers` of the layers have no FFN (a Mamba-2 or attention
    # block not followed by an MLP or MoE block); latent MoE (Nemotron 3 Super / Ultra): the routed experts work at width
    # `moe_latent_size`, between a down- and an up-projection of the hidden state shared by the layer's experts
    n_ffnless_layers: int = 0
    moe_latent_size: int = 0
    # heterogeneous blocks (Nemotron-NAS / DeciLM): `n_mixerless_layers` of the layers have neither attention nor a
    # linear mixer (an FFN only), and the FFN widths differ per layer, summing to `ffn_width_sum` (0: every FFN
    # layer has `ffn_size`, which then holds the rounded mean width)
    n_mixerless_layers: int = 0
    ffn_width_sum: int = 0
    # DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): a lightning indexer (`index_heads` heads of `index_head_dim`)
    # scores every cached token and the latent attention reads the `index_topk` best; `n_indexer_layers` of the
    # layers run (and cache keys for) their own indexer, the others reuse the previous one's selection (GLM-5.2's
    # ``indexer_types``); 0: dense attention
    n_indexer_layers: int = 0
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    # MiniMax-M3 block-sparse attention (MiniMax Sparse Attention): the `n_indexer_layers` sparse layers of a GQA
    # model score blocks of `sparse_block_size` tokens with a K-only indexer (`index_heads` query heads, one per KV
    # head, one cached key head of `index_head_dim`) and each KV head reads its `index_topk` / `sparse_block_size`
    # best blocks (`index_topk` tokens); the other layers attend to every token; 0: not block-sparse
    sparse_block_size: int = 0
    # DeepSeek-V4 compressed attention: one KV head of `head_dim` (RoPE on its last `qk_rope_head_dim`); every layer
    # attends to its last `sliding_window` tokens (`n_sliding_layers` = `n_layers`), `n_csa_layers` also to the
    # `index_topk` best of their 4:1 compressed entries (a lightning indexer of the index_* shapes in each,
    # `n_indexer_layers` = `n_csa_layers`) and `n_hca_layers` to every one of their 128:1 compressed entries; the
    # output projection in `o_groups` groups of rank `o_lora_rank`; `hc_mult` copies of the residual stream
    # (hyper-connections)
    n_csa_layers: int = 0
    n_hca_layers: int = 0
    o_groups: int = 0
    o_lora_rank: int = 0
    hc_mult: int = 0
    #: the checkpoint's own quantization (``quantization_config.quant_method`` normalized to a vLLM
    #: ``--quantization`` value, e.g. "fp8", "mxfp4", "modelopt_fp4"); '' for an unquantized checkpoint
    quantization: str = ""
    #: identity of the shapes: a digest of every field but name/hf_id/source/aliases (two configs with the same
    #: content are one model whatever their folders are called; two different ones never are); computed from the
    #: fields on construction (a value passed in is replaced), see `content_identity`
    identity: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "identity", content_identity(self))

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
        """FFN width one token passes through in an MoE layer: ``experts_per_token`` routed experts of
        ``moe_ffn_size`` (0: ``ffn_size``) and the shared experts (``ffn_size`` for a dense model); latent experts
        count as the full-width FFN of the same FLOPs."""
        if not self.is_moe:
            return self.ffn_size
        routed = self.experts_per_token * (self.moe_ffn_size or self.ffn_size)
        if self.moe_latent_size:  # the FLOPs of full-width experts: k F l / D, and the two latent projections
            routed = round(routed * self.moe_latent_size / self.hidden_size) + self.moe_latent_size
        return routed + self.n_shared_experts * (self.shared_ffn_size or self.moe_ffn_size or self.ffn_size)

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (a compressed KV latent per token and layer)."""
        return self.kv_lora_rank > 0

    @property
    def value_head_dim(self) -> int:
        """Width of a value head of MHA/GQA: `v_head_dim` where the config gives its own, else `head_dim`."""
        return self.head_dim if self.is_mla or not self.v_head_dim else self.v_head_dim

    @property
    def sliding_kv_width(self) -> int:
        """Key and value width of one KV head of the sliding-window layers: ``2 sliding_head_dim`` where they have
        their own, else the full layers' ``d_h + d_v``."""
        return 2 * self.sliding_head_dim if self.sliding_head_dim else self.head_dim + self.value_head_dim

    @property
    def kv_values_per_token_layer(self) -> int:
        """Values one token caches per (full-)attention layer: ``2 D_kv`` (keys and values; ``H_kv (d_h + d_v)``
        with value heads of their own width), or ``kv_lora_rank + qk_rope_head_dim`` for MLA (precision-free; bytes
        are the serving configuration's)."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return self.n_kv_heads * (self.head_dim + self.value_head_dim)

    @property
    def kv_values_per_token(self) -> int:
        """Values one token caches over all attention layers, the sliding layers with their own KV heads."""
        if not self.sliding_kv_heads and not self.sliding_head_dim:
            return self.n_attention_layers * self.kv_values_per_token_layer
        sliding = (self.sliding_kv_heads or self.n_kv_heads) * self.sliding_kv_width
        return (self.n_attention_layers - self.n_sliding_layers) * self.kv_values_per_token_layer + (
            self.n_sliding_layers * sliding
        )

    @property
    def is_sparse(self) -> bool:
        """True for DeepSeek sparse attention (a lightning indexer selects the tokens each query attends to)."""
        return self.index_topk > 0

    @property
    def is_block_sparse(self) -> bool:
        """True for MiniMax-M3's block-sparse GQA attention (`sparse_block_size`); `is_sparse` is then true too."""
        return self.sparse_block_size > 0

    @property
    def is_compressed(self) -> bool:
        """True for DeepSeek-V4's compressed attention (`n_csa_layers`, `n_hca_layers`)."""
        return self.n_csa_layers + self.n_hca_layers > 0

    @property
    def indexer_params(self) -> int:
        """Parameters vLLM replicates on every rank: all lightning indexers (0 without sparse attention); for
        DeepSeek-V4 also every KV compressor and each layer's fused query and KV down-projection ``D (r_q + d_h)``
        (``ReplicatedLinear`` or ``disable_tp`` in ``deepseek_v4.py`` and ``deepseek_compressor.py``)."""
        d = self.hidden_size
        # MiniMax-M3: the one index-key head and the two index norms; its index queries split as the KV heads
        if self.is_block_sparse:
            return self.n_indexer_layers * (d * self.index_head_dim + 2 * self.index_head_dim)
        if self.is_compressed:
            indexers = v4_indexer_params(d, self.q_lora_rank, self.index_heads, self.index_head_dim)
            return (
                self.n_csa_layers * (indexers + compressor_params(d, CSA_RATIO, self.head_dim))
                + self.n_hca_layers * compressor_params(d, HCA_RATIO, self.head_dim)
                + self.n_layers * d * (self.q_lora_rank + self.head_dim)
            )
        if not self.is_sparse:
            return 0
        return self.n_indexer_layers * indexer_params(d, self.q_lora_rank, self.index_heads,
                                                      self.index_head_dim)  # fmt: skip

    @property
    def n_attention_layers(self) -> int:
        """Layers that cache keys and values (full or sliding-window attention): all but the linear-attention ones
        (Gated DeltaNet or Mamba-2) and those without a mixer."""
        return self.n_layers - self.n_linear_layers - self.n_mixerless_layers

    @property
    def linear_conv_channels(self) -> int:
        """Channels of a linear-attention layer's causal convolution: ``2 H_k d_k + H_v d_v`` (Gated DeltaNet's
        queries, keys and values; Mamba-2's B, C (``n_groups`` x state) and x)."""
        return (
            2 * self.linear_key_heads * self.linear_key_head_dim
            + self.linear_value_heads * self.linear_value_head_dim
        )

    @property
    def n_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts (0 for a dense model)."""
        return self.n_layers - self.n_dense_layers - self.n_ffnless_layers if self.is_moe else 0

    @property
    def mean_ffn_width(self) -> float:
        """FFN width a token passes through, averaged over the layers: dense layers ``ffn_size``, MoE layers
        `ffn_size_active`, layers without an FFN 0."""
        if not self.is_moe:
            if self.ffn_width_sum:
                return self.ffn_width_sum / self.n_layers
            return float(self.ffn_size) * (self.n_layers - self.n_ffnless_layers) / self.n_layers
        return (
            self.n_dense_layers * self.ffn_size + self.n_moe_layers * self.ffn_size_active
        ) / self.n_layers

    @property
    def linear_layer_params(self) -> int:
        """Parameters of one linear-attention layer (`gated_deltanet_params` or `mamba2_params`); 0 without."""
        if not self.n_linear_layers:
            return 0
        shape = (self.hidden_size, self.linear_key_heads, self.linear_value_heads, self.linear_key_head_dim,
                 self.linear_value_head_dim, self.linear_conv_kernel)  # fmt: skip
        return mamba2_params(*shape) if self.linear_kind == "mamba2" else gated_deltanet_params(*shape)

    @property
    def active_params(self) -> int:
        """Parameters one token uses (`n_active_params`, or `n_params` for a dense model)."""
        return self.n_active_params or self.n_params


def content_identity(arch: Architecture) -> str:
    """A 16-hex-digit digest (sha256) of every field of `arch` but its name, HF id, source, aliases and identity."""
    content = {k: v for k, v in asdict(arch).items() if k not in _NAMING_FIELDS}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _read_json(p: Path) -> dict[str, Any]:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{p}: not a readable JSON file ({exc})") from None
    except RecursionError:
        raise DataError(f"{p}: not a readable JSON file (nested too deeply to parse)") from None
    if not isinstance(data, dict):
        raise DataError(f"{p}: expected a JSON object at the top level")
    return data


def hf_quant_config_path(config: Path) -> Path:
    """The ``hf_quant_config.json`` beside a config file: ``hf_quant_config.json`` for ``config.json``,
    ``X_hf_quant_config.json`` for ``X_config.json`` (the layout of a model folder, and of a mirror of many)."""
    stem = config.name.removesuffix("config.json")
    return config.with_name(f"{stem}hf_quant_config.json")


def architecture_from_config(path: str | os.PathLike[str]) -> Architecture:
    """Architecture from a Hugging Face ``config.json`` file, or a folder holding one (no network).

    ``torch_dtype`` (or ``dtype``) sets the KV and weight bytes: float16/bfloat16 -> 2, float32 -> 4, absent -> 2.
    Keys the style does not need (rope, dropout, ...) are ignored; missing optional keys take the defaults of the
    model's `transformers` config class (e.g. ``num_key_value_heads`` = heads, GPT-J ``n_inner`` = 4 ``n_embd``).
    The checkpoint's quantization comes from its ``quantization_config``, else from an ``hf_quant_config.json``
    beside it (`hf_quant_config_path`). Raises DataError naming the file and the key for a missing file, bad JSON,
    an unsupported style or feature, or a missing key.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise DataError(
            f"no config file at {str(p)!r}; pass a Hugging Face config.json or the folder holding it"
        )
    data = _read_json(p)
    quant = hf_quant_config_path(p)
    quantization = (
        quantization_from_hf_quant_config(_read_json(quant), f"file {str(quant)!r}")
        if quant.is_file()
        else ""
    )
    fields = shapes_from_config(data, f"config file {str(p)!r}", quantization)
    name_or_path = str(data.get("_name_or_path") or "")
    hf_id = name_or_path if _HF_ID.match(name_or_path) else ""
    if name_or_path:
        name = Path(name_or_path).name.lower()
    elif p.name == "config.json" and p.parent.name:
        name = p.parent.name.lower()
    else:
        name = p.stem.lower().removesuffix("_config") or p.stem.lower()
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


#: the MoE and latent-attention keys DeepSeek-V3 and V3.2 share
_DEEPSEEK_V3_SHAPES = {
    "first_k_dense_replace": 3, "moe_layer_freq": 1, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "topk_method": "noaux_tc", "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
}  # fmt: skip


def _deepseek_v4(d: int, layers: int, heads: int, q_rank: int, groups: int, experts: int, width: int, topk: int,
                 ratios: list[int]) -> dict[str, Any]:  # fmt: skip
    """The shape keys of a DeepSeek-V4 config.json (the keys Flash and Pro share, and theirs)."""
    return {
        "model_type": "deepseek_v4", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": q_rank,
        "o_groups": groups, "o_lora_rank": 1024, "hc_mult": 4, "sliding_window": 128, "compress_ratios": ratios,
        "num_nextn_predict_layers": 1, "index_n_heads": 64, "index_head_dim": 128, "index_topk": topk,
        "n_routed_experts": experts, "n_shared_experts": 1, "num_experts_per_tok": 6,
        "moe_intermediate_size": width, "num_hash_layers": 3, "topk_method": "noaux_tc", "vocab_size": 129280,
        "max_position_embeddings": 1048576, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "expert_dtype": "fp4", "quantization_config": {"quant_method": "fp8"},
    }  # fmt: skip


#: the Gated DeltaNet layout keys Qwen3.5-27B and Qwen3.5-35B-A3B share
_QWEN35_LINEAR = {
    "attn_output_gate": True, "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
}  # fmt: skip

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
        {**_llama_like("mistral", 4096, 32, 32, 8, 14336, 32000, 32768, "bfloat16"), "sliding_window": 4096},
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
    (
        "llama-3.1-8b",
        "meta-llama/Llama-3.1-8B",
        (
            "llama3.1-8b",
            "llama-3.1-8b-instruct",
            "meta-llama/Llama-3.1-8B-Instruct",
            "Meta-Llama-3.1-8B",
            "meta-llama-3.1-8b-instruct",
            "meta-llama/Meta-Llama-3.1-8B-Instruct",
        ),  # fmt: skip
        _llama_like("llama", 4096, 32, 32, 8, 14336, 128256, 131072, "bfloat16"),
    ),
    (
        "llama-3.1-70b",
        "meta-llama/Llama-3.1-70B",
        (
            "llama3.1-70b",
            "llama-3.1-70b-instruct",
            "meta-llama/Llama-3.1-70B-Instruct",
            "Meta-Llama-3.1-70B",
            "meta-llama-3.1-70b-instruct",
            "meta-llama/Meta-Llama-3.1-70B-Instruct",
        ),  # fmt: skip
        _llama_like("llama", 8192, 80, 64, 8, 28672, 128256, 131072, "bfloat16"),
    ),
    (
        "qwen3-32b",
        "Qwen/Qwen3-32B",
        (),
        {**_llama_like("qwen3", 5120, 64, 64, 8, 25600, 151936, 40960, "bfloat16"), "head_dim": 128},
    ),
    (
        "qwen3-235b-a22b",
        "Qwen/Qwen3-235B-A22B",
        ("qwen3-235b-a22b-instruct-2507", "Qwen/Qwen3-235B-A22B-Instruct-2507"),
        {
            **_llama_like("qwen3_moe", 4096, 94, 64, 4, 12288, 151936, 40960, "bfloat16"),
            "head_dim": 128,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 1536,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
        },
    ),
    (
        "qwen3-30b-a3b",
        "Qwen/Qwen3-30B-A3B",
        (),
        {
            **_llama_like("qwen3_moe", 2048, 48, 32, 4, 6144, 151936, 40960, "bfloat16"),
            "head_dim": 128,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 768,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
        },
    ),
    (
        "deepseek-v3",
        "deepseek-ai/DeepSeek-V3",
        ("deepseek-v3-0324", "deepseek-ai/DeepSeek-V3-0324"),
        {
            **_llama_like("deepseek_v3", 7168, 61, 128, 128, 18432, 129280, 163840, "bfloat16"),
            **_DEEPSEEK_V3_SHAPES,
            "quantization_config": {"quant_method": "fp8"},  # published in fp8 (128x128 blocks)
        },
    ),
    (
        "deepseek-v3.2",
        "deepseek-ai/DeepSeek-V3.2",
        (),
        {
            **_llama_like("deepseek_v32", 7168, 61, 128, 128, 18432, 129280, 163840, "bfloat16"),
            **_DEEPSEEK_V3_SHAPES,
            "index_n_heads": 64,
            "index_head_dim": 128,
            "index_topk": 2048,
            "quantization_config": {"quant_method": "fp8"},
        },  # fmt: skip
    ),
    (
        "glm-5",
        "zai-org/GLM-5",
        (),
        {
            **_llama_like("glm_moe_dsa", 6144, 78, 64, 64, 12288, 154880, 202752, "bfloat16"),
            "first_k_dense_replace": 3,
            "moe_layer_freq": 1,
            "n_routed_experts": 256,
            "n_shared_experts": 1,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 2048,
            "topk_method": "noaux_tc",
            "q_lora_rank": 2048,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 192,
            "qk_rope_head_dim": 64,
            "v_head_dim": 256,
            "index_n_heads": 32,
            "index_head_dim": 128,
            "index_topk": 2048,
        },  # fmt: skip
    ),
    (
        "deepseek-v4-flash",
        "deepseek-ai/DeepSeek-V4-Flash",
        (),
        _deepseek_v4(4096, 43, 64, 1024, 8, 256, 2048, 512, [0, 0] + [4, 128] * 20 + [4, 0]),
    ),
    (
        "deepseek-v4-pro",
        "deepseek-ai/DeepSeek-V4-Pro",
        (),
        _deepseek_v4(7168, 61, 128, 1536, 16, 384, 3072, 1024, [128, 128] + [4, 128] * 29 + [4, 0]),
    ),
    (
        "qwen3.5-27b",
        "Qwen/Qwen3.5-27B",
        (),
        {
            **_llama_like("qwen3_5_text", 5120, 64, 24, 4, 17408, 248320, 262144, "bfloat16"),
            "head_dim": 256,
            **_QWEN35_LINEAR,
            "linear_num_value_heads": 48,
            "linear_value_head_dim": 128,
            "mamba_ssm_dtype": "float32",
        },  # the language model of the published multimodal config (its text_config)
    ),
    (
        "qwen3.5-35b-a3b",
        "Qwen/Qwen3.5-35B-A3B",
        (),
        {
            **{
                k: v
                for k, v in _llama_like(
                    "qwen3_5_moe_text", 2048, 40, 16, 2, 0, 248320, 262144, "bfloat16"
                ).items()
                if k != "intermediate_size"
            },
            "head_dim": 256,
            **_QWEN35_LINEAR,
            "linear_num_value_heads": 32,
            "linear_value_head_dim": 128,
            "mamba_ssm_dtype": "float32",
            "num_experts": 256,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 512,
            "shared_expert_intermediate_size": 512,
        },  # fmt: skip
    ),
    (
        "nemotron-3-nano-30b-a3b",
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        (),
        {
            "model_type": "nemotron_h",
            "hidden_size": 2688,
            "num_hidden_layers": 52,
            "vocab_size": 131072,
            "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
            "num_attention_heads": 32,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "intermediate_size": 1856,
            "mamba_num_heads": 64,
            "mamba_head_dim": 64,
            "ssm_state_size": 128,
            "n_groups": 8,
            "conv_kernel": 4,
            "mamba_ssm_cache_dtype": "float32",
            "n_routed_experts": 128,
            "num_experts_per_tok": 6,
            "moe_intermediate_size": 1856,
            "n_shared_experts": 1,
            "moe_shared_expert_intermediate_size": 3712,
            "max_position_embeddings": 262144,
            "torch_dtype": "bfloat16",
        },  # fmt: skip
    ),
    (
        "gpt-oss-120b",
        "openai/gpt-oss-120b",
        (),
        {
            **{
                k: v
                for k, v in _llama_like("gpt_oss", 2880, 36, 64, 8, 2880, 201088, 131072, "").items()
                if k != "torch_dtype"
            },  # its config.json names no torch_dtype
            "head_dim": 64,
            "attention_bias": True,
            "num_local_experts": 128,
            "num_experts_per_tok": 4,
            "layer_types": ["sliding_attention", "full_attention"] * 18,
            "sliding_window": 128,
            "quantization_config": {"quant_method": "mxfp4"},  # MoE weights in MXFP4
        },
    ),
)


def _registry_entry(name: str, hf_id: str, aliases: tuple[str, ...], config: dict[str, Any]) -> Architecture:
    source = f"https://huggingface.co/{hf_id}/blob/main/config.json"
    fields = shapes_from_config(config, f"registry entry {name!r}")
    return Architecture(name=name, hf_id=hf_id, source=source, aliases=aliases, **fields)


_REGISTRY: tuple[Architecture, ...] = tuple(_registry_entry(*spec) for spec in _REGISTRY_SPECS)
_REGISTRY += tuple(  # the CPU-engine campaign's families (no hub entry; slimlib.registry.engine_models)
    replace(_registry_entry(*spec), source=ENGINE_MODEL_SOURCES[spec[0]]) for spec in ENGINE_MODEL_SPECS
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


#: architectures read from files, keyed on the resolved path and the file's (and its quantization file's) state
_FROM_FILES: dict[tuple[str, ...], Architecture] = {}


def _config_architecture(p: Path) -> Architecture:
    """`architecture_from_config` of a file or folder, cached on its resolved path, modification time and size
    (never on its folder's name: two folders named ``model`` are two entries)."""
    f = (p / "config.json" if p.is_dir() else p).resolve()
    q = hf_quant_config_path(f)
    key = tuple(str(x) for x in (f, *_state(f), *(_state(q) if q.is_file() else ())))
    if key not in _FROM_FILES:
        if len(_FROM_FILES) >= 512:
            _FROM_FILES.clear()
        _FROM_FILES[key] = architecture_from_config(p)
    return _FROM_FILES[key]


def _state(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_mtime_ns, st.st_size


class ShadowedNameWarning(UserWarning):
    """A bare model name that is both a registry entry and a local file or folder (the local one is read)."""


def _looks_like_path(text: str) -> bool:
    """True for a model argument written as a path (``./x``, ``/x``, ``~/x``, ``x/``, ``.../config.json``)."""
    return text.startswith(("./", "../", "/", "~")) or text.endswith(("/", ".json")) or text in (".", "..")


def registry_architecture(name: str) -> Architecture | None:
    """The registry's architecture of a short name or Hugging Face id (case-insensitive), else None; reads no
    file and builds no error message (`get_architecture` for paths and the closest names)."""
    return _INDEX.get(_normalize(name))


def get_architecture(name_or_path: str | os.PathLike[str] | Architecture) -> Architecture:
    """An architecture by short name or Hugging Face id (case-insensitive), or from a config.json path.

    A path to an existing file, or to a folder holding config.json, is parsed with `architecture_from_config`;
    anything else is looked up in the registry. Unknown names raise UnknownNameError listing the closest names.
    """
    if isinstance(name_or_path, Architecture):
        return name_or_path
    text = os.fspath(name_or_path)
    p = Path(text)
    try:
        local = p.is_file() or (p.is_dir() and (p / "config.json").is_file())
    except OSError:  # a name no file system takes (too long, ...): a registry name or nothing
        local = False
    arch = registry_architecture(text)
    if local:
        if arch is not None and not _looks_like_path(text):
            warnings.warn(
                f"model {text!r}: read from the local {'folder' if p.is_dir() else 'file'} {text!r}, which has the "
                f"name of the registry's {arch.name}; write ./{text} to mean the local one, or run elsewhere for "
                "the registry's",
                ShadowedNameWarning,
                stacklevel=2,
            )
        return _config_architecture(p)
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
    """The registry as a table, one row per model in registry order, with d_kv, the values a
    token caches over all layers (``kv_values_per_token``: ``2 D_kv`` per layer, MLA's latent), the MoE, MLA and
    sliding-window shapes, the checkpoint's quantization and the content identity (bytes
    served per GPU are the serving configuration's, `slimlib.model.serving`).

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
            "expert_params": a.expert_params,
            "n_dense_layers": a.n_dense_layers,
            "moe_ffn_size": a.moe_ffn_size,
            "n_shared_experts": a.n_shared_experts,
            "shared_ffn_size": a.shared_ffn_size,
            "kv_lora_rank": a.kv_lora_rank,
            "qk_rope_head_dim": a.qk_rope_head_dim,
            "kv_values_per_token": a.kv_values_per_token,
            "sliding_window": a.sliding_window,
            "n_sliding_layers": a.n_sliding_layers,
            "attention_sinks": a.attention_sinks,
            "sliding_kv_heads": a.sliding_kv_heads,
            "sliding_head_dim": a.sliding_head_dim,
            "n_linear_layers": a.n_linear_layers,
            "linear_kind": a.linear_kind,
            "n_ffnless_layers": a.n_ffnless_layers,
            "moe_latent_size": a.moe_latent_size,
            "n_mixerless_layers": a.n_mixerless_layers,
            "n_indexer_layers": a.n_indexer_layers,
            "n_csa_layers": a.n_csa_layers,
            "n_hca_layers": a.n_hca_layers,
            "index_topk": a.index_topk,
            "sparse_block_size": a.sparse_block_size,
            "quantization": a.quantization,
            "identity": a.identity,
            "aliases": ", ".join(a.aliases),
            "source": a.source,
        }
        for a in archs
    ]
    return pd.DataFrame(rows)
