"""Checks of the MoE and MLA terms (`moe_mla_terms`) against measured vLLM kernels (NVIDIA AIConfigurator data,
`data/aic-moe.csv`, `data/aic-mla.csv`, `data/aic-moe-a2a.csv`), and their figures (notebook 09, beyond the paper).

Protocol of each check: the term's roofline time with efficiency 1 from analytic bytes and FLOPs over the GPU
registry's peaks; one scale (1 / efficiency) per (GPU, dtype) fitted by least squares on relative errors of the
small-size rows only, then the absolute percentage error (APE) scored on the larger rows (extrapolation in size);
MAPEs with seeded bootstrap 95% intervals (`slimlib.experiments.outputs.uncertainty`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.errors import DataError
from slimlib.experiments.kernel_timing.moe_mla_terms import (
    expert_touch_knee,
    mla_decode_flops,
    mla_latent_bytes,
    mla_prefill_attention_flops,
    mla_projection_params,
    moe_flops,
    moe_weight_bytes_touched,
)
from slimlib.experiments.outputs.plotting import category_color, gpu_color
from slimlib.experiments.outputs.uncertainty import N_BOOT, ape, bootstrap_mean_ci
from slimlib.model.terms.rooflines import roofline
from slimlib.registry.gpus import get_gpu, gpu_label
from slimlib.registry.precision import kernel_peak, kernel_weight_bytes, kv_bytes_per_element

#: tokens per step up to which the MoE efficiency is fitted (the memory-bound expert-touch rise)
MOE_FIT_MAX_TOKENS = 16
#: cached context up to which the MLA decode efficiency is fitted (longer contexts are scored)
MLA_GEN_FIT_MAX_CONTEXT = 8192
#: batch x input length up to which the MLA prefill floor and efficiency are fitted
MLA_CTX_FIT_MAX_TOKENS = 2**12
SUMMARY_COLUMNS = ["check", "gpu", "dtype", "group", "n_fit", "n_scored", "efficiency", "floor_ms", "mape_pct",
                   "mape_lo_pct", "mape_hi_pct"]  # fmt: skip


def fit_inverse_efficiency(model_time, measured, base=0.0, *, intercept: bool = False) -> tuple[float, float]:
    """(floor, scale) minimizing the squared relative errors of ``base + floor + scale x model_time`` against
    `measured` (floor 0 unless `intercept`); the efficiency is 1 / scale. DataError without positive rows."""
    t = np.asarray(measured, dtype=float)
    r = np.asarray(model_time, dtype=float)
    y = (t - np.broadcast_to(np.asarray(base, dtype=float), t.shape)) / t
    cols = [r / t, 1.0 / t] if intercept else [r / t]
    a = np.column_stack(cols)
    if t.size == 0 or not np.any(r > 0):
        raise DataError("fit_inverse_efficiency: no rows with a positive modelled time to fit on")
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return (float(coef[1]) if intercept else 0.0), float(coef[0])


def _mape_row(
    check: str, gpu: str, dtype: str, group: str, pts: pd.DataFrame, n_boot: int, extra: dict
) -> dict:
    scored = pts[pts["role"] == "score"]
    mean, lo, hi = bootstrap_mean_ci(scored["ape_pct"].to_numpy(), n_boot=n_boot,
                                     label=f"{check} {gpu} {dtype} {group}")  # fmt: skip
    return {"check": check, "gpu": gpu, "dtype": dtype, "group": group, "n_fit": int((pts["role"] == "fit").sum()),
            "n_scored": len(scored), "mape_pct": mean, "mape_lo_pct": lo, "mape_hi_pct": hi, **extra}  # fmt: skip


def _summary(check: str, pts: pd.DataFrame, dtype_col: str, group_col: str, n_boot: int) -> pd.DataFrame:
    """MAPE per (GPU, dtype, group), per (GPU, dtype) over all groups, and overall."""
    rows = []
    for (gpu, dt), g in pts.groupby(["gpu", dtype_col], sort=True):
        extra = {"efficiency": float(g["efficiency"].iloc[0]), "floor_ms": float(g["floor_ms"].iloc[0])}
        for grp, gg in g.groupby(group_col, sort=True):
            rows.append(_mape_row(check, str(gpu), str(dt), str(grp), gg, n_boot, extra))
        rows.append(_mape_row(check, str(gpu), str(dt), "all", g, n_boot, extra))
    nan = {"efficiency": float("nan"), "floor_ms": float("nan")}
    rows.append(_mape_row(check, "all", "all", "all", pts, n_boot, nan))
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _score(
    pts: pd.DataFrame, keys: list[str], fit_mask: pd.Series, *, intercept: bool, base=None
) -> pd.DataFrame:
    """Fit (floor, scale) per `keys` group on `fit_mask` rows; add modelled_ms, efficiency, floor_ms, role, ape."""
    pts = pts.assign(role=np.where(fit_mask, "fit", "score"), modelled_ms=np.nan, efficiency=np.nan,
                     floor_ms=0.0)  # fmt: skip
    b = pts[base] if base is not None else pd.Series(0.0, index=pts.index)
    for _, g in pts.groupby(keys, sort=True):
        f = g[g["role"] == "fit"]
        if len(f) == 0:
            raise DataError(f"no rows to fit on for {dict(g[keys].iloc[0])}; lower the fit threshold's rule")
        floor, scale = fit_inverse_efficiency(
            f["roofline_ms"], f["latency_ms"], b[f.index], intercept=intercept
        )
        pts.loc[g.index, "modelled_ms"] = b[g.index] + floor + scale * g["roofline_ms"]
        pts.loc[g.index, ["efficiency", "floor_ms"]] = [1.0 / scale, floor]
    pts["ape_pct"] = ape(pts["latency_ms"], pts["modelled_ms"])
    return pts


def shape_label(hidden, inter, n_experts, top_k) -> str:
    """MoE layer shape as 'hidden x inter, E experts top-k'."""
    return f"{int(hidden)}x{int(inter)}, {int(n_experts)}e top-{int(top_k)}"


def moe_points(
    moe: pd.DataFrame | None = None,
    *,
    distribution: str = "balanced",
    layouts: tuple[tuple[int, int], ...] = ((1, 1),),
    fit_max_tokens: int = MOE_FIT_MAX_TOKENS,
    floor: bool = False,
) -> pd.DataFrame:
    """Measured fused-MoE latency against the MoE term, one row per measured point of `distribution` and the
    (moe_tp, moe_ep) `layouts`: roofline_ms (efficiency 1), bound, knee_tokens (`expert_touch_knee`), and
    modelled_ms with one efficiency per (GPU, dtype) fitted on rows with at most `fit_max_tokens` tokens
    (role 'fit'; the rest 'score'). `floor` adds a fitted per-(GPU, dtype) constant (a per-step overhead)."""
    df = load("aic-moe") if moe is None else moe
    lay = pd.Series(list(zip(df["moe_tp"], df["moe_ep"], strict=True)), index=df.index)
    df = df[(df["distribution"] == distribution) & lay.isin(list(layouts))]
    if len(df) == 0:
        raise DataError(f"aic-moe: no rows of distribution {distribution!r} at layouts {list(layouts)}")
    parts = []
    for (gpu_name, dtype), g in df.groupby(["gpu", "moe_dtype"], sort=True):
        gpu = get_gpu(str(gpu_name))
        nbytes = moe_weight_bytes_touched(g["num_tokens"], g["n_experts"], g["top_k"], g["hidden_size"],
                                          g["inter_size"], kernel_weight_bytes(str(dtype)), g["moe_tp"], g["moe_ep"])  # fmt: skip
        flops = moe_flops(
            g["num_tokens"], g["top_k"], g["hidden_size"], g["inter_size"], g["moe_tp"], g["moe_ep"]
        )
        peak = kernel_peak(gpu, str(dtype))
        mem_s, cmp_s = nbytes / gpu.mem_bw, flops / peak
        parts.append(g.assign(
            roofline_ms=1e3 * roofline(flops, nbytes, peak, gpu.mem_bw, 1.0, 1.0),
            bound=np.where(cmp_s > mem_s, "compute", "memory"),
            knee_tokens=expert_touch_knee(g["n_experts"], g["top_k"]),
            shape=[shape_label(*v) for v in zip(g["hidden_size"], g["inter_size"], g["n_experts"], g["top_k"],
                                                 strict=True)],
        ))  # fmt: skip
    pts = pd.concat(parts).sort_values(["gpu", "moe_dtype", "shape", "moe_tp", "moe_ep", "num_tokens"],
                                        kind="mergesort")  # fmt: skip
    pts = pts.reset_index(drop=True)
    return _score(pts, ["gpu", "moe_dtype"], pts["num_tokens"] <= fit_max_tokens, intercept=floor)


def moe_check(points: pd.DataFrame, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """MAPE of `moe_points` on the scored rows per (GPU, dtype, shape), per (GPU, dtype) and overall, with
    bootstrap 95% intervals; efficiency is the fitted one of the (GPU, dtype)."""
    return _summary("moe", points, "moe_dtype", "shape", n_boot)


def moe_layout_check(
    moe: pd.DataFrame | None = None,
    layouts: tuple[tuple[int, int], ...] = ((1, 1), (1, 8), (8, 1)),
    *,
    n_boot: int = N_BOOT,
) -> pd.DataFrame:
    """Overall MAPE of the MoE term per (moe_tp, moe_ep) layout of the balanced rows, without and with a fitted
    per-step floor (`moe_points`), with bootstrap 95% intervals: how far splitting the experts over GPUs keeps
    the per-GPU term (weights and FLOPs divided by tp x ep) right."""
    rows = []
    for tp, ep in layouts:
        for floor in (False, True):
            pts = moe_points(moe, layouts=((tp, ep),), floor=floor)
            scored = pts.loc[pts["role"] == "score", "ape_pct"].to_numpy()
            mean, lo, hi = bootstrap_mean_ci(scored, n_boot=n_boot, label=f"moe layout {tp} {ep} {floor}")
            rows.append({"moe_tp": tp, "moe_ep": ep, "floor": floor, "n_scored": scored.size,
                         "median_floor_ms": float(pts.groupby(["gpu", "moe_dtype"])["floor_ms"].first().median()),
                         "mape_pct": mean, "mape_lo_pct": lo, "mape_hi_pct": hi})  # fmt: skip
    return pd.DataFrame(rows)


def mla_generation_points(
    mla: pd.DataFrame | None = None, *, fit_max_context: int = MLA_GEN_FIT_MAX_CONTEXT
) -> pd.DataFrame:
    """Measured MLA decode-module latency against the latent-attention term, one row per generation point.

    The context-independent part of the module (projections, norms, launches) is the measured latency at the
    smallest context of the same (GPU, kernel, dtypes, heads, batch): ``base_ms``. The term adds
    max(latent bytes / bandwidth, latent FLOPs / bf16 peak) beyond that context, over one efficiency per (GPU,
    KV dtype) fitted on rows with context <= `fit_max_context` (role 'fit'); longer contexts are scored; the
    rows at the smallest context are 'base' (not scored)."""
    df = load("aic-mla") if mla is None else mla
    df = df[df["phase"] == "generation"].copy()
    if len(df) == 0:
        raise DataError("aic-mla: no generation rows")
    parts = []
    for gpu_name, g in df.groupby("gpu", sort=True):
        gpu = get_gpu(str(gpu_name))
        kvb = np.array([kv_bytes_per_element(v, 2.0) for v in g["kv_cache_dtype"].map(
            lambda d: "auto" if d == "bfloat16" else d)])  # fmt: skip
        nbytes = mla_latent_bytes(g["batch_size"], g["context"], kvb)
        flops = mla_decode_flops(g["batch_size"], g["context"], g["n_heads"])
        parts.append(g.assign(latent_ms=1e3 * roofline(flops, nbytes, gpu.peak_flops, gpu.mem_bw, 1.0, 1.0),
                              bound=np.where(flops / gpu.peak_flops > nbytes / gpu.mem_bw, "compute", "memory")))  # fmt: skip
    pts = pd.concat(parts)
    grp = ["gpu", "kernel_source", "kv_cache_dtype", "gemm_type", "n_heads", "batch_size"]
    pts = pts.sort_values([*grp, "context"], kind="mergesort").reset_index(drop=True)
    first = pts.groupby(grp, sort=False)[["latency_ms", "latent_ms"]].transform("first")
    pts["base_ms"] = first["latency_ms"]
    pts["roofline_ms"] = pts["latent_ms"] - first["latent_ms"]
    pts["tokens"] = pts["batch_size"].astype(float) * pts["context"].astype(float)
    is_base = pts.groupby(grp, sort=False).cumcount() == 0
    fit = pts["context"] <= fit_max_context
    out = _score(pts, ["gpu", "kv_cache_dtype"], fit, intercept=False, base="base_ms")
    out.loc[is_base, "role"] = "base"
    return out


def mla_context_points(mla: pd.DataFrame | None = None, *, fit_max_tokens: int = MLA_CTX_FIT_MAX_TOKENS):
    """Measured MLA prefill-module latency against FLOPs over peak, one row per context point: the projections
    max(FLOPs / peak of gemm_type, weight bytes / bandwidth) plus the causal attention FLOPs / peak of
    mla_dtype; a floor and one efficiency per (GPU, gemm_type) fitted on rows with batch x input length <=
    `fit_max_tokens` (role 'fit'), the rest scored."""
    df = load("aic-mla") if mla is None else mla
    df = df[df["phase"] == "context"].copy()
    if len(df) == 0:
        raise DataError("aic-mla: no context rows")
    parts = []
    for (gpu_name, gemm, adt), g in df.groupby(["gpu", "gemm_type", "mla_dtype"], sort=True):
        gpu = get_gpu(str(gpu_name))
        params = mla_projection_params(g["n_heads"])
        proj_flops = 2.0 * g["batch_size"].astype(float) * g["input_len"].astype(float) * params
        proj = roofline(
            proj_flops,
            params * kernel_weight_bytes(str(gemm)),
            kernel_peak(gpu, str(gemm)),
            gpu.mem_bw,
            1.0,
            1.0,
        )
        attn = mla_prefill_attention_flops(g["batch_size"], g["input_len"], g["n_heads"]) / kernel_peak(
            gpu, str(adt)
        )
        parts.append(g.assign(roofline_ms=1e3 * (proj + attn)))
    pts = pd.concat(parts)
    pts["tokens"] = pts["batch_size"].astype(float) * pts["input_len"].astype(float)
    pts = pts.sort_values(["gpu", "gemm_type", "kernel_source", "mla_dtype", "kv_cache_dtype", "n_heads",
                           "batch_size", "input_len"], kind="mergesort").reset_index(drop=True)  # fmt: skip
    return _score(pts, ["gpu", "gemm_type"], pts["tokens"] <= fit_max_tokens, intercept=True)


def mla_check(generation: pd.DataFrame, context: pd.DataFrame, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """MAPE of the MLA decode check per (GPU, KV dtype, heads) and of the prefill check per (GPU, GEMM dtype,
    kernel), per (GPU, dtype) and overall, with bootstrap 95% intervals."""
    gen = generation[generation["role"] != "base"].assign(heads=lambda d: "heads " + d["n_heads"].astype(str))
    return pd.concat([_summary("mla_generation", gen, "kv_cache_dtype", "heads", n_boot),
                      _summary("mla_context", context, "gemm_type", "kernel_source", n_boot)], ignore_index=True)  # fmt: skip


def a2a_summary(a2a: pd.DataFrame | None = None, payload_bytes: float = 2.0) -> pd.DataFrame:
    """Expert all-to-all latency against message size per (GPU, EP size, backend, phase, shape, SMs): the latency
    floor (smallest message), the latency and effective bandwidth at the largest message, and the smallest token
    count whose latency exceeds twice the floor. Message bytes per GPU: tokens x hidden x `payload_bytes`
    (bf16 activations, each token counted once)."""
    df = load("aic-moe-a2a") if a2a is None else a2a
    keys = ["gpu", "ep_size", "node_num", "comm_backend", "phase", "hidden_size", "top_k", "n_experts", "sms"]
    rows = []
    for k, g in df.groupby(keys, sort=True):
        g = g.sort_values("num_tokens")
        msg = g["num_tokens"].to_numpy(float) * g["hidden_size"].to_numpy(float) * payload_bytes
        lat = g["latency_us"].to_numpy(float)
        over = np.flatnonzero(lat > 2 * lat[0])
        rows.append({**dict(zip(keys, k, strict=True)), "min_tokens": int(g["num_tokens"].iloc[0]),
                     "floor_us": lat[0], "max_tokens": int(g["num_tokens"].iloc[-1]),
                     "max_message_mb": msg[-1] / 1e6, "latency_at_max_us": lat[-1],
                     "bandwidth_at_max_gb_s": msg[-1] / (lat[-1] * 1e-6) / 1e9,
                     "tokens_at_twice_floor": float(g["num_tokens"].iloc[over[0]]) if len(over) else np.nan})  # fmt: skip
    return pd.DataFrame(rows)


# -------------------------------------------------------------------------------------------------- figures
def plot_moe_check(ax, points: pd.DataFrame, gpu: str, dtype: str, shapes: list[str]) -> None:
    """Measured (markers) and modelled (lines) fused-MoE step time against tokens, log-log, for `shapes` of one
    (GPU, dtype); dotted verticals at each shape's expert-touch knee, shaded: the fit range."""
    sel = points[(points["gpu"] == gpu) & (points["moe_dtype"] == dtype)]
    for i, shape in enumerate(shapes):
        s = sel[sel["shape"] == shape]
        if len(s) == 0:
            raise DataError(f"no MoE points of shape {shape!r} on {gpu} {dtype}")
        c = category_color(i)
        ax.plot(s["num_tokens"], s["latency_ms"], "o", ms=2.5, color=c, label=f"{shape} measured")
        ax.plot(s["num_tokens"], s["modelled_ms"], "-", lw=1, color=c, label=f"{shape} term")
        ax.axvline(float(s["knee_tokens"].iloc[0]), color=c, ls=":", lw=0.8)
    fit_max = sel.loc[sel["role"] == "fit", "num_tokens"].max()
    ax.axvspan(sel["num_tokens"].min(), fit_max, color="0.92", zorder=0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per step")
    ax.set_ylabel("MoE layer time (ms)")
    eff = float(sel["efficiency"].iloc[0])
    ax.set_title(f"{gpu_label(gpu)}, {dtype} (efficiency {eff:.2f})", fontsize=7)


def plot_mla_check(ax, points: pd.DataFrame, gpu: str, kv_dtype: str, heads: list[int], batch: int) -> None:
    """Measured (markers) and modelled (lines) MLA decode-module time against context at batch `batch`, log-log,
    for `heads` heads per GPU of one (GPU, KV dtype)."""
    sel = points[
        (points["gpu"] == gpu) & (points["kv_cache_dtype"] == kv_dtype) & (points["batch_size"] == batch)
    ]
    for i, h in enumerate(heads):
        s = sel[sel["n_heads"] == h]
        if len(s) == 0:
            raise DataError(f"no MLA decode points with {h} heads, batch {batch} on {gpu} {kv_dtype}")
        s = s[s["gemm_type"] == s["gemm_type"].iloc[0]]
        c = category_color(i)
        ax.plot(s["context"], s["latency_ms"], "o", ms=2.5, color=c, label=f"{h} heads measured")
        ax.plot(s["context"], s["modelled_ms"], "-", lw=1, color=c, label=f"{h} heads term")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("cached context per request (tokens)")
    ax.set_ylabel("MLA decode module time (ms)")
    eff = float(sel["efficiency"].iloc[0])
    ax.set_title(f"{gpu_label(gpu)}, KV {kv_dtype} (efficiency {eff:.2f})", fontsize=7)


def plot_a2a(ax, a2a: pd.DataFrame, hidden: int, top_k: int, n_experts: int, phase: str) -> None:
    """DeepEP latency against tokens per GPU for one MoE shape and phase: one line per (GPU, backend, SMs)."""
    sel = a2a[(a2a["hidden_size"] == hidden) & (a2a["top_k"] == top_k) & (a2a["n_experts"] == n_experts)
              & (a2a["phase"] == phase)]  # fmt: skip
    if len(sel) == 0:
        raise DataError(f"no all-to-all rows for hidden {hidden}, top-{top_k}, {n_experts} experts, {phase}")
    styles = {"deepep_ht": "-", "deepep_ll": "--", "deepep_v2_context": "-.", "deepep_v2_generation": ":"}
    for (gpu, backend, sms), s in sel.groupby(["gpu", "comm_backend", "sms"], sort=True):
        s = s.sort_values("num_tokens")
        ax.plot(s["num_tokens"], s["latency_us"], styles.get(str(backend), "-"), marker="o", ms=2, lw=1,
                color=gpu_color(str(gpu)),
                label=f"{gpu_label(str(gpu))} {backend}" + (f" {sms} SMs" if sms else ""))  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per GPU")
    ax.set_ylabel("latency (us)")
    ax.set_title(phase, fontsize=7)
