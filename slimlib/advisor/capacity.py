"""SLIM-BCA, the batch capacity advisor (paper Eq. 13), and the KV-cache memory a batch-size cap needs.

``B_cap(IL, OL) = argmax_B T(IL, OL, B)`` subject to ``E2E(IL, OL, B) <= SLO`` and ``T(B) / (B T(1)) > epsilon``
(Eq. 13), searched over candidate batch sizes with a fitted model's predictions. A third, optional constraint is
memory: B requests of ``IL + OL`` tokens must fit in the KV cache the engine would allocate by default. Ties in
throughput go to the smaller batch size.

Memory arithmetic (vLLM paged KV cache) is each workload's resolved serving configuration
(`slimlib.model.serving.ServingConfig`: precision, tensor/expert parallel sizes and the engine settings
``gpu_memory_utilization``, ``block_size``, logged ``gpu_blocks``): a request of ``IL + OL`` tokens holds
``ceil((IL + OL) / block)`` blocks of ``block`` tokens, the pool ``num_gpu_blocks`` of them. The same settings
travel with the workload rows to the model's predictions, so its KV capacity is the one the constraint uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from slimlib.advisor.launch import kv_need, memory_utilization
from slimlib.errors import DataError
from slimlib.model.base import grid_table
from slimlib.model.features import serving_configs
from slimlib.model.intervals import INTERVAL_COLUMNS
from slimlib.model.memory import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_RESERVE_GIB,
    GIB,
)
from slimlib.model.parallel import tensor_parallel_column
from slimlib.model.served import DEFAULT_CLIENT
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu

__all__ = [
    "BINDING",
    "BINDING_LABELS",
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_GPU_MEMORY_UTILIZATION",
    "DEFAULT_RESERVE_GIB",
    "Advice",
    "advise",
    "advise_many",
    "batch_capacity",
    "check_epsilon",
    "curve_intervals",
    "engine_settings",
    "predict_curves",
    "vllm_settings",
]

#: Default candidate batch sizes of the search.
DEFAULT_MAX_BATCH = 1024

#: Codes of the binding constraint, as returned by `batch_capacity`.
BINDING = {
    0: "none",  # B_cap is the largest candidate
    1: "slo",  # the next larger candidate violates the latency SLO
    2: "efficiency",  # ... falls to batching efficiency <= epsilon
    3: "memory",  # ... does not fit in the KV cache
    4: "peak",  # throughput peaks inside the feasible set
    5: "infeasible",  # no candidate meets the constraints
}
#: what each `BINDING` name means in tables and the search's output (every pick names what binds it)
BINDING_LABELS = {
    "none": "max-num-seqs (largest candidate batch)",
    "slo": "latency SLO",
    "efficiency": "efficiency floor",
    "memory": "KV capacity (preemption beyond)",
    "peak": "throughput peak",
    "infeasible": "infeasible",
}


# ---------------------------------------------------------------------------------------------------------------
# Eq. 13 on arrays
# ---------------------------------------------------------------------------------------------------------------
def check_epsilon(epsilon) -> None:
    e = np.asarray(epsilon, dtype=float)
    if not np.all(np.isfinite(e)) or np.any(e <= 0) or np.any(e > 1):
        bad = e.ravel()[~(np.isfinite(e.ravel()) & (e.ravel() > 0) & (e.ravel() <= 1))][0]
        raise DataError(
            f"epsilon {bad:g} is outside (0, 1]: it is the minimum batching efficiency T(B)/(B T(1)); "
            "use e.g. 0.3"
        )


def _check_slo(slo_s) -> None:
    s = np.asarray(slo_s, dtype=float)
    bad = np.isnan(s) | (s <= 0)
    if bad.any():
        raise DataError(
            f"SLO {s.ravel()[bad.ravel()][0]:g} s: give a positive number of seconds (E2E latency bound)"
        )


def batch_capacity(batch_sizes, throughput, e2e_s, slo_s, epsilon, fits=None, throughput_b1=None):
    """Eq. 13 over candidate batch sizes, for W workloads at once.

    `batch_sizes` (N,) increasing; `throughput`, `e2e_s` (W, N) or (N,); `slo_s`, `epsilon` scalars or (W,);
    `fits` optional (W, N) booleans (memory); `throughput_b1` (W,) is T(1), default the column where B == 1.
    Returns ``(index, binding, efficiency)``: index of B_cap per workload (-1 when infeasible), a `BINDING` code,
    and the (W, N) efficiency ``T(B) / (B T(1))``.
    """
    b = np.asarray(batch_sizes, dtype=float)
    if b.ndim != 1 or b.size == 0 or np.any(np.diff(b) <= 0) or b[0] < 1:
        raise DataError("batch sizes must be an increasing list of whole numbers >= 1")
    thr = np.atleast_2d(np.asarray(throughput, dtype=float))
    e2e = np.atleast_2d(np.asarray(e2e_s, dtype=float))
    check_epsilon(epsilon)
    _check_slo(slo_s)
    w = thr.shape[0]
    slo = np.broadcast_to(np.asarray(slo_s, dtype=float), (w,))[:, None]
    eps = np.broadcast_to(np.asarray(epsilon, dtype=float), (w,))[:, None]
    if throughput_b1 is None:
        if b[0] != 1:
            raise DataError("the candidates do not include B = 1: give throughput_b1 (T(1)) explicitly")
        t1 = thr[:, :1]
    else:
        t1 = np.broadcast_to(np.asarray(throughput_b1, dtype=float), (w,))[:, None]
    eff = thr / (b[None, :] * t1)
    ok_slo = e2e <= slo
    ok_eff = eff > eps
    ok_mem = (
        np.ones_like(ok_slo) if fits is None else np.broadcast_to(np.asarray(fits, dtype=bool), thr.shape)
    )
    ok = ok_slo & ok_eff & ok_mem & np.isfinite(thr)
    masked = np.where(ok, thr, -np.inf)
    idx = np.argmax(masked, axis=1)  # first maximum: ties go to the smaller B
    feasible = ok.any(axis=1)
    rows = np.arange(w)
    n = b.size
    # binding: what stops the next larger candidate (first failing constraint in the order slo, efficiency, memory)
    largest_ok = n - 1 - np.argmax(ok[:, ::-1], axis=1)
    nxt = np.minimum(idx + 1, n - 1)
    code = np.where(
        ok_slo[rows, nxt] == 0, 1, np.where(ok_eff[rows, nxt] == 0, 2, np.where(ok_mem[rows, nxt] == 0, 3, 0))
    )
    code = np.where(idx == n - 1, 0, code)
    code = np.where(largest_ok > idx, 4, code)
    code = np.where(feasible, code, 5)
    idx = np.where(feasible, idx, -1)
    return idx, code, eff


# ---------------------------------------------------------------------------------------------------------------
# Predicted curves, vectorized over workloads x batch sizes
# ---------------------------------------------------------------------------------------------------------------
def _candidates(batch_sizes) -> np.ndarray:
    if batch_sizes is None:
        batch_sizes = np.arange(1, DEFAULT_MAX_BATCH + 1)
    b = np.unique(np.asarray(batch_sizes, dtype=float))
    if b.size == 0 or b[0] < 1 or np.any(b != np.round(b)):
        raise DataError("candidate batch sizes must be whole numbers >= 1")
    return b


def engine_settings(
    workloads: pd.DataFrame, block_size: int, gpu_memory_utilization: float, gpu_blocks=None
) -> pd.DataFrame:
    """`workloads` with the engine columns ``block_size``, ``gpu_memory_utilization`` and (where given)
    ``gpu_blocks`` filled in where the table lacks them (a column the table has wins)."""
    add: dict[str, object] = {"block_size": block_size, "gpu_memory_utilization": gpu_memory_utilization}
    if gpu_blocks is not None:
        add["gpu_blocks"] = np.broadcast_to(np.asarray(gpu_blocks, dtype=float), (len(workloads),))
    return workloads.assign(**{k: v for k, v in add.items() if k not in workloads.columns})


def predict_curves(
    model, workloads: pd.DataFrame, batch_sizes=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predicted throughput and E2E, each (W, N), for `workloads` (model, input_len, output_len) x batch sizes.

    Architecture features are looked up once per workload and broadcast over the candidates, so 1,000 workloads
    x 1,024 batch sizes cost one vectorized evaluation. Returns ``(batch_sizes, throughput, e2e)``.
    """
    b = _candidates(batch_sizes)
    thr, e2e = model.predict_grid(_grid_base(workloads), b)
    return b, thr, e2e


