"""Peak compute and memory bandwidth of the host CPU, measured: a bf16 GEMM and a STREAM-style fp32 triad (torch).

These are the two numbers the SLIM equations take from a device (``P_max`` of Eq. 7, ``BW_max`` of Eq. 9). Both run
with torch on all the threads torch uses by default (`torch.get_num_threads()`), the way the CPU engine runs:

* GEMM: ``C = A @ B``, square ``n x n`` matrices in bfloat16 (the engine's dtype), ``2 n^3`` FLOP per product;
* triad: ``a = b + s c`` (``torch.add(b, c, alpha=s, out=a)``) on float32 arrays of `triad_mib` MiB each,
  ``3 x 4 N`` bytes per pass (STREAM counting: two reads, one write, no write-allocate traffic).

Each is repeated `repeats` times after one warm-up; the best repeat is the peak (STREAM's rule), the median is kept
beside it. Host facts (CPU model, cores, memory) are read from ``/proc`` where it exists.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np

from slimlib.errors import DataError

__all__ = ["host_facts", "measure_peaks"]


def _best_and_median(times: list[float]) -> tuple[float, float]:
    arr = np.asarray(times, dtype=float)
    return float(arr.min()), float(np.median(arr))


def measure_peaks(gemm_n: int = 2048, triad_mib: int = 256, repeats: int = 5) -> dict:
    """GEMM FLOP/s and triad bytes/s of this host (best and median over `repeats`), with what was run; DataError
    without PyTorch."""
    try:
        import torch
    except ImportError:
        raise DataError(
            "the host micro-benchmark needs PyTorch (pip install 'slimlib[profiling]', or torch's CPU build); or pass "
            "--no-microbenchmark"
        ) from None

    torch.manual_seed(0)
    a = torch.randn(gemm_n, gemm_n, dtype=torch.bfloat16)
    b = torch.randn(gemm_n, gemm_n, dtype=torch.bfloat16)
    torch.mm(a, b)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - t0)
    g_best, g_med = _best_and_median(times)
    flop = 2.0 * gemm_n**3
    n = triad_mib * 2**20 // 4
    x, y, z = (torch.ones(n, dtype=torch.float32) for _ in range(3))
    torch.add(y, z, alpha=3.0, out=x)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.add(y, z, alpha=3.0, out=x)
        times.append(time.perf_counter() - t0)
    t_best, t_med = _best_and_median(times)
    nbytes = 3.0 * 4 * n
    return {
        "library": f"torch {torch.__version__}",
        "threads": int(torch.get_num_threads()),
        "gemm": {"dtype": "bfloat16", "n": gemm_n, "flop": flop, "repeats": repeats,
                 "peak_flops": flop / g_best, "median_flops": flop / g_med},
        "triad": {"dtype": "float32", "elements": n, "bytes_per_pass": nbytes, "repeats": repeats,
                  "peak_bytes_s": nbytes / t_best, "median_bytes_s": nbytes / t_med},
    }  # fmt: skip


def _cpuinfo_model() -> str:
    return _cpuinfo_field("model name") or platform.processor() or platform.machine()


def _mem_total_bytes() -> int | None:
    p = Path("/proc/meminfo")
    if p.is_file():
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


#: instruction-set flags that set how fast the CPU engine's bf16 GEMMs and attention run (``/proc/cpuinfo``)
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8")


def _cpuinfo_field(key: str) -> str | None:
    """The first ``/proc/cpuinfo`` value of `key` (None without /proc or the key)."""
    p = Path("/proc/cpuinfo")
    if p.is_file():
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip().lower() == key:
                return value.strip()
    return None


def host_facts() -> dict:
    """CPU model (name, family, model, stepping, the `ISA_FLAGS` it has), logical cores (and those this process may
    use), total memory, OS and Python of this host. Two hosts of one CPU name can differ in all but the name."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    flags = _cpuinfo_field("flags")
    return {
        "cpu_model": _cpuinfo_model(),
        "cpu_family": _cpuinfo_field("cpu family"),
        "cpu_model_number": _cpuinfo_field("model"),
        "cpu_stepping": _cpuinfo_field("stepping"),
        "cpu_isa": None if flags is None else [f for f in ISA_FLAGS if f in flags.split()],
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "mem_total_bytes": _mem_total_bytes(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
