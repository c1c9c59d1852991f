"""The recommended SLIM estimator (registry name ``slim``): the paper's equations with the serving engine's limits.

It is the term list `slim_terms` (`slimlib.model.terms`), each the paper's term made exact where the engine or
the kernels differ from Eqs. 5-12:

1. **Effective batch** (`slimlib.model.terms.batch`): ``B_eff = min(B, B_kv, B_tok)`` from the KV token slots and
   the chunked-prefill token budget of the serving configuration, ``kappa = 1`` for static batches. The prefill
   (`PREFILL_SERVED_MEASURED`) counts the served model's linear FLOPs, at ``eta_c`` of the peak, and a causal
   prompt's attention, half Eq. 8's square, at the engine's measured prefill-attention rate where the registry has
   one (``prefill_attention_flops``: the CPU engine, whose kernel runs at 0.4x its GEMMs' rate), else at ``eta_c``.
   Past the KV pool a static batch does not run in clean waves: vLLM admits requests by their prompts, preempts
   them as they grow and recomputes them later (`PREEMPTION_RECOMPUTE`, `slimlib.model.preemption`: a replay of
   its scheduler counts them, no parameter); their prefill, at the prefill term's cost, is charged to the decode
   phase.
2. **A decode step's GEMMs as a roofline, instead of B0** (`slimlib.model.terms.rooflines.STEP_GEMM_ROOFLINE_FLOOR`):
   every decode step reads the weights every token uses once and multiplies each by the step's B tokens, so it
   takes ``max(W / (eta_w BW), B F_dense / (eta_c F_max))``: flat in B below the device's ridge point (hundreds on
   GPUs) and compute-bound past it, with the registry's peaks and ``eta_c`` shared with
   the prefill; on a GPU whose registry holds the measured per-layer kernel latency floor (``layer_floor_s``,
   NVIDIA AIConfigurator's kernels) the weight read is ``L t_floor + W / (eta_w BW)``, the model's every layer
   paying its kernels' latency, which tensor parallelism does not divide; on a device whose registry entry holds the engine's measured decode-GEMM curve (``decode_gemm_curve``:
   the CPU engine, `slimlib.data.decode_gemm`) the step takes the layers' and the LM head's weights times the
   curve's seconds per weight at B (flat to about 8 sequences, then bending into the roof; ``eta_w`` unused there);
   plus a fixed ``t_step`` (scheduling, sampling) and ``t_layer`` per layer of the model
   (`LAYER_STEP_OVERHEAD`: kernel launches, which every tensor-parallel rank pays for every layer, so TP does not
   divide them) and ``t_act B L (D / 1024)``, each running sequence's work per layer outside the GEMMs and the KV
   read, growing with the width it touches (`ACTIVATION_WORK`: norms, activations, its attention call), and vLLM's
   host work per running sequence as measured (`HOST_SEQUENCE_OVERHEAD`: 37.5 us per sequence and step, Vidur's
   CPU profile of the scheduler, input preparation, sampler and output processing; no parameter, not divided by
   TP); a mixture of experts adds the routed experts the step's tokens touch (`slimlib.model.terms.MOE_EXPERTS`).
3. **Decode attention traffic by kernel regime** (`slimlib.model.terms.recommended`): Eq. 11 on the attention bytes per
   context token (the latent for MLA, the window for sliding-window layers), widened to the query width above
   vLLM's paged-attention switch, at bandwidth efficiency ``eta_attn``: Eq. 9's ``B / eta_attn [T_d + M_dec / BW]``;
   on a GPU whose registry entry holds vLLM's decode attention kernel's measured efficiency
   (``decode_attention_eff``, from NVIDIA AIConfigurator's tables; `slim gpus` lists it) that value takes
   ``eta_attn``'s place (`ATTENTION_FACTOR_MEASURED`), which pre-knee points cannot see, and the bytes are the
   ``D_kv`` ones at every batch size: that kernel reads each KV head once for all its query heads, with no step at
   the paged-attention switch (`DECODE_ATTENTION_KERNEL`).
4. **Dense decode**: ``T_d = alpha OL`` per request (Eq. 10 without ``gamma``), inside Eq. 9. At decode batch
   sizes the projection and FFN GEMMs are bound by reading their weights, which component 2 charges per step.
5. Several GPUs: per-GPU features plus all-reduces (tensor parallelism) and expert all-to-alls (expert
   parallelism), `slimlib.model.parallel`.

TTFT and TPOT (`predict`'s ``pred_ttft_s``, ``pred_tpot_s``): the batch E2E split as the serving engine emits
tokens (`slimlib.model.terms.serving_mode.serving_latencies`): ``TTFT = t_fixed + s T_pre`` with ``s`` the
share of the batch prefill a request waits for (``(n_c + 1) / (2 n_c)`` for a static batch prefilled in ``n_c``
chunked passes; 1 otherwise: all B prompts' prefill before the first token, an upper bound under continuous
batching), ``TPOT = (E2E - TTFT) / (OL - 1)``. Not fitted to measured TTFT/TPOT (the fit reads throughput only);
their accuracy and intervals are measured by the extrapolation cross-validation where the data have them.

The step roofline, ``t_layer``, the causal prefill attention count, the measured decode-GEMM roof and curve, the
measured decode-attention efficiency, ``t_act``, the measured prefill-attention rate, the measured host work
per sequence, the recompute of preempted prompts and the measured kernel's attention width and the layer floor were admitted by the
extrapolation cross-validation (`slimlib.experiments.accuracy.extrapolation`, README "Selection by extrapolation";
the last two found by its kernel-composed curves, so their axes are no independent test of them): the model without the first
two (``slim-v3``, `slimlib.experiments.accuracy.extrapolation_candidates`), with each one alone, without the causal
count (``slim-v4``), without the measured roof (``slim-v5``), with the roof's max instead of the measured curve
(``slim-v6``), with ``eta_attn`` fitted on every GPU (``slim-v7``), without ``t_act`` (``slim-v8``), with the
prompt's attention at ``eta_c`` on every device (``slim-v9``), without the host work per sequence (``slim-v10``)
fitted without the prior test (``slim-v11``, below), with the H100's priors on every device (``slim-v12``),
without the recompute of preempted prompts (``slim-v13``), with the paged-attention widening on the measured
kernel's devices too (``slim-v14``) and without the layer floor (``slim-v15``) are scored by fitting one region and
predicting another along every axis, and this term set has the best worst-axis throughput error (ties: the lower mean error). The
earlier components were chosen on training rows (`scripts/choose_components.py`): ``alpha`` against a FLOP-based
per-request term, the attention rule against ``D_kv`` always, ``kappa = 1`` for static batches against 0.5.

Rows that cannot tell per-step constants apart hold them (``held_`` and ``held_reasons_`` say which; the
constructor's ``fixed`` is not changed): on one architecture the weight read, ``t_step`` and ``t_layer L`` are one
constant per step, so ``eta_w`` is held at its measured prior (keeping the ridge where the device puts it; on a GPU
with a measured layer floor, the bandwidth efficiency of the floor's line, ``layer_floor_eff``) and
``t_layer`` and ``t_act`` at 0 (``t_act B L D / 1024`` is then one constant per sequence and step with
``alpha``); on a device with a measured decode-GEMM curve ``eta_w`` is unused and held, and ``t_step`` is
fitted; on a GPU with a measured decode-attention efficiency ``eta_attn`` is unused and held at that value; on one
output length ``t_step OL`` and ``t_fixed`` are one constant per batch, so ``t_fixed`` is held at 0. A parameter
with a measured prior that the fit puts on a bound of its box is held at its prior unless an F-test of the rows
rejects that (the prior test, `slimlib.model.calibrated.CalibratedModel._prior_test`): a bound is a limit, not a
measurement, so rows that cannot tell the bound from the prior get the prior (on LLM-Inference-Bench's short MI300X
contexts the decode attention is too small a part of the time to set ``eta_attn``, which a free fit puts at 1.5).
The bandwidth efficiencies may reach 1.5: they are relative to the registry's bandwidth, which for some
GPUs is derived rather than measured (h100-sxm-64gb: uncertain by up to +25%).
"""

