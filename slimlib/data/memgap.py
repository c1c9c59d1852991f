"""Tidy tables from the raw "Mind the Memory Gap" vLLM mirror (`vllm-batching-memory-gap`).

Every leaf folder of the mirror is one run folder; each becomes a row of a tidy table or a row of the exclusions table
(or both, when the row is kept but flagged, e.g. preempted or profiler-inflated), never nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from slimlib.data.engine_metrics import parse_cache_config, summarize_engine_csv
from slimlib.data.launch_config import LaunchConfig, parse_launch_config
from slimlib.data.nvsmi import summarize_dmon_csv, summarize_query_csv
from slimlib.data.run_logs import (
    failure_reason,
    job_logs,
    namespace_agrees,
    parse_namespace,
    parse_offline_log,
    parse_online_summary,
    read_text,
)
from slimlib.data.serving_json import parse_benchmark_json
from slimlib.errors import DataError
from slimlib.model import equations as eq
from slimlib.registry.vllm_flags import V0_CHUNKED_BATCHED_TOKENS

MIRROR_NAME = "vllm-batching-memory-gap"
ONLINE_ROOT = "benchmarks/definitive_results"
OFFLINE_ROOT = "benchmarks_simple/definitive_results/analysis"
GPU = "h100-sxm-64gb"
#: Prompt length (tokens) of the advisor family's fixed-length dataset (dummy_dataset_mean.json), by model family.
ADVISOR_INPUT_LEN = {"opt": 242, "llama": 250}
MODELS = ("opt-1.3b", "opt-2.7b", "llama-2-7b", "llama-2-13b")
_LATENCY_KEYS = [f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl") for s in ("mean", "median", "std", "p99")]


def find_mirror(raw: str | Path) -> Path:
    """The mirror folder: `raw` itself when it holds `benchmarks/`, else `raw/vllm-batching-memory-gap`."""
    p = Path(raw)
    for cand in (p, p / MIRROR_NAME):
        if (cand / "benchmarks").is_dir() or (cand / "benchmarks_simple").is_dir():
            return cand
    raise DataError(f"{p}: no {MIRROR_NAME} mirror here (expected benchmarks/ or {MIRROR_NAME}/benchmarks/)")


def inventory(mirror: Path) -> list[Path]:
    """Every run folder of the mirror (leaf folders under the online and offline roots), sorted."""
    leaves = []
    for base in (mirror / ONLINE_ROOT, mirror / OFFLINE_ROOT):
        if not base.is_dir():
            continue
        for d in sorted(base.rglob("*")):
            if d.is_dir() and not any(c.is_dir() for c in d.iterdir()):
                leaves.append(d)
    return sorted(leaves, key=lambda d: d.as_posix())


@dataclass
class _Build:
    mirror: Path
    files_read: set[Path] = field(default_factory=set)
    online: list[dict] = field(default_factory=list)
    offline: list[dict] = field(default_factory=list)
    telemetry: list[dict] = field(default_factory=list)
    exclusions: list[dict] = field(default_factory=list)
    _configs: dict[Path, LaunchConfig] = field(default_factory=dict)

    def use(self, path: Path) -> Path:
        self.files_read.add(path)
        return path

    def rel(self, path: Path) -> str:
        return path.relative_to(self.mirror).as_posix()

    def config(self, path: Path) -> LaunchConfig:
        if path not in self._configs:
            self._configs[path] = parse_launch_config(self.use(path))
        return self._configs[path]

    def config_env_backend(self, run_dir: Path) -> str | None:
        """VLLM_ATTENTION_BACKEND the config(s) of `run_dir` set, or None."""
        values = {
            self.config(c).env_vars.get("VLLM_ATTENTION_BACKEND")
            for c in sorted(run_dir.parent.glob("config-*.txt"))
            if run_dir.name in self.config(c).run_names()
        }
        return values.pop() if len(values) == 1 else None

    def exclude(self, run: dict, item: str, job: str, reason: str, detail: str, in_table: str = "") -> None:
        self.exclusions.append(
            {
                "run_id": run["run_id"],
                "family": run["family"],
                "model": run["model"],
                "batch_size": run["batch_size"],
                "item": item,
                "job_id": job,
                "reason": reason,
                "detail": detail,
                "in_table": in_table,
            }
        )


def _classify(build: _Build, run_dir: Path) -> tuple[str, str, str, str]:
    """(kind, family, subfamily, model folder name) from a run folder's place in the mirror."""
    rel = run_dir.relative_to(build.mirror).as_posix()
    parts = rel.split("/")
    where = f"{run_dir}: unexpected folder layout"
    if rel.startswith(ONLINE_ROOT + "/"):
        sub = parts[2:]
        if sub[0] == "background" and len(sub) == 3:
            return "online", "background", "", sub[1]
        if sub[0] == "advisor" and len(sub) == 5 and sub[1] == "output_length":
            return "online", "advisor", f"output_length/{sub[2]}", sub[3]
        if sub[0] == "replication" and len(sub) == 4:
            return "online", "replication", sub[1], sub[2]
        raise DataError(
            f"{where} (expected background/<model>/<run>, advisor/output_length/_<OL>/<model>/<run> or "
            "replication/<kind>/<model>/<run>)"
        )
    if rel.startswith(OFFLINE_ROOT + "/") and len(parts) >= 6:
        return "offline", "/".join(parts[3:-2]), "", parts[-2]
    raise DataError(f"{where} (expected <family>/.../<model>/_<IL>_<OL>_<B> under {OFFLINE_ROOT})")


