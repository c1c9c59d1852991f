"""Prediction intervals: parameter uncertainty plus a residual model learned in the extrapolation cross-validation.

An interval at level ``a`` around a prediction ``p`` is built in log space from two parts:

* parameter uncertainty: the standard deviation ``s`` of ``log p`` from the fit's covariance by the delta method
  (forward differences of the prediction in each free parameter; deterministic). ``log T = log B (IL + OL) -
  log E2E`` (Eq. 6), so throughput and E2E share ``s``;
* residual model (`ResidualModel`): the empirical quantiles of the signed log error ``r = log(measured /
  predicted)`` of held-out rows, per extrapolation axis and quantity (split-conformal quantiles, learned by
  `slimlib.experiments.accuracy.extrapolation`).

With ``q_lo <= 0 <= q_hi`` the residual quantiles at ``(1 - a) / 2`` and ``(1 + a) / 2`` (each clipped to its side
of 0) and ``z`` the normal quantile of level ``a``, the interval is ``p exp(-sqrt(q_lo^2 + (z s)^2))`` to
``p exp(sqrt(q_hi^2 + (z s)^2))``: the two parts combined in quadrature, so ``low <= p <= high`` always.

Which axis a row extrapolates on is read from the fit's domain (`fit_domain`): batch size, input or output length
above the largest fitted, a model the fit never saw, a larger tensor-parallel degree, another GPU; a row on several
axes gets the widest of their intervals, a row on none the quantiles pooled over every axis (``pooled``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from slimlib.errors import DataError

#: quantity -> (predicted column, measured column) an interval is given for (TTFT/TPOT join where a model predicts them)
INTERVAL_QUANTITIES: dict[str, tuple[str, str]] = {
    "throughput": ("pred_throughput_tok_s", "throughput_tok_s"),
    "e2e": ("pred_e2e_s", "e2e_s"),
}
#: quantity -> (low, high) column names `Estimator.predict(df, interval=...)` adds
INTERVAL_COLUMNS: dict[str, tuple[str, str]] = {
    "throughput": ("pred_throughput_low_tok_s", "pred_throughput_high_tok_s"),
    "e2e": ("pred_e2e_low_s", "pred_e2e_high_s"),
}
#: probabilities at which a residual model stores its quantiles (0, 0.005, ..., 1)
GRID = np.linspace(0.0, 1.0, 201)
#: name of the quantiles pooled over every axis (rows that extrapolate on no axis)
POOLED = "pooled"
#: table column (of the fit's domain) -> the cross-validation axes whose residuals cover extrapolation along it
AXES_OF = {
    "batch_size": ("batch", "batch-knee"),
    "input_len": ("input", "context"),
    "output_len": ("output", "context"),
    "model": ("model",),
    "tensor_parallel": ("tp",),
    "gpu": ("device",),
}


class IntervalWarning(UserWarning):
    """An interval has only part of its uncertainty (no residual model, or a parameter without a covariance)."""


def normal_quantile(level: float) -> float:
    """``z`` with ``P(|N(0,1)| <= z) = level``."""
    from scipy.stats import norm  # imported where used (start-up time of `slim`)

    return float(norm.ppf(0.5 + level / 2.0))


def check_level(level: float) -> float:
    """`level` as a float in (0, 1); DataError otherwise."""
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < float(level) < 1.0:
        raise DataError(f"interval level must be a number in (0, 1), e.g. 0.9; got {level!r}")
    return float(level)


def conformal_probs(n: int, level: float) -> tuple[float, float]:
    """Probabilities of the lower and upper split-conformal quantiles of `n` held-out scores at `level`
    (``ceil((n + 1)(1 - alpha/2)) / n`` and its mirror, clipped to [0, 1])."""
    alpha = 1.0 - level
    if n <= 0:
        return 0.0, 1.0
    hi = min(1.0, math.ceil((n + 1) * (1.0 - alpha / 2.0)) / n)
    lo = max(0.0, 1.0 - hi)
    return lo, hi


@dataclass(frozen=True)
class ResidualModel:
    """Quantiles (at `GRID`) of the signed log error of held-out predictions, per axis and quantity.

    ``quantiles[axis][quantity]`` is a list of len(GRID) values, ``n[axis][quantity]`` the held-out rows they
    come from; ``source`` says what they were learned on (method, datasets, folds)."""

    quantiles: dict[str, dict[str, list[float]]]
    n: dict[str, dict[str, int]]
    source: str = ""
    method: str = ""

    @classmethod
    def from_errors(cls, errors: pd.DataFrame, method: str = "", source: str = "") -> ResidualModel:
        """From a table of held-out log errors (columns ``axis``, ``quantity``, ``log_error``); adds `POOLED`."""
        missing = [c for c in ("axis", "quantity", "log_error") if c not in errors.columns]
        if missing:
            raise DataError(f"residual model: the error table lacks column(s) {missing}")
        ok = errors[np.isfinite(errors["log_error"].to_numpy(dtype=float))]
        quantiles: dict[str, dict[str, list[float]]] = {}
        n: dict[str, dict[str, int]] = {}
        groups = [(str(a), str(q), g) for (a, q), g in ok.groupby(["axis", "quantity"], sort=True)]
        groups += [(POOLED, str(q), g) for q, g in ok.groupby("quantity", sort=True)]
        for axis, quantity, g in groups:
            v = g["log_error"].to_numpy(dtype=float)
            quantiles.setdefault(axis, {})[quantity] = [float(x) for x in np.quantile(v, GRID)]
            n.setdefault(axis, {})[quantity] = int(v.size)
        return cls(quantiles, n, source, method)

    def offsets(self, axis: str, quantity: str, level: float) -> tuple[float, float]:
        """(q_lo, q_hi): the split-conformal log-error quantiles of `axis` at `level`, clipped to each side of 0."""
        if axis not in self.quantiles or quantity not in self.quantiles[axis]:
            raise DataError(
                f"the residual model has no {quantity!r} quantiles for axis {axis!r} (it has "
                f"{sorted(self.quantiles)}); relearn it with the extrapolation cross-validation"
            )
        p_lo, p_hi = conformal_probs(self.n[axis][quantity], level)
        q = np.asarray(self.quantiles[axis][quantity], dtype=float)
        return min(float(np.interp(p_lo, GRID, q)), 0.0), max(float(np.interp(p_hi, GRID, q)), 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"quantiles": self.quantiles, "n": self.n, "source": self.source, "method": self.method,
                "grid_size": len(GRID)}  # fmt: skip

    @classmethod
    def from_dict(cls, d: Any, where: str = "parameter file") -> ResidualModel:
        """Rebuild from `to_dict`'s content; DataError naming `where` when a field is missing or malformed."""
        try:
            quantiles = {
                str(a): {str(k): [float(x) for x in v] for k, v in per.items()}
                for a, per in dict(d["quantiles"]).items()
            }
            n = {str(a): {str(k): int(v) for k, v in per.items()} for a, per in dict(d["n"]).items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            raise DataError(
                f"{where}: field 'intervals.residuals' is malformed; refit with `slim fit ... --intervals`"
            ) from None
        bad = [f"{a}/{k}" for a, per in quantiles.items() for k, v in per.items() if len(v) != len(GRID)]
        if bad:
            raise DataError(f"{where}: residual quantiles {bad[:3]} do not have {len(GRID)} values; refit")
        return cls(quantiles, n, str(d.get("source", "")), str(d.get("method", "")))


@dataclass(frozen=True)
class Domain:
    """What a fit saw: the largest batch size, input and output length and TP degree, its models and its GPU."""

    max_values: dict[str, float] = field(default_factory=dict)
    models: tuple[str, ...] = ()
    gpu: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"max": dict(self.max_values), "models": list(self.models), "gpu": self.gpu}

    @classmethod
    def from_dict(cls, d: Any, where: str = "parameter file") -> Domain:
        try:
            return cls({str(k): float(v) for k, v in dict(d["max"]).items()}, tuple(map(str, d["models"])),
                       str(d["gpu"]))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{where}: field 'intervals.domain' is malformed; refit") from None


