"""GPU registry: dense fp16/bf16 tensor peak FLOP/s, memory bandwidth and capacity, each with its source.

The SLIM equations use two hardware numbers: the peak compute ``P_max`` of prefill (Eq. 7) and the peak memory
bandwidth ``BW_max`` of decode (Eq. 9). Peaks here are *dense* (no 2:4 sparsity): NVIDIA data sheets print the
sparse figure, which is twice the dense one.

Capacities: HBM and GDDR capacities are quoted by vendors as "N GB" but built from binary-sized stacks/chips, so
``mem_bytes = N * 2**30`` and ``mem_gb`` gives back ``N``. The driver reports a little less (ECC and reserved
memory); where that was measured it is kept in ``mem_bytes_reported``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from slimlib.errors import UnknownNameError, close_matches_message
from slimlib.registry.host_cpu import HOST_CPU

__all__ = ["GPU", "get_gpu", "list_gpus", "gpu_names"]

_GIB = 2**30
_MIB = 2**20


@dataclass(frozen=True)
class GPU:
    """One accelerator: peaks and capacity, with the document each number comes from.

    `peak_flops` is dense fp16/bf16 tensor FLOP/s, `mem_bw` is peak memory bandwidth in bytes/s, `mem_bytes` the
    nominal memory capacity in bytes (``N * 2**30`` for an "N GB" part). `link_bw` (optional) is the peak
    one-direction bandwidth in bytes/s between two devices of a tensor-parallel group, the ring all-reduce's
    bottleneck link (see `slimlib.model.parallel`); `link_source` says where it comes from.
    """

    name: str
    peak_flops: float
    mem_bw: float
    mem_bytes: int
    aliases: tuple[str, ...] = ()
    source: str = ""
    notes: str = ""
    mem_bytes_reported: int | None = None
    link_bw: float | None = None
    link_source: str = ""

    @property
    def mem_gb(self) -> float:
        """Nominal capacity in the vendor's "GB" (binary: ``mem_bytes / 2**30``)."""
        return self.mem_bytes / _GIB

    @property
    def ridge_point(self) -> float:
        """Roofline ridge point ``peak_flops / mem_bw`` in FLOP/byte."""
        return self.peak_flops / self.mem_bw


_NV_H100 = "https://www.nvidia.com/en-us/data-center/h100/"

