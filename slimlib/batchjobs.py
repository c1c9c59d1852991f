"""Slurm job-array scaffolding shared by calibration plans (`slimlib.advisor.slurm_plan`) and kit campaigns
(`slimlib.kit.kit_slurm`): resource options, the environment file, the ``#SBATCH`` header, the per-task status line
(written by the task, read by `slim data ingest`) and atomic file writes.

Environment file (``--env-file``; ``KEY=VALUE`` lines, ``#`` comments, optional ``export``): the keys
``SLIM_PARTITION, SLIM_ACCOUNT, SLIM_QOS, SLIM_CONSTRAINT, SLIM_TIME, SLIM_MEM, SLIM_CPUS_PER_TASK,
SLIM_GPUS_PER_TASK`` become ``#SBATCH`` lines (command-line options win); the file is also copied beside the script
as ``slurm.env`` and sourced by every task, so run-time keys (``SLIM_SETUP``: commands run first, e.g. ``module
load``; ``SLIM_LAUNCH``: a prefix for every vLLM/Python command, e.g. a container ``apptainer exec --nv img.sif``;
``SLIM_SERVER_TIMEOUT_S``; ``HF_HOME`` ...) reach the job.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, fields, replace
from pathlib import Path

from slimlib.errors import DataError

#: The serving campaign's per-task table (written by `slimlib.advisor.slurm_plan`, read by `slimlib.data.campaign_collect`).
TASKS_NAME = "slurm_tasks.tsv"
#: Columns of the per-task table; the array script reads them in this order.
TASK_COLUMNS = (
    "task", "file", "result", "model", "gpu", "hf_id", "batch_size", "input_len", "output_len", "num_prompts",
    "tensor_parallel", "max_model_len",
)  # fmt: skip

ENV_NAME = "slurm.env"
LOG_DIR = "logs"
STATUS_DIR = "status"
#: Environment-file keys that become #SBATCH lines, with the SlurmOptions field each fills.
ENV_SBATCH_KEYS = {
    "SLIM_PARTITION": "partition",
    "SLIM_ACCOUNT": "account",
    "SLIM_QOS": "qos",
    "SLIM_CONSTRAINT": "constraint",
    "SLIM_TIME": "time",
    "SLIM_MEM": "mem",
    "SLIM_CPUS_PER_TASK": "cpus_per_task",
    "SLIM_GPUS_PER_TASK": "gpus_per_task",
}
_KEY = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
_TOKEN = re.compile(r"^[A-Za-z0-9_.:,+=@/-]+$")


@dataclass(frozen=True)
class SlurmOptions:
    """Resources of each array task. None: not written (Slurm's default), except `gpus_per_task` (None: what
    the job needs, e.g. the plan's tensor-parallel degree) and `time`/`cpus_per_task` (defaults below)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    time: str | None = None
    mem: str | None = None
    cpus_per_task: int | None = None
    gpus_per_task: int | None = None
    max_parallel: int = 8
    job_name: str | None = None


DEFAULT_TIME = "02:00:00"
DEFAULT_CPUS = 8


def read_env_file(path: str | Path) -> dict[str, str]:
    """``KEY=VALUE`` pairs of an environment file (values unquoted as the shell would); DataError naming the line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: cannot read the environment file ({exc})") from None
    out: dict[str, str] = {}
    for i, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _KEY.match(line)
        if not m:
            raise DataError(
                f"{p} line {i}: expected KEY=VALUE (shell syntax, e.g. SLIM_PARTITION=gpu), got {raw!r}"
            )
        try:
            parts = shlex.split(m.group(2), comments=True)
        except ValueError as exc:
            raise DataError(f"{p} line {i}: unbalanced quotes in the value of {m.group(1)} ({exc})") from None
        out[m.group(1)] = " ".join(parts)
    return out


def merge_options(opts: SlurmOptions, env: dict[str, str], where: str = "environment file") -> SlurmOptions:
    """`opts` with the unset fields filled from the environment file's SLIM_* keys, then validated."""
    fill: dict[str, str | int] = {}
    for key, field in ENV_SBATCH_KEYS.items():
        if key in env and getattr(opts, field) is None:
            value = env[key]
            if field in ("cpus_per_task", "gpus_per_task"):
                if not value.isdigit():
                    raise DataError(f"{where}: {key}={value!r}; expected a whole number")
                fill[field] = int(value)
            else:
                fill[field] = value
    merged = replace(opts, **fill)
    check_options(merged)
    return merged


def check_options(opts: SlurmOptions) -> None:
    """DataError for values sbatch would reject or that would break the #SBATCH line."""
    if opts.time is not None and not _TIME.match(opts.time):
        raise DataError(f"time limit {opts.time!r}: use Slurm's format, e.g. 90, 02:00:00 or 1-00:00:00")
    for f in ("cpus_per_task", "gpus_per_task", "max_parallel"):
        v = getattr(opts, f)
        if v is not None and (not isinstance(v, int) or v < 1):
            raise DataError(f"{f.replace('_', '-')} = {v!r}: expected a whole number >= 1")
    for f in ("partition", "account", "qos", "constraint", "mem", "job_name"):
        v = getattr(opts, f)
        if v is not None and not _TOKEN.match(str(v)):
            raise DataError(f"{f} {v!r}: no spaces or shell characters allowed in an #SBATCH value")


def sbatch_header(opts: SlurmOptions, n_tasks: int, job_name: str, gpus: int) -> list[str]:
    """The ``#SBATCH`` lines of an `n_tasks` array, one log per task (``logs/task-<id>.log``, appended on resubmit)."""
    if n_tasks < 1:
        raise DataError("nothing to submit: the array has no task")
    check_options(opts)
    k = min(opts.max_parallel, n_tasks)
    lines = [
        f"#SBATCH --job-name={opts.job_name or job_name}",
        f"#SBATCH --array=0-{n_tasks - 1}%{k}",
        f"#SBATCH --gres=gpu:{opts.gpus_per_task or gpus}",
        f"#SBATCH --cpus-per-task={opts.cpus_per_task or DEFAULT_CPUS}",
        f"#SBATCH --time={opts.time or DEFAULT_TIME}",
        f"#SBATCH --output={LOG_DIR}/task-%a.log",
        "#SBATCH --open-mode=append",
    ]
    for f in ("partition", "account", "qos", "constraint", "mem"):
        v = getattr(opts, f)
        if v is not None:
            lines.append(f"#SBATCH --{f}={v}")
    return lines


def task_log(task: int) -> str:
    return f"{LOG_DIR}/task-{task}.log"


def task_status(task: int) -> str:
    return f"{STATUS_DIR}/task-{task}.status"


#: Bash prologue of every array task: task id, folder, environment file, launch prefix, status line on exit.
#: The script sets TABLE and SCRIPT before it; NAME (what the task makes) and STAGE (where a failure happened;
#: 'finished' when nothing is left to do) after.
TASK_PROLOGUE = r"""set -euo pipefail
TASK=${SLURM_ARRAY_TASK_ID:?is not set: submit with sbatch (or set it to run one task by hand)}
cd "${SLIM_PLAN_DIR:-${SLURM_SUBMIT_DIR:-.}}"
if [ ! -f "$TABLE" ]; then
  echo "$TABLE not found in $PWD: submit from the folder holding this script (cd FOLDER && sbatch $SCRIPT)" >&2
  exit 2
fi
if [ -f slurm.env ]; then
  set -a
  # shellcheck source=/dev/null
  . ./slurm.env
  set +a
fi
read -r -a LAUNCH <<< "${SLIM_LAUNCH:-}"
STAGE=setup
REASON=
STARTED=$SECONDS
mkdir -p logs status
write_status() {  # write_status STATUS RC: one line of key=value fields, replaced atomically
  local tmp="status/.task-$TASK.status.$$"
  printf 'task=%s\tstatus=%s\tstage=%s\trc=%s\tname=%s\tlog=logs/task-%s.log\tnode=%s\tjob=%s\tseconds=%s\treason=%s\n' \
    "$TASK" "$1" "$STAGE" "$2" "${NAME:-}" "$TASK" "$(hostname)" "${SLURM_ARRAY_JOB_ID:-local}_$TASK" \
    "$((SECONDS - STARTED))" "${REASON//[$'\t\n']/ }" > "$tmp"
  mv -f "$tmp" "status/task-$TASK.status"
}
fail() {  # fail REASON: stop the task with a reason on its status line
  REASON=$1
  echo "task $TASK: $1" >&2
  exit 1
}
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() { :; }  # redefined by the task body (e.g. to stop its server)
finish() {
  local rc=$?
  cleanup
  if [ "$STAGE" != finished ]; then
    [ -n "$REASON" ] || REASON="a command failed"
    write_status failed "$rc"
  fi
}
trap finish EXIT
trap 'REASON="stopped by signal (time limit or scancel)"; exit 143' TERM INT
if [ -n "${SLIM_SETUP:-}" ]; then
  eval "$SLIM_SETUP"
fi
ROW=$(awk -F '\t' -v t="$TASK" 'NR > 1 && $1 == t { print; exit }' "$TABLE")
[ -n "$ROW" ] || fail "no row for task $TASK in $TABLE"
"""


def parse_status_line(text: str, where: str) -> dict[str, str]:
    """The fields of a status line written by `TASK_PROLOGUE`'s write_status; DataError when it is not one."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    out = {}
    for part in line.split("\t"):
        key, sep, value = part.partition("=")
        if not sep:
            raise DataError(f"{where}: not a task status line (expected key=value fields separated by tabs)")
        out[key] = value
    if "task" not in out or out.get("status") not in ("ok", "failed"):
        raise DataError(f"{where}: not a task status line (needs task= and status=ok|failed)")
    return out


def env_template(run_time_keys: str) -> str:
    """The commented ``slurm.env`` written when no --env-file is given (every line a comment: nothing is set)."""
    lines = [
        "# Site settings of this Slurm campaign, sourced by every array task (KEY=VALUE, shell syntax).",
        "# #SBATCH resources are fixed when the script is written: give them to `slim plan`/`slim profile campaign`",
        "# (--partition, --account, --time ... or --env-file with SLIM_PARTITION=...), or at submission",
        "# (`sbatch --partition=gpu --account=proj slurm_array.sh`; command-line options override #SBATCH lines).",
        "# Uncomment and edit what your cluster needs:",
        "# SLIM_SETUP='module load cuda/12.4; source $HOME/venvs/vllm/bin/activate'",
        "# SLIM_LAUNCH='apptainer exec --nv $HOME/images/vllm.sif'",
        "# HF_HOME=$HOME/hf-cache",
        run_time_keys,
    ]
    return "\n".join(lines) + "\n"


def option_fields() -> list[str]:
    return [f.name for f in fields(SlurmOptions)]


def add_scheduler_arguments(parser, what: str = "configuration") -> None:
    """Add ``--scheduler local|slurm``, ``--env-file`` and the Slurm resource options to an argparse parser."""
    g = parser.add_argument_group(
        "scheduler (--scheduler slurm writes one job array, one task per " + what + ")"
    )
    g.add_argument(
        "--scheduler",
        choices=["local", "slurm"],
        default="local",
        help="local: run here (default); slurm: write a job-array script to submit with sbatch",
    )
    g.add_argument(
        "--env-file",
        metavar="FILE",
        help="site settings: SLIM_PARTITION=..., SLIM_ACCOUNT=..., "
        "SLIM_SETUP='module load ...', SLIM_LAUNCH='apptainer exec --nv img.sif' (copied to slurm.env)",
    )
    g.add_argument("--partition", help="#SBATCH --partition (default: the cluster's)")
    g.add_argument("--account", help="#SBATCH --account")
    g.add_argument("--qos", help="#SBATCH --qos")
    g.add_argument("--constraint", help="#SBATCH --constraint (e.g. a GPU type feature)")
    g.add_argument(
        "--time",
        help=f"time limit per task, Slurm format (default {DEFAULT_TIME}; kit: its per-task budget + 10 min)",
    )
    g.add_argument("--mem", help="#SBATCH --mem per node (default: the cluster's)")
    g.add_argument("--cpus-per-task", type=int, help=f"#SBATCH --cpus-per-task (default {DEFAULT_CPUS})")
    g.add_argument("--gpus-per-task", type=int, help="GPUs per task (default: what the task needs)")
    g.add_argument("--max-parallel", type=int, help="tasks running at once, the array's %%K (default 8)")
    g.add_argument("--job-name", help="#SBATCH --job-name (default slim-<model> or slim-kit)")  # fmt: skip


def check_scheduler_options(args) -> None:
    """Refuse the Slurm-only options (`add_scheduler_arguments`) without ``--scheduler slurm``: they would be ignored."""
    if getattr(args, "scheduler", "local") == "slurm":
        return
    given = ["--env-file"] if getattr(args, "env_file", None) else []
    given += ["--" + f.replace("_", "-") for f in option_fields() if getattr(args, f, None) is not None]
    if given:
        raise DataError(
            f"{', '.join(given)}: Slurm options, used with --scheduler slurm only; add --scheduler slurm or drop them"
        )


def options_from_args(args) -> SlurmOptions:
    """SlurmOptions from the arguments `add_scheduler_arguments` added (missing ones stay unset)."""
    return SlurmOptions(
        **{f: getattr(args, f, None) for f in option_fields() if getattr(args, f, None) is not None}
    )
