"""Terms of the recommended model (beyond the paper): each a paper term made exact where the engine or the kernels
differ from Eqs. 5-12, and the alternatives `scripts/choose_components.py` scores.

* `PREFILL_SERVED`: Eq. 7 with the served model's linear FLOPs per token (feature ``linear_flops_per_token``: the
  projections, dense FFNs and the experts a token passes through, per GPU; Eq. 8 spreads them evenly over the
  layers) plus the causal prefill's attention FLOPs ``2 B IL^2 D`` per layer (`slimlib.model.equations.
  ATTENTION_FLOPS_CAUSAL`: the lower triangle of Eq. 8's ``4 B IL^2 D``; chosen by the extrapolation
  cross-validation, issue 28); `PREFILL_SERVED_EQ8` counts Eq. 8's whole square (parameter-file format 4).
  `PREFILL_SERVED_MEASURED` (the recommended model's, format 10): the same FLOPs, the causal attention at the
  device's measured rate of the engine's prefill attention kernel where the registry has one
  (``prefill_attention_flops``: the CPU engine, `slimlib.data.prefill_attention`, whose kernel skips the masked
  half and runs at 0.4x its GEMMs' rate), the linear FLOPs at ``eta_c`` of the peak; elsewhere as `PREFILL_SERVED`.
* `ATTENTION_FACTOR`: Eq. 9's factor without B0, ``B / eta_attn`` (``eta_attn``: the decode attention's bandwidth
  efficiency; the paper's ``eta_m`` is another quantity, offset by B0). `ATTENTION_FACTOR_MEASURED` (the
  recommended model's, chosen by the extrapolation cross-validation, issue 28): on a device whose registry entry
  holds the decode attention kernel's measured bandwidth efficiency (``decode_attention_eff``: vLLM's kernel in
  NVIDIA AIConfigurator's tables) that efficiency in ``eta_attn``'s place, ``eta_attn`` elsewhere: few pre-knee
  points cannot see the attention, which grows with B and the context, so a fitted ``eta_attn`` is a guess where it
  matters.
* `decode_attention`: Eq. 11's traffic per request, ``b_ctx C(IL, OL) + b_win C_W(IL, OL)`` over the bandwidth:
  ``b_ctx`` the attention bytes per context token of one GPU's full-attention layers (feature
  ``attn_bytes_per_context_token``: ``2 L D_kv b_kv`` for MHA/GQA, the latent ``kv_lora_rank + rope`` values for
  MLA), ``b_win`` those of its sliding-window layers (``attn_bytes_per_window_token``), which read at most the
  window's ``sliding_window`` tokens (`slimlib.model.equations.window_scan_tokens`). Kernel regime: vLLM's
  paged-attention decode switches to its unpartitioned kernel above 512 (sequence, query head) pairs per rank
  (``vllm/attention/ops/paged_attn.py``, ``use_v1 = ... num_seqs * num_heads > 512``), which reads a KV head once
  per query head it serves: the MHA/GQA bytes grow by ``D / D_kv`` there (equal for multi-head models). MLA decode
  (feature ``latent_attention`` = 1) reads the latent once per sequence for all heads: no switch.
  `DECODE_ATTENTION_KERNEL` (the recommended model's, format 13): the same, except on a device whose registry holds
  the measured decode-attention kernel (``decode_attention_eff``: vLLM's FlashAttention decode in NVIDIA
  AIConfigurator's tables), which reads each KV head once for all the query heads it serves at every batch size
  measured (32 query / 8 KV heads at B 1-256: no step from B = 16 to 32, where the paged-attention rule would widen
  the bytes 4x; `tests/test_attention_kernel.py`), so the measured efficiency is of the ``D_kv`` bytes
  and no widening applies there (found by the kernel-composed curves of the extrapolation cross-validation,
  issue 28).
* `STEP_WEIGHT_READ`: each decode step reads the weights every token uses (``dense_weight_bytes``) once, whatever
  the batch, at ``eta_w``; `STEP_OVERHEAD`: a fixed ``t_step`` per step (scheduling, launches, sampling).
* `PER_TOKEN_DECODE`: Eq. 10's ``alpha OL`` without ``gamma``, inside Eq. 9 (at decode batch sizes the projection
  and FFN GEMMs are bound by reading their weights, which `STEP_WEIGHT_READ` charges).
* `SEQUENCE_OVERHEAD`: ``t_seq`` per running sequence and step (host work that grows with B).
* `HOST_SEQUENCE_OVERHEAD` (the recommended model's, format 11): vLLM's measured host work per running sequence
  and decode step, `HOST_SEQUENCE_S` = 37.5 us: the summed slopes over the batch size of the scheduler, input
  preparation, sampler and output processing in Vidur's CPU-overhead profile (``data/vidur-cpu-overheads.csv``,
  A100 host, CodeLlama-34B, TP 2; `slimlib.data.vidur.host_sequence_slopes`, recomputed by a test). No parameter:
  the driver process does it for every sequence whatever the TP degree, so a fit on one TP degree cannot tell it
  from the GEMMs, which TP divides, and a fitted ``t_seq`` there lands on its bound 0 (chosen by the extrapolation
  cross-validation, issue 28).
* `TP_WORKER_COMM` (a candidate, ``slim+tp-comm``; not in the recommended model): at TP > 1, vLLM's
  driver-to-worker communication per decode step, `TP_COMM_STEP_S` + `TP_COMM_SEQUENCE_S` per running sequence =
  2.31 ms + 32.5 us: the least-squares line over the batch size of ``ray_comm_time`` in Vidur's CPU-overhead profile
  (Ray workers, A100 host, CodeLlama-34B, TP 2; `slimlib.data.vidur.worker_comm_fit`, recomputed by a test), the same
  at every TP > 1 (measured at 2 only), 0 at TP 1, no parameter. vLLM's multiprocessing backend sends the step's
  inputs by another path, whose cost nothing in the package's data measures.
* `LAYER_STEP_OVERHEAD`: ``t_layer L`` per decode step, ``L`` the model's own layer count (feature
  ``n_layers_total``): launching each layer's kernels, which every tensor-parallel rank does for every layer, so
  unlike the weight read and the attention it is not divided by the TP degree; on one layer count it is one
  constant with ``t_step``.
* `ACTIVATION_WORK`: ``t_act B L (D / 1024)`` per decode step, ``L`` the model's own layer count: each running
  sequence's work per layer outside the GEMMs and the KV read (elementwise norms, activations, residual adds, its
  attention call), which grows with the width ``D`` of the vectors it touches; on one ``L D`` it is one constant
  per sequence and step with ``alpha`` (chosen by the extrapolation cross-validation over model sizes, issue 28).
* `DECODE_GEMM_COMPUTE`: decode GEMM FLOPs ``B OL F_tok / (eta_d F_max)``, the FLOP-based alternative to
  ``alpha``.
"""

