"""Figures of the advisor notebook 07 (SLIM-BCA evaluation, paper Sec. VII-B; no paper figure): one per function."""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.experiments.plotting import OKABE_ITO, new_figure


def bca_curves(curves: pd.DataFrame, rec: pd.DataFrame):
    """Measured throughput and E2E curves per model with the tight-SLO B_cap (x) and the measured best (square)."""
    models = sorted(curves["model"].unique())
    fig, axes = new_figure(2, len(models), double=True, height=3.6, sharex=True)
    ol_show = sorted(curves["output_len"].unique())
    for j, m in enumerate(models):
        for i, ol in enumerate(ol_show):
            c = curves[(curves["model"] == m) & (curves["output_len"] == ol)]
            color = OKABE_ITO[i % len(OKABE_ITO)]
            axes[0, j].plot(
                c["batch_size"],
                c["throughput_tok_s"] / 1e3,
                "-o",
                ms=2,
                lw=0.8,
                color=color,
                label=f"OL={ol:.0f}",
            )
            axes[1, j].plot(c["batch_size"], c["measured_e2e_s"], "-o", ms=2, lw=0.8, color=color)
            r = rec[(rec["model"] == m) & (rec["output_len"] == ol) & (rec["slo"] == "tight")].iloc[0]
            t = c.set_index("batch_size")
            if r["b_true"] > 0:
                axes[0, j].plot(
                    r["b_true"],
                    t.loc[r["b_true"], "throughput_tok_s"] / 1e3,
                    "s",
                    ms=6,
                    mfc="none",
                    mec=color,
                    mew=0.9,
                )
            if r["b_cap"] > 0:
                axes[0, j].plot(
                    r["b_cap"], t.loc[r["b_cap"], "throughput_tok_s"] / 1e3, "x", ms=5, color="black", mew=0.9
                )
                axes[1, j].plot(
                    r["b_cap"], t.loc[r["b_cap"], "measured_e2e_s"], "x", ms=5, color="black", mew=0.9
                )
            axes[1, j].axhline(r["slo_s"], color=color, lw=0.5, ls=":")
        axes[0, j].set_title(m)
        axes[1, j].set_xscale("log", base=2)
        axes[1, j].set_yscale("log")
        axes[1, j].set_xlabel("max_num_seqs B")
    axes[0, 0].set_ylabel("throughput (k tok/s)")
    axes[1, 0].set_ylabel("measured E2E (s)")
    axes[0, 0].legend(loc="upper left", fontsize=6, handlelength=1.2)
    fig.suptitle("tight SLO (dotted): x = SLIM-BCA B_cap, square = measured best", fontsize=7)
    return fig


def bca_quality_vs_effort(effort: pd.DataFrame, main_row: pd.Series):
    """Recommendation quality (mean and worst) against profiling GPU-hours, one line per SLO."""
    fig, ax = new_figure()
    for i, (name, part) in enumerate(effort.groupby("slo", sort=True)):
        ax.plot(
            part["gpu_s_calibration"] / 3600,
            part["mean_quality_pct"],
            "-o",
            ms=3,
            color=OKABE_ITO[i],
            label=f"{name} SLO (mean)",
        )
        ax.plot(
            part["gpu_s_calibration"] / 3600,
            part["min_quality_pct"],
            "--",
            lw=0.8,
            color=OKABE_ITO[i],
            label=f"{name} SLO (worst)",
        )
        for _, r in part.iterrows():
            ax.annotate(
                f"k={r['k']}",
                (r["gpu_s_calibration"] / 3600, r["mean_quality_pct"]),
                fontsize=5,
                xytext=(2, 2),
                textcoords="offset points",
            )
    ax.axvline(main_row["gpu_s_full"] / 3600, color="grey", lw=0.6, ls=":")
    ax.text(
        main_row["gpu_s_full"] / 3600, 80, " full sweep", rotation=90, fontsize=6, va="bottom", ha="right"
    )
    ax.set_ylim(top=102)
    ax.set_xlabel("profiling GPU-hours (benchmark durations)")
    ax.set_ylabel("throughput at B_cap / best (%)")
    ax.legend(fontsize=6, loc="center")
    return fig


def bca_memory_saved(mem: pd.DataFrame, models: list[str], ol_show: list):
    """Avoidable KV-cache memory per model and output length (default pool minus what B_cap needs)."""
    fig, ax = new_figure(double=True, height=2.4)
    width = 0.8 / len(ol_show)
    for i, ol in enumerate(ol_show):
        part = mem[mem["output_len"] == ol].set_index("model").reindex(models)
        x = np.arange(len(models)) + (i - (len(ol_show) - 1) / 2) * width
        ax.bar(x, part["kv_saved_gb"], width, color=OKABE_ITO[i], label=f"OL={ol:.0f}")
    ax.set_xticks(np.arange(len(models)), models)
    ax.set_ylabel("KV cache avoidable (GiB)")
    ax.set_ylim(0, mem["kv_saved_gb"].max() * 1.25)
    ax.legend(ncols=4, fontsize=6, loc="upper right")
    ax.set_title("default allocation (logged blocks x block size) minus the blocks B_cap needs, loose SLO")
    return fig
