"""A kit campaign as one Slurm job array: the planned points split into tasks that each fit a per-task budget.

`split_tasks` walks the planned points in priority order and starts a new task whenever the next point's estimate
(`slimlib.kit.counter_campaign.estimate_cost_s`) would take the current task over `task_budget_s`; a point estimated over
the per-task budget on its own is marked 'over-task-budget'. `write_kit_array` writes into the campaign folder:
``kit_plan.csv`` (every point, its status and task), ``kit_tasks.tsv`` (one row per array task), ``kit_slurm.json``
(device, GPU, dtype, budgets), ``slurm_array.sh``, ``slurm.env`` and ``logs/``. Task *t* runs
``python -m slimlib.kit.kit_slurm run-task DIR t``, which measures its points with `run_campaign` into
``DIR/<DIR name>-task-<t>/`` (a campaign folder of its own, manifest.json and raw CSVs), and is skipped when that
folder's manifest says 'complete', so resubmitting the array resumes. An incomplete task folder is set aside as
``*.incomplete`` before the task runs again. Build the tables with ``slim data build --kit DIR/*-task-*``.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

from slimlib.batchjobs import (
    ENV_NAME,
    LOG_DIR,
    TASK_PROLOGUE,
    SlurmOptions,
    env_template,
    merge_options,
    parse_status_line,
    read_env_file,
    sbatch_header,
    task_log,
    task_status,
)
from slimlib.errors import DataError
from slimlib.io import write_text
from slimlib.kit.counter_campaign import run_campaign
from slimlib.schema import plain

SCRIPT_NAME = "slurm_array.sh"
PLAN_NAME = "kit_plan.csv"
TASKS_NAME = "kit_tasks.tsv"
CONFIG_NAME = "kit_slurm.json"
DEFAULT_TASK_BUDGET_S = 3600.0
#: Wall-time margin of each task over its budget (model downloads are not needed; imports, CUDA start-up).
TIME_MARGIN_S = 600.0


def split_tasks(plan: pd.DataFrame, task_budget_s: float) -> pd.DataFrame:
    """`plan` with a ``task`` column: planned points grouped in priority order so each task's estimates sum to at
    most `task_budget_s` (points over it alone get status 'over-task-budget' and no task)."""
    if not task_budget_s > 0:
        raise DataError(f"per-task budget must be > 0 seconds, got {plain(task_budget_s)}")
    out = plan.sort_values("priority", kind="stable").copy()
    tasks: list[float] = []
    task, used = -1, math.inf
    for i, row in out.iterrows():
        if row["status"] != "planned":
            tasks.append(math.nan)
            continue
        est = float(row["est_s"])
        if est > task_budget_s:
            out.loc[i, "status"] = "over-task-budget"
            tasks.append(math.nan)
            continue
        if used + est > task_budget_s:
            task, used = task + 1, 0.0
        used += est
        tasks.append(task)
    out["task"] = pd.array(tasks, dtype="Float64").astype("Int64")
    return out


def task_folder(kit_dir: Path, task: int) -> str:
    return f"{Path(kit_dir).resolve().name}-task-{task:03d}"


def _time_limit(task_budget_s: float) -> str:
    minutes = math.ceil((task_budget_s + TIME_MARGIN_S) / 60.0)
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def kit_script_text(n_tasks: int, options: SlurmOptions) -> str:
    lines = [
        "#!/usr/bin/env bash",
        *sbatch_header(options, n_tasks, "slim-kit", 1),
        f"# SLIM GPU-kit campaign: {n_tasks} array tasks, each measuring its slice of {PLAN_NAME} within the",
        f"# per-task budget ({CONFIG_NAME}). Submit from this folder: sbatch {SCRIPT_NAME}; resubmitting runs only",
        "# the tasks whose folder is not complete. Site settings (modules, container) go in slurm.env.",
        f"TABLE={TASKS_NAME}",
        f"SCRIPT={SCRIPT_NAME}",
        TASK_PROLOGUE.rstrip("\n"),
        "IFS=$'\\t' read -r _ FOLDER NPTS EST <<< \"$ROW\"",
        "NAME=$FOLDER",
        'if [ -f "$FOLDER/manifest.json" ] && grep -q \'"status": "complete"\' "$FOLDER/manifest.json"; then',
        '  echo "task $TASK: $FOLDER is complete; skipped (move it away to measure again)"',
        "  STAGE=finished",
        "  exit 0",
        "fi",
        'echo "task $TASK: $NPTS point(s), estimated $EST s, on $(hostname) -> $FOLDER"',
        "STAGE=campaign",
        '${LAUNCH[@]+"${LAUNCH[@]}"} "${SLIM_PYTHON:-python3}" -m slimlib.kit.kit_slurm run-task . "$TASK"',
        "STAGE=finished",
        "write_status ok 0",
        'echo "task $TASK: done in $((SECONDS - STARTED)) s"',
    ]
    return "\n".join(lines) + "\n"


def write_kit_array(
    plan: pd.DataFrame,
    out_dir: str | Path,
    *,
    device: str,
    gpu: str,
    dtype: str | None = None,
    cuda_graphs: bool = True,
    task_budget_s: float = DEFAULT_TASK_BUDGET_S,
    options: SlurmOptions | None = None,
    env_file: str | Path | None = None,
    command: str = "",
) -> str:
    """Split `plan` (`slimlib.kit.counter_campaign.plan_campaign`) into array tasks and write the campaign folder's files
    (module docstring), atomically. Returns the summary to print (tasks, files, next commands)."""
    out = Path(out_dir)
    split = split_tasks(plan, task_budget_s)
    planned = split[split["task"].notna()]
    if planned.empty:
        raise DataError("no point fits the per-task budget; raise --task-budget-s or --budget-s")
    n = int(planned["task"].max()) + 1
    env = read_env_file(env_file) if env_file else {}
    opts = merge_options(options or SlurmOptions(), env, str(env_file))
    if opts.time is None:
        opts = replace(opts, time=_time_limit(task_budget_s))
    rows = []
    for t, grp in planned.groupby("task", sort=True):
        rows.append({"task": int(t), "folder": task_folder(out, int(t)), "n_points": len(grp),
                     "est_s": round(float(grp["est_s"].sum()), 1)})  # fmt: skip
    tasks = pd.DataFrame(rows)
    config = {"device": device, "gpu": gpu, "dtype": dtype, "cuda_graphs": bool(cuda_graphs),
              "task_budget_s": float(task_budget_s), "command": command}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    paths = [
        write_text(out / PLAN_NAME, split.to_csv(index=False, lineterminator="\n")),
        write_text(out / TASKS_NAME, tasks.to_csv(sep="\t", index=False, lineterminator="\n")),
        write_text(out / CONFIG_NAME, json.dumps(config, indent=2, sort_keys=True) + "\n"),
        write_text(out / SCRIPT_NAME, kit_script_text(n, opts), executable=True),
        write_text(
            out / ENV_NAME,
            Path(env_file).read_text(encoding="utf-8")
            if env_file
            else env_template("# SLIM_PYTHON=python3             # the Python that has slimlib and torch"),
        ),
    ]
    (out / LOG_DIR).mkdir(exist_ok=True)
    over = int((split["status"] == "over-task-budget").sum())
    lines = [
        f"{len(planned)} planned point(s) in {n} array task(s) of at most {task_budget_s:.0f} s estimated each"
        + (f"; {over} point(s) over the per-task budget alone left out" if over else ""),
        *(f"wrote {p}" for p in paths),
        f"next: (cd {out} && sbatch {SCRIPT_NAME})   (resubmit the same way to finish incomplete tasks)",
        f"then: python -m slimlib.kit.kit_slurm report {out}; slim data build --raw ../shared/data --kit {out}/*-task-*",
    ]
    return "\n".join(lines)


def run_task(kit_dir: str | Path, task: int, *, runner=None, log=print) -> dict:
    """Measure task `task`'s points of ``kit_plan.csv`` into its folder; returns the manifest. Skips (returns the
    existing manifest) when the folder is complete; sets an incomplete one aside as ``*.incomplete``."""
    kit = Path(kit_dir)
    try:
        config = json.loads((kit / CONFIG_NAME).read_text(encoding="utf-8"))
        plan = pd.read_csv(kit / PLAN_NAME)
        plan["target"] = plan["target"].fillna("")  # empty ncu target (timing points)
    except (OSError, ValueError) as exc:
        raise DataError(f"{kit}: not a kit array folder ({exc}); write it with --scheduler slurm") from None
    mine = plan[(plan["task"] == task) & (plan["status"] == "planned")]
    if mine.empty:
        raise DataError(f"{kit / PLAN_NAME}: task {task} has no planned point")
    folder = kit / task_folder(kit, task)
    manifest_path = folder / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("status") == "complete":
            log(f"{folder} is complete; skipped")
            return manifest
        aside = folder.with_name(folder.name + ".incomplete")
        shutil.rmtree(aside, ignore_errors=True)
        folder.rename(aside)
        log(f"set the incomplete {folder.name} aside as {aside.name}")
    if runner is None:
        runner = run_campaign
    return runner(mine.drop(columns=["task"]), folder, device=config["device"], gpu=config["gpu"],
                  dtype=config["dtype"], budget_s=config["task_budget_s"], cuda_graphs=config["cuda_graphs"],
                  command=f"{config['command']} [array task {task}]", log=log)  # fmt: skip


def report(kit_dir: str | Path) -> list[str]:
    """One line per array task: complete (points done), failed (status line, log) or missing (log)."""
    kit = Path(kit_dir)
    try:
        tasks = pd.read_csv(kit / TASKS_NAME, sep="\t")
    except (OSError, ValueError) as exc:
        raise DataError(f"{kit}: no readable {TASKS_NAME} ({exc})") from None
    lines = []
    for rec in tasks.to_dict("records"):
        t, folder = int(rec["task"]), kit / rec["folder"]
        mpath, spath = folder / "manifest.json", kit / task_status(t)
        status = parse_status_line(spath.read_text(encoding="utf-8"), str(spath)) if spath.is_file() else None
        log = kit / task_log(t)
        if mpath.is_file() and json.loads(mpath.read_text(encoding="utf-8")).get("status") == "complete":
            pts = json.loads(mpath.read_text(encoding="utf-8"))["points"]
            done = sum(p.get("status") == "done" for p in pts)
            lines.append(f"task {t}: complete, {done} of {len(pts)} point(s) done -> {folder}")
        elif status is not None and status["status"] == "failed":
            lines.append(f"task {t}: FAILED at {status.get('stage')} (exit {status.get('rc')}) "
                         f"{status.get('reason', '')}; log: {log}")  # fmt: skip
        else:
            lines.append(f"task {t}: MISSING (not run, running, or killed); log: {log}")
    return lines


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m slimlib.kit.kit_slurm", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run-task", help="measure one array task's points (what slurm_array.sh runs)")
    r.add_argument("kit_dir")
    r.add_argument("task", type=int)
    s = sub.add_parser("report", help="which array tasks are complete, failed or missing")
    s.add_argument("kit_dir")
    args = p.parse_args(argv)
    try:
        if args.cmd == "run-task":
            manifest = run_task(args.kit_dir, args.task, log=lambda m: print(m, flush=True))
            done = sum(pt.get("status") == "done" for pt in manifest.get("points", []))
            print(f"task {args.task}: {done} of {len(manifest.get('points', []))} point(s) done")
        else:
            print("\n".join(report(args.kit_dir)))
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
