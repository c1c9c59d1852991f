"""Rendering faults a review found: B_cap markers of `bca_curves`, the coincidence note of
`bca_quality_vs_effort`, the full legend of `fig02_engine_saturation`, the crossover line of the kernel breakdown
and the bandwidth-efficiency note of `eval_slim_params`."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from slimlib.experiments.outputs.plotting import use_house_style


@pytest.fixture(autouse=True)
def _style():
    import matplotlib.pyplot as plt

    use_house_style()
    yield
    plt.close("all")


def _effort() -> pd.DataFrame:
    rows = []
    for variant in ("faithful", "project"):
        for slo in ("loose", "tight"):
            for k in (2, 3, 4):
                rows.append({"variant": variant, "k": k, "slo": slo, "gpu_s_calibration": 3600.0 * 5 * k,
                             "gpu_s_full": 3600.0 * 50, "mean_quality_pct": 80.0 + k + (slo == "tight"),
                             "min_quality_pct": 0.0})  # fmt: skip
    return pd.DataFrame(rows)


def test_bca_curves_draw_b_cap_as_plus_and_cross():
    from slimlib.experiments.bca import advisor_figures as F

    assert F.VARIANT_MARKERS == {"faithful": "+", "project": "x"}
    assert F.EFFORT_MARKERS == {"faithful": "o", "project": "s"}
    b = np.array([1, 2, 4, 8, 16, 32, 64])
    curves = pd.DataFrame({"model": "m", "output_len": 130.0, "batch_size": b, "throughput_tok_s": 100.0 * b**0.7,
                           "measured_e2e_s": 1.0 + 0.1 * b})  # fmt: skip
    rec = pd.DataFrame({"variant": ["faithful", "project"], "model": "m", "output_len": 130.0, "slo": "tight",
                        "slo_s": 5.0, "b_cap": [32, 16], "b_true": 16})  # fmt: skip
    fig = F.bca_curves(curves, rec)
    black = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_color() == "black"]
    black = [ln for ln in black if len(ln.get_xdata())]  # not the legend's empty stand-ins
    # B_cap only as + and x, never as the filled circles and squares of the effort figure
    assert {ln.get_marker() for ln in black} == {"+", "x"}
    assert sorted(ln.get_xdata()[0] for ln in black if ln.get_marker() == "+") == [32, 32]
    assert sorted(ln.get_xdata()[0] for ln in black if ln.get_marker() == "x") == [16, 16]


def test_quality_vs_effort_note_stays_inside_the_axes_clear_of_the_tick_labels():
    from slimlib.experiments.bca import advisor_figures as F

    effort = _effort()
    fig = F.bca_quality_vs_effort(effort, effort.iloc[0])
    fig.canvas.draw()
    ax = fig.axes[0]
    notes = [t for t in ax.texts if "drawn on one another" in t.get_text()]
    assert len(notes) == 1
    box = notes[0].get_window_extent()
    frame = ax.get_window_extent()
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
    for label in ax.get_yticklabels():
        assert not box.overlaps(label.get_window_extent())
    assert not box.overlaps(ax.get_legend().get_window_extent())


def test_engine_saturation_legend_names_every_length_drawn():
    from slimlib.data import load
    from slimlib.experiments.engine_study import engine_figures as E

    med = load("engine-cpu-medians")
    models = sorted(med["model"].unique())
    il, ol = int(med["input_len"].min()), 64
    fig = E.fig02_engine_saturation(med, models, il=il, ol=ol)
    axes = np.array(fig.axes).reshape(2, len(models))
    for row in range(2):
        drawn = {ln.get_label() for ax in axes[row] for ln in ax.get_lines()}
        shown = {t.get_text() for t in axes[row, 0].get_legend().get_texts()}
        assert shown == drawn
    assert f"IL={int(med.loc[med['output_len'] == ol, 'input_len'].max())}" in drawn
    colours = {ln.get_label(): ln.get_color() for ln in axes[0, 0].get_lines() + axes[1, 0].get_lines()}
    assert len(set(colours.values())) == len(colours)  # OL=64 and IL=1024 no longer share a green


def test_crossover_line_sits_between_bars_not_on_one():
    from slimlib.experiments.kernel_timing import composition_figures as kf
    from slimlib.experiments.outputs.plotting import new_figure

    df = pd.DataFrame({"batch_size": [16, 32, 64, 128, 256]})
    for k, _, _ in kf._PARTS:
        df[f"{k}_share"] = 0.25
    fig, ax = new_figure()
    kf.plot_breakdown(ax, df, "batch_size", cross=122.0)
    fig.canvas.draw()
    (line,) = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    x = line.get_xdata()[0]
    assert x == pytest.approx(2.5)  # in the gap between the 64 bar (2) and the 128 bar (3)
    for bar in ax.patches:
        assert not bar.get_x() < x < bar.get_x() + bar.get_width()
    labels = " ".join(t.get_text() for a in ax.child_axes for t in a.get_xticklabels())  # the top-axis label
    assert "between B = 64 and 128" in labels


def test_slim_params_note_explains_bandwidth_efficiencies_above_one():
    from slimlib.experiments.accuracy.evaluation_figures import slim_params_notes

    params = pd.DataFrame({"scenario": ["model-transfer", "combined", "combined"],
                           "parameter": ["eta_attn", "eta_w", "eta_c"], "estimate": [1.105, 0.98, 1.2]})  # fmt: skip
    (note,) = slim_params_notes(params)
    assert "eta_attn 1.105" in note and "eta_c" not in note.split(":")[0]
    assert "h100-sxm-64gb" in note and "+25%" in note and "derived" in note
    assert slim_params_notes(params.assign(estimate=0.9)) == []
