"""Parsers of the benchmark job logs `log_<job>.out` / `log_<job>.err` (slurm stdout/stderr of one launch attempt).

Offline profiler logs give the prefill and decode elapsed times and step counts; online logs give the printed
benchmark summary. Both give the reason an attempt failed (port bind, server start, time limit, crash, preemption).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from slimlib.errors import DataError

_JOB = re.compile(r"^log_(\d+)\.(out|err)$")
_FLOAT = r"([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"


def read_text(path: Path) -> str:
    """File text, undecodable bytes replaced (progress bars may hold them); never modifies the file."""
    return path.read_bytes().decode("utf-8", errors="replace")


def job_logs(run_dir: Path) -> dict[str, tuple[Path | None, Path | None]]:
    """Map job id -> (.out path, .err path) for the `log_<job>.*` files of a run folder."""
    jobs: dict[str, list[Path | None]] = {}
    for f in sorted(run_dir.iterdir()):
        m = _JOB.match(f.name)
        if m:
            pair = jobs.setdefault(m.group(1), [None, None])
            pair[0 if m.group(2) == "out" else 1] = f
    return {k: (v[0], v[1]) for k, v in sorted(jobs.items(), key=lambda kv: int(kv[0]))}


def failure_reason(out_text: str, err_text: str, server_err_text: str = "") -> tuple[str, str]:
    """(reason, detail) for an attempt that produced no result; `server_err_text` is the vLLM server's stderr.

    Reasons: ``port_bind_failure``, ``server_start_failure``, ``timeout``, ``cancelled``, ``preemption``,
    ``crash``, ``incomplete`` (no result and no error message)."""
    both = out_text + "\n" + err_text
    if "Address already in use" in both + server_err_text:
        return (
            "port_bind_failure",
            "vLLM server could not bind its port (OSError: [Errno 98] Address already in use)",
        )
    m = re.search(r"CANCELLED AT (\S+)( DUE TO TIME LIMIT)?", both)
    if m and m.group(2):
        return "timeout", f"slurm job cancelled at {m.group(1)} due to the time limit"
    if "did not start on time" in both:
        return "server_start_failure", "vLLM server did not start on time"
    if m:
        return "cancelled", f"slurm job cancelled at {m.group(1)}"
    if re.search(r"is preempted by PreemptionMode", both):
        last = _last_line(err_text, r"(Error|Exception)\b")
        return "preemption", "requests preempted (KV cache full)" + (f"; then {last}" if last else "")
    if "Traceback" in both or "==ERROR==" in both:
        last = _last_line(both, r"(Error|Exception)\b")
        return "crash", last or "traceback in the job log"
    return "incomplete", "no result and no error message in the job log"


def _last_line(text: str, pattern: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if re.search(pattern, ln) and "Warning" not in ln]
    if not lines:
        return ""
    line = re.sub(r"^\[rank\d+\]:\s*", "", lines[-1])
    line = re.sub(r"\(input dumped to [^)]*\)", "", line)
    return line[:160]


_NS_ITEM = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,()]+)")


def parse_namespace(out_text: str) -> dict[str, str]:
    """Arguments the online benchmark printed as `Namespace(...)` (values as text, quotes removed); {} if none."""
    m = re.search(r"^Namespace\((.*)\)\s*$", out_text, re.MULTILINE)
    if m is None:
        return {}
    return {k: v.strip().strip("'\"") for k, v in _NS_ITEM.findall(m.group(1))}


def namespace_agrees(ns: dict[str, str], option: str, value: str | None) -> bool | None:
    """Whether launcher option `option` with `value` ('' for a flag, None for absent) agrees with a printed
    Namespace: looked up as a benchmark argument, else inside its `server_args`; None when it cannot be told."""
    key = option.lstrip("-").replace("-", "_")
    if key in ns:
        if value is None:
            return ns[key] in ("False", "None")
        return ns[key] == "True" if value == "" else ns[key] == value
    if "server_args" in ns:
        tokens = ns["server_args"].split()
        if value is None:
            return not any(t == option or t.startswith(option + "=") for t in tokens)
        return (option in tokens) if value == "" else (f"{option}={value}" in tokens)
    return None


@dataclass(frozen=True)
class OnlineSummary:
    """The benchmark summary block an online job printed (values rounded as printed)."""

    successful_requests: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int


def parse_online_summary(out_text: str) -> OnlineSummary | None:
    """The printed 'Serving Benchmark Result' block of an online job log, or None when the job printed none."""
    if "Serving Benchmark Result" not in out_text:
        return None
    fields = {
        "successful_requests": r"Successful requests:\s+(\d+)",
        "duration_s": r"Benchmark duration \(s\):\s+" + _FLOAT,
        "total_input_tokens": r"Total input tokens:\s+(\d+)",
        "total_output_tokens": r"Total generated tokens:\s+(\d+)",
    }
    values = {}
    for key, pat in fields.items():
        m = re.search(pat, out_text)
        if m is None:
            return None
        values[key] = float(m.group(1)) if key == "duration_s" else int(m.group(1))
    return OnlineSummary(**values)


@dataclass(frozen=True)
class OfflineLog:
    """What an offline profiler job logged. A `PREFILL - k` line reports the step before it (line 0 is the initial
    state), so prefill steps are the lines with previously run prefills > 0; every `DECODE - k` line follows a step."""

    prompt_len: int
    output_len: int
    batch_size: int
    prefill_s: float | None
    decode_s: float | None
    init_s: float | None
    total_s: float | None
    n_prefill_steps: int
    n_decode_steps: int
    vllm_version: str
    backend: str
    gpu_blocks: int | None
    preempted: bool


def parse_offline_log(out_path: Path) -> OfflineLog:
    """Parse an offline profiler `log_*.out`; times are None when the job stopped before printing them.

    Backend is "xformers" when vLLM logged 'Using XFormers backend', else "flash" (vLLM's default FlashAttention
    backend on Hopper, which logs nothing). Raises DataError when the run header (prompt/output/batch) is missing.
    """
    text = read_text(out_path)
    header = {}
    for key in ("prompt_len", "output_len", "batch_size"):
        m = re.search(rf"^\s*{key} = (\d+)\s*$", text, re.MULTILINE)
        if m is None:
            raise DataError(
                f"{out_path}: no '{key} = N' line; not an offline profiler log (or truncated at the start)"
            )
        header[key] = int(m.group(1))

    def seconds(label: str) -> float | None:
        m = re.search(rf"^{label} elapsed time: {_FLOAT} seconds", text, re.MULTILINE)
        return float(m.group(1)) if m else None

    version = re.search(r"Initializing an LLM engine \(v([^)]+)\)", text)
    blocks = re.search(r"# GPU blocks: (\d+)", text)
    return OfflineLog(
        prompt_len=header["prompt_len"],
        output_len=header["output_len"],
        batch_size=header["batch_size"],
        prefill_s=seconds("Prefill"),
        decode_s=seconds("Decode"),
        init_s=seconds("Initialization"),
        total_s=seconds("Total"),
        n_prefill_steps=sum(
            int(n) > 0 for n in re.findall(r"^PREFILL - \d+ -> PREVIOUSLY RUN PREFILLS: (\d+)", text, re.M)
        ),
        n_decode_steps=len(re.findall(r"^DECODE - \d+ ->", text, re.MULTILINE)),
        vllm_version=version.group(1) if version else "",
        backend="xformers" if "Using XFormers backend" in text else "flash",
        gpu_blocks=int(blocks.group(1)) if blocks else None,
        preempted=bool(re.search(r"is preempted by PreemptionMode", text)),
    )