_GPUS: tuple[GPU, ...] = (
    GPU(
        name="h100-sxm-80gb",
        peak_flops=989.4e12,
        mem_bw=3.35e12,
        mem_bytes=80 * _GIB,
        aliases=("h100", "h100-sxm", "h100-80gb", "h100-sxm5", "h100-sxm5-80gb", "h100-80gb-hbm3"),
        source=(
            "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column (FP16/BF16 Tensor Core 1,979 TFLOPS with "
            f"sparsity, i.e. 989.4 dense; 80 GB HBM3; 3.35 TB/s), {_NV_H100}"
        ),
    ),
    GPU(
        name="h100-sxm-64gb",
        peak_flops=989.4e12,
        mem_bw=1.631232e12,
        mem_bytes=64 * _GIB,
        aliases=(
            "h100-64gb",
            "h100-sxm5-64gb",
            "h100-64gb-hbm2e",
            "h100-sxm-64gb-hbm2e",
            "mn5-h100",
            "mn5-acc",
        ),
        source=(
            "MareNostrum 5 ACC node GPU ('4x NVIDIA Hopper H100 64GB HBM2', BSC Support Knowledge Center, "
            "MareNostrum 5 system overview). Peak FLOP/s: an SXM5 H100 (132 SMs, 1.83 GHz boost), as for "
            "h100-sxm-80gb; the SLIM paper quotes 989 TFLOP/s for this GPU. Bandwidth derived, not on a data "
            "sheet: memory clock 1593 MHz (nvidia-smi dmon 'mclk' in every run of the public "
            "vLLMBatchingMemoryGap measurements) x 2 (double data rate) x 4096-bit bus (4 HBM2e stacks of 16 GB) "
            "/ 8 = 1.631 TB/s."
        ),
        notes=(
            "No vendor data sheet exists for this SKU. The bandwidth assumes 4 active 1024-bit HBM2e stacks "
            "(64 GB / 16 GB per stack, the stack size of the 80 GB H100 PCIe, whose 5 stacks at the same 1593 MHz "
            "give its 2.04 TB/s). Were the bus 5120 bits wide, as on the 80 GB parts, it would be 2.04 TB/s: treat "
            "1.63 TB/s as the best estimate, uncertain by up to +25%. nvidia-smi reports memory.total 65247 MiB."
        ),
        mem_bytes_reported=65247 * _MIB,
    ),
    GPU(
        name="h100-pcie-80gb",
        peak_flops=756.5e12,
        mem_bw=2.0e12,
        mem_bytes=80 * _GIB,
        aliases=("h100-pcie", "h100-pcie5", "h100-pcie-80gb-hbm2e"),
        source=(
            "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column (FP16/BF16 Tensor Core 1,513 TFLOPS with "
            f"sparsity, i.e. 756.5 dense; 80 GB HBM2e; 2 TB/s), {_NV_H100}"
        ),
        notes="1593 MHz x 2 x 5120 bit / 8 gives 2.04 TB/s; the data sheet rounds to 2 TB/s.",
    ),
    GPU(
        name="h200-sxm-141gb",
        peak_flops=989.4e12,
        mem_bw=4.8e12,
        mem_bytes=141 * _GIB,
        aliases=("h200", "h200-sxm", "h200-141gb", "h200-sxm5"),
        source=(
            "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column (FP16/BF16 Tensor Core 1,979 TFLOPS with "
            "sparsity, i.e. 989.4 dense; 141 GB HBM3e; 4.8 TB/s), https://www.nvidia.com/en-us/data-center/h200/"
        ),
    ),
    GPU(
        name="gh200-96gb",
        peak_flops=989.4e12,
        mem_bw=4.0e12,
        mem_bytes=96 * _GIB,
        aliases=("gh200", "gh200-480gb", "gh200-96gb-hbm3", "grace-hopper"),
        source=(
            "NVIDIA GH200 Grace Hopper Superchip datasheet, 96 GB HBM3 version (GPU FP16 Tensor Core 1,979 TFLOPS "
            "with sparsity, i.e. 989.4 dense; 4 TB/s), https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/"
        ),
        notes="GPU memory only; the Grace CPU's LPDDR5X (reachable over NVLink-C2C) is not counted.",
    ),
    GPU(
        name="a100-sxm-80gb",
        peak_flops=312e12,
        mem_bw=2.039e12,
        mem_bytes=80 * _GIB,
        aliases=("a100", "a100-80gb", "a100-sxm", "a100-sxm4", "a100-sxm4-80gb"),
        source=(
            "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column (FP16/BF16 Tensor Core 312 TFLOPS dense, "
            "624 with sparsity; 80 GB HBM2e; 2,039 GB/s), https://www.nvidia.com/en-us/data-center/a100/"
        ),
    ),
    GPU(
        name="a100-sxm-40gb",
        peak_flops=312e12,
        mem_bw=1.555e12,
        mem_bytes=40 * _GIB,
        aliases=("a100-40gb", "a100-sxm4-40gb"),
        source=(
            "NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM column (FP16/BF16 Tensor Core 312 TFLOPS dense; "
            "40 GB HBM2; 1,555 GB/s), https://www.nvidia.com/en-us/data-center/a100/"
        ),
    ),
    GPU(
        name="l40s",
        peak_flops=362.05e12,
        mem_bw=864e9,
        mem_bytes=48 * _GIB,
        aliases=("l40s-48gb",),
        source=(
            "NVIDIA L40S datasheet (FP16/BF16 Tensor Core 362.05 TFLOPS dense, 733 with sparsity; 48 GB GDDR6; "
            "864 GB/s), https://www.nvidia.com/en-us/data-center/l40s/"
        ),
    ),
    GPU(
        name="mi300x",
        peak_flops=1307.4e12,
        mem_bw=5.3e12,
        mem_bytes=192 * _GIB,
        aliases=("instinct-mi300x", "mi300x-192gb"),
        source=(
            "AMD Instinct MI300X data sheet (peak FP16/BF16 matrix 1,307.4 TFLOPS dense, 2,614.9 with sparsity; "
            "192 GB HBM3; 5.3 TB/s), https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"
        ),
        link_bw=64e9,
        link_source=(
            "AMD Instinct MI300X data sheet: 7 AMD Infinity Fabric links, 128 GB/s peak (bidirectional) each, "
            "896 GB/s aggregate; in the 8-GPU OAM platform every pair of GPUs shares one link, i.e. 64 GB/s per "
            "direction between two GPUs, https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"
        ),
    ),
    GPU(
        name="mi250-gcd",
        peak_flops=181.05e12,
        mem_bw=1.6384e12,
        mem_bytes=64 * _GIB,
        aliases=("mi250-die", "mi250-64gb", "instinct-mi250-gcd"),
        source=(
            "One of the two graphics compute dies (GCDs) of an AMD Instinct MI250 OAM card, which ROCm exposes as "
            "one GPU: half of the card's data sheet figures (peak FP16 matrix 362.1 TFLOPS -> 181.05; 128 GB "
            "HBM2e -> 64 GB; 3.2768 TB/s -> 1.6384 TB/s), "
            "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250.html"
        ),
        notes=(
            "LLM-Inference-Bench's 'AMD MI250 GPU' is the whole card (two of these dies, run with tensor parallel "
            "2 x 'Num of Hardware'); see slimlib.data.llmib for the evidence."
        ),
        link_bw=50e9,
        link_source=(
            "AMD Instinct MI250 data sheet: Infinity Fabric links at 100 GB/s peak (bidirectional) each, i.e. "
            "50 GB/s per direction; the two dies of one card are joined by 4 such links (AMD CDNA 2 white paper), "
            "dies of different cards by one, which bounds a ring spanning cards, "
            "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250.html"
        ),
    ),
    GPU(
        name="mi250",
        peak_flops=362.1e12,
        mem_bw=3.2768e12,
        mem_bytes=128 * _GIB,
        aliases=("instinct-mi250", "mi250-128gb", "mi250-oam", "mi250-card"),
        source=(
            "AMD Instinct MI250 (OAM) data sheet: peak FP16 matrix 362.1 TFLOPS, 128 GB HBM2e, 3.2768 TB/s, "
            "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250.html"
        ),
        notes=(
            "The whole card: two dies (mi250-gcd) that software sees as two GPUs. A model served on one card runs "
            "with tensor parallel 2 over the dies; prefer mi250-gcd with tensor_parallel = 2 per card."
        ),
        link_bw=200e9,
        link_source="4 Infinity Fabric links of 50 GB/s per direction join the two dies (AMD CDNA 2 white paper)",
    ),
)

