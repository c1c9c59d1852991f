"""Prediction intervals: parameter uncertainty plus a residual model learned in the extrapolation cross-validation.

The API (stable; the CLI's ``slim predict --interval`` and the advisor call it): ``model.predict(df,
interval=0.9)`` adds, for every quantity of `INTERVAL_QUANTITIES` the model predicts, the low and high columns of
`INTERVAL_COLUMNS` (``pred_throughput_low_tok_s`` / ``_high_tok_s``, ``pred_e2e_low_s`` / ``_high_s``,
``pred_ttft_low_s`` / ``_high_s``, ``pred_tpot_low_s`` / ``_high_s``; NaN where the prediction is NaN, e.g. TTFT
for a method without it). The residual model comes from `Estimator.attach_intervals` (``slim fit --intervals``);
without one the interval holds the parameter uncertainty only and an `IntervalWarning` says so.

An interval at level ``a`` around a prediction ``p`` is built in log space from two kinds of uncertainty:

* parameter uncertainty: the standard deviation ``s`` of ``log p`` from the fit's covariance by the delta method
  (`Estimator.log_sds`: forward differences of each predicted quantity in each free parameter; deterministic), the
  covariance bounded by the parameters' boxes and ``s = log(1 + r)`` of the relative deviation ``r``, so that a
  parameter the rows barely determine leaves the interval finite (`slimlib.model.calibrated`);
* residual model (`ResidualModel`), per extrapolation axis and quantity: the split-conformal quantile ``q`` of the
  scaled score ``|r| / w`` of held-out rows, ``r = log(measured / predicted)``, with the row's scale
  ``w = sqrt((max(e_train, E_FLOOR)^beta (1 + lambda d))^2 + (kappa s)^2)``: ``d`` the row's extrapolation
  distance from the fit's domain (`extrapolation_distance`), ``e_train`` the fit's own training error (throughput
  MAPE / 100), ``s`` its parameter part, so that a row far outside the fitted range, predicted by a fit that
  already missed its training rows, or by a fit its rows determine poorly, gets a wider interval.
  ``(lambda, beta, kappa)`` are chosen per axis and quantity from `LAMBDAS` x `BETAS` x `KAPPAS` on the held-out
  rows the model is learned from (never on the rows it is applied to) as the triple whose scores are the most alike
  (least variance of ``log(|r| / w)``): the scale that makes the errors of near and far, well and poorly determined
  rows one distribution, so that the interval's coverage holds across them, not only on average.

The interval is ``p exp(-h)`` to ``p exp(h)`` with ``h = q w`` where a residual model applies, else ``h = z s``
(``z`` the normal quantile of level ``a``: the parameter part alone, with an `IntervalWarning`), so ``low <= p <=
high`` always. The parameter part enters the residual model's scale, weighted by how much of the held-out error it
explains, not as a second interval (CHANGELOG.md: why).

Which axis a row extrapolates on is read from the fit's domain (`fit_domain`): batch size, input or output length
above the largest fitted, a model the fit never saw, a larger tensor-parallel degree, another GPU; a row on several
axes gets the widest of their intervals, a row on none (or on an axis the model has too few folds for) the model
pooled over every axis (``pooled``).

A mixture of experts' row (registry ``is_moe``) gets the wider of two half widths: the one above, learned on
measured end-to-end rows, and the same construction learned on the held-out rows of the kernel-composed curves of
two mixtures of experts in the cross-validation (dataset ``aic-composed-moe``; `ResidualModel.moe`). The measured
rows hold no such model's step, and on those curves the measured part alone held too few rows (55% on the batch
axis): the fused-MoE kernel's time is not the touched experts' bytes at one efficiency (Mixtral's, few wide experts,
keeps slowing after every expert is read, so its throughput comes out optimistic; Qwen3-30B-A3B's, many narrow
experts, reads the few experts of a small batch at a lower efficiency than all of them, so a fit there is
pessimistic at large batches), and it differs between GPUs more than their peaks do. The composed curves
give throughput and E2E only, so a mixture of experts' TTFT and TPOT intervals have no such part: where its row
extrapolates past the fitted batch sizes, from other models or to another GPU (`MOE_NARROW_AXES`), an
`IntervalWarning` says so (`moe_narrow_message`), as it does for every quantity of a residual model without a MoE
part.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu

#: quantity -> (predicted column, measured column) an interval is given for
INTERVAL_QUANTITIES: dict[str, tuple[str, str]] = {
    "throughput": ("pred_throughput_tok_s", "throughput_tok_s"),
    "e2e": ("pred_e2e_s", "e2e_s"),
    "ttft": ("pred_ttft_s", "ttft_s"),
    "tpot": ("pred_tpot_s", "tpot_s"),
}
#: quantity -> (low, high) column names `Estimator.predict(df, interval=...)` adds
INTERVAL_COLUMNS: dict[str, tuple[str, str]] = {
    "throughput": ("pred_throughput_low_tok_s", "pred_throughput_high_tok_s"),
    "e2e": ("pred_e2e_low_s", "pred_e2e_high_s"),
    "ttft": ("pred_ttft_low_s", "pred_ttft_high_s"),
    "tpot": ("pred_tpot_low_s", "pred_tpot_high_s"),
}
#: probabilities at which a residual model stores the quantiles of its scaled scores (0, 0.005, ..., 1)
GRID = np.linspace(0.0, 1.0, 201)
#: name of the model pooled over every axis (rows that extrapolate on no axis, or on one with too few folds)
POOLED = "pooled"
#: candidate distance slopes lambda, training-error powers beta and parameter-part weights kappa of the scale ``w``
#: (module docstring); kappa spans the ratio of the two parts of ``w`` (about 1 with beta 0, 0.02-0.2 with beta 1)
LAMBDAS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0)
BETAS = (0.0, 0.5, 1.0)
KAPPAS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: floor of the training error in the scale (a fit that matches its rows to 0.5% still extrapolates worse)
E_FLOOR = 0.02
#: |log error| below which a score counts at this value when (lambda, beta, kappa) are chosen (log of 0)
SCORE_FLOOR = 1e-4
#: the largest scaled score a stored residual model may hold: a log error of 2 at the smallest scale (`E_FLOOR`);
#: the package's own models stay below 20, and an interval stays finite for scales up to 7
MAX_SCORE = 100.0
#: version of the residual model's stored form (1: signed quantiles per axis, without scale; 2: scale without the
#: parameter part, used with the larger-of-two rule; both refused); its ``moe`` field is optional (a file without
#: one has no MoE part, and its mixtures of experts' rows are warned of)
RESIDUAL_FORMAT = 3
#: table column (of the fit's domain) -> the cross-validation axes whose residuals cover extrapolation along it
AXES_OF = {
    "batch_size": ("batch", "batch-knee"),
    "input_len": ("input", "context"),
    "output_len": ("output", "context"),
    "model": ("model",),
    "tensor_parallel": ("tp",),
    "gpu": ("device",),
}


#: the axes on which the intervals without a MoE part under-covered a mixture of experts' held-out rows (module
#: docstring)
MOE_NARROW_AXES = ("batch", "model", "device")


class IntervalWarning(UserWarning):
    """An interval has only part of its uncertainty (no residual model, or a parameter without a covariance), or is
    known to be too narrow for the row (a mixture of experts on `MOE_NARROW_AXES`)."""


def normal_quantile(level: float) -> float:
    """``z`` with ``P(|N(0,1)| <= z) = level``."""
    from scipy.stats import norm  # imported where used (start-up time of `slim`)

    return float(norm.ppf(0.5 + level / 2.0))


def check_level(level: float) -> float:
    """`level` as a float in (0, 1); DataError otherwise."""
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < float(level) < 1.0:
        raise DataError(f"interval level must be a number in (0, 1), e.g. 0.9; got {level!r}")
    return float(level)


def conformal_prob(n: int, level: float) -> float:
    """Probability of the split-conformal quantile of `n` held-out absolute scores at `level`:
    ``ceil((n + 1) level) / n``, clipped to [0, 1] (1 for n = 0)."""
    return 1.0 if n <= 0 else min(1.0, math.ceil((n + 1) * level) / n)


def scale(
    distance: np.ndarray,
    train_error: np.ndarray,
    lam: float,
    beta: float,
    log_sd: Any = 0.0,
    kappa: Any = 0.0,
) -> np.ndarray:
    """The score scale ``w = sqrt((max(e_train, E_FLOOR)^beta (1 + lambda d))^2 + (kappa s)^2)`` per row, ``s`` =
    `log_sd` (NaN counts as 0; module docstring); a column of kappas gives one row of scales per kappa."""
    e = np.maximum(np.asarray(train_error, dtype=float), E_FLOOR)
    base = e**beta * (1.0 + lam * np.asarray(distance, dtype=float))
    s = np.nan_to_num(np.asarray(log_sd, dtype=float), nan=0.0)
    return np.asarray(np.hypot(base, np.asarray(kappa, dtype=float) * s), dtype=float)


@dataclass(frozen=True)
class AxisResiduals:
    """The residual model of one axis and quantity: the scale's ``lam``, ``beta`` and ``kappa``, the quantiles (at `GRID`) of
    the scaled scores ``|r| / w``, the held-out rows and folds they come from, and the median training error of
    their fits (used for a fit that records none)."""

    lam: float
    beta: float
    kappa: float
    quantiles: tuple[float, ...]
    n: int
    n_folds: int
    train_error: float | None

    def half_widths(
        self, level: float, distance: np.ndarray, train_error: np.ndarray, log_sd: Any = 0.0
    ) -> np.ndarray:
        """``q w`` per row: the log half width at `level` (`log_sd`: the rows' parameter part ``s``)."""
        fallback = E_FLOOR if self.train_error is None else self.train_error
        e = np.where(np.isfinite(train_error), train_error, fallback)
        i = min(int(np.searchsorted(GRID, conformal_prob(self.n, level) - 1e-12)), len(GRID) - 1)
        q = float(self.quantiles[i])  # the grid's next order statistic at or above the conformal one
        return q * scale(distance, e, self.lam, self.beta, log_sd, self.kappa)

    def to_dict(self) -> dict[str, Any]:
        return {"lambda": self.lam, "beta": self.beta, "kappa": self.kappa, "quantiles": list(self.quantiles), "n": self.n,
                "n_folds": self.n_folds, "train_error": self.train_error}  # fmt: skip


def _learn(g: pd.DataFrame) -> AxisResiduals:
    """`AxisResiduals` of the held-out rows `g` (module docstring: the (lambda, beta) of the most alike scores)."""
    r = np.abs(g["log_error"].to_numpy(dtype=float))
    d = g["distance"].to_numpy(dtype=float)
    e_raw = g["train_error"].to_numpy(dtype=float)
    med = float(np.nanmedian(e_raw)) if np.isfinite(e_raw).any() else None
    betas = BETAS if med is not None else (0.0,)
    e = np.where(np.isfinite(e_raw), e_raw, E_FLOOR if med is None else med)
    s = np.nan_to_num(g["log_sd"].to_numpy(dtype=float), nan=0.0)
    kappas = KAPPAS if (s > 0).any() else (0.0,)
    logs = np.log(np.maximum(r, SCORE_FLOOR))
    kap = np.asarray(kappas, dtype=float)[:, None]
    best: tuple[float, float, float, float] | None = None
    for beta in betas:
        for lam in LAMBDAS:
            # every kappa at once: one row of log-score spreads per kappa
            spreads = np.var(logs - np.log(scale(d, e, lam, beta, s, kap)), axis=1)
            for kappa, spread in zip(kappas, spreads.tolist(), strict=True):
                if best is None or spread < best[0] - 1e-12:
                    best = (spread, lam, beta, kappa)
    assert best is not None
    _, lam, beta, kappa = best
    scores = r / scale(d, e, lam, beta, s, kappa)
    return AxisResiduals(lam, beta, kappa, tuple(float(x) for x in np.quantile(scores, GRID, method="inverted_cdf")), int(r.size),
                         int(g["fold"].nunique()), med)  # fmt: skip


def _impossible_part(v: AxisResiduals) -> str | None:
    """What makes a stored `AxisResiduals` impossible (None where nothing does): scale terms that are not finite
    numbers >= 0, quantiles that are not finite, non-negative, ordered and at most `MAX_SCORE`, counts below 1."""
    terms = {"lambda": v.lam, "beta": v.beta, "kappa": v.kappa}
    for name, x in terms.items():
        if not (math.isfinite(x) and x >= 0):
            return f"{name} is {x}, not a finite number >= 0"
    q = np.asarray(v.quantiles, dtype=float)
    if not np.isfinite(q).all() or (q < 0).any() or (np.diff(q) < 0).any() or q[-1] > MAX_SCORE:
        return f"its quantiles are not finite, non-negative and ordered up to at most {MAX_SCORE:g}"
    if v.n < 1 or v.n_folds < 1:
        return f"it counts {v.n} rows in {v.n_folds} folds"
    if v.train_error is not None and not (math.isfinite(v.train_error) and v.train_error >= 0):
        return f"its train_error is {v.train_error}"
    return None


@dataclass(frozen=True)
class ResidualModel:
    """Per axis and quantity, the `AxisResiduals` learned from held-out predictions (module docstring).

    ``axes[axis][quantity]``; ``source`` says what they were learned on (method, datasets, folds); ``moe`` the
    part of mixtures of experts' rows."""

    axes: dict[str, dict[str, AxisResiduals]]
    source: str = ""
    method: str = ""
    #: the same, learned on the held-out rows of kernel-composed mixtures of experts, for such rows (module
    #: docstring); None where the errors had none
    moe: ResidualModel | None = None

    @classmethod
    def from_errors(
        cls,
        errors: pd.DataFrame,
        method: str = "",
        source: str = "",
        min_folds: int = 1,
        moe_errors: pd.DataFrame | None = None,
        only_axes: Collection[str] | None = None,
    ) -> ResidualModel:
        """From a table of held-out log errors: columns ``axis``, ``quantity``, ``log_error`` and, optional,
        ``distance`` (0), ``train_error`` (none), ``log_sd`` (0) and ``fold`` (one fold). An axis with fewer than
        `min_folds` folds gets no model of its own (its rows use `POOLED`, learned from every row). `moe_errors`,
        a table of the same form from mixtures of experts' held-out rows, gives the `moe` part (none if None or
        empty). `only_axes` (default all) names the axes whose parts are learned; `POOLED` always is."""
        missing = [c for c in ("axis", "quantity", "log_error") if c not in errors.columns]
        if missing:
            raise DataError(f"residual model: the error table lacks column(s) {missing}")
        ok = errors.copy()
        for col, default in (("distance", 0.0), ("train_error", np.nan), ("log_sd", 0.0), ("fold", "")):
            if col not in ok.columns:
                ok[col] = default
        ok = ok[np.isfinite(ok["log_error"].to_numpy(dtype=float))]
        out: dict[str, dict[str, AxisResiduals]] = {}
        for (axis, quantity), g in ok.groupby(["axis", "quantity"], sort=True):
            if (only_axes is None or axis in only_axes) and g["fold"].nunique() >= min_folds:
                out.setdefault(str(axis), {})[str(quantity)] = _learn(g)
        for quantity, g in ok.groupby("quantity", sort=True):
            out.setdefault(POOLED, {})[str(quantity)] = _learn(g)
        moe = None
        if moe_errors is not None and len(moe_errors):
            moe = cls.from_errors(moe_errors, min_folds=min_folds, only_axes=only_axes)
        return cls(out, source, method, moe)

    def has(self, axis: str, quantity: str) -> bool:
        return quantity in self.axes.get(axis, {})

    def half_widths(
        self,
        axis: str,
        quantity: str,
        level: float,
        distance: np.ndarray,
        train_error: np.ndarray,
        log_sd: Any = 0.0,
    ) -> np.ndarray:
        """``q w`` per row for `axis` and `quantity` at `level` (`AxisResiduals.half_widths`)."""
        if not self.has(axis, quantity):
            raise DataError(
                f"the residual model has no {quantity!r} part for axis {axis!r} (it has {sorted(self.axes)}); "
                "relearn it with the extrapolation cross-validation"
            )
        return self.axes[axis][quantity].half_widths(level, distance, train_error, log_sd)

    def pooled_with(self, errors: pd.DataFrame, axis: str) -> ResidualModel:
        """This model with `axis`'s quantiles pooled with the scaled scores of `errors` (held-out log errors of
        the user's own data, columns as `from_errors` reads), each score weighing as one of the ``n`` rows the
        shipped quantiles stand for; quantities the model has no `axis` part for are left as they are."""
        if len(errors) == 0:
            return self
        axes = {a: dict(per) for a, per in self.axes.items()}
        pooled = 0
        for quantity, g in errors.groupby("quantity", sort=True):
            if not self.has(axis, str(quantity)):
                continue
            ar = self.axes[axis][str(quantity)]
            e = (
                g["train_error"].to_numpy(dtype=float)
                if "train_error" in g.columns
                else np.full(len(g), np.nan)
            )
            e = np.where(np.isfinite(e), e, E_FLOOR if ar.train_error is None else ar.train_error)
            d = g["distance"].to_numpy(dtype=float) if "distance" in g.columns else np.zeros(len(g))
            s = g["log_sd"].to_numpy(dtype=float) if "log_sd" in g.columns else 0.0
            r = np.abs(g["log_error"].to_numpy(dtype=float))
            scores = r / scale(d, e, ar.lam, ar.beta, s, ar.kappa)
            scores = scores[np.isfinite(scores)]
            if scores.size == 0:
                continue
            values = np.concatenate([np.asarray(ar.quantiles, dtype=float), scores])
            weights = np.concatenate([np.full(len(GRID), ar.n / len(GRID)), np.ones(scores.size)])
            order = np.argsort(values, kind="mergesort")
            cdf = np.cumsum(weights[order]) / weights.sum()
            at = np.minimum(np.searchsorted(cdf, GRID - 1e-12), values.size - 1)
            axes[axis][str(quantity)] = AxisResiduals(
                ar.lam, ar.beta, ar.kappa, tuple(float(x) for x in values[order][at]), ar.n + int(scores.size),
                ar.n_folds + 1, ar.train_error,
            )  # fmt: skip
            pooled = max(pooled, int(scores.size))
        if not pooled:
            return self
        source = f"{self.source}; {axis} axis pooled with {pooled} held-out rows of the fit's own data"
        return ResidualModel(axes, source, self.method, self.moe)

    def to_dict(self) -> dict[str, Any]:
        return {"format": RESIDUAL_FORMAT, "grid_size": len(GRID), "source": self.source, "method": self.method,
                "axes": {a: {q: m.to_dict() for q, m in per.items()} for a, per in self.axes.items()},
                "moe": None if self.moe is None else self.moe.to_dict()}  # fmt: skip

    @classmethod
    def from_dict(cls, d: Any, where: str = "parameter file") -> ResidualModel:
        """Rebuild from `to_dict`'s content; DataError naming `where` when a field is missing or malformed or the
        model is of an earlier form."""
        if not isinstance(d, dict) or d.get("format") != RESIDUAL_FORMAT:
            raise DataError(
                f"{where}: field 'intervals.residuals' is malformed or of an earlier form; refit with "
                "`slim fit ... --intervals`"
            )
        try:
            axes = {
                str(a): {
                    str(k): AxisResiduals(float(v["lambda"]), float(v["beta"]), float(v["kappa"]),
                                          tuple(float(x) for x in v["quantiles"]), int(v["n"]), int(v["n_folds"]),
                                          None if v["train_error"] is None else float(v["train_error"]))
                    for k, v in dict(per).items()
                }
                for a, per in dict(d["axes"]).items()
            }  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError):
            raise DataError(
                f"{where}: field 'intervals.residuals' is malformed; refit with `slim fit ... --intervals`"
            ) from None
        bad = [f"{a}/{k}" for a, per in axes.items() for k, v in per.items() if len(v.quantiles) != len(GRID)]
        if bad:
            raise DataError(f"{where}: residual quantiles {bad[:3]} do not have {len(GRID)} values; refit")
        for a, per in axes.items():
            for k, v in per.items():
                problem = _impossible_part(v)
                if problem:
                    raise DataError(f"{where}: field 'intervals.residuals' {a}/{k}: {problem}; refit with "
                                    "`slim fit ... --intervals`")  # fmt: skip
        if not axes.get(POOLED):
            raise DataError(f"{where}: field 'intervals.residuals' has no pooled part (no held-out errors); refit "
                            "with `slim fit ... --intervals`")  # fmt: skip
        moe = None if d.get("moe") is None else cls.from_dict(d["moe"], where)
        return cls(axes, str(d.get("source", "")), str(d.get("method", "")), moe)


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
            dom = cls({str(k): float(v) for k, v in dict(d["max"]).items()}, tuple(map(str, d["models"])),
                      str(d["gpu"]))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{where}: field 'intervals.domain' is malformed; refit") from None
        bad = [k for k, v in dom.max_values.items() if not (math.isfinite(v) and v > 0)]
        if bad:
            raise DataError(f"{where}: field 'intervals.domain' gives {bad[0]} a maximum of "
                            f"{dom.max_values[bad[0]]}, not a positive number; refit")  # fmt: skip
        return dom


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