from __future__ import annotations

import numpy as np

from slimlib.model import equations as eq
from slimlib.model.features import Features, FloatArray, prefill_peak_flops
from slimlib.model.terms import specs as ps
from slimlib.model.terms.batch import preemption_recompute_term
from slimlib.model.terms.term import Params, Term, TimeFn, Times
from slimlib.registry.gpus import GPU

#: (sequence, query head) pairs per rank above which vLLM runs its unpartitioned paged-attention kernel
ATTENTION_SWITCH_PAIRS = 512
#: vLLM's host work per running sequence and decode step, seconds (module docstring, `HOST_SEQUENCE_OVERHEAD`)
HOST_SEQUENCE_S = 3.7478e-5
#: vLLM's driver-to-worker communication at TP > 1: seconds per decode step and per running sequence and step
#: (module docstring, `TP_WORKER_COMM`)
TP_COMM_STEP_S = 2.3120e-3
TP_COMM_SEQUENCE_S = 3.2482e-5


def _prefill_served(attention_flops: float) -> TimeFn:
    def times(p: Params, f: Features, hw: GPU) -> Times:
        layers = f["n_layers"]
        per_layer = f["linear_flops_per_token"] / layers
        flops = eq.layer_prefill_flops(
            f["batch_size"], f["input_len"], layers, f["hidden_size"], per_layer, attention_flops
        )
        return Times(prefill=eq.prefill_time(flops, prefill_peak_flops(f, hw), p["eta_c"]))

    return times


def _prefill_served_measured(p: Params, f: Features, hw: GPU) -> Times:
    if hw.prefill_attention_flops is None:
        return _prefill_served(eq.ATTENTION_FLOPS_CAUSAL)(p, f, hw)
    layers = f["n_layers"]
    b, il, dim = f["batch_size"], f["input_len"], f["hidden_size"]
    linear = eq.layer_prefill_flops(b, il, layers, dim, f["linear_flops_per_token"] / layers, 0.0)
    attention = eq.layer_prefill_flops(b, il, layers, dim, 0.0, eq.ATTENTION_FLOPS_CAUSAL)
    return Times(
        prefill=eq.prefill_time(linear, prefill_peak_flops(f, hw), p["eta_c"])
        + attention / hw.prefill_attention_flops
    )


def _attention_factor(p: Params, f: Features, hw: GPU) -> Times:
    return Times(factor=eq.decode_batch_factor(f["batch_size"], p["eta_attn"], 0.0))


