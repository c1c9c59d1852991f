"""Summaries of the GPU kit's tables for the paper's Figs. 4-8 and Table I (notebook 08).

Inputs are the committed tables `kit-campaigns`, `kit-kernels` and `kit-counters` (`slimlib.data.load`).
Every summary has one row per measured point, keyed by `POINT` (campaign, model, gpu, B, IL, OL), with the
point's active context (Eq. 3) and a short label. Counters are Nsight Compute's, over the last decode step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.errors import DataError, UnknownNameError
from slimlib.kit.ncu import duration_weighted
from slimlib.model import equations as eq
from slimlib.model import roofline
from slimlib.registry.gpus import get_gpu

POINT = ["campaign", "model", "gpu", "batch_size", "input_len", "output_len"]
SHARE_CATEGORIES = ("attention", "gemm", "norm_elementwise", "other")


def _need(df: pd.DataFrame, cols, what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(f"{what}: table lacks column(s) {', '.join(missing)}")


def campaign_labels(campaigns: pd.DataFrame) -> dict[str, str]:
    """Campaign -> figure label from its manifest, e.g. 'CPU, minimal PyTorch engine' or
    'NVIDIA H200, minimal PyTorch engine'; an engine other than the kit's is named as its manifest says."""
    _need(campaigns, ["campaign", "device", "gpu_name", "gpu", "engine"], "campaign_labels")
    out = {}
    for r in campaigns.itertuples(index=False):
        where = "CPU" if r.device == "cpu" else (r.gpu_name if pd.notna(r.gpu_name) else r.gpu)
        engine = str(r.engine) if pd.notna(r.engine) else ""
        what = "minimal PyTorch engine" if engine.startswith("slimlib minimal PyTorch engine") else engine
        out[str(r.campaign)] = f"{where}, {what}" if what else str(where)
    return out


def point_label(df: pd.DataFrame, with_model: bool | None = None) -> pd.Series:
    """'B=64 IL=512 OL=256' per row (prefixed by the model when `with_model`, default: when several models)."""
    if with_model is None:
        with_model = df["model"].nunique() > 1
    text = ("B=" + df["batch_size"].astype(int).astype(str) + " IL=" + df["input_len"].astype(int).astype(str)
            + " OL=" + df["output_len"].astype(int).astype(str))  # fmt: skip
    return (df["model"].astype(str) + " " + text) if with_model else text


def _finish(df: pd.DataFrame, generated) -> pd.DataFrame:
    df = df.copy()
    df["active_context"] = eq.active_context(df["batch_size"], df["input_len"], generated(df))
    df["label"] = point_label(df)
    return df.sort_values(["active_context", *POINT], kind="mergesort", ignore_index=True)


def kernel_shares(kernels: pd.DataFrame) -> pd.DataFrame:
    """Fig. 5: per point, the decode-time share of each kernel category (columns `SHARE_CATEGORIES`, fractions)
    and time per step (`<category>_ms`); active_context is the mean over the profiled steps, which the harness
    spreads evenly over the decode: ``B (IL + (OL - 1) / 2)`` (Eq. 3)."""
    _need(kernels, [*POINT, "category", "share", "time_per_step_ms"], "kernel_shares")
    if kernels.empty:
        return pd.DataFrame(columns=[*POINT, *SHARE_CATEGORIES, "active_context", "label"])
    share = kernels.pivot_table(index=POINT, columns="category", values="share", aggfunc="first")
    ms = kernels.pivot_table(index=POINT, columns="category", values="time_per_step_ms", aggfunc="first")
    ms.columns = [f"{c}_ms" for c in ms.columns]
    wide = share.reindex(columns=list(SHARE_CATEGORIES)).join(ms).reset_index()
    wide.columns.name = None
    return _finish(wide, lambda d: (d["output_len"].astype(float) - 1) / 2)


def _weighted(counters: pd.DataFrame, target: str, columns: list[str]) -> pd.DataFrame:
    _need(counters, [*POINT, "target", "duration_s", *columns], "kit-counters summary")
    sub = counters[counters["target"] == target]
    if sub.empty:
        return pd.DataFrame(columns=[*POINT, "duration_s", "n_launches", *columns])
    sub = sub.assign(**{c: sub[c].astype(float) for c in [*columns, "duration_s"]})
    return duration_weighted(sub, columns, by=POINT)


