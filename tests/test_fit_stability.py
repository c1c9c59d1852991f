"""Fit stability, degenerate-fit flags and few-point calibration."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from synthetic import SLIM_TRUE_PARAMS, TRUE_PARAMS, grid, synthesize

from slimlib.cli.main import main
from slimlib.experiments.accuracy.evaluation import run_evaluation
from slimlib.experiments.accuracy.scenarios import Fold, Scenario, build_scenarios
from slimlib.model import IdentifiabilityWarning, PaperModel, SlimModel, load_params

#: a GPU without a measured decode-attention efficiency (the recommended model then fits or holds eta_attn at its
#: prior, as these tests check)
GPU = "mi300x"
SLIM_TRUE = dict(SLIM_TRUE_PARAMS)


def _summary(model) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifiabilityWarning)
        return model.summary()


@pytest.fixture(scope="module")
def public_same_curve() -> pd.DataFrame:
    s = next(s for s in build_scenarios() if s.name == "same-curve")
    return s.folds[0].train


def test_stable_fit_is_pinned(public_same_curve):
    """The recommended model on the public same-curve rows: every start reaches the best cost, parameters agree
    across starts and across seeds to a tight tolerance, and the fit is not flagged."""
    a = SlimModel(n_starts=8).fit(public_same_curve)
    b = SlimModel(n_starts=8, seed=5).fit(public_same_curve)
    st = a.fit_info_["stability"]
    assert not st["unstable"] and st["reasons"] == []
    assert st["n_best"] >= 5 and st["n_best"] <= st["n_converged"] <= st["n_starts"] == 9
    assert max(st["relative_spread"].values()) < 1e-3
    assert a.params_ == pytest.approx(b.params_, rel=1e-5)
    assert not _summary(a)["unstable"].any()


def test_unstable_fit_is_flagged():
    """The paper model on one model's public OL-transfer training rows: alpha and gamma trade off in a flat valley
    (equal cost, different values across starts)."""
    s = next(s for s in build_scenarios() if s.name == "output-length-transfer")
    fold = next(f for f in s.folds if f.label == "llama-2-7b")
    m = PaperModel(n_starts=8).fit(fold.train)
    st = m.fit_info_["stability"]
    assert st["unstable"] and any("spreads" in r for r in st["reasons"])
    table = _summary(m)
    assert table.loc[[k for k, v in st["relative_spread"].items() if v > st["spread_rtol"]], "unstable"].all()
    assert (table["note"].str.contains("unstable")).any()
    # saved and loaded, the flags survive
    assert load_params(m.to_json()).fit_info_["stability"]["unstable"] is True


def test_parameter_at_bound_is_flagged_without_interval():
    truth = PaperModel.with_params({**TRUE_PARAMS, "eta_c": 1.0}, gpu="h100-sxm-80gb")  # the upper bound
    df = synthesize(truth, grid(), noise=0.0)
    m = PaperModel(n_starts=2).fit(df)
    table = _summary(m)
    assert table.loc["eta_c", "at_bound"] and np.isnan(table.loc["eta_c", "ci95_low"])
    assert "at its bound" in table.loc["eta_c", "note"]


def test_intervals_stay_inside_physical_bounds():
    truth = PaperModel.with_params({**TRUE_PARAMS, "alpha": 1e-9, "B0": 0.05}, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid(), noise=0.05, seed=2)
    m = PaperModel(n_starts=2).fit(df)
    t = _summary(m)
    ok = t["ci95_low"].notna()
    assert (t.loc[ok, "ci95_low"] >= t.loc[ok, "lower"]).all() and (
        t.loc[ok, "ci95_high"] <= t.loc[ok, "upper"]
    ).all()
    z = 1.959963984540054
    crossed = (t["estimate"] - z * t["stderr"] < t["lower"]) & ok
    assert crossed.any(), "the draw should produce an interval that crosses 0"
    assert (
        t.loc[crossed, "ci_clipped"].all() and (t.loc[crossed, "ci95_low"] == t.loc[crossed, "lower"]).all()
    )
    assert t.loc[crossed, "note"].str.contains("clipped").all()


def test_gamma_unit_is_per_layer_width_and_token():
    assert (
        PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")._units()["gamma"]
        == "s/(layer (D/1024)^2 token)"
    )


def test_three_points_of_one_curve_fit_with_efficiencies_at_priors():
    """3 rows of one curve, 4 free parameters (one architecture: eta_w at its prior, t_layer and t_act at 0; one output
    length: t_fixed at 0, its constant given to t_step): eta_c, eta_attn are held at the kernel data's priors and
    t_step, alpha are fitted; the summary says so and gives held parameters no interval."""
    prior = {s.name: s.prior.median for s in SlimModel().param_specs() if s.prior is not None}
    truth_p = {**SLIM_TRUE, **prior, "t_fixed": 0.0}
    truth = SlimModel.with_params(truth_p, gpu=GPU)
    rows = synthesize(truth, grid(models=("llama-2-7b",), gpu=GPU, batch=(4, 16, 64), input_len=(512,),
                                  output_len=(256,)))  # fmt: skip
    m = SlimModel(n_starts=2).fit(rows)
    assert m.held_ == ["eta_attn", "eta_c", "eta_w", "t_act", "t_fixed", "t_layer"] and m.free_params_ == [
        "alpha",
        "t_step",
    ]
    assert m.params_["t_step"] == pytest.approx(SLIM_TRUE["t_step"], rel=1e-4)
    assert m.params_["alpha"] == pytest.approx(SLIM_TRUE["alpha"], rel=1e-4)
    t = _summary(m)
    for k in ("eta_c", "eta_attn", "eta_w"):
        assert t.loc[k, "estimate"] == prior[k] and t.loc[k, "fixed"]
        assert t.loc[k, "note"].startswith("held at prior")
        assert np.isnan(t.loc[k, "ci95_low"]) and np.isnan(t.loc[k, "ci95_high"])
    assert all("3 rows < 4 free parameters" in t.loc[k, "note"] for k in ("eta_c", "eta_attn"))
    assert "one architecture" in t.loc["eta_w", "note"] and "one layer count" in t.loc["t_layer", "note"]
    assert (
        "one output length" in t.loc["t_fixed", "note"]
        and "one layer count times width" in t.loc["t_act", "note"]
    )
    assert t.loc[["t_step", "alpha"], "ci95_low"].notna().all()
    # with enough rows nothing is held at a prior
    many = synthesize(truth, grid(models=("llama-2-7b",), gpu=GPU))
    assert SlimModel(n_starts=2).fit(many).held_ == ["eta_w", "t_act", "t_layer"]


def test_failing_fold_drops_the_whole_scenario_with_the_reason():
    truth = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid())
    good = Fold("a", df[df["output_len"] == 64].reset_index(drop=True), df[df["output_len"] == 256])
    tiny = Fold("b", df.iloc[:1].reset_index(drop=True), df.iloc[1:5])  # 1 row: cannot be fitted
    res = run_evaluation(
        [Scenario("two", "two folds", "t", "l", [good, tiny])], methods=["paper"], n_starts=1
    )
    table = res.table()
    assert table["mape_pct"].isna().all() and len(res.predictions) == 0 and not res.models
    assert table["note"].str.contains("not fitted on fold b").all()
    assert {"n_unstable_folds", "at_bound", "note"} <= set(table.columns)


def test_cli_fits_three_runs_of_one_curve_and_says_what_it_held(tmp_path, capsys):
    truth = SlimModel.with_params({**SLIM_TRUE, "t_fixed": 0.0}, gpu=GPU)
    rows = synthesize(truth, grid(models=("llama-2-7b",), gpu=GPU, batch=(4, 16, 64), input_len=(512,),
                                  output_len=(256,)))  # fmt: skip
    rows.to_csv(tmp_path / "three.csv", index=False)
    assert main(["fit", str(tmp_path / "three.csv"), "--out", str(tmp_path / "p.json"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "eta_attn: held at prior 0.845" in out and "3 rows < 4 free parameters" in out
    assert "fit stability:" in out
    assert load_params(tmp_path / "p.json").held_ == [
        "eta_attn",
        "eta_c",
        "eta_w",
        "t_act",
        "t_fixed",
        "t_layer",
    ]
