"""Prediction intervals (`slimlib.model.intervals`): columns, order, the parameter file, and coverage on data
generated from the model (where the truth is known)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid, synthesize

from slimlib.cli.main import main
from slimlib.errors import DataError
from slimlib.experiments.accuracy.composed_curves import COMPOSED_MOE
from slimlib.experiments.accuracy.extrapolation import run_extrapolation_cv
from slimlib.experiments.accuracy.extrapolation_coverage import (
    coverage_table,
    log_errors,
    nested_intervals,
    residual_model,
)
from slimlib.experiments.accuracy.extrapolation_folds import AxisFolds
from slimlib.experiments.accuracy.scenarios import Fold
from slimlib.model import PRED_COLUMNS, PaperModel, load_params
from slimlib.model.base import PARAMS_FORMAT_VERSION
from slimlib.model.intervals import (
    GRID,
    INTERVAL_COLUMNS,
    INTERVAL_QUANTITIES,
    MOE_NARROW_AXES,
    POOLED,
    Domain,
    IntervalWarning,
    ResidualModel,
    conformal_prob,
    extrapolation_distance,
    fit_domain,
    interval_bounds,
    moe_narrow_message,
    moe_rows,
    normal_quantile,
    residual_half_widths,
    row_axes,
    scale,
)
from slimlib.model.shipped_residuals import load_shipped
from slimlib.model.slim import SlimModel
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu

GPU = "h100-sxm-80gb"
NOISE = 0.05


def noisy(seed: int) -> pd.DataFrame:
    """Rows from the paper model at `TRUE_PARAMS` times a log-normal factor of sd `NOISE` (truth known)."""
    truth = PaperModel.with_params(TRUE_PARAMS, gpu=GPU)
    df = synthesize(truth, grid(batch=(1, 2, 4, 8, 16, 64, 256)))
    factor = np.exp(NOISE * np.random.default_rng(seed).standard_normal(len(df)))
    df["throughput_tok_s"] *= factor
    df["e2e_s"] /= factor
    return df


def synthetic_axis(n_folds: int = 8) -> AxisFolds:
    """A batch axis of `n_folds` independent noisy draws: fit B <= 16, validate B >= 64."""
    folds = []
    for seed in range(n_folds):
        d = noisy(seed)
        folds.append(Fold(f"draw {seed}", d[d["batch_size"] <= 16], d[d["batch_size"] >= 64]))
    return AxisFolds("batch", "synthetic", "fit B <= 16, validate B >= 64", folds)


@pytest.fixture(scope="module")
def synthetic_cv():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_extrapolation_cv(["paper"], axes=[synthetic_axis()], n_starts=0)


@pytest.fixture(scope="module")
def fitted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return PaperModel(gpu=GPU, n_starts=0).fit(noisy(0))


def test_interval_columns_present_and_ordered(fitted):
    df = noisy(1)
    with pytest.warns(IntervalWarning, match="no residual model"):
        pred = fitted.predict(df, interval=0.9)
    for quantity, (lo, hi) in INTERVAL_COLUMNS.items():
        p = pred[INTERVAL_QUANTITIES[quantity][0]]
        if quantity in ("ttft", "tpot"):  # the paper model predicts no TTFT/TPOT: no interval either
            assert p.isna().all() and pred[lo].isna().all() and pred[hi].isna().all()
            continue
        assert (pred[lo] <= p).all() and (p <= pred[hi]).all()
        assert (pred[lo] < pred[hi]).all()  # the parameter part alone gives a width
    assert list(fitted.predict(df).columns) == list(
        pred.columns[: len(PRED_COLUMNS)]
    )  # no interval: none added


def test_wider_level_gives_wider_interval_and_bad_levels_are_refused(fitted, synthetic_cv):
    m = PaperModel(gpu=GPU, n_starts=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(noisy(0)).attach_intervals(residual_model(synthetic_cv, "paper"), noisy(0))
    df = noisy(2)
    a, b = m.predict(df, interval=0.5), m.predict(df, interval=0.95)
    lo, hi = INTERVAL_COLUMNS["throughput"]
    assert ((b[hi] / b[lo]) > (a[hi] / a[lo])).all()
    for bad in (0, 1, 1.5, -0.1, True, "0.9"):
        with pytest.raises(DataError, match="interval level"):
            m.predict(df, interval=bad)


def test_parameter_file_round_trips_residual_model_domain_and_covariance(fitted, synthetic_cv):
    train = noisy(0)
    m = PaperModel(gpu=GPU, n_starts=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(train)
    m.attach_intervals(residual_model(synthetic_cv, "paper"), train)
    doc = json.loads(m.to_json())
    assert doc["intervals"]["residuals"]["method"] == "paper"
    back = load_params(m.to_json())
    assert back.residuals_ == m.residuals_ and back.domain_ == m.domain_
    pd.testing.assert_frame_equal(back.covariance(), m.covariance())
    df = noisy(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IntervalWarning)  # full intervals: no warning
        pd.testing.assert_frame_equal(back.predict(df, interval=0.9), m.predict(df, interval=0.9))
    doc["intervals"]["residuals"]["axes"]["batch"]["throughput"]["quantiles"] = [0.0, 1.0]
    with pytest.raises(DataError, match="do not have"):
        load_params(json.dumps(doc))
    doc["intervals"] = {"residuals": None, "domain": None}
    with pytest.raises(DataError, match="intervals.residuals"):
        load_params(json.dumps(doc))


def test_coverage_on_model_generated_data_is_near_nominal(synthetic_cv):
    cov = coverage_table(synthetic_cv)
    row = cov[(cov["dataset"] == "all") & (cov["quantity"] == "throughput")].iloc[0]
    assert row["n_folds"] == 8 and row["n_test"] == 8 * 24
    assert 0.85 <= row["coverage"] <= 0.97, row
    # the interval is nested: no fold's rows are inside its own learned quantiles by construction
    e = nested_intervals(synthetic_cv)
    assert e["low"].notna().all()
    # the widths: high / low at the median, (high - low) / prediction on average; a log-symmetric interval of half
    # width h has high / low = exp(2 h) and (high - low) / prediction = 2 sinh(h)
    t = e[e["quantity"] == "throughput"]
    assert row["mean_rel_width"] == pytest.approx(((t["high"] - t["low"]) / t["predicted"]).mean())
    h = np.log(t["high"] / t["low"]) / 2
    assert row["mean_rel_width"] == pytest.approx((2 * np.sinh(h)).mean(), rel=1e-6)
    assert row["median_width"] == pytest.approx(np.median(t["high"] / t["low"]))


def test_coverage_of_a_too_narrow_interval_is_measured_as_low(synthetic_cv):
    e = nested_intervals(synthetic_cv, level=0.5)
    cov = e.loc[e["quantity"] == "throughput", "covered"].mean()
    assert 0.35 <= cov <= 0.7


def test_residual_model_quantiles_of_a_known_distribution():
    rng = np.random.default_rng(0)
    errors = pd.DataFrame(
        {"axis": "batch", "quantity": "throughput", "log_error": 0.1 * rng.standard_normal(20000)}
    )
    rm = ResidualModel.from_errors(errors)
    one = np.zeros(1)
    h = rm.half_widths("batch", "throughput", 0.9, one, np.nan)
    assert h[0] == pytest.approx(0.1645, abs=0.005)  # |N(0, 0.1)| at 0.9
    assert rm.half_widths("pooled", "throughput", 0.9, one, np.nan) == pytest.approx(h)
    assert len(rm.axes["batch"]["throughput"].quantiles) == len(GRID)
    assert ResidualModel.from_dict(json.loads(json.dumps(rm.to_dict()))) == rm
    with pytest.raises(DataError, match="no 'e2e' part"):
        rm.half_widths("batch", "e2e", 0.9, one, np.nan)
    assert conformal_prob(9, 0.9) == 1.0 and conformal_prob(99, 0.9) == pytest.approx(90 / 99)
    with pytest.raises(DataError, match="earlier form"):
        ResidualModel.from_dict({"quantiles": {}, "n": {}})  # a residual model of the signed form: refit
    with pytest.raises(DataError, match="earlier form"):
        ResidualModel.from_dict({**rm.to_dict(), "format": 2})  # the larger-of-two rule's form: refit


def test_a_model_of_named_axes_has_their_parts_and_the_pooled_ones_as_the_whole_model_does():
    rng = np.random.default_rng(2)
    n = 3000
    errors = pd.DataFrame({"axis": rng.choice(["batch", "input", "model"], n),
                           "quantity": rng.choice(["throughput", "ttft"], n),
                           "fold": rng.choice(list("abcd"), n), "distance": rng.uniform(0, 2, n),
                           "log_error": 0.1 * rng.standard_normal(n)})  # fmt: skip
    whole = ResidualModel.from_errors(errors, min_folds=3, moe_errors=errors.head(500))
    part = ResidualModel.from_errors(errors, min_folds=3, moe_errors=errors.head(500), only_axes=("input",))
    assert sorted(part.axes) == ["input", "pooled"] and part.axes["input"] == whole.axes["input"]
    assert part.axes["pooled"] == whole.axes["pooled"]
    assert part.moe is not None and whole.moe is not None and sorted(part.moe.axes) == ["input", "pooled"]
    assert part.moe.axes["input"] == whole.moe.axes["input"]


def test_the_scale_grows_with_the_extrapolation_distance_when_the_errors_do():
    """Errors whose spread grows as 1 + d: the learned scale picks a positive lambda, and the interval of a far row
    is wider than a near one's; the nested coverage of such errors is near nominal at both distances."""
    rng = np.random.default_rng(1)
    d = rng.uniform(0.0, 4.0, 4000)
    errors = pd.DataFrame({"axis": "batch", "quantity": "throughput", "distance": d,
                           "log_error": 0.05 * (1 + d) * rng.standard_normal(d.size)})  # fmt: skip
    rm = ResidualModel.from_errors(errors)
    m = rm.axes["batch"]["throughput"]
    assert m.lam >= 0.5
    near, far = rm.half_widths("batch", "throughput", 0.9, np.array([0.0, 4.0]), np.nan)
    assert far / near == pytest.approx(5.0, rel=0.3)
    test_d = rng.uniform(0.0, 4.0, 4000)
    r = 0.05 * (1 + test_d) * rng.standard_normal(test_d.size)
    h = rm.half_widths("batch", "throughput", 0.9, test_d, np.nan)
    for sel in (test_d < 1.0, test_d > 3.0):
        assert 0.86 <= np.mean(np.abs(r[sel]) <= h[sel]) <= 0.94
    flat = ResidualModel.from_errors(errors.assign(log_error=0.05 * rng.standard_normal(d.size)))
    assert flat.axes["batch"]["throughput"].lam <= 0.25  # errors that do not grow: no (or little) slope


