"""Arithmetic of the MoE and MLA model terms, as pure functions of arrays (beyond the paper; checked against
measured vLLM kernels by `slimlib.experiments.kernel_timing.moe_mla_check`).

The MoE weight read is the model's own term (`slimlib.model.parallel.touched_expert_bytes`) and the MLA shape the
registry's DeepSeek-V3; this module adds the kernel-table side (dtypes, per-layer shapes):

- MoE experts (one layer, one GPU): weight bytes of the experts a step touches (balanced router,
  `slimlib.model.equations.experts_touched`), each expert ``3 x hidden x inter`` weights (gated FFN: gate, up,
  down), and FLOPs ``2 x tokens x top_k x 3 x hidden x inter``, both split over the expert-tensor (``tp``) and
  expert-parallel (``ep``) GPUs; time = max(bytes / bandwidth, FLOPs / peak) / efficiency.
- MLA decode attention (one layer, one GPU): the latent KV read ``(kv_lora_rank + qk_rope_head_dim) x context``
  elements per request, and the absorbed attention's FLOPs ``2 x context x heads x (2 kv_lora_rank +
  qk_rope_head_dim)`` per request (scores over the latent and rope part, values over the latent).
- MLA prefill (one layer, one GPU): the module's projection FLOPs (`mla_projection_params` per token) and the
  causal attention FLOPs of the uncompressed heads.

Units: elements, bytes, FLOPs, bytes/s, FLOP/s, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from slimlib.model.equations import FloatArray
from slimlib.model.parallel import touched_expert_bytes
from slimlib.registry.architectures import Architecture, get_architecture

#: gated FFN: gate, up and down projections per expert
EXPERT_MATRICES = 3


def moe_weight_bytes_touched(
    tokens: ArrayLike,
    n_experts: ArrayLike,
    top_k: ArrayLike,
    hidden: ArrayLike,
    inter: ArrayLike,
    bytes_per_weight: ArrayLike,
    tp: ArrayLike = 1,
    ep: ArrayLike = 1,
) -> FloatArray:
    """Expert weight bytes one GPU reads in a step of `tokens` tokens: the model's MoE term
    (`slimlib.model.parallel.touched_expert_bytes`) on one layer of `n_experts` experts of ``3 x hidden x inter``
    weights of `bytes_per_weight`, split over `tp` (within an expert) and `ep` (whole experts) GPUs."""
    x = np.asarray(n_experts, dtype=float)
    per_expert = EXPERT_MATRICES * np.asarray(hidden, dtype=float) * np.asarray(inter, dtype=float)
    gpu_bytes = x * per_expert * np.asarray(bytes_per_weight, dtype=float)
    gpu_bytes = gpu_bytes / (np.asarray(tp, dtype=float) * np.asarray(ep, dtype=float))
    feats = {
        "n_experts": x,
        "experts_per_token": np.asarray(top_k, dtype=float),
        "expert_weight_bytes": gpu_bytes,
    }
    return touched_expert_bytes(feats, tokens)


def moe_flops(
    tokens: ArrayLike,
    top_k: ArrayLike,
    hidden: ArrayLike,
    inter: ArrayLike,
    tp: ArrayLike = 1,
    ep: ArrayLike = 1,
) -> FloatArray:
    """FLOPs of one GPU's experts in a step: ``2 x tokens x top_k x 3 x hidden x inter / (tp x ep)``."""
    t = np.asarray(tokens, dtype=float) * np.asarray(top_k, dtype=float)
    per = 2.0 * EXPERT_MATRICES * np.asarray(hidden, dtype=float) * np.asarray(inter, dtype=float)
    return np.asarray(t * per / (np.asarray(tp, dtype=float) * np.asarray(ep, dtype=float)))


def expert_touch_knee(n_experts: ArrayLike, top_k: ArrayLike) -> FloatArray:
    """Tokens per step at which ``top_k x tokens`` routings equal the experts (``n_experts / top_k``): below it
    the weight read grows with the tokens, above it every expert is read (the plateau)."""
    return np.asarray(np.asarray(n_experts, dtype=float) / np.asarray(top_k, dtype=float))


