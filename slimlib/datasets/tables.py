"""The committed tidy tables in `data/`: their schema (column dtypes and docs, one source for both), and loaders.

`load(name)` reads `data/<name>.csv` with the schema's dtypes; `load_fit_table(...)` returns the columns `slim fit`
reads. The data folder is the `data/` beside the `slimlib` package, or `$SLIM_DATA_DIR` when set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from slimlib.errors import DataError, UnknownNameError, close_matches_message

S, INT, F, B = "string", "Int64", "float64", "boolean"
_LAT = {
    f"{s}_{m}_ms": (F, f"{label} {what} over completed requests, ms")
    for m, what in (("ttft", "time to first token"), ("tpot", "time per output token excl. the first"),
                    ("itl", "inter-token latency"))
    for s, label in (("mean", "mean"), ("median", "median"), ("std", "standard deviation of"), ("p99", "99th pct."))
}  # fmt: skip

#: table name -> (description, {column: (dtype, doc)}); columns in file order.
SCHEMA: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "memgap-online": (
        "Online vLLM serving runs (benchmark_serving, 2000 prompts at rate inf unless noted), one row per run folder.",
        {
            "run_id": (S, "run folder, relative to the mirror root"),
            "family": (S, "background (ShareGPT), advisor (fixed lengths, chunked prefill) or replication"),
            "subfamily": (
                S,
                "advisor: output_length/_<OL>; replication: gpu_metrics, overall_metrics or time_wise",
            ),
            "model": (S, "model short name (opt-1.3b, opt-2.7b, llama-2-7b, llama-2-13b)"),
            "gpu": (S, "GPU registry name (one 64 GB H100/GH100)"),
            "batch_size": (INT, "batch-size cap = max_num_seqs (per replica); the column `slim fit` reads"),
            "max_num_seqs": (INT, "vLLM --max-num-seqs of each server"),
            "n_replicas": (INT, "vLLM servers sharing the GPU (--multiple-servers), 1 unless replication"),
            "mps": (B, "servers ran under CUDA MPS"),
            "chunked_prefill": (B, "server ran with --enable-chunked-prefill"),
            "profiler": (S, "none, or nsys (run under Nsight Systems)"),
            "dataset": (S, "sharegpt (variable lengths) or fixed (advisor's fixed-length prompts)"),
            "num_prompts": (INT, "requests sent (config --num-prompts)"),
            "completed": (INT, "requests completed"),
            "input_len": (
                F,
                "input tokens per request: fixed value (advisor) or mean over completed (sharegpt)",
            ),
            "output_len": (
                F,
                "output tokens per request: config value (advisor) or mean over completed (sharegpt)",
            ),
            "mean_input_len_tok": (F, "total input tokens / completed"),
            "mean_output_len_tok": (F, "total output tokens / completed (Llama counts one extra BOS token)"),
            "throughput_tok_s": (F, "total (input + output) token throughput, tokens/s"),
            "output_throughput_tok_s": (F, "output token throughput, tokens/s"),
            "request_throughput_req_s": (F, "completed requests per second"),
            "duration_s": (F, "benchmark duration (GPU-seconds of profiling effort), s"),
            **_LAT,
            "mean_running_batch": (
                F,
                "mean running requests over engine samples with >= 1 running (per replica)",
            ),
            "max_running_batch": (F, "max running requests in one engine sample"),
            "mean_waiting": (F, "mean waiting requests over the same samples (per replica)"),
            "mean_kv_usage_frac": (F, "mean GPU KV-cache usage over the same samples, fraction 0..1"),
            "max_kv_usage_frac": (F, "max GPU KV-cache usage, fraction 0..1"),
            "num_preemptions": (
                INT,
                "preemptions (last value of the cumulative counter, summed over servers)",
            ),
            "preempted": (B, "num_preemptions > 0 (empty when the run has no engine metrics)"),
            "gpu_blocks": (
                INT,
                "GPU KV-cache blocks (vllm:cache_config_info num_gpu_blocks, summed over servers)",
            ),
            "block_size": (INT, "tokens per KV-cache block"),
            "result_file": (S, "the result JSON used"),
            "job_id": (S, "slurm job that produced the result"),
        },
    ),
    "memgap-offline": (
        "Offline profiler runs (all prefills, then all decodes, batch of B equal requests), one row per run folder.",
        {
            "run_id": (S, "run folder, relative to the mirror root"),
            "family": (S, "analysis sub-folder, e.g. prefill_vs_decode/summary_table"),
            "model": (S, "model short name"),
            "gpu": (S, "GPU registry name"),
            "batch_size": (INT, "requests B processed together"),
            "input_len": (INT, "prompt tokens per request (IL)"),
            "output_len": (INT, "output tokens per request (OL)"),
            "prefill_s": (F, "logged prefill elapsed time, s"),
            "decode_s": (F, "logged decode elapsed time, s"),
            "e2e_s": (F, "prefill_s + decode_s, s"),
            "throughput_tok_s": (F, "B*(IL+OL)/e2e_s, tokens/s"),
            "n_prefill_steps": (INT, "engine steps that ran prefills"),
            "n_decode_steps": (INT, "engine decode steps (OL - 1 when no preemption)"),
            "init_s": (F, "logged engine initialization time, s"),
            "backend": (S, "attention backend: xformers when vLLM logged it, else flash (vLLM default)"),
            "profiler": (S, "none, nsys (Nsight Systems) or ncu (Nsight Compute, kernel replay)"),
            "enforce_eager": (B, "ran with --enforce-eager (no CUDA graphs)"),
            "vllm_version": (S, "vLLM version logged by the engine"),
            "gpu_blocks": (INT, "GPU KV-cache blocks logged by the engine"),
            "preempted": (B, "vLLM logged a preemption"),
            "timing_valid": (B, "times are usable measurements (false under Nsight Compute)"),
            "job_id": (S, "slurm job of the log used"),
        },
    ),
    "memgap-telemetry": (
        "GPU telemetry summaries (nvidia-smi query and dmon, about 1 Hz) per online run and server monitor.",
        {
            "run_id": (S, "run folder, relative to the mirror root"),
            "family": (S, "online family"),
            "model": (S, "model short name"),
            "batch_size": (INT, "max_num_seqs"),
            "n_replicas": (INT, "servers sharing the GPU"),
            "server": (INT, "index of the server whose monitor wrote the files"),
            "n_samples": (INT, "query samples"),
            "busy_samples": (INT, "query samples with GPU utilization > 0"),
            "mem_total_gb": (F, "GPU memory, GB (1e9 bytes)"),
            "mem_used_max_gb": (F, "max GPU memory used, GB"),
            "gpu_util_mean_pct": (F, "mean utilization.gpu over busy samples, %"),
            "mem_util_mean_pct": (F, "mean utilization.memory over busy samples, %"),
            "dmon_samples": (INT, "dmon samples"),
            "sm_mean_pct": (F, "mean SM activity over dmon samples with SM > 0, %"),
            "dram_mean_pct": (F, "mean memory-interface activity over the same samples, %"),
            "power_mean_w": (F, "mean board power over the same samples, W"),
            "power_max_w": (F, "max board power, W"),
            "sm_clock_mean_mhz": (F, "mean SM clock over the same samples, MHz"),
            "mem_clock_mean_mhz": (F, "mean memory clock over the same samples, MHz"),
        },
    ),
    "memgap-exclusions": (
        "Every run attempt or result not usable as a measurement, and why; in_table names the table that still "
        "carries the run with a flag (empty when the run is in no table).",
        {
            "run_id": (S, "run folder, relative to the mirror root"),
            "family": (S, "family of the run"),
            "model": (S, "model short name"),
            "batch_size": (INT, "max_num_seqs (online) or B (offline)"),
            "item": (S, "file of the attempt or result (empty for the folder)"),
            "job_id": (S, "slurm job of the attempt"),
            "reason": (
                S,
                "port_bind_failure, server_start_failure, timeout, cancelled, crash, preemption, "
                "profiler_inflated_timing, duplicate_rerun, incomplete, missing_result",
            ),  # fmt: skip
            "detail": (S, "what the logs say"),
            "in_table": (S, "table keeping the run with a flag (preempted / timing_valid), else empty"),
        },
    ),
    "raw-manifest": (
        "Every raw file the build read, with its size and sha256.",
        {
            "path": (S, "path relative to the raw data root"),
            "bytes": (INT, "file size, bytes"),
            "sha256": (S, "hex sha256 of the file"),
        },
    ),
}

_VIDUR_TEXT = {"gpu", "model", "source_commit", "operation", "phase", "attention_backend", "profile_method"}
_VIDUR_BOOL = {"use_gated_mlp", "is_prefill"}


def _vidur_schema() -> None:
    """Add the Vidur tables, whose columns the Vidur parser defines (times in ms, per layer)."""
    try:
        from slimlib.datasets import vidur
    except ImportError:  # pragma: no cover - the Vidur parser ships with the package
        return
    for name, cols, what in (
        ("vidur-mlp", vidur.MLP_COLUMNS, "Vidur dense per-layer operator times vs num_tokens."),
        ("vidur-attention", vidur.ATTENTION_COLUMNS, "Vidur attention operator times vs batch and KV size."),
        ("vidur-cpu-overheads", vidur.CPU_COLUMNS, "Vidur CPU-side per-iteration overheads vs batch size."),
    ):
        spec = {}
        for c in cols:
            if c in _VIDUR_TEXT:
                spec[c] = (S, f"{c} (see slimlib.datasets.vidur)")
            elif c in _VIDUR_BOOL:
                spec[c] = (B, f"{c} flag from the Vidur profile")
            elif c.startswith("time_ms_"):
                spec[c] = (F, f"{c.removeprefix('time_ms_')} of the measured times, ms")
            else:
                spec[c] = (INT, f"{c} from the Vidur profile")
        SCHEMA[name] = (what, spec)


_vidur_schema()


def data_dir() -> Path:
    """The folder of the committed tables: `$SLIM_DATA_DIR`, else `data/` beside the `slimlib` package."""
    env = os.environ.get("SLIM_DATA_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "data"


def table_names() -> list[str]:
    """Names `load` accepts."""
    return sorted(SCHEMA)


def _file_name(name: str) -> str:
    return "raw_manifest.csv" if name == "raw-manifest" else f"{name}.csv"


def coerce(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """`df` with exactly the schema's columns, in order, with its dtypes; DataError names a missing column."""
    spec = SCHEMA[name][1]
    missing = [c for c in spec if c not in df.columns]
    extra = [c for c in df.columns if c not in spec]
    if missing or extra:
        raise DataError(
            f"table {name}: columns differ from the schema (missing {missing}, unexpected {extra})"
        )
    out = pd.DataFrame(index=df.index)
    for col, (dtype, _doc) in spec.items():
        s = df[col]
        if dtype == B:
            s = s.map(lambda v: pd.NA if v is None or (isinstance(v, float) and v != v) else
                      {"True": True, "False": False}.get(v, v) if isinstance(v, str) else bool(v))  # fmt: skip
        out[col] = s.astype(dtype)
    return out


