"""Figures of the evaluation notebook 06 (the MAPE evaluation of paper Sec. VII-A; no paper figure shows it):
one function per figure. Methods take the house colours and line styles (`plotting.method_style`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.experiments.outputs.plotting import (
    batch_axis,
    method_style,
    new_figure,
    scenario_styles,
)
from slimlib.model import method_label
from slimlib.registry.gpus import get_gpu

#: Panels of the predicted-vs-measured figure: (scenario, curve label or None for the scenario's last curve).
CURVE_PANELS = [
    ("same-curve", "opt-1.3b IL=242 OL=520"),
    ("same-curve", "llama-2-13b IL=250 OL=130"),
    ("output-length-transfer", None),
    ("model-transfer", None),
    ("combined", None),
    ("same-curve-offline", "llama-2-7b IL=161 OL=338"),
]
#: Methods drawn on the curves (the ablations are in the parity plot and the tables).
CURVE_METHODS = ("paper", "slim", "llmvisor-agg", "imai-ood-lr")


def resolve_panels(pred: pd.DataFrame, panels=CURVE_PANELS) -> list[tuple[str, str]]:
    """`panels` with each None curve replaced by the scenario's last test curve; panels without rows dropped."""
    out = []
    for scen, curve in panels:
        sel = pred[pred["scenario"] == scen]
        if not len(sel):
            continue
        curve = curve or sorted(sel["curve"].unique())[-1]
        if (sel["curve"] == curve).any():
            out.append((scen, curve))
    return out


def dense_curve(result, scenario: str, curve: str, methods=CURVE_METHODS, n: int = 64) -> pd.DataFrame:
    """Predictions of each fitted method for one test curve on a dense geometric grid of whole batch sizes (up to n
    points from the smallest to the largest measured B of the curve). Columns: method, batch_size, pred_throughput_tok_s."""
    pred = result.predictions
    test = pred[(pred["scenario"] == scenario) & (pred["curve"] == curve)]
    fold = test["fold"].iloc[0]
    base = test[test["method"] == test["method"].iloc[0]].sort_values("batch_size")
    train = training_rows(result, scenario, curve)
    b_all = np.concatenate([base["batch_size"].to_numpy(float), train["batch_size"].to_numpy(float)])
    grid = np.unique(np.round(np.geomspace(b_all.min(), b_all.max(), n)))  # whole batch sizes (requests)
    template = base.iloc[[0]].drop(columns=[c for c in base.columns if c.startswith("pred_")])
    template = template.drop(columns=["scenario", "method", "fold"])
    frame = pd.concat([template] * len(grid), ignore_index=True)
    frame["batch_size"] = grid
    if "max_num_seqs" in frame.columns:  # a curve's batch is the --max-num-seqs it runs at
        frame["max_num_seqs"] = grid
    rows = []
    for m in methods:
        model = result.models.get((scenario, m, fold))
        if model is None:
            continue
        p = model.predict(frame)
        rows.append(
            pd.DataFrame(
                {"method": m, "batch_size": grid, "pred_throughput_tok_s": p["pred_throughput_tok_s"]}
            )
        )
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["method", "batch_size"])


def training_rows(result, scenario: str, curve: str) -> pd.DataFrame:
    """The training rows of `curve` in the fold that tests it (empty in transfer scenarios, whose test curves
    are unseen)."""
    pred = result.predictions
    test = pred[(pred["scenario"] == scenario) & (pred["curve"] == curve)]
    fold = test["fold"].iloc[0]
    scen = next(s for s in result.scenarios if s.name == scenario)
    train = next(f.train for f in scen.folds if f.label == fold)
    return train[train["curve"] == curve]


