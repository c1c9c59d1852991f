"""The extrapolation cross-validation's outputs: ``extrap_cv`` (per-axis MAPE and bias per candidate) and
``extrap_coverage`` (nested coverage of the 90% intervals), written as CSV, Markdown and LaTeX by the one table
writer (`slimlib.experiments.outputs.plotting.save_table`); `scripts/extrapolation_cv.py` and notebook 06 call
`write_extrapolation_outputs`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from slimlib.experiments.accuracy.extrapolation import CVResult, extrapolation_table, recommend, wide_table
from slimlib.experiments.accuracy.extrapolation_coverage import (
    LEVEL,
    MIN_AXIS_FOLDS,
    TARGET_BAND,
    coverage_table,
)
from slimlib.experiments.accuracy.extrapolation_folds import DATASETS
from slimlib.experiments.outputs.plotting import save_table
from slimlib.experiments.outputs.uncertainty import N_BOOT, SEED
from slimlib.model import method_label


def coverage_display(coverage: pd.DataFrame, quantity: str = "throughput") -> pd.DataFrame:
    """Per axis (datasets pooled) and candidate: ``coverage % [binomial 95% interval] (median width high/low)`` of
    `quantity`."""
    c = coverage[(coverage["dataset"] == "all") & (coverage["quantity"] == quantity)]
    axes = list(dict.fromkeys(c["axis"]))
    rows = []
    for axis in axes:
        g = c[c["axis"] == axis].set_index("method")
        row: dict[str, object] = {
            "axis": axis,
            "n_folds": int(g["n_folds"].iloc[0]),
            "n_test": int(g["n_test"].iloc[0]),
        }
        for m, r in g.iterrows():
            row[method_label(str(m))] = (
                f"{100 * r['coverage']:.0f}% [{100 * r['coverage_lo']:.0f}, {100 * r['coverage_hi']:.0f}] "
                f"(x{r['median_width']:.2f})" if pd.notna(r["coverage"]) else "n/a"
            )  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows).astype(str)


def write_extrapolation_outputs(
    result: CVResult, figures_dir: str | Path, *, n_boot: int = N_BOOT, seed: int = SEED
) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, str]]:
    """Write ``extrap_cv`` and ``extrap_coverage`` (.csv long, .md/.tex display) into `figures_dir`; returns the
    long tables and `recommend`'s (name, reason)."""
    table = extrapolation_table(result, n_boot=n_boot, seed=seed)
    coverage = coverage_table(result)
    choice = recommend(table)
    labels = {m: method_label(m) for m in result.methods}
    used = sorted(set(table["dataset"]))
    notes = [
        "Throughput MAPE (%) [bootstrap 95% interval over test rows] (bias: mean signed % error, + over-predicts) "
        f"per axis and dataset; {n_boot} resamples, seed {seed}. Worst axis: the largest MAPE of a candidate.",
        f"Fits: {result.n_starts} Sobol starts besides the default start per fit (the package default is 8). "
        f"Recommended by the worst-axis error: {choice[1]}.",
        *[f"{d}: {DATASETS[d]}." for d in used],
    ]
    save_table(table, "extrap_cv", figures_dir, display=wide_table(table, labels), notes=notes)
    lo, hi = TARGET_BAND
    save_table(
        coverage, "extrap_coverage", figures_dir, display=coverage_display(coverage),
        notes=[f"Share of held-out rows inside the {LEVEL:.0%} prediction interval (throughput) [exact binomial 95% "
               f"interval], per axis over its datasets, and the median width high/low; target {lo:.0%}-{hi:.0%} on "
               "every axis. Nested: a fold's residual model (scale and quantiles) is learned from every other fold "
               f"(its axis's own when it has {MIN_AXIS_FOLDS} or more, else all axes pooled), its parameter "
               "uncertainty from its own fit (none after a GPU transfer, which clears the standard errors). Per "
               "dataset and for E2E, TTFT and TPOT: extrap_coverage.csv."],
    )  # fmt: skip
    return table, coverage, choice