_GPUS += (GPU(**HOST_CPU),)  # the host CPU as a device (measured; slimlib.registry.host_cpu)


def _normalize(name: str) -> str:
    """Lower-case, spaces/underscores to '-', vendor prefix dropped: 'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3'."""
    key = re.sub(r"[\s_]+", "-", str(name).strip().lower())
    for prefix in ("nvidia-", "amd-"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return key


def _build_index() -> dict[str, GPU]:
    index: dict[str, GPU] = {}
    for gpu in _GPUS:
        for key in (gpu.name, *gpu.aliases):
            k = _normalize(key)
            if k in index and index[k] is not gpu:
                raise RuntimeError(f"GPU alias {key!r} is used twice")  # pragma: no cover - registry bug
            index[k] = gpu
    return index


_INDEX = _build_index()


def gpu_names() -> list[str]:
    """Canonical GPU names, sorted."""
    return sorted(g.name for g in _GPUS)


def get_gpu(name: str | GPU) -> GPU:
    """The GPU called `name` (case-insensitive; aliases such as 'h100', 'H100-SXM', 'a100', 'NVIDIA H100 80GB HBM3').

    Raises UnknownNameError listing the closest known names.
    """
    if isinstance(name, GPU):
        return name
    gpu = _INDEX.get(_normalize(name))
    if gpu is None:
        raise UnknownNameError(close_matches_message("GPU", name, gpu_names()) + "; see `slim gpus`")
    return gpu


def list_gpus(names: Iterable[str] | None = None) -> pd.DataFrame:
    """The registry as a table: name, peak_tflops, mem_bw_tb_s, mem_gb, aliases, source, notes; sorted by name.

    `names` (optional): only these GPUs (names or aliases), in the given order.
    """
    gpus = sorted(_GPUS, key=lambda g: g.name) if names is None else [get_gpu(n) for n in names]
    rows = [
        {
            "name": g.name,
            "peak_tflops": round(g.peak_flops / 1e12, 6),
            "mem_bw_tb_s": round(g.mem_bw / 1e12, 9),
            "mem_gb": round(g.mem_gb, 6),
            "aliases": ", ".join(g.aliases),
            "source": g.source,
            "notes": g.notes,
        }
        for g in gpus
    ]
    return pd.DataFrame(rows)
