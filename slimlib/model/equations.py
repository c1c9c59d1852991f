"""The SLIM equations (paper Eqs. 3-12) as pure, vectorized functions.

Every argument may be a scalar or a numpy array; arrays broadcast. Units: seconds, bytes, FLOP, FLOP/s, bytes/s.
Symbols follow the paper: B batch size, IL input length, OL output length, L layers, D hidden size, D_kv key/value
projection width, D_ff FFN hidden size, b_kv bytes per KV element.

FFN generalization (Eq. 8). The paper counts the FFN as ``4 r_ff D^2`` FLOPs per token: two matrices (up, down) of
``D x D_ff`` at 2 FLOPs per multiply-accumulate, with ``r_ff = D_ff / D``. A gated FFN (SwiGLU: gate, up, down) has
three such matrices, so the exact count is ``2 * n_ffn_matrices * D * D_ff`` FLOPs per token, which equals the paper's
``4 r_ff D^2`` when ``n_ffn_matrices = 2``. `prefill_flops` takes ``n_ffn_matrices`` (2 or 3) for that reason.
"""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "d_kv",
    "active_context",
    "prefill_flops",
    "layer_prefill_flops",
    "ATTENTION_FLOPS_EQ8",
    "ATTENTION_FLOPS_CAUSAL",
    "dense_flops_per_token",
    "prefill_time",
    "kv_scan_tokens",
    "decode_kv_bytes",
    "dense_decode_time",
    "decode_batch_factor",
    "decode_time",
    "window_scan_tokens",
    "sparse_pair_share",
    "e2e_latency",
    "throughput",
    "experts_touched",
    "decode_attention_flops",
    "decode_attention_bytes",
]


def d_kv(hidden_size: ArrayLike, n_heads: ArrayLike, n_kv_heads: ArrayLike) -> FloatArray:
    """Key/value projection width ``D_kv = H_kv d_h = D H_kv / H_q`` (Eq. 4); MHA gives D, GQA/MQA less."""
    return cast(
        FloatArray,
        np.asarray(hidden_size, dtype=float)
        * np.asarray(n_kv_heads, dtype=float)
        / np.asarray(n_heads, dtype=float),
    )


def active_context(batch_size: ArrayLike, input_len: ArrayLike, generated: ArrayLike) -> FloatArray:
    """Active context ``A_t = sum_r (IL_r + y_{r,t})`` (Eq. 3) for a batch of B requests with equal IL and y."""
    return cast(
        FloatArray,
        np.asarray(batch_size, dtype=float)
        * (np.asarray(input_len, dtype=float) + np.asarray(generated, dtype=float)),
    )


def prefill_flops(
    batch_size: ArrayLike,
    input_len: ArrayLike,
    n_layers: ArrayLike,
    hidden_size: ArrayLike,
    d_kv_width: ArrayLike,
    ffn_size: ArrayLike,
    n_ffn_matrices: ArrayLike = 2,
) -> FloatArray:
    """Prefill FLOPs (Eq. 8): ``L [B IL (4D^2 + 4 D D_kv + 2 n_ffn D D_ff) + 4 B IL^2 D]``.

    With ``n_ffn_matrices = 2`` the FFN part is the paper's ``4 r_ff D^2``; 3 counts a gated FFN exactly.
    """
    per_token = dense_flops_per_token(hidden_size, d_kv_width, ffn_size, n_ffn_matrices)
    return layer_prefill_flops(batch_size, input_len, n_layers, hidden_size, per_token)


#: prefill attention FLOPs per layer and prompt in units of ``IL^2 D``: Eq. 8 counts ``QK^T`` and ``PV`` over the
#: whole ``IL x IL`` square (4); a causal decoder's kernel computes the lower triangle only (FlashAttention-style
#: kernels skip the masked blocks), half of it (2), the count of the recommended model
ATTENTION_FLOPS_EQ8 = 4.0
ATTENTION_FLOPS_CAUSAL = 2.0


def layer_prefill_flops(
    batch_size: ArrayLike,
    input_len: ArrayLike,
    n_layers: ArrayLike,
    hidden_size: ArrayLike,
    linear_flops_per_layer: ArrayLike,
    attention_flops: float = ATTENTION_FLOPS_EQ8,
) -> FloatArray:
    """Eq. 8 given the linear (projection and FFN) FLOPs of one token in one layer, ``F_lin``:
    ``L [B IL F_lin + a B IL^2 D]``, ``a`` = `attention_flops` (Eq. 8's 4, or `ATTENTION_FLOPS_CAUSAL`)."""
    b = np.asarray(batch_size, dtype=float)
    il = np.asarray(input_len, dtype=float)
    dim = np.asarray(hidden_size, dtype=float)
    per_token = np.asarray(linear_flops_per_layer, dtype=float)
    attn = float(attention_flops) * b * il**2 * dim
    return cast(FloatArray, np.asarray(n_layers, dtype=float) * (b * il * per_token + attn))