def _model_name(run_dir: Path, folder: str, settings: dict) -> str:
    model = re.sub(r"_(chunked|mps)$", "", folder)
    if model not in MODELS:
        raise DataError(f"{run_dir}: model folder {folder!r} is not one of {', '.join(MODELS)}")
    configured = Path(settings.get("--model", "").rstrip("/")).name
    if configured != model:
        raise DataError(f"{run_dir}: folder says model {model!r} but its config runs --model {configured!r}")
    return model


def _settings(build: _Build, run_dir: Path, namespace: dict | None = None) -> tuple[dict, str]:
    """Arguments of a run from the config(s) in its parent folder, and the profiler; DataError when none matches.

    When several configs launched the folder with different settings, the job's printed `namespace` picks."""
    configs = sorted(run_dir.parent.glob("config-*.txt"))
    if not configs:
        raise DataError(f"{run_dir}: no config-*.txt in {run_dir.parent}; cannot tell the run's settings")
    found: list[tuple[dict, str, Path]] = []
    for c in configs:
        cfg = build.config(c)
        if run_dir.name in cfg.run_names():
            if Path(cfg.results_path).name != run_dir.parent.name:
                raise DataError(
                    f"{c}: --results-path {cfg.results_path!r} does not end in {run_dir.parent.name!r}"
                )
            found.append((cfg.run_settings(run_dir.name), cfg.profiler, c))
    if not found:
        raise DataError(
            f"{run_dir}: the folder name {run_dir.name!r} is not a run of any config in {run_dir.parent} "
            f"({', '.join(c.name for c in configs)}); folder and config disagree"
        )
    if len(found) > 1 and namespace:
        # several configs launched this folder: keep those the job's printed arguments agree with
        differing = sorted(
            {k for f in found for k in f[0]}
            - {k for k in found[0][0] if all(f[0].get(k) == found[0][0][k] for f in found)}
        )
        kept = [
            f
            for f in found
            if all(namespace_agrees(namespace, k, f[0].get(k)) is not False for k in differing)
        ]
        found = kept or found
    first, profiler, first_path = found[0]
    for other, other_prof, other_path in found[1:]:
        if other != first or other_prof != profiler:
            diff = sorted(k for k in set(first) | set(other) if first.get(k) != other.get(k))
            raise DataError(
                f"{run_dir}: configs {first_path.name} and {other_path.name} both launched this folder with different "
                f"settings ({', '.join(diff) or 'profiler'}); cannot tell which produced it"
            )
    return first, profiler


def _int_setting(run_dir: Path, settings: dict, key: str, default: int | None = None) -> int:
    if key not in settings:
        if default is None:
            raise DataError(f"{run_dir}: its config sets no {key}")
        return default
    try:
        return int(settings[key])
    except ValueError:
        raise DataError(f"{run_dir}: config value {key}={settings[key]!r} is not an integer") from None


