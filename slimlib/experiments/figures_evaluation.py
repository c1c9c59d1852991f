"""Figures of the evaluation notebook 06 (MAPE evaluation, not a paper figure): one function per figure."""

from __future__ import annotations

import pandas as pd

from slimlib.experiments.plotting import new_figure

#: Panels of the predicted-vs-measured figure: (scenario, curve label or None for the scenario's last curve).
CURVE_PANELS = [
    ("same-curve", "opt-1.3b IL=242 OL=520"),
    ("same-curve", "llama-2-13b IL=250 OL=130"),
    ("output-length-transfer", None),
    ("model-transfer", None),
    ("combined", None),
    ("same-curve-offline", "llama-2-7b IL=161 OL=338"),
]


def eval_curves(pred: pd.DataFrame, panels=CURVE_PANELS):
    """Predicted against measured throughput on test curves, one panel per (scenario, curve)."""
    fig, axes = new_figure(2, 3, double=True, height=4.4)
    styles = {"SLIM": ("C0", "-"), "SLIM-extended": ("C4", "--"), "IMAI OOD-LR": ("C2", ":")}
    for ax, (scen, curve) in zip(axes.flat, panels, strict=False):
        sel = pred[pred["scenario"] == scen]
        if curve is None:
            curve = sorted(sel["curve"].unique())[-1]
        sel = sel[sel["curve"] == curve].sort_values("batch_size")
        first = sel[sel["method"] == "SLIM"]
        ax.plot(first["batch_size"], first["throughput_tok_s"] / 1e3, "ko", ms=3, label="measured (test)")
        for method, (color, ls) in styles.items():
            m = sel[sel["method"] == method]
            ax.plot(
                m["batch_size"], m["pred_throughput_tok_s"] / 1e3, color=color, ls=ls, lw=1.2, label=method
            )
        ax.set_xscale("log", base=2)
        ax.set_title(f"{scen}\n{curve}", fontsize=7)
        ax.set_xlabel("batch size cap B")
        ax.set_ylabel("throughput (k tok/s)")
    axes.flat[0].legend(fontsize=6, loc="upper left")
    return fig


def eval_parity(pred: pd.DataFrame):
    """Predicted against measured throughput of every test row, one panel per method, coloured by scenario."""
    methods = list(dict.fromkeys(pred["method"]))
    fig, axes = new_figure(2, 3, double=True, height=4.6)
    for ax, method in zip(axes.flat, methods, strict=False):
        m = pred[pred["method"] == method]
        for i, scen in enumerate(dict.fromkeys(m["scenario"])):
            s = m[m["scenario"] == scen]
            ax.loglog(
                s["throughput_tok_s"],
                s["pred_throughput_tok_s"].clip(lower=10),
                "o",
                ms=2.5,
                color=f"C{i}",
                label=scen,
                alpha=0.8,
            )
        ax.plot([50, 3e4], [50, 3e4], "k-", lw=0.6)
        ax.set_xlim(50, 3e4)
        ax.set_ylim(10, 1e5)
        ax.set_title(method, fontsize=8)
        ax.set_xlabel("measured throughput (tok/s)")
        ax.set_ylabel("predicted (tok/s)")
    axes.flat[0].legend(fontsize=5, loc="upper left")
    return fig
