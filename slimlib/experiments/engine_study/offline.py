"""The engine alone against the engine behind its server: the served campaign's medians over the offline campaign's
(`slimlib.data.engine_offline`), configuration by configuration.

The served campaign runs the API server and the benchmark client on the engine's 2-core host; the offline campaign
runs the same configurations with ``LLM.generate`` in one process. The ratio of their E2E is what the serving front
end costs the engine on this host (its per-token work and its share of the cores), a measurement, not a model.
"""

from __future__ import annotations

import pandas as pd

from slimlib.experiments.outputs.uncertainty import bootstrap_mean_ci

KEYS = ["model", "batch_size", "input_len", "output_len"]
#: columns of `served_over_offline`
COLUMNS = ("model", "batch_size", "n_configs", "ratio_mean", "ratio_lo", "ratio_hi", "ratio_min", "ratio_max")


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