def _online_run(build: _Build, run_dir: Path, family: str, subfamily: str, folder: str) -> None:
    namespace: dict = {}
    for _job, (out, _err) in reversed(list(job_logs(run_dir).items())):
        if out is not None:
            namespace = parse_namespace(read_text(build.use(out)))
            if namespace:
                break
    settings, profiler = _settings(build, run_dir, namespace)
    model = _model_name(run_dir, folder, settings)
    max_num_seqs = _int_setting(run_dir, settings, "--max-num-seqs")
    n_replicas = _int_setting(run_dir, settings, "--multiple-servers", 1)
    num_prompts = _int_setting(run_dir, settings, "--num-prompts")
    run = {"run_id": build.rel(run_dir), "family": family, "model": model, "batch_size": max_num_seqs}
    files = sorted(f for f in run_dir.iterdir() if f.is_file())
    if not files:
        build.exclude(run, "", "", "missing_result", "empty run folder")
        return
    jsons = []
    for f in sorted(run_dir.glob("openai-*.json")):
        res = parse_benchmark_json(build.use(f))
        jsons.append((res["date"], f.name, res))
    jsons.sort()
    server_err = "\n".join(read_text(build.use(f)) for f in sorted(run_dir.glob("server_err*.log")))
    jobs = job_logs(run_dir)
    job_list = list(jobs.items())
    matched_job = ""
    failed: list[tuple[str, str, str, str]] = []
    for i, (job, (out, err)) in enumerate(job_list):
        out_text = read_text(build.use(out)) if out else ""
        err_text = read_text(build.use(err)) if err else ""
        item = (out or err).name
        summary = parse_online_summary(out_text)
        if summary is not None:
            hits = [
                name
                for _, name, res in jsons
                if abs(res["duration_s"] - summary.duration_s) < 0.006
                and res["total_output_tokens"] == summary.total_output_tokens
            ]
            if not hits:
                build.exclude(
                    run, item, job, "missing_result", "job printed a benchmark result but its JSON is missing"
                )
            elif jsons and hits[-1] == jsons[-1][1]:
                matched_job = job
            continue
        # the server stderr of a folder belongs to its last launch attempt
        last = i == len(job_list) - 1
        reason, detail = failure_reason(out_text, err_text, server_err if last else "")
        failed.append((item, job, reason, detail))
    if jsons and not matched_job and failed and failed[-1][1] == job_list[-1][0]:
        # the last attempt wrote the result JSON but its log lost the printed summary (job cancelled afterwards,
        # e.g. while Nsight Systems wrote its report): it produced the folder's result
        matched_job = failed.pop()[1]
    for item, job, reason, detail in failed:
        build.exclude(run, item, job, reason, detail)
    if not jsons:
        if not jobs:
            build.exclude(run, "", "", "missing_result", "no result JSON and no job log in the folder")
        return
    for _, name, _res in jsons[:-1]:
        build.exclude(
            run, name, "", "duplicate_rerun", f"earlier result of the same settings; kept {jsons[-1][1]}"
        )
    res = jsons[-1][2]
    name = jsons[-1][1]
    if res["num_prompts"] is not None and res["num_prompts"] != num_prompts:
        raise DataError(
            f"{run_dir / name}: num_prompts is {res['num_prompts']} but the config sets {num_prompts}"
        )
    completed = res["completed"]
    if completed <= 0:
        raise DataError(f"{run_dir / name}: completed is 0; no request finished")
    mean_in = res["total_input_tokens"] / completed
    mean_out = res["total_output_tokens"] / completed
    if family == "advisor":
        ol = int(subfamily.rsplit("_", 1)[-1])
        cfg_ol = _int_setting(run_dir, settings, "--sharegpt-output-len")
        expect_in = ADVISOR_INPUT_LEN[model.split("-")[0]]
        if cfg_ol != ol:
            raise DataError(f"{run_dir}: folder says output length {ol} but the config sets {cfg_ol}")
        if mean_in != expect_in:
            raise DataError(
                f"{run_dir / name}: total_input_tokens/completed = {mean_in:g}, expected {expect_in} for {model}"
            )
        # Llama's tokenizer adds a BOS token when the benchmark re-tokenizes the generated text.
        if not (ol <= mean_out <= ol + 1):
            raise DataError(
                f"{run_dir / name}: total_output_tokens/completed = {mean_out:g}, expected {ol} (config "
                f"--sharegpt-output-len) or {ol + 1}"
            )
        input_len, output_len, dataset = float(expect_in), float(ol), "fixed"
    else:
        input_len, output_len, dataset = mean_in, mean_out, "sharegpt"

    engine = [summarize_engine_csv(build.use(f)) for f in sorted(run_dir.glob("metrics_engine*.csv"))]
    caches = [parse_cache_config(build.use(f)) for f in sorted(run_dir.glob("cache_config*.txt"))]
    if engine and len(engine) != n_replicas:
        raise DataError(f"{run_dir}: {len(engine)} engine metrics CSVs for {n_replicas} server(s)")
    if caches and len(caches) != n_replicas:
        raise DataError(f"{run_dir}: {len(caches)} cache_config files for {n_replicas} server(s)")
    preemptions = sum(e["num_preemptions"] for e in engine) if engine else None
    row = {
        "run_id": run["run_id"],
        "family": family,
        "subfamily": subfamily,
        "model": model,
        "gpu": GPU,
        "batch_size": max_num_seqs,
        "max_num_seqs": max_num_seqs,
        "n_replicas": n_replicas,
        "mps": "--use-mps" in settings,
        "chunked_prefill": "--enable-chunked-prefill" in settings,
        "max_num_batched_tokens": _int_setting(
            run_dir, settings, "--max-num-batched-tokens", V0_CHUNKED_BATCHED_TOKENS
        )
        if "--enable-chunked-prefill" in settings
        else None,
        "profiler": profiler,
        "dataset": dataset,
        "num_prompts": num_prompts,
        "completed": completed,
        "input_len": input_len,
        "output_len": output_len,
        "mean_input_len_tok": mean_in,
        "mean_output_len_tok": mean_out,
        "throughput_tok_s": res["total_token_throughput_tok_s"],
        "output_throughput_tok_s": res["output_throughput_tok_s"],
        "request_throughput_req_s": res["request_throughput_req_s"],
        "duration_s": res["duration_s"],
        **{k: res.get(k) for k in _LATENCY_KEYS},
        "mean_running_batch": (sum(e["mean_running_batch"] for e in engine) / len(engine))
        if engine
        else None,
        "max_running_batch": max(e["max_running_batch"] for e in engine) if engine else None,
        "mean_waiting": (sum(e["mean_waiting"] for e in engine) / len(engine)) if engine else None,
        "mean_kv_usage_frac": (sum(e["mean_kv_usage_frac"] for e in engine) / len(engine))
        if engine
        else None,
        "max_kv_usage_frac": max(e["max_kv_usage_frac"] for e in engine) if engine else None,
        "num_preemptions": preemptions,
        "preempted": (preemptions > 0) if engine else None,
        "gpu_blocks": sum(c["num_gpu_blocks"] for c in caches) if caches else None,
        "block_size": caches[0]["block_size"] if caches else None,
        "result_file": name,
        "job_id": matched_job,
    }
    build.online.append(row)
    if preemptions:
        build.exclude(
            run,
            name,
            matched_job,
            "preemption",
            f"{preemptions} preemption(s) in the engine metrics",
            "memgap-online",
        )
    for q in sorted(run_dir.glob("metrics_gpu_device_nvidia_smi_[0-9]*.csv")):
        m = re.search(r"_server_(\d+)\.csv$", q.name)
        server = int(m.group(1)) if m else 0
        dmon = q.with_name(q.name.replace("nvidia_smi_", "nvidia_smi_dom_", 1))
        tel = {
            "run_id": run["run_id"],
            "family": family,
            "model": model,
            "batch_size": max_num_seqs,
            "n_replicas": n_replicas,
            "server": server,
            **summarize_query_csv(build.use(q)),
        }
        if not dmon.is_file():
            raise DataError(f"{q}: no matching dmon file {dmon.name}")
        tel.update(summarize_dmon_csv(build.use(dmon)))
        build.telemetry.append(tel)


