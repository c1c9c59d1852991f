"""The engine alone against the engine behind its server: the served campaign's medians over the offline campaign's
(`slimlib.data.engine_offline`), configuration by configuration.

The served campaign runs the API server and the benchmark client on the engine's 2-core host; the offline campaign
runs the same configurations with ``LLM.generate`` in one process. The ratio of their E2E is what the serving front
end costs the engine on this host (its per-token work and its share of the cores), a measurement, not a model.

`order_effect`: the offline campaign runs each model's configurations by (IL, OL, B), in reverse on odd repeats (one
process per model and repeat); a configuration's E2E in the reversed repeats over its median in the forward ones
says whether a run's time depends on what the process ran before it.

`prefix_cache_effect`: the first offline campaign ran with vLLM's default prefix caching on and its prompts repeated
across the runs of one process (`slimlib.data.engine_offline.CACHED`); its E2E over the re-run's (caching off,
prompts distinct per run) is the share of each run's time that caching skipped.
"""

from __future__ import annotations

import pandas as pd

from slimlib.experiments.outputs.uncertainty import bootstrap_mean_ci

KEYS = ["model", "batch_size", "input_len", "output_len"]
#: columns of `served_over_offline`
COLUMNS = ("model", "batch_size", "n_configs", "ratio_mean", "ratio_lo", "ratio_hi", "ratio_min", "ratio_max")


def order_effect(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model, IL and OL: for each B, the median E2E of the offline campaign's reversed-order repeats (odd
    ``repeat``) over that of its forward-order repeats (even), on the runs that pass the physical checks; NaN where
    either order has no such run. Columns ``model``, ``input_len``, ``output_len``, then one per B (``B=1``, ...)."""
    ok = runs[runs["checks_failed"] == ""]
    odd = ok["repeat"].astype(int) % 2 == 1
    fwd = ok[~odd].groupby(KEYS)["e2e_s"].median()
    rev = ok[odd].groupby(KEYS)["e2e_s"].median()
    return _by_b(rev / fwd)


def without_caching_check(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with the ``prefix_caching`` check taken out of ``checks_failed``: a cached campaign read on the footing
    of a clean one (every other check still counts), to measure what caching did, never to fit."""
    kept = runs["checks_failed"].map(
        lambda s: ";".join(c for c in s.split(";") if c and c != "prefix_caching")
    )
    return runs.assign(checks_failed=kept)


def prefix_cache_effect(cached: pd.DataFrame, clean: pd.DataFrame) -> pd.DataFrame:
    """Per model, IL and OL: for each B, the median E2E of campaign `cached` (runs failing no physical check but
    ``prefix_caching``, `without_caching_check`) over that of campaign `clean` (runs failing none); NaN where either
    has no such run. Columns as `order_effect`."""
    kept = without_caching_check(cached)
    a = kept[kept["checks_failed"] == ""].groupby(KEYS)["e2e_s"].median()
    b = clean[clean["checks_failed"] == ""].groupby(KEYS)["e2e_s"].median()
    return _by_b(a / b)


def _by_b(ratio: pd.Series) -> pd.DataFrame:
    """A ratio indexed by `KEYS` as one row per (model, IL, OL) and one column per B (``B=1``, ...)."""
    wide = (
        ratio.rename("ratio")
        .reset_index()
        .pivot(index=["model", "input_len", "output_len"], columns="batch_size", values="ratio")
    )
    wide.columns = [f"B={int(b)}" for b in wide.columns]
    return wide.reset_index().sort_values(["model", "input_len", "output_len"]).reset_index(drop=True)


def paired(served: pd.DataFrame, offline: pd.DataFrame) -> pd.DataFrame:
    """Per configuration both hold: ``e2e_served``, ``e2e_offline`` and ``ratio`` (served / offline E2E)."""
    both = served[[*KEYS, "e2e_s"]].merge(
        offline[[*KEYS, "e2e_s"]], on=KEYS, suffixes=("_served", "_offline")
    )
    both = both.rename(columns={"e2e_s_served": "e2e_served", "e2e_s_offline": "e2e_offline"})
    return (
        both.assign(ratio=both["e2e_served"] / both["e2e_offline"]).sort_values(KEYS).reset_index(drop=True)
    )


def served_over_offline(
    served: pd.DataFrame, offline: pd.DataFrame, *, n_boot: int, seed: int
) -> pd.DataFrame:
    """Per model and batch size: the mean served / offline E2E ratio over the lengths both campaigns ran, with a
    bootstrap 95% interval over those configurations, and its range."""
    rows = []
    for (model, b), g in paired(served, offline).groupby(["model", "batch_size"], sort=True):
        r = g["ratio"].to_numpy(dtype=float)
        mean, lo, hi = bootstrap_mean_ci(r, n_boot=n_boot, seed=seed, label=f"{model} B={b}")
        rows.append({"model": model, "batch_size": int(b), "n_configs": len(r), "ratio_mean": mean,
                     "ratio_lo": lo, "ratio_hi": hi, "ratio_min": float(r.min()), "ratio_max": float(r.max())})  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS))
