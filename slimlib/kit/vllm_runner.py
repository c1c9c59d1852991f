"""Run a calibration plan on a real vLLM engine: start ``vllm serve``, run ``vllm bench serve`` per configuration.

The plan is the table `slim plan` writes (``plan.csv``: model, hf_id, gpu, batch_size, input_len, output_len,
num_prompts, file; optional ``repeat``). One server serves every configuration of a model with
``--max-num-seqs`` at the model's largest batch size; each client run caps the batch with ``--max-concurrency B``
(ingest takes the smaller of the two caps as the batch size). Lengths are fixed (``--dataset-name random
--random-range-ratio 0 --ignore-eos``), the seed is the repeat index, every result is saved (``--save-result``).

* Resume: a configuration whose result file exists (same model) is skipped; a result file written for another
  model is refused (DataError), never overwritten.
* Reported skips, never silent gaps: IL + OL beyond the model's window, or a batch whose requests do not fit the
  KV cache the engine was given (CPU backend: ``VLLM_CPU_KVCACHE_SPACE``).
* The server runs in its own process group and is stopped on exit, error or interrupt (SIGINT/SIGTERM).
* A server that does not come up raises EngineError with the last line of its log; a busy port is replaced by a
  free one (reported).
* ``manifest.json`` (rewritten after every server): engine and version, host, server flags and environment, dates,
  the load average every minute, the host micro-benchmark, and the sha256 of every result file.

The command lines come from the caller (`ArgvBuilders`: the CLI passes `slimlib.advisor.commands`' builders, the
ones `slim plan` writes into its scripts, so both paths run the same commands). The CPU build (``vllm-cpu``) is driven through `vllm_cpu_launcher.py` (its console script is broken, see there),
which can also run a server's configurations in one client process; a GPU build runs the ``vllm`` command
unchanged (`EngineSpec.gpu`), with real weights.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import math
import os
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from slimlib.errors import DataError, SlimError
from slimlib.io import write_text
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import GIB
from slimlib.registry.host_cpu import HOST_CPU_KV_SPACE_GIB

__all__ = [
    "ArgvBuilders",
    "EngineError",
    "EngineSpec",
    "run_plan",
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
    """``server(model, max_num_seqs, max_model_len, port, tensor_parallel)`` -> argv starting ``vllm serve``;
    ``client(row, result_dir, port)`` -> argv starting ``vllm bench serve``."""

    server: Callable[..., list[str]]
    client: Callable[..., list[str]]


class EngineError(SlimError):
    """The engine did not start or a run could not be made."""


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
        return cls((python, str(LAUNCHER)), env, True, kv_space_gib, batched_client, "vllm-cpu", python)

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
          say: Callable[[str], None] = print) -> Iterator[tuple[list[str], int]]:  # fmt: skip
    """Start ``vllm serve`` (own process group), wait for ``/health``, yield (argv, port); stop it on exit."""
    if not port_free(port):
        new = free_port()
        say(f"port {port} is in use; serving on port {new} instead")
        port = new
    argv = [*spec.command, *argvs.server(model_path, max_num_seqs, max_model_len, port, tensor_parallel)[1:]]
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
            time.sleep(1.0)
        say(f"server for {Path(model_path).name} ready on port {port} after {time.monotonic() - t0:.0f} s")
        yield argv, port
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


def bench_argv(
    argvs: ArgvBuilders, row, result_dir: Path, port: int, served: str, max_num_seqs: int, gpu: str
) -> list[str]:
    """Arguments after ``vllm bench serve`` for one configuration (fixed lengths, seed = repeat index)."""
    r = dict(row)
    r["hf_id"] = served
    r["gpu"] = gpu
    args = argvs.client(r, str(result_dir), port)[3:]
    i = args.index("--metadata")
    args[i + 1] = f"max_num_seqs={max_num_seqs}"
    return [*args, "repeat=" + str(int(row["repeat"])), "--random-range-ratio", "0",
            "--seed", str(int(row["repeat"])), "--ready-check-timeout-sec", "0", "--disable-tqdm"]  # fmt: skip


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


def _run_clients(spec: EngineSpec, todo: list[tuple[dict, list[str]]], log: Path, env: dict,
                 on_done: Callable[[dict, float], None], deadline: float | None) -> dict[str, str]:  # fmt: skip
    """Run the client of every (row, argv); returns {file: failure reason} of the runs that failed."""
    failures: dict[str, str] = {}
    full_env = {**os.environ, **env}
    if spec.batched_client:
        with tempfile.TemporaryDirectory(prefix="slim-bench-") as tmp:
            runs = Path(tmp) / "runs.json"
            runs.write_text(json.dumps([a for _, a in todo]), encoding="utf-8")
            with open(log, "a", encoding="utf-8") as fh:
                proc = subprocess.Popen([*spec.command, "bench-serve-many", str(runs)], stdout=subprocess.PIPE,
                                        stderr=fh, text=True, env=full_env, start_new_session=True)  # fmt: skip
                try:
                    assert proc.stdout is not None
                    for line in proc.stdout:
                        fh.write(line)
                        parts = line.split(maxsplit=3)
                        if len(parts) >= 3 and parts[0] in ("SLIM-RUN-DONE", "SLIM-RUN-FAILED"):
                            row = todo[int(parts[1])][0]
                            if parts[0] == "SLIM-RUN-DONE":
                                on_done(row, float(parts[2]))
                            else:
                                failures[row["file"]] = " ".join(parts[2:]).strip()
                        if deadline is not None and time.monotonic() > deadline:
                            raise TimeoutError
                    proc.wait()
                finally:
                    stop_group(proc, grace_s=5)
        return failures
    for row, args in todo:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError
        t0 = time.monotonic()
        with open(log, "a", encoding="utf-8") as fh:
            one = subprocess.Popen([*spec.command, "bench", "serve", *args], stdout=fh, stderr=subprocess.STDOUT,
                                    env=full_env, start_new_session=True)  # fmt: skip
            try:
                rc = one.wait()
            finally:
                stop_group(one, grace_s=5)
        if rc != 0:
            failures[row["file"]] = f"vllm bench serve exited with status {rc}: {last_line(log)}"
        else:
            on_done(row, time.monotonic() - t0)
    return failures


# ----------------------------------------------------------------------------------------------- the campaign


def _write_sidecar(plan: pd.DataFrame, result_dir: Path) -> None:
    done = plan[[(result_dir / f).is_file() for f in plan["file"]]]
    cols = ["file", "batch_size", "input_len", "output_len", "model", "gpu"]
    write_text(result_dir / SIDECAR, done[cols].to_csv(index=False, lineterminator="\n"))


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
    say: Callable[[str], None] = print,
) -> dict:
    """Measure every configuration of `plan` not yet in ``out_dir/results``; returns the manifest (also written).

    `models_dir`: folder holding one served folder per model name (CPU testbed); without it the plan's ``hf_id`` is
    served. `budget_s` stops (resumably) after that many seconds. `microbenchmark`/`host` return the host's peaks
    and facts for the manifest (run once, at the start of a session)."""
    plan = _check_plan(plan)
    out = Path(out_dir)
    results = out / "results"
    logs = out / "logs"
    results.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    mpath = out / MANIFEST
    manifest = json.loads(mpath.read_text(encoding="utf-8")) if mpath.is_file() else {"sessions": []}
    session: dict = {"started_utc": _now(), "engine": spec.name, "engine_command": list(spec.command),
                     "engine_env": dict(spec.env), "dummy_weights": spec.dummy_weights,
                     "batched_client": spec.batched_client, "servers": {}, "measured": [], "skipped": {},
                     "failed": {}}  # fmt: skip
    manifest["sessions"].append(session)
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
    total, n_done = len(plan), 0

    def finish(state: str) -> dict:
        session["load"] = sampler.stop() if state != "running" else list(sampler.samples)
        session["ended_utc"], session["state"] = _now(), state
        session["wall_s"] = round(time.monotonic() - t_start, 1)
        _write_sidecar(plan, results)
        manifest["results"] = [
            {"file": p.name, "sha256": sha256_file(p)} for p in sorted(result_files(plan, results))
        ]
        manifest["plan_rows"] = total
        write_text(mpath, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        return manifest

    try:
        with _signals_raise():
            for model, runs in plan.groupby("model", sort=False):
                arch = get_architecture(str(model))
                served = str(Path(models_dir) / str(model)) if models_dir else str(runs["hf_id"].iloc[0])
                max_len = int(arch.max_position or (runs["input_len"] + runs["output_len"]).max())
                todo = []
                for _, row in runs.iterrows():
                    path = results / row["file"]
                    if path.is_file():
                        mid = result_model_id(path)
                        if mid and not _same_model(mid, served):
                            raise DataError(
                                f"{path}: result of model {mid!r}, but the plan runs {served!r} there; move the "
                                "file away or give this campaign another output folder"
                            )
                        n_done += 1
                        continue
                    reason = _skip_reason(row, spec.kv_space_gib, max_len)
                    if reason:
                        session["skipped"][row["file"]] = reason
                        say(f"skip {row['file']}: {reason}")
                        continue
                    todo.append(row.to_dict())
                if not todo:
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError
                b_max = int(max(r["batch_size"] for r in todo))
                tp = int(todo[0].get("tensor_parallel", 1) or 1)
                env = dict(spec.env)
                with tempfile.TemporaryDirectory(prefix="slim-vllm-cache-") as cache:
                    env.setdefault("VLLM_CACHE_ROOT", cache)
                    with serve(spec, argvs, served, b_max, max_len, port, logs / f"server-{model}.log", tp,
                               startup_timeout_s, env, say) as (argv, used_port):  # fmt: skip
                        session["servers"][str(model)] = argv
                        gpu = str(todo[0]["gpu"])
                        pairs = [
                            (r, bench_argv(argvs, r, results, used_port, served, b_max, gpu)) for r in todo
                        ]
                        pairs[0][1].extend(["--num-warmups", "1"])  # first requests after start-up: not timed

                        def on_done(row: dict, secs: float) -> None:
                            nonlocal n_done
                            n_done += 1
                            session["measured"].append(row["file"])
                            el = time.monotonic() - t_start
                            say(f"[{n_done}/{total}] {row['model']} B={int(row['batch_size'])} "
                                f"IL={int(row['input_len'])} OL={int(row['output_len'])} r{int(row['repeat'])}: "
                                f"{secs:.1f} s (elapsed {el / 60:.1f} min)")  # fmt: skip

                        fails = _run_clients(
                            spec, pairs, logs / f"client-{model}.log", env, on_done, deadline
                        )
                        for f, why in fails.items():
                            if not (results / f).is_file():
                                session["failed"][f] = why
                                say(f"failed {f}: {why}")
                finish("running")
    except TimeoutError:
        left = total - n_done - len(session["skipped"])
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
