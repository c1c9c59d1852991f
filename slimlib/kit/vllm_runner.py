"""Run a calibration plan on a real vLLM engine: start ``vllm serve``, run ``vllm bench serve`` per configuration.

The plan is the table `slim plan` writes (``plan.csv``: model, hf_id, gpu, batch_size, input_len, output_len,
num_prompts, file; optional ``repeat``). One server per (repeat, model) serves that repeat's configurations of the
model with ``--max-num-seqs`` at the model's largest planned batch size; each client run caps the batch with
``--max-concurrency B`` (ingest takes the smaller of the two caps as the batch size). Lengths are fixed
(``--dataset-name random --random-range-ratio 0 --ignore-eos``), the seed is the repeat index, every result is
saved (``--save-result``).

* The measurement protocol (`Protocol`): k waves of B requests per run (``num_prompts = k B``, `wave_count`), a
  warm-up after every server start, repeats interleaved (`measure_order`), the host's CPU time per run
  (`slimlib.kit.host_load`) in the sidecar, runs under outside load moved to ``results/flagged/`` and re-run once
  at the end of their repeat. The plan's ``num_prompts`` is replaced by ``k B``.
* Resume: a configuration whose result file exists (same model) is skipped; a result file written for another
  model is refused (DataError), never overwritten.
* Reported skips, never silent gaps: IL + OL beyond the model's window, or a batch whose requests do not fit the
  KV cache the engine was given (CPU backend: ``VLLM_CPU_KVCACHE_SPACE``).
* The server runs in its own process group and is stopped on exit, error or interrupt (SIGINT/SIGTERM).
* A server that does not come up raises EngineError with the last line of its log; a busy port is replaced by a
  free one (reported).
* ``manifest.json`` (rewritten after every server): engine and version, host, server flags and environment, the
  protocol's settings, every server start (pid, time, seconds to ready), dates, the load average every minute, the
  host micro-benchmark, the re-runs, and the sha256 of every result file and flagged copy.

The command lines come from the caller (`ArgvBuilders`: the CLI passes `slimlib.advisor.commands`' builders, the
ones `slim plan` writes into its scripts, so both paths run the same commands). The CPU build (``vllm-cpu``) is
driven through `vllm_cpu_launcher.py` (its console script is broken, see there), which also runs a server's
configurations one by one in one client process fed on stdin; a GPU build runs the ``vllm`` command unchanged
(`EngineSpec.gpu`), with real weights.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from slimlib.errors import DataError, SlimError
from slimlib.io import write_text
from slimlib.kit.host_load import (
    LOAD_FIELDS,
    OUTSIDE_CPU_MAX_CORES,
    STEAL_MAX_FRACTION,
    load_split,
    take_snapshot,
)
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import GIB
from slimlib.registry.host_cpu import HOST_CPU_KV_SPACE_GIB

__all__ = [
    "ArgvBuilders",
    "EngineError",
    "CPU_ENGINE",
    "EngineSpec",
    "run_plan",
    "Protocol",
    "wave_count",
    "measure_order",
    "previous_wave_s",
    "read_records",
    "SIDECAR_COLUMNS",
    "FLAGGED",
    "LAUNCHER",
    "SIDECAR",
    "MANIFEST",
    "result_files",
]

LAUNCHER = Path(__file__).with_name("vllm_cpu_launcher.py")
SIDECAR = "slim-runs.csv"
MANIFEST = "manifest.json"
PLAN_COLUMNS = ("model", "hf_id", "gpu", "batch_size", "input_len", "output_len", "num_prompts", "file")


@dataclass(frozen=True)
class ArgvBuilders:
    """``server(model, max_num_seqs, max_model_len, port, tensor_parallel, flags)`` -> argv starting ``vllm serve``;
    ``client(row, result_dir, port)`` -> argv starting ``vllm bench serve``."""

    server: Callable[..., list[str]]
    client: Callable[..., list[str]]
    #: ``flags(plan)`` -> the server flags of a plan's serving options (none by default)
    flags: Callable[[pd.DataFrame], list[str]] = lambda plan: []


class EngineError(SlimError):
    """The engine did not start or a run could not be made."""


#: `EngineSpec.name` of vLLM's CPU build (a manifest session's ``engine``)
CPU_ENGINE = "vllm-cpu"


@dataclass(frozen=True)
class EngineSpec:
    """How to run vLLM: the command that replaces ``vllm``, extra environment, dummy weights, KV space, client mode.

    `batched_client`: run a server's configurations in one client process (CPU launcher only)."""

    command: tuple[str, ...] = ("vllm",)
    env: dict[str, str] = field(default_factory=dict)
    dummy_weights: bool = False
    kv_space_gib: float | None = None
    batched_client: bool = False
    name: str = "vllm"
    python: str | None = None  # interpreter of the engine's environment (for its version)

    @classmethod
    def cpu(cls, python: str, kv_space_gib: float = HOST_CPU_KV_SPACE_GIB, threads: int | None = None,
            batched_client: bool = True) -> EngineSpec:  # fmt: skip
        """vLLM's CPU build in the environment of `python` (random weights, `kv_space_gib` of KV cache)."""
        env = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": f"{kv_space_gib:g}"}
        if threads:
            env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{threads - 1}"
        return cls((python, str(LAUNCHER)), env, True, kv_space_gib, batched_client, CPU_ENGINE, python)

    @classmethod
    def gpu(cls, command: str = "vllm", dummy_weights: bool = False) -> EngineSpec:
        """A GPU build of vLLM, run as `command` (real weights unless `dummy_weights`)."""
        return cls((command,), {}, dummy_weights, None, False, "vllm", None)


