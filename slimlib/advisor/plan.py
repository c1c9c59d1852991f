"""Calibration plan: the few vLLM benchmark runs that calibrate SLIM for one model and GPU, as runnable commands.

The plan crosses the lengths of interest (IL x OL) with a handful of batch sizes spread over the pre-knee region
(`slimlib.advisor.capacity.CALIBRATION_ORDER`: 32, 8, 128, ...), capped at the batch the default KV cache can hold. Each
batch size is one server (``--max-num-seqs B``) and one client run per length pair of the random dataset with
``--ignore-eos --request-rate inf``; ``num_prompts = max(min_prompts, rounds x B)`` keeps every run at steady state
for about `rounds` batch turnovers instead of a fixed 2,000 prompts (at small B those dominate profiling time).

Every client command carries what `slim data ingest` needs: ``--max-concurrency B`` (the cap equals the batch
size), ``--percentile-metrics ttft,tpot,itl,e2el`` (so the result has ``mean_e2el_ms``, hence ``e2e_s``),
``--metadata max_num_seqs=B gpu=GPU`` and ``--result-filename`` from plan.csv (a ``*.json`` name ingest reads).

`write_plan` writes ``plan.csv``, ``README.txt`` and, with scheduler ``local``, ``run_plan.sh`` (server and client
commands; after each completed client run it appends the run's settings to ``RESULT_DIR/slim-runs.csv``, the
sidecar `slim data ingest` reads), or with ``slurm`` a job array (`slimlib.advisor.slurm_plan`).
"""

from __future__ import annotations

import csv
import io
import shlex
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.advisor.commands import (
    LEGACY_FREE,
    SERVE_OPTION_COLUMNS,
    client_args,
    client_command,
    serve_flags,
    server_args,
    server_command,
)
from slimlib.advisor.launch import CHECKPOINT_PLACEHOLDER, served_model
from slimlib.advisor.slurm_plan import slurm_plan_files
from slimlib.batchjobs import ENV_NAME, LOG_DIR, TASKS_NAME
from slimlib.errors import DataError
from slimlib.io import OWNER_MARKER, atomic_folder, owner_marker, write_text
from slimlib.model.memory import DEFAULT_BLOCK_SIZE, DEFAULT_GPU_MEMORY_UTILIZATION, DEFAULT_RESERVE_GIB
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.registry.vllm_flags import server_batched_tokens
from slimlib.schema import plain

__all__ = ["make_plan", "write_plan", "client_command", "server_command", "client_args", "server_args"]

#: Order in which batch sizes are profiled for calibration: spread over the curve first, the plateau last.
CALIBRATION_ORDER = (32, 8, 128, 2, 64, 16, 4, 256, 1, 512)
#: batch sizes a plan takes by default (more where its lengths give fewer runs than `make_plan`'s `min_runs`)
DEFAULT_N_BATCH = 3
SIDECAR_COLUMNS = ("file", "batch_size", "input_len", "output_len", "model", "gpu")
SCHEDULERS = ("local", "slurm")