def measured_attention_eff(p: Params, hw: GPU) -> float:
    """The decode attention's bandwidth efficiency `ATTENTION_FACTOR_MEASURED` uses on `hw`: the registry's
    ``decode_attention_eff`` where measured, else the parameter ``eta_attn``."""
    return float(hw.decode_attention_eff) if hw.decode_attention_eff is not None else float(p["eta_attn"])


def _attention_factor_measured(p: Params, f: Features, hw: GPU) -> Times:
    return Times(factor=eq.decode_batch_factor(f["batch_size"], measured_attention_eff(p, hw), 0.0))


def measured_kernel(hw: GPU | None) -> bool:
    """Whether `hw`'s registry entry holds the measured decode-attention kernel (``decode_attention_eff``), which
    reads each KV head once for all its query heads (module docstring, `DECODE_ATTENTION_KERNEL`)."""
    return hw is not None and hw.decode_attention_eff is not None


def attention_widening(f: Features, hw: GPU | None = None) -> FloatArray:
    """Factor on the MHA/GQA attention bytes from the kernel regime (module docstring): ``D / D_kv`` above
    `ATTENTION_SWITCH_PAIRS` (sequence, query head) pairs per rank, 1 below, for MLA and on a device `hw` with the
    measured kernel (`measured_kernel`; `hw` None: the paged-attention rule everywhere)."""
    if measured_kernel(hw):
        return np.ones(np.shape(f["batch_size"]), dtype=float)
    heads_per_rank = f["n_heads"] / f["tensor_parallel"]
    wide = (f["batch_size"] * heads_per_rank > ATTENTION_SWITCH_PAIRS) & (f["latent_attention"] == 0)
    return np.asarray(np.where(wide, f["hidden_size"] / f["d_kv"], 1.0), dtype=float)


def attention_bytes(f: Features, regime_rule: bool = True, hw: GPU | None = None) -> FloatArray:
    """Decode attention bytes one request reads over its decode, per GPU (module docstring); `hw`: the device,
    whose measured kernel has no widening (`attention_widening`)."""
    il, ol = f["input_len"], f["output_len"]
    full = f["attn_bytes_per_context_token"] * eq.kv_scan_tokens(il, ol)
    window = f["attn_bytes_per_window_token"] * eq.window_scan_tokens(il, ol, f["sliding_window"])
    widen = attention_widening(f, hw) if regime_rule else 1.0
    return np.asarray(widen * (full + window), dtype=float)


def decode_attention(regime_rule: bool = True, kernel_aware: bool = False) -> Term:
    """The decode attention traffic term (module docstring); `regime_rule` False reads ``D_kv`` always;
    `kernel_aware`: no widening on a device with the measured kernel (`DECODE_ATTENTION_KERNEL`)."""

    def times(p: Params, f: Features, hw: GPU) -> Times:
        return Times(request=attention_bytes(f, regime_rule, hw if kernel_aware else None) / hw.mem_bw)

    if kernel_aware and not regime_rule:
        raise ValueError("kernel_aware applies to the kernel-regime rule")
    name, width = (
        ("decode_attention_kernel", ", kernel-regime width, the measured kernel's where the device has it)")
        if kernel_aware
        else ("decode_attention", ", kernel-regime width)")
        if regime_rule
        else ("decode_attention_kv_width", ", KV width always)")
    )
    return Term(
        name,
        "per-request attention read (Eq. 11 on the context and window tokens"
        + width
        + " over the bandwidth, inside Eq. 9",
        (),
        times,
        reads=(
            "attn_bytes_per_context_token",
            "attn_bytes_per_window_token",
            "sliding_window",
            "latent_attention",
        ),
    )


def _step_weight_read(p: Params, f: Features, hw: GPU) -> Times:
    return Times(step=f["dense_weight_bytes"] / (p["eta_w"] * hw.mem_bw))


def _per_token_decode(p: Params, f: Features, hw: GPU) -> Times:
    return Times(
        request=eq.dense_decode_time(f["output_len"], f["n_layers"], f["hidden_size"], p["alpha"], 0.0)
    )


def _step_overhead(p: Params, f: Features, hw: GPU) -> Times:
    return Times(step=np.full(np.shape(f["batch_size"]), p["t_step"]))


def _layer_step_overhead(p: Params, f: Features, hw: GPU) -> Times:
    return Times(step=p["t_layer"] * f["n_layers_total"])


def _activation_work(p: Params, f: Features, hw: GPU) -> Times:
    return Times(step=f["batch_size"] * p["t_act"] * f["n_layers_total"] * f["hidden_size"] / 1024.0)


def _sequence_overhead(p: Params, f: Features, hw: GPU) -> Times:
    return Times(step=f["batch_size"] * p["t_seq"])


def _host_sequence_overhead(p: Params, f: Features, hw: GPU) -> Times:
    return Times(step=f["batch_size"] * HOST_SEQUENCE_S)


