"""Figures of the GPU-kit notebook 08 (paper Figs. 4-8, Table I from the kit's own engine): one per function.

`source` is the figure text naming the campaigns (GPU, engine) from their manifests.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from slimlib.experiments.outputs.plotting import (
    COMPONENT_COLORS,
    REGIME_COLORS,
    batch_color,
    category_color,
    new_figure,
)
from slimlib.kit import analysis as an
from slimlib.model import roofline


def wrapped(text: str, width: int = 60) -> str:
    """`text` broken into lines of at most `width` characters, for axis titles."""
    return textwrap.fill(text, width)


def dram_read_column(phase: pd.DataFrame) -> tuple[pd.Series, str]:
    """DRAM read % of peak where measured (else read+write) and the matching axis name."""
    read = phase["dram_read_pct"].where(phase["dram_read_pct"].notna(), phase["dram_pct"])
    name = (
        "DRAM read (% of peak BW)" if phase["dram_read_pct"].notna().all() else "DRAM read+write (% of peak)"
    )
    return read, name


def fig04_kit_decode_counters(phase: pd.DataFrame, source: str):
    """Fig. 4: duration-weighted tensor-pipe activity, SM issue and DRAM read per profiled point."""
    fig, axes = new_figure(1, 3, double=True, height=2.6, sharey=True)
    x = np.arange(len(phase))
    read, read_name = dram_read_column(phase)
    for ax, (vals, name, color) in zip(
        axes,
        [
            (phase["tensor_pct"], "tensor-pipe activity (%)", COMPONENT_COLORS["tensor"]),
            (phase["sm_issue_pct"], "SM issue (%)", COMPONENT_COLORS["sm_issue"]),
            (read, read_name, COMPONENT_COLORS["dram"]),
        ],
        strict=True,
    ):
        ax.bar(x, vals, color=color, width=0.7)
        if name.startswith("DRAM read (") and phase["dram_read_pct_max"].notna().any():
            ax.scatter(
                x,
                phase["dram_read_pct_max"],
                marker="_",
                s=60,
                color="black",
                label="max over kernels",
                zorder=3,
            )
            ax.legend(loc="upper left")
        ax.set_xticks(x, phase["label"], rotation=60, ha="right", fontsize=5.5)
        ax.set_title(name)
        ax.set_ylim(0, 110)
    axes[0].set_ylabel("duration-weighted over the decode step (%)")
    fig.suptitle(wrapped(f"whole decode step (ncu), {source}", 110), fontsize=7)
    return fig


def fig05_kit_kernel_shares(shares: pd.DataFrame, source: str):
    """Fig. 5: decode-step time by kernel category, points sorted by active context."""
    fig, ax = new_figure(double=True, height=2.6)
    x = np.arange(len(shares))
    bottom = np.zeros(len(shares))
    names = {
        "attention": "attention",
        "gemm": "GEMM (projections, FFN)",
        "norm_elementwise": "norm / elementwise",
        "other": "other",
    }
    for cat in an.SHARE_CATEGORIES:
        color = COMPONENT_COLORS[cat]
        vals = 100 * shares[cat].fillna(0).to_numpy()
        ax.bar(x, vals, bottom=bottom, color=color, width=0.7, label=names[cat])
        bottom += vals
    ax.set_xticks(
        x,
        [f"{lab}\nA={a:.0f}" for lab, a in zip(shares["label"], shares["active_context"], strict=True)],
        fontsize=5.5,
        rotation=45,
        ha="right",
    )
    ax.set_ylabel("share of decode time (%)")
    ax.set_ylim(0, 125)
    ax.set_yticks([0, 20, 40, 60, 80, 100])
    ax.legend(ncol=4, loc="upper center")
    ax.set_title(wrapped(f"decode-step time by kernel category, sorted by active context A; {source}", 110))
    return fig


def fig06_kit_attention_roofline(table1: pd.DataFrame, source: str):
    """Fig. 6: the decode attention kernel on the roofline of each GPU in `table1` (ncu counters)."""
    fig, ax = new_figure(height=2.8)
    gpus = sorted(table1["gpu"].unique())
    pf, bw = an.gpu_peaks_lookup("peak_flops"), an.gpu_peaks_lookup("mem_bw")
    lo = min(0.1, table1["ai_flop_per_byte"].min() / 2)
    for i, g in enumerate(gpus):
        if np.isfinite(pf(g)) and np.isfinite(bw(g)):
            ai_grid, roof = roofline.roofline_curve(pf(g), bw(g), ai_min=lo, ai_max=1e4)
            ax.loglog(
                ai_grid, roof / 1e12, color="black", lw=1.0, ls=["-", "--", ":"][i % 3], label=f"roof {g}"
            )
            ridge = float(roofline.ridge_point(pf(g), bw(g)))
            ax.axvspan(lo, ridge, color=REGIME_COLORS["memory-bound"], alpha=0.12, lw=0)
            ax.axvspan(ridge, 1e4, color=REGIME_COLORS["compute-bound"], alpha=0.12, lw=0)
    colors = {b: batch_color(b) for b in sorted(table1["batch_size"].unique())}
    for b, g in table1.groupby("batch_size", sort=True):
        ax.scatter(
            g["ai_flop_per_byte"],
            g["achieved_tflop_s"],
            color=colors.get(b, "gray"),
            label=f"B={b}",
            zorder=3,
            edgecolor="black",
            linewidth=0.3,
            s=18,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/DRAM byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(wrapped(f"decode attention, {source}", 55), fontsize=6)
    ax.legend(fontsize=5.5, loc="lower right", ncol=2)
    return fig


#: The two attention-memory figures: output name -> ((column, legend), ...), y label.
ATTENTION_MEMORY_FIGURES = {
    "fig07_kit_cache_hit_rates": (
        [("l1_hit_pct", "L1/TEX hit rate"), ("l2_hit_pct", "L2 hit rate")],
        "hit rate (%)",
    ),
    "fig08_kit_stalls_occupancy": (
        [("long_scoreboard_pct", "long-scoreboard stalls"), ("occupancy_pct", "occupancy")],
        "% of warp cycles / of max. warps",
    ),
}


def kit_attention_memory(mem: pd.DataFrame, name: str, source: str):
    """Fig. 7 (cache hit rates) or Fig. 8 (stalls, occupancy) of the attention kernel against active context."""
    pairs, ylabel = ATTENTION_MEMORY_FIGURES[name]
    fig, ax = new_figure(height=2.4)
    for (col, label), color, marker in zip(
        pairs, [category_color(0), category_color(1)], ["o", "s"], strict=True
    ):
        ax.plot(mem["active_context"], mem[col], marker=marker, color=color, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("active context at the profiled step (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(wrapped(f"decode attention, {source}", 55), fontsize=6)
    ax.legend()
    return fig
