"""Noise floor of the engine's fit table, estimated from the repeats of each configuration.

For a configuration with R >= 2 passing repeats x_1..x_R (a metric: throughput or mean request E2E) and their
median m:

* **median floor** (the noise of a row of ``engine-cpu-medians``): the expected relative deviation of the median of
  R repeats drawn again from the same configuration, estimated by the bootstrap: resample the R repeats with
  replacement `n_inner` times, take each resample's median m*, and average ``|m* - m| / m``;
* **single-run floor** (the noise of one run, for comparison): the same with a resample of one repeat, i.e. the
  mean over the repeats of ``|x_r - m| / m`` (computed exactly: it is the expectation of that bootstrap).

Each floor is the mean of the per-configuration deviations, in percent, with a percentile bootstrap 95% interval
over configurations. These two treat the repeats as exchangeable, so they measure run-to-run spread, not a change
of the host common to a whole session.

Across sessions (runs with a ``session`` column naming S >= 2 campaign folders of the same command), each session's
median of a configuration is taken as its long-run value plus a session deviation of spread sigma (the host's
change between sessions and the repeat noise of that session's median), independent between sessions and, for the
scaling of mean absolute values, normal. Then, with ``pairwise`` the mean over pairs of sessions of
``|m_i - m_j| / m`` (m: the pooled median), E|m_i - m_j| is proportional to sqrt(2) sigma and:

* **session floor** (`SESSION_ESTIMATE`, the noise of a pooled median, whose spread is sigma / sqrt(S)):
  ``pairwise x sqrt(1 / (2 S))``;
* **a new session against the pooled medians** (`new_session_factor`, spread sigma sqrt(1 + 1/S)):
  ``pairwise x sqrt((1 + 1/S) / 2)``.

A model error below the session floor cannot be told from the measurement, whose sessions disagree by more than
their repeats do.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.experiments.outputs import uncertainty as U

__all__ = [
    "NOISE_COLUMNS",
    "NOISE_METRICS",
    "SESSION_ESTIMATE",
    "common_factor",
    "new_session_factor",
    "noise_floor",
    "passing_runs",
    "session_deviations",
    "session_scales",
    "without_session_scales",
]

CONFIG_KEYS = ("model", "gpu", "batch_size", "input_len", "output_len")
#: metric name -> column of the runs table
NOISE_METRICS = {"throughput": "throughput_tok_s", "latency": "e2e_s"}
#: the estimate name of the floor across sessions
SESSION_ESTIMATE = "across sessions"
NOISE_COLUMNS = ("metric", "estimate", "n_configs", "mean_repeats", "floor_pct", "ci_lo_pct", "ci_hi_pct",
                 "max_pct")  # fmt: skip


def passing_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of `runs` that pass every physical check (all of them without a ``checks_failed`` column)."""
    if "checks_failed" not in runs.columns:
        return runs
    return runs[runs["checks_failed"].fillna("").astype(str) == ""]


def new_session_factor(n_sessions: np.ndarray | float) -> np.ndarray | float:
    """The factor sqrt((1 + 1/S) / 2) from the pairwise disagreement of S sessions to a new session's expected
    disagreement with their pooled medians (module docstring)."""
    return np.sqrt((1.0 + 1.0 / np.asarray(n_sessions, dtype=float)) / 2.0)


def session_deviations(runs: pd.DataFrame, col: str) -> pd.DataFrame:
    """Per configuration with passing runs in >= 2 sessions: its keys, ``n_sessions`` (S) and ``pairwise_pct``,
    the mean over pairs of sessions of ``|m_i - m_j| / m`` in percent (m_i: session i's median of `col` over its
    passing repeats; m: the median over all of them). Empty without a ``session`` column or a second session."""
    ok = passing_runs(runs)
    keys = [k for k in CONFIG_KEYS if k in ok.columns]
    if "session" not in ok.columns or ok["session"].nunique() < 2:
        return pd.DataFrame(columns=[*keys, "n_sessions", "pairwise_pct"])
    rows = []
    for key, g in ok.groupby(keys, sort=True):
        m = g.groupby("session", sort=True)[col].median().to_numpy(dtype=float)
        if m.size < 2:
            continue
        i, j = np.triu_indices(m.size, k=1)
        pooled = float(np.median(g[col].to_numpy(dtype=float)))
        rows.append([*key, m.size, 100.0 * float(np.mean(np.abs(m[i] - m[j]))) / pooled])
    return pd.DataFrame(rows, columns=[*keys, "n_sessions", "pairwise_pct"])


