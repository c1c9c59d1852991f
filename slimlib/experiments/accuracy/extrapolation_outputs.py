"""The extrapolation cross-validation's outputs, written as CSV, Markdown and LaTeX by the one table writer
(`slimlib.experiments.outputs.plotting.save_table`): `write_selection_outputs` (notebook 13) writes ``extrap_cv``
(per-axis MAPE and bias per candidate), ``extrap_paired`` (each candidate minus the recommended model on the same
rows), ``extrap_latency`` (the served TTFT and TPOT, means and percentiles, where measured) and ``extrap_cv_models``
(the recommended model's cells split by held-out model, where a cell holds several);
`write_coverage_outputs` (notebook 14) writes ``extrap_coverage`` (nested coverage of the 90% intervals)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from slimlib.experiments.accuracy.extrapolation import (
    TIE_LEVEL,
    CVResult,
    cell_text,
    extrapolation_table,
    latency_table,
    model_table,
    paired_differences,
    recommend,
    tied_best,
    wide_table,
    worst_axis,
)
from slimlib.experiments.accuracy.extrapolation_coverage import (
    LEVEL,
    MIN_AXIS_FOLDS,
    TARGET_BAND,
    coverage_table,
)
from slimlib.experiments.accuracy.extrapolation_folds import DATASETS
from slimlib.experiments.outputs.plotting import save_table
from slimlib.experiments.outputs.uncertainty import N_BOOT, SEED
from slimlib.model import METHODS, method_label

#: a challenger of the recommended model: its terms with ``+addition`` parts
_CHALLENGER = re.compile(r"^slim((?:\+[a-z0-9-]+)+)$")


def candidate_label(name: str) -> str:
    """The one display label of a cross-validation candidate: a registered method's label (`method_label`), a
    challenger ``slim+addition`` as the recommended model's label with its additions (``slim+tp-comm`` ->
    "SLIM-extended + tp comm"); any other name as given."""
    m = _CHALLENGER.match(name)
    if name in METHODS or m is None:
        return method_label(name)
    additions = [a.replace("-", " ") for a in m.group(1).split("+") if a]
    return " + ".join([method_label("slim"), *additions])


def recommendation_note(table: pd.DataFrame, best: str, tied: pd.DataFrame | None = None) -> str:
    """The note naming the recommended candidate `best` (`recommend`'s choice), the candidates `tied` with it
    (`tied_best`'s frame; default: the table's own, at 0.1 point) and every other candidate's worst-axis throughput
    MAPE, each by its display label (`candidate_label`)."""
    w = worst_axis(table).set_index("method")

    def worst(m: str) -> str:
        r = w.loc[m]
        if r["n_failed_cells"]:
            return f"{int(r['n_failed_cells'])} cell(s) not fitted"
        return f"{r['worst_mape_pct']:.1f}% ({r['worst_cell']})"

    others = "; ".join(f"{candidate_label(str(m))}: {worst(str(m))}" for m in w.index if m != best)
    paired = tied is not None
    tied = tied_best(table) if tied is None else tied
    how = (
        f"within the paired bootstrap {TIE_LEVEL:.0%} interval of the worst-axis difference"
        if paired
        else "at the printed 0.1 point"
    )
    tie = (
        f" (tied with {', '.join(candidate_label(str(m)) for m in tied['method'] if m != best)} {how}; chosen by the "
        "lower mean MAPE over the cells: "
        + ", ".join(f"{candidate_label(str(r.method))} {r.mean_mape_pct:.1f}%" for r in tied.itertuples())
        + ")"
        if len(tied) > 1
        else ""
    )
    return (
        f"Recommended by the worst-axis error: {candidate_label(best)}, worst-axis throughput MAPE "
        f"{worst(best)}{tie}; others: {others or 'none'}."
    )


def coverage_display(coverage: pd.DataFrame, quantity: str = "throughput") -> pd.DataFrame:
    """Per axis (datasets pooled) and candidate: ``coverage % [binomial 95% interval] (median width high/low, mean
    width relative to the prediction)`` of `quantity`."""
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
            row[candidate_label(str(m))] = (
                f"{100 * r['coverage']:.0f}% [{100 * r['coverage_lo']:.0f}, {100 * r['coverage_hi']:.0f}] "
                f"(x{r['median_width']:.2f}, {100 * r['mean_rel_width']:.0f}%)" if pd.notna(r["coverage"]) else "n/a"
            )  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows).astype(str)


def write_selection_outputs(
    result: CVResult, figures_dir: str | Path, *, n_boot: int = N_BOOT, seed: int = SEED
) -> tuple[pd.DataFrame, tuple[str, str]]:
    """Write ``extrap_cv``, ``extrap_paired``, ``extrap_latency`` and ``extrap_cv_models`` (.csv long, .md/.tex display) into
    `figures_dir`; returns the long ``extrap_cv`` table and `recommend`'s (name, reason)."""
    table = extrapolation_table(result, n_boot=n_boot, seed=seed)
    tied = tied_best(table, result, n_boot=n_boot, seed=seed)
    choice = recommend(table, result, tied=tied)
    labels = {m: candidate_label(m) for m in result.methods}
    used = sorted(set(table["dataset"]))
    notes = [
        "Throughput MAPE (%) [bootstrap 95% interval over test rows] (bias: mean signed % error, + over-predicts) "
        f"per axis and dataset; {n_boot} resamples, seed {seed}. Worst axis: the largest MAPE of a candidate.",
        f"Fits: {result.n_starts} Sobol starts besides the default start per fit (the package default is 8).",
        recommendation_note(table, choice[0], tied),
        *[f"{d}: {DATASETS[d]}." for d in used],
    ]
    save_table(table, "extrap_cv", figures_dir, display=wide_table(table, labels), notes=notes)
    paired = paired_differences(result, choice[0], n_boot=n_boot, seed=seed)
    runners = [m for m in tied["method"] if m != choice[0]]
    save_table(
        paired, "extrap_paired", figures_dir, display=paired_display(paired, runners or list(paired["method"])[:1]),
        notes=[f"Throughput MAPE of each candidate minus the recommended model's ({candidate_label(choice[0])}) on "
               "the same held-out rows, in points (positive: the recommended model is better), with the paired "
               f"bootstrap 95% interval ({n_boot} resamples, seed {seed}); row 'all': the mean over the cells, the "
               "selection's tie-break. Shown: the candidates tied with it on the worst axis; every candidate: "
               "extrap_paired.csv."],
    )  # fmt: skip
    latency = latency_table(result, n_boot=n_boot, seed=seed)
    save_table(
        latency, "extrap_latency", figures_dir, display=latency_display(latency),
        notes=["Served latencies' MAPE (%) [bootstrap 95% interval over the held-out rows that measured them] "
               f"(bias) per axis, dataset and quantity ({n_boot} resamples, seed {seed}): ttft, tpot the means, "
               "_pNN the requests' percentiles, as the client saw them (queue included); a candidate that does not "
               "predict a quantity has no cell. memgap-online: a burst of 2000 requests, at most B running; "
               "engine-cpu-amx: a closed loop of B clients; memgap-offline: TPOT only (its logged prefill is the "
               "engine's, not a client's TTFT); the other datasets measured no served latency. LLMVisor-Agg "
               "predicts a batch's TTFT (its prefill), not a served request's, so its TTFT cells on the "
               "burst measure that difference."],
    )  # fmt: skip
    models = model_table(result, choice[0], n_boot=n_boot, seed=seed)
    save_table(
        models, "extrap_cv_models", figures_dir, display=model_display(models),
        notes=[f"The recommended model's ({candidate_label(choice[0])}) throughput MAPE (%) [bootstrap 95% interval] "
               "(bias) of extrap_cv split by held-out model, in the cells whose test rows hold more than one model; "
               f"{n_boot} resamples, seed {seed}."],
    )  # fmt: skip
    return table, choice


def write_coverage_outputs(result: CVResult, figures_dir: str | Path) -> pd.DataFrame:
    """Write ``extrap_coverage`` (.csv long, .md/.tex display) into `figures_dir`; returns the long table."""
    coverage = coverage_table(result)
    lo, hi = TARGET_BAND
    save_table(
        coverage, "extrap_coverage", figures_dir, display=coverage_display(coverage),
        notes=[f"Share of held-out rows inside the {LEVEL:.0%} prediction interval (throughput) [exact binomial 95% "
               f"interval], per axis over its measured datasets, the median width high/low and the mean width "
               f"(high - low) relative to the prediction; target "
               f"{lo:.0%}-{hi:.0%} on every axis. Nested: a fold's residual model (scale and quantiles) is learned "
               "from every other fold of the measured datasets (not the kernel-composed curves) "
               f"(its axis's own when it has {MIN_AXIS_FOLDS} or more, else all axes pooled); the parameter "
               "uncertainty of the fold's own fit (after a GPU transfer, its standard errors moved with the parameters) "
               "enters the scale with the weight learned there; a mixture of experts' rows take the wider of that "
               "interval and the one learned the same way on the other folds of the kernel-composed "
               "mixture-of-experts curves. Per "
               "dataset (the kernel-composed curves' included) and for E2E, TTFT and TPOT: extrap_coverage.csv."],
    )  # fmt: skip
    return coverage


def latency_display(latency: pd.DataFrame) -> pd.DataFrame:
    """`latency_table` as one row per (axis, dataset, quantity) and a column per candidate: "MAPE [lo, hi] (bias)"."""
    rows: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in latency.itertuples(index=False):
        key = (str(r.axis), str(r.dataset), str(r.quantity))
        row = rows.setdefault(
            key, {"axis": key[0], "dataset": key[1], "quantity": key[2], "rows": str(r.n_test)}
        )
        row[candidate_label(r.method)] = (f"{r.mape_pct:.1f} [{r.mape_lo_pct:.1f}, {r.mape_hi_pct:.1f}] "
                                          f"({r.bias_pct:+.1f})")  # fmt: skip
    return pd.DataFrame(list(rows.values())).fillna("n/a").astype(str)


def model_display(models: pd.DataFrame) -> pd.DataFrame:
    """`model_table` as one row per (axis, dataset, model): rows and "MAPE [lo, hi] (bias)"."""
    cell = [cell_text(r) for _, r in models.iterrows()]
    return pd.DataFrame({"axis": models["axis"], "dataset": models["dataset"], "model": models["model"],
                         "rows": models["n_test"].astype(str), "MAPE [95%] (bias)": cell}).astype(str)  # fmt: skip


def paired_display(paired: pd.DataFrame, methods: list[str]) -> pd.DataFrame:
    """`paired_differences` of `methods` as one row per cell and a column per candidate: "its MAPE (diff [lo,
    hi])"."""
    rows = []
    first = paired[paired["method"] == methods[0]] if methods else paired.iloc[:0]
    for r in first.itertuples(index=False):
        row = {"axis": r.axis, "dataset": r.dataset, "rows": str(r.n_test),
               "recommended": f"{r.reference_mape_pct:.1f}"}  # fmt: skip
        for m in methods:
            q = paired[
                (paired["method"] == m) & (paired["axis"] == r.axis) & (paired["dataset"] == r.dataset)
            ]
            q0 = q.iloc[0]
            row[candidate_label(m)] = (f"{q0['mape_pct']:.1f} ({q0['diff_pct']:+.1f} [{q0['diff_lo_pct']:+.1f}, "
                                       f"{q0['diff_hi_pct']:+.1f}])")  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows).astype(str)
