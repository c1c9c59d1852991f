"""A calibration plan as one Slurm job array: ``slurm_array.sh`` plus ``slurm_tasks.tsv``, one configuration per task.

Each array task reads its row of ``slurm_tasks.tsv`` by ``SLURM_ARRAY_TASK_ID``, skips itself when its result
already exists (so resubmitting the array resumes a broken campaign), starts ``vllm serve`` on a free port, waits
for ``/health`` (``SLIM_SERVER_TIMEOUT_S``, default 1200 s; it fails early if the server exits), runs the client
into a private folder, moves the result into place, stops the server and writes ``status/task-<id>.status``. The
server and client command lines are `slimlib.advisor.plan.server_args`/`client_args` with the row's values as shell
variables, so both schedulers run the same commands. `slim data ingest PLAN_DIR` collects the campaign
(`slimlib.data.campaign_collect`).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pandas as pd

from slimlib.advisor.commands import (
    LEGACY_CLIENT,
    SERVE_OPTION_COLUMNS,
    client_args,
    serve_flags,
    server_args,
)
from slimlib.batchjobs import (
    ENV_NAME,
    LOG_DIR,
    STATUS_DIR,
    TASK_COLUMNS,
    TASK_PROLOGUE,
    TASKS_NAME,
    SlurmOptions,
    env_template,
    merge_options,
    read_env_file,
    sbatch_header,
    task_log,
)
from slimlib.errors import DataError

SCRIPT_NAME = "slurm_array.sh"
_VAR = re.compile("\x00([A-Z_]+)\x00")
#: Row fields as the shell variables the script reads them into (order of TASK_COLUMNS).
_SHELL_VARS = {
    "task": "_",
    "file": "FILE",
    "result": "RESULT",
    "model": "MODEL",
    "gpu": "GPU",
    "hf_id": "HF_ID",
    "batch_size": "B",
    "input_len": "IL",
    "output_len": "OL",
    "num_prompts": "NP",
    "tensor_parallel": "TP",
    "max_model_len": "MAX_LEN",
}


def _ph(name: str) -> str:
    return f"\x00{name}\x00"


def render_args(args: list[str]) -> str:
    """A shell command line from argv whose placeholders become quoted variable expansions (``"${B}"``)."""
    out = []
    for token in args:
        pieces = _VAR.split(token)  # literal, name, literal, name, ..., literal
        word = ""
        for i, piece in enumerate(pieces):
            if i % 2:
                word += f'"${{{piece}}}"'
            elif piece:
                word += shlex.quote(piece)
        out.append(word or "''")
    return " ".join(out)


def task_table(plan: pd.DataFrame, result_dir: str = "results") -> pd.DataFrame:
    """One row per array task (index = task id) with the result path (relative to the plan folder)."""
    rd = str(result_dir).rstrip("/") or "."
    max_len = int((plan["input_len"] + plan["output_len"]).max())
    tp = plan["tensor_parallel"] if "tensor_parallel" in plan.columns else pd.Series(1, index=plan.index)
    df = pd.DataFrame(
        {
            "task": range(len(plan)),
            "file": plan["file"].to_numpy(),
            "result": [f"{rd}/{f}" for f in plan["file"]],
            "model": plan["model"].to_numpy(),
            "gpu": plan["gpu"].to_numpy(),
            "hf_id": plan["hf_id"].to_numpy(),
            "batch_size": plan["batch_size"].to_numpy(),
            "input_len": plan["input_len"].to_numpy(),
            "output_len": plan["output_len"].to_numpy(),
            "num_prompts": plan["num_prompts"].to_numpy(),
            "tensor_parallel": tp.to_numpy(),
            "max_model_len": max_len,
        }
    )
    for col in TASK_COLUMNS:
        bad = [v for v in df[col].astype(str) if not v.strip() or any(c in v for c in "\t\n\r")]
        if bad:
            raise DataError(
                f"plan column {col!r} has the value {bad[0]!r}; values must be non-empty, without tabs"
            )
    if not df["file"].is_unique:
        raise DataError("plan result file names are not unique; every configuration needs its own file")
    return df


def script_text(plan: pd.DataFrame, options: SlurmOptions, legacy: bool = False) -> str:
    """The array script (see the module docstring)."""
    n = len(plan)
    tp = int(plan["tensor_parallel"].max()) if "tensor_parallel" in plan.columns else 1
    model, gpu = plan["model"].iloc[0], plan["gpu"].iloc[0]
    job = "slim-" + re.sub(r"[^A-Za-z0-9_.-]", "-", str(model))
    row = {c: _ph(_SHELL_VARS[c]) for c in TASK_COLUMNS}
    row.update({c: plan[c].iloc[0] for c in SERVE_OPTION_COLUMNS if c in plan.columns})  # one value per plan
    tp_arg = row["tensor_parallel"] if tp > 1 else 1  # one GPU: no --tensor-parallel-size flag
    server = render_args([_ph("LAUNCH_ARGS"), *server_args(row["hf_id"], row["batch_size"], row["max_model_len"],
                                                           _ph("PORT"), tp_arg, serve_flags(plan, legacy), legacy)])  # fmt: skip
    legacy_script = f"{_ph('SLIM_VLLM_DIR')}/{LEGACY_CLIENT}"
    client = render_args(
        [_ph("LAUNCH_ARGS"), *client_args(row, _ph("TMP_DIR"), _ph("PORT"), legacy, legacy_script)]
    )
    # "${LAUNCH_ARGS}" stands for the launch prefix array, which may be empty
    launch = '${LAUNCH[@]+"${LAUNCH[@]}"}'
    server = server.replace('"${LAUNCH_ARGS}"', launch)
    client = client.replace('"${LAUNCH_ARGS}"', launch)
    read_vars = " ".join(_SHELL_VARS[c] for c in TASK_COLUMNS)
    lines = [
        "#!/usr/bin/env bash",
        *sbatch_header(options, n, job, tp),
        f"# SLIM calibration plan: {model} on {gpu}, {n} configurations, one per array task ({SCRIPT_NAME}).",
        f"# Submit from this folder: sbatch {SCRIPT_NAME}. Resubmitting runs only the tasks without a result.",
        f"# Task <id> reads row <id> of {TASKS_NAME}, serves the model on a free port, runs the benchmark client,",
        f"# and leaves its result (the row's 'result' path), {STATUS_DIR}/task-<id>.status and "
        f"{LOG_DIR}/task-<id>.log.",
        f"# Site settings (modules, container, timeouts) go in {ENV_NAME}; then: slim data ingest . --out runs.csv",
        f"TABLE={TASKS_NAME}",
        f"SCRIPT={SCRIPT_NAME}",
        TASK_PROLOGUE.rstrip("\n"),
        f"IFS=$'\\t' read -r {read_vars} <<< \"$ROW\"",
        "NAME=$FILE",
        'if [ -s "$RESULT" ]; then',
        '  echo "task $TASK: $RESULT exists; skipped (delete it to measure again)"',
        "  STAGE=finished",
        "  exit 0",
        "fi",
        "SLIM_VLLM_DIR=${SLIM_VLLM_DIR:-.}",
        "SERVER_PID=",
        'TMP_DIR="$(dirname "$RESULT")/.task-$TASK"',
        "cleanup() {",
        '  if [ -n "$SERVER_PID" ]; then',
        '    kill "$SERVER_PID" 2>/dev/null || true',
        '    wait "$SERVER_PID" 2>/dev/null || true',
        "  fi",
        '  rm -rf "$TMP_DIR"',
        "}",
        "free_port() {",
        '  if [ -n "${SLIM_PORT:-}" ]; then echo "$SLIM_PORT"; return 0; fi',
        "  python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])' "
        "2>/dev/null && return 0",
        "  echo $((20000 + (TASK * 7919 + $$) % 20000))",
        "}",
        "probe() {",
        "  if command -v curl >/dev/null 2>&1; then",
        '    curl -sf -o /dev/null "http://127.0.0.1:$PORT/health"',
        "  else",
        "    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "
        '"http://127.0.0.1:$PORT/health" >/dev/null 2>&1',
        "  fi",
        "}",
        "wait_ready() {",
        "  local deadline=$((SECONDS + ${SLIM_SERVER_TIMEOUT_S:-1200}))",
        "  until probe; do",
        '    kill -0 "$SERVER_PID" 2>/dev/null || fail "the server exited before it was ready; see $SERVER_LOG"',
        '    [ "$SECONDS" -lt "$deadline" ] || fail "the server was not ready after ${SLIM_SERVER_TIMEOUT_S:-1200} s; '
        'see $SERVER_LOG"',
        '    sleep "${SLIM_POLL_S:-5}"',
        "  done",
        "}",
        "PORT=$(free_port)",
        'SERVER_LOG="logs/server-$TASK.log"',
        'echo "task $TASK: $MODEL on $GPU x $TP, B=$B IL=$IL OL=$OL, $NP prompts -> $FILE; $(hostname), port $PORT"',
        "STAGE=server",
        f'{server} > "$SERVER_LOG" 2>&1 &',
        "SERVER_PID=$!",
        "wait_ready",
        "STAGE=client",
        'rm -rf "$TMP_DIR"',
        'mkdir -p "$TMP_DIR"',
        client,
        '[ -s "$TMP_DIR/$FILE" ] || fail "the client wrote no $TMP_DIR/$FILE"',
        'mv -f "$TMP_DIR/$FILE" "$RESULT"',
        "STAGE=stop",
        "cleanup",
        "SERVER_PID=",
        "STAGE=finished",
        "write_status ok 0",
        'echo "task $TASK: done in $((SECONDS - STARTED)) s -> $RESULT"',
    ]
    return "\n".join(lines) + "\n"


RUN_TIME_KEYS = "\n".join(
    [
        "# SLIM_VLLM_DIR=$HOME/vllm          # a vLLM checkout, for --legacy-client (benchmarks/benchmark_serving.py)",
        "# SLIM_SERVER_TIMEOUT_S=1200       # how long a task waits for the server's /health",
    ]
)


def slurm_plan_files(
    plan: pd.DataFrame,
    *,
    result_dir: str = "results",
    legacy: bool = False,
    options: SlurmOptions | None = None,
    env_file: str | Path | None = None,
) -> dict[str, tuple[str, bool]]:
    """The array script, the task table, ``slurm.env`` and README.txt as {name: (text, executable)}, every option,
    the environment file and the task table checked first (nothing is written here). `result_dir` is relative to
    the plan folder (or absolute)."""
    if Path(result_dir).is_absolute() is False and ".." in Path(result_dir).parts:
        raise DataError(
            f"--result-dir {result_dir!r}: give a folder inside the plan folder or an absolute path"
        )
    if env_file and not Path(env_file).is_file():
        raise DataError(f"--env-file {env_file}: no such file; give the site's KEY=VALUE environment file")
    env = read_env_file(env_file) if env_file else {}
    opts = merge_options(options or SlurmOptions(), env, str(env_file))
    tasks = task_table(plan, result_dir)
    env_text = Path(env_file).read_text(encoding="utf-8") if env_file else env_template(RUN_TIME_KEYS)
    p = plan.iloc[0]
    readme = (
        f"Calibration plan for {p['model']} on {p['gpu']}: {len(plan)} configurations, one Slurm array task each "
        f"({int(plan['num_prompts'].sum())} prompts in all).\n"
        f"1. edit {ENV_NAME} (modules, container) if your site needs it, then from this folder:\n"
        f"   sbatch {SCRIPT_NAME}     (resubmit the same way to rerun only the tasks without a result)\n"
        f"2. slim data ingest . --out runs.csv     (reports missing and failed tasks with their logs)\n"
        "3. slim fit runs.csv --out params.json\n"
        "4. slim advise params.json --model M --input-len IL --output-len OL --slo-s S --epsilon E\n"
        f"{TASKS_NAME}: task id, result path and settings of every configuration; {task_log(0)} is task 0's log.\n"
    )
    return {
        SCRIPT_NAME: (script_text(plan, opts, legacy), True),
        TASKS_NAME: (tasks.to_csv(sep="\t", index=False, lineterminator="\n"), False),
        ENV_NAME: (env_text, False),
        "README.txt": (readme, False),
    }
