"""Benchmark of the evaluation (not a test): fit time per scenario and method, predict rows per second, and the
extrapolation cross-validation of the recommended model as notebook 13 runs it (without its fit cache) with
its nested interval coverage.

Run: .venv/bin/python scripts/bench_evaluation.py [--starts 8] [--rows 1000000] [--cv-repeats 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from slimlib.errors import SlimError
from slimlib.experiments.accuracy.evaluation import METHODS
from slimlib.experiments.accuracy.extrapolation import run_extrapolation_cv
from slimlib.experiments.accuracy.extrapolation_coverage import coverage_table
from slimlib.experiments.accuracy.scenarios import build_scenarios
from slimlib.model import make_model
from slimlib.registry.gpus import get_gpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument(
        "--cv-repeats", type=int, default=3, help="timed runs of the cross-validation (0: skip it)"
    )
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    scen = [s for s in build_scenarios() if s.available]
    rows = []
    for s in scen:
        for name in METHODS:
            t0 = time.perf_counter()
            try:
                for f in s.folds:
                    make_model(name, n_starts=args.starts).fit(f.train)
            except SlimError as exc:  # e.g. a baseline without the inputs it needs: say so, keep benchmarking
                print(f"note: {name} not fitted on {s.name}: {exc}")
                continue
            rows.append({"scenario": s.name, "method": name, "fit_s": time.perf_counter() - t0})
    fit = pd.DataFrame(rows).pivot(index="scenario", columns="method", values="fit_s")
    print(f"fit time per scenario (s, all folds, n_starts={args.starts}):")
    print(fit.round(3).to_string())

    base = scen[0].folds[0].train
    # parameters belong to one GPU: the test rows of every scenario on the first scenario's GPU
    gpu = get_gpu(str(base["gpu"].iloc[0])).name
    test = pd.concat([f.test for s in scen for f in s.folds], ignore_index=True)
    test = test[[get_gpu(g).name == gpu for g in test["gpu"].astype(str)]].reset_index(drop=True)
    print(f"\npredict throughput on {len(test)} test rows on {gpu} (best of 5):")
    for name in METHODS:
        model = make_model(name, n_starts=args.starts).fit(base)
        best = min(_timed(model.predict, test) for _ in range(5))
        print(f"  {name:22s} {len(test) / best:12.0f} rows/s")

    rng = np.random.default_rng(0)
    n = args.rows
    big = pd.DataFrame({
        "model": rng.choice(["opt-1.3b", "opt-2.7b", "llama-2-7b", "llama-2-13b"], n),
        "gpu": gpu,
        "batch_size": rng.integers(1, 513, n).astype(float),
        "input_len": rng.integers(16, 2049, n).astype(float),
        "output_len": rng.integers(16, 1025, n).astype(float),
    })  # fmt: skip
    for variant in ("paper", "slim"):
        model = make_model(variant, n_starts=args.starts).fit(base)
        dt = min(_timed(model.predict, big) for _ in range(3))
        print(f"{variant} model: predict on {n:,} rows in {dt:.2f} s (best of 3) -> {n / dt:,.0f} rows/s")

    if args.cv_repeats > 0:  # notebook 13 runs this once per candidate, with 2 Sobol starts per fit
        times = []
        for _ in range(args.cv_repeats):
            t0 = time.perf_counter()
            cv = run_extrapolation_cv(["slim"], n_starts=2)
            times.append(time.perf_counter() - t0)
        print(f"extrapolation cross-validation of slim (n_starts=2, {len(cv.predictions)} test predictions): "
              f"{min(times):.1f} s (best of {len(times)}; all: {', '.join(f'{t:.1f}' for t in times)})")  # fmt: skip
        cover = min(_timed(coverage_table, cv) for _ in range(args.cv_repeats))
        print(
            f"its nested 90% intervals and coverage (coverage_table): {cover:.1f} s (best of {args.cv_repeats})"
        )
    return 0


def _timed(fn, df) -> float:
    t0 = time.perf_counter()
    fn(df)
    return time.perf_counter() - t0


if __name__ == "__main__":
    raise SystemExit(main())
