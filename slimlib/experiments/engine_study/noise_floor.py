"""Noise floor of the engine's fit table, estimated from the repeats of each configuration.

For a configuration with R >= 2 passing repeats x_1..x_R (a metric: throughput or mean request E2E) and their
median m:

* **median floor** (the noise of a row of ``engine-cpu-medians``): the expected relative deviation of the median of
  R repeats drawn again from the same configuration, estimated by the bootstrap: resample the R repeats with
  replacement `n_inner` times, take each resample's median m*, and average ``|m* - m| / m``;
* **single-run floor** (the noise of one run, for comparison): the same with a resample of one repeat, i.e. the
  mean over the repeats of ``|x_r - m| / m`` (computed exactly: it is the expectation of that bootstrap).

Each floor is the mean of the per-configuration deviations, in percent, with a percentile bootstrap 95% interval
over configurations. It measures run-to-run spread within the campaign (the repeats are spread over it), not bias
common to every repeat. A model error below the median floor cannot be told from measurement noise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.experiments.outputs import uncertainty as U

__all__ = ["NOISE_COLUMNS", "NOISE_METRICS", "noise_floor"]

CONFIG_KEYS = ("model", "gpu", "batch_size", "input_len", "output_len")
#: metric name -> column of the runs table
NOISE_METRICS = {"throughput": "throughput_tok_s", "latency": "e2e_s"}
NOISE_COLUMNS = ("metric", "estimate", "n_configs", "mean_repeats", "floor_pct", "ci_lo_pct", "ci_hi_pct",
                 "max_pct")  # fmt: skip


def _passing(runs: pd.DataFrame) -> pd.DataFrame:
    if "checks_failed" not in runs.columns:
        return runs
    return runs[runs["checks_failed"].fillna("").astype(str) == ""]


def _median_deviation(x: np.ndarray, n_inner: int, rng: np.random.Generator) -> float:
    m = float(np.median(x))
    idx = rng.integers(0, x.size, size=(n_inner, x.size))
    return float(np.mean(np.abs(np.median(x[idx], axis=1) - m)) / m)


def noise_floor(
    runs: pd.DataFrame, n_boot: int = 10_000, seed: int = 20_240_613, n_inner: int = 1000
) -> pd.DataFrame:
    """Median and single-run noise floors (module docstring) of a runs table with every repeat (repeats that
    fail a physical check left out). Columns `NOISE_COLUMNS`, one row per metric and estimate ("median of R" /
    "single run"); ``max_pct`` is the largest per-configuration deviation. DataError without any configuration
    of >= 2 passing repeats."""
    ok = _passing(runs)
    keys = [k for k in CONFIG_KEYS if k in ok.columns]
    groups = [g for _, g in ok.groupby(keys, sort=True) if len(g) >= 2]
    if not groups:
        raise DataError("no configuration has two passing repeats; the noise floor needs repeats (R >= 2)")
    n_rep = float(np.mean([len(g) for g in groups]))
    rows = []
    for metric, col in NOISE_METRICS.items():
        values = [g[col].to_numpy(dtype=float) for g in groups]
        rng = U.rng_for(seed, np.concatenate(values), "noise floor inner")
        per = {
            "median of R": np.array([_median_deviation(x, n_inner, rng) for x in values]),
            "single run": np.array([np.mean(np.abs(x - np.median(x))) / np.median(x) for x in values]),
        }
        for estimate, dev in per.items():
            pct = 100.0 * dev
            m, lo, hi = U.bootstrap_mean_ci(
                pct, n_boot=n_boot, seed=seed, label=f"noise floor {metric} {estimate}"
            )
            rows.append({"metric": metric, "estimate": estimate, "n_configs": len(groups), "mean_repeats": n_rep,
                         "floor_pct": m, "ci_lo_pct": lo, "ci_hi_pct": hi, "max_pct": float(pct.max())})  # fmt: skip
    return pd.DataFrame(rows, columns=list(NOISE_COLUMNS))
