"""Figures of notebook 11 (the CPU engine): analogs of the paper's Figs. 1-3 on vLLM's CPU build, random weights.

One function per figure; each takes ``engine-cpu-medians`` (one row per configuration; a runs table is read at
repeat 0) and returns the Figure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.experiments.characterization.knees import knee_batch
from slimlib.experiments.outputs.plotting import (
    ENGINE_MODEL_STYLES,
    batch_axis,
    length_color,
    model_style,
    new_figure,
    plain_log_axis,
)

__all__ = ["fig01_engine_plateau", "fig02_engine_saturation", "fig03_engine_phases"]

#: Token lengths of the engine campaign (input and output alike) span this range of the sequential length colours.
_LENGTH_RANGE = (32.0, 2048.0)
_LENGTH_MARKERS = ["v", "<", "o", "P", "s", "X", "^", "*", "D"]  # one per power of two from 32


def length_style(length: float) -> tuple[str, str]:
    """(colour, marker) of an input or output length in the engine figures: the house's sequential length colours
    (viridis, short dark, long light) over 32-2048 tokens, a marker per power of two; IL and OL of one value look
    alike (a length is a length)."""
    i = int(round(np.log2(max(float(length), 1.0)) - 5))
    return length_color(length, *_LENGTH_RANGE), _LENGTH_MARKERS[i % len(_LENGTH_MARKERS)]


def engine_model_style(model: str) -> tuple[str, str]:
    """(colour, marker) of a model of the engine family (distinct per size), else the house style."""
    return ENGINE_MODEL_STYLES.get(model) or model_style(model)


def _row_legend(axes_row, **kw) -> None:
    """One legend on the row's first panel listing every series drawn in any panel of the row (by label, in
    increasing length), so a length drawn only for some models is still named."""
    handles: dict[str, object] = {}
    for ax in axes_row:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    labels = sorted(handles, key=lambda lab: float(lab.split("=")[1].split()[0]))
    axes_row[0].legend([handles[k] for k in labels], labels, **kw)


def _first(runs: pd.DataFrame) -> pd.DataFrame:
    """One run per configuration of a runs table (the first session's first repeat); a medians table as it is."""
    if "session" in runs.columns:
        runs = runs[runs["session"] == runs["session"].iloc[0]]
    if "repeat" in runs.columns:
        runs = runs[runs["repeat"].astype(int) == 0]
    return runs.sort_values("batch_size")


def _spread(g: pd.DataFrame, col: str) -> np.ndarray | None:
    """Lower and upper distances to the repeats' minimum and maximum of `col` (medians tables carry ``<col>_min``
    and ``<col>_max``); None where the table has no spread."""
    if f"{col}_min" not in g.columns or f"{col}_max" not in g.columns:
        return None
    return np.vstack([g[col] - g[f"{col}_min"], g[f"{col}_max"] - g[col]]).clip(min=0.0)


def fig01_engine_plateau(runs: pd.DataFrame, models: list[str], il: int = 128, ol: int = 256):
    """Fig. 1 analog: throughput and mean request E2E against the batch cap, one line per model, with the repeats'
    range (a medians table's min and max) as bars; a circle marks each curve's knee (`knee_batch`), and a curve
    without one within the sweep says so in the legend."""
    fig, axes = new_figure(1, 2, double=True, height=2.5)
    r = _first(runs)
    for m in models:
        color, marker = engine_model_style(m)
        g = r[(r["model"] == m) & (r["input_len"] == il) & (r["output_len"] == ol)].sort_values("batch_size")
        knee = knee_batch(g["batch_size"], g["throughput_tok_s"]) if len(g) > 1 else float("nan")
        label = (
            f"{m} (knee B = {knee:.0f})"
            if np.isfinite(knee)
            else f"{m} (no knee up to B = {g['batch_size'].max():.0f})"
        )
        for ax, col in ((axes[0], "throughput_tok_s"), (axes[1], "e2e_s")):
            ax.errorbar(g["batch_size"], g[col], yerr=_spread(g, col), marker=marker, color=color, capsize=1.5,
                        elinewidth=0.6, label=label if col == "throughput_tok_s" else m)  # fmt: skip
        if np.isfinite(knee):
            at = g[g["batch_size"] == knee]
            axes[0].plot(at["batch_size"], at["throughput_tok_s"], "o", ms=7, mfc="none", mec=color, mew=1.0)
    for ax in axes:
        batch_axis(ax)
        ax.set_xlabel(f"batch cap B (IL={il}, OL={ol})")
    plain_log_axis(axes[1], "y")
    axes[0].set_ylabel("throughput (tok/s)")
    axes[1].set_ylabel("mean request E2E (s)")
    axes[0].set_title("(a) throughput against the batch cap")
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
            color, marker = length_style(o)
            c = g[(g["input_len"] == il) & (g["output_len"] == o)]
            axes[0, j].plot(
                c["batch_size"], c["throughput_tok_s"], marker=marker, color=color, label=f"OL={o}"
            )
        for i in sorted(g.loc[g["output_len"] == ol, "input_len"].unique()):
            color, marker = length_style(i)
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
    for row in (0, 1):
        _row_legend(axes[row], fontsize="x-small", loc="upper left")
    return fig


def fig03_engine_phases(runs: pd.DataFrame, model: str, ol: int = 256):
    """Fig. 3 analog: time to first token and the decode time after it (E2E - TTFT) against B, by input length,
    for one model (client-side times: TTFT includes the wait for a prefill slot)."""
    fig, axes = new_figure(1, 2, double=True, height=2.5)
    r = _first(runs)
    g = r[(r["model"] == model) & (r["output_len"] == ol)]
    for i in sorted(g["input_len"].unique()):
        color, marker = length_style(i)
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
