"""Time the kernel composition (slimlib.experiments.kernel_timing.composition.compose_kernels) on 1e5 (model, GPU, B, IL, OL) configurations.

Usage: python scripts/bench_kernels.py [--configs 100000] [--repeats 5]
Configurations: Mistral-7B, Granite-8B, Llama-3-8B on H100, H200, B200 and A100 (measured vLLM kernel timings,
NVIDIA AIConfigurator data), B in 1..64, IL in 128..2048, OL in 32..2048 (fixed seed; all inside the measured grids).
Prints the cold time (first call: tables loaded, grids and cumulative sums built) and the best and median warm time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from slimlib.experiments.kernel_timing import composition as kernels


def configs(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "model": rng.choice(["mistral-7b", "granite-8b", "llama-3-8b"], n),
        "gpu": rng.choice(["h100", "h200", "b200", "a100"], n),
        "batch_size": rng.integers(1, 65, n).astype(float),
        "input_len": rng.integers(128, 2049, n).astype(float),
        "output_len": rng.integers(32, 2049, n).astype(float),
    })  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    cfg = configs(args.configs)
    kernels._cached.cache_clear()
    kernels._tables.cache_clear()
    t0 = time.perf_counter()
    out = kernels.compose_kernels(cfg)
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        kernels.compose_kernels(cfg)
        warm.append(time.perf_counter() - t0)
    print(f"configurations: {len(cfg)} ({cfg.groupby(['model', 'gpu']).ngroups} model-GPU pairs)")
    print(f"cold (tables loaded, grids built): {cold:.3f} s")
    print(f"warm: best {min(warm):.3f} s, median {float(np.median(warm)):.3f} s over {args.repeats} repeats")
    print(f"throughput: {len(cfg) / min(warm):,.0f} configurations/s (warm best)")
    print(f"composed e2e_s: min {out['e2e_s'].min():.3f}, median {out['e2e_s'].median():.3f}, "
          f"max {out['e2e_s'].max():.3f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
