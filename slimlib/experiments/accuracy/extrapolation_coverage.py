"""Prediction intervals learned in the extrapolation cross-validation, and their coverage measured on its folds.

The residual model of a method (`residual_model`) holds, per axis and quantity, the quantiles of the signed log
error ``log(measured / predicted)`` of every held-out row of the protocol (`slimlib.model.intervals`); it is what a
parameter file stores (`slim fit --intervals`).

Coverage is nested (`nested_coverage`): the interval of a held-out row of fold f on axis a uses the residual
quantiles of the *other* folds of axis a (every dataset), never f's own errors, plus the parameter uncertainty of
f's own fit; a row is covered when ``low <= measured <= high``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.experiments.accuracy.extrapolation import CVResult
from slimlib.model.intervals import INTERVAL_QUANTITIES, ResidualModel, check_level, interval_bounds

#: nominal level of the reported intervals and the coverage band a 90% interval must reach on every axis
LEVEL = 0.9
TARGET_BAND = (0.85, 0.95)
#: columns of `coverage_table`
COVERAGE_COLUMNS = ("method", "axis", "dataset", "quantity", "n_test", "n_folds", "coverage", "median_width",
                    "in_band", "note")  # fmt: skip


def log_errors(result: CVResult) -> pd.DataFrame:
    """One row per held-out prediction and quantity: axis, dataset, fold, method, quantity, measured, predicted,
    log_error = log(measured / predicted), log_sd (parameter part); rows without a finite prediction are left out
    (a method that predicts no such quantity)."""
    p = result.predictions
    parts = []
    for quantity, (pred_col, true_col) in INTERVAL_QUANTITIES.items():
        t, q = p[true_col].to_numpy(float), p[pred_col].to_numpy(float)
        ok = np.isfinite(q) & (q > 0) & np.isfinite(t) & (t > 0)
        g = p.loc[ok, ["axis", "dataset", "fold", "method", "log_sd"]].copy()
        g["quantity"], g["measured"], g["predicted"] = quantity, t[ok], q[ok]
        g["log_error"] = np.log(t[ok] / q[ok])
        parts.append(g)
    return pd.concat(parts, ignore_index=True)


def residual_model(result: CVResult, method: str) -> ResidualModel:
    """The residual model of `method` from every held-out row of the protocol (all folds, all axes)."""
    e = log_errors(result)
    e = e[e["method"] == method]
    folds = e.drop_duplicates(["axis", "dataset", "fold"])
    source = (f"extrapolation cross-validation of {method!r}: {len(folds)} folds on "
              f"{', '.join(sorted(set(e['dataset'])))}; {result.n_starts} Sobol starts per fit")  # fmt: skip
    return ResidualModel.from_errors(e, method=method, source=source)


def nested_intervals(result: CVResult, level: float = LEVEL) -> pd.DataFrame:
    """`log_errors` with the nested interval of each row (``low``, ``high``) and ``covered``; rows of an axis with
    a single fold get no interval (NaN: nothing to learn from)."""
    level = check_level(level)
    e = log_errors(result)
    e["fold_key"] = e["dataset"] + " / " + e["fold"]
    lows = np.full(len(e), np.nan)
    highs = np.full(len(e), np.nan)
    for (_method, axis, quantity), g in e.groupby(["method", "axis", "quantity"], sort=False):
        for key in g["fold_key"].unique():
            rest = g[g["fold_key"] != key]
            if rest.empty:
                continue
            rm = ResidualModel.from_errors(rest.assign(axis=axis))
            q_lo, q_hi = rm.offsets(axis, quantity, level)
            here = g[g["fold_key"] == key]
            lo, hi = interval_bounds(here["predicted"].to_numpy(float), here["log_sd"].to_numpy(float),
                                     np.full(len(here), q_lo), np.full(len(here), q_hi), level)  # fmt: skip
            pos = e.index.get_indexer(here.index)
            lows[pos], highs[pos] = lo, hi
    e["low"], e["high"] = lows, highs
    e["covered"] = (e["low"] <= e["measured"]) & (e["measured"] <= e["high"])
    return e


def coverage_table(
    result: CVResult, level: float = LEVEL, band: tuple[float, float] = TARGET_BAND
) -> pd.DataFrame:
    """Nested coverage of the `level` intervals per method, axis, dataset and quantity, and per axis over its
    datasets (dataset "all"): held-out rows, folds, share covered, median width ``high / low``, whether the
    coverage lies in `band`."""
    e = nested_intervals(result, level)
    rows = []
    for keys, g in [*e.groupby(["method", "axis", "dataset", "quantity"], sort=False),
                    *(((m, a, "all", q), g) for (m, a, q), g in e.groupby(["method", "axis", "quantity"], sort=False))]:  # fmt: skip
        method, axis, dataset, quantity = keys
        has = g["low"].notna()
        n_folds = int(g["fold_key"].nunique())
        cov = float(g.loc[has, "covered"].mean()) if has.any() else np.nan
        width = float(np.median(g.loc[has, "high"] / g.loc[has, "low"])) if has.any() else np.nan
        note = (
            "" if has.all() else f"{int((~has).sum())} row(s) without an interval (their axis has one fold)"
        )
        rows.append({"method": method, "axis": axis, "dataset": dataset, "quantity": quantity,
                     "n_test": int(has.sum()), "n_folds": n_folds, "coverage": cov, "median_width": width,
                     "in_band": bool(band[0] <= cov <= band[1]) if np.isfinite(cov) else False, "note": note})  # fmt: skip
    out = pd.DataFrame(rows, columns=list(COVERAGE_COLUMNS))
    order = {
        "axis": {a.axis: i for i, a in enumerate(result.axes)},
        "method": {m: i for i, m in enumerate(result.methods)},
    }
    return out.sort_values(["method", "axis"], key=lambda s: s.map(order[str(s.name)]),
                           kind="mergesort").reset_index(drop=True)  # fmt: skip
