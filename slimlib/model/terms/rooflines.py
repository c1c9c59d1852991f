"""The roofline of an operator and the decode step's dense GEMMs (beyond the paper).

An operator of known FLOPs and bytes takes ``max(FLOPs / (eta_f F_max), bytes / (eta_b BW))`` on one GPU
(`roofline`): ``F_max`` the registry's dense peak at the row's weight precision (`prefill_peak_flops`), ``BW`` its
memory bandwidth, never fitted; the efficiencies are bounded and carry measured priors (`slimlib.model.priors`).

`DECODE_GEMMS`: a decode step of B sequences reads the dense weights once and multiplies each by B
tokens, so it is flat in B below the ridge (`decode_gemm_ridge`, hundreds of tokens on GPUs) and compute-bound past
it. Where the registry holds the measured per-layer kernel latency floor (``layer_floor_s``: NVIDIA
AIConfigurator's kernels) every one of the model's L layers pays it on the memory side (tensor parallelism does not
divide it); where it holds the engine's measured decode-GEMM curve (``decode_gemm_curve``: the CPU engine) the step
is the weights times the curve's seconds per weight at B.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from slimlib.model.features import Features, FloatArray, prefill_peak_flops
from slimlib.model.terms import specs as ps
from slimlib.model.terms.term import Params, Term, Times
from slimlib.registry.gpus import GPU


def roofline(
    flops: ArrayLike, nbytes: ArrayLike, peak: ArrayLike, bw: ArrayLike, eta_f: float, eta_b: float
) -> FloatArray:
    """Seconds of an operator: ``max(FLOPs / (eta_f peak), bytes / (eta_b bw))``."""
    compute = np.asarray(flops, dtype=float) / (eta_f * np.asarray(peak, dtype=float))
    memory = np.asarray(nbytes, dtype=float) / (eta_b * np.asarray(bw, dtype=float))
    return np.asarray(np.maximum(compute, memory), dtype=float)


def expert_flops_per_token(f: Features) -> FloatArray:
    """Routed-expert FLOPs of one token on one GPU: ``2 k / X x`` its expert weights (0 without experts)."""
    x = np.maximum(f["n_experts"], 1.0)
    per = 2.0 * f["experts_per_token"] / x * f["expert_weight_bytes"] / f["bytes_per_weight"]
    return np.asarray(np.where(f["n_experts"] > 0, per, 0.0), dtype=float)


def dense_linear_flops_per_token(f: Features) -> FloatArray:
    """Linear FLOPs of one token on one GPU without the routed experts."""
    return np.asarray(np.maximum(f["linear_flops_per_token"] - expert_flops_per_token(f), 0.0), dtype=float)


def ridge_tokens(
    weight_bytes: ArrayLike,
    flops_per_token: ArrayLike,
    peak: ArrayLike,
    bw: ArrayLike,
    eta_f: float,
    eta_b: float,
) -> FloatArray:
    """Tokens at which `roofline` of ``T flops_per_token`` FLOPs and `weight_bytes` bytes turns compute-bound:
    ``(eta_f peak) weight_bytes / (eta_b bw flops_per_token)``; for one GEMM of ``k n`` weights of ``b_w`` bytes,
    ``eta_f peak b_w / (2 eta_b bw)``."""
    rate = eta_f * np.asarray(peak, dtype=float) * np.asarray(weight_bytes, dtype=float)
    per_token = eta_b * np.asarray(bw, dtype=float) * np.asarray(flops_per_token, dtype=float)
    return np.asarray(rate / per_token, dtype=np.float64)


def decode_gemm_ridge(f: Features, hw: GPU, eta_c: float, eta_w: float) -> FloatArray:
    """Tokens per step at which the decode GEMMs turn compute-bound (`ridge_tokens` of the dense weights)."""
    return ridge_tokens(
        f["dense_weight_bytes"],
        dense_linear_flops_per_token(f),
        prefill_peak_flops(f, hw),
        hw.mem_bw,
        eta_c,
        eta_w,
    )


def measured_curve_time(points: tuple[tuple[int, float], ...], tokens: ArrayLike) -> FloatArray:
    """Seconds per weight at `tokens` on a measured curve of (tokens, seconds per weight) points: linear between the
    points, the first point's value below it, and past the last point the last segment's slope (there the pass is
    compute-bound: its time grows linearly with the tokens)."""
    m = np.array([p[0] for p in points], dtype=float)
    s = np.array([p[1] for p in points], dtype=float)
    x = np.asarray(tokens, dtype=float)
    slope = (s[-1] - s[-2]) / (m[-1] - m[-2])
    return np.asarray(np.where(x <= m[-1], np.interp(x, m, s), s[-1] + slope * (x - m[-1])), dtype=float)


def layer_floor_applies(hw: GPU) -> bool:
    """Whether `DECODE_GEMMS` adds `hw`'s layer floor: the registry measures it (with its line's
    efficiency) and the decode GEMMs do not follow a measured curve (the CPU engine's)."""
    return bool(
        hw.layer_floor_s and hw.layer_floor_eff and not (hw.decode_gemm_curve or hw.decode_gemm_flops)
    )


def _decode_gemms(p: Params, f: Features, hw: GPU) -> Times:
    b = f["batch_size"]
    if hw.decode_gemm_curve:  # the weights the benchmark timed: the layers' and the LM head's
        weights = (dense_linear_flops_per_token(f) + f["lm_head_flops_per_token"]) / 2.0
        return Times(step=weights * measured_curve_time(hw.decode_gemm_curve, b))
    compute = b * dense_linear_flops_per_token(f) / (p["eta_c"] * prefill_peak_flops(f, hw))
    memory = f["dense_weight_bytes"] / (p["eta_w"] * hw.mem_bw)
    if layer_floor_applies(hw):
        memory = memory + f["n_layers_total"] * float(hw.layer_floor_s or 0.0)
    return Times(step=np.asarray(np.maximum(compute, memory), dtype=float))


DECODE_GEMMS = Term(
    "decode_gemms",
    "decode step's dense GEMMs: max(W_dense / (eta_w BW) [+ L t_floor where measured], B F_dense / (eta_c F_max)), "
    "or the measured seconds per weight at B on a device with a measured decode-GEMM curve",
    (ps.ETA_W, ps.ETA_C),
    _decode_gemms,
    reads=("dense_weight_bytes", "linear_flops_per_token", "lm_head_flops_per_token", "n_layers_total"),
)
