"""The recommended SLIM estimator (registry name ``slim``): the paper's equations with the serving engine's limits.

It is the term list `slim_terms` (`slimlib.model.terms`), each the paper's term made exact where the engine or the
kernels differ from Eqs. 5-12:

1. **Effective batch** (`slimlib.model.terms.batch`): ``B_eff = min(B, B_kv, B_tok)`` from the KV token slots and
   the chunked-prefill token budget; past the KV pool a static batch's preempted prompts are recomputed
   (`slimlib.model.preemption`: a replay of vLLM's scheduler, no parameter).
2. **Prefill** (`SERVED_PREFILL`): the served model's linear FLOPs at ``eta_c`` of the peak and a causal
   prompt's attention, at the device's measured prefill-attention rate where the registry has one; a hybrid's
   linear-attention layers' chunked recurrence and convolution (`slimlib.model.equations.linear_prefill_time`).
3. **Decode steps** (`DECODE_GEMMS`): every decode step reads the weights once and multiplies each by B
   tokens: ``max(W / (eta_w BW) [+ L t_floor], B F_dense / (eta_c F_max))``, or the engine's measured decode-GEMM
   curve; plus ``t_step``, ``t_layer L`` (kernel launches every rank pays), ``t_act B L D / 1024`` (each sequence's
   per-layer work outside the GEMMs), vLLM's measured host work per sequence, the routed experts the step's
   tokens touch (`slimlib.model.terms.MOE_EXPERTS`) and DeepSeek-V4's widened residual stream
   (`slimlib.model.terms.HYPER_CONNECTIONS`, also per prompt token; 0 for other models).
4. **Decode attention** (`DECODE_ATTENTION`, `ATTENTION_FACTOR`): Eq. 11 on the attention bytes per
   context token (the latent for MLA, the window for sliding layers), at the device's measured efficiency or
   ``eta_attn``, inside Eq. 9's ``B / eta [T_d + M_dec / BW]`` with ``T_d = alpha OL`` (Eq. 10 without ``gamma``).
5. **Several GPUs**: per-GPU features plus all-reduces and expert all-to-alls (`slimlib.model.parallel`).

TTFT and TPOT: the steps a served request lives through (a replay of vLLM's scheduler for the row's client),
timed by these terms (`slimlib.model.served`). Rows that cannot tell
per-step constants apart hold them (``held_reasons_`` says which and why; `slimlib.model.calibrated`). Why each term
is here: CHANGELOG.md.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from slimlib.metrics import relative_error
from slimlib.model.base import Arrays, AssumptionWarning
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.features import Features, FloatArray
from slimlib.model.served import (
    PERCENTILES,
    SPREAD,
    WINDOW_KEYS,
    client_codes,
    second_batch,
    served_latencies,
    window_features,
)
from slimlib.model.terms import (
    ACTIVATION_WORK,
    ALLREDUCE,
    ATTENTION_FACTOR,
    BATCH_FIXED,
    DECODE_ATTENTION,
    EXPERT_ALLTOALL,
    HOST_SEQUENCE_OVERHEAD,
    HYPER_CONNECTIONS,
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
from slimlib.registry.gpus import GPU
from slimlib.schema import TPOT_COLUMNS, TTFT_COLUMNS, measured_latency_s


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
        HYPER_CONNECTIONS,
        HOST_SEQUENCE_OVERHEAD,
        ALLREDUCE,
        EXPERT_ALLTOALL,
    )


#: weight of a measured mean TTFT or TPOT in the fit, relative to a throughput (each a residual of its own)
LATENCY_WEIGHT = 1.0
#: latency log error beyond which a residual counts linearly, not squared (`robust_residuals`)
LATENCY_SCALE = 0.25


def robust_residuals(r: FloatArray, scale: float = LATENCY_SCALE) -> FloatArray:
    """Residuals whose squares are the soft-L1 loss of `r`: ``sign(r) sqrt(2 c^2 (sqrt(1 + (r / c)^2) - 1))``
    (``~ r`` for ``|r| << c``, ``~ sqrt(2 c |r|)`` for ``|r| >> c``)."""
    c = float(scale)
    return np.asarray(np.sign(r) * np.sqrt(2.0 * c * c * (np.sqrt(1.0 + (r / c) ** 2) - 1.0)), dtype=float)


def _say_the_client(data: pd.DataFrame) -> None:
    """`AssumptionWarning` where rows say no client (`slimlib.model.served.client_codes`): their TTFT and TPOT are a
    closed loop's; and where they say nothing of the scheduler: vLLM's V1 engine's (`chunked_prefill_column`)."""
    if client_codes(data)[1]:
        warnings.warn(
            "rows that say no client are served as a closed loop at concurrency max_concurrency, else batch_size "
            "(give a column client: concurrency, burst with num_prompts, or static)", AssumptionWarning, stacklevel=4,
        )  # fmt: skip
    said = data["chunked_prefill"] if "chunked_prefill" in data.columns else pd.Series([None] * len(data))
    if (said.isna() | (said.astype(str).str.strip() == "")).any():
        warnings.warn(
            "rows that say nothing of chunked prefill are served by vLLM's V1 engine: chunked prefill at the token "
            "budget of column max_num_batched_tokens, else vLLM 0.32's default for the GPU (give chunked_prefill "
            "false for vLLM's V0 engine without it)", AssumptionWarning, stacklevel=4,
        )  # fmt: skip