def _grid_base(workloads: pd.DataFrame) -> pd.DataFrame:
    """The workload rows `predict_grid` crosses with the batch sizes (typed columns, lengths checked), served to a
    closed loop at concurrency B where they name no ``client`` (`slimlib.model.served`)."""
    # the closed loop's clients are the candidate batch
    base = workloads.drop(columns=["batch_size", "max_concurrency"], errors="ignore").reset_index(drop=True)
    if "client" not in base.columns:
        base = base.assign(client=DEFAULT_CLIENT)
    base = base.assign(  # optional columns (gpu_blocks, chunked_prefill, ...) travel with the workload rows
        model=base["model"].astype(str),
        input_len=base["input_len"].to_numpy(dtype=float),
        output_len=base["output_len"].to_numpy(dtype=float),
        tensor_parallel=tensor_parallel_column(base),
    )
    _check_lengths(base)
    return base


def curve_intervals(model, workloads: pd.DataFrame, batch_sizes, level: float) -> pd.DataFrame:
    """The prediction intervals of `predict_curves`' grid (one row per workload x batch size, workload-major):
    the interval columns of the model's one `predict` (`slimlib.model.intervals.INTERVAL_COLUMNS`)."""
    pred = model.predict(grid_table(_grid_base(workloads), _candidates(batch_sizes)), interval=level)
    return pred[[c for pair in INTERVAL_COLUMNS.values() for c in pair]].reset_index(drop=True)


