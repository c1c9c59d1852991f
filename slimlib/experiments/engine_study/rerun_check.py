"""Does a rerun of the engine campaign reproduce the committed medians? (issue 27's check of the protocol)

Both campaigns are reduced to their fit tables (`slimlib.data.engine_medians.median_table`: the median over each
configuration's passing repeats). On the configurations both hold (identical rows only), per metric
(`NOISE_METRICS`: throughput and mean request E2E):

* ``diff_pct`` per configuration: ``100 (rerun / committed - 1)``;
* **disagreement**: the mean of ``|diff_pct|`` over configurations, with a percentile bootstrap 95% interval;
* **drift**: the mean of ``diff_pct`` (a shift common to every configuration: the host between sessions), with its
  interval;
* **expected disagreement**: what two campaigns drawn from the committed repeats would show, by the bootstrap of
  `slimlib.experiments.engine_study.noise_floor`: per configuration the mean of ``|m1* - m2*| / m`` over pairs of
  medians of R repeats resampled from the committed repeats, averaged over configurations (about sqrt(2) times
  the committed median floor, which is the deviation of one median);
* **within floor**: the disagreement is no larger than the expected disagreement (its interval's lower end at or
  below it), i.e. the rerun is as close as repeats of the committed campaign are to each other.

The floor only measures spread within a campaign; a drift whose interval excludes zero is a change of the host
between the campaigns, reported as such.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data.engine_medians import MEDIAN_KEYS, median_table
from slimlib.errors import DataError
from slimlib.experiments.engine_study.noise_floor import NOISE_METRICS
from slimlib.experiments.outputs import uncertainty as U

__all__ = ["RERUN_COLUMNS", "expected_disagreement", "paired_medians", "rerun_summary"]

RERUN_COLUMNS = ("metric", "n_configs", "disagreement_pct", "disagreement_lo_pct", "disagreement_hi_pct",
                 "drift_pct", "drift_lo_pct", "drift_hi_pct", "expected_pct", "within_floor")  # fmt: skip


def _keys(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    return [k for k in MEDIAN_KEYS if k in a.columns and k in b.columns]


def paired_medians(committed_runs: pd.DataFrame, rerun_runs: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration both runs tables hold (each reduced to its medians): the keys, and per metric of
    `NOISE_METRICS` the committed and rerun medians and ``<metric>_diff_pct``. DataError when none is shared."""
    a, b = median_table(committed_runs), median_table(rerun_runs)
    keys = _keys(a, b)
    cols = list(NOISE_METRICS.values())
    m = a[keys + cols].merge(
        b[keys + cols], on=keys, suffixes=("_committed", "_rerun"), validate="one_to_one"
    )
    if m.empty:
        raise DataError(
            "the rerun shares no configuration (model, gpu, engine, weights, B, IL, OL) with the committed campaign; "
            "run the same grid (README 'The committed campaign')"
        )
    for metric, col in NOISE_METRICS.items():
        m[f"{metric}_diff_pct"] = 100.0 * (m[f"{col}_rerun"] / m[f"{col}_committed"] - 1.0)
    return m.sort_values(keys).reset_index(drop=True)


def _passing(runs: pd.DataFrame) -> pd.DataFrame:
    if "checks_failed" not in runs.columns:
        return runs
    return runs[runs["checks_failed"].fillna("").astype(str) == ""]


def expected_disagreement(
    committed_runs: pd.DataFrame, configs: pd.DataFrame, col: str, seed: int, n_inner: int = 1000
) -> float:
    """Mean over `configs` (rows with the median keys) of the expected ``|m1* - m2*| / m`` (percent) of two medians
    of R repeats resampled from the committed passing repeats (module docstring); configurations with one repeat
    add nothing."""
    ok = _passing(committed_runs)
    keys = _keys(ok, configs)
    wanted = configs[keys].drop_duplicates()
    groups = ok.merge(wanted, on=keys).groupby(keys, sort=True)[col]
    values = [g.to_numpy(dtype=float) for _, g in groups if len(g) >= 2]
    if not values:
        raise DataError(
            "the committed campaign has no configuration with two passing repeats; no floor to compare"
        )
    rng = U.rng_for(seed, np.concatenate(values), "rerun expected disagreement")
    dev = []
    for x in values:
        i1 = rng.integers(0, x.size, size=(n_inner, x.size))
        i2 = rng.integers(0, x.size, size=(n_inner, x.size))
        m1, m2 = np.median(x[i1], axis=1), np.median(x[i2], axis=1)
        dev.append(float(np.mean(np.abs(m1 - m2))) / float(np.median(x)))
    return 100.0 * float(np.mean(dev))


def rerun_summary(
    committed_runs: pd.DataFrame, rerun_runs: pd.DataFrame, n_boot: int = 10_000, seed: int = 20_240_613
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, pairs): one summary row per metric (`RERUN_COLUMNS`, module docstring) and the per-configuration
    table of `paired_medians`."""
    pairs = paired_medians(committed_runs, rerun_runs)
    rows = []
    for metric, col in NOISE_METRICS.items():
        d = pairs[f"{metric}_diff_pct"].to_numpy(dtype=float)
        dis, dis_lo, dis_hi = U.bootstrap_mean_ci(
            np.abs(d), n_boot=n_boot, seed=seed, label=f"rerun |diff| {metric}"
        )
        dr, dr_lo, dr_hi = U.bootstrap_mean_ci(d, n_boot=n_boot, seed=seed, label=f"rerun drift {metric}")
        expected = expected_disagreement(committed_runs, pairs, col, seed)
        rows.append({"metric": metric, "n_configs": len(pairs), "disagreement_pct": dis,
                     "disagreement_lo_pct": dis_lo, "disagreement_hi_pct": dis_hi, "drift_pct": dr,
                     "drift_lo_pct": dr_lo, "drift_hi_pct": dr_hi, "expected_pct": expected,
                     "within_floor": bool(dis_lo <= expected)})  # fmt: skip
    return pd.DataFrame(rows, columns=list(RERUN_COLUMNS)), pairs