def eval_curves(result, panels=CURVE_PANELS, methods=CURVE_METHODS, n: int = 64):
    """Measured test throughput (filled), training points of the same curve (open) and each method's prediction
    on a dense batch-size grid, one panel per (scenario, curve); the y axis spans 0 to 1.5x the largest measured
    throughput, so predictions outside it are cut. Non-physical predictions (<= 0) are masked, never drawn as a
    line crossing zero, and the panel names the methods masked. Returns (figure, dense predictions)."""
    pred = result.predictions
    chosen = resolve_panels(pred, panels)
    fig, axes = new_figure(2, 3, double=True, height=4.6)
    dense_all = []
    for ax, (scen, curve) in zip(axes.flat, chosen, strict=False):
        sel = pred[(pred["scenario"] == scen) & (pred["curve"] == curve)]
        test = sel[sel["method"] == sel["method"].iloc[0]].sort_values("batch_size")
        train = training_rows(result, scen, curve)
        dense = dense_curve(result, scen, curve, methods, n)
        dense_all.append(dense.assign(scenario=scen, curve=curve))
        hidden = []
        for m in methods:
            d = dense[dense["method"] == m]
            if len(d):
                color, ls = method_style(m)
                y = d["pred_throughput_tok_s"].to_numpy(float)
                physical = np.where(y > 0, y, np.nan)  # a prediction <= 0 is not drawn (the line breaks)
                if np.isnan(physical).sum() > np.isnan(y).sum():
                    hidden.append(m)
                ax.plot(d["batch_size"], physical / 1e3, color=color, ls=ls, lw=1.1, label=method_label(m))
        if hidden:
            ax.text(0.98, 0.02, "not drawn where <= 0:\n" + ", ".join(method_label(m) for m in hidden),
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=5)  # fmt: skip
        ax.plot(
            test["batch_size"],
            test["throughput_tok_s"] / 1e3,
            "o",
            color="black",
            ms=3,
            label="measured (test)",
        )
        if len(train):
            ax.plot(
                train["batch_size"], train["throughput_tok_s"] / 1e3, "o", mfc="none", mec="black", ms=4.5,
                mew=0.8, label="measured (training)",
            )  # fmt: skip
        else:
            ax.text(0.02, 0.96, "no training rows on this curve", transform=ax.transAxes, ha="left", va="top",
                    fontsize=5.5)  # fmt: skip
        top = float(
            max(test["throughput_tok_s"].max(), train["throughput_tok_s"].max() if len(train) else 0.0)
        )
        ax.set_ylim(0, 1.5 * top / 1e3)  # predictions far off the measured range (poles, negatives) are cut
        batch_axis(ax)
        ax.set_title(f"{scen}\n{curve}", fontsize=7)
        ax.set_xlabel("batch size cap B")
        ax.set_ylabel("throughput (k tok/s)")
    for ax in list(axes.flat)[len(chosen) :]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=5.5, loc="upper left")
    dense = pd.concat(dense_all, ignore_index=True) if dense_all else pd.DataFrame()
    return fig, dense