def _check_lengths(df: pd.DataFrame) -> None:
    for col in ("input_len", "output_len"):
        v = df[col].to_numpy(dtype=float)
        bad = ~np.isfinite(v) | (v <= 0) | (v != np.round(v))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"workload row {i}: {col} is {v[i]:g}; it must be a positive whole number of tokens"
            )


# ---------------------------------------------------------------------------------------------------------------
# The advisor
# ---------------------------------------------------------------------------------------------------------------
def _check_gpu(model, gpu) -> None:
    if gpu is None:
        return
    if get_gpu(gpu).name != model.gpu_:
        raise DataError(
            f"the parameters were calibrated on {model.gpu_}, not {get_gpu(gpu).name}; SLIM parameters belong to "
            f"one GPU: calibrate on {get_gpu(gpu).name} (`slim plan --gpu {get_gpu(gpu).name}`, then `slim fit`)"
        )


def advise_many(
    model,
    workloads: pd.DataFrame,
    slo_s=np.inf,
    epsilon=0.3,
    *,
    batch_sizes=None,
    gpu: str | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
    gpu_blocks=None,
    respect_memory: bool = True,
) -> pd.DataFrame:
    """Advise B_cap (Eq. 13) for each workload row (``model, input_len, output_len``; optional ``slo_s``,
    ``epsilon`` columns override the arguments; optional ``tensor_parallel``, default 1: memory is per GPU;
    optional precision and engine-setting columns, `slimlib.model.features.serving_configs`), one output row per
    workload.

    `block_size`, `gpu_memory_utilization` and `gpu_blocks` (the engine's logged ``num_gpu_blocks``, scalar or per
    row; default: vLLM's arithmetic) fill the workloads' engine columns where absent; the model's predictions and
    the memory constraint both read them. Columns: ``b_cap`` (0 when infeasible),
    ``binding``, ``reason``, ``pred_throughput_tok_s``, ``pred_e2e_s``, ``efficiency``, ``blocks_needed``,
    ``kv_needed_gib``, ``kv_default_gib``, ``kv_saved_gib`` (GiB, 2**30 bytes), ``max_batch_memory``.
    """
    _check_gpu(model, gpu)
    if not 0 < gpu_memory_utilization <= 1:
        raise DataError(f"gpu_memory_utilization {gpu_memory_utilization} must be in (0, 1]")
    if block_size < 1 or int(block_size) != block_size:
        raise DataError(f"block size {block_size} must be a whole number of tokens >= 1")
    missing = [c for c in ("model", "input_len", "output_len") if c not in workloads.columns]
    if missing:
        raise DataError(f"workloads lack column(s) {', '.join(missing)}")
    workloads = engine_settings(workloads, block_size, gpu_memory_utilization, gpu_blocks)
    w = len(workloads)
    slo = workloads["slo_s"].to_numpy(dtype=float) if "slo_s" in workloads else np.full(w, float(slo_s))
    eps = workloads["epsilon"].to_numpy(dtype=float) if "epsilon" in workloads else np.full(w, float(epsilon))
    check_epsilon(eps)
    _check_slo(slo)
    b, thr, e2e = predict_curves(model, workloads, batch_sizes)

    hw = get_gpu(model.gpu_)
    names = workloads["model"].astype(str).to_numpy()
    uniq, inv = np.unique(names, return_inverse=True)
    archs = [get_architecture(n) for n in uniq]
    # per GPU of the tensor-parallel group: the workload's resolved serving configuration
    tp = tensor_parallel_column(workloads)
    codes, configs = serving_configs(workloads, hw, reserve_gib=reserve_gib, gpu_column=False)
    default = np.array([c.kv_pool for c in configs], dtype=float)[codes]
    weights = np.array([c.weights for c in configs], dtype=float)[codes]
    pool_blocks = np.array([c.num_gpu_blocks for c in configs], dtype=float)[codes]
    max_pos = np.array([a.max_position for a in archs], dtype=float)[inv]
    il = workloads["input_len"].to_numpy(dtype=float)
    ol = workloads["output_len"].to_numpy(dtype=float)
    blocks = np.empty(w)
    bytes_per_req = np.empty(w)
    for k, c in enumerate(configs):
        rows = codes == k
        blocks[rows] = c.request_blocks(il[rows] + ol[rows])
        bytes_per_req[rows] = c.request_kv_bytes(il[rows] + ol[rows])
    max_b_mem = np.floor(pool_blocks / blocks)
    fits = (b[None, :] <= max_b_mem[:, None]) if respect_memory else None
    t1 = _throughput_at_one(model, workloads, b, thr)
    idx, code, eff = batch_capacity(b, thr, e2e, slo, eps, fits=fits, throughput_b1=t1)
    rows = np.arange(w)
    ok = idx >= 0
    j = np.where(ok, idx, 0)
    b_cap = np.where(ok, b[j], 0).astype(int)
    too_long = (max_pos > 0) & (il + ol > max_pos)
    pool = np.broadcast_to(np.asarray(default, dtype=float), (w,))
    memory = [f"KV pool {p / GIB:.2f} GiB per GPU after {wb / GIB:.1f} GiB of weights; one request needs "
              f"{r / GIB:.2f} GiB" for p, wb, r in zip(pool, weights, bytes_per_req, strict=True)]  # fmt: skip
    reason = _reasons(
        code, b, thr, e2e, eff, slo, eps, max_b_mem, respect_memory, too_long, max_pos, il, ol, memory
    )
    needed = np.where(ok, b_cap * bytes_per_req, np.nan)
    out = pd.DataFrame(
        {
            "model": names,
            "gpu": hw.name,
            "input_len": il,
            "output_len": ol,
            "tensor_parallel": tp.astype(int),
            "slo_s": slo,
            "epsilon": eps,
            "b_cap": b_cap,
            "binding": [BINDING[int(c)] for c in code],
            "reason": reason,
            "pred_throughput_tok_s": np.where(ok, thr[rows, j], np.nan),
            "pred_e2e_s": np.where(ok, e2e[rows, j], np.nan),
            "efficiency": np.where(ok, eff[rows, j], np.nan),
            "blocks_needed": np.where(ok, b_cap * blocks, 0).astype(int),
            "kv_needed_gib": needed / GIB,
            "kv_default_gib": default / GIB,
            "kv_saved_gib": (default - needed) / GIB,
            "max_batch_memory": max_b_mem.astype(int),
        },
        index=workloads.index,
    )
    return out


