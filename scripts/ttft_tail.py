"""How far a run's mean TTFT lies above its median, per model of the AMX campaign: a few requests whose first token
reached the client late (held back with the rest of their tokens, or stalled outside the engine's steps) pull the
mean up while the median stays. Per model: the mean TTFT over the median TTFT of each run, and the 99th-percentile
TTFT over the run's mean E2E, over the runs the medians take (not a test).

    python scripts/ttft_tail.py
"""

from __future__ import annotations

import pandas as pd

from slimlib.data import load
from slimlib.data.engine_medians import runs_for_medians


def main() -> None:
    runs, _ = runs_for_medians(load("engine-cpu-amx-runs"))
    runs = runs.dropna(subset=["mean_ttft_ms", "p50_ttft_ms", "p99_ttft_ms"])
    out = pd.DataFrame({
        "model": runs["model"],
        "mean_over_p50": runs["mean_ttft_ms"] / runs["p50_ttft_ms"],
        "p99_over_e2e": runs["p99_ttft_ms"] / (1e3 * runs["e2e_s"]),
    })  # fmt: skip
    g = out.groupby("model")
    table = pd.concat({
        "runs": g.size(),
        "mean/p50 TTFT median": g["mean_over_p50"].median(),
        "mean/p50 TTFT p90": g["mean_over_p50"].quantile(0.9),
        "mean/p50 TTFT max": g["mean_over_p50"].max(),
        "p99 TTFT/E2E max": g["p99_over_e2e"].max(),
        "runs p99 TTFT > 0.8 E2E": g["p99_over_e2e"].apply(lambda s: int((s > 0.8).sum())),
    }, axis=1)  # fmt: skip
    print(table.round(2).to_string())


if __name__ == "__main__":
    main()
