"""LLMVisor-Agg: LLMVisor adapted to aggregate token counts, as in the SLIM paper (spec: BASELINES.md of the shared
folder).

* Prefill (fitted to mean TTFT, s): ``TTFT = beta_P,s + a1_P,s B IL + a3_P,s B IL^2 + a4_P,s B``, two segments split
  at a breakpoint ``tau_P`` on ``B IL``.
* Decode (fitted to mean ITL, s): ``ITL = beta_D,s + b_D,s B + a2_D,s B c_mean`` with
  ``c_mean = C(IL, OL) / OL = IL + (OL + 1) / 2`` (Eq. 12), two segments split at ``tau_D`` on ``B``.
* Breakpoints by grid search over the midpoints between distinct training values, minimizing the squared error
  (each segment needs at least as many rows as coefficients; otherwise one segment, and no ``tau`` parameter).
* ``E2E = TTFT + (OL - 1) ITL``; throughput by Eq. 6; prefill = TTFT, decode = (OL - 1) ITL.
It has no model-size features: trained on several models it fits their mixture, and it cannot transfer across model
sizes by construction.
"""

from __future__ import annotations

import warnings
from typing import Any, Self

import numpy as np
import pandas as pd

from slimlib.errors import DataError, FitError
from slimlib.model import equations as eq
from slimlib.model.base import Arrays, Estimator, Progress
from slimlib.model.baselines.ols import fit_ols
from slimlib.model.features import FloatArray, resolve_gpu
from slimlib.registry.gpus import GPU
from slimlib.schema import validate_table

TERMS = {"P": ("beta", "a1", "a3", "a4"), "D": ("beta", "b", "a2")}
UNITS = {
    "beta": "s",
    "a1": "s/token",
    "a3": "s/token^2",
    "a4": "s/request",
    "b": "s/request",
    "a2": "s/token",
}


