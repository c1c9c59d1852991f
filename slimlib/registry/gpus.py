"""GPU registry: dense tensor peak FLOP/s per precision, memory bandwidth and capacity, interconnect bandwidth and
all-reduce latency, each with its source. Every module resolves GPU names and labels here (`get_gpu`, `gpu_label`).

The SLIM equations use two hardware numbers: the peak compute ``P_max`` of prefill (Eq. 7) and the peak memory
bandwidth ``BW_max`` of decode (Eq. 9). Peaks here are *dense* (no 2:4 sparsity): NVIDIA data sheets print the
sparse figure, which is twice the dense one. `peak_flops` is the fp16/bf16 peak; `peak_flops_fp8` and
`peak_flops_fp4` are the fp8 and fp4 peaks where the data sheet gives one (`peak_for` picks by precision).

Tensor parallelism (`slimlib.model.parallel`): `link_bw` is the one-direction bandwidth of a link and
`link_kind` how the group is wired: ``"switch"`` (NVLink through NVSwitch, or PCIe through the host: each GPU
reaches every peer at `link_bw` in all) or ``"pair"`` (a fully connected mesh, e.g. AMD Infinity Fabric: each
pair of GPUs has its own `link_bw`). `allreduce_latency_s` is the small-message all-reduce latency by group
size, measured by NVIDIA AIConfigurator (vLLM custom all-reduce, CUDA-graph backend, 128 bf16 elements) where
the shared data has the GPU, else the H100 SXM figures, labelled as a proxy in `allreduce_source`.

Capacities: HBM and GDDR capacities are quoted by vendors as "N GB" but built from binary-sized stacks/chips, so
``mem_bytes = N * 2**30`` and ``mem_gb`` gives back ``N``. The driver reports a little less (ECC and reserved
memory); where that was measured it is kept in ``mem_bytes_reported``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

import pandas as pd

from slimlib.errors import DataError, UnknownNameError, close_matches_message
from slimlib.registry.host_cpu import HOST_CPUS

__all__ = ["GIB", "GPU", "get_gpu", "gpu_label", "list_gpus", "gpu_names", "PRECISIONS"]

#: one GiB, 2**30 bytes: the package's one memory unit (every ``_gib`` memory column and message)
GIB = 2**30
_GIB = GIB
_MIB = 2**20

#: precisions of the tensor peaks (`GPU.peak_for`): 16-bit floats share one peak, fp8 and fp4 have their own
PRECISIONS = ("fp16", "fp8", "fp4")
LINK_KINDS = ("switch", "pair")


@dataclass(frozen=True)
class GPU:
    """One accelerator: peaks and capacity, with the document each number comes from.

    `peak_flops` is dense fp16/bf16 tensor FLOP/s, `mem_bw` is peak memory bandwidth in bytes/s, `mem_bytes` the
    nominal memory capacity in bytes (``N * 2**30`` for an "N GB" part). `peak_flops_fp8`/`peak_flops_fp4`: dense
    fp8/fp4 tensor FLOP/s (None: the GPU has no such tensor cores or the data sheet gives no figure). `link_bw` is
    the peak one-direction interconnect bandwidth in bytes/s, per GPU (``link_kind`` "switch") or per GPU pair
    ("pair"), see the module docstring; `link_source` says where it comes from. `allreduce_latency_s` holds
    (group size, seconds) pairs of the small-message all-reduce latency, `allreduce_source` their origin (a source
    that begins with ``proxy`` marks another GPU's figures: `allreduce_proxy`).
    `label` is the short name figures and tables print. `decode_gemm_flops`: FLOP/s the serving engine's decode
    GEMMs sustain at their compute roof, measured with the engine's own kernel and thread count (None: not measured;
    the decode GEMMs then run at the prefill's efficiency of `peak_flops`), `decode_gemm_source` its origin.
    `decode_gemm_curve`: (tokens, seconds per weight) of the same measured pass at each token count measured (empty:
    not measured; with it, the recommended model's decode GEMMs follow the curve, `slimlib.model.terms.rooflines`).
    `decode_attention_eff`: bandwidth efficiency (bytes read / (time x `mem_bw`)) of the serving engine's decode
    attention kernel, measured (None: not measured; the recommended model then fits ``eta_attn``), with
    `decode_attention_source` its origin (`slimlib.model.terms.recommended.ATTENTION_FACTOR`).
    `prefill_attention_flops`: FLOP/s of the serving engine's prefill attention kernel on a causal prompt, in the
    causal count ``2 IL^2 D`` per layer, measured (None: not measured; the prompt's attention then runs at the
    prefill's efficiency of `peak_flops`), `prefill_attention_source` its origin
    (`slimlib.model.terms.recommended.SERVED_PREFILL`). `layer_floor_s`: the latency floor of one decoder
    layer's decode kernels, the part of a layer's decode time that tensor parallelism does not divide, measured
    (None: not measured; the recommended model's decode GEMMs then have none,
    `slimlib.model.terms.rooflines.DECODE_GEMMS`), and
    `layer_floor_eff` the bandwidth efficiency of the same measured line (time = floor + bytes / (eff x `mem_bw`)),
    with `layer_floor_source` their origin (`slimlib.experiments.kernel_timing.layer_floor`).
    `linear_prefill_token_s`, `linear_prefill_flops`, `linear_conv_bw`: the serving engine's Gated DeltaNet prefill
    kernels, measured (None: not measured; the recommended model then prices the recurrence's FLOPs at the
    prefill's efficiency of `peak_flops` and the convolution at `mem_bw`): seconds per prompt token of one layer's
    chunked recurrence on a mostly idle device, its FLOP/s on a full one, and the causal convolution's bytes/s,
    with `linear_prefill_source` their origin (`slimlib.model.equations.linear_prefill_time`).
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
    link_kind: str = "switch"
    allreduce_latency_s: tuple[tuple[int, float], ...] = ()
    allreduce_source: str = ""
    peak_flops_fp8: float | None = None
    peak_flops_fp4: float | None = None
    label: str = ""
    #: CUDA compute capability (NVIDIA; 0 for other vendors): vLLM's fp8 and fp4 weight methods need 7.5 or 8.0
    #: (`slimlib.model.serving`; weight-only kernels below the precision's own tensor cores), CUDA GPUs list,
    #: https://developer.nvidia.com/cuda-gpus
    compute_capability: float = 0.0
    #: devices software sees on this entry (2 for a whole MI250 card: its two dies); memory is per entry
    dies: int = 1
    decode_gemm_flops: float | None = None
    decode_gemm_source: str = ""
    decode_gemm_curve: tuple[tuple[int, float], ...] = ()
    decode_attention_eff: float | None = None
    decode_attention_source: str = ""
    prefill_attention_flops: float | None = None
    prefill_attention_source: str = ""
    layer_floor_s: float | None = None
    layer_floor_eff: float | None = None
    layer_floor_source: str = ""
    linear_prefill_token_s: float | None = None
    linear_prefill_flops: float | None = None
    linear_conv_bw: float | None = None
    linear_prefill_source: str = ""

    @property
    def mem_gb(self) -> float:
        """Nominal capacity in the vendor's "GB" (binary: ``mem_bytes / 2**30``)."""
        return self.mem_bytes / _GIB

    @property
    def allreduce_proxy(self) -> bool:
        """Whether `allreduce_latency_s` is another GPU's figures (its source begins with ``proxy``), not measured on
        this GPU."""
        return self.allreduce_source.startswith("proxy")

    @property
    def ridge_point(self) -> float:
        """Roofline ridge point ``peak_flops / mem_bw`` in FLOP/byte."""
        return self.peak_flops / self.mem_bw

    @property
    def peaks(self) -> dict[str, float]:
        """Dense tensor peak FLOP/s per precision the GPU has one at (`PRECISIONS`: "fp16" covers fp16 and bf16)."""
        given = {"fp16": self.peak_flops, "fp8": self.peak_flops_fp8, "fp4": self.peak_flops_fp4}
        return {p: float(v) for p, v in given.items() if v}

    def peak_for(self, precision: str) -> float:
        """Dense tensor peak FLOP/s for `precision` (`peaks`).

        Raises UnknownNameError for another name, DataError when the GPU has no peak at that precision."""
        if precision not in PRECISIONS:
            raise UnknownNameError(close_matches_message("precision", precision, list(PRECISIONS)))
        peak = self.peaks.get(precision)
        if peak is None:
            raise DataError(
                f"GPU {self.name} has no {precision} tensor peak in the registry (no such tensor cores, or no data "
                "sheet figure); serve it in a precision it has, or add the peak to slimlib.registry.gpus with its source"
            )
        return float(peak)


_NV_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
_NV_B200 = "https://www.nvidia.com/en-us/data-center/hgx/ and the NVIDIA DGX B200 datasheet"


def _aic_allreduce(system: str, version: str) -> str:
    return (
        f"aiconfigurator_core 0.12.0 systems/data/{system}/comm/vllm/{version}/custom_allreduce_perf.parquet "
        "(shared data aiconfigurator-kernels), backend vllm_graph, bfloat16, message_size 128"
    )


def _proxy(proxy_of: str, kernels: str) -> str:
    """The prefix of a source a same-die GPU borrows from the measured part `proxy_of` ("" when measured)."""
    return f"proxy (same die, the same vLLM {kernels}; measured on {proxy_of}): " if proxy_of else ""


def _aic_attention(system: str, version: str, proxy_of: str = "") -> str:
    """Source of a measured decode-attention efficiency; `proxy_of`: the measured part a same-die GPU borrows it from."""
    return _proxy(proxy_of, "kernel") + (
        f"aiconfigurator_core 0.12.0 {system} decode attention (vLLM {version}, shared data aiconfigurator-kernels, "
        "data/aic-decode-attention.csv): median of bytes read / (time x mem_bw) over the Mistral-7B shapes (32 query, "
        "8 KV heads, head size 128, bf16 KV) at B 1-256, contexts 127-8191 with B x context >= 65,536 tokens"
    )


#: the AMD GPUs' all-reduce latency: no RCCL timings in the shared data
_AMD_ALLREDUCE_PROXY = (
    "proxy, likely an underestimate (no RCCL timings in the shared data; upstream vLLM all-reduces through RCCL on "
    "ROCm until custom all-reduce for ROCm was merged, vllm-project/vllm#14125, March 2025, so vLLM 0.6.x pays "
    "RCCL's latency, not a custom kernel's): " + _aic_allreduce("h100_sxm", "0.24.0")
)
#: measured per-layer decode-kernel latency floors per AIConfigurator system, seconds, and their lines' bandwidth
#: efficiencies (tests/test_layer_floor.py recomputes them from the aic-* tables,
#: `slimlib.experiments.kernel_timing.layer_floor`)
_FLOOR = {"h100_sxm": 25.96e-6, "h200_sxm": 27.62e-6, "a100_sxm": 31.01e-6, "b200_sxm": 27.80e-6}
_FLOOR_EFF = {"h100_sxm": 0.9103, "h200_sxm": 0.8647, "a100_sxm": 0.7388, "b200_sxm": 0.8278}


class _FloorFields(TypedDict):
    layer_floor_s: float
    layer_floor_eff: float
    layer_floor_source: str


def _aic_floor(system: str, version: str, proxy_of: str = "") -> _FloorFields:
    """The layer-floor fields of a GPU measured as `system` (`_FLOOR`, `_FLOOR_EFF` and their source); `proxy_of`:
    the measured part a same-die GPU borrows them from."""
    source = _proxy(proxy_of, "kernels") + (
        f"aiconfigurator_core 0.12.0 {system} GEMM and decode-attention tables (vLLM {version}, shared data "
        "aiconfigurator-kernels): intercept of one Llama-3-8B layer's decode kernel time (4 GEMMs + attention, B = "
        "1, context 128) against the bytes one GPU reads, over TP 1, 2, 4, 8: intercept and bandwidth efficiency "
        "(slimlib.experiments.kernel_timing.layer_floor)"
    )
    return _FloorFields(
        layer_floor_s=_FLOOR[system], layer_floor_eff=_FLOOR_EFF[system], layer_floor_source=source
    )


#: measured Gated DeltaNet prefill rates per AIConfigurator system: seconds per prompt token and layer, FLOP/s and
#: the convolution's bytes/s (tests/test_gdn_prefill.py recomputes them from data/aic-gdn-prefill.csv,
#: `slimlib.experiments.kernel_timing.linear_check.gdn_prefill_rates`)
_GDN_PREFILL = {
    "h100_sxm": (4.888e-8, 4.277e14, 2.212e12),
    "h200_sxm": (5.057e-8, 4.303e14, 2.413e12),
    "b200_sxm": (4.113e-8, 5.900e14, 2.690e12),
}


class _LinearPrefillFields(TypedDict):
    linear_prefill_token_s: float
    linear_prefill_flops: float
    linear_conv_bw: float
    linear_prefill_source: str


def _aic_gdn_prefill(system: str, proxy_of: str = "") -> _LinearPrefillFields:
    """The Gated DeltaNet prefill fields of a GPU measured as `system` (`_GDN_PREFILL` and their source); `proxy_of`:
    the measured part a GPU of the same die and SM count borrows them from."""
    token_s, flops, conv = _GDN_PREFILL[system]
    source = _proxy(proxy_of, "kernels") + (
        f"aiconfigurator_core 0.12.0 {system} Gated DeltaNet context kernels (vLLM 0.24.0, shared data "
        "aiconfigurator-kernels, data/aic-gdn-prefill.csv): medians of chunk_gated_delta_rule_flashinfer's seconds "
        "per token (batch x value heads <= 64, prompts >= 1024), its FLOP/s (batch x value heads >= 1024) and "
        "causal_conv1d_fn's bytes/s (>= 65,536 tokens) (slimlib.experiments.kernel_timing.linear_check)"
    )
    return _LinearPrefillFields(linear_prefill_token_s=token_s, linear_prefill_flops=flops, linear_conv_bw=conv,
                                linear_prefill_source=source)  # fmt: skip


#: measured decode-attention bandwidth efficiencies per AIConfigurator system (tests/test_hardware.py recomputes
#: them from data/aic-decode-attention.csv)
_ATTN = {"h100_sxm": 0.845, "h200_sxm": 0.756, "a100_sxm": 0.697, "b200_sxm": 0.794}

_GPUS: tuple[GPU, ...] = (
    GPU(
        name="h100-sxm-80gb",
        compute_capability=9.0,
        label="H100 SXM",
        peak_flops_fp8=1978.9e12,
        link_bw=450e9,
        link_source=(
            "NVIDIA H100 datasheet, H100 SXM column: NVLink 900 GB/s (both directions), i.e. 450 GB/s per direction "
            f"per GPU through NVSwitch (HGX H100 8-GPU), {_NV_H100}"
        ),
        allreduce_latency_s=((2, 4.292e-6), (4, 4.589e-6), (8, 4.713e-6)),
        allreduce_source=_aic_allreduce("h100_sxm", "0.24.0"),
        peak_flops=989.4e12,
        mem_bw=3.35e12,
        mem_bytes=80 * _GIB,
        aliases=("h100", "h100-sxm", "h100-80gb", "h100-sxm5", "h100-sxm5-80gb", "h100-80gb-hbm3"),
        source=(
            "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column (FP16/BF16 Tensor Core 1,979 TFLOPS with "
            "sparsity, i.e. 989.4 dense; FP8 Tensor Core 3,958 with sparsity, i.e. 1,978.9 dense; 80 GB HBM3; "
            f"3.35 TB/s), {_NV_H100}"
        ),
        decode_attention_eff=_ATTN["h100_sxm"],
        decode_attention_source=_aic_attention("h100_sxm", "0.24.0"),
        **_aic_floor("h100_sxm", "0.24.0"),
        **_aic_gdn_prefill("h100_sxm"),
    ),
    GPU(
        name="h100-sxm-64gb",
        compute_capability=9.0,
        label="H100 SXM 64GB",
        peak_flops_fp8=1978.9e12,
        link_bw=150e9,
        link_kind="pair",
        link_source=(
            "Derived: an SXM5 H100's 18 NVLink 4 links (900 GB/s both directions, H100 datasheet) split 6 per peer "
            "on a 4-GPU board without NVSwitch (MareNostrum 5 ACC nodes: 4 H100 joined by NVLink), i.e. 150 GB/s "
            "per direction per GPU pair, 450 GB/s per GPU at TP 4"
        ),
        allreduce_latency_s=((2, 4.292e-6), (4, 4.589e-6), (8, 4.713e-6)),
        allreduce_source="proxy: " + _aic_allreduce("h100_sxm", "0.24.0"),
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
        decode_attention_eff=_ATTN["h100_sxm"],
        decode_attention_source=_aic_attention("h100_sxm", "0.24.0", "the H100 SXM 80GB"),
        **_aic_floor("h100_sxm", "0.24.0", "the H100 SXM 80GB"),
        **_aic_gdn_prefill("h100_sxm", "the H100 SXM 80GB"),
    ),
    GPU(
        name="h100-pcie-80gb",
        compute_capability=9.0,
        label="H100 PCIe",
        peak_flops_fp8=1513e12,
        link_bw=64e9,
        link_source=(
            "NVIDIA H100 datasheet, H100 PCIe column: PCIe Gen5 128 GB/s (both directions), i.e. 64 GB/s per "
            "direction per GPU through the host; the optional 2-GPU NVLink bridge (600 GB/s) is not assumed, "
            f"{_NV_H100}"
        ),
        allreduce_latency_s=((2, 4.292e-6), (4, 4.589e-6), (8, 4.713e-6)),
        allreduce_source="proxy (NVLink-connected H100 SXM; over PCIe it is likely higher): "
        + _aic_allreduce("h100_sxm", "0.24.0"),
        peak_flops=756.5e12,
        mem_bw=2.0e12,
        mem_bytes=80 * _GIB,
        aliases=("h100-pcie", "h100-pcie5", "h100-pcie-80gb-hbm2e"),
        source=(
            "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column (FP16/BF16 Tensor Core 1,513 TFLOPS with "
            "sparsity, i.e. 756.5 dense; FP8 Tensor Core 3,026 with sparsity, i.e. 1,513 dense; 80 GB HBM2e; "
            f"2 TB/s), {_NV_H100}"
        ),
        notes="1593 MHz x 2 x 5120 bit / 8 gives 2.04 TB/s; the data sheet rounds to 2 TB/s.",
        decode_attention_eff=_ATTN["h100_sxm"],
        decode_attention_source=_aic_attention("h100_sxm", "0.24.0", "the H100 SXM 80GB"),
        **_aic_floor("h100_sxm", "0.24.0", "the H100 SXM 80GB"),
    ),
    GPU(
        name="h200-sxm-141gb",
        compute_capability=9.0,
        label="H200 SXM",
        peak_flops_fp8=1978.9e12,
        link_bw=450e9,
        link_source=(
            "NVIDIA H200 datasheet, H200 SXM column: NVLink 900 GB/s (both directions), i.e. 450 GB/s per direction "
            "per GPU through NVSwitch, https://www.nvidia.com/en-us/data-center/h200/"
        ),
        allreduce_latency_s=((2, 4.378e-6), (4, 4.428e-6), (8, 4.712e-6)),
        allreduce_source=_aic_allreduce("h200_sxm", "0.24.0"),
        peak_flops=989.4e12,
        mem_bw=4.8e12,
        mem_bytes=141 * _GIB,
        aliases=("h200", "h200-sxm", "h200-141gb", "h200-sxm5"),
        source=(
            "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column (FP16/BF16 Tensor Core 1,979 TFLOPS with "
            "sparsity, i.e. 989.4 dense; FP8 Tensor Core 3,958 with sparsity, i.e. 1,978.9 dense; 141 GB HBM3e; "
            "4.8 TB/s), https://www.nvidia.com/en-us/data-center/h200/"
        ),
        decode_attention_eff=_ATTN["h200_sxm"],
        decode_attention_source=_aic_attention("h200_sxm", "0.24.0"),
        **_aic_floor("h200_sxm", "0.24.0"),
        **_aic_gdn_prefill("h200_sxm"),
    ),
    GPU(
        name="gh200-96gb",
        compute_capability=9.0,
        label="GH200",
        peak_flops_fp8=1978.9e12,
        link_bw=450e9,
        link_source=(
            "The Hopper GPU's 18 NVLink 4 links, 900 GB/s both directions (NVIDIA GH200 datasheet: NVLink Switch "
            "System between superchips), i.e. 450 GB/s per direction per GPU, "
            "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/"
        ),
        allreduce_latency_s=((2, 4.292e-6), (4, 4.589e-6), (8, 4.713e-6)),
        allreduce_source="proxy: " + _aic_allreduce("h100_sxm", "0.24.0"),
        peak_flops=989.4e12,
        mem_bw=4.0e12,
        mem_bytes=96 * _GIB,
        aliases=("gh200", "gh200-480gb", "gh200-96gb-hbm3", "grace-hopper"),
        source=(
            "NVIDIA GH200 Grace Hopper Superchip datasheet, 96 GB HBM3 version (GPU FP16 Tensor Core 1,979 TFLOPS "
            "with sparsity, i.e. 989.4 dense; FP8 3,958 with sparsity, i.e. 1,978.9 dense; 4 TB/s), "
            "https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/"
        ),
        notes="GPU memory only; the Grace CPU's LPDDR5X (reachable over NVLink-C2C) is not counted.",
        decode_attention_eff=_ATTN["h100_sxm"],
        decode_attention_source=_aic_attention("h100_sxm", "0.24.0", "the H100 SXM 80GB"),
        **_aic_floor("h100_sxm", "0.24.0", "the H100 SXM 80GB"),
        **_aic_gdn_prefill("h100_sxm", "the H100 SXM 80GB"),
    ),
    GPU(
        name="a100-sxm-80gb",
        compute_capability=8.0,
        label="A100 SXM",
        link_bw=300e9,
        link_source=(
            "NVIDIA A100 datasheet, SXM columns: NVLink 600 GB/s (both directions), i.e. 300 GB/s per direction per "
            "GPU through NVSwitch (HGX A100), https://www.nvidia.com/en-us/data-center/a100/"
        ),
        allreduce_latency_s=((2, 4.867e-6), (4, 5.150e-6), (8, 5.657e-6)),
        allreduce_source=_aic_allreduce("a100_sxm", "0.14.0"),
        peak_flops=312e12,
        mem_bw=2.039e12,
        mem_bytes=80 * _GIB,
        aliases=("a100", "a100-80gb", "a100-sxm", "a100-sxm4", "a100-sxm4-80gb"),
        source=(
            "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column (FP16/BF16 Tensor Core 312 TFLOPS dense, "
            "624 with sparsity; 80 GB HBM2e; 2,039 GB/s), https://www.nvidia.com/en-us/data-center/a100/"
        ),
        decode_attention_eff=_ATTN["a100_sxm"],
        decode_attention_source=_aic_attention("a100_sxm", "0.14.0"),
        **_aic_floor("a100_sxm", "0.14.0"),
    ),
    GPU(
        name="a100-sxm-40gb",
        compute_capability=8.0,
        label="A100 SXM 40GB",
        link_bw=300e9,
        link_source=(
            "NVIDIA A100 datasheet, SXM columns: NVLink 600 GB/s (both directions), i.e. 300 GB/s per direction per "
            "GPU through NVSwitch (HGX A100), https://www.nvidia.com/en-us/data-center/a100/"
        ),
        allreduce_latency_s=((2, 4.867e-6), (4, 5.150e-6), (8, 5.657e-6)),
        allreduce_source="proxy (the 80 GB part): " + _aic_allreduce("a100_sxm", "0.14.0"),
        peak_flops=312e12,
        mem_bw=1.555e12,
        mem_bytes=40 * _GIB,
        aliases=("a100-40gb", "a100-sxm4-40gb"),
        source=(
            "NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM column (FP16/BF16 Tensor Core 312 TFLOPS dense; "
            "40 GB HBM2; 1,555 GB/s), https://www.nvidia.com/en-us/data-center/a100/"
        ),
        decode_attention_eff=_ATTN["a100_sxm"],
        decode_attention_source=_aic_attention("a100_sxm", "0.14.0", "the A100 SXM 80GB"),
        **_aic_floor("a100_sxm", "0.14.0", "the A100 SXM 80GB"),
    ),
    GPU(
        name="l40s",
        compute_capability=8.9,
        label="L40S",
        peak_flops_fp8=733e12,
        link_bw=32e9,
        link_source=(
            "NVIDIA L40S datasheet: PCIe Gen4 x16, 64 GB/s (both directions), i.e. 32 GB/s per direction per GPU "
            "through the host (no NVLink), https://www.nvidia.com/en-us/data-center/l40s/"
        ),
        allreduce_latency_s=((2, 4.292e-6), (4, 4.589e-6), (8, 4.713e-6)),
        allreduce_source="proxy (NVLink-connected H100 SXM; over PCIe it is likely higher): "
        + _aic_allreduce("h100_sxm", "0.24.0"),
        peak_flops=362.05e12,
        mem_bw=864e9,
        mem_bytes=48 * _GIB,
        aliases=("l40s-48gb",),
        source=(
            "NVIDIA L40S datasheet (FP16/BF16 Tensor Core 362.05 TFLOPS dense, 733 with sparsity; FP8 Tensor Core "
            "733 dense, 1,466 with sparsity; 48 GB GDDR6; 864 GB/s), https://www.nvidia.com/en-us/data-center/l40s/"
        ),
    ),
    GPU(
        name="b200-sxm-180gb",
        compute_capability=10.0,
        label="B200",
        peak_flops=2.25e15,
        peak_flops_fp8=4.5e15,
        peak_flops_fp4=9e15,
        mem_bw=8e12,
        mem_bytes=180 * _GIB,
        aliases=("b200", "b200-sxm", "b200-180gb", "hgx-b200", "dgx-b200"),
        source=(
            "NVIDIA HGX B200 specifications, per GPU of the 8: FP4 Tensor Core 144 PFLOPS, FP8 72 PFLOPS, FP16/BF16 "
            "36 PFLOPS for 8 GPUs with sparsity, i.e. 9, 4.5 and 2.25 PFLOPS dense per GPU; DGX B200 datasheet: "
            f"1,440 GB HBM3e and 64 TB/s in all, i.e. 180 GB and 8 TB/s per GPU; {_NV_B200}"
        ),
        notes=(
            "AIConfigurator's system file (b200_sxm.yaml) assumes 7.7 TB/s and the same 2.25 PFLOPS bf16 peak "
            "(recorded as such in data/aic-systems.csv); the package uses this entry's 8 TB/s everywhere, the kernel "
            "composition (slimlib.experiments.kernel_timing) included. Its kernel tables (data/aic-*.csv) are B200 "
            "measurements."
        ),
        link_bw=900e9,
        link_source=(
            "NVIDIA HGX B200 specifications: fifth-generation NVLink, 1.8 TB/s GPU-to-GPU (both directions), i.e. "
            f"900 GB/s per direction per GPU through NVSwitch; {_NV_B200}"
        ),
        allreduce_latency_s=((2, 6.589e-6), (4, 6.859e-6), (8, 7.424e-6)),
        allreduce_source=_aic_allreduce("b200_sxm", "0.24.0"),
        decode_attention_eff=_ATTN["b200_sxm"],
        decode_attention_source=_aic_attention("b200_sxm", "0.24.0"),
        **_aic_floor("b200_sxm", "0.24.0"),
        **_aic_gdn_prefill("b200_sxm"),
    ),
    GPU(
        name="mi300x",
        label="MI300X",
        peak_flops_fp8=2614.9e12,
        link_kind="pair",
        allreduce_latency_s=((2, 4.292e-6), (4, 4.589e-6), (8, 4.713e-6)),
        allreduce_source=_AMD_ALLREDUCE_PROXY,
        peak_flops=1307.4e12,
        mem_bw=5.3e12,
        mem_bytes=192 * _GIB,
        aliases=("instinct-mi300x", "mi300x-192gb"),
        source=(
            "AMD Instinct MI300X data sheet (peak FP16/BF16 matrix 1,307.4 TFLOPS dense, 2,614.9 with sparsity; "
            "peak FP8 2,614.9 dense, 5,229.8 with sparsity; 192 GB HBM3; 5.3 TB/s), "
            "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"
        ),
        link_bw=64e9,
        link_source=(
            "AMD Instinct MI300X data sheet: 7 AMD Infinity Fabric links, 128 GB/s peak (bidirectional) each, "
            "896 GB/s aggregate; in the 8-GPU OAM platform every pair of GPUs shares one link, i.e. 64 GB/s per "
            "direction between two GPUs, https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"
        ),
    ),
    GPU(
        name="mi355x",
        label="MI355X",
        peak_flops=2516.6e12,
        peak_flops_fp8=5033.2e12,
        peak_flops_fp4=10066.3e12,
        mem_bw=8.0e12,
        mem_bytes=288 * _GIB,
        link_kind="pair",
        allreduce_latency_s=((2, 4.292e-6), (4, 4.589e-6), (8, 4.713e-6)),
        allreduce_source=_AMD_ALLREDUCE_PROXY,
        aliases=("instinct-mi355x", "mi355x-288gb"),
        source=(
            "AMD Instinct MI355X data sheet (256 CUs at 2.4 GHz; peak dense matrix FP16/BF16 2,516.6 TFLOPS, FP8 "
            "5,033.2, MXFP4 10,066.3; 288 GB HBM3E; 8 TB/s), "
            "https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html"
        ),
        notes=(
            "ROCm aiter's kernel tables (data/aiter-*.csv) hold gfx950 rows of 256 CUs: an MI355X or an MI350X (the "
            "same CUs at 2.2 GHz, 8% lower peaks), which the tables do not tell apart; they are checked against "
            "this entry."
        ),
        link_bw=76.8e9,
        link_source=(
            "AMD Instinct MI355X data sheet: 7 AMD Infinity Fabric links of 153.6 GB/s peak (bidirectional) each; in "
            "the 8-GPU OAM platform every pair of GPUs shares one link, i.e. 76.8 GB/s per direction between two "
            "GPUs, https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html"
        ),
    ),
    GPU(
        name="mi250-gcd",
        label="MI250 die",
        link_kind="pair",
        allreduce_latency_s=((2, 4.292e-6), (4, 4.589e-6), (8, 4.713e-6)),
        allreduce_source=_AMD_ALLREDUCE_PROXY,
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
        label="MI250",
        dies=2,
        link_kind="pair",
        allreduce_latency_s=((2, 4.292e-6), (4, 4.589e-6), (8, 4.713e-6)),
        allreduce_source=_AMD_ALLREDUCE_PROXY,
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

_GPUS += tuple(GPU(**h) for h in HOST_CPUS)  # host CPUs as devices (measured; slimlib.registry.host_cpu)


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
        if gpu.link_kind not in LINK_KINDS:
            raise RuntimeError(
                f"GPU {gpu.name}: link_kind {gpu.link_kind!r}"
            )  # pragma: no cover - registry bug
        if gpu.decode_attention_eff is not None and not 0 < gpu.decode_attention_eff <= 1:
            raise RuntimeError(f"GPU {gpu.name}: decode_attention_eff must lie in (0, 1]")  # pragma: no cover
        if gpu.prefill_attention_flops is not None and not 0 < gpu.prefill_attention_flops <= gpu.peak_flops:
            raise RuntimeError(
                f"GPU {gpu.name}: prefill_attention_flops must lie in (0, peak_flops]"
            )  # pragma: no cover - registry bug
        tokens = [m for m, _ in gpu.decode_gemm_curve]
        if gpu.decode_gemm_curve and not (
            len(tokens) >= 2
            and tokens == sorted(set(tokens))
            and min(s for _, s in gpu.decode_gemm_curve) > 0
        ):  # pragma: no cover - registry bug
            raise RuntimeError(
                f"GPU {gpu.name}: decode_gemm_curve needs 2+ increasing token counts, seconds > 0"
            )
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


def gpu_label(name: str | GPU) -> str:
    """Short display name of a GPU (name, alias or `GPU`), e.g. 'H100' for 'h100-sxm-80gb'; UnknownNameError if
    unknown."""
    gpu = get_gpu(name)
    return gpu.label or gpu.name


def list_gpus(names: Iterable[str] | None = None) -> pd.DataFrame:
    """The registry as a table: name, label, peak_tflops (fp16/bf16), peak_fp8_tflops, peak_fp4_tflops,
    mem_bw_tb_s, mem_gib, link_gb_s, link_kind, attn_eff (measured decode-attention bandwidth efficiency, None where
    not measured), layer_floor_us (measured per-layer decode-kernel latency floor, microseconds, None where not
    measured), aliases, source, notes; sorted by name.

    `names` (optional): only these GPUs (names or aliases), in the given order.
    """
    gpus = sorted(_GPUS, key=lambda g: g.name) if names is None else [get_gpu(n) for n in names]
    rows = [
        {
            "name": g.name,
            "label": gpu_label(g),
            "peak_tflops": round(g.peak_flops / 1e12, 6),
            "peak_fp8_tflops": round(g.peak_flops_fp8 / 1e12, 6) if g.peak_flops_fp8 else None,
            "peak_fp4_tflops": round(g.peak_flops_fp4 / 1e12, 6) if g.peak_flops_fp4 else None,
            "mem_bw_tb_s": round(g.mem_bw / 1e12, 9),
            "mem_gib": round(g.mem_gb, 6),
            "link_gb_s": round(g.link_bw / 1e9, 6) if g.link_bw else None,
            "link_kind": g.link_kind,
            "attn_eff": g.decode_attention_eff,
            "layer_floor_us": round(g.layer_floor_s * 1e6, 6) if g.layer_floor_s else None,
            "aliases": ", ".join(g.aliases),
            "source": g.source,
            "notes": g.notes,
        }
        for g in gpus
    ]
    return pd.DataFrame(rows)