def _offline_run(build: _Build, run_dir: Path, family: str, folder: str) -> None:
    settings, profiler = _settings(build, run_dir)
    model = _model_name(run_dir, folder, settings)
    il, ol, b = (int(x) for x in run_dir.name.strip("_").split("_"))
    run = {"run_id": build.rel(run_dir), "family": family, "model": model, "batch_size": b}
    for key, val in (("--prompt-len", il), ("--output-len", ol), ("--batch-size", b)):
        if _int_setting(run_dir, settings, key) != val:
            raise DataError(f"{run_dir}: folder name says {key}={val} but the config sets {settings[key]}")
    jobs = job_logs(run_dir)
    if not jobs:
        build.exclude(run, "", "", "missing_result", "no job log in the run folder")
        return
    done = []
    for job, (out, err) in jobs.items():
        if out is None:
            build.exclude(run, err.name, job, "missing_result", "job stderr without stdout log")
            continue
        log = parse_offline_log(build.use(out))
        if (log.prompt_len, log.output_len, log.batch_size) != (il, ol, b):
            raise DataError(
                f"{out}: log header says prompt_len={log.prompt_len}, output_len={log.output_len}, "
                f"batch_size={log.batch_size} but the folder is {run_dir.name}"
            )
        if log.prefill_s is None or log.decode_s is None:
            err_text = read_text(build.use(err)) if err else ""
            reason, detail = failure_reason(read_text(out), err_text)
            build.exclude(run, out.name, job, reason, detail)
            continue
        done.append((job, out, log))
    if not done:
        return
    for job, out, _ in done[:-1]:
        build.exclude(run, out.name, job, "duplicate_rerun", f"earlier attempt; kept job {done[-1][0]}")
    job, out, log = done[-1]
    want_backend = "xformers" if build.config_env_backend(run_dir) == "XFORMERS" else None
    if want_backend and log.backend != want_backend:
        raise DataError(
            f"{out}: config sets VLLM_ATTENTION_BACKEND=XFORMERS but the log shows backend {log.backend}"
        )
    e2e = log.prefill_s + log.decode_s
    timing_valid = profiler != "ncu"
    build.offline.append(
        {
            "run_id": run["run_id"],
            "family": family,
            "model": model,
            "gpu": GPU,
            "batch_size": b,
            "input_len": il,
            "output_len": ol,
            "prefill_s": log.prefill_s,
            "decode_s": log.decode_s,
            "e2e_s": e2e,
            "throughput_tok_s": float(eq.throughput(b, il, ol, e2e)),
            "n_prefill_steps": log.n_prefill_steps,
            "n_decode_steps": log.n_decode_steps,
            "init_s": log.init_s,
            "backend": log.backend,
            "profiler": profiler,
            "enforce_eager": "--enforce-eager" in settings,
            "vllm_version": log.vllm_version,
            "gpu_blocks": log.gpu_blocks,
            "preempted": log.preempted,
            "timing_valid": timing_valid,
            "job_id": job,
        }
    )
    if not timing_valid:
        build.exclude(
            run,
            out.name,
            job,
            "profiler_inflated_timing",
            "run under Nsight Compute (kernel replay)",
            "memgap-offline",
        )
    if log.preempted:
        build.exclude(
            run, out.name, job, "preemption", "requests preempted (KV cache full)", "memgap-offline"
        )


