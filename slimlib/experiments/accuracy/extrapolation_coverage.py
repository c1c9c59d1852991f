"""Prediction intervals learned in the extrapolation cross-validation, and their coverage measured on its folds.

The residual model of a method (`residual_model`) holds, per axis and quantity (throughput, E2E, and TTFT and TPOT
where the method predicts them and the data measure them), the scale and the quantiles of the scaled score
``|log(measured / predicted)| / w`` of every held-out row of the protocol (`slimlib.model.intervals`); it is what a
parameter file stores (`slim fit --intervals`). An axis with fewer than `MIN_AXIS_FOLDS` folds gets no model of
its own: its rows use the model pooled over every axis. Only end-to-end measurements calibrate it: the held-out
errors of the datasets in `NOT_FOR_INTERVALS` (the kernel-composed curves: no measurement noise, and none of the
work the composition leaves out) would understate a measured row's, so they are scored, and their coverage
measured, but they teach the measured part nothing. The mixtures of experts' composed curves (`COMPOSED_MOE`) teach
the residual model's MoE part (`ResidualModel.moe`), which a mixture of experts' row takes where it is wider: the
measured rows hold no such model's step.

Coverage is nested (`nested_intervals`): the interval of a held-out row of fold f is built by the same code as a
prediction's (`slimlib.model.intervals.residual_half_widths`) from a residual model learned on every *other* fold
of the protocol (its scale's ``(lambda, beta, kappa)`` and its quantiles alike, its MoE part from the other folds
of `COMPOSED_MOE`), never from f's own errors; the row's own parameter part (from f's fit) enters through the scale
(`slimlib.model.intervals`). A row is covered
when ``low <= measured <= high``. `coverage_table` adds the
exact binomial (Clopper-Pearson) 95% interval of each coverage; its per-axis rows (dataset "all") pool the measured
datasets, the ones the target is about.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.experiments.accuracy.composed_curves import COMPOSED, COMPOSED_FP4, COMPOSED_FP8, COMPOSED_MOE
from slimlib.experiments.accuracy.extrapolation import CVResult
from slimlib.experiments.workers import fork_map
from slimlib.model.intervals import (
    INTERVAL_QUANTITIES,
    ResidualModel,
    check_level,
    interval_bounds,
    moe_rows,
    residual_half_widths,
)

#: nominal level of the reported intervals and the coverage band a 90% interval must reach on every axis
LEVEL = 0.9
TARGET_BAND = (0.85, 0.95)
#: folds an axis needs for a residual model of its own (fewer: the model pooled over every axis)
MIN_AXIS_FOLDS = 3
#: datasets that are not end-to-end measurements: scored, but their held-out errors calibrate no interval and they
#: stay out of the per-axis coverage (module docstring)
NOT_FOR_INTERVALS = (COMPOSED, COMPOSED_MOE, COMPOSED_FP8, COMPOSED_FP4)
#: quantity -> the `CVResult.predictions` column of its parameter part
LOG_SD_COLUMN = {"throughput": "log_sd", "e2e": "log_sd", "ttft": "log_sd_ttft", "tpot": "log_sd_tpot"}
#: columns of `coverage_table`
COVERAGE_COLUMNS = ("method", "axis", "dataset", "quantity", "n_test", "n_folds", "coverage", "coverage_lo",
                    "coverage_hi", "median_width", "mean_rel_width", "in_band", "note")  # fmt: skip


def log_errors(result: CVResult) -> pd.DataFrame:
    """One row per held-out prediction and quantity: axis, dataset, fold, method, model, quantity, measured,
    predicted, log_error = log(measured / predicted), log_sd (parameter part), distance, train_error; rows without a finite
    prediction or measurement are left out (a method that predicts no such quantity, a table without it)."""
    p = result.predictions
    parts = []
    for quantity, (pred_col, true_col) in INTERVAL_QUANTITIES.items():
        t, q = p[true_col].to_numpy(float), p[pred_col].to_numpy(float)
        ok = np.isfinite(q) & (q > 0) & np.isfinite(t) & (t > 0)
        g = p.loc[ok, ["axis", "dataset", "fold", "method", "model", "distance", "train_error"]].copy()
        g["log_sd"] = p.loc[ok, LOG_SD_COLUMN[quantity]].to_numpy(float)
        g["quantity"], g["measured"], g["predicted"] = quantity, t[ok], q[ok]
        g["log_error"] = np.log(t[ok] / q[ok])
        parts.append(g)
    out = pd.concat(parts, ignore_index=True)
    out["fold"] = out["axis"] + " / " + out["dataset"] + " / " + out["fold"].astype(str)
    return out


def residual_model(result: CVResult, method: str) -> ResidualModel:
    """The residual model of `method` from every held-out row of the protocol's measured datasets (all folds, all
    axes; not `NOT_FOR_INTERVALS`), its MoE part from those of `COMPOSED_MOE`."""
    e = log_errors(result)
    e = e[e["method"] == method]
    moe = e[e["dataset"] == COMPOSED_MOE]
    e = e[~e["dataset"].isin(NOT_FOR_INTERVALS)]
    source = (f"extrapolation cross-validation of {method!r}: {e['fold'].nunique()} folds on "
              f"{', '.join(sorted(set(e['dataset'])))}"
              + (f"; mixture-of-experts part: {moe['fold'].nunique()} folds on {COMPOSED_MOE}" if len(moe) else "")
              + f"; {result.n_starts} Sobol starts per fit")  # fmt: skip
    return ResidualModel.from_errors(
        e, method=method, source=source, min_folds=MIN_AXIS_FOLDS, moe_errors=moe
    )


def _nested_bounds(e: pd.DataFrame, m: pd.DataFrame, moe: np.ndarray, level: float) -> list[list[float]]:
    """The nested (low, high) of one method's rows `m` of `log_errors` `e` (module docstring), as two lists in the
    order of `m`."""
    lows = pd.Series(np.nan, index=m.index)
    highs = pd.Series(np.nan, index=m.index)
    learn = m[~m["dataset"].isin(NOT_FOR_INTERVALS)]
    learn_moe = m[m["dataset"] == COMPOSED_MOE]
    main_folds, moe_folds = set(learn["fold"]), set(learn_moe["fold"])
    learned: dict[tuple[str, str | None, str | None], ResidualModel] = {}
    for fold, here in m.groupby("fold", sort=False):
        axis = str(here["axis"].iloc[0])
        # a fold outside a part's learning rows leaves that part as learned on all of them: learned once; a fold's
        # rows read their own axis's part and the pooled one only, so only those are learned
        key = (axis, fold if fold in main_folds else None, fold if fold in moe_folds else None)
        if key not in learned:
            learned[key] = ResidualModel.from_errors(learn[learn["fold"] != fold], min_folds=MIN_AXIS_FOLDS,
                                                     moe_errors=learn_moe[learn_moe["fold"] != fold],
                                                     only_axes=(axis,))  # fmt: skip
        rm = learned[key]
        for quantity, h in here.groupby("quantity", sort=False):
            pos = e.index.get_indexer(h.index)
            half = residual_half_widths(rm, [[axis]] * len(h), str(quantity), level,
                                        h["distance"].to_numpy(float), float(h["train_error"].iloc[0]),
                                        h["log_sd"].to_numpy(float), moe[pos])  # fmt: skip
            lo, hi = interval_bounds(h["predicted"].to_numpy(float), h["log_sd"].to_numpy(float), half, level)
            lows[h.index], highs[h.index] = lo, hi
    return [lows.tolist(), highs.tolist()]


def nested_intervals(result: CVResult, level: float = LEVEL, jobs: int | None = None) -> pd.DataFrame:
    """`log_errors` with the nested interval of each row (``low``, ``high``) and ``covered`` (module docstring);
    each method's in one of `jobs` worker processes (`slimlib.experiments.workers.fork_map`)."""
    level = check_level(level)
    e = log_errors(result)
    moe = moe_rows(e) if len(e) else np.zeros(0, dtype=bool)
    groups = [m for _, m in e.groupby("method", sort=False)]
    bounds = fork_map(lambda i: _nested_bounds(e, groups[i], moe, level), len(groups), jobs)
    lows = pd.Series(np.nan, index=e.index)
    highs = pd.Series(np.nan, index=e.index)
    for m, (lo, hi) in zip(groups, bounds, strict=True):
        lows[m.index], highs[m.index] = lo, hi
    e["low"], e["high"] = lows.to_numpy(float), highs.to_numpy(float)
    e["covered"] = (e["low"] <= e["measured"]) & (e["measured"] <= e["high"])
    return e


