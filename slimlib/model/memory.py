"""Memory of a paged-KV engine (vLLM) per GPU: weights, KV bytes per token, the default KV pool, and why a
configuration does not fit.

A request of ``IL + OL`` tokens holds ``ceil((IL + OL) / block)`` blocks of ``block`` tokens, each token
``2 L D_kv b_kv`` bytes (Eq. 11 per token); the default allocation is
``GPU memory x gpu_memory_utilization - weights - activation reserve``.

Tensor parallelism ``p`` (vLLM): every GPU holds ``1/p`` of the weights and ``max(H_kv / p, 1)`` of the KV heads
(vLLM's ``ModelConfig.get_num_kv_heads``: ``max(1, H_kv // p)``, i.e. KV heads are replicated when ``p`` exceeds
them), so its KV bytes per token are ``2 L max(H_kv / p, 1) d_h b_kv`` (`per_gpu_kv_bytes_per_token`) and its KV
pool is ``memory x utilization - weights / p - reserve``. This is the one per-GPU rule the model
(`slimlib.model.parallel.split_features`), the advisor and plans use; `gpu_memory` returns the whole breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from slimlib.errors import DataError
from slimlib.model.equations import FloatArray
from slimlib.registry.architectures import Architecture
from slimlib.registry.gpus import GPU, get_gpu
from slimlib.registry.precision import dtype_bytes, kv_bytes_per_element, weight_bytes_per_element

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
# Precision and tensor parallelism: the bytes one GPU holds
# ---------------------------------------------------------------------------------------------------------------
def weight_bytes(arch: Architecture, dtype: object = None, quantization: object = None) -> float:
    """Bytes of all weights served with ``--dtype`` `dtype` and ``--quantization`` `quantization`: embeddings and
    LM head in the serving dtype, the other weights at the quantized width (`slimlib.registry.precision`).
    Both empty: ``arch.weight_bytes_total``."""
    serve = dtype_bytes(dtype, arch.weight_bytes)
    quant = weight_bytes_per_element(quantization, serve)
    emb = float(arch.embedding_params)
    return emb * serve + (float(arch.n_params) - emb) * quant


def kv_bytes_per_token(arch: Architecture, dtype: object = None, kv_cache_dtype: object = None) -> float:
    """KV bytes of one token over all layers, ``2 L D_kv b_kv`` (Eq. 11 per token), with ``b_kv`` from
    ``--kv-cache-dtype`` (empty or 'auto': the serving dtype)."""
    b_kv = kv_bytes_per_element(kv_cache_dtype, dtype_bytes(dtype, arch.kv_bytes))
    return 2.0 * arch.n_layers * arch.d_kv * b_kv


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


def per_gpu_kv_bytes_per_token(
    kv_bytes_per_token_total: ArrayLike, n_kv_heads: ArrayLike, tensor_parallel: ArrayLike
) -> FloatArray:
    """KV bytes per token one GPU of a tensor-parallel group holds: ``total x max(p / H_kv, 1) / p``."""
    tp = np.asarray(tensor_parallel, dtype=float)
    return np.asarray(
        np.asarray(kv_bytes_per_token_total, dtype=float) * kv_replication(n_kv_heads, tp) / tp, dtype=float
    )


def per_gpu_weight_bytes(weight_bytes_total: ArrayLike, tensor_parallel: ArrayLike) -> FloatArray:
    """Weight bytes one GPU of a tensor-parallel group holds: ``total / p``."""
    return np.asarray(
        np.asarray(weight_bytes_total, dtype=float) / np.asarray(tensor_parallel, dtype=float), dtype=float
    )


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


@dataclass(frozen=True)
class GpuMemory:
    """Memory of one GPU of a (tensor-parallel) vLLM server, in bytes: ``kv_pool = usable - weights - reserve``
    with ``usable = capacity x gpu_memory_utilization``; `kv_bytes_per_token` is what one GPU holds per token."""

    model: str
    gpu: str
    tensor_parallel: int
    capacity: float
    gpu_memory_utilization: float
    weights: float
    reserve: float
    kv_bytes_per_token: float
    block_size: int = DEFAULT_BLOCK_SIZE

    @property
    def usable(self) -> float:
        return self.capacity * self.gpu_memory_utilization

    @property
    def kv_pool(self) -> float:
        """KV bytes the engine allocates on this GPU (may be <= 0: the configuration does not fit)."""
        return self.usable - self.weights - self.reserve

    @property
    def num_gpu_blocks(self) -> int:
        """vLLM's ``num_gpu_blocks``: ``floor(kv_pool / (block_size x KV bytes per token per GPU))`` (0 if none)."""
        return max(int(self.kv_pool // (self.block_size * self.kv_bytes_per_token)), 0)

    @property
    def kv_tokens(self) -> int:
        """Tokens the KV pool holds: ``num_gpu_blocks x block_size``."""
        return self.num_gpu_blocks * self.block_size

    @property
    def fits(self) -> bool:
        """True when the pool holds at least one block."""
        return self.num_gpu_blocks >= 1

    def explain(self) -> str:
        """One line: the arithmetic, in GiB, and what to change when it does not fit."""
        g = GIB
        head = (
            f"{self.model} on {self.tensor_parallel} x {self.gpu}: per GPU {self.capacity / g:.1f} GiB x "
            f"{self.gpu_memory_utilization:g} = {self.usable / g:.1f} GiB usable - weights {self.weights / g:.1f} GiB "
            f"- reserve {self.reserve / g:.1f} GiB = KV pool {self.kv_pool / g:.2f} GiB "
            f"({self.kv_bytes_per_token / 2**10:.0f} KiB per token, {self.kv_tokens} tokens)"
        )
        if self.fits:
            return head
        return head + (
            "; the KV pool is below one block: use more GPUs (tensor parallel), a larger GPU, fp8 weights "
            "(quantization) or a higher gpu_memory_utilization"
        )


def gpu_memory(
    arch: Architecture,
    gpu: GPU | str,
    tensor_parallel: int = 1,
    *,
    dtype: object = None,
    quantization: object = None,
    kv_cache_dtype: object = None,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> GpuMemory:
    """The per-GPU memory breakdown of `arch` served on `tensor_parallel` GPUs `gpu` in the given precision
    (vLLM option names; see the module docstring): capacity, weights per GPU, reserve, KV pool, KV bytes per token.
    """
    hw = get_gpu(gpu)
    tp = int(tensor_parallel)
    refusal = tensor_parallel_refusal(
        arch.name, arch.n_heads, arch.n_kv_heads, tensor_parallel, within_node=False
    )
    if refusal:
        raise DataError(refusal)
    w = float(per_gpu_weight_bytes(weight_bytes(arch, dtype, quantization), tp))
    kv = float(
        per_gpu_kv_bytes_per_token(kv_bytes_per_token(arch, dtype, kv_cache_dtype), arch.n_kv_heads, tp)
    )
    return GpuMemory(
        model=arch.name,
        gpu=hw.name,
        tensor_parallel=tp,
        capacity=float(gpu_total_bytes(hw)),
        gpu_memory_utilization=float(gpu_memory_utilization),
        weights=w,
        reserve=float(reserve_gib) * GIB,
        kv_bytes_per_token=kv,
        block_size=int(block_size),
    )