def test_extrapolation_distance_sums_the_log_ratios_outside_the_domain():
    train = pd.DataFrame({"model": ["opt-1.3b"] * 2, "batch_size": [1.0, 4.0], "input_len": [128.0, 128.0],
                          "output_len": [64.0, 64.0]})  # fmt: skip
    dom = fit_domain(train, GPU)
    rows = pd.DataFrame({"model": ["opt-1.3b", "opt-1.3b", "opt-1.3b"], "batch_size": [2.0, 16.0, 16.0],
                         "input_len": [128.0, 128.0, 512.0], "output_len": [64.0, 64.0, 64.0]})  # fmt: skip
    d = extrapolation_distance(rows, dom, GPU)
    assert d == pytest.approx([0.0, np.log(4.0), np.log(4.0) + np.log(4.0)])
    other = extrapolation_distance(rows.iloc[:1].assign(model="opt-6.7b"), dom, GPU)[0]
    sizes = [get_architecture(m).n_params for m in ("opt-1.3b", "opt-6.7b")]
    assert other == pytest.approx(np.log(sizes[1] / sizes[0]))
    moved = extrapolation_distance(rows.iloc[:1], dom, "mi300x")[0]
    assert moved == pytest.approx(abs(np.log(get_gpu("mi300x").mem_bw / get_gpu(GPU).mem_bw)))