def extrapolation_distance(data: pd.DataFrame, domain: Domain, gpu: str) -> np.ndarray:
    """Per row of `data`, how far it lies outside the fit's `domain`, in natural-log units summed over the axes:
    ``log(x / x_max)`` for a batch size, input or output length or TP degree above the fitted maximum,
    ``|log(N / N_fit)|`` for a model the fit never saw (``N`` the registry parameter count, ``N_fit`` the nearest
    fitted one) and ``|log(BW / BW_fit)|`` on another GPU (registry memory bandwidths); 0 inside the domain."""
    d = np.zeros(len(data))
    for col in ("batch_size", "input_len", "output_len", "tensor_parallel"):
        top = domain.max_values.get(col)
        if top is None or not top > 0:
            continue
        x = data[col].to_numpy(dtype=float) if col in data.columns else np.ones(len(data))
        d += np.maximum(np.log(np.maximum(x, 1e-300) / top), 0.0)
    fitted = np.log([float(get_architecture(m).n_params) for m in domain.models]) if domain.models else None
    if fitted is not None:
        sizes: dict[str, float] = {}
        for m in set(map(str, data["model"])) - set(domain.models):
            n = np.log(float(get_architecture(m).n_params))
            sizes[m] = float(np.min(np.abs(fitted - n)))
        d += np.array([sizes.get(str(m), 0.0) for m in data["model"]])
    if domain.gpu and gpu != domain.gpu:
        d += abs(math.log(get_gpu(gpu).mem_bw / get_gpu(domain.gpu).mem_bw))
    return d


