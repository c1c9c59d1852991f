"""The latency floor of one decoder layer's decode kernels: the part of a layer's decode time that tensor
parallelism does not divide (registry ``layer_floor_s`` and ``layer_floor_eff``; the recommended model's decode
GEMMs carry it, `slimlib.model.terms.rooflines.DECODE_GEMMS`).

Measured on NVIDIA AIConfigurator's vLLM kernel tables: the per-layer decode time of `FLOOR_MODEL`'s shapes (32
query / 8 KV heads, D = 4096, the shapes of `slimlib.model.priors`) at B = 1 and a `FLOOR_CONTEXT`-token context
(the four projection and FFN GEMMs and the decode attention, `composition.KernelSet.decode_step`), at each TP
degree of `FLOOR_TP`, against the bytes the kernels move on one GPU (its share of the layer's weights and of the
KV, and the activations: the composition's `gemm_bytes` and the equations' `decode_attention_bytes`): the intercept of the
least-squares line ``t = t_floor + bytes / (eff mem_bw)``. Each kernel has a latency that does not shrink with
the bytes it reads (the GEMMs' about 3 us on an H100, the decode attention's more); TP divides the
bytes, not the latencies. The all-reduces are the model's `ALLREDUCE` term, and the norms, activations and RoPE
are not in the tables, so the floor is a lower bound.
"""

from __future__ import annotations

import numpy as np

from slimlib.experiments.kernel_timing.composition import (
    GEMM_KINDS,
    gemm_bytes,
    kernel_set,
)
from slimlib.model.equations import decode_attention_bytes
from slimlib.registry.gpus import get_gpu

#: the model whose layer shapes are timed, the cached context of the one request, the TP degrees of the line
FLOOR_MODEL = "llama-3-8b"
FLOOR_CONTEXT = 128
FLOOR_TP = (1, 2, 4, 8)


def layer_floor(gpu: str) -> tuple[float, float, np.ndarray, np.ndarray]:
    """``(t_floor seconds, eff, bytes, seconds)`` of `gpu` (module docstring): the line's intercept and bandwidth
    efficiency, and the per-GPU bytes (`gemm_bytes` of the four GEMMs and `decode_attention_bytes`, bf16) and
    per-layer times at each degree of `FLOOR_TP` it was fitted to."""
    nbytes, secs = [], []
    for tp in FLOOR_TP:
        ks = kernel_set(FLOOR_MODEL, gpu, tp=tp)
        step = ks.decode_step([1.0], [float(FLOOR_CONTEXT)])
        secs.append(float(step[[*GEMM_KINDS, "attention"]].sum(axis=1).iloc[0]) / 1e3 / ks.n_layers)
        gemms = sum(float(gemm_bytes(1.0, *ks.shapes[kind])) for kind in GEMM_KINDS)
        nbytes.append(gemms + float(decode_attention_bytes(1.0, FLOOR_CONTEXT + 1, *ks.heads)))
    x, y = np.asarray(nbytes), np.asarray(secs)
    slope, intercept = np.polyfit(x / get_gpu(gpu).mem_bw, y, 1)
    return float(intercept), float(1.0 / slope), x, y
