"""SLIM-roofline (registry name ``slim-roofline``, beyond the paper): every term a roofline of known FLOPs and
bytes over the device's peaks, in the engine steps of its serving mode, with TTFT and TPOT as outputs.

Terms (`roofline_terms`): the serving mode (`slimlib.model.terms.serving_mode`: static batch or continuous
batching with chunked prefill, from the row's ``static_batch`` column), the roofline of each operator class
(`slimlib.model.terms.rooflines`: dense linear layers, routed experts, prefill and decode attention), the
per-step and per-sequence overheads, the batch-level ``t_fixed`` (Eq. 5) and the tensor/expert-parallel
collectives (`slimlib.model.parallel`). Eight parameters: ``eta_c``, ``eta_w``, ``eta_e``, ``eta_attn``,
``eta_ac`` (efficiencies of known peaks, with measured priors), ``t_step``, ``t_seq``, ``t_fixed`` (host seconds).

Outputs (`predict`): ``pred_prefill_s`` the prefill time ``T_pre`` (all passes), ``pred_decode_s`` the decode
steps, ``pred_e2e_s = t_fixed + T_pre + T_dec``, ``pred_ttft_s = t_fixed + ttft_share T_pre`` and
``pred_tpot_s = (E2E - TTFT) / (OL - 1)`` (NaN at OL = 1), so ``E2E = TTFT + (OL - 1) TPOT`` in both modes; the
throughput is Eq. 6 on ``B_eff``.

Fitting (`fit`): least squares on relative errors, as `slimlib.model.calibrated`, of the throughput and, where
the table has them, of the measured mean TTFT (``mean_ttft_ms``) and mean TPOT (``mean_tpot_ms``, else
``mean_itl_ms``: the same mean when a row's requests have one OL), each row and quantity with equal weight; a
missing value adds no residual. The latency residuals are log ratios ``ln(pred / measured)`` (the relative
error to first order) through a soft-L1 (pseudo-Huber) transform of scale `LATENCY_SCALE` (`robust_residuals`):
streamed timings hold rows where every token reached the client at once (the CPU engine: mean ITL 0.003 ms, TTFT
equal to E2E), which a squared relative error would chase. Few-point robustness:

* a table of one architecture cannot tell the per-step weight read ``W / (eta_w BW)`` from ``t_step`` (both a
  constant per step below the ridge): ``eta_w`` is held at its measured prior there, so the constant goes to the
  host overhead and the ridge of the decode GEMMs stays where the device puts it;
* a table without routed experts holds ``eta_e`` (the fused MoE kernel's compute efficiency) at its prior, one
  without latent attention ``eta_ac`` (the decode attention's compute efficiency: MHA/GQA decode attention is far
  below the ridge): they have no effect there;
* after a fit, every efficiency with a prior that the rows do not resolve (at a bound, or a standard error
  above its estimate) is held at its prior and the rest refitted (``held_reasons_`` says which and why);
* with fewer measured values (throughputs, TTFTs and TPOTs) than free parameters every prior is held
  (`slimlib.model.calibrated`).
"""

from __future__ import annotations

from typing import Self

import numpy as np
import pandas as pd

from slimlib.metrics import relative_error
from slimlib.model import equations as eq
from slimlib.model.base import Arrays6, Progress
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.features import Features, FloatArray
from slimlib.model.terms import ALLREDUCE, BATCH_FIXED, EXPERT_ALLTOALL, Term
from slimlib.model.terms import specs as ps
from slimlib.model.terms.rooflines import (
    ROOF_DECODE_ATTENTION,
    ROOF_EXPERTS,
    ROOF_LINEAR,
    ROOF_PREFILL_ATTENTION,
    ROOF_SEQUENCE_OVERHEAD,
    ROOF_STEP_OVERHEAD,
)
from slimlib.model.terms.serving_mode import SERVING_MODE, serving_latencies
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import GPU

#: measured latency columns the fit reads (ms), first present wins: TTFT, then TPOT
TTFT_COLUMNS = ("mean_ttft_ms",)
TPOT_COLUMNS = ("mean_tpot_ms", "mean_itl_ms")
#: an efficiency whose standard error exceeds this multiple of its estimate is unresolved
UNRESOLVED_RSE = 1.0
#: latency log ratio beyond which a residual counts linearly, not squared (`robust_residuals`)
LATENCY_SCALE = 0.25


def robust_residuals(r: FloatArray, scale: float = LATENCY_SCALE) -> FloatArray:
    """Residuals whose squares are the soft-L1 loss of `r`: ``sign(r) sqrt(2 c^2 (sqrt(1 + (r / c)^2) - 1))``
    (``~ r`` for ``|r| << c``, ``~ sqrt(2 c |r|)`` for ``|r| >> c``)."""
    c = float(scale)
    return np.asarray(np.sign(r) * np.sqrt(2.0 * c * c * (np.sqrt(1.0 + (r / c) ** 2) - 1.0)), dtype=float)


def roofline_terms() -> tuple[Term, ...]:
    """The terms of SLIM-roofline (module docstring)."""
    return (
        SERVING_MODE,
        ROOF_LINEAR,
        ROOF_EXPERTS,
        ROOF_PREFILL_ATTENTION,
        ROOF_DECODE_ATTENTION,
        ROOF_STEP_OVERHEAD,
        ROOF_SEQUENCE_OVERHEAD,
        BATCH_FIXED,
        ALLREDUCE,
        EXPERT_ALLTOALL,
    )


def latencies(
    pre: FloatArray, dec: FloatArray, e2e: FloatArray, f: Features
) -> tuple[FloatArray, FloatArray]:
    """(TTFT, TPOT) of the serving mode's steps (`serving_latencies` with the mode's ``ttft_share``)."""
    return serving_latencies(pre, dec, e2e, f["ttft_share"], f["output_len"])


