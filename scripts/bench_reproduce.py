"""Benchmark of the paths a new user takes first (not a test): prints each figure against its target.

* `slim reproduce` from a clean start (a new fit cache, a new build folder, outputs in a temporary folder): the
  elapsed time (target <= 300 s on the 2-core host) and each notebook's (target <= 90 s);
* the same again with the cache the first run filled (what a rerun after a change costs);
* `slim fit` of the recommended model on the CPU-engine medians, plain and with ``--intervals`` (target: at most
  2x the plain fit), each the median of `--repeats` runs, process start to exit.

Run: python scripts/bench_reproduce.py [--skip-reproduce] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPRODUCE_TARGET_S, NOTEBOOK_TARGET_S, INTERVAL_RATIO_TARGET = 300.0, 90.0, 2.0


def _slim(*args: str, env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "slimlib.cli.main", *args], cwd=REPO, env=env, text=True,
                         capture_output=True, check=True)  # fmt: skip
    return time.perf_counter() - t0, out.stdout


def _reproduce(tmp: Path, label: str, env: dict[str, str]) -> None:
    wall, out = _slim("reproduce", "--build-dir", str(tmp / "build"), "--figures-dir", str(tmp / label),
                      "--no-progress", env=env)  # fmt: skip
    rows = re.findall(r"^(\d\d_\S+\.ipynb)\s+ok\s+([\d.]+) s$", out, flags=re.M)
    slow = [(nb, float(s)) for nb, s in rows if float(s) > NOTEBOOK_TARGET_S]
    print(f"slim reproduce ({label}): {wall:.1f} s elapsed (target <= {REPRODUCE_TARGET_S:.0f} s)")
    for nb, s in rows:
        print(f"  {nb:<32} {float(s):7.1f} s")
    print(
        f"  notebooks above {NOTEBOOK_TARGET_S:.0f} s: {', '.join(f'{n} ({s:.0f} s)' for n, s in slow) or 'none'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-reproduce", action="store_true", help="time the fits only")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each fit (median shown)")
    args = ap.parse_args()
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory(prefix="slim-bench-") as t:
        tmp = Path(t)
        env = {**os.environ, "SLIM_CACHE_DIR": str(tmp / "cache")}
        if not args.skip_reproduce:
            _reproduce(tmp, "clean", env)
            _reproduce(tmp, "cached", env)
        table = str(REPO / "data" / "engine-cpu-medians.csv")
        times: dict[str, list[float]] = {"plain": [], "intervals": []}
        for _ in range(args.repeats):  # alternated, so a change in the host's load falls on both
            for kind, extra in (("plain", ()), ("intervals", ("--intervals",))):
                wall, _ = _slim("fit", table, "--out", str(tmp / f"{kind}.json"), "--quiet", *extra, env=env)
                times[kind].append(wall)
        plain, intervals = (statistics.median(times[k]) for k in ("plain", "intervals"))
        print(f"slim fit (engine-cpu medians, {args.repeats} runs, median): plain {plain:.1f} s, --intervals "
              f"{intervals:.1f} s: {intervals / plain:.2f}x (target <= {INTERVAL_RATIO_TARGET:.0f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
