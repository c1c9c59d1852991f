"""Check that the scheduler replay (`slimlib.model.schedule.replay`) of this checkout gives exactly the windows of
another revision's (not a test: a check to run when the replay's code changes).

Usage: python scripts/replay_identity.py [--ref main] [--cases 3000] [--seed 0]
Replays a spread of inputs (clients, batches 1..1024, slots below and at the batch, prompt and output lengths,
budgets, chunked prefill on and off, request counts) with both and compares every array bit for bit; prints the
cases, the time each took and the first mismatch, if any (exit status 1).
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

from slimlib.errors import DataError
from slimlib.model import schedule

ROOT = Path(__file__).resolve().parents[1]


def _module_at(ref: str) -> types.ModuleType:
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:slimlib/model/schedule.py"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    mod = types.ModuleType("schedule_at_ref")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(src, f"{ref}:slimlib/model/schedule.py", "exec"), mod.__dict__)
    return mod


def _cases(n: int, seed: int):
    rng = np.random.default_rng(seed)
    fixed = itertools.product(schedule.CLIENTS, (1, 2, 3, 7, 64), (1, 2, 250, 1024), (1, 2, 260), (2048, 8192),
                              (True, False))  # fmt: skip
    for client, b, il, ol, budget, chunked in fixed:
        yield client, b, il, ol, budget, b, chunked, 0
    for _ in range(n):
        client = str(rng.choice(schedule.CLIENTS, p=[0.15, 0.7, 0.15]))
        b = int(rng.integers(1, 1025))
        slots = b if rng.random() < 0.5 else int(rng.integers(1, b + 1))
        il = int(rng.choice([1, 3, 64, 250, 512, 1024, 2000, 4096, int(rng.integers(1, 5000))]))
        ol = int(rng.choice([1, 2, 16, 128, 256, 260, 1024, int(rng.integers(1, 2000))]))
        budget = int(rng.choice([512, 2048, 8192, 16384, int(rng.integers(1, 20000))]))
        chunked = bool(rng.random() < 0.75)
        prompts = 0 if client == "static" or rng.random() < 0.6 else int(rng.integers(1, 3 * b + 2))
        if client == "burst" and not prompts:
            prompts = int(rng.integers(1, 3 * b + 2))
        yield client, b, il, ol, budget, slots, chunked, prompts


def _run(replay, args):
    try:
        return replay(*args)
    except DataError as e:
        return f"DataError: {e}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="main")
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    old = _module_at(args.ref).replay.__wrapped__
    new = schedule.replay.__wrapped__
    t_old = t_new = 0.0
    count = 0
    for case in _cases(args.cases, args.seed):
        t0 = time.perf_counter()
        a = _run(old, case)
        t1 = time.perf_counter()
        b = _run(new, case)
        t_new += time.perf_counter() - t1
        t_old += t1 - t0
        count += 1
        same = isinstance(a, str) == isinstance(b, str) and (
            a == b
            if isinstance(a, str)
            else a.steps == b.steps
            and all(np.array_equal(getattr(a, k), getattr(b, k)) and getattr(a, k).dtype == getattr(b, k).dtype
                    and getattr(a, k).shape == getattr(b, k).shape for k in ("weight", "wait", "ttft", "e2e"))
        )  # fmt: skip
        if not same:
            print(f"MISMATCH at case {count}: replay{case}")
            return 1
    print(
        f"{count} cases identical to {args.ref}'s replay; replay time {t_old:.2f} s ({args.ref}) vs {t_new:.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