# ----------------------------------------------------------------------------------------------- helpers


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def last_line(path: Path) -> str:
    """The last non-empty line of a log file (empty string when none)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return next((ln.strip() for ln in reversed(lines) if ln.strip()), "")


def _check_plan(plan: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in PLAN_COLUMNS if c not in plan.columns]
    if missing:
        raise DataError(f"the plan lacks column(s) {', '.join(missing)}; write it with `slim plan`")
    dup = plan["file"][plan["file"].duplicated()]
    if len(dup):
        raise DataError(
            f"the plan lists result file {dup.iloc[0]!r} twice; each configuration needs its own file"
        )
    p = plan.copy()
    if "repeat" not in p.columns:
        p["repeat"] = 0
    if "tensor_parallel" not in p.columns:
        p["tensor_parallel"] = 1
    return p.reset_index(drop=True)


def result_model_id(path: Path) -> str:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return ""
    return str(raw.get("model_id", "")) if isinstance(raw, dict) else ""


def _same_model(model_id: str, served: str) -> bool:
    a, b = model_id.rstrip("/"), served.rstrip("/")
    return a == b or Path(a).name == Path(b).name


def result_files(plan: pd.DataFrame, result_dir: str | Path) -> list[Path]:
    """The plan's result files that exist in `result_dir`, in plan order."""
    root = Path(result_dir)
    return [root / f for f in plan["file"] if (root / f).is_file()]


def _skip_reason(row, kv_space_gib: float | None, max_len: int) -> str:
    il, ol, b = int(row["input_len"]), int(row["output_len"]), int(row["batch_size"])
    arch = get_architecture(str(row["model"]))
    if il + ol > max_len:
        return f"IL + OL = {il + ol} exceeds the model window of {max_len} tokens"
    if kv_space_gib:
        config = serving_config(arch)  # vLLM's defaults; the KV space is the engine's own setting
        cap = math.floor(config.blocks_in(kv_space_gib * GIB) / float(config.request_blocks(il + ol)))
        if b > cap:
            return f"batch {b} exceeds the {cap} requests of {il + ol} tokens the {kv_space_gib:g} GiB KV cache holds"
    return ""


# ----------------------------------------------------------------------------------------------- load sampler


class LoadSampler:
    """Records the 1/5/15-minute load average at start, every `every_s` seconds and at stop."""

    def __init__(self, every_s: float = 60.0) -> None:
        self.every_s, self.samples = every_s, []  # type: ignore[var-annotated]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        l1, l5, l15 = os.getloadavg()
        self.samples.append(
            {"utc": _now(), "load1": round(l1, 2), "load5": round(l5, 2), "load15": round(l15, 2)}
        )

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def start(self) -> LoadSampler:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> list[dict]:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sample()
        return self.samples


