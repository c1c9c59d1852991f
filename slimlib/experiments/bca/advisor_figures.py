"""Figures of the advisor notebook 07 (the SLIM-BCA evaluation of paper Sec. VII-B, which has no figure in the
paper): one function per figure. Both advisor variants are drawn and labelled: faithful SLIM-BCA (Eq. 13 on the
paper model) and the project variant (extended model + KV-memory constraint); see
`slimlib.experiments.bca.advisor_eval.ADVISOR_VARIANTS`."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from slimlib.experiments.outputs.plotting import (
    SLO_COLORS,
    batch_axis,
    category_color,
    new_figure,
    ol_style,
    plain_log_axis,
)

#: Marker of each advisor variant's B_cap on the curves (`bca_curves`; the measured best is an open square).
VARIANT_MARKERS = {"faithful": "+", "project": "x"}
VARIANT_LINES = {"faithful": "--", "project": "-"}
#: Marker of each advisor variant's quality series (`bca_quality_vs_effort`), so series that coincide stay
#: distinguishable (circles over squares).
EFFORT_MARKERS = {"faithful": "o", "project": "s"}


def bca_curves(curves: pd.DataFrame, rec: pd.DataFrame, slo: str = "tight"):
    """Measured throughput and in-engine latency curves per model (colour = output length) with each variant's
    B_cap for `slo` (+ faithful, x project) and the measured best configuration (square; the same ground truth for
    both variants, `advisor_eval.measured_feasible`). The latency is the mean time a request spends in the running
    batch by Little's law (`advisor_eval.measured_curves`), not a client-measured E2E."""
    models = sorted(curves["model"].unique())
    fig, axes = new_figure(2, len(models), double=True, height=3.8, sharex=True, squeeze=False)
    ol_show = sorted(curves["output_len"].unique())
    for j, m in enumerate(models):
        for ol in ol_show:
            c = curves[(curves["model"] == m) & (curves["output_len"] == ol)]
            color, marker = ol_style(ol)
            axes[0, j].plot(c["batch_size"], c["throughput_tok_s"] / 1e3, "-", marker=marker, ms=2, lw=0.8,
                            color=color, label=f"OL={ol:.0f}")  # fmt: skip
            axes[1, j].plot(
                c["batch_size"], c["measured_e2e_s"], "-", marker=marker, ms=2, lw=0.8, color=color
            )
            t = c.set_index("batch_size")
            sel = rec[(rec["model"] == m) & (rec["output_len"] == ol) & (rec["slo"] == slo)]
            for variant, r in sel.set_index("variant").iterrows():
                mk = VARIANT_MARKERS.get(variant, "*")
                if variant == sel["variant"].iloc[0] and r["b_true"] > 0:  # one ground truth: draw it once
                    axes[0, j].plot(r["b_true"], t.loc[r["b_true"], "throughput_tok_s"] / 1e3, "s", ms=6,
                                    mfc="none", mec=color, mew=0.9)  # fmt: skip
                if r["b_cap"] > 0:
                    axes[0, j].plot(r["b_cap"], t.loc[r["b_cap"], "throughput_tok_s"] / 1e3, mk, ms=5,
                                    color="black", mew=0.9)  # fmt: skip
                    axes[1, j].plot(
                        r["b_cap"], t.loc[r["b_cap"], "measured_e2e_s"], mk, ms=5, color="black", mew=0.9
                    )
            if len(sel):
                axes[1, j].axhline(sel["slo_s"].iloc[0], color=color, lw=0.5, ls=":")
        axes[0, j].set_title(m)
        batch_axis(axes[1, j])
        plain_log_axis(axes[1, j], "y")
        axes[1, j].set_xlabel("max_num_seqs B")
    axes[0, 0].set_ylabel("throughput (k tok/s)")
    axes[1, 0].set_ylabel("in-engine latency (s, Little's law)")
    axes[0, 0].plot([], [], "+", color="black", label="B_cap faithful")
    axes[0, 0].plot([], [], "x", color="black", label="B_cap project")
    axes[0, 0].plot([], [], "s", mfc="none", mec="gray", label="measured best")
    axes[0, 0].legend(loc="upper left", fontsize=5, handlelength=1.2)
    fig.suptitle(
        f"{slo} SLO (dotted): + = faithful SLIM-BCA (paper model, Eq. 13), x = project variant (extended model + "
        "KV memory),\n+ over x = both variants pick that B, square = measured best",
        fontsize=6.5,
    )
    return fig


