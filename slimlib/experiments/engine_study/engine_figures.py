"""Figures of notebook 11 (the CPU engine): analogs of the paper's Figs. 1-3 on vLLM's CPU build, random weights.

One function per figure; each takes ``engine-cpu-medians`` (one row per configuration; a runs table is read at
repeat 0) and returns the Figure.
"""

from __future__ import annotations

import pandas as pd

from slimlib.experiments.outputs.plotting import (
    HOUSE_COLORS,
    batch_axis,
    model_style,
    new_figure,
    ol_style,
    plain_log_axis,
)
from slimlib.registry.engine_models import ENGINE_MODELS

__all__ = ["fig01_engine_plateau", "fig02_engine_saturation", "fig03_engine_phases"]

_IL_STYLES = {128: ("#0072B2", "o"), 512: ("#D55E00", "s"), 1024: ("#009E73", "^"), 2048: ("#CC79A7", "D")}
_OL_STYLES = {32: ("#E69F00", "v"), 64: ("#009E73", "<"), 128: ("#56B4E9", "P"), 256: ("#0072B2", "X"),
              512: ("#D55E00", "*")}  # fmt: skip
_MODEL_STYLES = {m: (HOUSE_COLORS[i], "osD^"[i % 4]) for i, m in enumerate(ENGINE_MODELS)}


def engine_model_style(model: str) -> tuple[str, str]:
    """(colour, marker) of a model of the engine family (distinct per size), else the house style."""
    return _MODEL_STYLES.get(model) or model_style(model)


def _first(runs: pd.DataFrame) -> pd.DataFrame:
    """One run per configuration of a runs table (the first session's first repeat); a medians table as it is."""
    if "session" in runs.columns:
        runs = runs[runs["session"] == runs["session"].iloc[0]]
    if "repeat" in runs.columns:
        runs = runs[runs["repeat"].astype(int) == 0]
    return runs.sort_values("batch_size")


def fig01_engine_plateau(runs: pd.DataFrame, models: list[str], il: int = 128, ol: int = 256):
    """Fig. 1 analog: throughput and mean request E2E against the batch cap, one line per model."""
    fig, axes = new_figure(1, 2, double=True, height=2.5)
    r = _first(runs)
    for m in models:
        color, marker = engine_model_style(m)
        g = r[(r["model"] == m) & (r["input_len"] == il) & (r["output_len"] == ol)]
        axes[0].plot(g["batch_size"], g["throughput_tok_s"], marker=marker, color=color, label=m)
        axes[1].plot(g["batch_size"], g["e2e_s"], marker=marker, color=color, label=m)
    for ax in axes:
        batch_axis(ax)
        ax.set_xlabel(f"batch cap B (IL={il}, OL={ol})")
    plain_log_axis(axes[1], "y")
    axes[0].set_ylabel("throughput (tok/s)")
    axes[1].set_ylabel("mean request E2E (s)")
    axes[0].set_title("(a) throughput plateau")
    axes[1].set_title("(b) latency keeps growing")
    axes[0].legend(loc="upper left", fontsize="small")
    return fig


def fig02_engine_saturation(runs: pd.DataFrame, models: list[str], il: int = 128, ol: int = 256):
    """Fig. 2 analog: throughput against B by output length (IL fixed, top) and by input length (OL fixed,
    bottom), one column per model; the bottom row is the input-length panel the public data lack."""
    fig, axes = new_figure(2, len(models), double=True, height=4.6, squeeze=False)
    r = _first(runs)
    for j, m in enumerate(models):
        g = r[r["model"] == m]
        for o in sorted(g.loc[g["input_len"] == il, "output_len"].unique()):
            color, marker = _OL_STYLES.get(int(o)) or ol_style(o)
            c = g[(g["input_len"] == il) & (g["output_len"] == o)]
            axes[0, j].plot(
                c["batch_size"], c["throughput_tok_s"], marker=marker, color=color, label=f"OL={o}"
            )
        for i in sorted(g.loc[g["output_len"] == ol, "input_len"].unique()):
            color, marker = _IL_STYLES.get(int(i), ("#000000", "D"))
            c = g[(g["input_len"] == i) & (g["output_len"] == ol)]
            axes[1, j].plot(
                c["batch_size"], c["throughput_tok_s"], marker=marker, color=color, label=f"IL={i}"
            )
        axes[0, j].set_title(m, fontsize="small")
        for row in (0, 1):
            batch_axis(axes[row, j])
        axes[1, j].set_xlabel("batch cap B")
    axes[0, 0].set_ylabel(f"throughput (tok/s), IL={il}")
    axes[1, 0].set_ylabel(f"throughput (tok/s), OL={ol}")
    axes[0, 0].legend(fontsize="x-small", loc="upper left")
    axes[1, 0].legend(fontsize="x-small", loc="upper left")
    return fig


def fig03_engine_phases(runs: pd.DataFrame, model: str, ol: int = 256):
    """Fig. 3 analog: time to first token and the decode time after it (E2E - TTFT) against B, by input length,
    for one model (client-side times: TTFT includes the wait for a prefill slot)."""
    fig, axes = new_figure(1, 2, double=True, height=2.5)
    r = _first(runs)
    g = r[(r["model"] == model) & (r["output_len"] == ol)]
    for i in sorted(g["input_len"].unique()):
        color, marker = _IL_STYLES.get(int(i), ("#000000", "D"))
        c = g[g["input_len"] == i]
        ttft = c["mean_ttft_ms"] / 1000.0
        decode = c["e2e_s"] - ttft
        axes[0].plot(c["batch_size"], 100 * decode / c["e2e_s"], marker=marker, color=color, label=f"IL={i}")
        axes[1].plot(c["batch_size"], decode, marker=marker, color=color, label=f"IL={i} decode")
        axes[1].plot(
            c["batch_size"], ttft, marker=marker, mfc="none", ls="--", color=color, label=f"IL={i} TTFT"
        )
    for ax in axes:
        batch_axis(ax)
        ax.set_xlabel(f"batch cap B ({model}, OL={ol})")
    plain_log_axis(axes[1], "y")
    axes[0].set_ylabel("decode share of E2E (%)")
    axes[1].set_ylabel("time (s)")
    axes[0].set_title("(a) decode share")
    axes[1].set_title("(b) decode (solid), TTFT (dashed, open)")
    axes[0].legend(loc="lower left", fontsize="small")
    return fig