def binomial_ci(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a proportion of `k` in `n` (NaN for n = 0)."""
    if n <= 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest  # imported where used (start-up time of `slim`)

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def coverage_table(
    result: CVResult, level: float = LEVEL, band: tuple[float, float] = TARGET_BAND, jobs: int | None = None
) -> pd.DataFrame:
    """Nested coverage of the `level` intervals per method, axis, dataset and quantity, and per axis over its
    measured datasets (dataset "all": not `NOT_FOR_INTERVALS`): held-out rows, folds, share covered with its
    `binomial_ci`, median width ``high / low``, mean width relative to the prediction ``(high - low) / predicted``,
    whether the coverage lies in `band`."""
    e = nested_intervals(result, level, jobs)
    measured = e[~e["dataset"].isin(NOT_FOR_INTERVALS)]
    rows = []
    for keys, g in [*e.groupby(["method", "axis", "dataset", "quantity"], sort=False),
                    *(((m, a, "all", q), g)
                      for (m, a, q), g in measured.groupby(["method", "axis", "quantity"], sort=False))]:  # fmt: skip
        method, axis, dataset, quantity = keys
        has = g["low"].notna()
        n = int(has.sum())
        k = int(g.loc[has, "covered"].sum())
        cov = k / n if n else np.nan
        lo, hi = binomial_ci(k, n)
        width = float(np.median(g.loc[has, "high"] / g.loc[has, "low"])) if n else np.nan
        rel = (
            float(np.mean((g.loc[has, "high"] - g.loc[has, "low"]) / g.loc[has, "predicted"]))
            if n
            else np.nan
        )
        note = "" if has.all() else f"{int((~has).sum())} row(s) without an interval"
        rows.append({"method": method, "axis": axis, "dataset": dataset, "quantity": quantity,
                     "n_test": n, "n_folds": int(g["fold"].nunique()), "coverage": cov, "coverage_lo": lo,
                     "coverage_hi": hi, "median_width": width, "mean_rel_width": rel,
                     "in_band": bool(band[0] <= cov <= band[1]) if np.isfinite(cov) else False, "note": note})  # fmt: skip
    out = pd.DataFrame(rows, columns=list(COVERAGE_COLUMNS))
    order = {
        "axis": {a.axis: i for i, a in enumerate(result.axes)},
        "method": {m: i for i, m in enumerate(result.methods)},
    }
    return out.sort_values(["method", "axis"], key=lambda s: s.map(order[str(s.name)]),
                           kind="mergesort").reset_index(drop=True)  # fmt: skip


def shipped_residual_models(result: CVResult) -> dict[str, ResidualModel]:
    """`residual_model` of every candidate of `result`: what the package ships (`slimlib.model.shipped_residuals`)."""
    return {m: residual_model(result, m) for m in result.methods}