def _throughput_at_one(model, workloads, b, thr) -> np.ndarray:
    """Predicted T(1) per workload (Eq. 13's reference), also when B = 1 is not a candidate."""
    if b[0] == 1:
        return thr[:, 0]
    _, t1, _ = predict_curves(model, workloads, [1])
    return t1[:, 0]


def _reasons(
    code, b, thr, e2e, eff, slo, eps, max_b_mem, respect_memory, too_long, max_pos, il, ol, memory
) -> list[str]:
    out = []
    for i, c in enumerate(code):
        c = int(c)
        if c == 5:
            parts = []
            if respect_memory and max_b_mem[i] < 1:
                parts.append(f"one request does not fit in the KV cache even at B = 1 ({memory[i]})")
            if e2e[i].min() > slo[i]:
                parts.append(
                    f"the SLO {slo[i]:.4g} s is below the smallest predicted E2E {np.nanmin(e2e[i]):.4g} s"
                )
            if not parts:
                parts.append(
                    f"no candidate meets SLO <= {slo[i]:.4g} s and efficiency > {eps[i]:.3g} together"
                )
            out.append("no feasible batch size: " + "; ".join(parts))
        elif c == 0:
            out.append(f"largest candidate ({int(b[-1])}); widen the search to go further")
        elif c == 1:
            out.append(f"latency SLO {slo[i]:.4g} s")
        elif c == 2:
            out.append(f"batching efficiency > {eps[i]:.3g}")
        elif c == 3:
            out.append(f"KV-cache capacity ({int(max_b_mem[i])} requests)")
        else:
            out.append("predicted throughput peaks inside the feasible range")
        if too_long[i]:
            out[-1] += (
                f" (warning: IL + OL = {il[i] + ol[i]:.0f} exceeds the model's context of {max_pos[i]:.0f})"
            )
    return out


