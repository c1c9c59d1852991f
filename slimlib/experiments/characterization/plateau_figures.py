"""Figures of the characterization notebooks 01-05 (paper Figs. 1-6, Table I): one function per figure.

Each function takes the tidy tables the notebook prepared and returns the matplotlib Figure; the notebook saves it
with `slimlib.experiments.outputs.plotting.save_figure`. Models and output lengths take the house colours and markers
(`slimlib.experiments.outputs.plotting.model_style`, `ol_style`); batch-size axes use plain ticks (`batch_axis`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.experiments.outputs.plotting import (
    COMPONENT_COLORS,
    DOUBLE_COLUMN_IN,
    REGIME_COLORS,
    REGIME_TEXT_COLOR,
    batch_axis,
    length_color,
    model_style,
    new_figure,
    ol_style,
    plain_log_axis,
)
from slimlib.model import roofline


def fig01_plateau(runs: pd.DataFrame, offline: pd.DataFrame, summary: pd.DataFrame, models: list[str]):
    """Fig. 1: online throughput and ITL against the batch cap with knees and KV-full marks, offline batch E2E."""
    fig, axes = new_figure(1, 3, double=True, height=2.5)
    for m in models:
        color, marker = model_style(m)
        g = runs[runs["model"] == m]
        s = summary[summary["model"] == m].iloc[0]
        b = g["batch_size"].to_numpy(float)
        axes[0].plot(b, g["throughput_tok_s"] / 1e3, marker=marker, color=color, label=m)
        axes[1].plot(b, g["mean_itl_ms"], marker=marker, color=color, label=m)
        for ax, col, scale in ((axes[0], "throughput_tok_s", 1e3), (axes[1], "mean_itl_ms", 1.0)):
            if not np.isnan(s.knee_batch):
                y = g.loc[g["batch_size"] == s.knee_batch, col].iloc[0] / scale
                ax.plot([s.knee_batch], [y], "o", ms=9, mfc="none", mec=color, mew=1.2)
            if not np.isnan(s.kv_full_batch):
                y = g.loc[g["batch_size"] == s.kv_full_batch, col].iloc[0] / scale
                ax.plot([s.kv_full_batch], [y], "x", ms=8, color="black", mew=1.4)
        o = offline[offline["model"] == m]
        if len(o):
            axes[2].plot(o["batch_size"], o["e2e_s"], marker=marker, color=color, label=m)
    for ax in axes:
        batch_axis(ax)
        ax.set_xlabel("batch size B (max_num_seqs)")
    axes[2].set_xlabel("batch size B (offline batch)")
    axes[0].set_ylabel("throughput (k tok/s)")
    axes[1].set_ylabel("mean ITL (ms)")
    axes[2].set_ylabel("batch E2E latency (s)")
    axes[0].set_title("(a) online throughput")
    axes[1].set_title("(b) online inter-token latency")
    axes[2].set_title("(c) offline E2E (IL=161, OL=338)")
    axes[0].plot([], [], "o", ms=7, mfc="none", mec="gray", label="knee")
    axes[0].plot([], [], "x", ms=7, color="black", label="KV cache full")
    axes[0].legend(loc="upper left", fontsize=6)
    return fig


def fig02_saturation(advisor: pd.DataFrame, knees: pd.DataFrame, models: list[str], output_lens: list):
    """Fig. 2 (left): throughput against the batch cap per model, one curve per output length, knees circled."""
    fig, axes = new_figure(1, len(models), double=True, height=2.3, sharey=False)
    axes = np.atleast_1d(axes)
    for ax, m in zip(axes, models, strict=True):
        for ol in output_lens:
            color, marker = ol_style(ol)
            g = advisor[(advisor["model"] == m) & (advisor["output_len"] == ol)]
            ax.plot(
                g["batch_size"], g["throughput_tok_s"] / 1e3, marker=marker, color=color, label=f"OL={ol:.0f}"
            )
            k = knees[(knees["model"] == m) & (knees["output_len"] == ol)].iloc[0]
            if not np.isnan(k.knee_batch):
                ax.plot([k.knee_batch], [k.knee_throughput_tok_s / 1e3], "o", ms=8, mfc="none", mec=color)
        batch_axis(ax)
        ax.set_title(m)
        ax.set_xlabel("batch size cap B")
    axes[0].set_ylabel("throughput (k tok/s)")
    axes[0].legend(loc="upper left", fontsize=6)
    return fig


def fig02_active_context(advisor: pd.DataFrame, offline: pd.DataFrame, models: list[str], output_lens: list):
    """Fig. 2 (right): throughput against the mean active context of Eq. 3. (a) online fixed-length runs, one
    small panel per model (shared x axis, each model its own throughput range so the small models' curves are not
    flattened; colour and marker = output length, the sequential length map), so the 16 curves do not overlap;
    (b) offline batch sweeps (colour = model), their IL and OL read from the data."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(DOUBLE_COLUMN_IN, 3.6), layout="constrained")
    grid = fig.add_gridspec(2, 3, width_ratios=[1, 1, 1.3])
    panels = [fig.add_subplot(grid[i // 2, i % 2]) for i in range(len(models[:4]))]
    for ax in panels[1:]:
        ax.sharex(panels[0])
    off_ax = fig.add_subplot(grid[:, 2])
    for ax, m in zip(panels, models, strict=False):
        for ol in output_lens:
            g = advisor[(advisor["model"] == m) & (advisor["output_len"] == ol)]
            color, marker = ol_style(ol)
            ax.plot(g["active_ctx_mean"], g["throughput_tok_s"] / 1e3, marker=marker, ms=2.5, ls="-", lw=0.8,
                    color=color, label=f"OL={ol:.0f}")  # fmt: skip
        ax.set_title(m, fontsize=7)
        plain_log_axis(ax, "x", subs=(1.0,))
    for ax in panels[-2:]:
        ax.set_xlabel("mean active context A (tokens)", fontsize=7)
    for ax in panels[::2]:
        ax.set_ylabel("throughput (k tok/s)", fontsize=7)
    panels[0].legend(fontsize=5.5, loc="upper left")
    for name, g in offline.groupby("model", sort=True):
        m = str(name)
        color, marker = model_style(m)
        off_ax.plot(g["active_ctx_mean"], g["throughput_tok_s"] / 1e3, marker=marker, color=color, label=m)
    plain_log_axis(off_ax, "x", subs=(1.0,))
    off_ax.set_xlabel("mean active context A (tokens, Eq. 3)")
    off_ax.set_ylabel("throughput (k tok/s)")
    lengths = ""
    if {"input_len", "output_len"} <= set(offline.columns):
        il, ol = (sorted({f"{v:.0f}" for v in offline[c].dropna()}) for c in ("input_len", "output_len"))
        lengths = f" (IL={'/'.join(il)}, OL={'/'.join(ol)})"
    off_ax.set_title(f"(b) offline batch sweeps{lengths}", fontsize=7)
    off_ax.legend(fontsize=6, loc="upper left")
    fig.suptitle("(a) online, fixed lengths (advisor runs), one panel per model", fontsize=7)
    return fig


def fig03_prefill_decode(sweeps: pd.DataFrame, models: list[str]):
    """Fig. 3: decode share of prefill+decode time and absolute phase times against the batch size."""
    fig, axes = new_figure(1, 2, double=True, height=2.5)
    for m in models:
        color, marker = model_style(m)
        g = sweeps[sweeps["model"] == m]
        axes[0].plot(g["batch_size"], 100 * g["decode_share"], marker=marker, color=color, label=m)
        axes[1].plot(g["batch_size"], g["decode_s"], marker=marker, color=color, label=f"{m} decode")
        axes[1].plot(
            g["batch_size"],
            g["prefill_s"],
            marker=marker,
            mfc="none",
            ls="--",
            color=color,
            label=f"{m} prefill",
        )
    for ax in axes:
        batch_axis(ax)
        ax.set_xlabel("batch size B (IL=161, OL=338)")
    plain_log_axis(axes[1], "y")
    axes[0].set_ylabel("decode share of prefill+decode (%)")
    axes[1].set_ylabel("phase time (s)")
    axes[0].set_title("(a) decode share")
    axes[1].set_title("(b) absolute time: decode (solid), prefill (dashed, open)")
    axes[0].legend(loc="lower left")
    return fig


#: Telemetry column -> the name the Fig. 4 proxy table gives it (what it measures: nvidia-smi duty cycles).
PROXY_COLUMNS = {"sm_mean_pct": "sm_duty_mean_pct", "dram_mean_pct": "mem_duty_mean_pct"}


def flag_throttled(tel: pd.DataFrame, share: float = 0.95) -> pd.DataFrame:
    """`tel` with ``throttled`` = mean SM clock below `share` of the highest mean SM clock in the table."""
    out = tel.copy()
    top = float(out["sm_clock_mean_mhz"].max())
    out["throttled"] = out["sm_clock_mean_mhz"] < share * top
    return out


def fig04_gpu_utilization_proxy(tel: pd.DataFrame, models: list[str]):
    """Fig. 4 proxy: nvidia-smi dmon duty cycles (SM, memory; columns renamed by `PROXY_COLUMNS`) and board power
    against the batch cap; clock-throttled runs (column ``throttled``, `flag_throttled`) are ringed."""
    fig, axes = new_figure(1, 3, double=True, height=2.9)
    cols = ("sm_duty_mean_pct", "mem_duty_mean_pct", "power_mean_w")
    for m in models:
        color, marker = model_style(m)
        g = tel[tel["model"] == m]
        for ax, col in zip(axes, cols, strict=True):
            ax.plot(g["batch_size"], g[col], marker=marker, color=color, label=m)
            hot = g[g["throttled"]]
            if len(hot):
                ax.plot(hot["batch_size"], hot[col], "o", ms=9, mfc="none", mec="black", mew=0.9)
    if tel["throttled"].any():
        clocks = ", ".join(
            f"{c:.0f}" for c in sorted(tel.loc[tel["throttled"], "sm_clock_mean_mhz"].unique())
        )
        axes[0].plot([], [], "o", ms=7, mfc="none", mec="black", label=f"clock-throttled run ({clocks} MHz)")
    for ax in axes:
        batch_axis(ax)
        ax.set_xlabel("batch size cap B")
    axes[0].set_ylim(0, 105)
    axes[1].set_ylim(0, 105)
    axes[0].set_ylabel("SM duty cycle (% of time a kernel runs)")
    axes[1].set_ylabel("memory duty cycle (% of time busy)")
    axes[2].set_ylabel("mean board power (W)")
    axes[0].set_title("(a) SM duty cycle")
    axes[1].set_title("(b) memory duty cycle")
    axes[2].set_title("(c) board power")
    # one legend below the panels: inside (c) it covered the power curves
    fig.legend(
        *axes[0].get_legend_handles_labels(), loc="outside lower center", fontsize=6, ncol=5, frameon=False
    )
    fig.suptitle(
        "nvidia-smi dmon duty cycles, not the paper's Tensor-Core / SM-issue / DRAM-read counters", fontsize=7
    )
    return fig


def fig05_decode_breakdown(breakdown: pd.DataFrame, breakdown_context: int):
    """Fig. 5: stacked decode-step shares at one context, attention share against batch and context."""
    fig, axes = new_figure(1, 2, double=True, height=2.5)
    at = breakdown[breakdown["kv_cache_size"] == breakdown_context]
    x = np.arange(len(at))
    bottom = np.zeros(len(at))
    parts = [
        ("attention_share", "attention", COMPONENT_COLORS["attention"]),
        ("gemm_share", "dense GEMMs (QKV/out proj., FFN)", COMPONENT_COLORS["gemm"]),
        ("other_share", "other (norms, RoPE, act., add)", COMPONENT_COLORS["other"]),
    ]
    for col, label, color in parts:
        axes[0].bar(x, 100 * at[col].to_numpy(), bottom=bottom, color=color, label=label, width=0.7)
        bottom += 100 * at[col].to_numpy()
    axes[0].set_xticks(x, [str(b) for b in at["batch_size"]])
    axes[0].set_xlabel(f"batch size B (KV context C = {breakdown_context} tokens/request)")
    axes[0].set_ylabel("share of per-layer decode time (%)")
    axes[0].set_ylim(0, 122)
    axes[0].set_yticks([0, 20, 40, 60, 80, 100])
    axes[0].set_title("(a) decode-step breakdown vs batch size")
    axes[0].legend(loc="upper center", fontsize=5.5, ncol=3, handlelength=1.0, columnspacing=0.8)
    for c, g in breakdown.groupby("kv_cache_size", sort=True):  # context: the sequential length colours
        axes[1].plot(g["batch_size"], 100 * g["attention_share"], marker="o", color=length_color(float(c)),
                     label=f"C={c}")  # fmt: skip
    axes[1].axhline(50, color="gray", lw=0.6, ls=":")
    batch_axis(axes[1])
    axes[1].set_xlabel("batch size B")
    axes[1].set_ylabel("attention share (%)")
    axes[1].set_title("(b) attention share vs batch and context")
    axes[1].legend(fontsize=6, loc="upper left")
    return fig


def fig06_attention_roofline(table1: pd.DataFrame, gpu, batch_sizes: list[int], contexts: list[int]):
    """Fig. 6: decode attention on the roofline of `gpu` (analytic intensity, measured time) and its DRAM share."""
    import matplotlib.pyplot as plt

    fig, axes = new_figure(1, 2, double=True, height=2.6)
    ai_grid, roof = roofline.roofline_curve(gpu.peak_flops, gpu.mem_bw, ai_min=0.5, ai_max=2e3)
    ridge = float(roofline.ridge_point(gpu.peak_flops, gpu.mem_bw))
    ax = axes[0]
    ax.loglog(ai_grid, roof / 1e12, color="black", lw=1.2)
    ax.axvspan(ai_grid[0], ridge, color=REGIME_COLORS["memory-bound"], alpha=0.25, lw=0)
    ax.axvspan(ridge, ai_grid[-1], color=REGIME_COLORS["compute-bound"], alpha=0.25, lw=0)
    ax.text(0.6, 0.08, "memory-bound", fontsize=6, color=REGIME_TEXT_COLOR)
    ax.text(ridge * 1.5, gpu.peak_flops / 1e12 * 1.3, "compute-bound", fontsize=6, color=REGIME_TEXT_COLOR)
    bcolors = dict(
        zip(batch_sizes, plt.get_cmap("plasma")(np.linspace(0, 0.85, len(batch_sizes))), strict=True)
    )
    sizes = {c: 8 + 30 * i / max(len(contexts) - 1, 1) for i, c in enumerate(contexts)}
    for b, g in table1.groupby("batch_size", sort=True):
        ax.scatter(
            g["ai_flop_per_byte"],
            g["achieved_tflop_s"],
            s=[sizes[c] for c in g["kv_cache_size"]],
            color=bcolors[b],
            label=f"B={b}",
            zorder=3,
            edgecolor="black",
            linewidth=0.3,
        )
    ax.set_xlim(ai_grid[0], ai_grid[-1])
    ax.set_ylim(0.05, gpu.peak_flops / 1e12 * 4)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable / achieved TFLOP/s")
    ax.set_title(f"(a) decode attention on the {gpu.name} roofline")
    ax.legend(fontsize=5.5, ncol=2, loc="lower right", framealpha=0.8, frameon=True)
    ax = axes[1]
    for b, g in table1.groupby("batch_size", sort=True):
        ax.plot(g["kv_cache_size"], 100 * g["bw_util"], marker="o", color=bcolors[b], label=f"B={b}")
    ax.axhline(100, color="black", lw=0.8)
    ax.set_xlabel("KV context C per request (tokens)")
    ax.set_ylabel("achieved DRAM bandwidth (% of peak)")
    ax.set_title("(b) analytic KV traffic / measured time")
    ax.set_ylim(0, 135)
    ax.set_yticks([0, 20, 40, 60, 80, 100])
    ax.legend(fontsize=5.5, ncol=5, loc="upper left", handlelength=1.0, columnspacing=0.6)
    return fig
