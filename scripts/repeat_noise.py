"""How far one repeat of a real-engine campaign lies from the others: per campaign and quantity, the mean and median
over runs of ``|x / median(other repeats) - 1|``, for configurations with three or more passing repeats; and the
noise of the median the fit tables hold (the median of a configuration's R repeats drawn again, with replacement,
against the median of all of them, averaged over configurations: ``median of R``). A model scored on these runs
cannot be expected to do better than the noise it is scored against. The runs are those the medians take
(`slimlib.data.engine_medians.runs_for_medians`: a bunched run keeps its throughput); the committed noise-floor
table (`engine_noise_floor`, notebook 11) leaves bunched runs out entirely, so its throughput figures differ.

    python scripts/repeat_noise.py
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.data.engine_medians import runs_for_medians

KEYS = ["model", "batch_size", "input_len", "output_len"]
QUANTITIES = ("throughput_tok_s", "mean_ttft_ms", "mean_tpot_ms", "p90_ttft_ms", "p90_tpot_ms")


def deviations(runs: pd.DataFrame, quantity: str) -> np.ndarray:
    """Per run, its relative deviation from the median of the other repeats of its configuration."""
    out = []
    for _, g in runs.groupby(KEYS, sort=True):
        v = g[quantity].dropna().to_numpy(dtype=float)
        if len(v) < 3:
            continue
        out += [abs(v[i] / np.median(np.delete(v, i)) - 1) for i in range(len(v))]
    return np.asarray(out)


def median_noise(runs: pd.DataFrame, quantity: str, draws: int = 1000, seed: int = 20240613) -> np.ndarray:
    """Per configuration with three or more repeats, the mean of ``|median(R repeats drawn again) / median - 1|``."""
    rng = np.random.default_rng(seed)
    out = []
    for _, g in runs.groupby(KEYS, sort=True):
        v = g[quantity].dropna().to_numpy(dtype=float)
        if len(v) < 3:
            continue
        again = np.median(v[rng.integers(0, len(v), size=(draws, len(v)))], axis=1)
        out.append(np.mean(np.abs(again / np.median(v) - 1)))
    return np.asarray(out)


def main() -> None:
    for table in ("engine-cpu-runs", "engine-cpu-amx-runs"):
        runs, left_out = runs_for_medians(load(table))
        print(
            f"{table}: {len(runs)} runs passing the physical checks ({int(left_out.sum())} left out; a timing "
            "check voids a run's per-token latencies), as the medians take them"
        )
        for q in QUANTITIES:
            if q not in runs.columns:
                continue
            d = 100 * deviations(runs, q)
            m = 100 * median_noise(runs, q)
            print(f"  {q:18s} one repeat against the others' median: mean {d.mean():5.1f}%, median "
                  f"{np.median(d):5.1f}% over {d.size} runs; median of R: {m.mean():5.1f}% over {m.size} "
                  "configurations")  # fmt: skip


if __name__ == "__main__":
    main()
