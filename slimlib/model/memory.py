"""KV-cache memory accounting of a paged-KV engine (vLLM): blocks per request, bytes a batch needs, default pool.

A request of ``IL + OL`` tokens holds ``ceil((IL + OL) / block)`` blocks of ``block`` tokens, each token
``2 L D_kv b_kv`` bytes (Eq. 11 per token); the default allocation is
``GPU memory x gpu_memory_utilization - weights - activation reserve``.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from slimlib.model.equations import FloatArray
from slimlib.registry.architectures import Architecture
from slimlib.registry.gpus import GPU

GIB = 2**30
#: vLLM's default KV-cache block size (tokens per block).
DEFAULT_BLOCK_SIZE = 16
#: vLLM's default --gpu-memory-utilization.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
#: Activation/sampler reserve assumed when estimating the default KV allocation, GiB. In the public vLLM 0.5.2 runs
#: (data/memgap-online.csv, advisor family) GPU memory x 0.9 - weights - gpu_blocks x block x KV bytes per token is
#: 0.41-0.50 GiB at max_num_seqs <= 32 and at most 1.32 GiB at 512; 1.5 GiB covers every measured case.
DEFAULT_RESERVE_GIB = 1.5


# ---------------------------------------------------------------------------------------------------------------
def blocks_per_request(
    input_len: ArrayLike, output_len: ArrayLike, block_size: float = DEFAULT_BLOCK_SIZE
) -> FloatArray:
    """KV blocks one request of ``IL + OL`` tokens holds: ``ceil((IL + OL) / block_size)``."""
    tokens = np.ceil(np.asarray(input_len, dtype=float) + np.asarray(output_len, dtype=float))
    return cast(FloatArray, np.ceil(tokens / float(block_size)))


def kv_bytes_needed(
    arch: Architecture,
    input_len: ArrayLike,
    output_len: ArrayLike,
    batch_size: ArrayLike,
    block_size: float = DEFAULT_BLOCK_SIZE,
) -> FloatArray:
    """KV-cache bytes for B requests: ``B x ceil((IL + OL) / block) x block x 2 L D_kv b_kv``."""
    per_block = float(block_size) * arch.kv_bytes_per_token
    return (
        np.asarray(batch_size, dtype=float)
        * blocks_per_request(input_len, output_len, block_size)
        * per_block
    )


def gpu_total_bytes(gpu: GPU) -> int:
    """Memory the engine sees: the driver-reported total where measured, else the nominal capacity."""
    return int(gpu.mem_bytes_reported or gpu.mem_bytes)


def kv_pool_bytes(
    gpu: GPU,
    weight_bytes: ArrayLike,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
) -> FloatArray:
    """KV bytes the engine allocates by default on one GPU holding `weight_bytes` of weights:
    ``total x utilization - weights - reserve`` (may be <= 0)."""
    return np.asarray(
        gpu_total_bytes(gpu) * gpu_memory_utilization
        - np.asarray(weight_bytes, dtype=float)
        - reserve_gib * GIB,
        dtype=float,
    )


def default_kv_bytes(
    arch: Architecture,
    gpu: GPU,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
) -> float:
    """`kv_pool_bytes` of `arch` on one GPU (no tensor parallelism)."""
    return float(kv_pool_bytes(gpu, arch.weight_bytes_total, gpu_memory_utilization, reserve_gib))
