"""Benchmark (not a test): SlimModel.predict throughput on 1e6 rows, and fit time on a synthetic grid.

    python scripts/bench_core.py [--rows 1000000]
The data are generated from the model itself (benchmark input only, not measurements).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from synthetic import TRUE_PARAMS, grid, synthesize  # noqa: E402

from slimlib.calibration import SlimModel  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    truth = SlimModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    rng = np.random.default_rng(0)
    models = np.array(["opt-125m", "opt-1.3b", "opt-6.7b", "llama-2-7b", "llama-3-8b", "mistral-7b"])
    df = pd.DataFrame(
        {
            "model": models[rng.integers(0, len(models), args.rows)],
            "gpu": "h100-sxm-80gb",
            "batch_size": rng.integers(1, 1025, args.rows),
            "input_len": rng.integers(1, 4097, args.rows),
            "output_len": rng.integers(1, 2049, args.rows),
        }
    )
    best = np.inf
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        truth.predict(df)
        best = min(best, time.perf_counter() - t0)
    print(
        f"predict: {args.rows:,} rows in {best:.3f} s (best of {args.repeat}) -> {args.rows / best:,.0f} rows/s"
    )
    data = synthesize(truth, grid())
    t0 = time.perf_counter()
    SlimModel().fit(data)
    print(f"fit: {len(data)} rows, 6 parameters, 9 starts in {time.perf_counter() - t0:.3f} s")


if __name__ == "__main__":
    main()