def test_rows_are_assigned_the_axes_they_extrapolate_on():
    train = pd.DataFrame({"model": ["opt-1.3b"] * 2, "batch_size": [1.0, 4.0], "input_len": [128.0, 128.0],
                          "output_len": [64.0, 64.0]})  # fmt: skip
    dom = fit_domain(train, GPU)
    rows = pd.DataFrame({"model": ["opt-1.3b", "opt-1.3b", "opt-6.7b", "opt-1.3b"], "batch_size": [2.0, 8.0, 2.0, 2.0],
                         "input_len": [128.0, 128.0, 128.0, 512.0], "output_len": [64.0, 64.0, 64.0, 64.0]})  # fmt: skip
    axes = row_axes(rows, dom, GPU)
    assert axes == [["pooled"], ["batch", "batch-knee"], ["model"], ["input", "context"]]
    assert row_axes(rows.iloc[:1], dom, "mi300x") == [["device"]]


def test_slim_predict_interval_writes_the_columns(tmp_path, fitted, synthetic_cv):
    m = PaperModel(gpu=GPU, n_starts=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(noisy(0))
    m.attach_intervals(residual_model(synthetic_cv, "paper"), noisy(0))
    params = tmp_path / "params.json"
    m.to_json(params)
    grid_csv = tmp_path / "grid.csv"
    noisy(4).drop(columns=["throughput_tok_s", "e2e_s"]).to_csv(grid_csv, index=False)
    out = tmp_path / "pred.csv"
    assert main(["predict", str(params), str(grid_csv), "--out", str(out), "--interval", "0.9"]) == 0
    pred = pd.read_csv(out)
    lo, hi = INTERVAL_COLUMNS["throughput"]
    assert (pred[lo] <= pred["pred_throughput_tok_s"]).all() and (
        pred["pred_throughput_tok_s"] <= pred[hi]
    ).all()
    assert main(["predict", str(params), str(grid_csv), "--out", str(tmp_path / "p2.csv")]) == 0
    assert lo not in pd.read_csv(tmp_path / "p2.csv").columns


def test_the_advisor_curve_carries_the_intervals_of_the_same_predict(synthetic_cv):
    from slimlib.advisor.capacity import advise

    m = PaperModel(gpu=GPU, n_starts=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(noisy(0))
    m.attach_intervals(residual_model(synthetic_cv, "paper"), noisy(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # physical-validity warnings of the large candidates
        plain = advise(m, "opt-1.3b", 128, 64, slo_s=10.0, batch_sizes=[1, 8, 64, 512])
        adv = advise(m, "opt-1.3b", 128, 64, slo_s=10.0, batch_sizes=[1, 8, 64, 512], interval=0.9)
    c = adv.curve
    lo, hi = INTERVAL_COLUMNS["throughput"]
    assert lo not in plain.curve.columns
    assert (c[lo] <= c["pred_throughput_tok_s"]).all() and (c["pred_throughput_tok_s"] <= c[hi]).all()
    assert (c[hi] / c[lo]).iloc[-1] > (c[hi] / c[lo]).iloc[0]  # B = 512 extrapolates beyond the fit's B = 256
    assert adv.b_cap == plain.b_cap


def test_slim_fit_intervals_stores_the_shipped_residual_model_pooled_with_its_own_errors(tmp_path):
    data = tmp_path / "runs.csv"
    noisy(0).to_csv(data, index=False)
    params = tmp_path / "params.json"
    assert (
        main(["fit", str(data), "--out", str(params), "--variant", "paper", "--starts", "0", "--intervals"])
        == 0
    )
    m = load_params(params)
    shipped = load_shipped("paper", PARAMS_FORMAT_VERSION)
    assert m.residuals_.axes[POOLED] == shipped.axes[POOLED] and m.domain_.max_values["batch_size"] == 256
    assert m.residuals_.axes["batch"]["throughput"].n > shipped.axes["batch"]["throughput"].n
    assert (
        main(["fit", str(data), "--out", str(tmp_path / "p2.json"), "--variant", "paper", "--starts", "0"])
        == 0
    )
    assert "intervals" not in json.loads((tmp_path / "p2.json").read_text())


@pytest.fixture(scope="module")
def slim_fitted():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SlimModel(gpu=GPU, n_starts=0).fit(noisy(0))


def test_the_recommended_model_predicts_ttft_and_tpot_from_its_prefill_and_decode(slim_fitted):
    """A static batch of 8 prompts of 128 tokens in 512-token steps: half the prompts wait a step for the budget,
    and the first half's decodes take 4 tokens of the second step's, so the last prompt ends in a third: the 99th
    percentile of TTFT is above the 50th, every TTFT below t_fixed, the whole batch's prefill and two decode steps;
    the batch ends at the batch model's E2E, so its requests' mean TTFT + (OL - 1) TPOT is below it."""
    df = noisy(1).head(3).assign(batch_size=8.0, input_len=128.0, output_len=64.0, client="static",
                                 chunked_prefill=True, max_num_batched_tokens=512)  # fmt: skip
    pred = slim_fitted.predict(df)
    fixed = pred["pred_e2e_s"] - pred["pred_prefill_s"] - pred["pred_decode_s"]
    assert (fixed > 0).all() and (pred["pred_queue_s"] > 0).all()
    assert (pred["pred_ttft_p99_s"] > pred["pred_ttft_p50_s"]).all()
    step = pred["pred_decode_s"] / 63
    assert (pred["pred_ttft_p99_s"] < fixed + pred["pred_prefill_s"] + 2.5 * step).all()
    mean_e2e = pred["pred_ttft_s"] + 63 * pred["pred_tpot_s"]
    assert (mean_e2e < pred["pred_e2e_p99_s"]).all() and (
        pred["pred_e2e_p99_s"] <= pred["pred_e2e_s"] + 1e-12
    ).all()
    assert (pred["pred_e2e_p99_s"] > pred["pred_e2e_s"] - step).all()  # the last request ends with the batch


def test_ttft_and_tpot_get_intervals_from_their_own_residual_part(slim_fitted):
    rng = np.random.default_rng(2)
    errors = pd.concat([pd.DataFrame({"axis": "batch", "quantity": q, "fold": rng.integers(0, 4, 400),
                                      "log_error": s * rng.standard_normal(400)})
                        for q, s in (("throughput", 0.05), ("e2e", 0.05), ("ttft", 0.8), ("tpot", 0.2))])  # fmt: skip
    m = SlimModel(gpu=GPU, n_starts=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(noisy(0))
    m.attach_intervals(ResidualModel.from_errors(errors), noisy(0))
    df = noisy(5).head(4).assign(batch_size=1024.0)  # beyond the fitted B: the batch axis's parts
    with warnings.catch_warnings():
        warnings.simplefilter("error", IntervalWarning)
        pred = m.predict(df, interval=0.9)
    widths = {}
    for q, (lo, hi) in INTERVAL_COLUMNS.items():
        p = pred[INTERVAL_QUANTITIES[q][0]]
        assert (pred[lo] < p).all() and (p < pred[hi]).all()
        widths[q] = float(np.median(np.log(pred[hi] / pred[lo])))
    assert widths["ttft"] > 3 * widths["tpot"] > 3 * widths["throughput"]  # each from its own errors
    m.attach_intervals(ResidualModel.from_errors(errors[errors["quantity"] != "ttft"]), noisy(0))
    with pytest.warns(IntervalWarning, match="no 'ttft' part"):
        m.predict(df, interval=0.9)


def test_the_interval_is_the_residual_part_where_a_model_applies_else_the_parameter_part():
    """h = q w (the parameter part inside w) where the residual model gives a half width; z s alone where it gives
    none (NaN); never the larger of the two, which over-covers where they are alike."""
    z = normal_quantile(0.9)
    pred = np.array([100.0, 100.0, 100.0, 100.0])
    sd = np.array([0.01, 0.2, 0.3, np.nan])
    half = np.array([0.1, 0.1, np.nan, np.nan])
    lo, hi = interval_bounds(pred, sd, half, 0.9)
    np.testing.assert_allclose(np.log(hi / pred), [0.1, 0.1, z * 0.3, 0.0])
    np.testing.assert_allclose(np.log(pred / lo), np.log(hi / pred))
    assert np.isnan(residual_half_widths(None, [["batch"]] * 2, "throughput", 0.9, np.zeros(2), 0.05)).all()


def test_the_scale_takes_in_the_parameter_part_when_it_explains_the_errors():
    """Held-out errors whose spread is the fit's parameter part s: the learned kappa is positive, a row with a
    larger s gets a proportionally wider interval, and coverage is near nominal at small and large s alike; errors
    unrelated to s: kappa 0 and the interval ignores s (the residual quantile already holds a typical fit's)."""
    rng = np.random.default_rng(3)
    s = rng.uniform(0.01, 0.3, 6000)
    errors = pd.DataFrame({"axis": "batch", "quantity": "throughput", "log_sd": s, "train_error": 0.05,
                           "log_error": s * rng.standard_normal(s.size)})  # fmt: skip
    rm = ResidualModel.from_errors(errors)
    assert rm.axes["batch"]["throughput"].kappa > 0
    small, large = rm.half_widths(
        "batch", "throughput", 0.9, np.zeros(2), np.full(2, 0.05), np.array([0.02, 0.2])
    )
    assert large / small == pytest.approx(10.0, rel=0.3)
    test_s = rng.uniform(0.01, 0.3, 6000)
    r = test_s * rng.standard_normal(test_s.size)
    h = rm.half_widths("batch", "throughput", 0.9, np.zeros(test_s.size), np.full(test_s.size, 0.05), test_s)
    for sel in (test_s < 0.1, test_s > 0.2):
        assert 0.86 <= np.mean(np.abs(r[sel]) <= h[sel]) <= 0.94
    flat = ResidualModel.from_errors(errors.assign(log_error=0.05 * rng.standard_normal(s.size)))
    assert flat.axes["batch"]["throughput"].kappa == 0.0
    a, b = flat.half_widths("batch", "throughput", 0.9, np.zeros(2), np.full(2, 0.05), np.array([0.01, 0.3]))
    assert a == pytest.approx(b)


def test_a_column_of_kappas_gives_each_kappas_scale_exactly():
    """`scale` with a column of kappas (how the learning searches them all at once) equals, bit for bit, one call
    per kappa; NaN parameter parts count as 0 in both."""
    rng = np.random.default_rng(5)
    d, e = rng.uniform(0, 3, 50), rng.uniform(0, 0.2, 50)
    s = np.where(rng.random(50) < 0.2, np.nan, rng.uniform(0, 0.3, 50))
    kappas = (0.0, 0.5, 4.0, 16.0)
    together = scale(d, e, 0.5, 0.7, s, np.asarray(kappas)[:, None])
    assert together.shape == (len(kappas), 50)
    for row, kappa in zip(together, kappas, strict=True):
        assert np.array_equal(row, scale(d, e, 0.5, 0.7, s, kappa))


def test_kernel_composed_rows_are_scored_but_calibrate_no_interval(synthetic_cv):
    # the same folds labelled as the kernel-composed dataset, their "measurements" three times off: they get
    # intervals and a coverage of their own, but the measured rows' intervals, the per-axis coverage and the stored
    # residual model are those of the measured dataset alone
    from slimlib.experiments.accuracy.composed_curves import COMPOSED

    base = synthetic_axis()
    off = [
        Fold(f.label, f.train, f.test.assign(throughput_tok_s=3 * f.test["throughput_tok_s"]))
        for f in base.folds
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        both = run_extrapolation_cv(["paper"], axes=[base, AxisFolds("batch", COMPOSED, "", off)], n_starts=0)
    alone, mixed = nested_intervals(synthetic_cv), nested_intervals(both)
    mine = mixed[mixed["dataset"] == "synthetic"].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone[["low", "high", "covered"]], mine[["low", "high", "covered"]])
    theirs = mixed[(mixed["dataset"] == COMPOSED) & (mixed["quantity"] == "throughput")]
    assert len(theirs) and theirs["low"].notna().all() and theirs["covered"].mean() < 0.5
    c = coverage_table(both)
    per_axis = c[(c["dataset"] == "all") & (c["quantity"] == "throughput")]
    assert int(per_axis["n_test"].iloc[0]) == sum(len(f.test) for f in base.folds)
    assert (
        residual_model(both, "paper").to_dict()["axes"]
        == residual_model(synthetic_cv, "paper").to_dict()["axes"]
    )


@pytest.fixture
def mixtral_h200(composed):
    """`slim` fitted on Mixtral-8x7B's kernel-composed H200 curves at B <= 4, those rows, and the rows at B >= 64."""
    t = composed
    g = t[(t["model"] == "mixtral-8x7b") & (t["gpu"] == "h200-sxm") & (t["tensor_parallel"] == 1)]
    train, past = g[g["batch_size"] <= 4], g[g["batch_size"] >= 64]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SlimModel(n_starts=0).fit(train), train, past


def test_a_mixture_of_experts_past_its_fitted_batches_is_told_its_interval_is_too_narrow(
    synthetic_cv, mixtral_h200
):
    # a residual model without a mixture-of-experts part (the synthetic protocol has no such rows): where the
    # kernel-composed mixture-of-experts curves of the cross-validation held too few rows (MOE_NARROW_AXES) a
    # prediction says so; inside the fitted batches, or for a dense model, it does not
    m, train, past = mixtral_h200
    rm = residual_model(synthetic_cv, "paper")
    assert rm.moe is None
    m.attach_intervals(rm, train)
    with pytest.warns(
        IntervalWarning, match=r"mixture of experts \(mixtral-8x7b\) extrapolate on the batch axis"
    ):
        m.predict(past, interval=0.9)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m.predict(train, interval=0.9)  # inside the fitted batches: no such warning
    assert not [w for w in caught if "mixture of experts" in str(w.message)]
    dom = fit_domain(train, "h200-sxm")
    dense = past.assign(model="llama-3-8b")
    assert (
        moe_narrow_message(dense, moe_rows(dense), row_axes(dense, dom, "h200-sxm"), ["throughput"]) is None
    )
    moved = moe_narrow_message(train, moe_rows(train), row_axes(train, dom, "b200-sxm-180gb"), ["throughput"])
    assert moved is not None and "device" in moved and set(MOE_NARROW_AXES) == {"batch", "model", "device"}
    assert moe_narrow_message(train, moe_rows(train), row_axes(train, dom, "b200-sxm-180gb"), []) is None


#: sd of the per-fold log bias of the synthetic mixture-of-experts curves (a systematic error per curve, like the
#: fused-MoE kernel's, that the dense rows do not have)
MOE_BIAS = 0.3


def moe_axis(n_folds: int = 10) -> AxisFolds:
    """Mixtral-8x7B rows of the paper model, each fold's times off by its own log-normal factor (sd `MOE_BIAS`)
    and row noise `NOISE`: fit B <= 16, validate B >= 64 (dataset ``aic-composed-moe``)."""
    truth = PaperModel.with_params(TRUE_PARAMS, gpu=GPU)
    rng = np.random.default_rng(11)
    folds = []
    for k in range(n_folds):
        d = synthesize(truth, grid(models=("mixtral-8x7b",), batch=(1, 2, 4, 8, 16, 64, 256)))
        big = d["batch_size"] >= 64
        factor = np.exp(
            NOISE * rng.standard_normal(len(d)) + np.where(big, MOE_BIAS * rng.standard_normal(), 0.0)
        )
        d["throughput_tok_s"] *= factor
        d["e2e_s"] /= factor
        folds.append(Fold(f"curve {k}", d[~big], d[big]))
    return AxisFolds("batch", COMPOSED_MOE, "fit B <= 16, validate B >= 64", folds)


def test_a_mixture_of_experts_takes_the_wider_part_learned_on_its_own_held_out_curves():
    """The residual model's MoE part is learned on the mixtures of experts' held-out rows and widens only their
    intervals: their nested coverage holds where the dense rows' part alone held too few of them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cv = run_extrapolation_cv(["paper"], axes=[synthetic_axis(), moe_axis()], n_starts=0)
    rm = residual_model(cv, "paper")
    assert rm.moe is not None and rm.moe.has("batch", "throughput") and "mixture-of-experts part" in rm.source
    cov = coverage_table(cv).set_index(["dataset", "quantity"])
    assert 0.8 <= cov.loc[(COMPOSED_MOE, "throughput"), "coverage"] <= 0.99
    assert 0.85 <= cov.loc[("all", "throughput"), "coverage"] <= 0.97  # the dense rows' coverage as before
    # the same rows with the dense part alone (no MoE part learned): far too few covered
    e = log_errors(cv)
    e = e[(e["dataset"] == COMPOSED_MOE) & (e["quantity"] == "throughput")]
    dense = ResidualModel.from_errors(log_errors(cv).query("dataset == 'synthetic'"), min_folds=3)
    half = residual_half_widths(dense, [["batch"]] * len(e), "throughput", 0.9, e["distance"].to_numpy(),
                                float(e["train_error"].median()), e["log_sd"].to_numpy(), np.ones(len(e), bool))  # fmt: skip
    assert (np.abs(e["log_error"]) <= half).mean() < 0.6
    # only a mixture of experts' rows take the MoE part, and there the wider of the two
    moe = np.array([True, False])
    for quantity in ("throughput", "e2e"):
        both = residual_half_widths(rm, [["batch"], ["batch"]], quantity, 0.9, np.ones(2), 0.05, 0.0, moe)
        alone = residual_half_widths(rm, [["batch"], ["batch"]], quantity, 0.9, np.ones(2), 0.05, 0.0)
        part = residual_half_widths(rm.moe, [["batch"]], quantity, 0.9, np.ones(1), 0.05, 0.0)
        assert both[1] == alone[1] and both[0] == max(alone[0], part[0]) and part[0] > alone[0]
    # it round-trips through a parameter file's dict; a dict without it (earlier files) has none
    d = rm.to_dict()
    assert ResidualModel.from_dict(d) == rm
    assert ResidualModel.from_dict({**d, "moe": None}).moe is None
    assert ResidualModel.from_dict({k: v for k, v in d.items() if k != "moe"}).moe is None


def test_a_mixture_of_experts_is_warned_only_of_the_quantities_without_a_moe_part(mixtral_h200):
    """The composed curves give throughput and E2E: with a MoE part for those, a mixture of experts past its
    fitted batches is told that its TTFT and TPOT intervals have none, and of nothing else."""
    rng = np.random.default_rng(2)
    rows = [{"axis": "batch", "quantity": q, "fold": f"f{k % 4}", "log_error": 0.1 * rng.standard_normal()}
            for q in INTERVAL_QUANTITIES for k in range(40)]  # fmt: skip
    dense = pd.DataFrame(rows)
    moe = dense[dense["quantity"].isin(["throughput", "e2e"])].assign(log_error=lambda d: 3 * d["log_error"])
    rm = ResidualModel.from_errors(dense, min_folds=3, moe_errors=moe)
    m, train, past = mixtral_h200
    m.attach_intervals(rm, train)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = m.predict(past, interval=0.9)
    said = [str(w.message) for w in caught if "mixture of experts" in str(w.message)]
    assert len(said) == 1 and "their TTFT and TPOT interval(s) have no mixture-of-experts part" in said[0]
    # the throughput interval is the MoE part's (three times the dense errors: wider than the dense part alone)
    m.attach_intervals(ResidualModel.from_errors(dense, min_folds=3), train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = m.predict(past, interval=0.9)
    lo, hi = INTERVAL_COLUMNS["throughput"]
    assert (np.log(pred[hi] / pred[lo]) > 2 * np.log(alone[hi] / alone[lo])).all()
    lo, hi = INTERVAL_COLUMNS["tpot"]
    np.testing.assert_allclose(pred[hi] / pred[lo], alone[hi] / alone[lo])


def _corrupt(doc: dict, path: str, value: object) -> dict:
    """`doc` (a parameter file's content, copied) with the field at the dotted `path` set to `value`."""
    out = json.loads(json.dumps(doc))
    *parents, last = path.split(".")
    here = out
    for key in parents:
        here = here[int(key)] if key.isdigit() else here[key]
    if last.isdigit():
        here[int(last)] = value
    else:
        here[last] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "intervals.residuals.axes.batch.throughput.quantiles.3",
            None,
            r"'intervals.residuals' is malformed",
        ),
        (
            "intervals.residuals.axes.batch.throughput.quantiles.0",
            -1.0,
            r"its quantiles are not finite, non-neg",
        ),
        ("intervals.residuals.axes.batch.throughput.quantiles.200", 1e9, r"ordered up to at most 100"),
        ("intervals.residuals.axes.batch.throughput.quantiles.200", 700.0, r"ordered up to at most 100"),
        ("intervals.residuals.axes.pooled.e2e.quantiles.100", 0.0, r"pooled/e2e: its quantiles .* ordered"),
        (
            "intervals.residuals.axes.batch.throughput.lambda",
            -1.0,
            r"batch/throughput: lambda is -1.0, not a finite number >= 0",
        ),
        ("intervals.residuals.axes.batch.throughput.kappa", 1e400, r"kappa is inf"),
        ("intervals.residuals.axes.batch.throughput.beta", -0.5, r"beta is -0.5"),
        ("intervals.residuals.axes.batch.throughput.n", -3, r"it counts -3 rows"),
        ("intervals.residuals.axes", {}, r"has no pooled part"),
        ("intervals.domain.max.batch_size", float("nan"), r"gives batch_size a maximum of nan"),
        ("intervals.domain.max.input_len", -128, r"gives input_len a maximum of -128.0"),
        ("corr.matrix.0.1", 5.0, r"'corr' is not a correlation matrix"),
        ("stderr.t_fixed", -1.0, r"'stderr' of 't_fixed' is -1.0"),
    ],
)
def test_a_corrupted_parameter_file_is_refused_naming_the_field(slim_fitted, path, value, message):
    rng = np.random.default_rng(3)
    errors = pd.concat([pd.DataFrame({"axis": "batch", "quantity": q, "fold": rng.integers(0, 4, 200),
                                      "log_error": 0.1 * rng.standard_normal(200)})
                        for q in ("throughput", "e2e")])  # fmt: skip
    doc = json.loads(slim_fitted.to_json())
    doc["intervals"] = {"residuals": ResidualModel.from_errors(errors).to_dict(),
                        "domain": Domain({"batch_size": 64.0, "input_len": 512.0}, ("llama-2-7b",), GPU).to_dict()}  # fmt: skip
    load_params(json.dumps(doc))  # the intact file loads
    bad = _corrupt(doc, path, value)
    with pytest.raises(DataError, match=message):
        load_params(json.dumps(bad))
