"""Tables and figures of notebook 09 on measured vLLM kernel timings (NVIDIA AIConfigurator data): paper Figs. 4-6,
Table I, the input/output-length panels of Figs. 2-3, the eta_m check and the plateau across GPUs.

Every quantity derived here is analytic FLOPs or bytes (`slimlib.experiments.kernel_timing.composition`) over a measured (or
grid-interpolated) time: effective rates derived from timings, not hardware counters.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.data.aiconfigurator import SYSTEMS
from slimlib.experiments.kernel_timing.composition import (
    GEMM_KINDS,
    KernelSet,
    OutOfGridError,
    gemm_bytes,
    gemm_flops,
)
from slimlib.experiments.outputs.plotting import COMPONENT_COLORS, batch_color, gpu_color, new_figure
from slimlib.model.equations import decode_attention_bytes, decode_attention_flops
from slimlib.registry.gpus import gpu_label

#: kernel-table system -> the GPU registry's label of its GPU
GPU_LABEL = {system: gpu_label(spec["gpu"]) for system, spec in SYSTEMS.items()}
#: AIConfigurator system -> its GPU's colour (`slimlib.experiments.outputs.plotting.gpu_color`)
GPU_COLOR = {system: gpu_color(spec["gpu"]) for system, spec in SYSTEMS.items()}
#: kernel groups of the decode step: (column, legend, colour of `plotting.COMPONENT_COLORS`, not a method's)
_PARTS = (
    ("attention", "decode attention", COMPONENT_COLORS["attention"]),
    ("proj_gemm", "QKV + out proj. GEMMs", COMPONENT_COLORS["proj_gemm"]),
    ("ffn_gemm", "FFN GEMMs", COMPONENT_COLORS["ffn_gemm"]),
    ("lm_head", "LM head GEMM", COMPONENT_COLORS["lm_head"]),
)


def label(ks: KernelSet) -> str:
    """Figure caption tag: the data, GPU and vLLM version."""

    ver = load("aic-systems").set_index("system").loc[ks.system, "vllm_version"]
    return f"measured vLLM kernel timings, vLLM {ver}, NVIDIA AIConfigurator data"


def measured_contexts(ks: KernelSet, batch_size: int) -> np.ndarray:
    """Contexts measured at a measured batch size (up to the first gap)."""
    i = int(np.flatnonzero(ks.dec_b == batch_size)[0])
    return ks._row(i)[0]


# ------------------------------------------------------------------------------------------- Fig. 5
def decode_breakdown(ks: KernelSet, batch_sizes, contexts) -> pd.DataFrame:
    """Decode-step time (ms) by kernel group and shares at each measured (B, context) of the lists."""
    rows = []
    for b in batch_sizes:
        for c in contexts:
            if c not in measured_contexts(ks, b):
                continue
            s = ks.decode_step(b, c).iloc[0]
            row = {"model": ks.model, "gpu": ks.system, "batch_size": int(b), "context": int(c),
                   "attention": s["attention"], "proj_gemm": s["qkv"] + s["o"],
                   "ffn_gemm": s["ffn_up"] + s["ffn_down"], "lm_head": s["lm_head"], "total_ms": s["total_ms"]}  # fmt: skip
            rows.append(row)
    df = pd.DataFrame(rows)
    for k, _, _ in _PARTS:
        df[f"{k}_share"] = df[k] / df["total_ms"]
    df["gemm_ms"] = df["proj_gemm"] + df["ffn_gemm"] + df["lm_head"]
    return df


def crossover_batch(ks: KernelSet, context: int) -> float:
    """Smallest batch size (integer, interpolated between measured ones) at which the decode step's attention time
    exceeds the time of all its GEMMs at `context` cached tokens; NaN when it does not within the measured grid."""
    bmax = max(int(b) for b in ks.dec_b if context <= measured_contexts(ks, int(b))[-1])
    b = np.arange(1, bmax + 1, dtype=float)
    s = ks.decode_step(b, np.full(len(b), float(context)))
    gem = s[[*GEMM_KINDS, "lm_head"]].sum(axis=1).to_numpy()
    over = np.flatnonzero(s["attention"].to_numpy() > gem)
    return float(b[over[0]]) if len(over) else float("nan")


def crossover_table(sets: list[KernelSet], contexts) -> pd.DataFrame:
    """Attention/GEMM crossover batch per (model, GPU, context)."""
    return pd.DataFrame([{"model": k.model, "gpu": k.system, "context": int(c), "crossover_batch": crossover_batch(k, c)}
                         for k in sets for c in contexts])  # fmt: skip


def plot_breakdown(ax, df: pd.DataFrame, x: str, cross=None):
    """Stacked shares (%) of the decode step by kernel group against `x` (batch_size or context)."""
    pos = np.arange(len(df))
    bottom = np.zeros(len(df))
    for k, lab, color in _PARTS:
        v = 100 * df[f"{k}_share"].to_numpy()
        ax.bar(pos, v, bottom=bottom, color=color, width=0.8, label=lab)
        bottom += v
    ax.set_xticks(pos, [str(v) for v in df[x]], rotation=45)
    ax.set_ylim(0, 100)
    ax.set_ylabel("share of decode step (%)")
    if cross is not None and np.isfinite(cross):
        xs = df[x].to_numpy(float)
        # the measured B are categories: the line goes in the gap before the first bar at or above the crossover
        # (every bar right of it has attention > GEMMs), never through a bar whose B is not the crossover
        after = np.flatnonzero(xs >= cross)
        if len(after):
            j = pos[after[0]] - 0.5
            ax.axvline(j, color="black", ls="--", lw=0.9)
            where = (
                f"between B = {xs[after[0] - 1]:.0f} and {xs[after[0]]:.0f}"
                if after[0]
                else "from the first bar"
            )
            text = f"attention > GEMMs from B ≈ {cross:.0f} ({where})"
            top = ax.secondary_xaxis("top")  # named above the axes (on a top tick), never over the bars
            top.set_ticks([j], [text], fontsize=5)
            top.tick_params(length=2, pad=1)


# ------------------------------------------------------------------------------------------- Fig. 6, Table I
def kernel_attention_roofline(ks: KernelSet, batch_sizes, contexts, kv_bytes: int = 2) -> pd.DataFrame:
    """Table I: decode attention of one layer at measured (B, context) points: analytic FLOPs and bytes
    (`decode_attention_flops`, `decode_attention_bytes` over the C cached tokens and the new one) over the measured
    time."""
    hq, hkv, hd = ks.heads
    rows = []
    for b in batch_sizes:
        for c in contexts:
            if c not in measured_contexts(ks, b):
                continue
            t = float(ks.decode_attention_ms(b, c)) / 1e3
            fl = float(decode_attention_flops(b, c + 1, hq, hd))
            by = float(decode_attention_bytes(b, c + 1, hq, hkv, hd, kv_bytes))
            rows.append({"gpu": ks.system, "heads": f"{hq}q/{hkv}kv x {hd}", "batch_size": int(b), "context": int(c),
                         "active_context": int(b * (c + 1)), "time_us": t * 1e6, "ai_flop_per_byte": fl / by,
                         "achieved_tflop_s": fl / t / 1e12, "effective_bw_tb_s": by / t / 1e12,
                         "bw_util": by / t / ks.mem_bw, "flop_util": fl / t / ks.peak_flops,
                         "ridge_flop_per_byte": ks.peak_flops / ks.mem_bw})  # fmt: skip
    return pd.DataFrame(rows)


def plot_roofline(ax, tables: dict[str, pd.DataFrame], sets: dict[str, KernelSet]):
    """Roofs of each GPU and the decode-attention points (colour: batch size, marker: GPU)."""
    import matplotlib as mpl

    markers = ["o", "s", "^", "D"]
    bs = sorted({int(b) for t in tables.values() for b in t["batch_size"]})
    cmap = mpl.colormaps["plasma"]  # batch sizes: not viridis, which means lengths in every figure
    colors = {b: cmap(0.85 * i / max(len(bs) - 1, 1)) for i, b in enumerate(bs)}
    ai = np.geomspace(0.3, 3e3, 200)
    for n, (name, t) in enumerate(tables.items()):
        ks = sets[name]
        ax.loglog(ai, np.minimum(ks.peak_flops, ai * ks.mem_bw) / 1e12, color="black", lw=1.0,
                  ls=["-", "--", ":", "-."][n], label=f"{GPU_LABEL[ks.system]} roof")  # fmt: skip
        # the first GPU filled and small, the others open and larger: points of one shape (same analytic
        # intensity) on several GPUs stay visible instead of hiding one another
        filled = n == 0
        for b, g in t.groupby("batch_size"):
            ax.scatter(g["ai_flop_per_byte"], g["achieved_tflop_s"], s=8 if filled else 26, marker=markers[n],
                       facecolor=colors[int(b)] if filled else "none", edgecolor="none" if filled else colors[int(b)],
                       linewidths=0.8, label=f"B={b}" if n == 0 else None, zorder=3 + (not filled))  # fmt: skip
        ax.scatter([], [], marker=markers[n], s=8 if filled else 26, facecolor="grey" if filled else "none",
                   edgecolor="none" if filled else "grey", label=f"{GPU_LABEL[ks.system]} points")  # fmt: skip
    ax.set_xlabel("arithmetic intensity (FLOP/byte, analytic)")
    ax.set_ylabel("TFLOP/s (analytic FLOPs / measured time)")


# ------------------------------------------------------------------------------------------- Fig. 4 analog
def step_utilization(ks: KernelSet, batch_sizes, context: int) -> pd.DataFrame:
    """Decode step's effective tensor-FLOP and DRAM-bandwidth utilization: analytic FLOPs and bytes of all its
    GEMMs and attention over the composed step time, as fractions of the GPU's peaks."""
    rows = []
    hq, hkv, hd = ks.heads
    wb = 1 if ks.gemm_dtype == "fp8" else 2
    for b in batch_sizes:
        if context > measured_contexts(ks, b)[-1]:
            continue
        s = ks.decode_step(b, context).iloc[0]
        fl = ks.n_layers * (sum(gemm_flops(b, *ks.shapes[k]) for k in GEMM_KINDS)
                            + decode_attention_flops(b, context + 1, hq, hd))  # fmt: skip
        by = ks.n_layers * (sum(gemm_bytes(b, *ks.shapes[k], w_bytes=wb) for k in GEMM_KINDS)
                            + decode_attention_bytes(b, context + 1, hq, hkv, hd))  # fmt: skip
        fl += gemm_flops(b, *ks.shapes["lm_head"])
        by += gemm_bytes(b, *ks.shapes["lm_head"], w_bytes=wb)
        t = s["total_ms"] / 1e3
        rows.append({"model": ks.model, "gpu": ks.system, "batch_size": int(b), "context": int(context),
                     "step_ms": s["total_ms"], "tensor_flop_util_pct": 100 * float(fl) / t / ks.peak_flops,
                     "dram_bw_util_pct": 100 * float(by) / t / ks.mem_bw,
                     "attention_share_pct": 100 * s["attention"] / s["total_ms"]})  # fmt: skip
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------- Figs. 2-3
def length_sweep(ks: KernelSet, batch_sizes, input_lens, output_lens) -> pd.DataFrame:
    """Composed E2E (`KernelSet.e2e`) over the product of the lists; points outside the measured grids are
    left out and listed in column `left_out` of an empty row (reason)."""
    rows = []
    for b in batch_sizes:
        for il in input_lens:
            for ol in output_lens:
                try:
                    r = ks.e2e(b, il, ol).iloc[0].to_dict()
                    r["left_out"] = ""
                except OutOfGridError as exc:
                    r = {
                        "batch_size": b,
                        "input_len": il,
                        "output_len": ol,
                        "left_out": str(exc).split(": ", 1)[1],
                    }
                rows.append({"model": ks.model, "gpu": ks.system, **r})
    df = pd.DataFrame(rows)
    for c in ("batch_size", "input_len", "output_len"):
        df[c] = df[c].astype(int)
    df["prefill_share"] = df["prefill_s"] / df["e2e_s"]
    return df