@dataclass(frozen=True)
class Advice:
    """One workload's recommendation: the `advise_many` row as `summary` and the predicted `curve`."""

    summary: pd.Series
    curve: pd.DataFrame = field(repr=False)

    @property
    def b_cap(self) -> int:
        return int(self.summary["b_cap"])

    @property
    def feasible(self) -> bool:
        return self.b_cap > 0


def advise(
    model,
    arch: str,
    input_len: float,
    output_len: float,
    slo_s: float = np.inf,
    epsilon: float = 0.3,
    tensor_parallel: int = 1,
    *,
    dtype: str | None = None,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    interval: float | None = None,
    max_num_batched_tokens: int | None = None,
    **kw,
) -> Advice:
    """Advice for one workload (on `tensor_parallel` GPUs, served in the given precision: vLLM's ``--dtype``,
    ``--quantization``, ``--kv-cache-dtype``), with its whole predicted curve (throughput, E2E, efficiency,
    feasibility; with `interval`, e.g. 0.9, also the prediction intervals of the model's `predict`). With
    `max_num_batched_tokens` the server is vLLM's V1 engine (chunked prefill) at that token budget."""
    wl = pd.DataFrame(
        {"model": [arch], "input_len": [float(input_len)], "output_len": [float(output_len)],
         "tensor_parallel": [tensor_parallel]}
    )  # fmt: skip
    if max_num_batched_tokens:
        wl = wl.assign(chunked_prefill=True, max_num_batched_tokens=float(max_num_batched_tokens))
    for col, value in (("dtype", dtype), ("quantization", quantization), ("kv_cache_dtype", kv_cache_dtype)):
        if value is not None:
            wl[col] = [str(value)]
    row = advise_many(model, wl, slo_s, epsilon, **kw).iloc[0]
    wl = engine_settings(
        wl,
        kw.get("block_size", DEFAULT_BLOCK_SIZE),
        kw.get("gpu_memory_utilization", DEFAULT_GPU_MEMORY_UTILIZATION),
        kw.get("gpu_blocks"),
    )
    b, thr, e2e = predict_curves(model, wl, kw.get("batch_sizes"))
    eff = thr[0] / (b * float(_throughput_at_one(model, wl, b, thr)[0]))
    curve = pd.DataFrame(
        {
            "batch_size": b.astype(int),
            "pred_throughput_tok_s": thr[0],
            "pred_e2e_s": e2e[0],
            "efficiency": eff,
            "meets_slo": e2e[0] <= row["slo_s"],
            "meets_efficiency": eff > row["epsilon"],
            "fits_memory": b <= row["max_batch_memory"],
        }
    )
    if interval is not None:
        curve = pd.concat([curve, curve_intervals(model, wl, kw.get("batch_sizes"), interval)], axis=1)
    return Advice(summary=row, curve=curve)