def moe_rows(data: pd.DataFrame) -> np.ndarray:
    """Per row of `data`, whether its model is a mixture of experts (registry ``is_moe``)."""
    moe = {m: get_architecture(m).is_moe for m in set(map(str, data["model"]))}
    return np.array([moe[m] for m in map(str, data["model"])], dtype=bool)


def moe_narrow_message(
    data: pd.DataFrame, moe: np.ndarray, axes: list[list[str]], quantities: list[str]
) -> str | None:
    """The `IntervalWarning` text for the rows of `data` that are a mixture of experts (`moe`: `moe_rows`) and
    extrapolate on one of `MOE_NARROW_AXES` (`axes`: `row_axes`), whose `quantities` have no MoE part in the
    residual model; None where there are none."""
    hit = [i for i, row in enumerate(axes) if moe[i] and set(row) & set(MOE_NARROW_AXES)]
    if not hit or not quantities:
        return None
    models = sorted({str(data["model"].iloc[i]) for i in hit})
    which = sorted({a for i in hit for a in axes[i] if a in MOE_NARROW_AXES})
    names = " and ".join(q.upper() if q in ("ttft", "tpot", "e2e") else q for q in quantities)
    return (
        f"{len(hit)} row(s) of a mixture of experts ({', '.join(models)}) extrapolate on the {'/'.join(which)} "
        f"axis, and their {names} interval(s) have no mixture-of-experts part (the kernel-composed curves it is "
        "learned from give throughput and E2E only, or the residual model predates it: refit with `slim fit ... "
        "--intervals`); there the intervals learned on dense rows alone held too few of the kernel-composed "
        "mixture-of-experts rows in the extrapolation cross-validation (dataset aic-composed-moe in "
        "figures/extrap_coverage.csv): treat them as too narrow, or profile the model at the batch sizes and on "
        "the GPU you predict"
    )