def _tp_worker_comm(p: Params, f: Features, hw: GPU) -> Times:
    b = f["batch_size"]
    tp = f.get("tensor_parallel", np.ones_like(b))
    return Times(step=np.where(tp > 1, TP_COMM_STEP_S + b * TP_COMM_SEQUENCE_S, 0.0))


def _decode_gemm_compute(p: Params, f: Features, hw: GPU) -> Times:
    per_token = f["linear_flops_per_token"] / (p["eta_d"] * prefill_peak_flops(f, hw))
    return Times(decode=f["batch_size"] * f["output_len"] * per_token)


PREFILL_SERVED = Term(
    "prefill_compute_served",
    "prefill FLOPs (served linear FLOPs per token + causal attention, half Eq. 8's) at eta_c (Eq. 7)",
    (ps.ETA_C,), _prefill_served(eq.ATTENTION_FLOPS_CAUSAL), reads=("linear_flops_per_token",),
)  # fmt: skip
PREFILL_SERVED_MEASURED = Term(
    "prefill_compute_served_measured",
    "prefill FLOPs (served linear FLOPs per token at eta_c, Eq. 7; causal attention at the device's measured "
    "prefill-attention rate, registry prefill_attention_flops, else at eta_c)",
    (ps.ETA_C,), _prefill_served_measured, reads=("linear_flops_per_token",),
)  # fmt: skip
PREFILL_SERVED_EQ8 = Term(
    "prefill_compute_served_eq8",
    "prefill FLOPs (served linear FLOPs per token + Eq. 8's attention) at eta_c (Eq. 7)",
    (ps.ETA_C,), _prefill_served(eq.ATTENTION_FLOPS_EQ8), reads=("linear_flops_per_token",),
)  # fmt: skip
#: past the KV pool, a static batch's preempted requests recomputed at the prompt's cost (`preemption_recompute_term`)
PREEMPTION_RECOMPUTE = preemption_recompute_term(PREFILL_SERVED_MEASURED)
ATTENTION_FACTOR = Term(
    "attention_factor", "Eq. 9's factor without B0: B / eta_attn", (ps.ETA_ATTN,), _attention_factor
)
ATTENTION_FACTOR_MEASURED = Term(
    "attention_factor_measured",
    "Eq. 9's factor without B0: B / eta, eta the device's measured decode-attention efficiency (registry "
    "decode_attention_eff), else eta_attn",
    (ps.ETA_ATTN,),
    _attention_factor_measured,
)
DECODE_ATTENTION = decode_attention()
DECODE_ATTENTION_KERNEL = decode_attention(kernel_aware=True)
STEP_WEIGHT_READ = Term(
    "step_weight_read", "weights every token uses, read once per decode step at eta_w", (ps.ETA_W,),
    _step_weight_read, reads=("dense_weight_bytes",),
)  # fmt: skip
PER_TOKEN_DECODE = Term(
    "per_token_decode",
    "per-request alpha OL (Eq. 10 without gamma), inside Eq. 9",
    (ps.ALPHA,),
    _per_token_decode,
)
STEP_OVERHEAD = Term("step_overhead", "t_step per decode step", (ps.T_STEP,), _step_overhead)
SEQUENCE_OVERHEAD = Term(
    "sequence_overhead", "t_seq per running sequence and decode step", (ps.T_SEQ,), _sequence_overhead
)
HOST_SEQUENCE_OVERHEAD = Term(
    "host_sequence_overhead",
    "vLLM's measured host work per running sequence and decode step (HOST_SEQUENCE_S, Vidur's CPU profile), not "
    "divided by TP",
    (),
    _host_sequence_overhead,
)
TP_WORKER_COMM = Term(
    "tp_worker_comm",
    "vLLM's driver-to-worker communication per decode step at TP > 1 (TP_COMM_STEP_S + TP_COMM_SEQUENCE_S per "
    "sequence, Vidur's ray_comm_time), 0 at TP 1",
    (),
    _tp_worker_comm,
    reads=("tensor_parallel",),
)
LAYER_STEP_OVERHEAD = Term(
    "layer_step_overhead", "t_layer per layer of the model (not per rank) and decode step", (ps.T_LAYER,),
    _layer_step_overhead, reads=("n_layers_total",),
)  # fmt: skip
ACTIVATION_WORK = Term(
    "activation_work", "t_act B L (D / 1024) per decode step: each sequence's per-layer work outside the GEMMs",
    (ps.T_ACT,), _activation_work, reads=("n_layers_total", "hidden_size"),
)  # fmt: skip
DECODE_GEMM_COMPUTE = Term(
    "decode_gemm_compute", "decode GEMM FLOPs B OL F_tok / (eta_d F_max)", (ps.ETA_D,), _decode_gemm_compute,
    reads=("linear_flops_per_token",),
)  # fmt: skip
