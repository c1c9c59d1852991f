"""Collect results for `slim fit` from campaign folders (`slim plan --scheduler slurm`) and plain result folders.

A campaign folder holds ``slurm_tasks.tsv`` (one configuration per array task: its result path and settings),
``status/task-<id>.status`` (the line each task writes when it ends) and ``logs/task-<id>.log``. Every task's
result is ingested with the settings of its row; a task without a result is reported as *failed* (its status line
says so: stage, exit code, reason) or *missing* (never ran, or still running), with its log path. Any other
folder is read as `slimlib.data.ingest.ingest` reads it. Rows of the same configuration (model, gpu, batch_size,
input_len, output_len) from several files are merged when their measurements agree and refused when they do not.
Repeats of one configuration (distinct ``repeat`` values from the sidecar, as `slim bench campaign` writes them)
become one row, the median over them of every measured column, with the files listed in the report. Runs that
fail a physical check (`slimlib.data.physical_checks`) are left out first, each reported with its check and
reason, with the count per check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from slimlib.batchjobs import TASK_COLUMNS, TASKS_NAME, parse_status_line, task_log, task_status
from slimlib.data.ingest import COLUMNS, OPTIONAL_FIELDS, RUN_OPTION_FIELDS, checked, ingest, ingest_files
from slimlib.data.physical_checks import EXCLUSION_COLUMNS, count_lines
from slimlib.errors import DataError
from slimlib.model.validity import CANONICAL

KEYS = ("model", "gpu", "batch_size", "input_len", "output_len")
#: Measured columns two rows of one configuration must share to count as the same run.
MEASURED = ("throughput_tok_s", "e2e_s", "duration_s", "completed", "mean_ttft_ms", "mean_tpot_ms")
#: Columns a configuration's repeats are reduced to the median of.
REPEAT_MEDIAN = ("throughput_tok_s", "e2e_s", "request_throughput_req_s", "output_throughput_tok_s", "mean_ttft_ms",
                 "mean_tpot_ms", "mean_itl_ms", "mean_e2el_ms", "duration_s")  # fmt: skip
_SAME = 1e-9


@dataclass
class Collected:
    """The merged table, one line per problem or note, and whether every planned configuration has a result."""

    table: pd.DataFrame
    report: list[str] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    #: runs left out by the physical checks: source_file, check, reason (one row per failing check)
    excluded: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(EXCLUSION_COLUMNS)))

    @property
    def complete(self) -> bool:
        return not self.missing and not self.failed

    def report_text(self) -> str:
        return "\n".join(self.report) + "\n"


def is_campaign(folder: str | Path) -> bool:
    return (Path(folder) / TASKS_NAME).is_file()


def read_tasks(folder: str | Path) -> pd.DataFrame:
    """The campaign's task table; DataError naming the file and what is wrong."""
    path = Path(folder) / TASKS_NAME
    try:
        df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(
            f"{path}: not a readable task table ({exc}); rewrite it with `slim plan --scheduler slurm`"
        ) from None
    missing = [c for c in TASK_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}; rewrite it with `slim plan`")
    for i, rec in enumerate(df.to_dict("records")):
        if not str(rec["task"]).isdigit():
            raise DataError(f"{path} line {i + 2}: field 'task' is {rec['task']!r}, expected the array index")
    if df["task"].duplicated().any():
        raise DataError(f"{path}: task {df.loc[df['task'].duplicated(), 'task'].iloc[0]} is listed twice")
    return df


def collect(
    folders,
    *,
    model: str | None = None,
    gpu: str | None = None,
    batch_size: int | None = None,
    input_len: float | None = None,
    output_len: float | None = None,
    sidecar: str | Path | None = None,
) -> Collected:
    """Merge the results of every folder (campaign or plain) into one fit table, with a report (module docstring).

    `sidecar` is allowed with one plain folder only; the other values fill settings the files do not give.
    Raises DataError when two rows of one configuration disagree.
    """
    folders = [Path(f) for f in folders]
    if not folders:
        raise DataError("give at least one folder")
    for f in folders:
        try:
            f.resolve(strict=f.is_symlink())
        except (RuntimeError, OSError):
            raise DataError(
                f"{f}: a link that leads to itself or nowhere; give the folder of the results"
            ) from None
    if len({f.resolve() for f in folders}) != len(folders):
        raise DataError("a folder is given twice")
    if sidecar is not None and (len(folders) != 1 or is_campaign(folders[0])):
        raise DataError("--sidecar applies to one plain result folder; a campaign folder has its task table")
    defaults = {"model": model, "gpu": gpu, "batch_size": batch_size, "input_len": input_len,
                "output_len": output_len}  # fmt: skip
    out = Collected(table=pd.DataFrame())
    parts = []
    for folder in folders:
        if is_campaign(folder):
            part = _collect_campaign(folder, defaults, out)
        else:
            part = ingest(folder, sidecar=sidecar, **defaults)
            out.report.append(
                f"{'file' if folder.is_file() else 'folder'} {folder}: {len(part)} result file(s)"
            )
        if len(folders) > 1:
            base = folder if folder.is_dir() else folder.parent  # a single result file
            part = part.assign(source_file=[str(base / s) for s in part["source_file"]])
        parts.append(part)
    nonempty = [p for p in parts if len(p)]
    table = pd.concat(nonempty, ignore_index=True) if nonempty else pd.DataFrame(columns=list(COLUMNS))
    if "e2e_s" in table.columns and table["e2e_s"].isna().any():
        table = table.drop(columns=["e2e_s"])  # the fit table takes e2e_s for every row or none
    n_read = len(table)
    table, got = checked(table) if n_read else (table, None)
    if got is not None:
        out.excluded = got.exclusions
        untimed = got.untimed()  # kept without their per-token latencies: a timing check and no other failed
        out.report.extend(
            f"  {'UNTIMED' if r.source_file in untimed else 'EXCLUDED'} {r.source_file}: {r.check}: {r.reason}"
            for r in got.exclusions.itertuples()
        )
        out.report.extend(count_lines(got, n_read))
    table = _merge_duplicates(table, out)
    cols = [c for c in (*COLUMNS, *OPTIONAL_FIELDS, *RUN_OPTION_FIELDS) if c in table.columns]
    out.table = table.loc[:, cols].reset_index(drop=True)
    n_fail, n_miss = len(out.failed), len(out.missing)
    out.report.append(
        f"total: {len(out.table)} run(s) for `slim fit` from {len(folders)} folder(s); "
        f"{n_miss} missing, {n_fail} failed, {len(got.failing()) if got else 0} excluded by the physical checks"
    )
    return out