def panel_grid(n: int, ncols: int = 4) -> tuple[int, int]:
    """(rows, columns) of a grid with room for `n` panels, at most `ncols` wide."""
    cols = max(1, min(ncols, n))
    return -(-n // cols), cols


#: Predictions at or below zero are drawn at this fraction of the panel's lower limit (log axes cannot show them).
FLOOR = 10.0


def eval_parity(pred: pd.DataFrame):
    """Predicted against measured throughput of every test row, one panel per method (every method of `pred`),
    coloured by scenario. Non-physical predictions (<= 0) are drawn as crosses on the panel's floor and counted in
    the panel title; nothing is left out."""
    methods = list(dict.fromkeys(pred["method"]))
    scenarios = list(dict.fromkeys(pred["scenario"]))
    styles = scenario_styles(scenarios)
    nrows, ncols = panel_grid(len(methods))
    fig, axes = new_figure(nrows, ncols, double=True, height=2.1 * nrows + 0.5, squeeze=False)
    flat = list(axes.flat)
    for ax, method in zip(flat, methods, strict=False):
        m = pred[pred["method"] == method]
        bad = m["pred_throughput_tok_s"] <= 0
        for scen in dict.fromkeys(m["scenario"]):
            s = m[(m["scenario"] == scen) & ~bad]
            ax.loglog(s["throughput_tok_s"], s["pred_throughput_tok_s"], styles[scen][1], ms=2.5,
                      color=styles[scen][0], label=scen, alpha=0.8)  # fmt: skip
        if bad.any():
            ax.plot(m.loc[bad, "throughput_tok_s"], np.full(int(bad.sum()), FLOOR * 1.3), "|", ms=5, mew=0.8,
                    color="#777777", label="prediction <= 0 (drawn at the floor)")  # fmt: skip
        ax.plot([50, 3e4], [50, 3e4], "k-", lw=0.6)
        ax.set_xlim(50, 3e4)
        ax.set_ylim(FLOOR, 1e5)
        title = method_label(method) + (f" ({int(bad.sum())} predictions <= 0)" if bad.any() else "")
        ax.set_title(title, fontsize=6.5)
    handles: dict[str, object] = {}
    for ax in flat[: len(methods)]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    labels = list(handles)
    for ax in flat[len(methods) :]:
        ax.set_axis_off()
    fig.supxlabel("measured throughput (tok/s)", fontsize=8)
    fig.supylabel("predicted throughput (tok/s)", fontsize=8)
    legend = ([handles[k] for k in labels], labels)
    if len(flat) > len(methods):  # the legend fills the empty panels, clear of the axis label below
        leg = flat[len(methods)].legend(*legend, fontsize=6, loc="center left", bbox_to_anchor=(0.0, 0.5),
                                        frameon=False, title="scenario", title_fontsize=6.5)  # fmt: skip
        leg.set_in_layout(False)  # the empty panels' room, without widening their column
    else:
        fig.legend(*legend, fontsize=5.5, loc="outside upper center", ncol=min(len(labels), 5), frameon=False)
    return fig


def plateau_growth(dense: pd.DataFrame, pred: pd.DataFrame, method: str = "paper") -> pd.DataFrame:
    """Per drawn curve: measured and `method`-predicted throughput growth (%) from half the largest measured B
    to the largest, i.e. whether the prediction plateaus where the measurement does."""
    rows = []
    for (scen, curve), d in dense.groupby(["scenario", "curve"], sort=False):
        meas = pred[(pred["scenario"] == scen) & (pred["curve"] == curve) & (pred["method"] == method)]
        meas = meas.sort_values("batch_size")
        if len(meas) < 2:
            continue
        b_hi = float(meas["batch_size"].iloc[-1])
        lo_rows = meas[meas["batch_size"] <= b_hi / 2]
        if not len(lo_rows):
            continue
        lo = lo_rows.iloc[-1]
        hi = meas.iloc[-1]
        p = d[d["method"] == method].set_index("batch_size")["pred_throughput_tok_s"]
        if not len(p):
            continue
        p_lo = float(np.interp(np.log(lo["batch_size"]), np.log(p.index.to_numpy(float)), p.to_numpy(float)))
        p_hi = float(np.interp(np.log(b_hi), np.log(p.index.to_numpy(float)), p.to_numpy(float)))
        rows.append({"scenario": scen, "curve": curve, "b_from": float(lo["batch_size"]), "b_to": b_hi,
                     "measured_growth_pct": (hi["throughput_tok_s"] / lo["throughput_tok_s"] - 1) * 100,
                     "predicted_growth_pct": (p_hi / p_lo - 1) * 100})  # fmt: skip
    return pd.DataFrame(rows)


#: Bandwidth-efficiency parameters of the recommended model (`slimlib.model.slim`): fractions of the GPU
#: registry's memory bandwidth, bounded at 1.5 in the fit.
BANDWIDTH_EFFICIENCIES = ("eta_attn", "eta_w")


def slim_params_notes(params: pd.DataFrame, gpu: str = "h100-sxm-64gb") -> list[str]:
    """Notes of the `eval_slim_params` table: why a bandwidth efficiency (eta_attn, eta_w) can exceed 1. They are
    relative to the registry's bandwidth of `gpu`, which for the h100-sxm-64gb is derived (memory clock x an assumed
    4096-bit bus), not read from a data sheet, and uncertain by up to +25% (`slimlib.model.slim`,
    `slimlib.registry.gpus`). Empty when `params` has no such estimate above 1 on `gpu` (column ``gpu``, where
    given: an estimate fitted on another device is not explained by this one's bandwidth)."""
    eta = params[params["parameter"].isin(BANDWIDTH_EFFICIENCIES)]
    if "gpu" in eta.columns:
        eta = eta[eta["gpu"] == get_gpu(gpu).name]
    above = eta[eta["estimate"].astype(float) > 1.0]
    if above.empty:
        return []
    spec = get_gpu(gpu)
    where = above["scenario"] if "scenario" in above.columns else [""] * len(above)
    shown = ", ".join(
        f"{p} {v:.3f}" + (f" in {s}" if s else "")
        for p, v, s in zip(above["parameter"], above["estimate"], where, strict=True)
    )
    return [
        f"Bandwidth efficiencies above 1 ({shown}): eta_attn and eta_w are relative to the registry's memory "
        f"bandwidth of the {spec.name} ({spec.mem_bw / 1e12:.2f} TB/s), which is derived (memory clock x an assumed "
        "4096-bit bus), not from a data sheet, and uncertain by up to +25% (2.04 TB/s with a 5120-bit bus): an "
        "estimate up to 1.25 can be an efficiency below 1 of the true bandwidth (slimlib.model.slim; the fit "
        "bounds them at 1.5)."
    ]