from __future__ import annotations

import pandas as pd

from slimlib.model.base import Arrays6
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.features import Features, FloatArray
from slimlib.model.terms import (
    ACTIVATION_WORK,
    ALLREDUCE,
    ATTENTION_FACTOR_MEASURED,
    BATCH_FIXED,
    DECODE_ATTENTION_KERNEL,
    EXPERT_ALLTOALL,
    HOST_SEQUENCE_OVERHEAD,
    LAYER_STEP_OVERHEAD,
    MOE_EXPERTS,
    PER_TOKEN_DECODE,
    PREEMPTION_RECOMPUTE,
    PREFILL_SERVED_MEASURED,
    STEP_OVERHEAD,
    Term,
    effective_batch_term,
)
from slimlib.model.terms.batch import KV_CONTEXT_FRAC
from slimlib.model.terms.rooflines import STEP_GEMM_ROOFLINE_FLOOR
from slimlib.model.terms.serving_mode import serving_latencies, ttft_share
from slimlib.registry.gpus import GPU


def slim_terms(kv_context_frac: float = KV_CONTEXT_FRAC) -> tuple[Term, ...]:
    """The recommended model's terms (module docstring), with `kv_context_frac` the continuous-batching kappa."""
    return (
        effective_batch_term(kv_context_frac),
        PREFILL_SERVED_MEASURED,
        PREEMPTION_RECOMPUTE,
        BATCH_FIXED,
        ATTENTION_FACTOR_MEASURED,
        DECODE_ATTENTION_KERNEL,
        STEP_GEMM_ROOFLINE_FLOOR,
        MOE_EXPERTS,
        PER_TOKEN_DECODE,
        STEP_OVERHEAD,
        LAYER_STEP_OVERHEAD,
        ACTIVATION_WORK,
        HOST_SEQUENCE_OVERHEAD,
        ALLREDUCE,
        EXPERT_ALLTOALL,
    )