def bca_quality_vs_effort(effort: pd.DataFrame, main_row: pd.Series):
    """Mean (filled markers) and worst (open markers, thin line) recommendation quality against profiling
    GPU-hours, per SLO (colour) and advisor variant (line style); the full sweep's GPU-hours as a dotted line
    labelled inside the axes, k (calibration runs per curve) on the top axis' ticks. A pick that breaks a
    measured constraint scores 0 (`advisor_eval.evaluate_recommendations`), so the worst curve can reach 0."""
    fig, ax = new_figure(height=2.9)
    slos = sorted(effort["slo"].unique())
    colors = {name: SLO_COLORS.get(name, category_color(2 + i)) for i, name in enumerate(slos)}
    drawn: dict[tuple, list[str]] = {}  # (x, y) of each series -> its labels: coinciding series get a note
    for (variant, name), part in effort.groupby(["variant", "slo"], sort=True):
        part = part.sort_values("k")
        x = part["gpu_s_calibration"] / 3600
        ls, mk = VARIANT_LINES.get(variant, ":"), EFFORT_MARKERS.get(variant, "D")
        size = 4 if mk == "o" else 2.5  # the larger open circle rings a square drawn on the same point
        for col, what, lw, face in (
            ("mean_quality_pct", "mean", None, None),
            ("min_quality_pct", "worst", 0.6, "none"),
        ):
            label = f"{name} SLO, {variant}: {what}"
            ax.plot(x, part[col], ls=ls, lw=lw, marker=mk, ms=size, mfc=face, color=colors[name], label=label)
            key = (tuple(np.round(x, 6)), tuple(np.round(part[col].to_numpy(dtype=float), 6)))
            drawn.setdefault(key, []).append(label)
    notes = [
        "same values, drawn on one another:\n" + "\n".join(textwrap.fill(lab, 34) for lab in labels)
        for labels in drawn.values()
        if len(labels) > 1
    ]
    if notes:  # one label a line inside the axes, right of the legend, clear of the curves and tick labels
        text = "\n".join(notes)
        ax.text(
            0.9, 0.4, text, transform=ax.transAxes, ha="right", va="center", fontsize=4.5, color="#444444"
        )
    full_h = float(main_row["gpu_s_full"]) / 3600
    ax.axvline(full_h, color="grey", lw=0.6, ls=":")
    ax.set_xlim(0, full_h * 1.04)
    ax.set_ylim(-3, 105)
    ax.text(full_h * 0.985, 52, "full sweep", rotation=90, fontsize=6, va="center", ha="right", color="grey")
    ks = effort.drop_duplicates("k").sort_values("k")
    top = ax.secondary_xaxis("top")
    top.set_ticks(list(ks["gpu_s_calibration"] / 3600), [f"{int(k)}" for k in ks["k"]], fontsize=5.5)
    top.set_xlabel("k (calibration runs per curve)", fontsize=6)
    ax.set_xlabel("profiling GPU-hours (benchmark durations)")
    ax.set_ylabel("throughput at B_cap / best (%)")
    ax.legend(fontsize=4.8, loc="center left", bbox_to_anchor=(0.02, 0.4), ncol=1, frameon=False)
    return fig


def bca_memory_saved(mem: pd.DataFrame, models: list[str], ol_show: list):
    """Avoidable KV-cache memory per model and output length (default pool minus what B_cap needs), one panel per
    advisor variant."""
    variants = list(dict.fromkeys(mem["variant"]))
    fig, axes = new_figure(1, len(variants), double=True, height=2.5, sharey=True)
    axes = np.atleast_1d(axes)
    width = 0.8 / len(ol_show)
    for ax, variant in zip(axes, variants, strict=True):
        part_v = mem[mem["variant"] == variant]
        for i, ol in enumerate(ol_show):
            part = part_v[part_v["output_len"] == ol].set_index("model").reindex(models)
            x = np.arange(len(models)) + (i - (len(ol_show) - 1) / 2) * width
            ax.bar(x, part["kv_saved_gib"], width, color=ol_style(ol)[0], label=f"OL={ol:.0f}")
        ax.set_xticks(np.arange(len(models)), models)
        ax.set_title(f"{variant} SLIM-BCA", fontsize=7)
    axes[0].set_ylabel("KV cache avoidable (GiB)")
    lo, hi = min(float(mem["kv_saved_gib"].min()), 0.0), max(float(mem["kv_saved_gib"].max()), 0.0)
    axes[0].set_ylim(1.25 * lo, 1.25 * hi if hi > 0 else 1.0)
    for ax in axes:
        ax.axhline(0, color="black", lw=0.6)
    axes[0].legend(ncols=4, fontsize=6, loc="upper right")
    fig.suptitle(
        "default allocation (logged blocks x block size) minus the blocks B_cap needs, loose SLO", fontsize=7
    )
    return fig


#: characters per line of `bca_frontier`'s title (a longer line is wrapped)
TITLE_CHARS = 46


def bca_frontier(front: pd.DataFrame, picks: dict | None = None, title: str = ""):
    """The Pareto set of a deployment search (`slimlib.advisor.deploy.pareto_front`): throughput per GPU against
    per-user output tokens/s, one marker colour per (TP, precision); `picks` maps a label to an (x, y) point drawn
    as a black marker (e.g. the search's best deployment and Eq. 13's B_cap)."""
    fig, ax = new_figure(height=2.9)
    groups = front.groupby(["tensor_parallel", "precision"], sort=True)
    for k, ((tp, prec), part) in enumerate(groups):
        ax.plot(part["per_user_tok_s"], part["throughput_per_gpu_tok_s"], "o", ms=2.5,
                color=category_color(k), label=f"TP{tp} {prec}")  # fmt: skip
    ax.plot(front["per_user_tok_s"], front["throughput_per_gpu_tok_s"], "-", lw=0.5, color="grey")
    for (label, (x, y)), marker in zip((picks or {}).items(), "*Dv^", strict=False):
        ax.plot(x, y, marker, ms=7, mfc="none", mec="black", mew=0.9, label=label)
    ax.set_xlabel("per-user output tokens/s (OL / E2E)")
    ax.set_ylabel("throughput per GPU (tok/s)")
    if ax.get_legend_handles_labels()[0]:  # an empty frontier (nothing meets the limits) has nothing to label
        ax.legend(fontsize=5.5, frameon=False)
    if title:  # wrapped: a deployment and its SLO are wider than the axes
        lines = [textwrap.fill(t, TITLE_CHARS, break_on_hyphens=False) for t in title.splitlines()]
        ax.set_title("\n".join(lines), fontsize=7)
    return fig
