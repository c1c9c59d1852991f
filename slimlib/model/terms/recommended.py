"""Terms of the recommended model (beyond the paper): each a paper term made exact where the engine or the kernels
differ from Eqs. 5-12.

* `SERVED_PREFILL`: Eq. 7 on the served model's linear FLOPs per token at ``eta_c``, plus a causal
  prompt's attention, the lower half of Eq. 8's ``4 B IL^2 D`` (`slimlib.model.equations.ATTENTION_FLOPS_CAUSAL`),
  at the device's measured prefill-attention rate where the registry has one (``prefill_attention_flops``: the CPU
  engine's kernel), else at ``eta_c``; a hybrid's prompt attention in its full-attention layers only, and its
  linear-attention layers' chunked recurrence and causal convolution (`linear_attention_prefill`: the device's
  measured Gated DeltaNet prefill rates, checked in `slimlib.experiments.kernel_timing.linear_check`; a Mamba-2
  layer's chunked scan counted by its own FLOPs, `slimlib.model.equations.ssd_prefill_flops`, at the same rates,
  no Mamba-2 kernel being measured); a sparse attention's prompt
  computes the pairs of its selection (`slimlib.model.equations.sparse_pair_share`) in its selecting layers
  (``sparse_layer_share``: MiniMax-M3's full layers compute every pair) and its indexer scores every causal pair
  (``indexer_width``); DeepSeek-V4's prompt computes its window, its CSA layers' selected and its HCA
  layers' compressed entries (`slimlib.model.equations.compressed_pair_share`), its indexers a quarter of the
  pairs.
* `ATTENTION_FACTOR`: Eq. 9's factor without B0, ``B / eta``; ``eta`` is the device's measured
  decode-attention bandwidth efficiency (registry ``decode_attention_eff``) where measured, else ``eta_attn``.
* `DECODE_ATTENTION`: Eq. 11's traffic per request, ``b_ctx C(IL, OL) + b_win C_W(IL, OL)`` over the
  bandwidth (``b_ctx``: attention bytes per context token of one GPU's full-attention layers, the latent for MLA;
  ``b_win``: those of its sliding-window layers, which read at most the window), plus a hybrid's linear-attention
  state ``2 S OL`` (``S`` = ``state_bytes``, read and written at each decode step: the Gated DeltaNet decode kernel
  streams it, so it grows with the batch and not with the context). DeepSeek sparse attention reads the latent of
  at most ``k`` selected tokens per step (``b_sel C_k(IL, OL)``, Eq. 12 capped at ``k`` as a window is) and its
  indexer's keys of every token (in ``b_ctx``). DeepSeek-V4 reads each layer's window (``b_win``), each CSA
  layer's selected compressed entries (``b_sel``, its ``k`` entries counted as ``4 k`` tokens of a quarter entry
  each), and every HCA entry and CSA indexer key (``b_ctx``). vLLM's paged-attention decode reads
  a KV head once per query head above `ATTENTION_SWITCH_PAIRS` (sequence, query head) pairs per rank
  (``vllm/attention/ops/paged_attn.py``), widening MHA/GQA bytes by ``D / D_kv`` there; the kernel measured on a
  device with ``decode_attention_eff`` reads each KV head once for all its query heads at every batch size, so no
  widening applies there; MLA reads its latent once per sequence.
* `PER_TOKEN_DECODE`: Eq. 10's ``alpha OL`` without ``gamma``, inside Eq. 9 (the decode GEMMs are charged per step,
  `slimlib.model.terms.rooflines`).
* `STEP_OVERHEAD` ``t_step`` and `LAYER_STEP_OVERHEAD` ``t_layer L`` per decode step (``L`` the model's own layer
  count: every tensor-parallel rank launches every layer's kernels); `ACTIVATION_WORK` ``t_act B L D / 1024``: each
  running sequence's work per layer outside the GEMMs and the KV read.
* `HYPER_CONNECTIONS`: DeepSeek-V4's widened residual stream, ``hc_bytes_per_token`` (the ``hc_mult`` bf16 copies
  that vLLM's ``mhc_pre`` and ``mhc_post`` kernels read and write at each layer's two sites,
  `slimlib.model.serving.hyper_connection_bytes`) per token over the peak bandwidth, each decode step for its B
  tokens and each prompt for its IL tokens; 0 for a model without hyper-connections. Checked against vLLM 0.24.0's
  measured kernels in `slimlib.experiments.kernel_timing.hyper_connection_check`.
* `HOST_SEQUENCE_OVERHEAD`: vLLM's host work per running sequence and decode step, `HOST_SEQUENCE_S`: the summed
  slopes over the batch of the scheduler, input preparation, sampler and output processing in Vidur's CPU-overhead
  profile (``data/vidur-cpu-overheads.csv``; `slimlib.data.vidur.host_sequence_slopes`), not divided by TP.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from slimlib.model import equations as eq
from slimlib.model.features import Features, FloatArray, prefill_peak_flops
from slimlib.model.terms import specs as ps
from slimlib.model.terms.batch import preemption_recompute_term
from slimlib.model.terms.term import Params, Term, Times
from slimlib.registry.gpus import GPU
from slimlib.registry.param_count import CSA_RATIO, HCA_RATIO

#: (sequence, query head) pairs per rank above which vLLM runs its unpartitioned paged-attention kernel
ATTENTION_SWITCH_PAIRS = 512
#: vLLM's host work per running sequence and decode step, seconds (module docstring)
HOST_SEQUENCE_S = 3.7478e-5


def _prefill_served_measured(p: Params, f: Features, hw: GPU) -> Times:
    layers = f["n_layers"]
    b, il = f["batch_size"], f["input_len"]
    # a hybrid's linear layers have no quadratic attention; a sparse attention computes the pairs of its selection,
    # and its indexer scores every pair
    compressed = (f["csa_layer_share"] + f["hca_layer_share"]) > 0
    pairs = np.where(
        compressed,
        eq.compressed_pair_share(il, f["sliding_window"], f["attention_topk"], f["csa_layer_share"],
                                 f["hca_layer_share"], CSA_RATIO, HCA_RATIO),
        # the layers that do not select (MiniMax-M3's full layers) compute every pair
        1.0 - f["sparse_layer_share"] + f["sparse_layer_share"] * eq.sparse_pair_share(il, f["attention_topk"]),
    )  # fmt: skip
    dim = f["attention_width"] * f["attention_layer_share"] * pairs
    dim = dim + f["indexer_width"] * f["tensor_parallel"]  # the indexer runs whole on every rank
    per_layer = f["linear_flops_per_token"] / layers
    peak = prefill_peak_flops(f, hw)
    recurrence = linear_attention_prefill(p, f, hw)
    if hw.prefill_attention_flops is None:
        flops = eq.layer_prefill_flops(b, il, layers, dim, per_layer, eq.ATTENTION_FLOPS_CAUSAL)
        return Times(prefill=eq.prefill_time(flops, peak, p["eta_c"]) + recurrence)
    linear = eq.layer_prefill_flops(b, il, layers, dim, per_layer, 0.0)
    attention = eq.layer_prefill_flops(b, il, layers, dim, 0.0, eq.ATTENTION_FLOPS_CAUSAL)
    return Times(
        prefill=eq.prefill_time(linear, peak, p["eta_c"])
        + attention / hw.prefill_attention_flops
        + recurrence
    )


def linear_attention_prefill(p: Params, f: Features, hw: GPU) -> FloatArray:
    """Seconds a batch's prompts spend in a hybrid's linear-attention layers (`eq.linear_prefill_time`) at the
    device's measured Gated DeltaNet prefill rates where the registry has them, else the recurrence's FLOPs at
    ``eta_c`` of the bf16 peak and the convolution at the peak bandwidth, with no per-token floor; 0 without
    linear layers."""
    if hw.linear_prefill_flops is None or hw.linear_prefill_token_s is None or hw.linear_conv_bw is None:
        rates = (0.0, hw.peak_flops * p["eta_c"], hw.mem_bw)
    else:
        rates = (hw.linear_prefill_token_s, hw.linear_prefill_flops, hw.linear_conv_bw)
    return eq.linear_prefill_time(f["batch_size"], f["input_len"], f["n_linear_layers"],
                                  f["linear_prefill_flops_per_token"], f["linear_conv_bytes_per_token"], *rates)  # fmt: skip


def measured_attention_eff(p: Params, hw: GPU) -> ArrayLike:
    """The decode attention's bandwidth efficiency `ATTENTION_FACTOR` uses on `hw`: the registry's
    ``decode_attention_eff`` where measured, else the parameter ``eta_attn``."""
    return float(hw.decode_attention_eff) if hw.decode_attention_eff is not None else p["eta_attn"]


def _attention_factor_measured(p: Params, f: Features, hw: GPU) -> Times:
    return Times(factor=eq.decode_batch_factor(f["batch_size"], measured_attention_eff(p, hw), 0.0))


def measured_kernel(hw: GPU | None) -> bool:
    """Whether `hw`'s registry entry holds the measured decode-attention kernel (``decode_attention_eff``), which
    reads each KV head once for all its query heads (module docstring, `DECODE_ATTENTION`)."""
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


def attention_bytes(f: Features, hw: GPU | None = None) -> FloatArray:
    """Decode attention bytes one request reads over its decode, per GPU (module docstring), a hybrid's
    linear-attention state read and written at each of its OL steps included; `hw`: the device, whose measured
    kernel has no widening (`attention_widening`)."""
    il, ol = f["input_len"], f["output_len"]
    full = f["attn_bytes_per_context_token"] * eq.kv_scan_tokens(il, ol)
    window = f["attn_bytes_per_window_token"] * eq.window_scan_tokens(il, ol, f["sliding_window"])
    selected = f["attn_bytes_per_selected_token"] * eq.window_scan_tokens(il, ol, f["attention_topk"])
    state = 2.0 * f["state_bytes"] * ol
    return np.asarray(attention_widening(f, hw) * (full + window) + selected + state, dtype=float)


def _decode_attention(p: Params, f: Features, hw: GPU) -> Times:
    return Times(request=attention_bytes(f, hw) / hw.mem_bw)


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


def _hyper_connections(p: Params, f: Features, hw: GPU) -> Times:
    per_token = f["hc_bytes_per_token"] / hw.mem_bw
    return Times(prefill=f["batch_size"] * f["input_len"] * per_token, step=f["batch_size"] * per_token)


def _host_sequence_overhead(p: Params, f: Features, hw: GPU) -> Times:
    return Times(step=f["batch_size"] * HOST_SEQUENCE_S)


SERVED_PREFILL = Term(
    "served_prefill",
    "prefill FLOPs (served linear FLOPs per token at eta_c, Eq. 7; causal attention at the device's measured "
    "prefill-attention rate, registry prefill_attention_flops, else at eta_c; a hybrid's linear-attention "
    "recurrence and convolution at the measured Gated DeltaNet prefill rates, registry linear_prefill_*)",
    (ps.ETA_C,), _prefill_served_measured,
    reads=("linear_flops_per_token", "attention_layer_share", "attention_topk", "indexer_width", "attention_width",
           "csa_layer_share", "hca_layer_share", "sliding_window", "sparse_layer_share", "n_linear_layers",
           "linear_prefill_flops_per_token", "linear_conv_bytes_per_token"),
)  # fmt: skip
#: past the KV pool, a static batch's preempted requests recomputed at the prompt's cost (`preemption_recompute_term`)
PREEMPTION_RECOMPUTE = preemption_recompute_term(SERVED_PREFILL)
ATTENTION_FACTOR = Term(
    "attention_factor",
    "Eq. 9's factor without B0: B / eta, eta the device's measured decode-attention efficiency (registry "
    "decode_attention_eff), else eta_attn",
    (ps.ETA_ATTN,),
    _attention_factor_measured,
)
DECODE_ATTENTION = Term(
    "decode_attention",
    "per-request attention read (Eq. 11 on the context and window tokens, kernel-regime width, the measured "
    "kernel's where the device has it) over the bandwidth, inside Eq. 9",
    (),
    _decode_attention,
    reads=(
        "attn_bytes_per_context_token",
        "attn_bytes_per_window_token",
        "sliding_window",
        "latent_attention",
        "state_bytes",
        "attn_bytes_per_selected_token",
        "attention_topk",
    ),
)
PER_TOKEN_DECODE = Term(
    "per_token_decode",
    "per-request alpha OL (Eq. 10 without gamma), inside Eq. 9",
    (ps.ALPHA,),
    _per_token_decode,
)
STEP_OVERHEAD = Term("step_overhead", "t_step per decode step", (ps.T_STEP,), _step_overhead)
HYPER_CONNECTIONS = Term(
    "hyper_connections",
    "DeepSeek-V4's widened residual stream: hc_bytes_per_token over the peak bandwidth per prompt token and per "
    "decode step's token (0 without hyper-connections)",
    (),
    _hyper_connections,
    reads=("hc_bytes_per_token",),
)
HOST_SEQUENCE_OVERHEAD = Term(
    "host_sequence_overhead",
    "vLLM's measured host work per running sequence and decode step (HOST_SEQUENCE_S, Vidur's CPU profile), not "
    "divided by TP",
    (),
    _host_sequence_overhead,
)
LAYER_STEP_OVERHEAD = Term(
    "layer_step_overhead", "t_layer per layer of the model (not per rank) and decode step", (ps.T_LAYER,),
    _layer_step_overhead, reads=("n_layers_total",),
)  # fmt: skip
ACTIVATION_WORK = Term(
    "activation_work", "t_act B L (D / 1024) per decode step: each sequence's per-layer work outside the GEMMs",
    (ps.T_ACT,), _activation_work, reads=("n_layers_total", "hidden_size"),
)  # fmt: skip
