"""The vLLM server and benchmark-client command lines of a calibration run, shared by the local and Slurm plans."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import pandas as pd

from slimlib.registry.precision import VLLM_QUANTIZATION
from slimlib.registry.vllm_flags import NO_PREFIX_CACHING

__all__ = [
    "LEGACY_CLIENT",
    "SERVE_OPTION_COLUMNS",
    "client_args",
    "client_command",
    "run_metadata",
    "serve_flags",
    "server_args",
    "server_command",
]

#: Plan columns of the serving options (present only when set), as `vllm serve` flags; a vLLM before the V1 engine
#: (the legacy client) is given none of ``LEGACY_FREE`` (without chunked prefill its token budget must hold a prompt)
SERVE_OPTION_COLUMNS = {
    "dtype": "--dtype",
    "quantization": "--quantization",
    "kv_cache_dtype": "--kv-cache-dtype",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_num_batched_tokens": "--max-num-batched-tokens",
}
LEGACY_FREE = ("max_num_batched_tokens",)


def _options(row, legacy: bool) -> dict[str, str]:
    """The serving options a plan row (or a plan's first row) sets, as text, vLLM's own quantization name aside."""
    return {
        c: str(row[c])
        for c in SERVE_OPTION_COLUMNS
        if c in row and not pd.isna(row[c]) and not (legacy and c in LEGACY_FREE)
    }


def serve_flags(plan: pd.DataFrame, legacy: bool = False) -> list[str]:
    """The `vllm serve` flags of the plan's serving options (one value per plan; empty when none was given; the
    quantization by vLLM's name, `VLLM_QUANTIZATION`)."""
    flags = []
    for column, value in _options(plan.iloc[0], legacy).items():
        flags += [
            SERVE_OPTION_COLUMNS[column],
            VLLM_QUANTIZATION.get(value, value) if column == "quantization" else value,
        ]
    return flags


def run_metadata(row, legacy: bool = False) -> list[str]:
    """``key=value`` words the benchmark client records in its result (``--metadata``) so that `slim data ingest`
    knows how the server ran: the batch cap, the GPU, the row's serving options and whether prefill was chunked
    (vLLM's V1 engine, given a token budget: true; the legacy client's older vLLM: false)."""
    words = [f"max_num_seqs={row['batch_size']}", f"gpu={row['gpu']}"]
    options = _options(row, legacy)
    words += [f"{k}={v}" for k, v in options.items()]
    if legacy:  # a vLLM before V1 steps whole prompts unless told otherwise
        words.append("chunked_prefill=false")
    elif "max_num_batched_tokens" in options:
        words.append("chunked_prefill=true")
    return words


#: Client percentile metrics; e2el gives mean_e2el_ms, from which ingest takes e2e_s.
PERCENTILE_METRICS = "ttft,tpot,itl,e2el"
METRIC_PERCENTILES = "50,90,99"
LEGACY_CLIENT = "benchmarks/benchmark_serving.py"


def server_args(
    hf_id: str, batch_size, max_model_len, port=8000, tensor_parallel=1, flags: Sequence[str] = (),
    legacy: bool = False,
) -> list[str]:  # fmt: skip
    """`vllm serve` argv with the batch-size cap under test (values may be shell placeholders, see slurm), prefix
    caching off (`NO_PREFIX_CACHING`; `legacy`: a vLLM before the flag, where caching is off by default), then
    `flags` (the plan's precision and memory options)."""
    args = [
        "vllm",
        "serve",
        str(hf_id),
        "--max-num-seqs",
        str(batch_size),
        "--max-model-len",
        str(max_model_len),
    ]
    if str(tensor_parallel) != "1":
        args += ["--tensor-parallel-size", str(tensor_parallel)]
    if not legacy:
        args.append(NO_PREFIX_CACHING)
    # no --disable-log-requests: removed from recent vLLM (request logging is off by default there)
    return [*args, *flags, "--port", str(port)]


def server_command(
    hf_id: str,
    batch_size: int,
    max_model_len: int,
    port: int = 8000,
    tensor_parallel: int = 1,
    flags: Sequence[str] = (),
    legacy: bool = False,
) -> str:
    """`vllm serve` with the batch-size cap under test (`server_args`)."""
    return shlex.join(server_args(hf_id, batch_size, max_model_len, port, tensor_parallel, flags, legacy))


def client_args(
    row, result_dir: str, port=8000, legacy: bool = False, legacy_script: str = LEGACY_CLIENT
) -> list[str]:
    """The serving benchmark of one configuration as argv: random fixed-length prompts, all sent at once, at most
    B in flight (``--max-concurrency``), with the e2el percentiles, saved as ``RESULT_DIR/<file>``."""
    head = ["python", legacy_script, "--backend", "vllm"] if legacy else ["vllm", "bench", "serve"]
    b = row["batch_size"]
    return [
        *head, "--model", str(row["hf_id"]), "--port", str(port), "--dataset-name", "random",
        "--random-input-len", str(row["input_len"]), "--random-output-len", str(row["output_len"]),
        "--ignore-eos", "--request-rate", "inf", "--max-concurrency", str(b), "--num-prompts", str(row["num_prompts"]),
        "--percentile-metrics", PERCENTILE_METRICS, "--metric-percentiles", METRIC_PERCENTILES,
        "--save-result", "--result-dir", str(result_dir), "--result-filename", str(row["file"]),
        "--metadata", *run_metadata(row, legacy),
    ]  # fmt: skip


def client_command(row, result_dir: str, port: int = 8000, legacy: bool = False) -> str:
    """The serving benchmark of one configuration (random fixed-length prompts, all sent at once)."""
    return shlex.join(client_args(row, result_dir, port, legacy))