def measured_latency_s(data: pd.DataFrame, columns: tuple[str, ...]) -> FloatArray:
    """The first of `columns` `data` has, in seconds (NaN where absent or empty)."""
    for c in columns:
        if c in data.columns:
            return np.asarray(pd.to_numeric(data[c], errors="coerce").to_numpy(dtype=float) / 1000.0)
    return np.full(len(data), np.nan)


class RooflineSlimModel(CalibratedModel):
    """SLIM-roofline (module docstring): predicts throughput, E2E, prefill, decode, TTFT and TPOT.

    Parameters
    ----------
    gpu, fixed, n_starts, max_nfev, seed : as `CalibratedModel`.
    """

    variant = "slim-roofline"

    def __init__(
        self,
        gpu: str | None = None,
        *,
        fixed: dict[str, float] | None = None,
        n_starts: int = 8,
        max_nfev: int = 4000,
        seed: int = 0,
    ) -> None:
        self._unresolved: dict[str, tuple[float, str]] = {}
        super().__init__(gpu, fixed=fixed, n_starts=n_starts, max_nfev=max_nfev, seed=seed)

    def terms(self) -> tuple[Term, ...]:
        return roofline_terms()

    # -- predict ------------------------------------------------------------------------------------------------
    def _arrays(self, feats: Features, hw: GPU, p: dict[str, float] | None = None) -> Arrays6:
        with np.errstate(divide="ignore", invalid="ignore"):
            pre, dec, e2e = self._components(self.params_ if p is None else p, feats, hw)
            thr = eq.throughput(feats["batch_size"], feats["input_len"], feats["output_len"], e2e)
        ttft, tpot = latencies(pre, dec, e2e, feats)
        return thr, e2e, pre, dec, ttft, tpot

    # -- fit ----------------------------------------------------------------------------------------------------
    def _fit_targets(self, data: pd.DataFrame) -> dict[str, FloatArray]:
        out = super()._fit_targets(data)
        out["ttft"] = measured_latency_s(data, TTFT_COLUMNS)
        out["tpot"] = measured_latency_s(data, TPOT_COLUMNS)
        return out

    def _n_observations(self, data: pd.DataFrame) -> int:
        t = self._fit_targets(data)
        return int(len(data) + sum(int((np.isfinite(t[k]) & (t[k] > 0)).sum()) for k in ("ttft", "tpot")))

    def _observation_word(self) -> str:
        return "measured values (throughput, TTFT, TPOT)"

    def _fit_residuals(
        self, p: dict[str, float], feats: Features, hw: GPU, targets: dict[str, FloatArray]
    ) -> FloatArray:
        pre, dec, e2e = self._components(p, feats, hw)
        thr = eq.throughput(feats["batch_size"], feats["input_len"], feats["output_len"], e2e)
        ttft, tpot = latencies(pre, dec, e2e, feats)
        parts = [relative_error(targets["throughput"], thr)]
        for name, pred in (("ttft", ttft), ("tpot", tpot)):
            y = targets[name]
            keep = np.isfinite(y) & (y > 0)
            if keep.any():
                parts.append(robust_residuals(np.log(pred[keep] / y[keep])))
        return np.concatenate(parts)

    def _held(self, data: pd.DataFrame, hw: GPU) -> dict[str, tuple[float, str]]:
        """The constructor's `fixed`; ``eta_w`` at its prior on one architecture, ``eta_e`` without experts,
        ``eta_ac`` without latent attention; the efficiencies a first fit left unresolved (module docstring)."""
        held = {k: (float(v), "fixed by the caller") for k, v in (self.fixed or {}).items()}
        prior = ps.ETA_W.prior
        if prior is not None and data["model"].nunique() == 1 and "eta_w" not in held:
            held["eta_w"] = (
                prior.median,
                f"held at prior {prior.median:g} ({prior.source}): one architecture, so the per-step weight read "
                "and t_step are one constant",
            )
        archs = [get_architecture(str(m)) for m in data["model"].unique()]
        for spec, used, what in (
            (ps.ETA_E, any(a.is_moe for a in archs), "routed experts"),
            (ps.ETA_AC, any(a.is_mla for a in archs), "latent attention"),
        ):
            pr = spec.prior
            if pr is not None and not used and spec.name not in held:
                held[spec.name] = (pr.median, f"held at prior {pr.median:g} ({pr.source}): no row has {what}")
        for k, v in self._unresolved.items():
            held.setdefault(k, v)
        return held

    def _unresolved_efficiencies(self) -> dict[str, tuple[float, str]]:
        """Free parameters with a prior that the fit left at a bound or with a standard error above
        `UNRESOLVED_RSE` times the estimate -> (prior, reason)."""
        out: dict[str, tuple[float, str]] = {}
        for s in self.param_specs():
            if s.prior is None or s.name not in self.free_params_:
                continue
            est, se = self.params_[s.name], self.stderr_.get(s.name, np.nan)
            why = (
                "at its bound"
                if self._at_bound(s)
                else f"stderr {se:.3g} vs estimate {est:.3g}"
                if not np.isfinite(se) or se > UNRESOLVED_RSE * abs(est)
                else ""
            )
            if why:
                out[s.name] = (
                    s.prior.median,
                    f"held at prior {s.prior.median:g} ({s.prior.source}): not resolved by the rows ({why})",
                )
        return out

    def fit(self, df: pd.DataFrame, *, progress: Progress | None = None) -> Self:
        """Calibrate (module docstring); returns self."""
        self._unresolved = {}
        super().fit(df, progress=progress)
        weak = self._unresolved_efficiencies()
        if weak:
            self._unresolved = weak
            try:
                super().fit(df, progress=progress)
            finally:
                self._unresolved = {}
        return self
