"""Exact parameter counts of decoder-only transformers, from per-block helpers.

One block, one helper: `attention_params` (multi-head / grouped-query attention), `mla_params` (DeepSeek's
multi-head latent attention), `gated_deltanet_params` (linear attention), `ffn_params` (one dense FFN or one expert), `router_params`. `count_parameters`
composes them for a dense (or Mixtral-style) decoder; `count_decoder` composes them for a decoder with dense and
mixture-of-experts layers and returns the total, the parameters one token uses, the routed-expert parameters and
the embedding parameters (`ParamCounts`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CSA_RATIO",
    "HCA_RATIO",
    "FFN_KINDS",
    "ParamCounts",
    "attention_params",
    "mla_params",
    "ffn_params",
    "router_params",
    "gated_deltanet_params",
    "mamba2_params",
    "indexer_params",
    "block_sparse_indexer_params",
    "compressed_attention_params",
    "compressor_params",
    "v4_indexer_params",
    "hyper_connection_params",
    "count_parameters",
    "count_decoder",
]

FFN_KINDS = ("mlp", "gated")
#: DeepSeek-V4's compression ratios (vLLM's ``deepseek_v4`` layers take 0, 4 or 128): compressed sparse attention
#: (CSA, with a lightning indexer) and heavily compressed attention (HCA); 0 is a sliding-window-only layer
CSA_RATIO = 4
HCA_RATIO = 128


def attention_params(
    d: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    *,
    qkv_bias: bool = False,
    out_bias: bool = False,
    qk_norm: int = 0,
    sinks: bool = False,
) -> int:
    """Parameters of one attention block: ``2 D H d_h + 2 D H_kv d_h`` (q, k, v, o), ``[qkv_bias] (H + 2 H_kv) d_h``,
    ``[out_bias] D``, `qk_norm` weights of the query/key norms, and ``[sinks] H`` learned sink logits (gpt-oss)."""
    q, kv = n_heads * head_dim, n_kv_heads * head_dim
    n = 2 * d * q + 2 * d * kv
    n += (q + 2 * kv) if qkv_bias else 0
    n += d if out_bias else 0
    return n + qk_norm + (n_heads if sinks else 0)


def mla_params(
    d: int,
    n_heads: int,
    *,
    q_lora_rank: int,
    kv_lora_rank: int,
    qk_nope_head_dim: int,
    qk_rope_head_dim: int,
    v_head_dim: int,
) -> int:
    """Parameters of one multi-head latent attention block (DeepSeek-V2/V3), bias-free:

    queries ``D r_q + r_q + r_q H (d_nope + d_rope)`` (low rank, with the q_a norm) or ``D H (d_nope + d_rope)``
    (`q_lora_rank` 0); the joint KV down-projection with the RoPE key ``D (r_kv + d_rope)``, its norm ``r_kv``, the
    up-projection ``r_kv H (d_nope + d_v)``; the output ``H d_v D``."""
    qk = qk_nope_head_dim + qk_rope_head_dim
    q = d * q_lora_rank + q_lora_rank + q_lora_rank * n_heads * qk if q_lora_rank else d * n_heads * qk
    kv = (
        d * (kv_lora_rank + qk_rope_head_dim)
        + kv_lora_rank
        + kv_lora_rank * n_heads * (qk_nope_head_dim + v_head_dim)
    )
    return q + kv + n_heads * v_head_dim * d


def gated_deltanet_params(
    d: int, key_heads: int, value_heads: int, key_head_dim: int, value_head_dim: int, conv_kernel: int
) -> int:
    """Parameters of one Gated DeltaNet block (Qwen3.5 / Qwen3.6 linear attention), bias-free: the input
    projections ``D (2 H_k d_k + 2 H_v d_v + 2 H_v)`` (queries, keys, values, the output gate z, the beta and decay
    gates), the depthwise causal convolution ``(2 H_k d_k + H_v d_v) K``, the decay's ``A_log`` and ``dt_bias``
    ``2 H_v``, the gated output norm ``d_v`` and the output projection ``H_v d_v D``."""
    qk, v = 2 * key_heads * key_head_dim, value_heads * value_head_dim
    return (
        d * (qk + 2 * v + 2 * value_heads) + (qk + v) * conv_kernel + 2 * value_heads + value_head_dim + v * d
    )


def mamba2_params(
    d: int, groups: int, heads: int, state: int, head_dim: int, conv_kernel: int, conv_bias: bool = True
) -> int:
    """Parameters of one Mamba-2 mixer (Nemotron-H, Nemotron 3), projections bias-free: the input projection
    ``D (2 H P + 2 G N + H)`` (x, its gate z, B and C of `groups` x `state`, the step dt), the depthwise causal
    convolution over ``H P + 2 G N`` channels of `conv_kernel` taps (and a bias each), ``A_log``, ``D`` and
    ``dt_bias`` (``3 H``), the gated RMS norm ``H P`` and the output projection ``H P D``."""
    inner, bc = heads * head_dim, 2 * groups * state
    conv = inner + bc
    return (
        d * (2 * inner + bc + heads) + conv * (conv_kernel + int(conv_bias)) + 3 * heads + inner + inner * d
    )


def indexer_params(d: int, q_lora_rank: int, heads: int, head_dim: int) -> int:
    """Parameters of one DeepSeek sparse attention lightning indexer (DeepSeek-V3.2, GLM-5): its queries from the
    query latent ``r_q H_i d_i``, one key head ``D d_i`` with a LayerNorm ``2 d_i``, and the per-head weights
    ``D H_i``."""
    return q_lora_rank * heads * head_dim + d * head_dim + 2 * head_dim + d * heads


def block_sparse_indexer_params(d: int, heads: int, head_dim: int) -> int:
    """Parameters of one MiniMax-M3 block-sparse indexer (K-only; vLLM's ``MiniMaxM3SparseAttention``, the
    checkpoint's ``index_q_proj`` / ``index_k_proj``): the index queries ``D H_i d_i``, one index-key head
    ``D d_i`` and their per-head norms ``2 d_i``."""
    return d * heads * head_dim + d * head_dim + 2 * head_dim


def compressed_attention_params(
    d: int, n_heads: int, head_dim: int, q_lora_rank: int, o_groups: int, o_lora_rank: int
) -> int:
    """Parameters of one DeepSeek-V4 attention block without its compressor and indexer (vLLM's
    ``DeepseekV4Attention``): the query down-projection and the single KV head ``D (r_q + d_h)``, their norms
    ``r_q + d_h``, the query up-projection ``r_q H d_h``, the grouped low-rank output ``H d_h r_o`` (each of the
    ``g`` groups maps its ``H d_h / g`` values to ``r_o``) and ``g r_o D``, and one sink logit per head ``H``."""
    return (
        d * (q_lora_rank + head_dim)
        + q_lora_rank
        + head_dim
        + q_lora_rank * n_heads * head_dim
        + n_heads * head_dim * o_lora_rank
        + o_groups * o_lora_rank * d
        + n_heads
    )


def compressor_overlap(ratio: int) -> int:
    """Windows a DeepSeek-V4 compressor overlaps (vLLM's ``DeepseekCompressor``): 2 for the 4:1 (CSA) compressor,
    else 1."""
    return 2 if ratio == CSA_RATIO else 1


def compressor_params(d: int, ratio: int, width: int) -> int:
    """Parameters of one DeepSeek-V4 KV compressor of `ratio` tokens to one entry of `width` (vLLM's
    ``DeepseekCompressor``): with ``c`` = 2 for the overlapping 4:1 compressor, else 1, the position bias
    ``ratio c w``, the KV and gate projections ``2 D c w`` and the entry's RMS norm ``w``."""
    overlap = compressor_overlap(ratio)
    return ratio * overlap * width + 2 * d * overlap * width + width


def v4_indexer_params(d: int, q_lora_rank: int, heads: int, head_dim: int) -> int:
    """Parameters of one DeepSeek-V4 lightning indexer (vLLM's ``DeepseekV4Indexer``): its queries from the query
    latent ``r_q H_i d_i``, the per-head weights ``D H_i``, a LayerNorm ``2 d_i`` and a 4:1 compressor of its keys
    (`compressor_params` at width ``d_i``) in place of DeepSeek-V3.2's key projection."""
    return (
        q_lora_rank * heads * head_dim + d * heads + 2 * head_dim + compressor_params(d, CSA_RATIO, head_dim)
    )


#: DeepSeek-V4's hyper-connection sites per layer: before the attention and before the FFN
HC_SITES = 2


def hyper_connection_mixing_weights(d: int, mult: int) -> int:
    """Weights of one layer's hyper-connection mixing projections: ``(2 + n) n x n D`` at each of `HC_SITES`
    sites, ``n`` = `mult` residual copies of width `d`."""
    return HC_SITES * (2 + mult) * mult * mult * d


def hyper_connection_params(d: int, mult: int) -> int:
    """Parameters of one layer's hyper-connections (vLLM's ``DeepseekV4DecoderLayer``): the mixing projections
    (`hyper_connection_mixing_weights`) and, at each site, their bias ``(2 + n) n`` and 3 scales."""
    return hyper_connection_mixing_weights(d, mult) + HC_SITES * ((2 + mult) * mult + 3)


def ffn_params(d: int, width: int, ffn_kind: str = "gated", bias: bool = False) -> int:
    """Parameters of one FFN (or one expert) of width `width`: ``m D F`` (m = 3 gated, 2 mlp) and
    ``[bias] ((m - 1) F + D)``."""
    if ffn_kind not in FFN_KINDS:
        raise ValueError(f"ffn_kind must be one of {FFN_KINDS}, got {ffn_kind!r}")
    m = 3 if ffn_kind == "gated" else 2
    return m * d * width + (((m - 1) * width + d) if bias else 0)


def router_params(d: int, n_experts: int, bias: bool = False) -> int:
    """Parameters of one MoE router: ``D X`` and ``[bias] X`` (a learned bias, or DeepSeek's
    ``e_score_correction_bias``)."""
    return d * n_experts + (n_experts if bias else 0)


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
    """Exact parameter count of a dense (or Mixtral-style) decoder-only transformer from its shapes.

    With ``D`` hidden size, ``E`` token-embedding width (``embed_dim``, default ``D``; OPT-350M has E=512 and
    projections E<->D), ``V`` vocabulary, ``P`` learned position rows, ``L`` layers, ``A`` `attention_params`
    (`qk_norm`: RMS norms of width ``d_h`` on queries and keys, ``2 d_h``), ``M`` `ffn_params`, ``X`` = `n_experts`
    FFN experts per layer with a bias-free router (`router_params`), and ``n`` = ``D`` parameters per norm for "rms"
    or ``2D`` for "layer"::

        N = V E + P D + [E != D] 2 E D + [embed_norm] n
            + L (A + X M + [X > 1] D X + norms_per_layer n) + [final_norm] n + [not tied] V E + [lm_head_bias] V
    """
    if norm not in ("rms", "layer"):
        raise ValueError(f"norm must be 'rms' or 'layer', got {norm!r}")
    d = hidden_size
    e = d if embed_dim is None else embed_dim
    n = d if norm == "rms" else 2 * d
    attention = attention_params(
        d,
        n_heads,
        n_kv_heads,
        head_dim,
        qkv_bias=qkv_bias,
        out_bias=out_bias,
        qk_norm=2 * head_dim if qk_norm else 0,
    )
    layer = attention + n_experts * ffn_params(d, ffn_size, ffn_kind, ffn_bias) + norms_per_layer * n
    layer += router_params(d, n_experts) if n_experts > 1 else 0

    total = vocab_size * e + learned_positions * d
    total += 2 * e * d if e != d else 0
    total += n if embed_norm else 0
    total += n_layers * layer
    total += n if final_norm else 0
    total += 0 if tied_embeddings else vocab_size * e
    total += vocab_size if lm_head_bias else 0
    return int(total)


@dataclass(frozen=True)
class ParamCounts:
    """Parameters of a model: `total`; `active`, those one token uses (every dense part, the full router, the
    shared experts and `experts_per_token` routed experts per MoE layer); `experts`, all routed-expert
    parameters; `embedding`, the token embedding and the untied LM head."""

    total: int
    active: int
    experts: int
    embedding: int


def count_decoder(
    *,
    n_layers: int,
    hidden_size: int,
    vocab_size: int,
    tied_embeddings: bool,
    attention: int,
    norms_per_layer: int = 2,
    dense_ffn: int = 0,
    n_dense_layers: int = 0,
    expert: int = 0,
    n_experts: int = 0,
    experts_per_token: int = 0,
    router: int = 0,
    shared: int = 0,
    n_linear_layers: int = 0,
    linear_attention: int = 0,
    indexers: int = 0,
    n_ffnless_layers: int = 0,
    n_mixerless_layers: int = 0,
) -> ParamCounts:
    """Parameters of an RMS-norm decoder with `n_dense_layers` dense layers and ``L - n_dense_layers`` MoE layers.

    Per layer: `attention` (`attention_params` or `mla_params`; `linear_attention` in the `n_linear_layers`
    linear-attention layers, `gated_deltanet_params` or `mamba2_params`; `indexers`: all sparse-attention
    indexers' parameters) and `norms_per_layer` norms of ``D``; a dense layer adds `dense_ffn` (`ffn_params`), an
    MoE layer `router`, ``X`` = `n_experts` routed experts of `expert` parameters each and `shared` parameters of
    shared experts (and of a latent MoE's projections); `n_ffnless_layers` layers have no FFN and
    `n_mixerless_layers` no attention, each one norm fewer;
    plus the embedding ``V D``, the final norm ``D`` and an untied LM head ``V D``::

        N = V D (1 + [not tied]) + D + (L - L_lin - L_x) A + L_lin A_lin + (L norms - L_0 - L_x) D + L_dense F_dense
            + L_moe (R + X F_e + S)                         (L_moe = L - L_dense - L_0 with experts, else 0)
        N_active = N - L_moe (X - k) F_e                    (k = `experts_per_token`)
    """
    d = hidden_size
    n_moe = n_layers - n_dense_layers - n_ffnless_layers if n_experts else 0
    embedding = vocab_size * d * (1 if tied_embeddings else 2)
    experts = n_moe * n_experts * expert
    attention_total = (
        n_layers - n_linear_layers - n_mixerless_layers
    ) * attention + n_linear_layers * linear_attention
    norms = n_layers * norms_per_layer - n_ffnless_layers - n_mixerless_layers
    total = embedding + d + attention_total + norms * d + indexers
    total += (n_layers - n_moe - n_ffnless_layers) * dense_ffn + n_moe * (router + shared) + experts
    active = total - n_moe * (n_experts - experts_per_token) * expert
    return ParamCounts(total=int(total), active=int(active), experts=int(experts), embedding=int(embedding))