class ExtendedSlimModel(CalibratedModel):
    """The recommended SLIM (registry name ``slim``; see the module docstring).

    Parameters
    ----------
    gpu : registry name of the GPU; default: the table's ``gpu`` column.
    kv_context_frac : kappa under continuous batching, the fraction of OL a running sequence holds on average in the
        KV cache (0.5); rows with ``static_batch`` true use 1.
    fixed, n_starts, max_nfev, seed : as `CalibratedModel`.

    The KV token slots and the chunked-prefill token budget are features of each row's serving configuration
    (``kv_token_capacity``, ``max_num_batched_tokens``), not options of the model.
    """

    variant = "slim"
    test_priors_at_bound = True
    device_priors = True

    def __init__(
        self,
        gpu: str | None = None,
        *,
        kv_context_frac: float = KV_CONTEXT_FRAC,
        fixed: dict[str, float] | None = None,
        n_starts: int = 8,
        max_nfev: int = 4000,
        seed: int = 0,
    ) -> None:
        self.kv_context_frac = kv_context_frac
        super().__init__(gpu, fixed=fixed, n_starts=n_starts, max_nfev=max_nfev, seed=seed)

    def terms(self) -> tuple[Term, ...]:
        return slim_terms(float(self.kv_context_frac))

    def _arrays(self, feats: Features, hw: GPU, p: dict[str, float] | None = None) -> Arrays6:
        """`PRED_COLUMNS`'s arrays: the calibrated model's four and TTFT and TPOT (module docstring)."""
        thr, e2e, pre, dec = super()._arrays(feats, hw, p)[:4]
        ttft, tpot = serving_latencies(pre, dec, e2e, ttft_share(feats), feats["output_len"])
        return thr, e2e, pre, dec, ttft, tpot

    def effective_batch(self, df: pd.DataFrame, hw: GPU) -> FloatArray:
        """``B_eff`` per row of `df` (`slimlib.model.terms.batch`), the batch the model predicts with."""
        f: Features = self._features(df, hw)
        return f["batch_size"]
