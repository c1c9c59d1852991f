"""Roofline terms with known peaks (beyond the paper): each operator class of an engine step as
``max(FLOPs / (eta_f F_max), bytes / (eta_b BW))`` of its known FLOPs and bytes on one GPU.

``F_max`` is the device's dense tensor peak at the row's weight precision (`slimlib.model.features.
prefill_peak_flops`, the registry's; the ``cpu`` device's from its micro-benchmark) and ``BW`` its memory
bandwidth: never fitted. The efficiencies are bounded fractions of them with measured priors
(`slimlib.model.priors`): ``eta_c`` (compute, at most 1; prior from the GEMMs at M >= 2048), ``eta_w`` (weight read)
and ``eta_attn`` (attention bytes), at most 1.5 because the registry's bandwidth is derived for some GPUs and a
CPU's caches can serve a small model's weights faster than its DRAM triad (`slimlib.model.terms.specs`).

Each term is timed on the two kinds of engine step of `slimlib.model.terms.serving_mode` (a prefill pass and a
decode step; one mixed step under continuous batching) and charges ``pass_count x t(pass)`` to the prefill and
``step_count x t(step)`` to the decode:

* `ROOF_LINEAR`, the dense linear layers (projections, dense FFN): FLOPs ``T F_dense`` for the step's T tokens
  (``F_dense``: the layers' linear FLOPs per token without the routed experts), bytes the dense weights read once
  per step (activations left out: below the ridge they are ``2 T (k + n) / (k n b_w)`` of the weights). Decode
  steps turn compute-bound past the ridge ``B* = (eta_c F_max) W / (eta_w BW F_dense)``, about
  ``F_max b_w / (2 BW)`` at equal efficiencies (`decode_gemm_ridge`): 14 on the CPU engine, hundreds on GPUs.
* `ROOF_EXPERTS`, routed experts: FLOPs ``T F_exp`` (``F_exp = 2 k / X x`` the GPU's expert weights), bytes the
  experts the T tokens touch (`slimlib.model.parallel.touched_expert_bytes`), at ``eta_e`` (the fused MoE
  kernel's own compute efficiency, at most 1: about half the dense GEMMs', `slimlib.model.priors.EXPERT_COMPUTE`)
  and eta_w.
* `ROOF_PREFILL_ATTENTION`: Eq. 8's attention FLOPs ``4 IL^2 D`` per layer and prompt, bytes the prompt's KV
  written and read once, at eta_c and eta_attn.
* `ROOF_DECODE_ATTENTION`: the decode attention bytes per sequence and step (the mean over a request's decode of
  `slimlib.model.terms.recommended.attention_bytes`, kernel regime included: none on a device with the measured
  decode-attention kernel, as in the recommended model) at eta_attn, and its FLOPs
  (feature ``attn_flops_per_kv_byte`` times the KV bytes) at ``eta_ac`` (the decode attention kernel's compute
  efficiency, at most 1; prior from the MLA kernels, `slimlib.model.priors.DECODE_ATTENTION_COMPUTE`):
  memory-bound for MHA/GQA (a few FLOPs per byte), compute-bound for MLA's shared latent past about 64 heads per
  GPU, as the measured kernels are.
* `ROOF_STEP_OVERHEAD`: ``t_step`` per engine step (scheduling, launches); `ROOF_SEQUENCE_OVERHEAD`: ``t_seq``
  per sequence a step schedules (scheduler, sampler and detokenizer work that grows with B).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from slimlib.model import equations as eq
from slimlib.model.features import Features, FloatArray, prefill_peak_flops
from slimlib.model.parallel import touched_expert_bytes
from slimlib.model.terms import specs as ps
from slimlib.model.terms.recommended import attention_bytes
from slimlib.model.terms.serving_mode import STEP_KINDS
from slimlib.model.terms.term import Params, Term, TimeFn, Times
from slimlib.registry.gpus import GPU

#: writes plus reads of a prompt's KV in its prefill attention
PREFILL_KV_PASSES = 2.0


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
    """Tokens per step at which `ROOF_LINEAR` turns compute-bound (`ridge_tokens` of the dense weights)."""
    return ridge_tokens(
        f["dense_weight_bytes"],
        dense_linear_flops_per_token(f),
        prefill_peak_flops(f, hw),
        hw.mem_bw,
        eta_c,
        eta_w,
    )


def _per_kind(f: Features, t_pass: FloatArray, t_step: FloatArray) -> Times:
    return Times(prefill=f["pass_count"] * t_pass, decode=f["step_count"] * t_step)


KindTime = Callable[[Params, Features, GPU, str], FloatArray]


def _timed(kind_time: KindTime) -> TimeFn:
    """A `Times` function from a per-kind time ``kind_time(p, f, hw, kind)``."""

    def times(p: Params, f: Features, hw: GPU) -> Times:
        t = {k: kind_time(p, f, hw, k) for k in STEP_KINDS}
        return _per_kind(f, t["pass"], t["step"])

    return times


def _linear(p: Params, f: Features, hw: GPU, kind: str) -> FloatArray:
    flops = f[f"{kind}_tokens"] * dense_linear_flops_per_token(f)
    return roofline(
        flops, f["dense_weight_bytes"], prefill_peak_flops(f, hw), hw.mem_bw, p["eta_c"], p["eta_w"]
    )


def _experts(p: Params, f: Features, hw: GPU, kind: str) -> FloatArray:
    tokens = f[f"{kind}_tokens"]
    nbytes = touched_expert_bytes(f, tokens)
    flops = tokens * expert_flops_per_token(f)
    return roofline(flops, nbytes, prefill_peak_flops(f, hw), hw.mem_bw, p["eta_e"], p["eta_w"])


def _prefill_attention(p: Params, f: Features, hw: GPU, kind: str) -> FloatArray:
    prompts = f[f"{kind}_prompts"]
    il = f["input_len"]
    flops = eq.layer_prefill_flops(prompts, il, f["n_layers"], f["hidden_size"], 0.0)
    nbytes = PREFILL_KV_PASSES * prompts * il * f["kv_bytes_per_token"]
    return roofline(flops, nbytes, prefill_peak_flops(f, hw), hw.mem_bw, p["eta_c"], p["eta_attn"])


def _decode_attention(p: Params, f: Features, hw: GPU, kind: str) -> FloatArray:
    seqs = f[f"{kind}_decodes"]
    ol = np.maximum(f["output_len"], 1.0)
    nbytes = seqs * attention_bytes(f, hw=hw) / ol
    flops = seqs * f["attn_flops_per_kv_byte"] * attention_bytes(f, regime_rule=False) / ol
    return roofline(flops, nbytes, prefill_peak_flops(f, hw), hw.mem_bw, p["eta_ac"], p["eta_attn"])


def _step_overhead(p: Params, f: Features, hw: GPU) -> Times:
    one = np.ones(np.shape(f["batch_size"]))
    return _per_kind(f, p["t_step"] * one, p["t_step"] * one)


def _sequence_overhead(p: Params, f: Features, hw: GPU) -> Times:
    return _per_kind(f, p["t_seq"] * f["pass_seqs"], p["t_seq"] * f["step_seqs"])


_STEPS = ("pass_count", "step_count")
ROOF_LINEAR = Term(
    "roof_linear", "dense linear layers per step: max(T F_dense / (eta_c F_max), W_dense / (eta_w BW))",
    (ps.ETA_C, ps.ETA_W), _timed(_linear),
    reads=(*_STEPS, "pass_tokens", "step_tokens", "linear_flops_per_token", "dense_weight_bytes"),
)  # fmt: skip
ROOF_EXPERTS = Term(
    "roof_experts", "routed experts per step: max(T F_exp / (eta_e F_max), touched expert bytes / (eta_w BW))",
    (ps.ETA_E, ps.ETA_W), _timed(_experts),
    reads=(*_STEPS, "pass_tokens", "step_tokens", "expert_weight_bytes", "bytes_per_weight"),
)  # fmt: skip
ROOF_PREFILL_ATTENTION = Term(
    "roof_prefill_attention", "prefill attention per step: max(4 IL^2 D L / (eta_c F_max) (Eq. 8), "
    "2 IL KV bytes / (eta_attn BW)) per prompt",
    (ps.ETA_C, ps.ETA_ATTN), _timed(_prefill_attention),
    reads=(*_STEPS, "pass_prompts", "step_prompts", "kv_bytes_per_token"),
)  # fmt: skip
ROOF_DECODE_ATTENTION = Term(
    "roof_decode_attention", "decode attention per step: max(FLOPs / (eta_ac F_max), KV bytes (Eq. 11, kernel "
    "regime) / (eta_attn BW)) per decoding sequence",
    (ps.ETA_AC, ps.ETA_ATTN), _timed(_decode_attention),
    reads=(*_STEPS, "pass_decodes", "step_decodes", "attn_bytes_per_context_token", "attn_flops_per_kv_byte"),
)  # fmt: skip
ROOF_STEP_OVERHEAD = Term(
    "roof_step_overhead", "t_step per engine step", (ps.T_STEP,), _step_overhead, reads=_STEPS
)
ROOF_SEQUENCE_OVERHEAD = Term(
    "roof_sequence_overhead", "t_seq per sequence per engine step (scheduler, sampler, detokenizer)",
    (ps.T_SEQ,), _sequence_overhead, reads=(*_STEPS, "pass_seqs", "step_seqs"),
)  # fmt: skip


def measured_curve_time(points: tuple[tuple[int, float], ...], tokens: ArrayLike) -> FloatArray:
    """Seconds per weight at `tokens` on a measured curve of (tokens, seconds per weight) points: linear between the
    points, the first point's value below it, and past the last point the last segment's slope (there the pass is
    compute-bound: its time grows linearly with the tokens)."""
    m = np.array([p[0] for p in points], dtype=float)
    s = np.array([p[1] for p in points], dtype=float)
    x = np.asarray(tokens, dtype=float)
    slope = (s[-1] - s[-2]) / (m[-1] - m[-2])
    return np.asarray(np.where(x <= m[-1], np.interp(x, m, s), s[-1] + slope * (x - m[-1])), dtype=float)


def _step_gemm(all_weights: bool, measured: tuple[str, ...] = ()) -> TimeFn:
    """A decode step's dense GEMMs; `measured` the registry measurements used where the device has them, in order:
    ``"curve"`` (``decode_gemm_curve``), ``"roof"`` (``decode_gemm_flops``)."""

    def times(p: Params, f: Features, hw: GPU) -> Times:
        # the weights the benchmark timed; its curve: weight read, compute and the bend between them, measured
        weights = (dense_linear_flops_per_token(f) + f["lm_head_flops_per_token"]) / 2.0
        if "curve" in measured and hw.decode_gemm_curve:
            return Times(step=weights * measured_curve_time(hw.decode_gemm_curve, f["batch_size"]))
        if "roof" in measured and hw.decode_gemm_flops:  # the measured roof holds its efficiency: eta 1
            flops = 2.0 * f["batch_size"] * weights
            roof = roofline(flops, f["dense_weight_bytes"], hw.decode_gemm_flops, hw.mem_bw, 1.0, p["eta_w"])
            return Times(step=roof)
        per_token = (
            2.0 * f["dense_weight_bytes"] / f["bytes_per_weight"]
            if all_weights
            else dense_linear_flops_per_token(f)
        )
        t = roofline(f["batch_size"] * per_token, f["dense_weight_bytes"], prefill_peak_flops(f, hw), hw.mem_bw,
                     p["eta_c"], p["eta_w"])  # fmt: skip
        return Times(step=t)

    return times


#: the recommended model's per-step weight read made a roofline (a candidate of the batch axis, beyond the paper):
#: a decode step of B sequences reads the dense weights once and multiplies each by B tokens, so it takes
#: ``max(W / (eta_w BW), B F_tok / (eta_c F_max))`` and turns compute-bound past `decode_gemm_ridge` (hundreds on
#: GPUs); ``eta_c`` is the prefill GEMMs' efficiency (`PREFILL_SERVED`'s). On a device whose registry entry holds
#: the engine's measured decode-GEMM curve (``decode_gemm_curve``: the CPU engine, `slimlib.data.decode_gemm`), the
#: step takes the weights the benchmark timed, the layers' and the LM head's, times the curve's seconds per weight
#: at B (`measured_curve_time`): no fitted efficiency, and the bend between the weight read and the roof as
#: measured (on one CPU thread the two do not overlap: 1.36x the larger of them at 16 tokens); on a device with
#: only a measured roof (``decode_gemm_flops``), format 6's max with it (`STEP_GEMM_ROOFLINE_V6`)
_MEASURED_READS = ("dense_weight_bytes", "linear_flops_per_token", "lm_head_flops_per_token")
_STEP_GEMM_DOC = "decode step's dense GEMMs: max(W_dense / (eta_w BW), B F_dense / (eta_c F_max))"
STEP_GEMM_ROOFLINE = Term(
    "step_gemm_roofline", f"{_STEP_GEMM_DOC}, or (F_dense + F_head) / 2 x the measured seconds per weight at B on a "
    "device with a measured decode-GEMM curve", (ps.ETA_W, ps.ETA_C), _step_gemm(False, measured=("curve", "roof")),
    reads=_MEASURED_READS,
)  # fmt: skip


def layer_floor_applies(hw: GPU) -> bool:
    """Whether `STEP_GEMM_ROOFLINE_FLOOR` adds `hw`'s layer floor: the registry measures it (with its line's
    efficiency) and the decode GEMMs do not follow a measured curve or roof (the CPU engine's)."""
    return bool(
        hw.layer_floor_s and hw.layer_floor_eff and not (hw.decode_gemm_curve or hw.decode_gemm_flops)
    )


def _step_gemm_floor(p: Params, f: Features, hw: GPU) -> Times:
    """`STEP_GEMM_ROOFLINE`'s times, with the device's measured layer floor on the memory side where the registry
    has it (`STEP_GEMM_ROOFLINE_FLOOR`)."""
    if not layer_floor_applies(hw):
        return _STEP_GEMM_MEASURED(p, f, hw)
    compute = f["batch_size"] * dense_linear_flops_per_token(f) / (p["eta_c"] * prefill_peak_flops(f, hw))
    memory = f["n_layers_total"] * float(hw.layer_floor_s or 0.0) + f["dense_weight_bytes"] / (
        p["eta_w"] * hw.mem_bw
    )
    return Times(step=np.asarray(np.maximum(compute, memory), dtype=float))


_STEP_GEMM_MEASURED = _step_gemm(False, measured=("curve", "roof"))
#: the recommended model's step roofline (parameter-file format 14): `STEP_GEMM_ROOFLINE`, except on a device whose
#: registry holds the measured layer floor (``layer_floor_s``, `slimlib.experiments.kernel_timing.layer_floor`:
#: NVIDIA AIConfigurator's kernels), where the weight read is ``L t_floor + W / (eta_w BW)``: each of the model's
#: ``L`` layers (its own count, not one GPU's share) pays its kernels' latency floor, which tensor parallelism does
#: not divide, and the weights one GPU reads at ``eta_w``, the bandwidth efficiency of the same measured line
#: (``layer_floor_eff``, its prior there); the max with the compute side keeps the floor hidden where the GEMMs
#: are compute-bound, as the kernels' is (found by the kernel-composed curves at TP 2-8, issue 28: without it a
#: fit on TP 1 gives the floor to the weight read, which TP divides, and over-predicts TP 8 at B <= 32 by 20-30%)
STEP_GEMM_ROOFLINE_FLOOR = Term(
    "step_gemm_roofline", f"{_STEP_GEMM_DOC}, L t_floor added to the weight read on a device with a measured layer "
    "floor, or (F_dense + F_head) / 2 x the measured seconds per weight at B on a device with a measured decode-GEMM "
    "curve", (ps.ETA_W, ps.ETA_C), _step_gemm_floor, reads=(*_MEASURED_READS, "n_layers_total"),
)  # fmt: skip
#: format 6's step roofline (the candidate ``slim-v6``): on a device with a measured decode-GEMM roof
#: (``decode_gemm_flops``) the compute side is ``B (F_dense + F_head) / F_dec``, the max with the weight read
STEP_GEMM_ROOFLINE_V6 = Term(
    "step_gemm_roofline", f"{_STEP_GEMM_DOC}, or B (F_dense + F_head) / F_dec on a device with a measured "
    "decode-GEMM roof", (ps.ETA_W, ps.ETA_C), _step_gemm(False, measured=("roof",)), reads=_MEASURED_READS,
)  # fmt: skip
#: format 5's step roofline (the candidate ``slim-v5``): ``eta_c`` of the registry peak on every device
STEP_GEMM_ROOFLINE_V5 = Term(
    "step_gemm_roofline", _STEP_GEMM_DOC,
    (ps.ETA_W, ps.ETA_C), _step_gemm(False), reads=("dense_weight_bytes", "linear_flops_per_token"),
)  # fmt: skip
#: the same with 2 FLOPs per dense weight byte / b_w per token: every weight a step reads, the LM head included
#: (and the input embedding, a lookup, over-counted for untied models)
STEP_GEMM_ROOFLINE_ALL = Term(
    "step_gemm_roofline_all_weights",
    "decode step's dense GEMMs: max(W_dense / (eta_w BW), B 2 W_dense / b_w / (eta_c F_max)), LM head included",
    (ps.ETA_W, ps.ETA_C), _step_gemm(True), reads=("dense_weight_bytes", "bytes_per_weight"),
)  # fmt: skip
