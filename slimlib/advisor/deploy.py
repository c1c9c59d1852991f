"""Deployment search: tensor-parallel degree x precision x batch cap on a node of N GPUs, ranked by throughput per GPU.

For a model on `gpus` GPUs of one kind the candidates are every tensor-parallel degree T that divides N (replicas
= N / T, each a vLLM server) and that vLLM accepts for the model (heads and KV heads split,
`slimlib.model.memory.tensor_parallel_refusal`), crossed with the precisions vLLM serves from the model's checkpoint
on that GPU (`offer`): a 16-bit checkpoint in 16 bits and in fp8 (vLLM quantizes it when loading; weight-only
where the GPU has no fp8 tensor cores), a quantized checkpoint in its own method only (gpt-oss's MXFP4, an FP8 or
NVFP4 release), crossed with the candidate batch caps. A (T, precision) vLLM would refuse, the checkpoint or the GPU
cannot serve, or whose weights leave no KV pool is listed in `skipped` with the reason, never dropped silently.

Each deployment's cap is Eq. 13 generalised (`slimlib.advisor.capacity.batch_capacity`): the batch of highest
throughput whose predicted latencies meet every limit of the `Slo` (TTFT, TPOT, E2E; `slimlib.advisor.slo`),
whose batching efficiency ``T(B) / (B T(1))`` exceeds epsilon, and whose requests of ``IL + OL`` tokens fit the
KV pool of its resolved `ServingConfig` (so no preemption). Deployments are ranked by throughput per GPU,
``replicas x T(B_cap) / N``; the per-user rate is ``OL / E2E`` output tokens per second. Throughput and E2E are
one `predict` over (workloads x deployments) x batch sizes; a model whose TTFT and TPOT replay vLLM's scheduler
(``slim``) predicts those only at the points the answer reads (`slimlib.advisor.slo.LazyGrid`: B_cap, the
candidates of higher throughput, the batch after it, the frontier's points), each the value the whole grid's one
`predict` gives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from slimlib.advisor.capacity import BINDING, BINDING_LABELS, DEFAULT_MAX_BATCH, batch_capacity, check_epsilon
from slimlib.advisor.launch import checkpoint_refusal
from slimlib.advisor.slo import LIMITS, LazyGrid, Slo, serving_grid
from slimlib.errors import DataError
from slimlib.model.intervals import INTERVAL_COLUMNS
from slimlib.model.memory import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_RESERVE_GIB,
    GIB,
    tensor_parallel_refusal,
)
from slimlib.model.served import DEFAULT_CLIENT
from slimlib.model.serving import ServingConfig, serving_config
from slimlib.registry.architectures import Architecture, get_architecture
from slimlib.registry.gpus import GPU, get_gpu
from slimlib.registry.precision import QUANTIZATIONS, VLLM_QUANTIZATION, weight_precision

__all__ = [
    "PRECISIONS",
    "Deployment",
    "SearchResult",
    "capped",
    "closest",
    "deployments",
    "offer",
    "pareto_front",
    "search",
]

#: workload columns that say how its requests are scheduled and sent (`slimlib.model.served`), carried to every
#: deployment's rows
SCHEDULER_COLUMNS = ("chunked_prefill", "max_num_batched_tokens", "max_num_seqs", "client", "num_prompts")
#: precision label -> (vLLM --quantization, --kv-cache-dtype, its tensor peak in `GPU.peaks`); fp4 is served from an
#: fp4 checkpoint only (`offer`)
PRECISIONS: dict[str, tuple[str | None, str | None, str]] = {
    "bf16": (None, None, "fp16"),
    "fp8": ("fp8", "fp8", "fp8"),
    "fp4": ("modelopt_fp4", "fp8", "fp4"),
}


@dataclass(frozen=True)
class Offer:
    """How a precision label is served from one checkpoint on one GPU: vLLM's ``--quantization`` and
    ``--kv-cache-dtype`` (None: the default), the label shown (the checkpoint's own method where that is not the
    label's, e.g. ``mxfp4``), whether the GEMMs run weight-only (16-bit math), or why it cannot be (`refusal`)."""

    quantization: str | None = None
    kv_cache_dtype: str | None = None
    label: str = ""
    weight_only: bool = False
    refusal: str = ""


#: bits per weight of a weight precision: a label serves the checkpoint's own method of the same width
_BITS = {"none": 16, "fp8": 8, "fp4": 4, "int4": 4}


def offer(arch: Architecture, hw: GPU, precision: str) -> Offer:
    """How `precision` (a `PRECISIONS` label) is served from `arch`'s checkpoint on `hw` (module docstring)."""
    quant, kv, peak = PRECISIONS[precision]
    own = arch.quantization.strip().lower()
    if own and own not in QUANTIZATIONS:
        return Offer(refusal=f"the checkpoint is quantized as {own!r}, which the precision table "
                             f"(slimlib.registry.precision) does not price")  # fmt: skip
    wanted = weight_precision(quant)
    if own:
        have = weight_precision(own)
        if _BITS[wanted] != _BITS[have]:
            return Offer(refusal=f"the checkpoint is quantized as {own!r} ({have} weights); vLLM serves a "
                                 "quantized checkpoint in its own method")  # fmt: skip
        label = precision if VLLM_QUANTIZATION[own] == quant else own
        return Offer(own, kv, label, have == "int4" or peak not in hw.peaks)
    refusal = checkpoint_refusal(arch, quant)
    if refusal:
        return Offer(refusal=refusal)
    return Offer(quant, kv, precision, wanted != "none" and peak not in hw.peaks)


#: binding constraint of a deployment's cap, by `slimlib.advisor.capacity.BINDING` code (code 1, the latency SLO, is
#: named by the limit that binds: 'TTFT SLO', 'TPOT SLO', 'E2E SLO')
BINDING_NAMES = {code: BINDING_LABELS[name] for code, name in BINDING.items()}


@dataclass(frozen=True)
class Deployment:
    """One (tensor-parallel degree, precision) on a node: `replicas` servers of `config` (per GPU of a server)."""

    tensor_parallel: int
    precision: str
    replicas: int
    config: ServingConfig
    weight_only: bool = False

    @property
    def label(self) -> str:
        return f"TP{self.tensor_parallel} {self.precision} x{self.replicas}"


def deployments(
    arch,
    gpu: GPU | str,
    gpus: int,
    precisions=tuple(PRECISIONS),
    tensor_parallels=None,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
    max_num_batched_tokens: int | None = None,
) -> tuple[list[Deployment], pd.DataFrame]:
    """The deployments of `arch` on `gpus` GPUs `gpu` and the skipped ones (``tensor_parallel, precision,
    reason``), module docstring; `tensor_parallels` restricts the TP degrees (each must divide `gpus`). Each
    server's token budget is `max_num_batched_tokens`, else vLLM's default for the GPU and degree (`serving_config`)."""
    a = get_architecture(arch) if isinstance(arch, str) else arch
    hw = get_gpu(gpu)
    if int(gpus) != gpus or gpus < 1:
        raise DataError(f"--gpus {gpus}: give a whole number of GPUs >= 1")
    unknown = [p for p in precisions if p not in PRECISIONS]
    if unknown:
        raise DataError(f"unknown precision(s) {unknown}: choose from {', '.join(PRECISIONS)}")
    degrees = [t for t in range(1, int(gpus) + 1) if gpus % t == 0]
    if tensor_parallels is not None:
        bad = [t for t in tensor_parallels if t not in degrees]
        if bad:
            raise DataError(
                f"tensor-parallel degree(s) {bad} do not divide --gpus {gpus}: use one of {degrees}"
            )
        degrees = sorted(set(tensor_parallels))
    found, skipped = [], []
    for tp in degrees:
        refusal = tensor_parallel_refusal(a.name, a.n_heads, a.n_kv_heads, tp)
        for prec in precisions:
            how = offer(a, hw, prec)
            if refusal or how.refusal:
                skipped.append((tp, prec, refusal or how.refusal))
                continue
            try:
                cfg = serving_config(
                    a, hw, tensor_parallel=tp, quantization=how.quantization, kv_cache_dtype=how.kv_cache_dtype,
                    block_size=block_size, gpu_memory_utilization=gpu_memory_utilization, reserve_gib=reserve_gib,
                    max_num_batched_tokens=max_num_batched_tokens,
                )  # fmt: skip
            except DataError as exc:
                skipped.append((tp, how.label, str(exc)))
                continue
            if not cfg.fits:
                skipped.append((tp, how.label, "weights do not fit: " + cfg.explain()))
                continue
            found.append(Deployment(tp, how.label, int(gpus) // tp, cfg, how.weight_only))
    return found, pd.DataFrame(skipped, columns=["tensor_parallel", "precision", "reason"])


@dataclass(frozen=True)
class SearchResult:
    """`ranked`: one row per (workload, deployment), best first within a workload, indexed by its row of `grid`;
    `skipped`: the deployments left out with their reason; `grid`: the (rows, N) arrays behind `ranked` over
    `batch_sizes` (throughput, latencies, efficiency, KV fit), for the frontier and the closest miss."""

    ranked: pd.DataFrame
    skipped: pd.DataFrame
    batch_sizes: np.ndarray
    grid: dict[str, np.ndarray] = field(repr=False)
    slo: Slo = field(default_factory=Slo)
    epsilon: float = 0.3
    deployments: tuple[Deployment, ...] = field(default=(), repr=False)
    #: the rows `predict` was given, one per row of `ranked` (its index), batch sizes aside
    rows: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    def best(self, workload: int = 0) -> tuple[pd.Series, Deployment]:
        """The first-ranked row of `workload` and its `Deployment`."""
        part = self.ranked[self.ranked["workload"] == workload]
        return part.iloc[0], self.deployments[int(part.index.to_numpy()[0])]


def _candidates(batch_sizes) -> np.ndarray:
    b = (
        np.arange(1, DEFAULT_MAX_BATCH + 1, dtype=float)
        if batch_sizes is None
        else np.asarray(batch_sizes, float)
    )
    b = np.unique(b)
    if b.size == 0 or b[0] < 1 or np.any(b != np.round(b)):
        raise DataError("candidate batch sizes must be whole numbers >= 1")
    return b


def capped(
    b, grid: dict[str, np.ndarray], slo: Slo, epsilon, fits, t1
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Eq. 13 under every limit of `slo` for R rows of `grid` (`slimlib.advisor.slo.serving_grid`'s arrays over
    candidates `b`, with `fits` (R, N) booleans and `t1` (R,) the predicted T(1)): ``(index, binding, efficiency)``,
    the index of B_cap per row (-1: none), the name of the constraint that stops the next larger candidate
    (`BINDING_NAMES`, or the latency limit: 'TTFT SLO', ...), and the (R, N) efficiency. A `LazyGrid`'s latencies
    are predicted only where they decide the answer (`_lazy_ratio`)."""
    limits = slo.limits()
    if isinstance(grid, LazyGrid) and any(grid.lazy(q) for q in limits):
        ratio = _lazy_ratio(b, grid, limits, epsilon, fits, t1)
    else:
        ratio = np.zeros_like(grid["throughput"])  # the worst latency over its limit (<= 1: all limits met)
        for q, lim in limits.items():
            ratio = np.maximum(ratio, grid[q] / lim)
    j, code, eff = batch_capacity(b, grid["throughput"], ratio, 1.0, epsilon, fits=fits, throughput_b1=t1)
    nxt = np.minimum(np.where(j >= 0, j, 0) + 1, b.size - 1)
    binding = []
    for k, c in enumerate(code):
        if c == 1:
            over = [LIMITS[q] for q, lim in limits.items() if _at(grid, q, k, nxt[k]) > lim]
            binding.append(f"{over[0] if over else 'latency'} SLO")
        else:
            binding.append(BINDING_NAMES[int(c)])
    return j, binding, eff


def _at(grid: dict[str, np.ndarray], quantity: str, rows, cols) -> np.ndarray:
    """`quantity` of `grid` at the points (`rows`, `cols`), predicted there only where `grid` is a `LazyGrid`."""
    if isinstance(grid, LazyGrid):
        return grid.at(quantity, rows, cols)
    return np.asarray(grid[quantity][rows, cols])


#: the latency points `_lazy_ratio` predicts per row in its first round (then four times as many a round)
LAZY_FIRST_ROUND = 8


def _in_rounds(
    seqs: list[np.ndarray],
    done: np.ndarray,
    evaluate: Callable[[np.ndarray, np.ndarray], None],
    stop: Callable[[int, np.ndarray], bool],
) -> None:
    """Per row ``k`` not `done`, `evaluate` the points of its candidates `seqs[k]` in turn, in rounds of
    `LAZY_FIRST_ROUND` then four times as many, all rows of a round in one call, until `stop(k, part)` holds for a
    round's `part` or the candidates run out."""
    start = np.zeros(len(seqs), dtype=int)
    size = LAZY_FIRST_ROUND
    while not done.all():
        todo = np.flatnonzero(~done)
        pts = [(k, c) for k in todo for c in seqs[k][start[k] : start[k] + size]]
        if pts:
            evaluate(np.array([k for k, _ in pts]), np.array([c for _, c in pts]))
        for k in todo:
            part = seqs[k][start[k] : start[k] + size]
            if stop(int(k), part) or start[k] + size >= seqs[k].size:
                done[k] = True
            start[k] += size
        size *= 4


def _lazy_ratio(b, grid: LazyGrid, limits: dict[str, float], epsilon, fits, t1) -> np.ndarray:
    """`capped`'s worst latency over its limit, (R, N), exact wherever `batch_capacity`'s answer and `capped`'s
    binding read it and inf elsewhere, predicting the latencies of the fewest points that decide them: per row,
    the candidates that meet every other constraint (``ok`` but the latencies) in order of falling throughput
    (ties: the smaller batch first) until one meets the limits (B_cap: the first maximum of the feasible), then
    those of larger batch until one meets them (what `batch_capacity` calls a larger feasible batch), then the
    batch after B_cap (the binding). Every other candidate is either not ``ok`` whatever its latency or of lower
    throughput than B_cap at a smaller batch than a feasible one, so inf there changes neither answer."""
    thr = np.atleast_2d(np.asarray(grid["throughput"], dtype=float))
    r_n, n = thr.shape
    t = np.broadcast_to(np.asarray(t1, dtype=float), (r_n,))[:, None]
    eff = thr / (np.asarray(b, dtype=float)[None, :] * t)  # as `batch_capacity` computes it
    pre = (eff > epsilon) & np.broadcast_to(np.asarray(fits, dtype=bool), thr.shape) & np.isfinite(thr)
    ratio = np.full(thr.shape, np.inf)
    known = np.zeros(thr.shape, dtype=bool)

    def evaluate(rows: np.ndarray, cols: np.ndarray) -> None:
        todo = ~known[rows, cols]
        rows, cols = rows[todo], cols[todo]
        if rows.size:
            worst = np.zeros(rows.size)
            for q, lim in limits.items():
                worst = np.maximum(worst, _at(grid, q, rows, cols) / lim)
            ratio[rows, cols] = worst
            known[rows, cols] = True

    orders = [np.flatnonzero(pre[k])[np.argsort(-thr[k, pre[k]], kind="stable")] for k in range(r_n)]
    cap = np.full(r_n, -1)

    def meets(k: int, part: np.ndarray) -> bool:  # B_cap: the first of row k's order that meets the limits
        met = part[ratio[k, part] <= 1.0]
        if met.size:
            cap[k] = met[0]
        return bool(met.size)

    _in_rounds(orders, np.zeros(r_n, dtype=bool), evaluate, meets)
    larger = [
        np.array([c for c in orders[k] if c > cap[k] and not known[k, c]], dtype=int) if cap[k] >= 0 else
        np.zeros(0, dtype=int) for k in range(r_n)
    ]  # fmt: skip
    done = np.array(
        [cap[k] < 0 or (ratio[k, orders[k][orders[k] > cap[k]]] <= 1.0).any() for k in range(r_n)]
    )
    # a larger feasible batch, if any
    _in_rounds(larger, done, evaluate, lambda k, part: bool((ratio[k, part] <= 1.0).any()))
    feasible = np.flatnonzero(cap >= 0)
    evaluate(feasible, np.minimum(cap[feasible] + 1, n - 1))  # the binding: the batch after B_cap
    return ratio


def search(
    model,
    workloads: pd.DataFrame,
    gpus: int,
    slo: Slo | None = None,
    epsilon: float = 0.3,
    *,
    batch_sizes=None,
    precisions=tuple(PRECISIONS),
    tensor_parallels=None,
    interval: float | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    reserve_gib: float = DEFAULT_RESERVE_GIB,
    max_num_batched_tokens: int | None = None,
) -> SearchResult:
    """Rank the deployments of each workload row (``model, input_len, output_len``) on `gpus` GPUs of the model's
    GPU under `slo` and the efficiency floor `epsilon` (module docstring); `tensor_parallels` restricts the TP
    degrees (default: every divisor of `gpus`). The servers schedule as the workload's columns say
    (`SCHEDULER_COLUMNS`; unsaid: vLLM's V1 engine at its default budget), or with `max_num_batched_tokens` as V1
    at that budget.

    `ranked` columns: the workload, ``tensor_parallel, precision, replicas, b_cap`` (0: none feasible),
    ``binding``, ``throughput_per_gpu_tok_s``, ``per_user_tok_s``, ``pred_throughput_tok_s`` (one server),
    ``pred_e2e_s``, ``pred_ttft_s``, ``pred_tpot_s`` (the values the limits were checked against), ``efficiency``,
    the memory arithmetic ``weights_gib``, ``kv_pool_gib``, ``kv_tokens``, ``max_batch_memory`` (GiB per GPU),
    ``latency_source``, and with `interval` (e.g. 0.9) the throughput interval at B_cap
    (``pred_throughput_low_tok_s``, ``pred_throughput_high_tok_s``). Ties go to the smaller TP, then the wider
    precision."""
    slo = slo or Slo()
    check_epsilon(epsilon)
    hw = get_gpu(model.gpu_)
    b = _candidates(batch_sizes)
    pred_b = np.union1d(b, [1.0])  # T(1) is Eq. 13's reference, also when 1 is not a candidate
    keep = np.isin(pred_b, b)
    wl = workloads.reset_index(drop=True)
    rows, deps_of, skipped = [], [], []
    for name in sorted(set(map(str, wl["model"]))):
        deps, skip = deployments(
            name, hw, gpus, precisions, tensor_parallels, block_size=block_size, gpu_memory_utilization=gpu_memory_utilization,
            reserve_gib=reserve_gib, max_num_batched_tokens=max_num_batched_tokens,
        )  # fmt: skip
        skipped.append(skip.assign(model=name))
        deps_of.append((name, deps))
    for name, deps in deps_of:
        for i in np.flatnonzero(wl["model"].astype(str).to_numpy() == name):
            for d in deps:
                rows.append((i, d))
    skipped_df = pd.concat(skipped, ignore_index=True)[["model", "tensor_parallel", "precision", "reason"]]
    if not rows:
        raise DataError(
            "no deployment to search: every (tensor parallel, precision) was skipped: "
            + "; ".join(f"TP{r.tensor_parallel} {r.precision}: {r.reason}" for r in skipped_df.itertuples())
        )
    idx = np.array([i for i, _ in rows])
    deps = [d for _, d in rows]
    base = pd.DataFrame(
        {
            "model": wl["model"].astype(str).to_numpy()[idx],
            "input_len": wl["input_len"].to_numpy(dtype=float)[idx],
            "output_len": wl["output_len"].to_numpy(dtype=float)[idx],
            "tensor_parallel": [d.tensor_parallel for d in deps],
            "quantization": [d.config.quantization or "" for d in deps],
            "kv_cache_dtype": [d.config.kv_cache_dtype or "auto" for d in deps],
        }
    )
    for c in SCHEDULER_COLUMNS:  # how the workload is scheduled and sent, where it says
        if c in wl.columns:
            base[c] = wl[c].to_numpy()[idx]
    if max_num_batched_tokens:  # the servers' own token budget (vLLM V1: chunked prefill)
        base["chunked_prefill"] = True
        base["max_num_batched_tokens"] = [float(d.config.max_num_batched_tokens) for d in deps]
    # engine settings travel with the rows only where not vLLM's defaults (the same predictions; a constant
    # column costs predict about a quarter of its time on a 1.2M-row grid)
    if block_size != DEFAULT_BLOCK_SIZE:
        base["block_size"] = float(block_size)
    if gpu_memory_utilization != DEFAULT_GPU_MEMORY_UTILIZATION:
        base["gpu_memory_utilization"] = float(gpu_memory_utilization)
    g = serving_grid(model, base, pred_b, slo, lazy=True)
    t1 = g["throughput"][:, np.flatnonzero(pred_b == 1.0)[0]]
    if isinstance(g, LazyGrid):  # TTFT and TPOT are predicted where the answer reads them
        grid: dict[str, np.ndarray] = g.select(keep)
    else:
        grid = {k: (v if keep.all() else v[:, keep]) for k, v in g.items() if k != "latency_source"}
    ctx = base["input_len"].to_numpy() + base["output_len"].to_numpy()
    max_b_mem = np.array([float(d.config.max_sequences(c)) for d, c in zip(deps, ctx, strict=True)])
    fits = b[None, :] <= max_b_mem[:, None]
    j, binding, eff = capped(b, grid, slo, epsilon, fits, t1)
    r = np.arange(len(base))
    jj = np.where(j >= 0, j, 0)
    ok = j >= 0
    replicas = np.array([d.replicas for d in deps], dtype=float)
    thr = np.where(ok, grid["throughput"][r, jj], np.nan)
    out = pd.DataFrame(
        {
            "workload": idx,
            "model": base["model"],
            "gpu": hw.name,
            "gpus": int(gpus),
            "input_len": base["input_len"],
            "output_len": base["output_len"],
            "tensor_parallel": base["tensor_parallel"].astype(int),
            "precision": [d.precision for d in deps],
            "weight_only": [d.weight_only for d in deps],
            "replicas": replicas.astype(int),
            "b_cap": np.where(ok, b[jj], 0).astype(int),
            "binding": binding,
            "throughput_per_gpu_tok_s": thr * replicas / gpus,
            "per_user_tok_s": np.where(ok, base["output_len"].to_numpy() / grid["e2e_mean"][r, jj], np.nan),
            "pred_throughput_tok_s": thr,
            **{f"pred_{q}_s": _where_ok(ok, grid, q, r, jj) for q in LIMITS},
            "efficiency": np.where(ok, eff[r, jj], np.nan),
            "weights_gib": [d.config.weights / GIB for d in deps],
            "kv_pool_gib": [d.config.kv_pool / GIB for d in deps],
            "kv_tokens": [d.config.kv_tokens for d in deps],
            "max_batch_memory": max_b_mem.astype(int),
            "latency_source": str(g["latency_source"][0]),
        }
    )
    if interval is not None:
        _add_interval(model, out, base, interval)
    grid = (
        grid.with_arrays(fits=fits, efficiency=eff)
        if isinstance(grid, LazyGrid)
        else {**grid, "fits": fits, "efficiency": eff}
    )
    order = out.assign(_p=[-_BITS[d.config.weight_precision] for d in deps]).sort_values(
        ["workload", "throughput_per_gpu_tok_s", "tensor_parallel", "_p"],  # ties: the wider weights first
        ascending=[True, False, True, True],
        kind="mergesort",
        na_position="last",
    )
    ranked = order.drop(columns="_p")
    ranked.insert(1, "rank", ranked.groupby("workload").cumcount() + 1)
    return SearchResult(ranked, skipped_df, b, grid, slo, float(epsilon), tuple(deps), base)


def _where_ok(ok: np.ndarray, grid: dict[str, np.ndarray], quantity: str, rows, cols) -> np.ndarray:
    """`quantity` at the points (`rows`, `cols`) where `ok`, NaN elsewhere (predicted where `ok` only)."""
    out = np.full(len(ok), np.nan)
    out[ok] = _at(grid, quantity, np.asarray(rows)[ok], np.asarray(cols)[ok])
    return out


def _add_interval(model, out: pd.DataFrame, base: pd.DataFrame, level: float) -> None:
    """The throughput interval of the model's one `predict` at each feasible B_cap (NaN where none)."""
    low, high = INTERVAL_COLUMNS["throughput"]
    out[low], out[high] = np.nan, np.nan
    ok = out["b_cap"].to_numpy() > 0
    if not ok.any():
        return
    rows = base[ok].assign(batch_size=out.loc[ok, "b_cap"].to_numpy(dtype=float))
    if "client" not in rows.columns:
        rows = rows.assign(client=DEFAULT_CLIENT)
    pred = model.predict(rows, interval=level)
    out.loc[ok, low] = pred[low].to_numpy()
    out.loc[ok, high] = pred[high].to_numpy()


def closest(result: SearchResult, workload: int = 0) -> str:
    """One line for a workload no deployment serves: the (deployment, batch) closest to meeting every limit (the
    smallest worst ratio of latency to its limit and of epsilon to efficiency, among batches that fit the KV pool)
    and which limit binds there."""
    limits = result.slo.limits()
    best: tuple[float, int, int, str] = (np.inf, -1, -1, "")
    for i in result.ranked.index[result.ranked["workload"] == workload]:
        terms = {LIMITS[q] + " SLO": result.grid[q][i] / lim for q, lim in limits.items()}
        with np.errstate(divide="ignore"):
            terms["efficiency floor"] = result.epsilon / result.grid["efficiency"][i]
        stack = np.vstack(list(terms.values()))
        worst = np.where(result.grid["fits"][i], stack.max(axis=0), np.inf)
        k = int(np.argmin(worst))
        if worst[k] < best[0]:
            best = (float(worst[k]), int(i), k, list(terms)[int(np.argmax(stack[:, k]))])
    if best[1] < 0:
        return (
            f"no deployment fits one request of {_context(result, workload)} tokens in its KV pool: use more GPUs, "
            "fewer bytes per weight or shorter requests"
        )
    excess, i, k, which = best
    row = result.ranked.loc[i]
    return (
        f"no deployment meets {result.slo.describe()} with efficiency > {result.epsilon:g}: closest is "
        f"TP{row['tensor_parallel']} {row['precision']} at B = {int(result.batch_sizes[k])}, where the {which} "
        f"binds ({excess:.2f} x its limit)"
    )


def _context(result: SearchResult, workload: int) -> int:
    row = result.ranked[result.ranked["workload"] == workload].iloc[0]
    return int(row["input_len"] + row["output_len"])


def _stat_column(quantity: str, statistic: str) -> str:
    """The prediction column of `quantity` at `statistic` (``mean`` or ``p90``): ``pred_ttft_s``, ``pred_ttft_p90_s``."""
    return f"pred_{quantity}_s" if statistic == "mean" else f"pred_{quantity}_{statistic}_s"


def pareto_front(
    result: SearchResult, workload: int = 0, model=None, level: float | None = None
) -> pd.DataFrame:
    """The Pareto set of one workload over every (deployment, batch) that fits the KV pool, meets the efficiency
    floor and the `Slo`: points no other beats on both throughput per GPU and per-user tokens/s. Columns
    ``tensor_parallel, precision, replicas, batch_size, throughput_per_gpu_tok_s, per_user_tok_s``, and
    ``pred_ttft_s, pred_tpot_s, pred_e2e_s`` (``pred_ttft_p90_s`` and so on where the SLO limits them at a
    percentile, `Slo.statistic`), ordered by per-user rate (fastest first). With the search's `model` and an
    interval `level` (e.g. 0.9), each point's intervals too (`_front_intervals`)."""
    rk = result.ranked.sort_index()
    rows = rk.index[rk["workload"] == workload]
    b = result.batch_sizes
    parts = []
    eps = result.epsilon
    limits = result.slo.limits()
    grid = result.grid
    later = [q for q in LIMITS if q not in limits and isinstance(grid, LazyGrid) and grid.lazy(q)]
    for i in rows:
        row = rk.loc[i]
        ok = grid["fits"][i] & (grid["efficiency"][i] > eps)
        for q, lim in limits.items():
            if isinstance(grid, LazyGrid) and grid.lazy(
                q
            ):  # predicted where the rest holds (False elsewhere)
                cols = np.flatnonzero(ok)
                ok[cols] &= grid.at(q, i, cols) <= lim
            else:
                ok &= grid[q][i] <= lim
        thr = grid["throughput"][i]
        cols = np.flatnonzero(ok)
        parts.append(
            pd.DataFrame(
                {
                    "tensor_parallel": int(row["tensor_parallel"]),
                    "precision": row["precision"],
                    "replicas": int(row["replicas"]),
                    "batch_size": b[ok].astype(int),
                    "throughput_per_gpu_tok_s": thr[ok] * row["replicas"] / row["gpus"],
                    "per_user_tok_s": row["output_len"] / grid["e2e_mean"][i][ok],
                    **{
                        _stat_column(q, result.slo.statistic(q)): np.full(cols.size, np.nan)
                        if q in later
                        else _at(grid, q, i, cols)
                        for q in LIMITS
                    },
                    "_row": i,
                    "_col": cols,
                }
            )
        )
    pts = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if pts.empty:
        return pts.drop(columns="_col", errors="ignore")
    pts = pts.sort_values(
        ["per_user_tok_s", "throughput_per_gpu_tok_s"], ascending=[False, False], kind="mergesort"
    )
    best = np.maximum.accumulate(pts["throughput_per_gpu_tok_s"].to_numpy())
    prev = np.concatenate([[-np.inf], best[:-1]])
    front = pts[pts["throughput_per_gpu_tok_s"].to_numpy() > prev].reset_index(drop=True)
    for q in later:  # the latencies no limit reads: predicted at the front's points only
        front[_stat_column(q, result.slo.statistic(q))] = _at(grid, q, front["_row"], front["_col"])
    front = front.drop(columns="_col")
    if model is not None and level is not None:
        front = _front_intervals(model, result, front, level)
    return front.drop(columns="_row")


def _front_intervals(model, result: SearchResult, front: pd.DataFrame, level: float) -> pd.DataFrame:
    """`front` with the `level` intervals of the model's one `predict` at each point: throughput per GPU and per
    user (``*_low_*``, ``*_high_*``), and the TTFT, TPOT and E2E that the front holds as means (`INTERVAL_COLUMNS`)."""
    rows = result.rows.loc[front["_row"].to_numpy()].assign(
        batch_size=front["batch_size"].to_numpy(dtype=float)
    )
    if "client" not in rows.columns:
        rows = rows.assign(client=DEFAULT_CLIENT)
    pred = model.predict(rows.reset_index(drop=True), interval=level)
    per_gpu = front["replicas"].to_numpy() / float(result.ranked["gpus"].iloc[0])
    low, high = INTERVAL_COLUMNS["throughput"]
    out = front.assign(
        throughput_per_gpu_low_tok_s=pred[low].to_numpy() * per_gpu,
        throughput_per_gpu_high_tok_s=pred[high].to_numpy() * per_gpu,
    )
    e2e_low, e2e_high = INTERVAL_COLUMNS["e2e"]
    ol = rows["output_len"].to_numpy(dtype=float)
    out = out.assign(
        per_user_low_tok_s=ol / pred[e2e_high].to_numpy(), per_user_high_tok_s=ol / pred[e2e_low].to_numpy()
    )
    for q in LIMITS:  # a latency held at a percentile has no interval here: the model's are the means'
        if result.slo.statistic(q) == "mean":
            for c in INTERVAL_COLUMNS[q]:
                out[c] = pred[c].to_numpy()
    return out