def require_columns(df: pd.DataFrame, cols: tuple[str, ...], who: str) -> None:
    """The training table has finite values in `cols` (the baselines' extra ground truth)."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(
            f"{who} needs column(s) {', '.join(missing)} in its training table; this ground truth lacks them, "
            "so the baseline cannot be fitted on it"
        )
    bad = ~np.isfinite(df[list(cols)].to_numpy(dtype=float)).all(axis=1)
    if bad.any():
        raise DataError(
            f"{who}: {int(bad.sum())} training rows have no finite {' / '.join(cols)}; drop them first"
        )


def _design(phase: str, b: FloatArray, il: FloatArray, ol: FloatArray) -> FloatArray:
    if phase == "P":
        return np.column_stack([np.ones_like(b), b * il, b * il**2, b])
    return np.column_stack([np.ones_like(b), b, b * (il + (ol + 1.0) / 2.0)])


def _split_on(phase: str, b: FloatArray, il: FloatArray) -> FloatArray:
    return b * il if phase == "P" else b


class LLMVisorAgg(Estimator):
    """LLMVisor-Agg (see the module docstring). Needs ``mean_itl_ms`` and the prefill time in the training table:
    ``prefill_ms`` where a table has it (a table whose measured TTFT is mostly queue), else ``mean_ttft_ms``;
    predicts TTFT (its prefill regression) and TPOT (its ITL regression), ``E2E = TTFT + (OL - 1) TPOT``."""

    variant = "llmvisor-agg"

    def __init__(self, gpu: str | None = None) -> None:
        super().__init__(gpu)

    def fit(self, df: pd.DataFrame, *, progress: Progress | None = None) -> Self:
        data = validate_table(df)
        prefill = "prefill_ms" if "prefill_ms" in data.columns else "mean_ttft_ms"
        require_columns(
            data, (prefill, "mean_itl_ms"), "LLMVisor-Agg (prefill or mean TTFT, and mean ITL, ms)"
        )
        hw = resolve_gpu(data, self.gpu, fitting=True)
        b, il, ol = (data[c].to_numpy(dtype=float) for c in ("batch_size", "input_len", "output_len"))
        targets = {
            "P": data[prefill].to_numpy(dtype=float) / 1000.0,
            "D": data["mean_itl_ms"].to_numpy(dtype=float) / 1000.0,
        }
        self.gpu_ = hw.name
        self.params_, self.stderr_ = {}, {}
        self.ci95_: dict[str, tuple[float, float]] = {}
        self.segments_: dict[str, dict[str, Any]] = {}
        for phase in ("P", "D"):
            self._fit_phase(phase, _design(phase, b, il, ol), targets[phase], _split_on(phase, b, il))
        self.fit_info_ = {"n_rows": int(len(data)), "models": sorted(set(data["model"]))}
        if progress is not None:
            progress(1, 1)
        return self

    def _fit_phase(self, phase: str, x: FloatArray, y: FloatArray, split_on: FloatArray) -> None:
        k = x.shape[1]
        values = np.unique(split_on)
        candidates = [np.inf, *((values[:-1] + values[1:]) / 2.0)]
        best = None
        for tau in candidates:
            lo = split_on <= tau
            if np.isfinite(tau) and (lo.sum() < k or (~lo).sum() < k):
                continue
            masks = (lo, ~lo) if np.isfinite(tau) else (lo,)
            with warnings.catch_warnings(record=True) as record:  # kept for the chosen breakpoint only
                warnings.simplefilter("always")
                fits = [fit_ols(x[m], y[m]) for m in masks]
            rss = sum(f.rss for f in fits)
            if best is None or rss < best[0] - 1e-18:
                best = (rss, tau, fits, record)
        if best is None:
            raise FitError(
                f"LLMVisor-Agg: {len(y)} rows cannot fit the {phase} regression ({k} coefficients)"
            )
        _, tau, fits, record = best
        for w in record:
            warnings.warn(f"LLMVisor-Agg {phase} regression: {w.message}", w.category, stacklevel=3)
        if np.isfinite(tau):
            self.params_[f"tau_{phase}"] = float(tau)
            self.stderr_[f"tau_{phase}"] = float("nan")
        for seg, f in enumerate(fits):
            for j, n in enumerate(TERMS[phase]):
                key = f"{n}_{phase}{seg}"
                self.params_[key] = float(f.coef[j])
                self.stderr_[key] = float(f.stderr[j])
                self.ci95_[key] = (float(f.ci95_low[j]), float(f.ci95_high[j]))
        self.segments_[phase] = {"tau": float(tau), "coefs": [f.coef for f in fits]}

    def _eval(self, phase: str, x: FloatArray, split_on: FloatArray) -> FloatArray:
        part = self.segments_[phase]
        coefs = part["coefs"]
        out = x @ coefs[0]
        if len(coefs) > 1:
            out = np.where(split_on <= part["tau"], out, x @ coefs[1])
        return np.asarray(out, dtype=float)

    def _predict_rows(self, data: pd.DataFrame, hw: GPU, served: str = "all") -> Arrays:
        b, il, ol = (data[c].to_numpy(dtype=float) for c in ("batch_size", "input_len", "output_len"))
        ttft = self._eval("P", _design("P", b, il, ol), _split_on("P", b, il))
        itl = self._eval("D", _design("D", b, il, ol), _split_on("D", b, il))
        dec = (ol - 1.0) * itl
        e2e = ttft + dec
        with np.errstate(divide="ignore", invalid="ignore"):
            thr = eq.throughput(b, il, ol, e2e)
        return thr, e2e, ttft, dec, ttft, itl

    def _units(self) -> dict[str, str]:
        return {k: ("tokens" if k == "tau_P" else "requests") if k.startswith("tau") else UNITS[k.split("_")[0]]
                for k in self.params_}  # fmt: skip

    def _state(self) -> dict[str, Any]:
        return {"ci95": {k: list(v) for k, v in self.ci95_.items()}}

    def _set_state(self, state: dict[str, Any], where: str) -> None:
        self.ci95_ = {k: (float(v[0]), float(v[1])) for k, v in dict(state.get("ci95") or {}).items()}
        self.segments_ = {}
        for phase, names in TERMS.items():
            segs = []
            for seg in (0, 1):
                keys = [f"{n}_{phase}{seg}" for n in names]
                if all(k in self.params_ for k in keys):
                    segs.append(np.array([self.params_[k] for k in keys]))
            if not segs or (len(segs) == 2) != (f"tau_{phase}" in self.params_):
                raise DataError(f"{where}: the {phase} coefficients of LLMVisor-Agg are incomplete")
            self.segments_[phase] = {"tau": self.params_.get(f"tau_{phase}", np.inf), "coefs": segs}
