"""The extrapolation cross-validation (`slimlib.experiments.accuracy.extrapolation*`): folds defined by the data,
identical rows for every candidate, term-list candidates, counted fit failures, the table and `recommend`."""

from __future__ import annotations

import re
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.experiments.accuracy.composed_curves import (
    COMPOSED_FP4,
    COMPOSED_FP8,
    COMPOSED_MOE,
)
from slimlib.experiments.accuracy.extrapolation import (
    PRED_COLUMNS,
    TABLE_COLUMNS,
    CVResult,
    calibrated_methods,
    extrapolation_table,
    paired_differences,
    recommend,
    run_extrapolation_cv,
    signed_pct_error,
    tied_best,
    wide_table,
    worst_axis,
    worst_axis_draws,
)
from slimlib.experiments.accuracy.extrapolation_folds import AXES, AxisFolds, build_axis_folds, fold_rows
from slimlib.experiments.accuracy.extrapolation_outputs import write_coverage_outputs, write_selection_outputs
from slimlib.experiments.accuracy.scenarios import Fold
from slimlib.model import METHODS
from slimlib.model.paper import PAPER_TERMS
from slimlib.registry.architectures import get_architecture

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def axes(composed) -> list[AxisFolds]:
    """Every axis on the committed data (`composed` makes the composed table of the run this call reads)."""
    return build_axis_folds()


def test_every_axis_has_folds_on_the_committed_data(axes):
    assert [a for a in AXES if a not in {x.axis for x in axes}] == []
    rows = fold_rows(axes)
    assert (rows["n_train"] > 0).all() and (rows["n_test"] > 0).all()
    assert {("device", "llmib"), ("tp", "llmib"), ("batch", "engine-cpu"), ("model", "memgap-online")} <= set(
        zip(rows["axis"], rows["dataset"], strict=True)
    )
    # the mixture of experts' and the FP8 weights' kernel-composed curves on every axis but the context's (no
    # IL = OL sweep)
    axes_of = {
        d: {a for a, x in zip(rows["axis"], rows["dataset"], strict=True) if x == d}
        for d in set(rows["dataset"])
    }
    assert axes_of[COMPOSED_MOE] == axes_of[COMPOSED_FP8] == set(AXES) - {"context"}
    # and the FP4 curves, on one GPU, on every axis but the context's and the device's
    assert axes_of[COMPOSED_FP4] == set(AXES) - {"context", "device"}


def test_folds_split_along_their_axis(axes):
    for a in axes:
        for f in a.folds:
            tr, te = f.train, f.test
            if a.axis == "batch":
                assert tr["batch_size"].max() <= 4 and te["batch_size"].min() >= 8
                assert set(te["curve"]) <= set(tr["curve"])
            elif a.axis == "batch-knee":
                top = tr.groupby("curve")["batch_size"].max()
                assert (te["batch_size"].to_numpy() > top.reindex(te["curve"]).to_numpy()).all()
            elif a.axis in ("input", "output"):
                col = f"{a.axis}_len"
                assert tr[col].max() < te[col].min()
            elif a.axis == "context":
                assert tr["input_len"].max() < te["input_len"].min()
            elif a.axis == "model" and a.dataset == COMPOSED_MOE:  # dense models fitted, the MoE validated
                assert not any(get_architecture(m).is_moe for m in set(tr["model"]))
                assert all(get_architecture(m).is_moe for m in set(te["model"]))
                assert set(tr["gpu"]) == set(te["gpu"]) and set(tr["tensor_parallel"]) == {1}
            elif a.axis == "model":
                size = {m: get_architecture(m).n_params for m in set(tr["model"]) | set(te["model"])}
                assert max(size[m] for m in tr["model"]) < min(size[m] for m in te["model"])
            elif a.axis == "device":
                assert a.transfer and set(tr["gpu"]).isdisjoint(set(te["gpu"]))
            elif a.axis == "tp":
                assert tr["tensor_parallel"].max() < te["tensor_parallel"].min()


def test_default_candidates_are_the_calibrated_methods():
    """Every calibrated method but the experimental ones: the recommended model, the paper's and its ablations."""
    assert calibrated_methods() == [n for n, m in METHODS.items() if m.calibrated and not m.experimental]
    assert calibrated_methods() == ["slim", "paper", "no-kv-scan", "no-dense-decode"]


