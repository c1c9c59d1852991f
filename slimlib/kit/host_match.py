"""Whether this host is the device its runs are labelled with: the host micro-benchmark against the registry's peaks.

A CPU-engine campaign labels its runs with the registry's ``cpu`` device (`slimlib.registry.host_cpu`), whose peaks
were measured on the committed campaign's host. Another host can be another device under the same CPU name: on
2026-12-03 a 2-core "AMD EPYC" machine with AVX2 only (no AVX-512; ``data/engine-cpu-other-host/``) measured a bf16
GEMM of 0.28 GFLOP/s and a triad of 18.8 GB/s against the campaign host's 366-417 GFLOP/s and 30.6-53.3 GB/s, and
its served E2E was 1.6-13x the committed medians' on the 23 configurations it ran. Its runs under the ``cpu`` label
would be fitted with the wrong peaks and pooled with the committed sessions as if the host had only drifted. The
committed sessions' micro-benchmarks lie within 0.88-1.00x of the registry's GEMM peak and 0.92-1.60x of its
bandwidth (the triad of a 2-core virtual machine drifts most); `HOST_MATCH_FACTOR` allows 2x either way, which the
GEMM of a host without the campaign host's bf16 units misses by orders of magnitude.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from slimlib.errors import DataError
from slimlib.registry.gpus import GPU, get_gpu

__all__ = ["HOST_MATCH_FACTOR", "host_mismatch", "require_host", "require_host_for"]

#: the largest ratio, either way, between a measured peak and the device's for the host to be that device
HOST_MATCH_FACTOR = 2.0


def _measured(micro: Mapping) -> tuple[float, float]:
    """(bf16 GEMM peak FLOP/s, triad bytes/s) of a micro-benchmark record (`slimlib.kit.cpu_microbench`)."""
    try:
        return float(micro["gemm"]["peak_flops"]), float(micro["triad"]["peak_bytes_s"])
    except (KeyError, TypeError, ValueError):
        raise DataError(
            "micro-benchmark record without gemm.peak_flops and triad.peak_bytes_s; measure it again"
        ) from None


def host_mismatch(micro: Mapping, device: GPU) -> str | None:
    """None when the micro-benchmark's GEMM and triad peaks are both within `HOST_MATCH_FACTOR` of `device`'s
    ``peak_flops`` and ``mem_bw``; else what differs, in one line."""
    flops, bw = _measured(micro)
    off = []
    for what, got, want, unit in (
        ("bf16 GEMM", flops, device.peak_flops, "GFLOP/s"),
        ("triad", bw, device.mem_bw, "GB/s"),
    ):
        if not (want / HOST_MATCH_FACTOR <= got <= want * HOST_MATCH_FACTOR):
            off.append(f"{what} {got / 1e9:.3g} {unit} against {want / 1e9:.3g} ({got / want:.2g}x)")
    if not off:
        return None
    return f"this host measures {'; '.join(off)} of device `{device.name}`, beyond {HOST_MATCH_FACTOR}x either way"


def require_host(micro: Mapping, device: GPU, where: str) -> None:
    """DataError naming `where` when the micro-benchmark says this host is not `device` (`host_mismatch`)."""
    why = host_mismatch(micro, device)
    if why is not None:
        raise DataError(
            f"{where}: {why}: it is another device, and its runs would carry `{device.name}`'s peaks; measure on "
            f"the host whose peaks `{device.name}` holds (slimlib.registry), or register this host as a device of "
            "its own"
        )


def require_host_for(micro: Mapping, gpus: Iterable[object], where: str) -> None:
    """`require_host` for every distinct device name in `gpus` (a table's ``gpu`` column), each resolved once."""
    for name in dict.fromkeys(str(g) for g in gpus):
        require_host(micro, get_gpu(name), where)