def phase_counters(counters: pd.DataFrame, mem_bw=None, target: str = "step") -> pd.DataFrame:
    """Fig. 4: duration-weighted counters over every kernel of the profiled decode step (ncu target 'step'):
    tensor_pct (HMMA + Hopper GMMA tensor-pipe activity), sm_issue_pct, dram_pct (read + write, of peak),
    and, given `mem_bw` (bytes/s, a number or a function of the gpu name returning NaN when unknown),
    dram_read_pct = DRAM bytes read / step time / mem_bw and its per-kernel maximum dram_read_pct_max."""
    if counters.empty:
        return pd.DataFrame(columns=[*POINT, "tensor_pct", "sm_issue_pct", "dram_pct", "dram_read_pct",
                                     "dram_read_pct_max", "active_context", "label"])  # fmt: skip
    c = counters.copy()
    c["tensor_pct"] = (
        c[["tensor_active_pct", "tensor_gmma_active_pct"]].astype(float).sum(axis=1, min_count=1)
    )
    out = _weighted(c, target, ["tensor_pct", "sm_issue_pct", "dram_throughput_pct"])
    out = out.rename(columns={"dram_throughput_pct": "dram_pct"})
    bw = _bandwidths(out["gpu"], mem_bw) if len(out) else np.array([])
    sub = c[c["target"] == target].astype({"dram_read_bytes": float, "dram_read_throughput": float})
    read = sub.groupby(POINT, sort=True).agg(read=("dram_read_bytes", "sum"),
                                             read_tput_max=("dram_read_throughput", "max")).reset_index()  # fmt: skip
    out = out.merge(read, on=POINT, how="left")
    out["dram_read_pct"] = 100 * out["read"].astype(float) / out["duration_s"] / bw
    out["dram_read_pct_max"] = 100 * out["read_tput_max"].astype(float) / bw
    out = out.drop(columns=["read", "read_tput_max"])
    return _finish(out, lambda d: d["output_len"].astype(float) - 1)


def _bandwidths(gpus: pd.Series, mem_bw) -> np.ndarray:
    if mem_bw is None:
        mem_bw = gpu_peaks_lookup("mem_bw")
    if callable(mem_bw):
        return np.array([float(mem_bw(g)) for g in gpus], dtype=float)
    return np.full(len(gpus), float(mem_bw))


def gpu_peaks_lookup(field: str):
    """A function gpu name -> `field` ('peak_flops' or 'mem_bw') from `slimlib.registry.gpus`, NaN when unknown."""

    def lookup(name) -> float:
        try:
            return float(getattr(get_gpu(str(name)), field))
        except UnknownNameError:
            return float("nan")

    return lookup


def counter_attention_roofline(counters: pd.DataFrame, peak_flops=None, mem_bw=None) -> pd.DataFrame:
    """Table I / Fig. 6: the attention kernels of the profiled decode step, per point: launches, time per step
    (ms), FLOPs, DRAM bytes, arithmetic intensity (FLOP/byte), achieved TFLOP/s and DRAM TB/s, their % of the
    GPU's peaks (`slimlib.registry.gpus`, or the numbers/functions given) and the roofline regime."""

    cols = [*POINT, "n_launches", "time_ms", "flop", "dram_bytes", "ai_flop_per_byte", "achieved_tflop_s",
            "dram_tb_s", "flop_util_pct", "bw_util_pct", "regime", "active_context", "label"]  # fmt: skip
    _need(counters, [*POINT, "target", "duration_s", "flop", "dram_bytes"], "counter_attention_roofline")
    sub = counters[counters["target"] == "attention"]
    if sub.empty:
        return pd.DataFrame(columns=cols)
    g = sub.assign(n=1).groupby(POINT, sort=True)
    out = g.agg(n_launches=("n", "sum"), duration_s=("duration_s", "sum"), flop=("flop", "sum"),
                dram_bytes=("dram_bytes", "sum")).reset_index()  # fmt: skip
    out["time_ms"] = out["duration_s"] * 1e3
    out["ai_flop_per_byte"] = out["flop"] / out["dram_bytes"]
    out["achieved_tflop_s"] = out["flop"] / out["duration_s"] / 1e12
    out["dram_tb_s"] = out["dram_bytes"] / out["duration_s"] / 1e12
    pf = _bandwidths(out["gpu"], peak_flops if peak_flops is not None else gpu_peaks_lookup("peak_flops"))
    bw = _bandwidths(out["gpu"], mem_bw)
    out["flop_util_pct"] = 100 * out["achieved_tflop_s"] * 1e12 / pf
    out["bw_util_pct"] = 100 * out["dram_tb_s"] * 1e12 / bw
    known = np.isfinite(pf) & np.isfinite(bw)
    out["regime"] = "unknown GPU peaks"
    if known.any():
        out.loc[known, "regime"] = roofline.regime(out.loc[known, "ai_flop_per_byte"], pf[known], bw[known])
    out = _finish(out, lambda d: d["output_len"].astype(float) - 1)
    return out[cols]


def attention_memory(counters: pd.DataFrame) -> pd.DataFrame:
    """Figs. 7-8: duration-weighted L1/TEX and L2 hit rates, long-scoreboard stalls and occupancy (all %) of the
    attention kernels of the profiled decode step, per point."""
    cols = ["l1_hit_pct", "l2_hit_pct", "long_scoreboard_pct", "occupancy_pct"]
    if counters.empty:
        return pd.DataFrame(columns=[*POINT, *cols, "active_context", "label"])
    return _finish(_weighted(counters, "attention", cols), lambda d: d["output_len"].astype(float) - 1)
