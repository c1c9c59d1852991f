"""The committed tidy tables in `data/`: their schema (column dtypes and docs, one source for both), and loaders.

`load(name)` reads `data/<name>.csv` with the schema's dtypes; `load_fit_table(...)` returns the columns `slim fit`
reads. The data folder is the `data/` beside the `slimlib` package, or `$SLIM_DATA_DIR` when set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from slimlib.data import aiconfigurator as aic
from slimlib.data import aiconfigurator_layers as aic_layers
from slimlib.data import aiconfigurator_moe as aic_moe
from slimlib.data import aiter, vidur
from slimlib.data.engine_medians import MEDIAN_SCHEMA
from slimlib.data.engine_runs import CAMPAIGN_HOSTS, EXCLUSION_SCHEMA, RUN_SCHEMA, campaign_tables
from slimlib.errors import DataError, DataUnavailableError, UnknownNameError, close_matches_message
from slimlib.kit.ncu import HOPPER_METRICS, METRICS

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
            "max_num_batched_tokens": (
                INT,
                "token budget per step with chunked prefill: the config's --max-num-batched-tokens, else vLLM 0.5.2's "
                "default 512; empty without chunked prefill (V0 then steps whole prompts)",
            ),
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
            "mem_total_gib": (F, "GPU memory, GiB"),
            "mem_used_max_gib": (F, "max GPU memory used, GiB"),
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

SCHEMA["llmib-runs"] = (
    "LLM-Inference-Bench (Argonne; arXiv:2411.00136) static-batch runs, IL = OL, one row per configuration "
    "(first of repeated runs); see slimlib.data.llmib.",
    {
        "source_line": (INT, "line of the run in Plots/All_results.csv (header = line 1)"),
        "hardware": (S, "raw Hardware field, e.g. AMD MI250 GPU"),
        "n_hardware": (INT, "raw Num of Hardware field (MI250: cards; others: devices)"),
        "framework": (S, "serving framework (vLLM, Deepspeed, sambaflow)"),
        "hf_id": (S, "raw Model field (Hugging Face id)"),
        "model": (S, "architecture registry name (the Hugging Face id when not in the registry)"),
        "gpu": (
            S,
            "GPU registry name (mi250-gcd = one MI250 die, mi300x), or a slug when not in the registry",
        ),
        "gpu_in_registry": (B, "gpu is a GPU registry name"),
        "tensor_parallel": (INT, "devices the model is split over (MI250: 2 dies per card x n_hardware)"),
        "batch_size": (INT, "requests B in the static batch"),
        "input_len": (INT, "prompt tokens per request (IL = L)"),
        "output_len": (INT, "generated tokens per request (OL = L, ignore_eos)"),
        "e2e_s": (F, "raw Latency: seconds for the whole batch, s"),
        "throughput_tok_s": (F, "raw Throughput = B (IL + OL) / e2e_s, tokens/s"),
        "n_repeats": (
            INT,
            "runs of this configuration in the file (the others are duplicate_repeat exclusions)",
        ),
    },
)
SCHEMA["llmib-exclusions"] = (
    "LLM-Inference-Bench data rows not in llmib-runs, with the reason (see slimlib.data.llmib).",
    {
        "source_line": (INT, "line in Plots/All_results.csv (header = line 1)"),
        "hardware": (S, "raw Hardware field"),
        "n_hardware": (INT, "raw Num of Hardware field"),
        "framework": (S, "raw Framework field"),
        "hf_id": (S, "raw Model field"),
        "batch_size": (INT, "raw Batch Size"),
        "input_len": (INT, "raw Input Output Length (IL = OL)"),
        "reason": (
            S,
            "llama_cpp_per_sequence, duplicate_repeat, exceeds_context, throughput_mismatch, below_roofline, above_larger_batch",
        ),
        "detail": (S, "the numbers behind the reason"),
    },
)

_VIDUR_TEXT = {"gpu", "model", "source_commit", "operation", "phase", "attention_backend", "profile_method"}
_VIDUR_BOOL = {"use_gated_mlp", "is_prefill"}


def _vidur_schema() -> None:
    """Add the Vidur tables, whose columns the Vidur parser defines (times in ms, per layer)."""
    for name, cols, what in (
        ("vidur-mlp", vidur.MLP_COLUMNS, "Vidur dense per-layer operator times vs num_tokens."),
        ("vidur-attention", vidur.ATTENTION_COLUMNS, "Vidur attention operator times vs batch and KV size."),
        ("vidur-cpu-overheads", vidur.CPU_COLUMNS, "Vidur CPU-side per-iteration overheads vs batch size."),
    ):
        spec = {}
        for c in cols:
            if c in _VIDUR_TEXT:
                spec[c] = (S, f"{c} (see slimlib.data.vidur)")
            elif c in _VIDUR_BOOL:
                spec[c] = (B, f"{c} flag from the Vidur profile")
            elif c.startswith("time_ms_"):
                spec[c] = (F, f"{c.removeprefix('time_ms_')} of the measured times, ms")
            else:
                spec[c] = (INT, f"{c} from the Vidur profile")
        SCHEMA[name] = (what, spec)


_vidur_schema()

KIT_TABLES = ("kit-campaigns", "kit-runs", "kit-kernels", "kit-counters")
_KIT_HOW = (
    "measure with the GPU characterization kit on a GPU (`slim profile campaign --budget-s 600 --out kit-raw`, "
    "or scripts/device_campaign.sh), then rebuild the tables with it: "
    "`slim data build --raw ../shared/data --kit kit-raw`"
)
_KIT_KEYS = {
    "model": (S, "architecture measured (registry name; random weights)"),
    "gpu": (S, "GPU registry name the campaign was planned for; 'cpu' for CPU runs"),
    "batch_size": (INT, "requests B decoded together (static batch)"),
    "input_len": (INT, "prompt tokens per request (IL)"),
    "output_len": (INT, "decode steps per request (OL)"),
}
_CAMPAIGN = {"campaign": (S, "campaign folder name (see kit-campaigns)")}


def _kit_schema() -> None:
    """Add the GPU kit's tables (`slimlib.kit.tidy`): a minimal PyTorch engine's measurements, not vLLM."""
    SCHEMA["kit-campaigns"] = (
        "GPU characterization kit: one row per campaign folder (its manifest.json): where and how it was "
        "measured. The kit measures slimlib's minimal static-batch PyTorch engine with random weights, not vLLM.",
        {
            "campaign": (S, "campaign folder name"),
            "engine": (S, "what was measured (slimlib minimal PyTorch engine, not vLLM)"),
            "gpu": (S, "GPU registry name used for planning ('cpu' on the CPU)"),
            "device": (S, "cuda or cpu"),
            "gpu_name": (S, "device name reported by torch"),
            "compute_capability": (S, "CUDA compute capability (empty on the CPU)"),
            "driver_version": (S, "NVIDIA driver version (nvidia-smi; empty on the CPU)"),
            "cuda_version": (S, "CUDA version torch was built with"),
            "torch_version": (S, "PyTorch version"),
            "slimlib_version": (S, "slimlib version that ran the campaign"),
            "dtype": (S, "weights/activations/KV-cache dtype"),
            "cuda_graphs": (B, "CUDA graphs asked for (kit-runs says whether each point used them)"),
            "budget_s": (F, "time budget of the campaign, s"),
            "wall_s": (F, "wall time the campaign took, s"),
            "date_utc": (S, "start of the campaign, UTC"),
            "command": (S, "command line that ran the campaign"),
            "status": (S, "complete, or running when the campaign was killed"),
            "n_points": (INT, "points in the manifest"),
            "n_done": (INT, "points measured"),
            "n_failed": (INT, "points that failed (reason in manifest.json)"),
            "n_skipped": (INT, "points skipped (e.g. counters without ncu)"),
            "n_not_run": (INT, "points left out when the budget ran out"),
        },
    )
    SCHEMA["kit-runs"] = (
        "GPU kit timings: one row per measured (model, B, IL, OL) point of the minimal PyTorch engine "
        "(prefill of B x IL, then OL decode steps over a preallocated KV cache); not vLLM.",
        {
            **_KIT_KEYS,
            "throughput_tok_s": (F, "total-token throughput B (IL + OL) / e2e_s (Eq. 6), tokens/s"),
            "e2e_s": (F, "prefill_s + decode_s, s"),
            "prefill_s": (F, "prefill time (CUDA events on a GPU), s"),
            "decode_s": (F, "sum of the OL decode-step times, s"),
            **{
                f"step_{k}_ms": (F, f"{k} decode-step time, ms")
                for k in ("mean", "median", "p90", "min", "max")
            },
            "peak_allocated_gib": (F, "torch peak allocated memory, GiB (empty on the CPU)"),
            "kv_cache_gib": (F, "preallocated KV cache 2 L B (IL+OL) D_kv bytes (Eq. 4), GiB"),
            "weight_gib": (F, "weights, GiB"),
            "dtype": (S, "fp16, bf16 or fp32"),
            "device": (S, "cuda or cpu"),
            "device_name": (S, "device name reported by torch"),
            "cuda_graphs": (B, "decode steps replayed from CUDA graphs"),
            "groups": (S, "campaign groups the point serves, ';'-joined (e.g. input-length-transfer)"),
            "engine": (S, "what was measured (slimlib minimal PyTorch engine, not vLLM)"),
            **_CAMPAIGN,
        },
    )
    SCHEMA["kit-kernels"] = (
        "GPU kit decode-step time per kernel category (PyTorch profiler over eager decode steps; paper Fig. 5). "
        "On a CPU the 'kernels' are CPU operators.",
        {
            **_KIT_KEYS,
            "category": (S, "attention, gemm, norm_elementwise or other (slimlib.kit.kernel_classes)"),
            "time_per_step_ms": (F, "time of the category per profiled decode step, ms"),
            "share": (F, "share of the profiled decode time, fraction 0..1"),
            "profiled_steps": (INT, "decode steps profiled, spread over the decode"),
            **_CAMPAIGN,
        },
    )
    metric_docs = {
        "dram_read_bytes": (F, "DRAM bytes read, bytes"),
        "dram_bytes": (F, "DRAM bytes read + written, bytes"),
        "dram_read_throughput": (F, "DRAM read throughput, bytes/s"),
        "dram_throughput_pct": (F, "DRAM throughput, % of peak sustained (elapsed)"),
        **{k: (F, f"{k.upper()} thread instructions executed") for k in ("hadd", "hmul", "hfma", "fadd",
                                                                        "fmul", "ffma")},
        "tensor_ops_fp16": (F, "tensor-core operations, fp16 inputs"),
        "tensor_ops_bf16": (F, "tensor-core operations, bf16 inputs"),
        "l1_hit_pct": (F, "L1/TEX sector hit rate, %"),
        "l2_hit_pct": (F, "L2 sector hit rate, %"),
        "long_scoreboard_pct": (F, "warps stalled on long scoreboard per active warp, %"),
        "occupancy_pct": (F, "achieved occupancy (active warps of the SM maximum), %"),
        "tensor_active_pct": (F, "tensor pipe (HMMA) active cycles, % of peak sustained active"),
        "sm_issue_pct": (F, "instructions issued, % of peak sustained active"),
        "tensor_gmma_active_pct": (F, "Hopper warpgroup-MMA tensor pipe active cycles, % (CC 9.x only)"),
    }  # fmt: skip
    shorts = [k for k in [*METRICS, *HOPPER_METRICS] if k != "duration"]
    missing = [k for k in shorts if k not in metric_docs]
    if missing:  # pragma: no cover - keeps the schema in step with the ncu metric list
        raise RuntimeError(f"kit-counters schema lacks docs for {missing}")
    SCHEMA["kit-counters"] = (
        "GPU kit Nsight Compute counters: one row per profiled kernel launch in the last decode step "
        "(target attention: the attention kernels; ffn: the FFN GEMMs; step: every kernel). Paper Figs. 4, 6-8, "
        "Table I.",
        {
            **_KIT_KEYS,
            "target": (S, "attention, ffn or step (slimlib.kit.ncu.TARGETS)"),
            "launch": (INT, "ncu launch ID within the point"),
            "kernel_name": (S, "kernel name"),
            "block_size": (S, "CUDA block size"),
            "grid_size": (S, "CUDA grid size"),
            "device": (S, "CUDA device index"),
            "cc": (S, "compute capability"),
            **{k: metric_docs[k] for k in shorts},
            "flop": (F, "FLOPs: 2 (HFMA + FFMA) + HADD + HMUL + FADD + FMUL + tensor ops"),
            "duration_s": (F, "kernel duration, s"),
            "achieved_flop_s": (F, "flop / duration_s, FLOP/s"),
            "arithmetic_intensity": (F, "flop / dram_bytes, FLOP per DRAM byte"),
            **_CAMPAIGN,
        },
    )


_kit_schema()


def _aic_schema() -> None:
    """Add the kernel tables (NVIDIA AIConfigurator's aic-*, AMD aiter's aiter-*), whose columns the parsers
    define."""
    for mod in (aic, aic_moe, aic_layers, aiter):
        for name, cols in mod.COLUMN_DOCS.items():
            SCHEMA[name] = (mod.TABLE_DOCS[name], dict(cols))


_aic_schema()


for _campaign, _device in CAMPAIGN_HOSTS.items():
    _runs, _medians, _exclusions = campaign_tables(_campaign)
    SCHEMA[_runs] = (
        f"The project's CPU-engine campaign on {_device}: vllm bench serve on vLLM's CPU build, engine models with "
        "random weights, one row per result file, every repeat (slimlib.data.engine_runs).",
        RUN_SCHEMA,
    )
    SCHEMA[_medians] = (
        f"Its fit table ({_device}): one row per configuration, the median over its repeats that pass the physical "
        "checks, with min and max beside each metric (slimlib.data.engine_medians). Fits and scores read this table.",
        MEDIAN_SCHEMA,
    )
    SCHEMA[_exclusions] = (
        f"Its runs and planned configurations ({_device}) that are not in the medians, with the reason: skipped or "
        "failed configurations, runs failing a physical check, flagged copies.",
        EXCLUSION_SCHEMA,
    )


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
            s = s.map(lambda v: pd.NA if v is None or v is pd.NA or (isinstance(v, float) and v != v) else
                      {"True": True, "False": False}.get(v, v) if isinstance(v, str) else bool(v))  # fmt: skip
        out[col] = s.astype(dtype)
    return out


def _missing_message(name: str, path: Path) -> str:
    if name in KIT_TABLES:
        return (
            f"{path}: no GPU-kit table {name!r} here: no kit measurements have been collected yet; {_KIT_HOW}"
        )
    return f"{path}: no such file; run `slim data build --raw ../shared/data` to rebuild the tables"


def _table_path(name: str, folder: str | Path | None) -> Path:
    if name not in SCHEMA:
        raise UnknownNameError(close_matches_message("dataset", name, table_names()))
    return (Path(folder) if folder else data_dir()) / _file_name(name)


def available(name: str, folder: str | Path | None = None) -> bool:
    """True when table `name` exists in the data folder (`folder`, default `data_dir()`) with at least one row.

    False for the GPU-kit tables until a campaign has been measured and built in (`slim data build --kit`);
    UnknownNameError for a name that is no table."""
    path = _table_path(name, folder)
    return path.is_file() and load_csv_rows(path) > 0


def load(name: str, folder: str | Path | None = None) -> pd.DataFrame:
    """The committed table `name` (see `table_names()`) with its schema dtypes, from `folder` (default `data_dir()`).

    Raises UnknownNameError for an unknown name, DataUnavailableError (a DataError saying how to produce it) when
    the CSV is missing, and DataError when it differs from the schema."""
    path = _table_path(name, folder)
    if not path.is_file():
        raise DataUnavailableError(_missing_message(name, path))
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
    """Rows `slim fit` reads (model, gpu, batch_size, input_len, output_len, throughput_tok_s; e2e_s for offline
    and kit).

    source "online": `family` is background, advisor or replication (single-replica, no MPS rows only);
    source "offline": `family` is an offline family path or "all". Preempted runs are dropped unless
    `exclude_preempted=False`; offline runs under Nsight Compute unless `valid_timing_only=False`.
    source "kit": the GPU kit's `kit-runs` (minimal PyTorch engine, not vLLM); `family` is a campaign group
    (model-transfer, input-length-transfer, output-length-transfer, kernel-figures) or "all";
    DataUnavailableError until kit measurements are built into `data/`."""
    cols = ["model", "gpu", "batch_size", "input_len", "output_len", "throughput_tok_s"]
    if source == "kit":
        df = load("kit-runs")
        groups = sorted({g for v in df["groups"].dropna() for g in str(v).split(";") if g})
        if family != "all":
            if family not in groups:
                raise UnknownNameError(close_matches_message("kit campaign group", family, [*groups, "all"]))
            df = df[df["groups"].fillna("").map(lambda v: family in str(v).split(";"))]
        cols = [*cols, "e2e_s"]
    elif source == "online":
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
        raise UnknownNameError(close_matches_message("source", source, ["online", "offline", "kit"]))
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