def dense_flops_per_token(
    hidden_size: ArrayLike, d_kv_width: ArrayLike, ffn_size: ArrayLike, n_ffn_matrices: ArrayLike = 2
) -> FloatArray:
    """Projection and FFN FLOPs of one token in one layer (the bracket of Eq. 8 without attention):
    ``4 D^2 + 4 D D_kv + 2 n_ffn D D_ff``."""
    dim = np.asarray(hidden_size, dtype=float)
    dkv = np.asarray(d_kv_width, dtype=float)
    dff = np.asarray(ffn_size, dtype=float)
    return cast(
        FloatArray, 4.0 * dim**2 + 4.0 * dim * dkv + 2.0 * np.asarray(n_ffn_matrices, dtype=float) * dim * dff
    )


def prefill_time(flops: ArrayLike, peak_flops: ArrayLike, eta_c: ArrayLike) -> FloatArray:
    """Prefill time ``T_pre = F_pre / (eta_c F_max)`` (Eq. 7)."""
    return cast(
        FloatArray,
        np.asarray(flops, dtype=float)
        / (np.asarray(eta_c, dtype=float) * np.asarray(peak_flops, dtype=float)),
    )


def kv_scan_tokens(input_len: ArrayLike, output_len: ArrayLike) -> FloatArray:
    """KV positions read over a request's decode, ``C(IL, OL) = OL (IL + 1) + OL (OL - 1) / 2`` (Eq. 12)."""
    il = np.asarray(input_len, dtype=float)
    ol = np.asarray(output_len, dtype=float)
    return ol * (il + 1.0) + ol * (ol - 1.0) / 2.0


def decode_kv_bytes(
    n_layers: ArrayLike, d_kv_width: ArrayLike, kv_bytes: ArrayLike, scan_tokens: ArrayLike
) -> FloatArray:
    """KV-cache read traffic of one request's decode, ``M_dec = 2 L D_kv b_kv C(IL, OL)`` (Eq. 11), in bytes."""
    return cast(
        FloatArray,
        2.0
        * np.asarray(n_layers, dtype=float)
        * np.asarray(d_kv_width, dtype=float)
        * np.asarray(kv_bytes, dtype=float)
        * np.asarray(scan_tokens, dtype=float),
    )


def dense_decode_time(
    output_len: ArrayLike, n_layers: ArrayLike, hidden_size: ArrayLike, alpha: ArrayLike, gamma: ArrayLike
) -> FloatArray:
    """Dense decode time ``T_d = alpha OL + gamma L (D / 1024)^2 OL`` (Eq. 10), seconds per request."""
    ol = np.asarray(output_len, dtype=float)
    scale = np.asarray(n_layers, dtype=float) * (np.asarray(hidden_size, dtype=float) / 1024.0) ** 2
    return cast(FloatArray, np.asarray(alpha, dtype=float) * ol + np.asarray(gamma, dtype=float) * scale * ol)


def decode_time(
    batch_size: ArrayLike,
    dense_time: ArrayLike,
    kv_bytes_read: ArrayLike,
    mem_bw: ArrayLike,
    eta_m: ArrayLike,
    b0: ArrayLike,
) -> FloatArray:
    """Decode time ``T_dec = (B + B0) / eta_m [T_d + M_dec / BW_max]`` (Eq. 9)."""
    per_request = np.asarray(dense_time, dtype=float) + np.asarray(kv_bytes_read, dtype=float) / np.asarray(
        mem_bw, dtype=float
    )
    return cast(FloatArray, decode_batch_factor(batch_size, eta_m, b0) * per_request)


def decode_batch_factor(batch_size: ArrayLike, eta_m: ArrayLike, b0: ArrayLike) -> FloatArray:
    """Eq. 9's factor on the per-request decode time: ``(B + B0) / eta_m``."""
    b = np.asarray(batch_size, dtype=float)
    return cast(FloatArray, (b + np.asarray(b0, dtype=float)) / np.asarray(eta_m, dtype=float))


def window_scan_tokens(input_len: ArrayLike, output_len: ArrayLike, window: ArrayLike) -> FloatArray:
    """KV positions a sliding-window layer reads over a request's decode (Eq. 12 with each step's context capped at
    the window ``W``): ``sum_{t<OL} min(IL + 1 + t, W)``; with ``n = clip(W - IL, 0, OL)`` uncapped steps,
    ``n (IL + 1) + n (n - 1) / 2 + (OL - n) W`` (beyond the paper). Equals `kv_scan_tokens` when ``W >= IL + OL``."""
    il = np.asarray(input_len, dtype=float)
    ol = np.asarray(output_len, dtype=float)
    w = np.asarray(window, dtype=float)
    n = np.clip(w - il, 0.0, ol)
    return cast(FloatArray, n * (il + 1.0) + n * (n - 1.0) / 2.0 + (ol - n) * w)