def plot_length_panels(axes, sweep: pd.DataFrame, il_fixed: int, ol_fixed: int, kind: str = "throughput"):
    """Two panels, vs input length (OL fixed) and vs output length (IL fixed): the composed throughput per batch
    size (`kind` "throughput", Fig. 2) or the prefill/decode split at the largest fully covered batch ("split",
    Fig. 3)."""
    ok = sweep[sweep["left_out"] == ""]
    bs = sorted(ok["batch_size"].unique())
    for col, (x, fixed_col, fixed) in enumerate((("input_len", "output_len", ol_fixed),
                                                 ("output_len", "input_len", il_fixed))):  # fmt: skip
        sub = ok[ok[fixed_col] == fixed]
        ax = axes[col]
        ax.set_title(f"{fixed_col.split('_')[0]} length {fixed}", fontsize=7)
        if kind == "throughput":
            for b in bs:
                g = sub[sub["batch_size"] == b].sort_values(x)
                color = batch_color(b)  # batch sizes: the sequential plasma colours of every figure
                ax.plot(g[x], g["throughput_tok_s"] / 1e3, marker="o", ms=3, color=color, label=f"B={b}")
            ax.set_xscale("log", base=2)
            ax.set_ylabel("throughput (k tok/s)")
        else:
            full = [b for b in bs if (sub["batch_size"] == b).sum() == sub[x].nunique()]
            bmax = max(full)
            g = sub[sub["batch_size"] == bmax].sort_values(x)
            pos = np.arange(len(g))
            ax.bar(pos, g["prefill_s"], color=COMPONENT_COLORS["prefill"], label="prefill")
            ax.bar(
                pos, g["decode_s"], bottom=g["prefill_s"], color=COMPONENT_COLORS["decode"], label="decode"
            )
            ax.set_xticks(pos, [str(v) for v in g[x]], rotation=45)
            ax.set_ylabel(f"E2E at B={bmax} (s)")
        ax.set_xlabel(x.replace("_len", " length") + " (tokens)")
    axes[0].legend(fontsize=6, frameon=False)


