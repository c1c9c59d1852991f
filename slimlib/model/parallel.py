"""Tensor parallelism (Megatron-style, as vLLM runs it): per-rank model features and the all-reduce time.

With tensor parallel degree ``p`` every layer's query heads, KV heads and FFN columns are split over ``p``
ranks, and each layer ends its attention and its FFN block with an all-reduce of the activations (2 per layer).
Every cost SLIM charges per layer (prefill FLOPs, Eq. 8; the dense decode term ``gamma L (D/1024)^2``, Eq. 10;
the KV traffic ``2 L D_kv b_kv C``, Eq. 11; the weight read) is then 1/p of the single-device cost per rank. All
of them are linear in the layer count ``L``, so `split_features` expresses the per-rank work as a per-rank layer
count ``L / p`` with unchanged widths: exact for Eqs. 8, 10 and 11, and it leaves the per-token overhead
``alpha OL`` (not per layer) alone. When ``p`` exceeds the KV heads ``H_kv`` (Qwen2-7B has 4), vLLM replicates
KV heads so that each rank holds one: per-rank KV width ``max(H_kv / p, 1) d_h``; `split_features` scales
``d_kv`` by ``max(p / H_kv, 1)`` for that (feature ``n_kv_heads`` needed; without it no replication is assumed).

Memory per rank (weights, KV bytes per token, KV pool and capacity) is resolved per GPU by
`slimlib.model.serving.ServingConfig`; the features arrive per GPU, so a KV-capacity rule written for one device
(the extended model's ``B_kv``) applies per rank unchanged.

All-reduce (`allreduce_time`): a message of ``m`` bytes over ``p`` ranks takes
``t_ar(m, p) = t_lat(p) + 2 (p - 1) / p * m / BW(p)`` (the ring/one-shot all-reduce's bandwidth term), with
``BW(p)`` the one-direction bandwidth one GPU has to its peers (`group_bandwidth`): the registry's ``link_bw``
for a switched group (NVLink through NVSwitch, PCIe through the host) and ``(p - 1) link_bw`` for a fully
connected mesh of per-pair links (AMD Infinity Fabric: one 64 GB/s-per-direction link per MI300X pair).
``t_lat(p)`` is the GPU's small-message latency in the registry (``allreduce_latency_s``: NVIDIA AIConfigurator's
measured vLLM custom all-reduce, CUDA-graph backend, 128 bf16 elements; H100 SXM 4.29, 4.59, 4.71 us for
p = 2, 4, 8, the proxy for GPUs without a table, AMD included), interpolated in ``log2 p``. A decode step
all-reduces ``B D b`` bytes per call, a prefill ``B IL D b`` bytes (in total over its steps), 2 calls per layer.

Mixtures of experts (`touched_expert_bytes`, `step_weight_bytes`): a pass over ``T`` tokens reads the routed
experts they touch, the expected share ``experts_touched(T, X, k) / X`` of each GPU's own experts (vLLM's fused
MoE kernel runs only experts that received tokens). Expert parallelism ``ep`` (`expert_alltoall_times`): each MoE
layer dispatches every token's hidden state to its ``k`` experts and combines the results, two all-to-alls of
``B k D b`` bytes per decode step, of which the ``(ep - 1) / ep`` share bound for other GPUs crosses the link.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd
from numpy.typing import ArrayLike

from slimlib.errors import DataError
from slimlib.model.equations import experts_touched
from slimlib.model.memory import kv_replication
from slimlib.registry.gpus import GPU

FloatArray = npt.NDArray[np.float64]

CALLS_PER_LAYER = 2

_SPLIT_BY_P = ("n_layers",)


def tensor_parallel_column(df: pd.DataFrame, default: int = 1) -> FloatArray:
    """The ``tensor_parallel`` column of `df` as floats (default 1 where absent); DataError for values < 1."""
    if "tensor_parallel" not in df.columns:
        return np.full(len(df), float(default))
    tp = df["tensor_parallel"].to_numpy(dtype=float, na_value=np.nan)
    tp = np.where(np.isfinite(tp), tp, float(default))
    bad = np.flatnonzero((tp < 1) | (tp != np.round(tp)))
    if bad.size:
        raise DataError(
            f"row {int(bad[0])}: tensor_parallel = {tp[bad[0]]:g} is not a whole number >= 1; "
            "give the number of GPUs the model is split over (1 without tensor parallelism)"
        )
    return tp


def _replication(f: dict[str, FloatArray], tp: FloatArray) -> FloatArray:
    """`slimlib.model.memory.kv_replication` of the features (1 without ``n_kv_heads``)."""
    if "n_kv_heads" not in f:
        return np.ones_like(tp)
    return kv_replication(f["n_kv_heads"], tp)


def split_features(f: dict[str, FloatArray], tp: ArrayLike) -> dict[str, FloatArray]:
    """Per-rank features for tensor parallel degree `tp` (array or scalar); `tp` = 1 returns equal arrays.

    Changes: ``n_layers / p`` and ``n_moe_layers / p`` (per-rank share of every per-layer cost), ``d_kv x r`` with
    ``r`` the KV-head replication factor (`slimlib.model.memory.kv_replication`). Adds ``tensor_parallel`` (p) and
    ``n_layers_total`` (the model's own layer count, for the all-reduce count). Other keys are copied unchanged
    (memory features are per GPU already: `slimlib.model.serving.ServingConfig`).
    """
    tp = np.broadcast_to(np.asarray(tp, dtype=float), np.shape(f["n_layers"])).copy()
    out = dict(f)
    r = _replication(f, tp)
    out["n_layers_total"] = np.asarray(f["n_layers"], dtype=float)
    out["n_layers"] = out["n_layers_total"] / tp
    out["d_kv"] = np.asarray(f["d_kv"], dtype=float) * r
    if "n_moe_layers" in f:
        out["n_moe_layers"] = np.asarray(f["n_moe_layers"], dtype=float) / tp
    out["tensor_parallel"] = tp
    return out


def allreduce_latency(tp: ArrayLike, gpu: GPU) -> FloatArray:
    """Small-message latency ``t_lat(p)`` (s) of `gpu` (registry ``allreduce_latency_s``), interpolated in log2(p);
    0 for p = 1. Raises DataError when p > 1 and the GPU has no latency table."""
    tp = np.asarray(tp, dtype=float)
    if np.any(tp > 1) and not gpu.allreduce_latency_s:
        raise DataError(
            f"GPU {gpu.name} has no all-reduce latency (allreduce_latency_s) in the registry; tensor parallel rows "
            "need it: add it to slimlib.registry.gpus with its source"
        )
    table = sorted(gpu.allreduce_latency_s) or [(2, 0.0)]
    ps = np.array([p for p, _ in table], dtype=float)
    ts = np.array([t for _, t in table], dtype=float)
    lat = np.interp(np.log2(np.maximum(tp, 1.0)), np.log2(ps), ts)
    return np.where(tp > 1, lat, 0.0)


def group_bandwidth(tp: ArrayLike, gpu: GPU) -> FloatArray:
    """One-direction bytes/s one GPU of a `tp`-GPU group exchanges with its peers: ``link_bw`` (switched) or
    ``(p - 1) link_bw`` (per-pair links). Raises DataError when p > 1 and the GPU has no ``link_bw``."""
    tp = np.asarray(tp, dtype=float)
    if np.any(tp > 1) and not gpu.link_bw:
        raise DataError(
            f"GPU {gpu.name} has no interconnect bandwidth (link_bw) in the registry; tensor parallel rows "
            "need it: add it to slimlib.registry.gpus with its source"
        )
    links = np.maximum(tp - 1.0, 1.0) if gpu.link_kind == "pair" else np.ones_like(tp)
    return np.asarray((gpu.link_bw or 1.0) * links, dtype=float)


def allreduce_time(msg_bytes: ArrayLike, tp: ArrayLike, gpu: GPU) -> FloatArray:
    """Seconds for one all-reduce of `msg_bytes` over `tp` ranks of `gpu` (see the module docstring); 0 at p = 1."""
    tp = np.asarray(tp, dtype=float)
    m = np.asarray(msg_bytes, dtype=float)
    t = allreduce_latency(tp, gpu) + 2.0 * (tp - 1.0) / np.maximum(tp, 1.0) * m / group_bandwidth(tp, gpu)
    return np.where(tp > 1, t, 0.0)


def allreduce_times(
    f: dict[str, FloatArray], gpu: GPU, act_bytes: float = 2.0
) -> tuple[FloatArray, FloatArray]:
    """(per decode step, whole prefill) all-reduce seconds per row of split features `f` (`split_features`).

    Decode step: ``2 L [t_ar(B D b)]``; prefill: ``2 L [t_ar(B IL D b)]`` (one call per layer boundary over all
    prompt tokens), with ``L`` the model's layer count, ``D`` the hidden size, ``b`` = `act_bytes` (fp16)."""
    tp = f.get("tensor_parallel", np.ones_like(f["n_layers"]))
    layers = f.get("n_layers_total", f["n_layers"])
    d, b = f["hidden_size"], f["batch_size"]
    step = CALLS_PER_LAYER * layers * allreduce_time(b * d * act_bytes, tp, gpu)
    pre = CALLS_PER_LAYER * layers * allreduce_time(b * f["input_len"] * d * act_bytes, tp, gpu)
    return step, pre


def touched_expert_bytes(f: dict[str, FloatArray], tokens: ArrayLike) -> FloatArray:
    """Routed-expert weight bytes one GPU reads for a pass over `tokens` tokens: its ``expert_weight_bytes`` (its own
    experts, all MoE layers) times the expected share of experts the tokens touch,
    ``experts_touched(T, X, k) / X`` (`slimlib.model.equations.experts_touched`; vLLM's fused MoE kernel runs only
    the experts that received tokens). The share is the same for the ``X / ep`` experts a GPU holds under expert
    parallelism, since every expert is equally likely to be chosen. 0 for a dense model."""
    x, k = f["n_experts"], f["experts_per_token"]
    share = np.where(x > 1, experts_touched(tokens, x, k) / np.maximum(x, 1.0), 0.0)
    return np.asarray(f["expert_weight_bytes"] * share, dtype=float)


def step_weight_bytes(f: dict[str, FloatArray]) -> FloatArray:
    """Weight bytes one decode step reads per GPU: the weights every token uses (``dense_weight_bytes``: attention,
    dense FFNs, shared experts, embeddings) plus the routed experts its ``B`` tokens touch
    (`touched_expert_bytes`; all weights for a dense model)."""
    return np.asarray(f["dense_weight_bytes"] + touched_expert_bytes(f, f["batch_size"]), dtype=float)


def alltoall_time(msg_bytes: ArrayLike, ep: ArrayLike, gpu: GPU) -> FloatArray:
    """Seconds for one all-to-all in which each of `ep` ranks holds `msg_bytes` bytes of token activations for the
    group: the ``(ep - 1) / ep`` share bound for other ranks crosses the link at `group_bandwidth`, plus the
    small-message latency (`allreduce_latency`, the registry's measured collective latency, as proxy); 0 at 1."""
    ep = np.asarray(ep, dtype=float)
    m = np.asarray(msg_bytes, dtype=float)
    t = allreduce_latency(ep, gpu) + (ep - 1.0) / np.maximum(ep, 1.0) * m / group_bandwidth(ep, gpu)
    return np.where(ep > 1, t, 0.0)


def expert_alltoall_times(
    f: dict[str, FloatArray], gpu: GPU, act_bytes: float = 2.0
) -> tuple[FloatArray, FloatArray]:
    """(per decode step, whole prefill) expert all-to-all seconds per row under expert parallelism (feature
    ``expert_parallel`` > 1): each MoE layer dispatches every token's hidden state to its ``k`` experts and
    combines the results back, two all-to-alls of ``B k D b`` bytes (decode step) or ``B IL k D b`` bytes
    (prefill), ``b`` = `act_bytes`; ``n_moe_layers`` MoE layers."""
    ep = f["expert_parallel"]
    layers, d, k, b = f["n_moe_layers"], f["hidden_size"], f["experts_per_token"], f["batch_size"]
    step = 2.0 * layers * alltoall_time(b * k * d * act_bytes, ep, gpu)
    pre = 2.0 * layers * alltoall_time(b * f["input_len"] * k * d * act_bytes, ep, gpu)
    return step, pre
