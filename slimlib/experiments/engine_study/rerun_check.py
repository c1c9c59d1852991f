"""Does a rerun of the engine campaign reproduce the committed medians?

Both campaigns are reduced to their fit tables (`slimlib.data.engine_medians.median_table`: the median over each
configuration's passing repeats). On the configurations both hold (identical rows only), per metric
(`NOISE_METRICS`: throughput and mean request E2E; with ``served``, also `SERVED_NOISE_METRICS`, the mean TTFT and
TPOT, where both campaigns measured them on every shared configuration):

* ``diff_pct`` per configuration: ``100 (rerun / committed - 1)``;
* **disagreement**: the mean of ``|diff_pct|`` over configurations, with a percentile bootstrap 95% interval;
* **drift**: the mean of ``diff_pct`` (a shift common to every configuration: the host between sessions), with its
  interval;
* **expected disagreement** (``expected_from`` says which):
  - from **sessions**, when the committed runs pool S >= 2 sessions (``session``): per configuration the mean
    pairwise disagreement of its sessions' medians times sqrt((1 + 1/S) / 2), averaged over configurations
    (`slimlib.experiments.engine_study.noise_floor`, module docstring: a new session against the pooled medians);
  - from **repeats**, with one committed session: the bootstrap mean of ``|m1* - m2*| / m`` over pairs of medians
    of R repeats resampled from the committed repeats, averaged over configurations. It measures spread within a
    session only, so a change of the host between sessions (a drift whose interval excludes zero) exceeds it;
* **within floor**: the disagreement is no larger than the expected disagreement (its interval's lower end at or
  below it);
* **up to a session scale factor** (the host's speed moves between sessions as a whole): ``scale_pct``, the rerun's
  common factor ``100 (exp(median log(rerun / committed)) - 1)``; ``residual_pct``, the mean of
  ``|rerun / (committed x scale) - 1|`` with its interval; ``expected_residual_pct``, the expectation from
  sessions as above on the committed runs with each session's own common factor removed
  (`slimlib.experiments.engine_study.noise_floor.without_session_scales`; NaN with one committed session);
  ``within_floor_scaled`` as ``within_floor`` on these.

`leave_one_session_out` runs the check once per session of a pooled runs table: that session against the pooled
medians of the others, with the expectation from the others alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data.engine_medians import MEDIAN_KEYS, median_table
from slimlib.errors import DataError
from slimlib.experiments.engine_study.noise_floor import (
    CONFIG_KEYS,
    NOISE_METRICS,
    common_factor,
    new_session_factor,
    passing_runs,
    session_deviations,
    without_session_scales,
)
from slimlib.experiments.outputs import uncertainty as U

__all__ = [
    "RERUN_COLUMNS",
    "SERVED_NOISE_METRICS",
    "expected_disagreement",
    "leave_one_session_out",
    "paired_medians",
    "rerun_summary",
    "session_expected",
]

RERUN_COLUMNS = ("metric", "n_configs", "disagreement_pct", "disagreement_lo_pct", "disagreement_hi_pct",
                 "drift_pct", "drift_lo_pct", "drift_hi_pct", "expected_pct", "expected_from",
                 "within_floor", "scale_pct", "residual_pct", "residual_lo_pct", "residual_hi_pct",
                 "expected_residual_pct", "within_floor_scaled")  # fmt: skip


#: the served latencies a rerun is also compared on (``served``), metric -> column
SERVED_NOISE_METRICS = {"ttft": "mean_ttft_ms", "tpot": "mean_tpot_ms"}


def _keys(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    return [k for k in MEDIAN_KEYS if k in a.columns and k in b.columns]


def _served_metrics(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, str]:
    """The metrics of `SERVED_NOISE_METRICS` measured (finite, > 0) on every configuration the median tables `a`
    and `b` share."""
    keys = _keys(a, b)
    out = {}
    for metric, col in SERVED_NOISE_METRICS.items():
        if col in a.columns and col in b.columns:
            m = a[keys + [col]].merge(b[keys + [col]], on=keys)
            values = m[[f"{col}_x", f"{col}_y"]].to_numpy(dtype=float)
            if len(m) and (np.isfinite(values) & (values > 0)).all():
                out[metric] = col
    return out


def paired_medians(
    committed_runs: pd.DataFrame, rerun_runs: pd.DataFrame, served: bool = False
) -> pd.DataFrame:
    """One row per configuration both runs tables hold (each reduced to its medians): the keys, and per metric of
    `NOISE_METRICS` (with `served`, also `_served_metrics`) the committed and rerun medians and
    ``<metric>_diff_pct``. DataError when none is shared."""
    a, b = median_table(committed_runs), median_table(rerun_runs)
    keys = _keys(a, b)
    metrics = {**NOISE_METRICS, **(_served_metrics(a, b) if served else {})}
    cols = list(metrics.values())
    m = a[keys + cols].merge(
        b[keys + cols], on=keys, suffixes=("_committed", "_rerun"), validate="one_to_one"
    )
    if m.empty:
        raise DataError(
            "the rerun shares no configuration (model, gpu, engine, weights, B, IL, OL) with the committed campaign; "
            "run the same grid (README 'The committed campaign')"
        )
    for metric, col in metrics.items():
        m[f"{metric}_diff_pct"] = 100.0 * (m[f"{col}_rerun"] / m[f"{col}_committed"] - 1.0)
    return m.sort_values(keys).reset_index(drop=True)


def expected_disagreement(
    committed_runs: pd.DataFrame, configs: pd.DataFrame, col: str, seed: int, n_inner: int = 1000
) -> float:
    """Mean over `configs` (rows with the median keys) of the expected ``|m1* - m2*| / m`` (percent) of two medians
    of R repeats resampled from the committed passing repeats (module docstring); configurations with one repeat
    add nothing."""
    ok = passing_runs(committed_runs)
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
        i1 = U.resample_indices(rng, x.size, (n_inner, x.size))
        i2 = U.resample_indices(rng, x.size, (n_inner, x.size))
        m1, m2 = np.median(np.take(x, i1), axis=1), np.median(np.take(x, i2), axis=1)
        dev.append(float(np.mean(np.abs(m1 - m2))) / float(np.median(x)))
    return 100.0 * float(np.mean(dev))


def session_expected(
    committed_runs: pd.DataFrame, configs: pd.DataFrame, col: str
) -> tuple[float, int] | None:
    """(expected disagreement in percent, S) of a new session against the pooled medians of the committed
    sessions, over the `configs` measured in >= 2 of them (module docstring); None with fewer than two sessions."""
    dev = session_deviations(committed_runs, col)
    keys = [k for k in CONFIG_KEYS if k in dev.columns and k in configs.columns]
    dev = dev.merge(configs[keys].drop_duplicates(), on=keys)
    if dev.empty:
        return None
    s_count = dev["n_sessions"].to_numpy(dtype=float)
    expected = dev["pairwise_pct"].to_numpy(dtype=float) * new_session_factor(s_count)
    return float(np.mean(expected)), int(s_count.max())


def rerun_summary(
    committed_runs: pd.DataFrame, rerun_runs: pd.DataFrame, n_boot: int = 10_000, seed: int = 20_240_613,
    served: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """(summary, pairs): one summary row per metric (`RERUN_COLUMNS`, module docstring; with `served`, the served
    latencies too) and the per-configuration table of `paired_medians`."""
    pairs = paired_medians(committed_runs, rerun_runs, served)
    metrics = {m: c for m, c in {**NOISE_METRICS, **SERVED_NOISE_METRICS}.items() if f"{m}_diff_pct" in pairs}
    committed_flat = without_session_scales(committed_runs, metrics.values())
    rows = []
    for metric, col in metrics.items():
        d = pairs[f"{metric}_diff_pct"].to_numpy(dtype=float)
        dis, dis_lo, dis_hi = U.bootstrap_mean_ci(
            np.abs(d), n_boot=n_boot, seed=seed, label=f"rerun |diff| {metric}"
        )
        dr, dr_lo, dr_hi = U.bootstrap_mean_ci(d, n_boot=n_boot, seed=seed, label=f"rerun drift {metric}")
        by_session = session_expected(committed_runs, pairs, col)
        if by_session is not None:
            expected, basis = by_session[0], f"{by_session[1]} sessions"
        else:
            expected, basis = expected_disagreement(committed_runs, pairs, col, seed), "repeats"
        ratio = pairs[f"{col}_rerun"].to_numpy(dtype=float) / pairs[f"{col}_committed"].to_numpy(dtype=float)
        scale = common_factor(ratio)
        res, res_lo, res_hi = U.bootstrap_mean_ci(
            100.0 * np.abs(ratio / scale - 1.0), n_boot=n_boot, seed=seed, label=f"rerun residual {metric}"
        )
        scaled = session_expected(committed_flat, pairs, col)
        expected_res = scaled[0] if scaled is not None else float("nan")
        rows.append({"metric": metric, "n_configs": len(pairs), "disagreement_pct": dis,
                     "disagreement_lo_pct": dis_lo, "disagreement_hi_pct": dis_hi, "drift_pct": dr,
                     "drift_lo_pct": dr_lo, "drift_hi_pct": dr_hi, "expected_pct": expected,
                     "expected_from": basis, "within_floor": bool(dis_lo <= expected),
                     "scale_pct": 100.0 * (scale - 1.0), "residual_pct": res, "residual_lo_pct": res_lo,
                     "residual_hi_pct": res_hi, "expected_residual_pct": expected_res,
                     "within_floor_scaled": bool(res_lo <= expected_res)})  # fmt: skip
    return pd.DataFrame(rows, columns=list(RERUN_COLUMNS)), pairs


def leave_one_session_out(
    runs: pd.DataFrame, n_boot: int = 10_000, seed: int = 20_240_613
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary, pairs) of `rerun_summary` once per session of a pooled runs table, in the table's order: that
    session against the others, each row and pair with ``held_out`` (the session) first. DataError with fewer than
    two sessions."""
    if "session" not in runs.columns or runs["session"].nunique() < 2:
        raise DataError(
            "the runs table holds one session; leave-one-session-out needs two or more (column session)"
        )
    summaries, pairs = [], []
    for s in dict.fromkeys(runs["session"]):
        held = runs["session"] == s
        summary, p = rerun_summary(runs[~held], runs[held], n_boot=n_boot, seed=seed)
        summaries.append(summary.assign(held_out=s))
        pairs.append(p.assign(held_out=s))
    out = pd.concat(summaries, ignore_index=True)
    both = pd.concat(pairs, ignore_index=True)
    return out[["held_out", *RERUN_COLUMNS]], both[
        ["held_out", *[c for c in both.columns if c != "held_out"]]
    ]