def make_plan(
    model: str,
    gpu: str,
    input_lens=(512,),
    output_lens=(128, 512),
    *,
    n_batch: int | None = None,
    batch_sizes=None,
    rounds: int = 20,
    min_prompts: int = 200,
    block_size: int = DEFAULT_BLOCK_SIZE,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
    tensor_parallel: int = 1,
    min_runs: int = 6,
    dtype: str | None = None,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    max_num_batched_tokens: int | None = None,
) -> pd.DataFrame:
    """Configurations to profile: one row per (batch size, IL, OL) with ``num_prompts`` and the result file name.

    Batch sizes: `batch_sizes` if given, else the first `n_batch` of the calibration order that the default KV
    cache holds for the longest request (default: `DEFAULT_N_BATCH`, more where the lengths give too few runs for
    `min_runs`). Fewer than `min_runs` runs (default 6: one measured throughput per parameter of the paper's
    model) is a DataError; a campaign assembled from several plans (one per curve) lowers it per part.
    With `tensor_parallel` T > 1 the server spans T GPUs: each holds ``1/T`` of the weights and its share of the KV
    heads (`slimlib.model.serving.ServingConfig`, KV heads replicated when T exceeds them). `dtype`, `quantization`,
    `kv_cache_dtype` (vLLM's names) and a `gpu_memory_utilization` other than vLLM's default size the KV cache
    and, when given, become plan columns that the server commands pass on to vLLM (`serve_flags`). So does the token
    budget per step, `max_num_batched_tokens` (default vLLM's own for the GPU, `server_batched_tokens`): every
    result records the options in its metadata (`run_metadata`) for `slim data ingest`.
    """

    arch, hw = get_architecture(model), get_gpu(gpu)
    ils = sorted({int(v) for v in input_lens})
    ols = sorted({int(v) for v in output_lens})
    if not ils or not ols or min(ils) < 1 or min(ols) < 1:
        raise DataError("give at least one input length and one output length, each >= 1 token")
    if rounds < 1 or min_prompts < 1:
        raise DataError("rounds and min_prompts must be >= 1")
    tp = int(tensor_parallel)
    if tp < 1 or tp != tensor_parallel:
        raise DataError(f"tensor-parallel degree {plain(tensor_parallel)} must be a whole number >= 1")
    longest = max(ils) + max(ols)
    if arch.max_position and longest > arch.max_position:
        raise DataError(
            f"IL + OL = {longest} exceeds {arch.name}'s context of {arch.max_position} tokens; shorten the lengths"
        )
    mem = serving_config(
        arch,
        hw,
        tensor_parallel=tp,
        gpu_memory_utilization=gpu_memory_utilization,
        reserve_gib=reserve_gib,
        block_size=block_size,
        dtype=dtype,
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
    )  # one GPU of the group: its weights and its share of the KV heads (replicated beyond H_kv)
    per_req = float(mem.request_kv_bytes(longest))
    cap = int(np.floor(mem.kv_pool / per_req)) if mem.kv_pool > 0 else 0
    if cap < 1:
        raise DataError(
            f"one request of {longest} tokens does not fit in the KV cache: {mem.explain()}; use a larger GPU, "
            "more GPUs (--tensor-parallel) or shorter lengths"
        )
    if batch_sizes is None:
        n_lengths = len(ils) * len(ols)
        wanted = n_batch if n_batch is not None else max(DEFAULT_N_BATCH, -(-min_runs // n_lengths))
        bs = [b for b in CALIBRATION_ORDER if b <= cap][:wanted]
    else:
        bs = sorted({int(b) for b in batch_sizes})
        if min(bs) < 1:
            raise DataError("batch sizes must be >= 1")
        too_big = [b for b in bs if b > cap]
        if too_big:
            raise DataError(
                f"batch size(s) {too_big} exceed the {cap} requests of {longest} tokens the default KV cache of "
                f"{arch.name} on {hw.name} holds; drop them"
            )
    bs = sorted(bs)
    served = served_model(str(model), arch.hf_id)  # the repository or folder asked about, not only its base
    if served == CHECKPOINT_PLACEHOLDER:
        raise DataError(
            f"--model {model}: a plan serves the checkpoint, and a config named {Path(str(model)).name} is not one "
            "vLLM loads; give the checkpoint's folder (holding config.json) or its Hugging Face repository"
        )
    rows = []
    for b in bs:
        for il in ils:
            for ol in ols:
                rows.append(
                    {
                        "model": _model_column(str(model), arch.name),
                        "hf_id": served,
                        "gpu": hw.name,
                        "batch_size": b,
                        "input_len": il,
                        "output_len": ol,
                        "num_prompts": max(min_prompts, rounds * b),
                        "tensor_parallel": tp,
                        "file": f"{_safe(arch.name)}_b{b}_il{il}_ol{ol}.json",
                    }
                )
    plan = pd.DataFrame(rows)
    given: dict[str, str | float | None] = {
        "dtype": dtype,
        "quantization": quantization,
        "kv_cache_dtype": kv_cache_dtype,
    }
    if gpu_memory_utilization != DEFAULT_GPU_MEMORY_UTILIZATION:
        given["gpu_memory_utilization"] = gpu_memory_utilization
    budget = int(max_num_batched_tokens or server_batched_tokens(hw, tp))
    over = [b for b in bs if b > budget]
    if over:
        raise DataError(
            f"batch size(s) {over} exceed the token budget of {budget} per step (vLLM refuses --max-num-seqs above "
            "--max-num-batched-tokens): drop them or give a larger --max-num-batched-tokens"
        )
    given["max_num_batched_tokens"] = budget
    for column in SERVE_OPTION_COLUMNS:
        if given.get(column) is not None:
            plan[column] = given[column]
    if len(plan) < min_runs:
        held = (
            f"; the KV cache of {arch.name} on {hw.name} holds {cap} requests of {longest} tokens, so only "
            f"{len(bs)} batch sizes of the calibration order fit"
            if batch_sizes is None and n_batch is None
            else ""
        )
        raise DataError(
            f"the plan has {len(plan)} runs, fewer than the {min_runs} a calibration needs (--min-runs: one "
            f"measured throughput per parameter of the paper's model){held}: add batch sizes (--n-batch, "
            "--batch-sizes) or lengths"
        )
    return plan


def _model_column(model: str, name: str) -> str:
    """The plan's ``model`` value: the path as given for a local config (what `slim fit` reads back), else the
    registry's name."""
    try:
        local = Path(model).exists()
    except OSError:
        local = False
    return model if local else name


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in name)


#: Every file a plan folder may hold from `write_plan` (a new plan removes those of an earlier one it lacks).
PLAN_FILES = ("plan.csv", "README.txt", "run_plan.sh", "slurm_array.sh", TASKS_NAME, ENV_NAME, OWNER_MARKER)
#: what `slim plan` calls itself in its folder's ownership marker (`slimlib.io.OWNER_MARKER`)
PLAN_COMMAND = "slim plan"


def is_plan_folder(path: Path) -> bool:
    """Whether `path` holds a plan `write_plan` wrote before folders carried an ownership marker: its plan.csv and
    a README.txt that begins as `write_plan`'s do."""
    try:
        readme = (path / "README.txt").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return (path / "plan.csv").is_file() and readme.startswith("Calibration plan for ")


def write_plan(
    plan: pd.DataFrame,
    out_dir: str | Path,
    result_dir: str = "results",
    legacy: bool = False,
    port: int = 8000,
    *,
    scheduler: str = "local",
    slurm=None,
    env_file: str | Path | None = None,
) -> list[Path]:
    """Write ``plan.csv``, ``README.txt`` and the scheduler's files into `out_dir`; returns the paths written.

    ``local``: ``run_plan.sh`` (one server per batch size, run in sequence). ``slurm``: a job array, one
    configuration per task (`slimlib.advisor.slurm_plan.slurm_plan_files`; `slurm` is its `SlurmOptions`, `env_file`
    the site's environment file; `port` is not used, each task picks a free one). Everything is checked before
    anything is written; the files then appear together (`slimlib.io.atomic_folder`): over an earlier plan, the
    old files are replaced only once the new set is complete. The folder's ownership marker is one of them
    (`slimlib.io.OWNER_MARKER`): a later plan replaces only a folder that is new, empty or a plan's.
    """
    if scheduler not in SCHEDULERS:
        raise DataError(f"unknown scheduler {scheduler!r}; choose one of {', '.join(SCHEDULERS)}")
    if legacy:  # the legacy client's vLLM is given no token budget (`commands.LEGACY_FREE`)
        plan = plan.drop(columns=[c for c in LEGACY_FREE if c in plan.columns])
    files = {"plan.csv": (plan.to_csv(index=False, lineterminator="\n"), False)}
    if scheduler == "slurm":
        files.update(
            slurm_plan_files(plan, result_dir=result_dir, legacy=legacy, options=slurm, env_file=env_file)
        )
    else:
        files.update(_local_files(plan, result_dir, legacy, port))
    files[OWNER_MARKER] = (owner_marker(PLAN_COMMAND), False)
    with atomic_folder(out_dir, replaces=PLAN_FILES) as tmp:
        for name, (text, executable) in files.items():
            write_text(tmp / name, text, executable=executable)
        if scheduler == "slurm":
            (tmp / LOG_DIR).mkdir()  # sbatch writes the task logs there
    return [Path(out_dir) / name for name in files]


def _csv_line(values) -> str:
    """One CSV line of `values` (quoted where a value holds a comma or a quote), without its line end."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([str(v) for v in values])
    return buf.getvalue()


def _local_files(plan: pd.DataFrame, result_dir: str, legacy: bool, port: int) -> dict[str, tuple[str, bool]]:
    """``run_plan.sh`` and ``README.txt`` of a local plan as {name: (text, executable)}."""
    max_len = int((plan["input_len"] + plan["output_len"]).max())
    for name in map(str, plan["model"].unique()):
        if any(ch in name for ch in "\n\r\x00"):
            raise DataError(
                f"model {name[:80]!r}: a line break in the name cannot go into run_plan.sh; rename it"
            )
    rd = shlex.quote(result_dir)
    flags = serve_flags(plan, legacy)
    lines = [
        "#!/usr/bin/env bash",
        f"# SLIM calibration plan: {plan['model'].iloc[0]} on {plan['gpu'].iloc[0]}, {len(plan)} runs.",
        "# Run from a vLLM checkout (legacy client) or any shell with vLLM installed. After each completed run the",
        f"# settings are appended to {result_dir}/slim-runs.csv, the sidecar `slim data ingest` reads.",
        "set -euo pipefail",
        f"mkdir -p {rd}",
        f"SIDECAR={rd}/slim-runs.csv",
        f'[ -f "$SIDECAR" ] || echo {",".join(SIDECAR_COLUMNS)} > "$SIDECAR"',
        "wait_ready() { for _ in $(seq 600); do curl -sf localhost:" + str(port) + "/health >/dev/null && return 0;"
        " sleep 2; done; echo 'server did not start' >&2; return 1; }",
    ]  # fmt: skip
    tp_of = plan["tensor_parallel"] if "tensor_parallel" in plan.columns else pd.Series(1, index=plan.index)
    for b, runs in plan.groupby("batch_size", sort=True):
        hf = runs["hf_id"].iloc[0]
        tp = int(tp_of.loc[runs.index[0]])
        lines += [
            "",
            f"# --- max_num_seqs = {b}",
            f"{server_command(hf, int(b), max_len, port, tp, flags, legacy)} &",
            "SERVER=$!",
            "wait_ready",
        ]
        for _, r in runs.iterrows():
            side = _csv_line([r[c] for c in SIDECAR_COLUMNS])
            lines.append(
                f'{client_command(r, result_dir, port, legacy)} && echo {shlex.quote(side)} >> "$SIDECAR"'
            )
        lines += ['kill "$SERVER"', 'wait "$SERVER" || true']
    p = plan.iloc[0]
    lines += [
        "",
        "# then:",
        f"#   slim data ingest {rd} --out runs.csv",
        "#   slim fit runs.csv --out params.json",
        f"#   slim advise params.json --model {p['model']} --input-len IL --output-len OL --slo-s S --epsilon 0.3",
    ]
    gpu_s = "the sum of the benchmark durations"
    readme = (
        f"Calibration plan for {p['model']} on {p['gpu']}: {len(plan)} runs "
        f"({plan['batch_size'].nunique()} servers), {int(plan['num_prompts'].sum())} prompts in all; GPU time is "
        f"{gpu_s}.\n"
        "1. bash run_plan.sh   (starts one vLLM server per --max-num-seqs and runs the clients)\n"
        f"2. slim data ingest {shlex.quote(result_dir)} --out runs.csv\n"
        "3. slim fit runs.csv --out params.json\n"
        "4. slim advise params.json --model M --input-len IL --output-len OL --slo-s S --epsilon E\n"
        "plan.csv lists every configuration, its number of prompts and its result file name.\n"
    )
    return {"run_plan.sh": ("\n".join(lines) + "\n", True), "README.txt": (readme, False)}


def next_steps(paths: list[Path], scheduler: str, out_dir: str | Path, result_dir: str) -> str:
    """The line `slim plan` prints after writing: how to run the plan, ingest and fit."""
    fit = "slim fit runs.csv --out params.json; slim advise params.json ..."
    script = next(p for p in paths if p.name in ("slurm_array.sh", "run_plan.sh"))
    d = shlex.quote(str(out_dir))
    if scheduler == "slurm":
        return (
            f"next: (cd {d} && sbatch {shlex.quote(script.name)}); when it ends: slim data ingest {d} --out runs.csv; "
            f"{fit}"
        )
    return f"next: bash {shlex.quote(str(script))}; slim data ingest {shlex.quote(result_dir)} --out runs.csv; {fit}"