@dataclass(frozen=True)
class MLAShape:
    """Multi-head latent attention dimensions of one architecture (`mla_shape`)."""

    hidden_size: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def latent_dim(self) -> int:
        """KV-cache elements per token and layer: the latent plus the shared RoPE key."""
        return self.kv_lora_rank + self.qk_rope_head_dim


def mla_shape(arch: Architecture) -> MLAShape:
    """The MLA dimensions of a registry architecture (`Architecture.is_mla`)."""
    return MLAShape(arch.hidden_size, arch.q_lora_rank, arch.kv_lora_rank, arch.qk_nope_head_dim,
                    arch.qk_rope_head_dim, arch.v_head_dim)  # fmt: skip


#: the shape of the measured MLA kernels: DeepSeek-V3 (registry entry ``deepseek-v3``, its config.json)
DEEPSEEK_V3 = mla_shape(get_architecture("deepseek-v3"))


def mla_latent_bytes(
    batch: ArrayLike, context: ArrayLike, kv_bytes: ArrayLike, shape: MLAShape = DEEPSEEK_V3
) -> FloatArray:
    """Latent KV bytes a decode step reads in one layer: ``batch x context x (kv_lora_rank + qk_rope_head_dim)
    x kv_bytes`` (heads share the latent, so the read does not depend on the heads)."""
    tokens = np.asarray(batch, dtype=float) * np.asarray(context, dtype=float)
    return np.asarray(tokens * shape.latent_dim * np.asarray(kv_bytes, dtype=float))


def mla_decode_flops(
    batch: ArrayLike, context: ArrayLike, heads: ArrayLike, shape: MLAShape = DEEPSEEK_V3
) -> FloatArray:
    """FLOPs of the absorbed latent attention in one decode step and layer: per cached token and head, scores
    over ``kv_lora_rank + qk_rope_head_dim`` and values over ``kv_lora_rank`` (2 FLOPs per multiply-add)."""
    tokens = np.asarray(batch, dtype=float) * np.asarray(context, dtype=float)
    per = 2.0 * (shape.latent_dim + shape.kv_lora_rank)
    return np.asarray(tokens * np.asarray(heads, dtype=float) * per)


def mla_projection_params(heads: ArrayLike, shape: MLAShape = DEEPSEEK_V3) -> FloatArray:
    """Weights of one MLA layer's projections on a GPU with `heads` heads: q down (hidden x q_lora), q up
    (q_lora x heads x (nope + rope)), kv down (hidden x (kv_lora + rope)), kv up (kv_lora x heads x (nope + v))
    and output (heads x v x hidden)."""
    h = np.asarray(heads, dtype=float)
    s = shape
    return np.asarray(
        s.hidden_size * s.q_lora_rank
        + s.q_lora_rank * h * (s.qk_nope_head_dim + s.qk_rope_head_dim)
        + s.hidden_size * s.latent_dim
        + s.kv_lora_rank * h * (s.qk_nope_head_dim + s.v_head_dim)
        + h * s.v_head_dim * s.hidden_size
    )


def mla_prefill_attention_flops(
    batch: ArrayLike, input_len: ArrayLike, heads: ArrayLike, shape: MLAShape = DEEPSEEK_V3
) -> FloatArray:
    """Causal attention FLOPs of a prefill of `input_len` tokens per request (heads uncompressed: scores over
    ``qk_nope + qk_rope``, values over ``v_head_dim``; ``L (L + 1) / 2`` query-key pairs)."""
    n = np.asarray(input_len, dtype=float)
    pairs = np.asarray(batch, dtype=float) * n * (n + 1) / 2
    per = 2.0 * (shape.qk_nope_head_dim + shape.qk_rope_head_dim + shape.v_head_dim)
    return np.asarray(pairs * np.asarray(heads, dtype=float) * per)