def load(name: str) -> pd.DataFrame:
    """The committed table `name` (see `table_names()`) with its schema dtypes.

    Raises UnknownNameError for an unknown name and DataError when the CSV is missing or differs from the schema."""
    if name not in SCHEMA:
        raise UnknownNameError(close_matches_message("dataset", name, table_names()))
    path = data_dir() / _file_name(name)
    if not path.is_file():
        raise DataError(
            f"{path}: no such file; run `slim data build --raw ../shared/data` to rebuild the tables"
        )
    df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    return coerce(name, df)


def load_fit_table(
    family: str = "background",
    *,
    source: str = "online",
    models: list[str] | None = None,
    exclude_preempted: bool = True,
    valid_timing_only: bool = True,
) -> pd.DataFrame:
    """Rows `slim fit` reads (model, gpu, batch_size, input_len, output_len, throughput_tok_s; e2e_s for offline).

    source "online": `family` is background, advisor or replication (single-replica, no MPS rows only);
    source "offline": `family` is an offline family path or "all". Preempted runs are dropped unless
    `exclude_preempted=False`; offline runs under Nsight Compute unless `valid_timing_only=False`."""
    cols = ["model", "gpu", "batch_size", "input_len", "output_len", "throughput_tok_s"]
    if source == "online":
        df = load("memgap-online")
        families = sorted(df["family"].unique())
        if family not in families:
            raise UnknownNameError(close_matches_message("online family", family, families))
        df = df[(df["family"] == family) & (df["n_replicas"] == 1) & ~df["mps"].fillna(False)]
        if exclude_preempted:
            df = df[~df["preempted"].fillna(False)]
    elif source == "offline":
        df = load("memgap-offline")
        families = sorted(df["family"].unique())
        if family != "all":
            if family not in families:
                raise UnknownNameError(close_matches_message("offline family", family, [*families, "all"]))
            df = df[df["family"] == family]
        if valid_timing_only:
            df = df[df["timing_valid"]]
        if exclude_preempted:
            df = df[~df["preempted"]]
        cols = [*cols, "e2e_s"]
    else:
        raise UnknownNameError(close_matches_message("source", source, ["online", "offline"]))
    if models is not None:
        df = df[df["model"].isin(models)]
    out = df[cols].reset_index(drop=True)
    for c in ("batch_size", "input_len", "output_len"):
        out[c] = out[c].astype("float64")
    return out


def load_csv_rows(path: Path) -> int:
    """Data rows of a written CSV (lines minus the header)."""
    with open(path, "rb") as fh:
        return max(sum(1 for _ in fh) - 1, 0)
