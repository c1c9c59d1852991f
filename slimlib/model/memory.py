"""Engine memory facts that are not one configuration: vLLM's defaults, the tensor-parallel split rule, the KV-head
replication factor and the default pool formula. The resolved per-GPU memory of a configuration (weights, KV
bytes per token, pool, blocks) is `slimlib.model.serving.ServingConfig`.

The default allocation is ``GPU memory x gpu_memory_utilization - weights - activation reserve``
(`kv_pool_bytes`); the blocks a request holds are `ServingConfig.request_blocks`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from slimlib.model.equations import FloatArray
from slimlib.registry.gpus import GIB, GPU

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "DEFAULT_RESERVE_GIB",
    "GIB",
    "GPUS_PER_NODE",
    "gpu_total_bytes",
    "kv_pool_bytes",
    "kv_replication",
    "tensor_parallel_problem",
    "tensor_parallel_refusal",
]

#: vLLM's default KV-cache block size (tokens per block).
DEFAULT_BLOCK_SIZE = 16
#: vLLM's default --gpu-memory-utilization.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
#: Activation/sampler reserve assumed when estimating the default KV allocation, GiB. In the public vLLM 0.5.2 runs
#: (data/memgap-online.csv, advisor family) GPU memory x 0.9 - weights - gpu_blocks x block x KV bytes per token is
#: 0.41-0.50 GiB at max_num_seqs <= 32 and at most 1.32 GiB at 512; 1.5 GiB covers every measured case.
DEFAULT_RESERVE_GIB = 1.5


def tensor_parallel_problem(n_heads: int, n_kv_heads: int, tensor_parallel: int) -> str:
    """Why vLLM refuses to split a model of `n_heads` query and `n_kv_heads` KV heads over `tensor_parallel` GPUs
    ('' when it does not): the query heads must divide evenly (``ModelConfig.verify_with_parallel_config``), and
    the KV heads must divide evenly or evenly replicate (``QKVParallelLinear``: ``p % H_kv == 0`` when
    ``p >= H_kv``, else ``H_kv % p == 0``)."""
    p, h, kv = int(tensor_parallel), int(n_heads), int(n_kv_heads)
    if h % p:
        return f"its {h} attention heads are not divisible by tensor parallel size {p}"
    if (p >= kv and p % kv) or (p < kv and kv % p):
        return f"its {kv} KV heads neither divide nor replicate evenly over tensor parallel size {p}"
    return ""


#: GPUs in one node (DGX/HGX H100/H200, MI300X platforms): the largest tensor-parallel group vLLM runs in one node
GPUS_PER_NODE = 8


def tensor_parallel_refusal(
    name: str, n_heads: int, n_kv_heads: int, tensor_parallel: float, *, within_node: bool = True
) -> str:
    """Why model `name` cannot run over `tensor_parallel` GPUs, as one message ('' when it can): the degree must be
    a whole number >= 1, at most the `GPUS_PER_NODE` of one node (unless not `within_node`: memory arithmetic of a
    multi-node group), and split the heads (`tensor_parallel_problem`; the message lists degrees that do)."""
    tp = float(tensor_parallel)
    if tp < 1 or tp != round(tp):
        return f"tensor_parallel = {tp:g} must be a whole number >= 1"
    if within_node and tp > GPUS_PER_NODE:
        return (
            f"tensor_parallel = {tp:g} exceeds the {GPUS_PER_NODE} GPUs of one node; tensor parallelism runs "
            f"within a node: use at most {GPUS_PER_NODE}"
        )
    problem = tensor_parallel_problem(n_heads, n_kv_heads, int(tp))
    if not problem:
        return ""
    ok = [d for d in range(1, GPUS_PER_NODE + 1) if not tensor_parallel_problem(n_heads, n_kv_heads, d)]
    return f"tensor_parallel = {tp:g} does not split {name} as vLLM requires ({problem}); use one of {', '.join(map(str, ok))}"


def kv_replication(n_kv_heads: ArrayLike, tensor_parallel: ArrayLike) -> FloatArray:
    """Factor by which one GPU's KV exceeds ``1/p`` of the model's: ``max(p / H_kv, 1)`` (KV heads replicated)."""
    tp = np.asarray(tensor_parallel, dtype=float)
    return np.asarray(np.maximum(tp / np.asarray(n_kv_heads, dtype=float), 1.0), dtype=float)


# ---------------------------------------------------------------------------------------------------------------
def gpu_total_bytes(gpu: GPU) -> int:
    """Memory the engine sees: the driver-reported total where measured, else the nominal capacity."""
    return int(gpu.mem_bytes_reported or gpu.mem_bytes)


def kv_pool_bytes(
    gpu: GPU | float,
    weight_bytes: ArrayLike,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
) -> FloatArray:
    """KV bytes the engine allocates by default on one GPU (a `GPU`, or its memory in bytes) holding
    `weight_bytes` of weights: ``total x utilization - weights - reserve`` (may be <= 0)."""
    total = gpu_total_bytes(gpu) if isinstance(gpu, GPU) else float(gpu)
    return np.asarray(
        total * gpu_memory_utilization - np.asarray(weight_bytes, dtype=float) - reserve_gib * GIB,
        dtype=float,
    )
