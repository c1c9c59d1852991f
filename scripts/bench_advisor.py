"""Time SLIM-BCA: Eq. 13 over 1,000 workloads x batch sizes 1..1024, and the deployment search over 4 TP degrees
x 3 precisions x 1,024 batch sizes x 100 workloads on a node of 8 GPUs; best of 5 repeats each. Then the recommended
model's search, whose TTFT and TPOT replay vLLM's scheduler: `slim advise --gpus 8` end to end (a process of its
own, llama-3-70b on 8 H100s under TTFT and TPOT limits) and notebook 07's frontier (`search` and `pareto_front` of
llama-2-13b on 8 64 GB H100s under an E2E limit, B = 1..1024); best of `--slim-repeats` each.

Usage: python scripts/bench_advisor.py [--workloads 1000] [--search-workloads 100] [--max-batch 1024] [--repeats 5]
       [--slim-repeats 3] [--only-slim]
Prints, for each, the problem size, best and median wall time and the share of feasible workloads. Uses the
paper's parameter form with fixed example values (no measurement is implied): Eq. 13 on a 64 GB H100, the search
on a B200 (the registry's GPU with bf16, fp8 and fp4 tensor cores) with TTFT and TPOT limits; the recommended
model's with the example values of `SLIM_PARAMS`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.advisor.capacity import advise_many
from slimlib.advisor.deploy import pareto_front, search
from slimlib.advisor.slo import Slo
from slimlib.model import PaperModel, SlimModel
from slimlib.model.schedule import replay

EXAMPLE_PARAMS = {"eta_c": 0.45, "t_fixed": 0.2, "eta_m": 0.6, "B0": 3.0, "alpha": 2e-5, "gamma": 5e-7}
#: the recommended model's example values (those of the synthetic tables the tests use)
SLIM_PARAMS = {"eta_c": 0.4, "t_fixed": 0.1, "eta_attn": 0.5, "eta_w": 0.7, "alpha": 3e-5, "t_step": 2e-3,
               "t_layer": 0.0, "t_act": 0.0}  # fmt: skip
ADVISE = ["--model", "llama-3-70b", "--input-len", "1024", "--output-len", "256", "--ttft-ms", "2000",
          "--tpot-ms", "40", "--gpus", "8"]  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--max-batch", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--search-workloads", type=int, default=100)
    ap.add_argument("--slim-repeats", type=int, default=3)
    ap.add_argument("--only-slim", action="store_true", help="time the recommended model's search only")
    args = ap.parse_args(argv)
    if args.only_slim:
        bench_slim(args.slim_repeats)
        return 0
    model = PaperModel.with_params(EXAMPLE_PARAMS, gpu="h100-sxm-64gb")
    n = args.workloads
    models = np.resize(["opt-1.3b", "opt-2.7b", "llama-2-7b", "llama-2-13b"], n)
    wl = pd.DataFrame(
        {
            "model": models,
            "input_len": np.resize(np.arange(64, 2049, 64), n).astype(float),
            "output_len": np.resize([64.0, 128.0, 256.0, 512.0, 1024.0], n),
            "slo_s": np.resize([5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0], n),
        }
    )
    batch = np.arange(1, args.max_batch + 1)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = advise_many(model, wl, epsilon=0.3, batch_sizes=batch)
        times.append(time.perf_counter() - t0)
    print(f"{n} workloads x {len(batch)} batch sizes: best {min(times):.3f} s, median {np.median(times):.3f} s "
          f"over {args.repeats} repeats; feasible {(out['b_cap'] > 0).mean() * 100:.1f}%")  # fmt: skip
    bench_search(args.search_workloads, batch, args.repeats)
    bench_slim(args.slim_repeats)
    return 0


def bench_search(n: int, batch: np.ndarray, repeats: int) -> None:
    """Time the deployment search (`slimlib.advisor.deploy.search`) of `n` workloads on 8 B200 GPUs."""
    model = PaperModel.with_params(EXAMPLE_PARAMS, gpu="b200-sxm-180gb")
    wl = pd.DataFrame(
        {
            "model": np.resize(["opt-1.3b", "opt-2.7b", "llama-2-7b", "llama-2-13b"], n),
            "input_len": np.resize(np.arange(64, 2049, 64), n).astype(float),
            "output_len": np.resize([64.0, 128.0, 256.0, 512.0, 1024.0], n),
        }
    )
    slo = Slo(ttft_s=2.0, tpot_s=0.05)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = search(model, wl, 8, slo, 0.3, batch_sizes=batch)
        times.append(time.perf_counter() - t0)
    r = res.ranked
    combos = r.groupby("workload").size()
    best = r.groupby("workload").head(1)
    print(f"deployment search: {n} workloads x {combos.max()} deployments (TP x precision) x {len(batch)} batch "
          f"sizes = {len(r) * len(batch):,} points: best {min(times):.3f} s, median {np.median(times):.3f} s over "
          f"{repeats} repeats; feasible {(best['b_cap'] > 0).mean() * 100:.1f}%")  # fmt: skip


def _timed(run, repeats: int) -> str:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return f"best {min(times):.2f} s, median {np.median(times):.2f} s over {repeats} repeats"


def bench_slim(repeats: int) -> None:
    """Time `slim advise --gpus 8` (`ADVISE`, its own process) and notebook 07's frontier with the recommended model."""
    with tempfile.TemporaryDirectory() as tmp:
        params = Path(tmp) / "params.json"
        SlimModel.with_params(SLIM_PARAMS, gpu="h100-sxm-80gb").to_json(params)
        cmd = [sys.executable, "-m", "slimlib.cli.main", "advise", str(params), *ADVISE]
        # run from the temporary folder: `-m` puts the working folder first on the path, and the slimlib timed is
        # the one the environment (PYTHONPATH) gives
        took = _timed(lambda: subprocess.run(cmd, check=True, capture_output=True, cwd=tmp), repeats)
        print(f"slim advise {' '.join(ADVISE)} (h100-sxm-80gb, end to end): {took}")
    model = SlimModel.with_params(SLIM_PARAMS, gpu="h100-sxm-64gb")
    wl = pd.DataFrame({"model": ["llama-2-13b"], "input_len": [250.0], "output_len": [130.0]})
    out = {}

    def frontier() -> None:
        replay.cache_clear()  # each repeat replays as a fresh process (a notebook's kernel) does
        with warnings.catch_warnings():  # the model's assumptions, said once per row set: not timed here
            warnings.simplefilter("ignore")
            out["front"] = pareto_front(search(model, wl, 8, Slo(e2e_s=7.14), 0.3))

    took = _timed(frontier, repeats)
    print(f"notebook 07's frontier (llama-2-13b, IL 250, OL 130, 8 x h100-sxm-64gb, E2E <= 7.14 s, B = 1..1024, "
          f"{len(out['front'])} points): {took}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
