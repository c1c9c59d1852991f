"""One resolved serving configuration (`ServingConfig`): what one GPU of a vLLM server holds and does per token.

Built once per distinct (model, precision, tensor/expert parallel sizes, GPU, engine memory settings) by
`serving_config`; the model features, the physical checks, the advisor, plans and the experiments all read it.
Names follow vLLM's options: ``--dtype``, ``--quantization``, ``--kv-cache-dtype``, ``--tensor-parallel-size``,
``--enable-expert-parallel`` (here the expert-parallel size: 1, or the tensor-parallel size as vLLM forms the
group without data parallelism), ``--gpu-memory-utilization``, ``--block-size``, ``--max-num-batched-tokens``,
``--max-num-seqs`` and the logged ``num_gpu_blocks``. Per GPU, in bytes:

* weights: the dense part (embeddings and LM head in the serving dtype, the other linear layers at the quantized
  width; mxfp4 quantizes the routed experts only) over ``p`` GPUs; the routed experts ``X`` over ``p`` GPUs
  (tensor-split) or, with expert parallelism ``e``, ``ceil(X / e)`` whole experts per GPU (vLLM's expert map);
* KV bytes per token: for MHA/GQA ``2 max(H_kv // p, 1) d_h b_kv`` per layer (vLLM replicates KV heads when
  ``p`` exceeds them, ``ModelConfig.get_num_kv_heads``), for MLA ``(kv_lora_rank + qk_rope_head_dim) b_kv`` per
  layer, kept whole on every rank (a sparse model's fp8 latent on Hopper in vLLM's ``fp8_ds_mla`` layout,
  `fp8_sparse_latent_bytes`), plus for DeepSeek sparse attention each indexer's key (`indexer_key_bytes`); a
  request of context ``c`` holds
  ``c x kv_bytes_full + min(c, W) x kv_bytes_window`` (`kv_bytes`), sliding-window layers holding at most their
  window ``W``, so a row of context ``IL + OL`` has the effective per-token value
  ``kv_bytes_full + kv_bytes_window x min(c, W) / c`` (`effective_kv_bytes_per_token`);
* the KV pool ``capacity x gpu_memory_utilization - weights - reserve`` (`slimlib.model.memory.kv_pool_bytes`),
  ``num_gpu_blocks`` (the logged one where given, else vLLM's ``floor(pool / (block_size x KV bytes per token of
  all layers))``) and the KV token capacity;
* linear FLOPs per token: ``2 x`` the active linear parameters (LM head included, embedding lookup not) ``/ p``;
* a hybrid's linear-attention (Gated DeltaNet) layers hold no KV cache but a fixed state per sequence
  (``state_bytes``: ``H_v / p`` recurrent states of ``d_k x d_v`` elements and the convolution's last ``K - 1``
  inputs per layer). vLLM's hybrid KV-cache manager (docs/design/hybrid_kv_cache_manager.md) gives every layer one
  page size: it raises the attention block size to the smallest multiple of `KERNEL_BLOCK_ALIGNMENT` whose page
  holds one layer's state (``Platform._align_hybrid_block_size``, without prefix caching), pads the state to that
  page, and groups the layers ``m = min(attention layers, linear layers)`` per KV-cache group (the larger count
  where it is under 1.5 times the smaller, ``_get_kv_cache_groups_uniform_page_size``); a block is one page
  of each of ``m`` layers, and a request holds ``ceil(c / block_size)`` blocks per attention group and one per
  state group (`hybrid_request_bytes`);
* DeepSeek-V4's compressed attention (`compressed_cache`), whole on every rank: each layer's sliding window of
  ``W`` tokens and each CSA / HCA layer's compressed entries (one per 4 / 128 tokens), all in vLLM's 584-byte
  ``fp8_ds_mla`` entry, each CSA layer's indexer keys (one per 4 tokens), and per sequence the compressors' state
  (``sequence_bytes``); a request holds ``c x kv_bytes_full + min(c, W) x kv_bytes_window + sequence_bytes``.
  vLLM keeps these in separate pools of one page size (``kv_cache_interface.py``); the pages' 576-byte alignment
  and their rounding to whole blocks are not counted;
* MiniMax-M3's block-sparse attention (vLLM's ``vllm/models/minimax_m3``): every layer caches its GQA keys and
  values (``2 H_kv / p d_h b_kv``), each sparse layer also one 128-wide bf16 index key per token, whole on every
  rank (`block_sparse_index_key_bytes`); a decode step reads the K/V of the ``index_topk`` selected tokens
  (``sparse_topk_blocks`` blocks of 128, the local block among them) in the sparse layers (``kv_bytes_selected``)
  and every token's K/V in the full layers and index key in the sparse ones; pages are the 128-token sparse blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from slimlib.errors import DataError, UnknownNameError
from slimlib.model.equations import FloatArray, delta_rule_prefill_flops, ssd_prefill_flops
from slimlib.model.memory import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_RESERVE_GIB,
    gpu_total_bytes,
    kv_pool_bytes,
    kv_replication,
    tensor_parallel_refusal,
)
from slimlib.registry.architectures import Architecture
from slimlib.registry.config_reader import MAMBA2_CHUNK
from slimlib.registry.gpus import GIB, GPU, get_gpu
from slimlib.registry.param_count import CSA_RATIO, HC_SITES, HCA_RATIO, compressor_overlap, mla_params
from slimlib.registry.precision import (
    DTYPES,
    FP4_EXPERTS,
    KV_CACHE_DTYPES,
    QUANTIZATIONS,
    VLLM_QUANTIZATION,
    dtype_bytes,
    kv_bytes_per_element,
    weight_bytes_per_element,
    weight_precision,
)
from slimlib.registry.vllm_flags import GPU_SERVER_DEFAULTS, server_batched_tokens, server_max_num_seqs

__all__ = [
    "ServingConfig",
    "kv_heads_per_rank",
    "serving_config",
]

#: vLLM method (`VLLM_QUANTIZATION`) -> the least CUDA compute capability it runs on, vLLM 0.32.0's
#: ``get_min_capability()`` of ``Fp8Config`` (75), ``ModelOptNvFp4Config`` (75) and ``Mxfp4Config`` (80); below the
#: precision's own tensor cores they run weight-only
_MIN_QUANT_CAPABILITY = {"fp8": 7.5, "modelopt_fp4": 7.5, "mxfp4": 8.0, "compressed-tensors": 7.5,
                         "deepseek_v4_fp8": 8.0, "modelopt_mixed": 7.5}  # fmt: skip
#: quantizations of the routed experts only (gpt-oss's mxfp4 checkpoints, Kimi-K2.5's compressed-tensors W4A16)
_EXPERTS_ONLY = ("mxfp4", "w4a16-experts")


def indexer_key_bytes(index_head_dim: int) -> int:
    """Bytes of one token's key in a sparse-attention indexer's cache: fp8 values and one fp32 scale per 128
    (vLLM's ``DeepseekV32IndexerCache``: ``head_dim + head_dim // 128 * 4`` uint8, whatever the KV-cache dtype)."""
    return index_head_dim + index_head_dim // 128 * 4


#: bytes of one element of MiniMax-M3's index-key cache: bf16, vLLM's default ``indexer_kv_dtype``
#: (``AttentionConfig``; ``MiniMaxM3IndexerCache`` also takes fp8, which SLIM does not price)
MSA_INDEX_KEY_ELEMENT_BYTES = 2


def block_sparse_index_key_bytes(index_head_dim: int) -> int:
    """Bytes of one token's key in one MiniMax-M3 sparse layer's index cache: one head of `index_head_dim` bf16
    values per token, whole on every rank (``MiniMaxM3IndexerCache``: ``num_kv_heads`` 1, key-only; 256 bytes),
    whatever the KV-cache dtype."""
    return index_head_dim * MSA_INDEX_KEY_ELEMENT_BYTES


def fp8_sparse_latent_bytes(kv_lora_rank: int, rope_dim: int) -> int:
    """Bytes of one token's fp8 latent in vLLM's sparse FlashMLA cache (``fp8_ds_mla``, which vLLM picks for an fp8
    KV cache of a sparse-attention model below Blackwell): the latent in fp8 with one fp32 scale per 128 values, the
    RoPE key in bf16 (656 for DeepSeek-V3.2)."""
    return kv_lora_rank + kv_lora_rank // 128 * 4 + 2 * rope_dim


#: bytes of one DeepSeek-V4 KV entry in vLLM's fp8_ds_mla layout (``DeepseekV4MultiHeadLatentAttentionWrapper``'s
#: ``head_bytes``, ``MLAAttentionSpec.real_page_size_bytes``): 448 fp8 values without RoPE, the 64-wide RoPE part in
#: bf16, 7 scale bytes and 1 of padding; the sliding window and the compressed entries share it
V4_ENTRY_BYTES = 584
#: the most query heads per rank vLLM's FlashMLA runs DeepSeek-V4's attention at (it pads fewer to 64 or 128)
FLASHMLA_MAX_HEADS = 128
#: bytes of one element of a DeepSeek-V4 compressor's state (``CompressorStateCache``: float32)
V4_STATE_ELEMENT_BYTES = 4


#: the bytes of one element of DeepSeek-V4's widened residual stream (vLLM keeps the ``hc_mult`` copies in bf16)
HC_ELEMENT_BYTES = 2


def hyper_connection_bytes(hidden_size: int, hc_mult: int) -> int:
    """Bytes one token's hyper-connections move in one layer (0 without them, `hc_mult` 0): at each of `HC_SITES`
    sites vLLM's ``mhc_pre`` reads the ``n`` = `hc_mult` residual copies twice (the prenorm mixing GEMM, then the
    Sinkhorn-weighted sum) and writes the layer's input, and ``mhc_post`` reads the copies and the layer's output
    and writes the copies: ``2 x 2 (2n + 1) D`` elements of `HC_ELEMENT_BYTES`; the mixing coefficients
    (``(2 + n) n`` per token) are left out."""
    if hc_mult <= 0:
        return 0
    return HC_SITES * 2 * (2 * hc_mult + 1) * hidden_size * HC_ELEMENT_BYTES


def compressor_state_bytes(ratio: int, width: int) -> int:
    """Bytes one sequence's state of one DeepSeek-V4 compressor holds (vLLM's ``CompressorStateCache``): the last
    ``c ratio`` tokens' KV and score of ``c width`` float32 each (``c`` = 2 for the overlapping 4:1 compressor)."""
    overlap = compressor_overlap(ratio)
    return overlap * ratio * 2 * overlap * width * V4_STATE_ELEMENT_BYTES


def compressed_cache(a: Architecture) -> dict[str, float]:
    """DeepSeek-V4's cache on one GPU (module docstring), whole on every rank: ``kv_bytes_full`` per token
    (``584 / 128`` per HCA layer, ``584 / 4`` and the indexer's ``132 / 4`` per CSA layer), of which
    ``kv_bytes_selected`` is the CSA entries a step reads at most ``index_topk`` of (``sparse_topk``, counted in
    tokens: ``4 index_topk``), ``kv_bytes_window`` (``584`` per layer over the last ``W`` tokens) and
    ``sequence_bytes`` (the compressors' state: the main one of each CSA and HCA layer and each indexer's)."""
    entry, key = float(V4_ENTRY_BYTES), float(indexer_key_bytes(a.index_head_dim)) if a.n_csa_layers else 0.0
    csa = a.n_csa_layers * entry / CSA_RATIO
    state = a.n_csa_layers * (compressor_state_bytes(CSA_RATIO, a.head_dim)
                              + compressor_state_bytes(CSA_RATIO, a.index_head_dim)) + a.n_hca_layers * (
        compressor_state_bytes(HCA_RATIO, a.head_dim))  # fmt: skip
    return {
        "kv_bytes_full": a.n_hca_layers * entry / HCA_RATIO + csa + a.n_csa_layers * key / CSA_RATIO,
        "kv_bytes_selected": csa,
        "sparse_topk": CSA_RATIO * a.index_topk if a.n_csa_layers else 0,
        "kv_bytes_window": a.n_layers * entry,
        "sequence_bytes": float(state),
    }


#: compute capability from which vLLM runs sparse MLA with FlashInfer (Blackwell), whose fp8 latent is plain
_FLASHINFER_SPARSE_CAPABILITY = 10.0
#: the smallest block size vLLM's attention backends take for a hybrid's pages (FlashAttention: multiples of 16,
#: ``FlashAttentionBackend.get_supported_kernel_block_sizes``)
KERNEL_BLOCK_ALIGNMENT = 16


def hybrid_request_bytes(
    context: ArrayLike,
    block_size: ArrayLike,
    block_bytes: ArrayLike,
    attention_groups: ArrayLike,
    state_groups: ArrayLike,
) -> FloatArray:
    """Cache bytes one request of `context` tokens holds in a hybrid's pool (module docstring): ``(attention_groups
    ceil(c / block_size) + state_groups) block_bytes``."""
    c = np.asarray(context, dtype=float)
    blocks = np.asarray(attention_groups, dtype=float) * np.ceil(c / np.asarray(block_size, dtype=float))
    return np.asarray((blocks + np.asarray(state_groups, dtype=float)) * block_bytes, dtype=float)


@dataclass(frozen=True)
class ServingConfig:
    """Per-GPU memory and work of one serving configuration (module docstring); build it with `serving_config`.

    `identity` is the architecture's content identity (its name where the reader gave none): two models that
    share a name are never one configuration. Memory fields are bytes per GPU; `capacity` is 0 without a device (then the pool and capacities are NaN);
    `bytes_per_weight` is the width of the quantized (linear-layer) weights."""

    model: str
    identity: str
    gpu: str
    tensor_parallel: int
    expert_parallel: int
    quantization: str
    kv_cache_dtype: str
    weight_precision: str
    bytes_per_weight: float
    capacity: float
    gpu_memory_utilization: float
    reserve: float
    block_size: int
    max_num_batched_tokens: int
    max_num_seqs: int
    logged_gpu_blocks: int
    dense_weights: float
    expert_weights: float
    kv_bytes_per_element: float
    kv_bytes_full: float
    kv_bytes_window: float
    sliding_window: int
    n_experts_per_gpu: int
    linear_flops_per_token: float
    lm_head_flops_per_token: float
    #: a hybrid's linear-attention state one sequence holds on this GPU (bytes read and written each decode step),
    #: and its pool layout: bytes of one block, KV-cache groups of attention and of state layers (0: not a hybrid)
    state_bytes: float = 0.0
    #: a hybrid's linear-attention prefill on this GPU, summed over its linear layers: the chunked recurrence's FLOPs
    #: and the causal convolution's bytes per prompt token (0: not a hybrid)
    linear_prefill_flops_per_token: float = 0.0
    linear_conv_bytes_per_token: float = 0.0
    hybrid_block_bytes: float = 0.0
    attention_groups: int = 0
    state_groups: int = 0
    #: DeepSeek sparse attention: tokens each query reads (0: dense), and the latent bytes per token of that read
    #: (within `kv_bytes_full`, which also holds the indexer's keys of every token)
    sparse_topk: int = 0
    kv_bytes_selected: float = 0.0
    #: bytes one sequence holds whatever its context (DeepSeek-V4's compressor state; `compressed_cache`)
    sequence_bytes: float = 0.0
    #: DeepSeek-V4's compressed attention: vLLM's own pools (its --num-gpu-blocks-override counts other pages) and
    #: its ``deepseek_v4_fp8`` method for every fp8 checkpoint
    compressed: bool = False

    @property
    def vllm_quantization(self) -> str:
        """The ``--quantization`` value vLLM takes for this checkpoint ('' for none)."""
        if not self.quantization or self.quantization == "none":
            return ""
        return (
            "deepseek_v4_fp8"
            if self.compressed
            else VLLM_QUANTIZATION.get(self.quantization, self.quantization)
        )

    @property
    def weights(self) -> float:
        """Weight bytes on this GPU (dense + expert parts)."""
        return self.dense_weights + self.expert_weights

    @property
    def kv_bytes_per_token(self) -> float:
        """KV bytes per token of all layers on this GPU (a sliding-window layer counted as a full one)."""
        return self.kv_bytes_full + self.kv_bytes_window

    @property
    def block_bytes(self) -> float:
        """Bytes of one block of the pool: ``block_size x kv_bytes_per_token``, a hybrid's page of ``m`` layers."""
        return self.hybrid_block_bytes or self.block_size * self.kv_bytes_per_token

    def kv_bytes(self, context: ArrayLike) -> FloatArray:
        """KV bytes one request of `context` tokens holds on this GPU: ``c kv_full + min(c, W) kv_window``; a
        hybrid's blocks with its state (`hybrid_request_bytes`)."""
        c = np.asarray(context, dtype=float)
        if self.state_groups:
            return hybrid_request_bytes(
                c, self.block_size, self.block_bytes, self.attention_groups, self.state_groups
            )
        window = np.minimum(c, self.sliding_window) if self.sliding_window else c
        held = np.where(c > 0, self.sequence_bytes, 0.0)
        return np.asarray(c * self.kv_bytes_full + window * self.kv_bytes_window + held, dtype=float)

    def effective_kv_bytes_per_token(self, context: ArrayLike) -> FloatArray:
        """KV bytes per token a request of `context` tokens holds on average: ``kv_bytes(c) / c``."""
        c = np.maximum(np.asarray(context, dtype=float), 1.0)
        return np.asarray(self.kv_bytes(c) / c, dtype=float)

    def request_blocks(self, context: ArrayLike) -> FloatArray:
        """KV blocks one request of `context` tokens holds: ``ceil(c / block_size)``; with sliding-window layers,
        the blocks of its KV bytes (`kv_bytes`)."""
        c = np.asarray(context, dtype=float)
        if self.state_groups:
            return self.attention_groups * np.ceil(c / self.block_size) + self.state_groups
        if self.sliding_window:
            c = self.kv_bytes(c) / self.kv_bytes_per_token
        return np.asarray(np.ceil(c / self.block_size), dtype=float)

    def max_sequences(self, context: ArrayLike) -> FloatArray:
        """Requests of `context` tokens the pool holds at once: ``floor(num_gpu_blocks / request_blocks(c))``."""
        return np.asarray(np.floor(self.num_gpu_blocks / self.request_blocks(context)), dtype=float)

    def request_kv_bytes(self, context: ArrayLike) -> FloatArray:
        """KV bytes one request of `context` tokens holds on one GPU: its blocks (`request_blocks`) of
        ``block_size x kv_bytes_per_token``."""
        return np.asarray(self.request_blocks(context) * self.block_bytes, dtype=float)

    @property
    def usable(self) -> float:
        return self.capacity * self.gpu_memory_utilization if self.capacity else math.nan

    @property
    def kv_pool(self) -> float:
        """KV bytes the engine allocates on this GPU: the logged blocks where given, else
        `slimlib.model.memory.kv_pool_bytes` (may be <= 0: the configuration does not fit); NaN without a device."""
        if self.logged_gpu_blocks:
            return float(self.logged_gpu_blocks * self.block_bytes)
        if not self.capacity:
            return math.nan
        return float(
            kv_pool_bytes(self.capacity, self.weights, self.gpu_memory_utilization, self.reserve / GIB)
        )

    @property
    def num_gpu_blocks(self) -> int:
        """vLLM's ``num_gpu_blocks``: the logged one, else ``floor(pool / (block_size x kv_bytes_per_token))``
        (0 when none fits or without a device)."""
        if self.logged_gpu_blocks:
            return self.logged_gpu_blocks
        pool = self.kv_pool
        if not pool > 0:
            return 0
        return int(pool // self.block_bytes)

    def blocks_in(self, pool_bytes: float) -> int:
        """Blocks of `block_size` tokens a KV space of `pool_bytes` holds (e.g. vLLM CPU's
        ``VLLM_CPU_KVCACHE_SPACE``): ``floor(pool / (block_size x kv_bytes_per_token))``."""
        return max(int(pool_bytes // self.block_bytes), 0)

    @property
    def kv_tokens(self) -> int:
        """KV token slots on this GPU: ``num_gpu_blocks x block_size``."""
        return self.num_gpu_blocks * self.block_size

    def kv_token_capacity(self, context: ArrayLike) -> FloatArray:
        """Tokens of requests of `context` tokens the pool holds: ``num_gpu_blocks x block_size`` where the blocks
        are logged, else ``pool / effective_kv_bytes_per_token(context)`` (0 when the pool is <= 0; NaN without
        a device)."""
        c = np.asarray(context, dtype=float)
        if self.logged_gpu_blocks and not self.state_groups:
            return np.full(np.shape(c), float(self.kv_tokens))
        pool = self.kv_pool
        return np.asarray(np.maximum(pool / self.effective_kv_bytes_per_token(c), 0.0), dtype=float)

    @property
    def fits(self) -> bool:
        """True when the pool holds at least one block (a hybrid: one sequence's attention and state blocks)."""
        return self.num_gpu_blocks >= (self.attention_groups + self.state_groups if self.state_groups else 1)

    def explain(self) -> str:
        """One line: the arithmetic, in GiB, and what to change when it does not fit."""
        g = GIB
        where = f"{self.model} on {self.tensor_parallel} x {self.gpu}"
        if self.expert_parallel > 1:
            where += f" (expert parallel {self.expert_parallel})"
        weights = f"weights {self.weights / g:.1f} GiB"
        if self.expert_weights:
            weights += f" (dense {self.dense_weights / g:.2f} + experts {self.expert_weights / g:.2f})"
        per_token = f"{self.kv_bytes_per_token / 2**10:.1f} KiB KV per token"
        if self.state_groups:
            per_token += f" and {self.state_bytes / 2**20:.1f} MiB linear-attention state per sequence"
        if self.sequence_bytes:
            per_token += (f" (window {self.kv_bytes_window / 2**10:.1f} KiB of it, for {self.sliding_window} "
                          f"tokens) and {self.sequence_bytes / 2**20:.1f} MiB compressor state per sequence")  # fmt: skip
        if self.logged_gpu_blocks:
            return (
                f"{where}: per GPU {weights}; logged num_gpu_blocks {self.logged_gpu_blocks} x block "
                f"{self.block_size} x {per_token} = KV pool {self.kv_pool / g:.2f} GiB ({self.kv_tokens} tokens)"
            )
        if not self.capacity:
            return f"{where}: per GPU {weights}, {per_token} (no device: no KV pool)"
        head = (
            f"{where}: per GPU {self.capacity / g:.1f} GiB x {self.gpu_memory_utilization:g} = "
            f"{self.usable / g:.1f} GiB usable - {weights} - reserve {self.reserve / g:.1f} GiB = KV pool "
            f"{self.kv_pool / g:.2f} GiB ({per_token}, {self.num_gpu_blocks} blocks of {self.block_size} = "
            f"{self.kv_tokens} tokens)"
        )
        if self.state_groups:
            head = head.removesuffix(" tokens)") + (
                f" tokens, a sequence holding {self.attention_groups} block per {self.block_size} tokens and "
                f"{self.state_groups} for its state)"
            )
        if self.fits:
            return head
        return head + (
            "; the KV pool is below one block: use more GPUs (tensor parallel), a larger GPU, fp8 weights "
            "(quantization) or a higher gpu_memory_utilization"
        )

    def check_fits(self, where: str = "") -> None:
        """DataError showing the arithmetic (GiB) when the KV pool holds no block: the weights do not fit."""
        if not self.capacity or self.logged_gpu_blocks or self.fits:
            return
        g = GIB
        at = f"{where}: " if where else ""
        block = self.block_bytes
        if self.kv_pool > 0 and self.state_groups:  # the weights fit, one sequence's blocks do not
            need = self.attention_groups + self.state_groups
            raise DataError(
                f"{at}one sequence of {self.model} needs {need} blocks of {block / g:.3g} GiB (pages of "
                f"{self.block_size} tokens, raised to hold a linear-attention layer's state), more than the KV pool "
                f"of {self.kv_pool / g:.3g} GiB it leaves on {self.gpu}; use more GPUs (tensor_parallel) or a "
                "larger GPU"
            )
        if (
            self.kv_pool > 0 and self.block_size > DEFAULT_BLOCK_SIZE
        ):  # the weights fit, one large block does not
            raise DataError(
                f"{at}one KV block of {self.block_size:g} tokens needs {block / g:.3g} GiB, more than the KV pool "
                f"of {self.kv_pool / g:.3g} GiB that {self.model} leaves on {self.gpu}; give vLLM's block size "
                f"({DEFAULT_BLOCK_SIZE} tokens)"
            )
        fewer = (
            "" if self.weight_precision == "fp4" else " or fewer bytes per weight (quantization fp8 or fp4)"
        )
        raise DataError(
            f"{at}{self.model} ({self.bytes_per_weight:g} bytes per weight) does not fit on {self.gpu} at "
            f"tensor_parallel = {self.tensor_parallel}: KV pool = {self.capacity / g:.1f} GiB x "
            f"{self.gpu_memory_utilization:g} - weights {self.weights / g:.1f} GiB - reserve {self.reserve / g:g} GiB "
            f"= {self.kv_pool / g:.1f} GiB <= 0; use more GPUs (tensor_parallel), a larger GPU{fewer}"
        )


def _choice(value: object, accepted: dict[str, Any], option: str) -> str:
    """`value` lower-cased ('' for None/NaN/empty); UnknownNameError listing vLLM's accepted values otherwise."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    k = str(value).strip().lower()
    if k and k not in accepted:
        raise UnknownNameError(
            f"unknown {option} {value!r}: vLLM accepts {', '.join(accepted)} (or leave it empty)"
        )
    return k


def kv_heads_per_rank(n_kv_heads: int, tensor_parallel: int) -> int:
    """KV heads one of `tensor_parallel` ranks holds: its share, at least one (replicated beyond ``H_kv``)."""
    return max(int(n_kv_heads) // int(tensor_parallel), 1)


def _whole(value: object, name: str, default: int, low: int = 1) -> int:
    """A whole-number engine setting (default where None/NaN/0); DataError below `low` or fractional."""
    if value is None or (isinstance(value, float) and value != value):
        return default
    v = float(value)  # type: ignore[arg-type]
    if v != round(v) or v < low:
        raise DataError(f"{name} = {v:g} must be a whole number >= {low}")
    return int(v) or default


def _expert_params(a: Architecture) -> float:
    """Parameters of all routed experts: the reader's `expert_params`, else ``n_moe_layers X m D F_moe``."""
    if not a.is_moe:
        return 0.0
    if a.expert_params:
        return float(a.expert_params)
    return float(
        a.n_moe_layers * a.n_experts * a.n_ffn_matrices * a.hidden_size * (a.moe_ffn_size or a.ffn_size)
    )


def _linear_flops_per_token(a: Architecture, tp: int) -> float:
    """FLOPs of one token through one GPU's share of the layers: Eq. 8's bracket ``4 D D_q + 4 D D_kv + 2 m D F``
    (2 FLOPs per weight of the projections and FFN; biases, norms and routers left out, as Eq. 8 does) summed over
    the layers and split over `tp` ranks, with ``D_kv`` widened by vLLM's KV-head replication (each rank computes
    its replicated heads) and ``F`` the width a token passes through in each layer (dense layers ``ffn_size``, MoE
    layers its top-k routed and shared experts, `Architecture.ffn_size_active`). MLA: the attention part is 2 x its
    projection weights (`slimlib.registry.param_count.mla_params`), all split over the ranks; a full-attention
    layer's output gate adds ``2 D D_q``; a linear-attention layer is 2 x its weights (`linear_layer_params`); a
    sparse attention's indexers are 2 x their weights on every rank (MiniMax-M3: its index-key head; its index
    queries ``2 D H_i d_i`` split and replicated with the KV heads). DeepSeek-V4: 2 x its active weights without the
    embedding and the LM head (the grouped output projection, the hyper-connections' mixing and the routers
    included), the replicated ones (`Architecture.indexer_params`) on every rank."""
    if a.is_compressed:  # DeepSeek-V4: 2 x the active weights but the embeddings; the replicated ones whole
        split = float(a.active_params - a.embedding_params - a.indexer_params)
        return 2.0 * split / tp + 2.0 * a.indexer_params
    d = float(a.hidden_size)
    m = float(a.n_ffn_matrices)
    ffn = a.mean_ffn_width
    if a.is_mla:
        attention = 2.0 * mla_params(
            a.hidden_size, a.n_heads, q_lora_rank=a.q_lora_rank, kv_lora_rank=a.kv_lora_rank,
            qk_nope_head_dim=a.qk_nope_head_dim, qk_rope_head_dim=a.qk_rope_head_dim, v_head_dim=a.v_head_dim,
        )  # fmt: skip
    elif a.v_head_dim or a.sliding_kv_heads or a.sliding_head_dim:  # per-kind heads or value widths
        q = a.n_heads * (
            a.head_dim * (2 if a.attn_output_gate else 1) + a.value_head_dim
        )  # query (gate), output
        # one KV head's key and value projections (a shared one: the key's only)
        width = a.head_dim + (0 if a.shared_kv_projection else a.value_head_dim)
        full = 2.0 * d * q + 2.0 * d * a.n_kv_heads * float(kv_replication(a.n_kv_heads, tp)) * width
        sliding_kv = a.sliding_kv_heads or a.n_kv_heads
        sliding_q = a.n_heads * a.sliding_kv_width if a.sliding_head_dim else q
        sliding_kv_flops = 2.0 * d * sliding_kv * float(kv_replication(sliding_kv, tp)) * a.sliding_kv_width
        sliding = 2.0 * d * sliding_q + sliding_kv_flops
        n_sliding = a.n_sliding_layers
        attention = ((a.n_attention_layers - n_sliding) * full + n_sliding * sliding) / a.n_attention_layers
    else:
        r = float(kv_replication(a.n_kv_heads, tp))
        q = a.n_heads * a.head_dim * (3 if a.attn_output_gate else 2)  # query (and its output gate), output
        attention = 2.0 * d * q + 4.0 * d * (a.d_kv * r)
    mixing = a.n_attention_layers * attention + a.n_linear_layers * 2.0 * a.linear_layer_params
    if a.is_block_sparse:  # MiniMax-M3's index queries, split (and replicated) with the KV heads
        index_q = 2.0 * d * a.index_heads * a.index_head_dim
        mixing += a.n_indexer_layers * index_q * float(kv_replication(a.index_heads, tp))
    # the lightning indexers' projections run whole on every rank (vLLM replicates them)
    return (mixing + a.n_layers * 2.0 * m * d * ffn) / tp + 2.0 * a.indexer_params


def _hybrid_layout(
    a: Architecture, tp: int, page_per_token: float, conv_bytes: float, block_size: int
) -> dict[str, Any]:
    """A hybrid's state and pool layout on one of `tp` GPUs (module docstring): the block size (raised where one
    page must hold a layer's state), ``state_bytes``, the prefill's ``linear_prefill_flops_per_token`` (the chunked
    delta rule's, Mamba-2's chunked scan's) and
    ``linear_conv_bytes_per_token`` (the convolution's input read and output written), ``hybrid_block_bytes``,
    ``attention_groups`` and ``state_groups``; `page_per_token`: KV bytes of one token in one attention layer on this GPU; `conv_bytes`: the
    serving dtype's bytes (the convolution state's). Only `block_size` for a model without linear layers."""
    if not a.n_linear_layers:
        return {"block_size": block_size}
    keys = (
        ("n_groups", "mamba_num_heads")
        if a.linear_kind == "mamba2"
        else ("linear_num_key_heads", "linear_num_value_heads")
    )
    for heads, key in zip((a.linear_key_heads, a.linear_value_heads), keys, strict=True):
        if heads % tp:
            raise DataError(f"tensor_parallel = {tp} does not divide {a.name}'s {heads} linear-attention heads "
                            f"({key}); vLLM splits them over the ranks: use a divisor of {heads}")  # fmt: skip
    recurrent = a.linear_value_heads // tp * a.linear_key_head_dim * a.linear_value_head_dim * a.state_bytes
    conv = a.linear_conv_channels // tp * (a.linear_conv_kernel - 1) * conv_bytes
    layer_state = float(recurrent + conv)
    align = max(KERNEL_BLOCK_ALIGNMENT, block_size)
    block = max(block_size, align * math.ceil(layer_state / (align * page_per_token)))
    m = min(a.n_attention_layers, a.n_linear_layers)
    if (
        max(a.n_attention_layers, a.n_linear_layers) < 1.5 * m
    ):  # counts this close: groups of the larger count
        m = max(a.n_attention_layers, a.n_linear_layers)
    if a.linear_kind == "mamba2":  # the key fields hold the B/C groups and the state size
        layer_flops = float(ssd_prefill_flops(a.linear_key_head_dim, a.linear_value_head_dim,
                                              a.linear_value_heads // tp, a.linear_key_heads // tp,
                                              MAMBA2_CHUNK))  # fmt: skip
    else:
        layer_flops = (a.linear_value_heads // tp) * float(
            delta_rule_prefill_flops(a.linear_key_head_dim, a.linear_value_head_dim)
        )
    return {
        "block_size": block,
        "state_bytes": a.n_linear_layers * layer_state,
        "linear_prefill_flops_per_token": a.n_linear_layers * layer_flops,
        "linear_conv_bytes_per_token": a.n_linear_layers * 2.0 * (a.linear_conv_channels // tp) * conv_bytes,
        "hybrid_block_bytes": m * block * page_per_token,
        "attention_groups": math.ceil(a.n_attention_layers / m),
        "state_groups": math.ceil(a.n_linear_layers / m),
    }


def serving_config(
    arch: Architecture,
    gpu: GPU | str | None = None,
    *,
    dtype: object = None,
    quantization: object = None,
    kv_cache_dtype: object = None,
    tensor_parallel: object = 1,
    expert_parallel: object = 1,
    gpu_memory_utilization: object = None,
    block_size: object = None,
    max_num_batched_tokens: object = None,
    max_num_seqs: object = None,
    gpu_blocks: object = None,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
    within_node: bool = False,
) -> ServingConfig:
    """The `ServingConfig` of `arch` on `tensor_parallel` GPUs `gpu` (None: no device, no pool).

    Empty settings (None, NaN, '') take vLLM's defaults (the token budget and ``max_num_seqs``: vLLM 0.32's for the
    GPU, `server_batched_tokens`, `server_max_num_seqs`); an empty `quantization` is the checkpoint's own (``arch.quantization``). DataError, one line, for what vLLM refuses: a precision value it does not accept
    (the message lists the accepted ones), a quantization other than the checkpoint's, fp8/fp4 weights on a GPU
    without fp8/fp4 tensor cores or weight-only kernels, a tensor-parallel size that does not split the heads, an
    expert-parallel size other than 1 or the tensor-parallel size (or on a dense model), a utilization outside
    (0, 1]; with `within_node`, a tensor-parallel size beyond one node. A pool <= 0 is not refused here:
    `ServingConfig.check_fits` does that.
    """
    hw = get_gpu(gpu) if gpu is not None and str(gpu) != "" else None
    tp = _whole(tensor_parallel, "tensor_parallel", 1)
    ep = _whole(expert_parallel, "expert_parallel", 1)
    d = _choice(dtype, DTYPES, "dtype")
    kvd = _choice(kv_cache_dtype, KV_CACHE_DTYPES, "kv_cache_dtype")
    q = _choice(quantization, QUANTIZATIONS, "quantization")
    own = arch.quantization.strip().lower()
    if q in FP4_EXPERTS and q != own:
        raise DataError(
            f"quantization = {q!r} is a mixed checkpoint's own method (8-bit weights, 4-bit experts); the "
            f"checkpoint of {arch.name} is {own or '16-bit'}: leave quantization empty or give {own or 'fp8'!r}"
        )
    if own and q and q != "none" and weight_precision(q) != weight_precision(own):
        raise DataError(
            f"quantization = {q!r} but the checkpoint of {arch.name} is quantized as {own!r}; vLLM serves a "
            f"quantized checkpoint in its own method: leave quantization empty or give {own!r}"
        )
    if own and own not in QUANTIZATIONS:
        raise DataError(
            f"the checkpoint of {arch.name} is quantized as {own!r}, whose bytes per weight the precision table "
            f"(slimlib.registry.precision) does not hold; it prices {', '.join(QUANTIZATIONS)}"
        )
    method = q if q and q != "none" else own
    if own in FP4_EXPERTS:  # fp8 asked of a DeepSeek-V4 checkpoint: its own method, experts at 4 bits
        method = own
    prec = weight_precision(method)
    if hw is not None and prec != "none":
        peak = {"fp8": hw.peak_flops_fp8, "fp4": hw.peak_flops_fp4}.get(prec)  # int4: 16-bit math
        least = _MIN_QUANT_CAPABILITY[VLLM_QUANTIZATION[method]]
        if not peak and hw.compute_capability < least:
            cores = "" if prec == "int4" else f"{prec} tensor cores or "
            raise DataError(
                f"quantization {method!r} ({prec} weights) on {hw.name}: vLLM runs {prec} weights on GPUs with "
                f"{cores}NVIDIA compute capability >= {least:g} (weight-only kernels), which the registry does not "
                f"give {hw.name}; serve it unquantized or on another GPU"
            )
    refusal = tensor_parallel_refusal(arch.name, arch.n_heads, arch.n_kv_heads, tp, within_node=within_node)
    if refusal:
        raise DataError(refusal)
    if arch.is_compressed and arch.n_heads / tp > FLASHMLA_MAX_HEADS:
        raise DataError(f"tensor_parallel = {tp} leaves {arch.n_heads // tp} heads per rank of {arch.name}; vLLM's "
                        f"DeepSeek-V4 attention (FlashMLA) takes at most {FLASHMLA_MAX_HEADS}: use a larger degree")  # fmt: skip
    if arch.is_compressed and arch.n_experts % tp:
        raise DataError(f"tensor_parallel = {tp} does not divide {arch.name}'s {arch.n_experts} routed experts; "
                        "vLLM's DeepSeek-V4 splits them evenly over the ranks: use a divisor")  # fmt: skip
    if arch.o_groups and arch.o_groups % tp:
        raise DataError(f"tensor_parallel = {tp} does not divide {arch.name}'s {arch.o_groups} output-projection "
                        f"groups (o_groups); vLLM splits them over the ranks: use a divisor of {arch.o_groups}")  # fmt: skip
    if ep > 1 and not arch.is_moe:
        raise DataError(f"expert_parallel = {ep} but {arch.name} has no experts; use 1")
    if ep not in (1, tp):
        raise DataError(
            f"expert_parallel = {ep} with tensor_parallel = {tp}: vLLM's expert-parallel group is the "
            "tensor-parallel group (no data parallelism here): use 1 or the tensor_parallel size"
        )
    util = float(DEFAULT_GPU_MEMORY_UTILIZATION if gpu_memory_utilization is None else gpu_memory_utilization)  # type: ignore[arg-type]
    if util != util:
        util = DEFAULT_GPU_MEMORY_UTILIZATION
    if not 0 < util <= 1:
        raise DataError(f"gpu_memory_utilization = {util:g} must be in (0, 1]")

    serve = dtype_bytes(d, arch.weight_bytes)
    quant = weight_bytes_per_element(method if prec != "none" else None, serve)
    expert_quant = 0.5 if method in FP4_EXPERTS else quant
    dense_quant = serve if method in _EXPERTS_ONLY else quant
    experts = _expert_params(arch)
    emb = float(arch.embedding_params)
    dense_total = emb * serve + (float(arch.n_params) - emb - experts) * dense_quant
    expert_total = experts * expert_quant
    x = max(arch.n_experts, 1)
    if ep > 1:
        per_gpu_experts = math.ceil(x / ep)
        expert_weights = expert_total * per_gpu_experts / x
    else:
        per_gpu_experts = x if arch.is_moe else 0
        expert_weights = expert_total / tp

    b_kv = kv_bytes_per_element(kvd, dtype_bytes(d, arch.kv_bytes))
    if arch.is_compressed:  # vLLM's DeepSeek-V4 caches fp8_ds_mla only, whatever --kv-cache-dtype says
        b_kv = 1.0
    if (arch.is_sparse and not arch.is_block_sparse and b_kv == 1
            and (hw is None or hw.compute_capability < _FLASHINFER_SPARSE_CAPABILITY)):  # fmt: skip
        # vLLM's sparse FlashMLA (Hopper) stores an fp8 latent in its fp8_ds_mla layout; Blackwell's FlashInfer
        # sparse MLA keeps the plain 576-byte fp8 latent
        per_layer = float(fp8_sparse_latent_bytes(arch.kv_lora_rank, arch.qk_rope_head_dim))
    elif arch.is_mla:
        per_layer = float(arch.kv_values_per_token_layer) * b_kv  # the latent is not split over TP ranks
    elif arch.v_head_dim:  # value heads of their own width
        per_layer = kv_heads_per_rank(arch.n_kv_heads, tp) * (arch.head_dim + arch.value_head_dim) * b_kv
    else:
        per_layer = 2.0 * kv_heads_per_rank(arch.n_kv_heads, tp) * arch.head_dim * b_kv
    window = int(arch.sliding_window) if arch.sliding_window and arch.n_sliding_layers else 0
    n_window = arch.n_sliding_layers if window else 0
    per_window_layer = per_layer
    if arch.sliding_kv_heads or arch.sliding_head_dim:  # the sliding layers' own KV heads or head width
        sliding_kv = arch.sliding_kv_heads or arch.n_kv_heads
        per_window_layer = kv_heads_per_rank(sliding_kv, tp) * arch.sliding_kv_width * b_kv
    sparse: dict[str, Any] = {}
    indexer = 0.0
    # MiniMax-M3: each sparse layer's K/V for its selected blocks, its index keys for all
    if arch.is_block_sparse:
        sparse = {"sparse_topk": arch.index_topk, "kv_bytes_selected": arch.n_indexer_layers * per_layer}
        indexer = arch.n_indexer_layers * float(block_sparse_index_key_bytes(arch.index_head_dim))
    elif arch.is_sparse:  # the latent is read for the selected tokens, the indexer's keys for all
        sparse = {"sparse_topk": arch.index_topk, "kv_bytes_selected": arch.n_layers * per_layer}
        indexer = arch.n_indexer_layers * float(indexer_key_bytes(arch.index_head_dim))
    cache: dict[str, Any] = {
        "kv_bytes_full": (arch.n_attention_layers - n_window) * per_layer + indexer,
        "kv_bytes_window": n_window * per_window_layer,
    }
    if arch.is_compressed:
        cache = compressed_cache(arch)
        sparse = {k: cache.pop(k) for k in ("sparse_topk", "kv_bytes_selected")}
    block = _whole(block_size, "block_size", DEFAULT_BLOCK_SIZE)
    # vLLM's MiniMax-M3 backends take 128-token kernel blocks only, one page per block (vLLM's default size becomes it)
    if arch.is_block_sparse:
        if block not in (DEFAULT_BLOCK_SIZE, arch.sparse_block_size):
            raise DataError(f"block_size = {block}: {arch.name}'s pages are its {arch.sparse_block_size}-token sparse "
                            f"blocks in vLLM; give {arch.sparse_block_size} or leave the default")  # fmt: skip
        block = arch.sparse_block_size
    hybrid = _hybrid_layout(arch, tp, per_layer, dtype_bytes(d, arch.weight_bytes), block)
    return ServingConfig(
        model=arch.name,
        identity=arch.identity or arch.name,
        gpu=hw.name if hw is not None else "",
        tensor_parallel=tp,
        expert_parallel=ep,
        quantization=method,
        # vLLM's DeepSeek-V4 asserts an fp8 KV cache (DeepseekV4MLAAttention): its launch line must say so
        kv_cache_dtype="fp8" if arch.is_compressed and kvd in ("", "auto") else kvd or "auto",
        weight_precision=prec,
        bytes_per_weight=quant,
        capacity=float(gpu_total_bytes(hw)) if hw is not None else 0.0,
        gpu_memory_utilization=util,
        reserve=float(reserve_gib) * GIB,
        block_size=hybrid.pop("block_size"),
        max_num_batched_tokens=_whole(
            max_num_batched_tokens,
            "max_num_batched_tokens",
            server_batched_tokens(hw, tp) if hw is not None else GPU_SERVER_DEFAULTS[-1][1],
        ),
        max_num_seqs=_whole(
            max_num_seqs,
            "max_num_seqs",
            server_max_num_seqs(hw, tp) if hw is not None else GPU_SERVER_DEFAULTS[-1][2],
        ),
        logged_gpu_blocks=_whole(gpu_blocks, "gpu_blocks", 0, low=0),
        # the indexers (counted in the dense part) are replicated on every rank, not split
        dense_weights=dense_total / tp + float(arch.indexer_params) * dense_quant * (1.0 - 1.0 / tp),
        expert_weights=expert_weights,
        kv_bytes_per_element=b_kv,
        sliding_window=window,
        n_experts_per_gpu=per_gpu_experts,
        linear_flops_per_token=_linear_flops_per_token(arch, tp),
        lm_head_flops_per_token=2.0 * arch.vocab_size * arch.hidden_size / tp,
        compressed=arch.is_compressed,
        **hybrid,
        **sparse,
        **cache,
    )