def interval_bounds(
    pred: np.ndarray, log_sd: np.ndarray, half: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) = ``pred exp(-+h)``: ``h`` the residual model's half width `half` where it is finite, else the
    parameter part ``z log_sd`` alone (a row no residual model covers; module docstring)."""
    zs = normal_quantile(level) * np.nan_to_num(np.asarray(log_sd, dtype=float), nan=0.0)
    half = np.asarray(half, dtype=float)
    h = np.where(np.isfinite(half), half, zs)
    p = np.asarray(pred, dtype=float)
    return p * np.exp(-h), p * np.exp(h)


def residual_half_widths(
    residuals: ResidualModel | None,
    axes: list[list[str]],
    quantity: str,
    level: float,
    distance: np.ndarray,
    train_error: float,
    log_sd: Any = 0.0,
    moe: np.ndarray | None = None,
) -> np.ndarray:
    """Per row, the widest half width ``q w`` over the row's axes that the residual model has (else `POOLED`),
    `log_sd` the rows' parameter part; on the rows `moe` marks (mixtures of experts), the wider of that and the
    same from the model's `ResidualModel.moe` part where it has `quantity`; NaN without a model or without a part
    for `quantity` (`interval_bounds` then takes the parameter part alone)."""
    n = len(axes)
    if residuals is None or not residuals.has(POOLED, quantity):
        return np.full(n, np.nan)
    e = np.full(n, train_error, dtype=float)
    d = np.asarray(distance, dtype=float)
    s = np.broadcast_to(np.nan_to_num(np.asarray(log_sd, dtype=float), nan=0.0), (n,))
    out = np.zeros(n)
    for a in sorted({a for row in axes for a in row} | {POOLED}):
        if not residuals.has(a, quantity):
            continue
        rows = np.array([a in row or (a == POOLED and not any(residuals.has(b, quantity) for b in row))
                         for row in axes])  # fmt: skip
        if rows.any():
            out[rows] = np.maximum(
                out[rows], residuals.half_widths(a, quantity, level, d[rows], e[rows], s[rows])
            )
    part = residuals.moe
    if moe is not None and part is not None and part.has(POOLED, quantity):
        idx = np.flatnonzero(moe)
        if idx.size:
            sub = residual_half_widths(
                part, [axes[i] for i in idx], quantity, level, d[idx], train_error, s[idx]
            )
            out[idx] = np.maximum(out[idx], sub)
    return out