def _collect_campaign(folder: Path, defaults: dict, out: Collected) -> pd.DataFrame:
    tasks = read_tasks(folder)
    files, settings, lines, n_failed, n_missing = [], {}, [], 0, 0
    for rec in tasks.to_dict("records"):
        t = int(rec["task"])
        result = folder / rec["result"]
        label = (
            f"task {t} ({rec['model']} B={rec['batch_size']} IL={rec['input_len']} OL={rec['output_len']})"
        )
        log = folder / task_log(t)
        log_note = f"log: {log}" + ("" if log.is_file() else " (not written)")
        spath = folder / task_status(t)
        status = parse_status_line(spath.read_text(encoding="utf-8"), str(spath)) if spath.is_file() else None
        if result.is_file() and result.stat().st_size > 0:
            if result.name in settings:
                raise DataError(
                    f"{folder / TASKS_NAME}: result file name {result.name!r} is used by two tasks"
                )
            files.append(result)
            settings[result.name] = {k: rec[k] for k in KEYS}
        elif status is not None and status["status"] == "failed":
            n_failed += 1
            why = status.get("reason") or "no reason recorded"
            out.failed.append({**status, "folder": str(folder), "file": rec["file"], "log": str(log)})
            last = _last_line(log)
            lines.append(
                f"  FAILED  {label}: stage {status.get('stage', '?')}, exit {status.get('rc', '?')}: {why}; "
                f"{log_note}" + (f" (last line: {last!r})" if last else "")
            )
        else:
            n_missing += 1
            why = (
                "its status says ok but the result is gone"
                if status
                else "no result, no status (not run yet?)"
            )
            out.missing.append({"task": t, "folder": str(folder), "file": rec["file"], "log": str(log)})
            lines.append(f"  MISSING {label}: {why}; {log_note}")
    out.report.append(
        f"campaign {folder}: {len(tasks)} task(s): {len(files)} with a result, {n_failed} failed, {n_missing} missing"
    )
    out.report.extend(lines)
    part = ingest_files(files, settings, defaults)
    rel = [str(p.relative_to(folder)) for p in files]
    return part.assign(source_file=rel) if len(part) else part


def _last_line(path: Path) -> str:
    """The last non-empty line of a task log (where the failing command's message usually is), or ''."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4096))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def _merge_duplicates(table: pd.DataFrame, out: Collected) -> pd.DataFrame:
    if table.empty:
        return table
    keep = []
    keys = table[list(KEYS)].copy()  # duplicates are found after alias normalization of model and GPU names
    for col, fn in CANONICAL.items():
        keys[col] = table[col].astype(str).map({v: fn(v) for v in table[col].astype(str).unique()})
    medians: dict = {}
    for _, grp in table.groupby([keys[k] for k in KEYS], sort=False, dropna=False):
        first = grp.iloc[0]
        if "repeat" in grp.columns and grp["repeat"].nunique(dropna=True) > 1:
            row = first.copy()
            for c in REPEAT_MEDIAN:
                if c in grp.columns:
                    row[c] = pd.to_numeric(grp[c], errors="coerce").median()
            row["source_file"] = ";".join(map(str, grp["source_file"]))
            medians[grp.index[0]] = row
            out.report.append(f"repeats: {len(grp)} runs of {', '.join(f'{k}={first[k]}' for k in KEYS)} -> "
                              f"their median ({row['source_file']})")  # fmt: skip
            keep.append(grp.index[0])
            continue
        for _, other in grp.iloc[1:].iterrows():
            diff = [c for c in MEASURED if c in grp.columns and not _same(first[c], other[c])]
            if diff:
                raise DataError(
                    f"{first['source_file']} and {other['source_file']} measure the same configuration "
                    f"({', '.join(f'{k}={first[k]}' for k in KEYS)}) but disagree on {', '.join(diff)} "
                    f"({diff[0]}: {first[diff[0]]} vs {other[diff[0]]}); keep one of them (move the other out of "
                    "the folder) and ingest again"
                )
            out.report.append(
                f"duplicate: {other['source_file']} repeats {first['source_file']} (same measurements; kept once)"
            )
        keep.append(grp.index[0])
    merged = table.loc[sorted(keep)].copy()
    for i, row in medians.items():
        merged.loc[i] = row
    return merged


def _same(a, b) -> bool:
    a_nan = a is None or (isinstance(a, float) and math.isnan(a))
    b_nan = b is None or (isinstance(b, float) and math.isnan(b))
    if a_nan or b_nan:
        return a_nan and b_nan
    return math.isclose(float(a), float(b), rel_tol=_SAME, abs_tol=0.0)