def fit_domain(train: pd.DataFrame, gpu: str) -> Domain:
    """The `Domain` of a training table (``tensor_parallel`` 1 where the table has no such column)."""
    mx = {c: float(train[c].astype(float).max()) for c in ("batch_size", "input_len", "output_len")}
    tp = train["tensor_parallel"].astype(float) if "tensor_parallel" in train.columns else pd.Series([1.0])
    mx["tensor_parallel"] = float(tp.max())
    return Domain(mx, tuple(sorted(set(map(str, train["model"])))), gpu)


def row_axes(data: pd.DataFrame, domain: Domain, gpu: str) -> list[list[str]]:
    """Per row of `data`, the cross-validation axes it extrapolates on (`AXES_OF`), `POOLED` for none."""
    flags: dict[str, np.ndarray] = {}
    for col in ("batch_size", "input_len", "output_len"):
        flags[col] = data[col].to_numpy(dtype=float) > domain.max_values.get(col, np.inf) * (1 + 1e-9)
    tp = (
        data["tensor_parallel"].to_numpy(dtype=float)
        if "tensor_parallel" in data.columns
        else np.ones(len(data))
    )
    flags["tensor_parallel"] = tp > domain.max_values.get("tensor_parallel", np.inf) * (1 + 1e-9)
    flags["model"] = ~data["model"].astype(str).isin(domain.models).to_numpy()
    other_gpu = gpu != domain.gpu
    flags["gpu"] = np.full(len(data), other_gpu)
    out = []
    for i in range(len(data)):
        axes = [a for col, f in flags.items() if f[i] for a in AXES_OF[col]]
        out.append(axes or [POOLED])
    return out


def interval_bounds(
    pred: np.ndarray, log_sd: np.ndarray, q_lo: np.ndarray, q_hi: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) around `pred` from the parameter part `log_sd` and the residual offsets (module docstring)."""
    zs = normal_quantile(level) * np.nan_to_num(np.asarray(log_sd, dtype=float), nan=0.0)
    p = np.asarray(pred, dtype=float)
    lo = p * np.exp(-np.sqrt(np.minimum(q_lo, 0.0) ** 2 + zs**2))
    hi = p * np.exp(np.sqrt(np.maximum(q_hi, 0.0) ** 2 + zs**2))
    return lo, hi


def residual_offsets(
    residuals: ResidualModel | None, axes: list[list[str]], quantity: str, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the widest (q_lo, q_hi) over the row's axes that the residual model has; zeros without a model."""
    n = len(axes)
    if residuals is None:
        return np.zeros(n), np.zeros(n)
    lo, hi = np.zeros(n), np.zeros(n)
    cache: dict[str, tuple[float, float]] = {}
    for i, row in enumerate(axes):
        known = [a for a in row if quantity in residuals.quantiles.get(a, {})] or [POOLED]
        for a in known:
            if a not in cache:
                cache[a] = residuals.offsets(a, quantity, level)
            lo[i], hi[i] = min(lo[i], cache[a][0]), max(hi[i], cache[a][1])
    return lo, hi
