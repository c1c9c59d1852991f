"""The host CPU as a device, ``cpu``: peaks measured on this project's CPU-engine campaign, not from a data sheet.

The numbers are the micro-benchmark of `slimlib.kit.cpu_microbench` (best of 5: a bfloat16 GEMM with torch for
``peak_flops``, a STREAM-style float32 triad for ``mem_bw``) recorded at the start of each committed campaign
(``data/engine-cpu-pre-protocol/manifest.json``, 2026-11: 417.0 GFLOP/s, 30.62 GB/s; ``data/engine-cpu/manifest.json``,
2026-12: 365.8 GFLOP/s, 33.36 GB/s): a peak is the best the host was measured to sustain, so each is the larger of
the two (the host drifts by about 10% between sessions; the manifests keep both). The CPU backend sizes its KV pool directly (``VLLM_CPU_KVCACHE_SPACE``), not as a
fraction of device memory: ``mem_bytes`` is the memory for which the package's default accounting
(`slimlib.model.memory.kv_pool_bytes`: memory x 0.9 - 1.5 GiB reserve - weights) gives that pool plus the weights,
so the advisor's KV capacity matches the engine's. ``decode_gemm_flops`` is the roof of the engine's own decode
GEMMs (`slimlib.data.decode_gemm`: vLLM's oneDNN GEMM on one thread, 194.4 GFLOP/s), below ``peak_flops`` because the
engine's worker runs one OMP thread; ``decode_gemm_curve`` is the same pass's seconds per weight at 1-256 tokens
(`slimlib.data.decode_gemm.decode_gemm_curve`): flat near 1.5e-10 s (about 13 GB/s of bf16 weights, below the
2-core triad) to 8 tokens, then bending into the roof, 1.36x the larger of the two at 16 tokens.
``prefill_attention_flops`` is the rate of the engine's own prefill attention kernel on a causal prompt
(`slimlib.data.prefill_attention`: 76.9 GFLOP/s on one thread, in the causal count, which the kernel's time confirms;
below half the decode GEMMs' roof). Tests check these values against the manifests and the tables.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CPU_DEVICES", "HOST_CPU", "HOST_CPU_AMX", "HOST_CPUS", "HOST_CPU_KV_SPACE_GIB"]

#: VLLM_CPU_KVCACHE_SPACE of the committed campaign, GiB
HOST_CPU_KV_SPACE_GIB = 4

#: keyword arguments of the registry's `GPU` entry for the host CPU
HOST_CPU: dict[str, Any] = {
    "name": "cpu",
    "label": "host CPU",
    "peak_flops": 417.01e9,
    "mem_bw": 33.357e9,
    "mem_bytes": round((HOST_CPU_KV_SPACE_GIB + 1.5) / 0.9 * 2**30),
    "decode_gemm_flops": 194.4e9,
    "decode_gemm_source": (
        "data/engine-cpu-gemm (slim bench gemm, 2026-12-02): vLLM's CPU GEMM (onednn_mm) over every dense weight of "
        "each campaign model, LM head included, one thread as the engine's worker runs; median over the 6 models at "
        "M = 256 tokens (slimlib.data.decode_gemm.decode_gemm_flops); the curve: median over the 6 models of the "
        "pass's seconds per weight at each M (slimlib.data.decode_gemm.decode_gemm_curve)"
    ),
    "decode_gemm_curve": (
        (1, 1.44969e-10),
        (2, 1.62787e-10),
        (4, 1.18268e-10),
        (8, 1.57785e-10),
        (16, 2.24160e-10),
        (32, 3.82276e-10),
        (64, 7.05250e-10),
        (128, 1.33818e-09),
        (256, 2.63418e-09),
    ),
    "prefill_attention_flops": 76.92e9,
    "prefill_attention_source": (
        "data/engine-cpu-attention (slim bench attention, 2026-12-03): vLLM's CPU attention kernel "
        "(cpu_attention_with_kv_cache) on one causal prompt, one thread as the engine's worker runs; median over the 6 "
        "campaign models at IL = 4096 of 2 IL^2 D / time (slimlib.data.prefill_attention.prefill_attention_flops); "
        "the causal call takes 0.49-0.54 of the unmasked one's time from IL = 1024: the kernel skips the masked half"
    ),
    "aliases": ("host-cpu", "vllm-cpu"),
    "source": (
        "measured on the campaign host (the 'microbenchmark' of data/engine-cpu*/manifest.json, the larger "
        "of the committed campaigns): bfloat16 GEMM 2048^3 and float32 triad of 256 MiB arrays with torch on all cores, best of 5 (slimlib.kit.cpu_microbench)"
    ),
    "notes": (
        "A 2-core AMD EPYC virtual machine. mem_bytes is not the host's RAM: it is sized so that the default KV "
        "accounting gives the pool set by VLLM_CPU_KVCACHE_SPACE (4 GiB)."
    ),
}

#: the Intel Xeon host with AMX (2 cores) the served-latency campaign ran on: another device under vLLM's CPU build,
#: its peaks from its own micro-benchmark, decode-GEMM and prefill-attention timings
HOST_CPU_AMX: dict[str, Any] = {
    "name": "cpu-amx",
    "label": "host CPU (AMX)",
    "peak_flops": 2331.58e9,
    "mem_bw": 29.981e9,
    "mem_bytes": round((HOST_CPU_KV_SPACE_GIB + 1.5) / 0.9 * 2**30),
    "decode_gemm_flops": 1116.9e9,
    "decode_gemm_source": (
        "data/engine-cpu-amx-gemm (slim bench gemm, 2026-12-06): vLLM's CPU GEMM (onednn_mm, AMX) over every dense "
        "weight of each campaign model, LM head included, one thread; median over the 6 models at M = 256 tokens; the "
        "curve: median over the 6 models of the pass's seconds per weight at each M"
    ),
    "decode_gemm_curve": (
        (1, 1.06267e-10),
        (2, 1.04546e-10),
        (4, 1.04769e-10),
        (8, 1.09344e-10),
        (16, 1.09182e-10),
        (32, 1.37331e-10),
        (64, 1.62238e-10),
        (128, 2.74290e-10),
        (256, 4.58415e-10),
    ),
    "prefill_attention_flops": 592.1e9,
    "prefill_attention_source": (
        "data/engine-cpu-amx-attention (slim bench attention, 2026-12-07): vLLM's CPU attention kernel "
        "(cpu_attention_with_kv_cache, its AMX path) on one causal prompt, one thread as the engine's worker runs; "
        "median over the 6 campaign models at IL = 4096 of 2 IL^2 D / time "
        "(slimlib.data.prefill_attention.prefill_attention_flops); the causal call takes 0.40-0.59 of the unmasked "
        "one's time from IL = 512: the kernel skips the masked half"
    ),
    "aliases": ("host-cpu-amx",),
    "source": (
        "measured on the served-latency campaign's host (data/engine-cpu-amx/manifest.json, microbenchmark): bfloat16 "
        "GEMM 2048^3 and float32 triad of 256 MiB arrays with torch on both cores, best of 5 (slimlib.kit.cpu_microbench), "
        "at the campaign's start"
    ),
    "notes": (
        "A 2-core Intel Xeon virtual machine with AMX (family 6, AVX-512 BF16, AMX-BF16). mem_bytes as the host "
        "CPU's: the default KV accounting gives the pool set by VLLM_CPU_KVCACHE_SPACE (4 GiB)."
    ),
}

#: every host CPU the registry holds as a device, and their names
HOST_CPUS = (HOST_CPU, HOST_CPU_AMX)
CPU_DEVICES = tuple(str(h["name"]) for h in HOST_CPUS)