# ------------------------------------------------------------------------------------------- plateau by GPU
def plateau_by_gpu(
    sets: list[KernelSet], context: int, efficiency: float = 0.5
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per GPU: decode throughput B / step time over measured batch sizes at `context`, the batching efficiency
    T(B) / (B T(1)) (Eq. 13's ratio, decode only), and the summary: the first measured B where the efficiency falls
    below `efficiency` (the plateau onset), the attention share there, and the attention/GEMM crossover."""
    curves, summary = [], []
    for ks in sets:
        bs = [int(b) for b in ks.dec_b if context <= measured_contexts(ks, int(b))[-1]]
        st = ks.decode_step(np.array(bs, float), np.full(len(bs), float(context)))
        thr = st["batch_size"] / (st["total_ms"] / 1e3)
        eff = thr / (thr.iloc[0] * st["batch_size"])
        share = st["attention"] / st["total_ms"]
        curves.append(pd.DataFrame({"gpu": ks.system, "batch_size": bs, "step_ms": st["total_ms"],
                                    "decode_tok_s": thr, "efficiency": eff, "attention_share": share}))  # fmt: skip
        below = np.flatnonzero(eff.to_numpy() < efficiency)
        b_on = bs[below[0]] if len(below) else np.nan
        summary.append({"gpu": ks.system, "mem_bw_tb_s": ks.mem_bw / 1e12, "context": context,
                        "plateau_onset_batch": b_on,
                        "attention_share_at_onset": float(share.iloc[below[0]]) if len(below) else np.nan,
                        "crossover_batch": crossover_batch(ks, context),
                        "max_decode_tok_s": float(thr.max())})  # fmt: skip
    return pd.concat(curves, ignore_index=True), pd.DataFrame(summary)


def new_fig(*args, **kw):
    """`slimlib.experiments.outputs.plotting.new_figure` (re-exported for the notebook)."""
    return new_figure(*args, **kw)
