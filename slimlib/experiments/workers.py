"""Independent tasks in forked worker processes: the experiments' fits, compositions and resamples on every CPU.

`fork_map(task, n, jobs)` returns ``[task(0), ..., task(n - 1)]``, each value JSON-ready (numbers, strings, lists,
dicts), computed in `jobs` processes forked from this one, so they share its data without copying it through a
pipe; values come back as JSON text, never as pickled objects. One job, or one task, runs here. The order and the
values are those of the serial loop.
"""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

from slimlib.errors import DataError

#: the task of the map in progress, for the forked workers (they inherit it with the memory it reads)
_TASK: Callable[[int], Any] | None = None


def default_jobs() -> int:
    """Worker processes: ``SLIM_JOBS`` where set, else the CPUs this process may use."""
    env = os.environ.get("SLIM_JOBS", "")
    if env.strip():
        try:
            return max(int(env), 1)
        except ValueError:
            raise DataError(f"SLIM_JOBS = {env!r}: give a whole number of worker processes") from None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _run(i: int) -> str:
    assert _TASK is not None
    return json.dumps(_TASK(i))


def fork_map(task: Callable[[int], Any], n: int, jobs: int | None = None) -> list[Any]:
    """``[task(i) for i in range(n)]`` in `jobs` forked processes (default `default_jobs`; module docstring)."""
    jobs = default_jobs() if jobs is None else max(int(jobs), 1)
    if jobs == 1 or n < 2:
        return [json.loads(json.dumps(task(i))) for i in range(n)]
    global _TASK
    _TASK = task
    try:
        ctx = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, n), mp_context=ctx) as pool:
            return [json.loads(t) for t in pool.map(_run, range(n), chunksize=max(n // (32 * jobs), 1))]
    finally:
        _TASK = None
