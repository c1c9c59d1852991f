"""How far one repeat of a real-engine campaign lies from the others: per campaign and quantity, the mean and median
over runs of ``|x / median(other repeats) - 1|``, for configurations with three or more passing repeats. A model
scored on these runs cannot be expected to do better than the noise it is scored against.

    python scripts/repeat_noise.py
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load

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


def main() -> None:
    for table in ("engine-cpu-runs", "engine-cpu-amx-runs"):
        runs = load(table)
        print(f"{table}: {len(runs)} runs")
        for q in QUANTITIES:
            if q not in runs.columns:
                continue
            d = 100 * deviations(runs, q)
            print(f"  {q:18s} one repeat against the others' median: mean {d.mean():5.1f}%, median "
                  f"{np.median(d):5.1f}% over {d.size} runs")  # fmt: skip


if __name__ == "__main__":
    main()