def sparse_pair_share(input_len: ArrayLike, topk: ArrayLike) -> FloatArray:
    """Share of a causal prompt's (query, key) pairs a sparse attention computes when each query reads at most
    `topk` keys: 1 where ``IL <= k`` (or ``k`` = 0, dense), else ``(k (k + 1) / 2 + (IL - k) k) / (IL (IL + 1) / 2)``
    (beyond the paper)."""
    il = np.asarray(input_len, dtype=float)
    k = np.asarray(topk, dtype=float)
    sparse = (k > 0) & (il > k)
    pairs = k * (k + 1.0) / 2.0 + (il - k) * k
    with np.errstate(divide="ignore", invalid="ignore"):
        return cast(FloatArray, np.where(sparse, pairs / (il * (il + 1.0) / 2.0), 1.0))


def compressed_pair_share(
    input_len: ArrayLike,
    window: ArrayLike,
    topk: ArrayLike,
    csa_share: ArrayLike,
    hca_share: ArrayLike,
    csa_ratio: float,
    hca_ratio: float,
) -> FloatArray:
    """Share of a causal prompt's (query, key) pairs DeepSeek-V4's attention computes, averaged over the layers
    (beyond the paper): every layer attends to the last ``W`` tokens, ``S(W) = sum_i min(i, W)`` pairs
    (`window_scan_tokens`); a CSA layer (share `csa_share`) also to at most ``k`` of its ``i / 4`` compressed
    entries, ``S(4 k) / 4`` (`topk` counted in tokens, ``4 k``); an HCA layer (`hca_share`) to all its ``i / 128``
    entries, ``S / 128``; over ``S = IL (IL + 1) / 2``. Equals 1 for a window-only model of ``W >= IL``."""
    il = np.asarray(input_len, dtype=float)
    full = np.maximum(il * (il + 1.0) / 2.0, 1.0)
    zero = np.zeros(np.shape(il))
    pairs = window_scan_tokens(zero, il, window)
    pairs = pairs + np.asarray(csa_share, dtype=float) * window_scan_tokens(zero, il, topk) / csa_ratio
    pairs = pairs + np.asarray(hca_share, dtype=float) * full / hca_ratio
    return np.asarray(pairs / full, dtype=float)


#: tokens per chunk of the chunked delta-rule prefill kernels (vLLM's Gated DeltaNet ``chunk_gated_delta_rule``)
DELTA_RULE_CHUNK = 64


def delta_rule_prefill_flops(key_head_dim: ArrayLike, value_head_dim: ArrayLike) -> FloatArray:
    """FLOPs per prompt token and value head of the chunked delta rule (beyond the paper; Yang et al., "Gated Delta
    Networks", ICLR 2025, the WY form), chunk ``c`` = `DELTA_RULE_CHUNK`: per chunk ``K K^T``, ``Q K^T``
    (``c^2 d_k`` each), the triangular solve (``c^3 / 3``), ``W`` and ``U`` (``c^2 (d_k + d_v)``), the state's
    read, output and update (``3 c d_k d_v``) and the intra-chunk output (``c^2 d_v``): ``2 (c (3 d_k + 2 d_v) +
    c^2 / 3 + 3 d_k d_v)`` per token."""
    dk = np.asarray(key_head_dim, dtype=float)
    dv = np.asarray(value_head_dim, dtype=float)
    c = float(DELTA_RULE_CHUNK)
    return cast(FloatArray, 2.0 * (c * (3.0 * dk + 2.0 * dv) + c * c / 3.0 + 3.0 * dk * dv))


def ssd_prefill_flops(
    state: ArrayLike, head_dim: ArrayLike, heads: ArrayLike, groups: ArrayLike, chunk: float
) -> FloatArray:
    """FLOPs per prompt token of one Mamba-2 layer's chunked scan over `heads` heads and `groups` B/C groups (beyond
    the paper; Dao and Gu, "Transformers are SSMs", ICML 2024, the SSD algorithm), chunks of ``c`` = `chunk` tokens: per
    chunk ``C B^T`` per group (``c^2 N``), its masked product with each head's inputs (``c^2 P``), each head's chunk
    state and the output from the carried state (``c N P`` each): ``2 (c N G + H (c P + 2 N P))`` per token."""
    n = np.asarray(state, dtype=float)
    p = np.asarray(head_dim, dtype=float)
    c = float(chunk)
    return cast(
        FloatArray,
        2.0
        * (c * n * np.asarray(groups, dtype=float) + np.asarray(heads, dtype=float) * (c * p + 2.0 * n * p)),
    )