def common_factor(ratios: np.ndarray) -> float:
    """The one factor common to a set of per-configuration ratios: ``exp(median(log ratio))``."""
    return float(np.exp(np.median(np.log(np.asarray(ratios, dtype=float)))))


def session_scales(runs: pd.DataFrame, col: str) -> pd.Series:
    """Per session, its `common_factor` on `col` over the configurations measured in >= 2 sessions: of the ratios
    ``m_s / m`` (m_s: the session's median of a configuration's passing repeats, m: the median over every
    session's), the host's speed in that session relative to the pool. Empty without a ``session`` column."""
    ok = passing_runs(runs)
    keys = [k for k in CONFIG_KEYS if k in ok.columns]
    if "session" not in ok.columns or ok.empty:
        return pd.Series(dtype=float, name="scale")
    pooled = ok.groupby(keys, sort=True)[col].median().rename("pooled")
    per = ok.groupby([*keys, "session"], sort=True)[col].median().rename("m").reset_index()
    per = per[per.groupby(keys)["session"].transform("size") >= 2].merge(pooled.reset_index(), on=keys)
    ratio = per["m"].to_numpy(dtype=float) / per["pooled"].to_numpy(dtype=float)
    factors = {
        s: common_factor(ratio[(per["session"] == s).to_numpy()]) for s in dict.fromkeys(per["session"])
    }
    return pd.Series(factors, dtype=float, name="scale")


def without_session_scales(runs: pd.DataFrame, cols: Iterable[str] = NOISE_METRICS.values()) -> pd.DataFrame:
    """`runs` with every column of `cols` (default: the metrics of `NOISE_METRICS`) divided by its session's
    `session_scales`: what is left of the sessions' disagreement once each session's common factor is removed."""
    out = runs.copy()
    if "session" not in out.columns:
        return out
    for col in cols:
        scale = session_scales(runs, col)
        out[col] = out[col].to_numpy(dtype=float) / out["session"].map(scale).fillna(1.0).to_numpy(
            dtype=float
        )
    return out


def _median_deviation(x: np.ndarray, n_inner: int, rng: np.random.Generator) -> float:
    m = float(np.median(x))
    idx = U.resample_indices(rng, x.size, (n_inner, x.size))
    return float(np.mean(np.abs(np.median(np.take(x, idx), axis=1) - m)) / m)


def noise_floor(
    runs: pd.DataFrame, n_boot: int = 10_000, seed: int = 20_240_613, n_inner: int = 1000
) -> pd.DataFrame:
    """Median, single-run and (with >= 2 sessions) session floors (module docstring) of a runs table with every
    repeat (repeats that fail a physical check left out). Columns `NOISE_COLUMNS`, one row per metric and estimate
    ("median of R", "single run", `SESSION_ESTIMATE`); ``max_pct`` is the largest per-configuration deviation.
    DataError without any configuration of >= 2 passing repeats."""
    ok = passing_runs(runs)
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
            "median of R": 100.0 * np.array([_median_deviation(x, n_inner, rng) for x in values]),
            "single run": 100.0
            * np.array([np.mean(np.abs(x - np.median(x))) / np.median(x) for x in values]),
        }
        sessions = session_deviations(runs, col)
        if not sessions.empty:
            s_count = sessions["n_sessions"].to_numpy(dtype=float)
            per[SESSION_ESTIMATE] = sessions["pairwise_pct"].to_numpy(dtype=float) * np.sqrt(
                1.0 / (2.0 * s_count)
            )
        for estimate, pct in per.items():
            m, lo, hi = U.bootstrap_mean_ci(
                pct, n_boot=n_boot, seed=seed, label=f"noise floor {metric} {estimate}"
            )
            n = len(sessions) if estimate == SESSION_ESTIMATE else len(groups)
            rows.append({"metric": metric, "estimate": estimate, "n_configs": n, "mean_repeats": n_rep,
                         "floor_pct": m, "ci_lo_pct": lo, "ci_hi_pct": hi, "max_pct": float(pct.max())})  # fmt: skip
    return pd.DataFrame(rows, columns=list(NOISE_COLUMNS))
