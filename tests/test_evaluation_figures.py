"""Evaluation figures (notebook 06): one parity panel per method, no prediction <= 0 drawn as a line."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from slimlib.experiments.accuracy import evaluation_figures as F

METHODS = ["SLIM", "SLIM-extended", "SLIM no-kv-scan", "SLIM no-dense-decode", "SLIM-longctx", "LLMVisor-Agg",
           "IMAI OOD-LR"]  # fmt: skip


def _pred(methods=METHODS):
    rows = []
    for scen in ("same-curve", "model-transfer"):
        for b in (1, 4, 16, 64, 256):
            truth = 100.0 * b / (1 + b / 32)
            for i, m in enumerate(methods):
                p = truth * (1 + 0.02 * i) if m != "IMAI OOD-LR" or b < 64 else -0.1 * truth
                rows.append({"scenario": scen, "method": m, "batch_size": float(b), "throughput_tok_s": truth,
                             "pred_throughput_tok_s": p})  # fmt: skip
    return pd.DataFrame(rows)


def _visible(fig):
    """The drawn panels (an empty panel may hold only the legend, its axes switched off)."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison]


def test_parity_has_one_panel_per_method_and_shows_nonphysical_rows():
    for methods in (METHODS, METHODS[:6], METHODS[:2], METHODS + ["extra"]):
        fig = F.eval_parity(_pred(methods))
        panels = _visible(fig)
        assert [ax.get_title().split(" (")[0] for ax in panels] == methods
        plt.close(fig)
    fig = F.eval_parity(_pred())
    imai = next(ax for ax in _visible(fig) if ax.get_title().startswith("IMAI OOD-LR"))
    assert "(4 predictions <= 0)" in imai.get_title()  # B = 64 and 256 in both scenarios
    drawn = sum(len(line.get_xdata()) for line in imai.get_lines()[:-1])  # all but the diagonal
    assert drawn == 10  # every test row is drawn, the non-physical ones on the floor
    plt.close(fig)


class _Model:
    def __init__(self, offset):
        self.offset = offset

    def predict(self, frame):
        b = frame["batch_size"].to_numpy(float)
        return pd.DataFrame({"pred_throughput_tok_s": 100.0 * b / (1 + b / 32) - self.offset * b})


class _Result:
    """The parts of an EvaluationResult that eval_curves reads: one scenario, two methods, one fold."""

    def __init__(self):
        pred = _pred(["SLIM", "IMAI OOD-LR"])
        pred = pred[pred["scenario"] == "same-curve"].assign(fold="f", curve="c", model="m")
        self.predictions = pred.reset_index(drop=True)
        train = pred[pred["method"] == "SLIM"].iloc[:2].drop(columns=["method", "pred_throughput_tok_s"])
        self.scenarios = [type("S", (), {"name": "same-curve", "folds": [type("Fo", (), {"label": "f",
                          "train": train})()]})()]  # fmt: skip
        self.models = {
            ("same-curve", "SLIM", "f"): _Model(0.0),
            ("same-curve", "IMAI OOD-LR", "f"): _Model(20.0),
        }


def test_curves_never_draw_a_prediction_at_or_below_zero():
    res = _Result()
    fig, dense = F.eval_curves(res, panels=[("same-curve", "c")], methods=("SLIM", "IMAI OOD-LR"))
    imai = dense[dense["method"] == "IMAI OOD-LR"]
    assert (imai["pred_throughput_tok_s"] <= 0).any()  # the baseline does cross zero on this grid
    ax = _visible(fig)[0]
    for line in ax.get_lines():
        y = np.asarray(line.get_ydata(), dtype=float)
        assert not (y[np.isfinite(y)] <= 0).any(), line.get_label()
    assert any("IMAI OOD-LR" in t.get_text() and "<= 0" in t.get_text() for t in ax.texts)
    plt.close(fig)