def build_memgap_tables(raw: str | Path) -> tuple[dict[str, pd.DataFrame], list[Path]]:
    """Parse the whole mirror: tables "memgap-online", "memgap-offline", "memgap-telemetry", "memgap-exclusions"
    (sorted, one row per run; exclusions one row per unusable item) and the sorted list of raw files read."""
    mirror = find_mirror(raw)
    build = _Build(mirror=mirror)
    prov = mirror / "PROVENANCE.md"
    if prov.is_file():
        build.use(prov)
    runs = inventory(mirror)
    if not runs:
        raise DataError(f"{mirror}: no run folders under {ONLINE_ROOT} or {OFFLINE_ROOT}")
    for run_dir in runs:
        kind, family, subfamily, folder = _classify(build, run_dir)
        if kind == "online":
            _online_run(build, run_dir, family, subfamily, folder)
        else:
            _offline_run(build, run_dir, family, folder)
    tables = {
        "memgap-online": pd.DataFrame(build.online),
        "memgap-offline": pd.DataFrame(build.offline),
        "memgap-telemetry": pd.DataFrame(build.telemetry),
        "memgap-exclusions": pd.DataFrame(build.exclusions),
    }
    sort_keys = {
        "memgap-online": ["run_id"],
        "memgap-offline": ["run_id"],
        "memgap-telemetry": ["run_id", "server"],
        "memgap-exclusions": ["run_id", "item", "reason"],
    }
    for name, df in tables.items():
        if len(df):
            tables[name] = df.sort_values(sort_keys[name], kind="stable").reset_index(drop=True)
    return tables, sorted(build.files_read, key=lambda p: p.as_posix())