def linear_prefill_time(
    batch_size: ArrayLike,
    input_len: ArrayLike,
    n_layers: ArrayLike,
    flops_per_token: ArrayLike,
    conv_bytes_per_token: ArrayLike,
    token_s: ArrayLike,
    flops_s: ArrayLike,
    conv_bw: ArrayLike,
) -> FloatArray:
    """Seconds a batch of B prompts of IL tokens spends in `n_layers` linear-attention layers (beyond the paper):
    the chunked recurrence, ``max(n IL t_tok, B IL F / R)``, each prompt's chunks in order at ``t_tok`` per token
    until the batch's FLOPs ``F`` per token (all layers) fill the device at ``R`` FLOP/s, plus the causal
    convolution's ``B IL`` tokens of `conv_bytes_per_token` at `conv_bw` bytes/s."""
    tokens = np.asarray(batch_size, dtype=float) * np.asarray(input_len, dtype=float)
    serial = (
        np.asarray(n_layers, dtype=float)
        * np.asarray(input_len, dtype=float)
        * np.asarray(token_s, dtype=float)
    )
    filled = tokens * np.asarray(flops_per_token, dtype=float) / np.asarray(flops_s, dtype=float)
    conv = tokens * np.asarray(conv_bytes_per_token, dtype=float) / np.asarray(conv_bw, dtype=float)
    return cast(FloatArray, np.maximum(serial, filled) + conv)


def e2e_latency(prefill_s: ArrayLike, decode_s: ArrayLike, t_fixed: ArrayLike) -> FloatArray:
    """End-to-end batch latency ``E2E = T_pre + T_dec + t_fixed`` (Eq. 5)."""
    return cast(
        FloatArray,
        np.asarray(prefill_s, dtype=float)
        + np.asarray(decode_s, dtype=float)
        + np.asarray(t_fixed, dtype=float),
    )


def throughput(
    batch_size: ArrayLike, input_len: ArrayLike, output_len: ArrayLike, e2e_s: ArrayLike
) -> FloatArray:
    """Total-token throughput ``T = B (IL + OL) / E2E`` (Eq. 6), tokens per second."""
    b = np.asarray(batch_size, dtype=float)
    return cast(
        FloatArray,
        b
        * (np.asarray(input_len, dtype=float) + np.asarray(output_len, dtype=float))
        / np.asarray(e2e_s, dtype=float),
    )


def experts_touched(tokens: ArrayLike, n_experts: ArrayLike, top_k: ArrayLike) -> FloatArray:
    """Expected number of distinct experts that `tokens` tokens, each routed to `top_k` of `n_experts` experts
    uniformly (a balanced router), touch in one MoE layer: ``X (1 - (1 - k / X)^T)`` (beyond the paper; the
    expert-touch plateau of a step's MoE weight read: ``k T`` for few tokens, all ``X`` experts for many)."""
    x = np.asarray(n_experts, dtype=float)
    k = np.asarray(top_k, dtype=float)
    t = np.asarray(tokens, dtype=float)
    return np.asarray(x * (1.0 - (1.0 - k / np.maximum(x, 1.0)) ** t), dtype=float)


def decode_attention_flops(
    batch_size: ArrayLike, attended: ArrayLike, n_q_heads: ArrayLike, head_dim: ArrayLike
) -> FloatArray:
    """FLOPs of one layer's decode attention: ``4 B C H_q d_h`` over the ``C`` tokens each query attends (QK^T and
    PV, 2 FLOPs per multiply-add; softmax not counted)."""
    b, c = np.asarray(batch_size, float), np.asarray(attended, float)
    return cast(FloatArray, 4.0 * b * c * np.asarray(n_q_heads, float) * np.asarray(head_dim, float))


def decode_attention_bytes(
    batch_size: ArrayLike, attended: ArrayLike, n_q_heads: ArrayLike, n_kv_heads: ArrayLike, head_dim: ArrayLike,
    kv_bytes: ArrayLike = 2, act_bytes: ArrayLike = 2,
) -> FloatArray:  # fmt: skip
    """DRAM bytes of one layer's decode attention, each read or written once: K and V of the ``C`` attended tokens,
    ``2 B C H_kv d_h kv_bytes``, and the query read and output written, ``2 B H_q d_h act_bytes``."""
    b, c = np.asarray(batch_size, float), np.asarray(attended, float)
    d = np.asarray(head_dim, float)
    kv = 2.0 * b * c * np.asarray(n_kv_heads, float) * d * np.asarray(kv_bytes, float)
    return cast(FloatArray, kv + 2.0 * b * np.asarray(n_q_heads, float) * d * np.asarray(act_bytes, float))