@pytest.fixture(scope="module")
def device_cv(axes):
    device = [a for a in axes if a.axis == "device" and a.dataset == "llmib"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_extrapolation_cv(["paper", ("paper as terms", PAPER_TERMS)], axes=device, n_starts=0)


def test_a_term_list_candidate_equals_its_registered_method_including_gpu_transfer(device_cv):
    p = device_cv.predictions
    a, b = p[p["method"] == "paper"], p[p["method"] == "paper as terms"]
    assert len(a) == len(b) == sum(len(f.test) for ax in device_cv.axes for f in ax.folds)
    np.testing.assert_allclose(
        a["pred_throughput_tok_s"].to_numpy(), b["pred_throughput_tok_s"].to_numpy(), rtol=1e-9
    )
    table = extrapolation_table(device_cv, n_boot=200)
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert table["n_test"].nunique() == 1  # the same rows for every candidate
    assert table["mape_pct"].iloc[0] == pytest.approx(table["mape_pct"].iloc[1])


def _tiny_axes(axes: list[AxisFolds]) -> list[AxisFolds]:
    """The memgap-online output axis, plus a fold too small to fit (2 training rows)."""
    out = next(a for a in axes if a.axis == "output" and a.dataset == "memgap-online")
    f = out.folds[0]
    bad = AxisFolds("model", "memgap-online", "too few rows", [Fold("tiny", f.train.iloc[:2], f.test)])
    return [AxisFolds(out.axis, out.dataset, out.design, out.folds[:2]), bad]


def test_fit_failures_are_counted_and_leave_the_cell_empty(axes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_extrapolation_cv(["paper", "slim"], axes=_tiny_axes(axes), n_starts=0)
    # the paper model cannot fit 2 rows (6 parameters); the recommended model holds its priors and fits
    assert set(res.failures["fold"]) == {"tiny"} and set(res.failures["method"]) == {"paper"}
    table = extrapolation_table(res, n_boot=200)
    bad = table[(table["axis"] == "model") & (table["method"] == "paper")]
    assert bad["mape_pct"].isna().all() and (bad["n_failed_folds"] == 1).all()
    assert bad["note"].str.contains("not fitted").all()
    assert table.loc[table["method"] == "slim", "mape_pct"].notna().all()
    name, reason = recommend(table)
    assert name == "slim" and "paper: 1 cell(s) not fitted" in reason
    shown = wide_table(table)
    assert shown.loc[shown["axis"] == "model", "paper"].tolist() == ["not fitted (1 folds)"]
    with pytest.raises(DataError, match="no candidate"):
        recommend(table[table["method"] == "paper"])


def _table(cells: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for method, values in cells.items():
        for i, v in enumerate(values):
            rows.append({"axis": AXES[i], "dataset": "d", "method": method, "n_folds": 1,
                         "n_failed_folds": int(np.isnan(v)), "n_test": 10, "mape_pct": v, "mape_lo_pct": v,
                         "mape_hi_pct": v, "bias_pct": 0.0, "bias_lo_pct": 0.0, "bias_hi_pct": 0.0,
                         "latency_mape_pct": v, "note": ""})  # fmt: skip
    return pd.DataFrame(rows)


def test_recommend_picks_the_best_worst_axis_not_the_best_mean():
    t = _table({"flexible": [1.0, 1.0, 30.0], "steady": [12.0, 12.0, 12.0], "broken": [0.5, np.nan, 0.5]})
    name, reason = recommend(t)
    assert name == "steady"
    assert "12.0%" in reason and "flexible 30.0%" in reason and "broken: 1 cell(s) not fitted" in reason
    w = worst_axis(t).set_index("method")
    assert w.loc["flexible", "mean_mape_pct"] < w.loc["steady", "mean_mape_pct"]
    assert w.loc["flexible", "worst_cell"] == f"{AXES[2]} / d"


def test_a_tie_on_the_worst_axis_goes_to_the_lower_mean():
    t = _table({"older": [5.0, 9.0, 30.0], "newer": [5.0, 4.0, 30.04], "worse": [1.0, 1.0, 31.0]})
    name, reason = recommend(t)
    assert name == "newer"  # 30.04 and 30.0 print as 30.0: a tie, broken by the mean (13.0 < 14.7)
    assert "tied with older" in reason and "newer 13.0%" in reason and "older 14.7%" in reason
    assert list(tied_best(t)["method"]) == ["newer", "older"]
    assert (
        recommend(_table({"a": [1.0, 2.0, 30.0], "b": [1.0, 1.0, 31.0]}))[0] == "a"
    )  # no tie: the worst axis


def _cv(errors: dict[str, list[np.ndarray]]) -> CVResult:
    """A `CVResult` whose candidates have the given signed % errors on the rows of each axis (synthetic rows, for
    the selection rule only)."""
    axes, parts = [], []
    for i in range(len(next(iter(errors.values())))):
        n = len(next(iter(errors.values()))[i])
        test = pd.DataFrame({"throughput_tok_s": 100.0 + np.arange(n)})
        axes.append(AxisFolds(AXES[i], "d", "synthetic", [Fold("f", test, test)]))
        for m, per_axis in errors.items():
            part = pd.DataFrame({c: np.nan for c in PRED_COLUMNS}, index=range(n))
            part[["axis", "dataset", "fold", "method"]] = AXES[i], "d", "f", m
            part["throughput_tok_s"] = test["throughput_tok_s"].to_numpy()
            part["pred_throughput_tok_s"] = part["throughput_tok_s"] * (1 + per_axis[i] / 100)
            part["e2e_s"] = part["pred_e2e_s"] = 1.0
            parts.append(part)
    preds = pd.concat(parts, ignore_index=True)
    empty = pd.DataFrame(columns=["axis", "dataset", "fold", "method", "error"])
    return CVResult(preds, empty, pd.DataFrame(), axes, list(errors), 0.0, 0)


def test_a_worst_axis_difference_within_its_uncertainty_is_a_tie():
    rng = np.random.default_rng(0)
    lucky = 20.0 + np.abs(rng.normal(0.0, 10.0, 40))  # the worst cell: 40 rows, MAPE about 28
    spread = rng.normal(0.0, 5.0, 40)
    steady = lucky + spread - spread.mean() + 0.5  # 0.5 points worse on average, rows either way
    cv = _cv({
        "steady": [np.full(40, 2.0), steady],
        "lucky": [np.full(40, 5.0), lucky],  # the lowest worst axis, by less than the rows' noise
        "uniform": [np.full(40, 2.0), lucky + 0.5],  # 0.5 points worse on every row: paired, not a tie
        "bad": [np.full(40, 2.0), lucky + 12.0],
    })  # fmt: skip
    table = extrapolation_table(cv, n_boot=500)
    assert worst_axis(table).set_index("method")["worst_mape_pct"].idxmin() == "lucky"
    # the table alone: 0.5 points apart is no tie, the lowest worst axis wins
    assert recommend(table)[0] == "lucky"
    # with the rows: a tie within the paired interval, broken by the mean over the cells
    tied = tied_best(table, cv, n_boot=500)
    assert set(tied["method"]) == {"steady", "lucky"}
    name, reason = recommend(table, cv, n_boot=500)
    assert name == "steady" and "tied with the lowest" in reason and "paired bootstrap 95%" in reason
    draws = worst_axis_draws(cv, ["steady", "lucky", "uniform", "bad"], n_boot=500)
    assert draws.shape == (500, 4)
    assert np.allclose(draws[:, 2] - draws[:, 1], 0.5)  # paired: the same rows in every resample
    assert np.quantile(draws[:, 0] - draws[:, 1], 0.025) < 0 < np.quantile(draws[:, 0] - draws[:, 1], 0.975)


def test_sharing_the_best_ones_worst_cell_in_some_resamples_is_no_tie():
    rng = np.random.default_rng(1)
    shared = np.array(
        [0.0] * 10 + [200.0] * 2
    )  # a small cell, MAPE 33 with a wide resampling spread, same for both
    steady = 30.0 + np.abs(rng.normal(0.0, 3.0, 200))
    cv = _cv({"best": [shared, steady], "shadow": [shared, steady + 3.0]})
    table = extrapolation_table(cv, n_boot=500)
    draws = worst_axis_draws(cv, ["best", "shadow"], n_boot=500)
    diff = draws[:, 1] - draws[:, 0]
    assert (diff == 0).mean() > 0.05 and (
        diff >= 0
    ).all()  # never lower: equal where the shared cell is the worst
    assert list(tied_best(table, cv, n_boot=500)["method"]) == ["best"]


def test_worst_axis_draws_refuse_candidates_on_other_rows():
    cv = _cv({"a": [np.full(5, 1.0)], "b": [np.full(5, 2.0)]})
    p = cv.predictions
    p.loc[(p["method"] == "b") & (p.index % 5 == 0), "throughput_tok_s"] += 1.0
    with pytest.raises(DataError, match="test rows of the other candidates"):
        worst_axis_draws(cv, ["a", "b"], n_boot=10)


def test_signed_error_is_positive_when_over_predicting():
    assert signed_pct_error(np.array([100.0, 100.0]), np.array([110.0, 95.0])) == pytest.approx([10.0, -5.0])


def test_outputs_are_written_through_the_table_writer(tmp_path, device_cv):
    table, (name, _) = write_selection_outputs(device_cv, tmp_path, n_boot=200)
    write_coverage_outputs(device_cv, tmp_path)
    for stem in ("extrap_cv", "extrap_coverage", "extrap_paired", "extrap_cv_models"):
        for ext in ("csv", "md", "tex"):
            assert (tmp_path / f"{stem}.{ext}").is_file()
    assert name in {"paper", "paper as terms"}
    back = pd.read_csv(tmp_path / "extrap_cv.csv")
    assert list(back.columns) == list(TABLE_COLUMNS) and len(back) == len(table)
    assert "worst axis" in (tmp_path / "extrap_cv.md").read_text()
    paired = pd.read_csv(tmp_path / "extrap_paired.csv")
    assert name not in set(paired["method"]) and "all" in set(paired["axis"])
    # the recommended model's cells split by held-out model: the split's rows add up to the cell's, and its mean
    # weighted by rows is the cell's MAPE
    models = pd.read_csv(tmp_path / "extrap_cv_models.csv")
    assert set(models["method"]) == {name} and len(models)
    for (axis, dataset), g in models.groupby(["axis", "dataset"]):
        cell = table[
            (table["axis"] == axis) & (table["dataset"] == dataset) & (table["method"] == name)
        ].iloc[0]
        assert g["model"].nunique() == len(g) > 1 and g["n_test"].sum() == cell["n_test"]
        assert (g["mape_pct"] * g["n_test"]).sum() / cell["n_test"] == pytest.approx(cell["mape_pct"])


def test_paired_differences_are_the_cells_differences_on_the_same_rows(device_cv):
    # "paper as terms" predicts what "paper" does; a third candidate over-predicts every row by 20%
    p = device_cv.predictions
    worse = p[p["method"] == "paper"].assign(method="worse")
    worse["pred_throughput_tok_s"] = worse["pred_throughput_tok_s"] * 1.2
    cv = replace(device_cv, predictions=pd.concat([p, worse], ignore_index=True),
                 methods=[*device_cv.methods, "worse"])  # fmt: skip
    d = paired_differences(cv, "paper", n_boot=500)
    table = extrapolation_table(cv, n_boot=10)
    assert set(d["method"]) == {"paper as terms", "worse"}
    for r in d[d["axis"] != "all"].itertuples(index=False):
        cell = table[(table["axis"] == r.axis) & (table["dataset"] == r.dataset)].set_index("method")[
            "mape_pct"
        ]
        assert r.diff_pct == pytest.approx(cell[r.method] - cell["paper"], abs=1e-9)
        assert r.diff_lo_pct <= r.diff_pct <= r.diff_hi_pct
    overall = d[d["axis"] == "all"].set_index("method")
    assert overall.loc["paper as terms", ["diff_pct", "diff_lo_pct", "diff_hi_pct"]].abs().max() < 1e-9
    assert overall.loc["worse", "diff_lo_pct"] > 0
    cells = d[(d["method"] == "worse") & (d["axis"] != "all")]
    assert overall.loc["worse", "diff_pct"] == pytest.approx(cells["diff_pct"].mean(), abs=1e-9)


README_SECTION = re.compile(r"<!-- extrap_cv:start -->\n(.*?)<!-- extrap_cv:end -->", re.S)


def test_the_model_doc_shows_the_generated_extrapolation_table():
    doc = (REPO / "docs" / "model.md").read_text(encoding="utf-8")
    m = README_SECTION.search(doc)
    assert m, "docs/model.md lacks the <!-- extrap_cv:start --> ... <!-- extrap_cv:end --> section"
    generated = REPO / "figures" / "extrap_cv.md"
    if not generated.is_file():
        pytest.skip("figures/extrap_cv.md not generated yet (notebook 13 writes it)")
    assert m.group(1) == generated.read_text(encoding="utf-8"), (
        "docs/model.md's extrapolation table differs from figures/extrap_cv.md: run "
        "`python -m slimlib.experiments.outputs.paper_differences`"
    )


def test_the_mixture_of_experts_dataset_is_defined_by_the_model_not_a_label(axes, composed):
    # a composed table without its source column gives the same folds: a mixture of experts' rows never fall into
    # the dense models' model fold (where Mixtral, larger than Qwen3-32B, would be validated as the largest dense)
    t = composed
    assert fold_rows(build_axis_folds(composed=t.drop(columns=["source"]))).equals(fold_rows(axes))


def test_the_folds_of_named_datasets_are_the_whole_protocols(axes):
    named = ("engine-cpu", "llmib", "aic-composed-moe")
    some = build_axis_folds(datasets=named)
    whole = [a for a in axes if a.dataset in named]
    assert [(a.axis, a.dataset) for a in some] == [(a.axis, a.dataset) for a in whole]
    for a, b in zip(some, whole, strict=True):
        assert [f.label for f in a.folds] == [f.label for f in b.folds]
        for f, g in zip(a.folds, b.folds, strict=True):
            pd.testing.assert_frame_equal(f.train, g.train)
            pd.testing.assert_frame_equal(f.test, g.test)
    with pytest.raises(DataError, match=r"\['aic'\]: unknown"):
        build_axis_folds(datasets=["engine-cpu", "aic"])
