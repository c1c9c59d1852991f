"""Benchmark of the `slim` command at I/O speed (not a test): prints each figure against its target.

* `slim predict` end to end (process start to exit) on N rows, CSV in and out, and Parquet in and out: rows/s
  (target >= 5e5 on 1e6 rows) and peak memory (target: the run's extra memory <= 2x the input table in memory;
  the process's own baseline, a predict of one row, is shown and subtracted);
* `slim fit` end to end on N rows of repeated configurations (target <= 30 s on 1e6 rows);
* `slim --help` (target <= 0.4 s).

The tables are synthetic, generated from the paper model with fixed parameters: benchmark inputs only, never
measurements. Files go to a temporary folder.

Run: python scripts/bench_cli.py [--rows 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.model import PaperModel

PARAMS = {"eta_c": 0.45, "t_fixed": 0.2, "eta_m": 0.6, "B0": 3.0, "alpha": 2e-5, "gamma": 5e-7}
GPU = "h100-sxm-80gb"
MODELS = ["opt-125m", "opt-1.3b", "opt-2.7b", "llama-2-7b"]


def _configurations(n: int, seed: int = 0) -> pd.DataFrame:
    """`n` rows drawn from a grid of 4 models x 10 batch sizes x 8 x 8 lengths (2,560 distinct configurations)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "model": rng.choice(MODELS, n),
            "batch_size": rng.choice([1, 2, 4, 8, 16, 32, 64, 96, 128, 192], n),
            "input_len": rng.choice([32, 64, 128, 256, 384, 512, 768, 1024], n),
            "output_len": rng.choice([16, 32, 64, 128, 256, 384, 512, 768], n),
        }
    )


#: the child reports its own peak: `ru_maxrss` of a child counts the forking parent's memory (Linux copies it at fork)
_CHILD = """
import sys
sys.argv[0] = 'slim'
peak = sys.argv.pop()
from slimlib.cli.main import main
try:
    rc = main()
finally:
    with open('/proc/self/status') as status, open(peak, 'w') as out:
        out.write(next(line for line in status if line.startswith('VmHWM:')).split()[1])
sys.exit(rc)
"""


def _run(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB, `VmHWM` of the `slim` process itself) of one `slim` process."""
    with tempfile.NamedTemporaryFile(prefix="slim-bench-peak-", suffix=".txt") as peak:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, *argv, peak.name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"slim {' '.join(argv)} failed: {proc.stderr.decode().strip()}")
        return wall, int(Path(peak.name).read_text()) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the predict and fit tables")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure (the best is reported)")
    args = ap.parse_args()
    n = args.rows
    with tempfile.TemporaryDirectory(prefix="slim-bench-cli-") as tmp:
        d = Path(tmp)
        params = d / "params.json"
        PaperModel.with_params(PARAMS, gpu=GPU).to_json(params)
        grid = _configurations(n)
        grid.to_csv(d / "grid.csv", index=False)
        grid.to_parquet(d / "grid.parquet", index=False)
        grid.iloc[:1].to_csv(d / "one.csv", index=False)
        table_mib = grid.memory_usage(deep=True).sum() / 2**20
        file_mib = (d / "grid.csv").stat().st_size / 2**20

        help_s = min(_run(["--help"])[0] for _ in range(args.repeats))
        base_s, base_rss = _run(
            ["predict", str(params), str(d / "one.csv"), "--out", str(d / "one-pred.csv")]
        )
        print(f"slim --help: {help_s:.2f} s (target <= 0.4 s)")
        print(f"slim predict on 1 row: {base_s:.2f} s, peak RSS {base_rss:.0f} MiB (start-up and imports)")
        print(f"input: {n:,} rows, {file_mib:.1f} MiB of CSV, {table_mib:.1f} MiB as a DataFrame")
        for kind in ("csv", "parquet"):
            times = []
            for _ in range(args.repeats):
                wall, rss = _run(
                    ["predict", str(params), str(d / f"grid.{kind}"), "--out", str(d / f"pred.{kind}")]
                )
                times.append(wall)
            best = min(times)
            extra = rss - base_rss
            print(
                f"slim predict {kind} -> {kind}: {best:.2f} s, {n / best:,.0f} rows/s end to end (target >= 500,000 on "
                f"1e6 rows); peak RSS {rss:.0f} MiB, {extra:.0f} MiB above start-up = {extra / table_mib:.2f}x the "
                "input table (target <= 2x)"
            )
            out_rows = len(pd.read_parquet(d / "pred.parquet")) if kind == "parquet" else None
            if out_rows is not None and out_rows != n:
                raise SystemExit(f"predict wrote {out_rows} rows, expected {n}")

        truth = PaperModel.with_params(PARAMS, gpu=GPU)
        measured = grid.assign(gpu=GPU)
        pred = truth.predict(measured)
        measured["throughput_tok_s"] = pred["pred_throughput_tok_s"].to_numpy()
        measured.to_csv(d / "runs.csv", index=False)
        distinct = len(measured.drop_duplicates(["model", "batch_size", "input_len", "output_len"]))
        fit_s = min(
            _run(["fit", str(d / "runs.csv"), "--out", str(d / "fit.json"), "--variant", "paper", "--quiet"])[
                0
            ]
            for _ in range(max(1, args.repeats - 2))
        )
        print(
            f"slim fit on {n:,} rows ({distinct:,} distinct configurations): {fit_s:.1f} s end to end "
            "(target <= 30 s on 1e6 rows)"
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    raise SystemExit(main())