# ----------------------------------------------------------------------------------------------- server


@contextlib.contextmanager
def serve(spec: EngineSpec, argvs: ArgvBuilders, model_path: str, max_num_seqs: int, max_model_len: int, port: int, log: Path,
          tensor_parallel: int = 1, startup_timeout_s: float = 900.0, env: dict | None = None,
          say: Callable[[str], None] = print, flags: Sequence[str] = ()) -> Iterator[tuple[list[str], int, int, float]]:  # fmt: skip
    """Start ``vllm serve`` (own process group) with the plan's serving `flags`, wait for ``/health``, yield (argv,
    port, server pid, seconds to ready); stop it on exit."""
    if not port_free(port):
        new = free_port()
        say(f"port {port} is in use; serving on port {new} instead")
        port = new
    argv = [
        *spec.command,
        *argvs.server(model_path, max_num_seqs, max_model_len, port, tensor_parallel, flags)[1:],
    ]
    if spec.dummy_weights:
        argv += ["--load-format", "dummy"]
    argv += ["--seed", "0"]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                start_new_session=True)  # fmt: skip
    try:
        t0 = time.monotonic()
        url = f"http://127.0.0.1:{port}/health"
        wait_s = 0.05  # doubled after each miss up to a second: a quick server is seen at once, a slow one each second
        while True:
            if proc.poll() is not None:
                raise EngineError(
                    f"vllm serve {model_path} exited with status {proc.returncode} before it was ready "
                    f"(log {log}): {last_line(log)}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - loopback only
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() - t0 > startup_timeout_s:
                raise EngineError(
                    f"vllm serve {model_path} not ready after {startup_timeout_s:.0f} s (log {log}): {last_line(log)}"
                )
            time.sleep(wait_s)
            wait_s = min(2 * wait_s, 1.0)
        ready_s = time.monotonic() - t0
        say(f"server for {Path(model_path).name} ready on port {port} after {ready_s:.0f} s")
        yield argv, port, proc.pid, ready_s
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM the process group of `proc`, then SIGKILL after `grace_s`."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# ----------------------------------------------------------------------------------------------- clients


def bench_argv(argvs: ArgvBuilders, row, result_dir: Path, port: int, served: str, max_num_seqs: int, gpu: str,
               waves: int | None = None) -> list[str]:  # fmt: skip
    """Arguments after ``vllm bench serve`` for one configuration (fixed lengths, seed = repeat index); `waves` is
    written into the result's metadata."""
    r = dict(row)
    r["hf_id"] = served
    r["gpu"] = gpu
    args = argvs.client(r, str(result_dir), port)[3:]
    i = args.index("--metadata")
    args[i + 1] = f"max_num_seqs={max_num_seqs}"
    meta = ["repeat=" + str(int(row["repeat"]))] + ([f"waves={int(waves)}"] if waves is not None else [])
    return [*args, *meta, "--random-range-ratio", "0", "--seed", str(int(row["repeat"])),
            "--ready-check-timeout-sec", "0", "--disable-tqdm"]  # fmt: skip


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt so that servers are stopped by the same `finally` blocks."""

    def handler(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt

    old = (
        signal.signal(signal.SIGTERM, handler)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    try:
        yield
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


class _Client:
    """Runs ``vllm bench serve`` configurations one at a time: in one long-lived launcher process that reads one JSON
    argument list per line on stdin (`EngineSpec.batched_client`), or in one process per configuration."""

    def __init__(self, spec: EngineSpec, log: Path, env: dict) -> None:
        self.spec, self.log, self.env = spec, log, {**os.environ, **env}
        self.proc: subprocess.Popen | None = None
        self.n = 0

    def __enter__(self) -> _Client:
        self.fh = open(self.log, "a", encoding="utf-8")  # noqa: SIM115 - closed in __exit__
        if self.spec.batched_client:
            self.proc = subprocess.Popen([*self.spec.command, "bench-serve-many", "-"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.fh, text=True, env=self.env,
                                         start_new_session=True)  # fmt: skip
            try:
                assert self.proc.stdout is not None
                for line in self.proc.stdout:  # wait for vLLM's import: the first run's wall time is its own
                    self.fh.write(line)
                    if line.startswith("SLIM-READY"):
                        break
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.proc is not None:
                with contextlib.suppress(OSError):
                    assert self.proc.stdin is not None
                    self.proc.stdin.close()
                stop_group(self.proc, grace_s=10)
        finally:
            self.fh.close()

    @property
    def pgid(self) -> int | None:
        """The process group of the long-lived client (None: one process per run, counted by its rusage)."""
        return self.proc.pid if self.proc is not None else None

    def run(self, args: list[str]) -> str:
        """Run one configuration; '' on success, else why it failed."""
        if self.proc is None:
            one = subprocess.Popen([*self.spec.command, "bench", "serve", *args], stdout=self.fh,
                                   stderr=subprocess.STDOUT, env=self.env, start_new_session=True)  # fmt: skip
            try:
                rc = one.wait()
            finally:
                stop_group(one, grace_s=5)
            self.fh.flush()
            return "" if rc == 0 else f"vllm bench serve exited with status {rc}: {last_line(self.log)}"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        i, self.n = self.n, self.n + 1
        try:
            self.proc.stdin.write(json.dumps(args) + "\n")
            self.proc.stdin.flush()
        except OSError:
            return f"the client process exited (status {self.proc.poll()}): {last_line(self.log)}"
        for line in self.proc.stdout:
            self.fh.write(line)
            parts = line.split(maxsplit=3)
            if len(parts) >= 3 and parts[0] in ("SLIM-RUN-DONE", "SLIM-RUN-FAILED") and parts[1] == str(i):
                self.fh.flush()
                return "" if parts[0] == "SLIM-RUN-DONE" else " ".join(parts[2:]).strip()
        self.fh.flush()
        return f"the client process exited (status {self.proc.wait()}): {last_line(self.log)}"


def _children_cpu_s() -> float:
    """CPU seconds of this process's reaped children (the per-run clients)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# ----------------------------------------------------------------------------------------------- the protocol


@dataclass(frozen=True)
class Protocol:
    """How each configuration is measured: k back-to-back waves of B requests (``num_prompts = k B``, k from
    `wave_count` with `min_run_s` and `min_waves`), `warmups` discarded requests after every server start, and runs
    under outside load (`slimlib.kit.host_load`) re-run once at the end of their repeat (`rerun_flagged`)."""

    min_run_s: float = 5.0
    min_waves: int = 3
    warmups: int = 1
    rerun_flagged: bool = True
    #: the client also saves every request's start time, TTFT and inter-token latencies (``--save-detailed``)
    detailed: bool = False

    def settings(self) -> dict:
        """The settings the manifest records (with the outside-load thresholds and the wave-count rule)."""
        return {**asdict(self), "max_waves": MAX_WAVES, "outside_cpu_max_cores": OUTSIDE_CPU_MAX_CORES,
                "steal_max_fraction": STEAL_MAX_FRACTION, "wave_rule": WAVE_RULE}  # fmt: skip


#: most waves one run may get (a guard against a near-zero wave-time estimate)
MAX_WAVES = 1000
WAVE_RULE = (
    "k = max(min_waves, ceil(min_run_s / w)), at most max_waves; w = duration / waves of the same configuration's "
    "latest earlier repeat, else the duration of a probe run (not kept): one timed wave after a warm-up wave of B "
    "requests; k = min_waves when min_run_s is 0"
)


def wave_count(min_run_s: float, wave_s: float | None, min_waves: int) -> int:
    """Waves k of one run: ``max(min_waves, ceil(min_run_s / wave_s))`` (at most `MAX_WAVES`); `min_waves` when
    `min_run_s` is 0. A missing or non-positive `wave_s` with `min_run_s` > 0 is a ValueError."""
    if min_waves < 1:
        raise ValueError(f"min_waves must be >= 1, got {min_waves}")
    if min_run_s <= 0:
        return int(min_waves)
    if wave_s is None or not wave_s > 0:
        raise ValueError(f"no positive wave-time estimate ({wave_s!r}) to size a run of {min_run_s:g} s")
    return int(min(MAX_WAVES, max(min_waves, math.ceil(min_run_s / wave_s))))


def measure_order(plan: pd.DataFrame) -> list[tuple[int, str, pd.DataFrame]]:
    """(repeat, model, rows) in the order they are measured: every configuration of repeat r, model by model in plan
    order, before any of repeat r + 1 (one server start per (repeat, model))."""
    p = _check_plan(plan)
    return [(int(rep), str(model), rows)
            for rep in sorted(p["repeat"].unique())
            for model, rows in p[p["repeat"] == rep].groupby("model", sort=False)]  # fmt: skip


def previous_wave_s(plan: pd.DataFrame, row, result_dir: Path) -> float | None:
    """Measured seconds per wave of `row`'s configuration (model, B, IL, OL) in its latest earlier repeat with a
    result that records its waves (``duration / waves`` of the result JSON); None when there is none."""
    same = plan[(plan["model"] == row["model"]) & (plan["batch_size"] == row["batch_size"])
                & (plan["input_len"] == row["input_len"]) & (plan["output_len"] == row["output_len"])
                & (plan["repeat"] < row["repeat"])].sort_values("repeat", ascending=False)  # fmt: skip
    for f in same["file"]:
        wave = _result_wave_s(result_dir / f)
        if wave is not None:
            return wave
    return None


def _result_wave_s(path: Path) -> float | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return float(raw["duration"]) / int(raw["waves"])
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return None


# ----------------------------------------------------------------------------------------------- records

#: the sidecar's columns: the settings ingest reads, then the protocol's record of each run
SIDECAR_COLUMNS = ("file", "batch_size", "input_len", "output_len", "model", "gpu", "repeat", "waves", "started_utc",
                   "wall_s", "load1", *LOAD_FIELDS[:-1], "server_pid", "server_started_utc", "outside_load")  # fmt: skip
FLAGGED = "flagged"


def read_records(folder: Path) -> dict[str, dict]:
    """The protocol records of a results folder's sidecar, by file (empty when there is no sidecar)."""
    path = folder / SIDECAR
    if not path.is_file():
        return {}
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable sidecar ({exc}); move it away to rebuild it") from None
    if "file" not in df.columns:
        raise DataError(f"{path}: missing column 'file'; move it away to rebuild it")
    keep = [c for c in SIDECAR_COLUMNS[1:] if c in df.columns]
    return {str(r["file"]): {c: r[c] for c in keep} for r in df.to_dict("records")}


def _flag(record: dict | None) -> bool:
    v = (record or {}).get("outside_load")
    return v is True or str(v).strip().lower() == "true"


def _write_sidecar(plan: pd.DataFrame, result_dir: Path, records: dict[str, dict]) -> None:
    done = plan[[(result_dir / f).is_file() for f in plan["file"]]]
    rows = []
    for r in done.to_dict("records"):
        rec = {c: r[c] for c in SIDECAR_COLUMNS[:7]}
        rec.update({c: v for c, v in records.get(r["file"], {}).items() if c not in rec})
        rows.append(rec)
    df = pd.DataFrame(rows, columns=list(SIDECAR_COLUMNS))
    write_text(result_dir / SIDECAR, df.to_csv(index=False, lineterminator="\n"))


def _write_flagged_sidecar(folder: Path, records: dict[str, dict]) -> None:
    if records:
        df = pd.DataFrame(
            [{"file": f, **rec} for f, rec in sorted(records.items())], columns=list(SIDECAR_COLUMNS)
        )
        write_text(folder / SIDECAR, df.to_csv(index=False, lineterminator="\n"))


# ----------------------------------------------------------------------------------------------- the campaign


def read_manifest(path: Path) -> dict:
    """A campaign's manifest (`MANIFEST`); DataError naming the file when it is not one (unreadable, not JSON, or
    without its list of sessions)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(
            f"{path}: not a readable campaign manifest ({exc}); move it away or give another --out"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("sessions"), list):
        raise DataError(
            f"{path}: not a campaign manifest (no list of sessions); move it away or give another --out"
        )
    return doc


def run_plan(
    plan: pd.DataFrame,
    out_dir: str | Path,
    spec: EngineSpec,
    argvs: ArgvBuilders,
    *,
    models_dir: str | Path | None = None,
    port: int = 8000,
    budget_s: float | None = None,
    startup_timeout_s: float = 900.0,
    microbenchmark: Callable[[], dict] | None = None,
    host: Callable[[], dict] | None = None,
    protocol: Protocol = Protocol(),
    say: Callable[[str], None] = print,
) -> dict:
    """Measure every configuration of `plan` not yet in ``out_dir/results`` under `protocol`; returns the manifest
    (also written).

    Repeats are interleaved (`measure_order`): one server start per (repeat, model), a warm-up after each start;
    runs flagged for outside load are moved to ``results/flagged/`` (never overwritten) and re-run once at the end of
    their repeat. `models_dir`: folder holding one served folder per model name (CPU testbed); without it the plan's
    ``hf_id`` is served. `budget_s` stops (resumably) after that many seconds. `microbenchmark`/`host` return the
    host's peaks and facts for the manifest (run once, at the start of a session)."""
    plan = _check_plan(plan)
    out = Path(out_dir)
    results = out / "results"
    flagged_dir = results / FLAGGED
    logs = out / "logs"
    results.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    mpath = out / MANIFEST
    manifest = read_manifest(mpath) if mpath.is_file() else {"sessions": []}
    session: dict = {"started_utc": _now(), "engine": spec.name, "engine_command": list(spec.command),
                     "engine_env": dict(spec.env), "dummy_weights": spec.dummy_weights,
                     "batched_client": spec.batched_client, "protocol": protocol.settings(), "servers": {},
                     "server_starts": [], "measured": [], "skipped": {}, "failed": {}, "reruns": {}}  # fmt: skip
    manifest["sessions"].append(session)
    manifest["protocol"] = protocol.settings()
    records = read_records(results)
    flagged_records = read_records(flagged_dir)
    if spec.python:
        session["engine_version"] = _engine_version(spec.python)
    if host is not None:
        session["host"] = host()
    sampler = LoadSampler().start()
    t_start = time.monotonic()
    deadline = t_start + budget_s if budget_s else None
    if microbenchmark is not None:
        say("measuring the host's peak FLOP/s and memory bandwidth (micro-benchmark)")
        session["microbenchmark"] = microbenchmark()
    total = len(plan)
    walls: list[float] = []  # seconds of each run measured in this session
    state = {"done": int(sum((results / f).is_file() for f in plan["file"])), "no_proc": False}
    b_max_of = (
        plan.groupby("model")["batch_size"].max().to_dict()
    )  # one --max-num-seqs per model, every repeat

    def finish(name: str) -> dict:
        session["load"] = sampler.stop() if name != "running" else list(sampler.samples)
        session["ended_utc"], session["state"] = _now(), name
        session["wall_s"] = round(time.monotonic() - t_start, 1)
        _write_sidecar(plan, results, records)
        _write_flagged_sidecar(flagged_dir, flagged_records)
        manifest["results"] = [
            {"file": p.name, "sha256": sha256_file(p)} for p in sorted(result_files(plan, results))
        ]
        manifest["flagged"] = [{"file": f"{FLAGGED}/{p.name}", "sha256": sha256_file(p)}
                               for p in sorted(flagged_dir.glob("*.json"))]  # fmt: skip
        manifest["plan_rows"] = total
        write_text(mpath, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        return manifest

    def progress(row: dict, k: int, secs: float) -> None:
        walls.append(secs)
        el = time.monotonic() - t_start
        left = max(0, total - state["done"] - len(session["skipped"]))
        # the session's mean time per run so far (server starts included) times the runs left
        eta = left * el / len(walls)
        say(f"[{state['done']}/{total}] {row['model']} B={int(row['batch_size'])} IL={int(row['input_len'])} "
            f"OL={int(row['output_len'])} r{int(row['repeat'])} k={k}: {secs:.1f} s (elapsed {el / 60:.1f} min, "
            f"about {eta / 60:.0f} min left)")  # fmt: skip

    def measure(model: str, rows: list[dict], label: str) -> None:
        """One server start for `rows` of `model`: a warm-up, then each configuration (probe when needed)."""
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError
        arch = get_architecture(model)
        served = str(Path(models_dir) / model) if models_dir else str(rows[0]["hf_id"])
        max_len = int(arch.max_position or max(int(r["input_len"]) + int(r["output_len"]) for r in rows))
        b_max = int(b_max_of[model])
        tp = int(rows[0].get("tensor_parallel", 1) or 1)
        gpu = str(rows[0]["gpu"])
        env = dict(spec.env)
        probes = logs / "probe"
        with tempfile.TemporaryDirectory(prefix="slim-vllm-cache-") as cache:
            env.setdefault("VLLM_CACHE_ROOT", cache)
            started = _now()
            with serve(spec, argvs, served, b_max, max_len, port, logs / f"server-{model}-{label}.log", tp,
                       startup_timeout_s, env, say, argvs.flags(pd.DataFrame(rows[:1]))) as (argv, used_port, server_pid, ready_s):  # fmt: skip
                session["servers"][model] = argv
                session["server_starts"].append({"model": model, "pass": label, "pid": server_pid,
                                                 "started_utc": started, "ready_s": round(ready_s, 1)})  # fmt: skip
                warm = ["--num-warmups", str(protocol.warmups)] if protocol.warmups else []
                with _Client(spec, logs / f"client-{model}-{label}.log", env) as client:
                    for row in rows:
                        if deadline is not None and time.monotonic() > deadline:
                            raise TimeoutError
                        b = int(row["batch_size"])
                        if protocol.min_run_s <= 0:
                            wave = None
                        else:
                            wave = previous_wave_s(plan, row, results)
                        if (
                            protocol.min_run_s > 0 and wave is None
                        ):  # one warm timed wave, not kept, sizes the run
                            probes.mkdir(exist_ok=True)
                            (probes / row["file"]).unlink(missing_ok=True)
                            args = bench_argv(argvs, {**row, "num_prompts": b}, probes, used_port, served, b_max,
                                              gpu, waves=1)  # fmt: skip
                            # a wave of B warm-up requests first: a new shape's first wave is slower (one-time costs)
                            why = client.run([*args, "--num-warmups", str(max(b, protocol.warmups))])
                            warm = []
                            wave = _result_wave_s(probes / row["file"])
                            if why or wave is None:
                                session["failed"][row["file"]] = f"probe run failed: {why or 'no result'}"
                                say(f"failed {row['file']}: probe run: {why or 'no result'}")
                                continue
                        k = wave_count(protocol.min_run_s, wave, protocol.min_waves)
                        args = bench_argv(argvs, {**row, "num_prompts": k * b}, results, used_port, served, b_max,
                                          gpu, waves=k)  # fmt: skip
                        if protocol.detailed:
                            args.append("--save-detailed")
                        pgids = {server_pid} | ({client.pgid} if client.pgid else set())
                        rec = {"repeat": int(row["repeat"]), "waves": k, "started_utc": _now(),
                               "load1": round(os.getloadavg()[0], 2), "server_pid": server_pid,
                               "server_started_utc": started}  # fmt: skip
                        c0, s0 = _children_cpu_s(), take_snapshot(pgids, time.monotonic())
                        why = client.run(args + warm)
                        s1, c1 = take_snapshot(pgids, time.monotonic()), _children_cpu_s()
                        warm = []
                        if s0 is None and not state["no_proc"]:
                            state["no_proc"] = True
                            say("no /proc on this host: the runs' CPU-time columns are NaN (not measured)")
                        wall = (s1.t - s0.t) if s0 and s1 else float("nan")
                        if why or not (results / row["file"]).is_file():
                            session["failed"][row["file"]] = why or "no result file written"
                            say(f"failed {row['file']}: {why or 'no result file written'}")
                            continue
                        rec.update(wall_s=round(wall, 2), **load_split(s0, s1, extra_cpu_s=c1 - c0))
                        records[row["file"]] = rec
                        session["failed"].pop(row["file"], None)
                        session["measured"].append(row["file"])
                        state["done"] += 1
                        progress(row, k, wall)
                        _write_sidecar(plan, results, records)

    try:
        with _signals_raise():
            order = measure_order(plan)
            for i, (rep, model, runs) in enumerate(order):
                todo = []
                for row in runs.to_dict("records"):
                    path = results / row["file"]
                    if path.is_file():
                        mid = result_model_id(path)
                        served = str(Path(models_dir) / model) if models_dir else str(row["hf_id"])
                        if mid and not _same_model(mid, served):
                            raise DataError(
                                f"{path}: result of model {mid!r}, but the plan runs {served!r} there; move the "
                                "file away or give this campaign another output folder"
                            )
                        continue
                    max_len = int(
                        get_architecture(model).max_position or (row["input_len"] + row["output_len"])
                    )
                    reason = _skip_reason(row, spec.kv_space_gib, max_len)
                    if reason:
                        session["skipped"][row["file"]] = reason
                        say(f"skip {row['file']}: {reason}")
                        continue
                    todo.append(row)
                if todo:
                    measure(model, todo, f"r{rep}")
                    finish("running")
                end_of_repeat = i + 1 == len(order) or order[i + 1][0] != rep
                if protocol.rerun_flagged and end_of_repeat:
                    again = _move_flagged(plan[plan["repeat"] == rep], results, flagged_dir, records,
                                          flagged_records, session, say)  # fmt: skip
                    state["done"] -= sum(len(rows) for rows in again.values())  # moved away: measured again
                    for m, rows in again.items():
                        measure(m, rows, f"r{rep}-rerun")
                    if again:
                        finish("running")
    except TimeoutError:
        left = total - state["done"] - len(session["skipped"])
        say(f"time budget reached: {left} configuration(s) left; run the same command again to resume")
        return finish("budget")
    except KeyboardInterrupt:
        say("interrupted: the server is stopped; run the same command again to resume")
        finish("interrupted")
        raise
    except BaseException:
        finish("error")
        raise
    return finish("complete")


def _move_flagged(part: pd.DataFrame, results: Path, flagged_dir: Path, records: dict[str, dict],
                  flagged_records: dict[str, dict], session: dict,
                  say: Callable[[str], None]) -> dict[str, list[dict]]:  # fmt: skip
    """Move this repeat's flagged results that were not re-run yet to ``flagged/`` (with their records); returns the
    rows to re-run by model. A result whose flagged copy exists was re-run once already and stays as it is."""
    again: dict[str, list[dict]] = {}
    for row in part.to_dict("records"):
        f = row["file"]
        src, dst = results / f, flagged_dir / f
        if not src.is_file() or not _flag(records.get(f)) or dst.exists():
            continue
        flagged_dir.mkdir(exist_ok=True)
        os.replace(src, dst)
        flagged_records[f] = {**{c: row[c] for c in SIDECAR_COLUMNS[1:7]}, **records.pop(f)}
        session["reruns"][f] = f"{FLAGGED}/{f}"
        rec = flagged_records[f]
        say(f"outside load during {f} ({rec.get('outside_cpu')} cores outside, steal {rec.get('cpu_steal')}): "
            f"kept as {FLAGGED}/{f}, re-running it")  # fmt: skip
        again.setdefault(str(row["model"]), []).append(row)
    return again


def _engine_version(python: str) -> str:
    exe = shutil.which(python) or python
    try:
        out = subprocess.run(
            [exe, "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    except OSError as exc:
        raise EngineError(f"cannot run the engine's Python {python!r}: {exc}") from None
    return out.stdout.strip() or f"unknown ({last_line_text(out.stderr)})"


def last_line_text(text: str) -> str:
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `slim bench run`")