def vllm_settings(
    arch,
    gpu,
    b_cap: int,
    input_len: float,
    output_len: float,
    *,
    tensor_parallel: int = 1,
    dtype: str | None = None,
    quantization: str | None = None,
    kv_cache_dtype: str | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
    max_num_batched_tokens: int | None = None,
) -> dict:
    """vLLM server settings that hold B_cap requests on `tensor_parallel` GPUs: ``max_num_seqs``,
    ``num_gpu_blocks_override`` and a per-GPU ``gpu_memory_utilization`` covering that GPU's weights + reserve +
    its share of those blocks (rounded up to 0.01; `slimlib.model.serving.ServingConfig`), the token budget per
    step (`max_num_batched_tokens`, else vLLM's default for the GPU), with the precision options as given
    (``dtype`` 'auto', no ``quantization``, ``kv_cache_dtype`` 'auto' when not)."""
    if b_cap < 1:
        raise DataError("no feasible batch size: there are no settings to give")
    mem = serving_config(
        get_architecture(arch), gpu, tensor_parallel=tensor_parallel, dtype=dtype, quantization=quantization,
        kv_cache_dtype=kv_cache_dtype, reserve_gib=reserve_gib, block_size=block_size,
        max_num_batched_tokens=max_num_batched_tokens,
    )  # fmt: skip
    blocks, kv_bytes = kv_need(mem, b_cap, input_len + output_len)
    util = memory_utilization(mem, kv_bytes)
    out = {
        "max_num_seqs": int(b_cap),
        "num_gpu_blocks_override": blocks,
        "gpu_memory_utilization": min(util, 1.0),
        "block_size": int(mem.block_size),
        "max_model_len": int(math.ceil(input_len + output_len)),
        "max_num_batched_tokens": max(int(mem.max_num_batched_tokens), int(b_cap)),
        "tensor_parallel_size": int(tensor_parallel),
        "dtype": dtype or "auto",
        "kv_cache_dtype": kv_cache_dtype or "auto",
        "fits": bool(util <= 1.0),
    }
    if quantization and str(quantization).lower() != "none":
        out["quantization"] = str(quantization)
    return out
