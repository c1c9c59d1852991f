"""The recommended SLIM estimator (registry name ``slim``): the paper's equations with the serving engine's limits.

It is the term list `slim_terms` (`slimlib.model.terms`), each the paper's term made exact where the engine or the
kernels differ from Eqs. 5-12:

1. **Effective batch** (`slimlib.model.terms.batch`): ``B_eff = min(B, B_kv, B_tok)`` from the KV token slots and
   the chunked-prefill token budget; past the KV pool a static batch's preempted prompts are recomputed
   (`slimlib.model.preemption`: a replay of vLLM's scheduler, no parameter).
2. **Prefill** (`SERVED_PREFILL`): the served model's linear FLOPs at ``eta_c`` of the peak and a causal
   prompt's attention, at the device's measured prefill-attention rate where the registry has one.
3. **Decode steps** (`DECODE_GEMMS`): every decode step reads the weights once and multiplies each by B
   tokens: ``max(W / (eta_w BW) [+ L t_floor], B F_dense / (eta_c F_max))``, or the engine's measured decode-GEMM
   curve; plus ``t_step``, ``t_layer L`` (kernel launches every rank pays), ``t_act B L D / 1024`` (each sequence's
   per-layer work outside the GEMMs), vLLM's measured host work per sequence, and the routed experts the step's
   tokens touch (`slimlib.model.terms.MOE_EXPERTS`).
4. **Decode attention** (`DECODE_ATTENTION`, `ATTENTION_FACTOR`): Eq. 11 on the attention bytes per
   context token (the latent for MLA, the window for sliding layers), at the device's measured efficiency or
   ``eta_attn``, inside Eq. 9's ``B / eta [T_d + M_dec / BW]`` with ``T_d = alpha OL`` (Eq. 10 without ``gamma``).
5. **Several GPUs**: per-GPU features plus all-reduces and expert all-to-alls (`slimlib.model.parallel`).

TTFT and TPOT split the E2E as the engine emits tokens (`slimlib.model.terms.serving_mode`). Rows that cannot tell
per-step constants apart hold them (``held_reasons_`` says which and why; `slimlib.model.calibrated`). Why each term
is here: CHANGELOG.md.
"""

from __future__ import annotations

import pandas as pd

from slimlib.model.base import Arrays6
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.features import Features, FloatArray
from slimlib.model.terms import (
    ACTIVATION_WORK,
    ALLREDUCE,
    ATTENTION_FACTOR,
    BATCH_FIXED,
    DECODE_ATTENTION,
    EXPERT_ALLTOALL,
    HOST_SEQUENCE_OVERHEAD,
    LAYER_STEP_OVERHEAD,
    MOE_EXPERTS,
    PER_TOKEN_DECODE,
    PREEMPTION_RECOMPUTE,
    SERVED_PREFILL,
    STEP_OVERHEAD,
    Term,
    effective_batch_term,
)
from slimlib.model.terms.batch import KV_CONTEXT_FRAC
from slimlib.model.terms.rooflines import DECODE_GEMMS
from slimlib.model.terms.serving_mode import serving_latencies, ttft_share
from slimlib.registry.gpus import GPU


def slim_terms(kv_context_frac: float = KV_CONTEXT_FRAC) -> tuple[Term, ...]:
    """The recommended model's terms (module docstring), with `kv_context_frac` the continuous-batching kappa."""
    return (
        effective_batch_term(kv_context_frac),
        SERVED_PREFILL,
        PREEMPTION_RECOMPUTE,
        BATCH_FIXED,
        ATTENTION_FACTOR,
        DECODE_ATTENTION,
        DECODE_GEMMS,
        MOE_EXPERTS,
        PER_TOKEN_DECODE,
        STEP_OVERHEAD,
        LAYER_STEP_OVERHEAD,
        ACTIVATION_WORK,
        HOST_SEQUENCE_OVERHEAD,
        ALLREDUCE,
        EXPERT_ALLTOALL,
    )


class SlimModel(CalibratedModel):
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