def _at_second_batch(f: Features) -> Features:
    """Features `f` at `second_batch`, without preemption (where the served replay takes the decode step's slope)."""
    return {**f, "batch_size": second_batch(f["batch_size"]), "recompute_seqs": 0.0 * f["batch_size"]}


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
    #: TTFT and TPOT from a replay of vLLM's scheduler per configuration (`slimlib.advisor.slo.LazyGrid`)
    replays_scheduler = True
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

    def _arrays(
        self, feats: Features, hw: GPU, p: dict[str, float] | None = None, served: str = "means"
    ) -> Arrays:
        """`PRED_COLUMNS`'s arrays: the calibrated model's four and, unless `served` is ``none``, the served TTFT
        and TPOT; with ``all`` the `SERVED_COLUMNS` too (`slimlib.model.served`). The replay's windows are added
        to `feats` the first time they are needed."""
        params = self.params_ if p is None else p
        thr, e2e, pre, dec = super()._arrays(feats, hw, params)[:4]
        if served == "none":
            return thr, e2e, pre, dec
        if WINDOW_KEYS[0] not in feats:
            feats.update(window_features(feats))
        half = self._fit_cached(feats, "second batch", lambda: _at_second_batch(feats))
        with np.errstate(divide="ignore", invalid="ignore"):
            dec_2 = self._components(params, half, hw)[1]
        s = served_latencies(feats, pre, dec, e2e, dec_2, served == "all")
        if served != "all":
            return thr, e2e, pre, dec, s["ttft"], s["tpot"]
        rest = (s["queue"], *(s[f"{q}_p{n}"] for q in SPREAD for n in PERCENTILES))
        return thr, e2e, pre, dec, s["ttft"], s["tpot"], *rest

    # -- fit on what was measured ---------------------------------------------------------------------------------
    def _fit_targets(self, data: pd.DataFrame) -> dict[str, FloatArray]:
        out = super()._fit_targets(data)
        out["ttft"] = measured_latency_s(data, TTFT_COLUMNS)
        out["tpot"] = measured_latency_s(data, TPOT_COLUMNS)
        if any(np.isfinite(out[k]).any() for k in ("ttft", "tpot")):
            _say_the_client(data)
        return out

    def _observations(self, data: pd.DataFrame) -> tuple[int, str]:
        t = self._fit_targets(data)
        latencies = sum(int((np.isfinite(t[k]) & (t[k] > 0)).sum()) for k in ("ttft", "tpot"))
        return len(data) + latencies, "measured values (throughputs, TTFTs, TPOTs)" if latencies else "rows"

    def _fit_residuals(
        self, p: dict[str, Any], feats: Features, hw: GPU, targets: dict[str, FloatArray], copies: int = 1
    ) -> FloatArray:
        """Relative throughput errors, and where a row measures them the mean TTFT's and TPOT's log errors through
        `robust_residuals`, each weighted `LATENCY_WEIGHT` (module docstring); `copies` as in
        `CalibratedModel._fit_residuals`."""
        latencies = any((np.isfinite(targets[k]) & (targets[k] > 0)).any() for k in ("ttft", "tpot"))
        arrays = self._arrays(feats, hw, p, "means" if latencies else "none")
        parts = [relative_error(targets["throughput"], arrays[0]).reshape(copies, -1)]
        for name, pred in zip(("ttft", "tpot"), arrays[4:6], strict=False):
            y = targets[name]
            keep = np.isfinite(y) & (y > 0)
            if keep.any():
                with np.errstate(divide="ignore", invalid="ignore"):
                    r = np.log(pred[keep] / y[keep])
                parts.append(
                    np.sqrt(LATENCY_WEIGHT)
                    * robust_residuals(np.nan_to_num(r, nan=10.0, posinf=10.0, neginf=-10.0)).reshape(
                        copies, -1
                    )
                )
        return np.concatenate(parts, axis=1)

    def _predict_rows(self, data: pd.DataFrame, hw: GPU, served: str = "all") -> Arrays:
        if served != "none":
            _say_the_client(data)
        return self._arrays(self._features(data, hw), hw, served=served)

    def effective_batch(self, df: pd.DataFrame, hw: GPU) -> FloatArray:
        """``B_eff`` per row of `df` (`slimlib.model.terms.batch`), the batch the model predicts with."""
        f: Features = self._features(df, hw)
        return f["batch_size"]
