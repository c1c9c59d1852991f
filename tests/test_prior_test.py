"""The recommended model's prior test (`CalibratedModel._prior_test`): a parameter with a measured prior that the
fit puts on a bound is held at its prior unless an F-test of the rows rejects that; the term candidates without
the test keep the bound."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from scipy.stats import f as f_dist
from synthetic import SLIM_TRUE_PARAMS, grid, synthesize

from slimlib.experiments.accuracy.extrapolation_folds import build_axis_folds
from slimlib.experiments.accuracy.scenarios import context_scenario
from slimlib.model import SlimModel
from slimlib.model.calibrated import PRIOR_TEST_LEVEL, TermModel
from slimlib.model.priors import device_prior
from slimlib.model.slim import slim_terms
from slimlib.model.terms import specs as ps
from slimlib.registry.gpus import get_gpu


def _fit(model, df):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(df)


@pytest.fixture(scope="module")
def mi300x_short_contexts():
    """LLM-Inference-Bench's MI300X rows at IL = OL <= 256 (the context fold's training rows): measured, and the
    decode attention is a small part of their time."""
    fold = next(f for f in context_scenario().folds if f.label == "MI300X")
    return fold.train


def test_an_unresolved_parameter_on_its_bound_is_held_at_its_prior(mi300x_short_contexts):
    df = mi300x_short_contexts
    free = _fit(TermModel(slim_terms(), n_starts=2), df)
    tested = _fit(SlimModel(n_starts=2), df)
    prior = ps.ETA_ATTN.prior
    assert prior is not None
    # without the test the fit leaves eta_attn on its upper bound; with it, at the measured prior
    assert free.params_["eta_attn"] == pytest.approx(ps.ETA_ATTN.upper, abs=1e-4 * ps.ETA_ATTN.scale)
    assert "eta_attn" not in free.held_
    assert "eta_attn" in tested.held_ and tested.params_["eta_attn"] == prior.median
    why = tested.held_reasons_["eta_attn"]
    assert "on its bound 1.5" in why
    # the reason's F and p are the F-test of the two fits' costs (one parameter held)
    n, p_free = len(df), len(free.free_params_)
    rss, rss_held = 2 * free.fit_info_["cost"], 2 * tested.fit_info_["cost"]
    stat = (rss_held - rss) / (rss / (n - p_free))
    m = re.search(r"F = ([\d.]+), p = ([\d.]+)", why)
    assert m is not None
    assert float(m.group(1)) == pytest.approx(stat, abs=0.006)
    assert float(m.group(2)) == pytest.approx(f_dist.sf(stat, 1, n - p_free), abs=0.006)
    assert f_dist.sf(stat, 1, n - p_free) >= PRIOR_TEST_LEVEL
    # the hold costs training error and changes the long-context prediction, which the bound made too fast
    assert tested.fit_info_["cost"] >= free.fit_info_["cost"]
    long = df.assign(input_len=2048, output_len=2048, batch_size=64).iloc[:3]
    assert (tested.predict(long)["pred_throughput_tok_s"] < free.predict(long)["pred_throughput_tok_s"]).all()


#: the measured latency columns of a scenario table: these tests fit the throughput alone, as a table without
#: latencies is fitted (the latencies resolve some of the same parameters)
LATENCIES = ["mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms"]


def test_a_bound_a_refit_reaches_is_tested_too():
    """The CPU engine's opt-1.3b-s8 curve at B <= 4 (the batch fold's training rows, measured): the free fit puts
    eta_attn on its bound; held at its prior, the refit puts eta_c on its bound 1, and that is tested in turn, both
    holds together against the free fit, so no parameter with a prior is left on a bound the rows do not resolve."""
    axis = next(a for a in build_axis_folds(datasets=["engine-cpu"]) if a.axis == "batch")
    df = next(f for f in axis.folds if f.label == "opt-1.3b-s8").train.drop(
        columns=LATENCIES
    )  # throughput only
    m = _fit(SlimModel(n_starts=2), df)
    assert {"eta_attn", "eta_c"} <= set(m.held_)
    assert "(holding eta_attn against the free fit" in m.held_reasons_["eta_attn"]
    assert "(holding eta_attn, eta_c against the free fit" in m.held_reasons_["eta_c"]
    assert "with 2 and" in m.held_reasons_["eta_c"]
    assert not [s.name for s in m.param_specs() if s.prior is not None and m._at_bound(s)]


def test_a_bound_the_rows_resolve_is_kept():
    """Rows made by a model with eta_c on its upper bound, where the prompt's compute dominates: holding eta_c at
    its prior (0.794) misses them by far, so the test rejects the hold and eta_c stays free at 1."""
    truth = SlimModel.with_params({**SLIM_TRUE_PARAMS, "eta_c": 1.0}, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid(batch=(1, 4, 16), input_len=(2048, 8192), output_len=(4, 16)))
    m = _fit(SlimModel(n_starts=2), df)
    assert "eta_c" not in m.held_ and "eta_c" in m.free_params_
    assert m.params_["eta_c"] == pytest.approx(1.0, abs=1e-3)
    assert m.fit_info_["train_mape_pct"] < 0.1


def test_the_hold_survives_save_and_load(mi300x_short_contexts):
    from slimlib.model import load_params

    m = _fit(SlimModel(n_starts=1), mi300x_short_contexts)
    back = load_params(m.to_json())
    assert back.held_ == m.held_ and "eta_attn" in back.held_
    assert back.held_reasons_["eta_attn"] == m.held_reasons_["eta_attn"]
    np.testing.assert_allclose(
        back.predict(mi300x_short_contexts)["pred_throughput_tok_s"],
        m.predict(mi300x_short_contexts)["pred_throughput_tok_s"],
        rtol=1e-12,
    )


def test_on_a_device_that_measures_the_efficiency_its_measurement_is_the_prior():
    """The host CPU's registry measures the engine's GEMM roof (decode_gemm_flops): the prior test holds eta_c at
    that roof over the peak, not at the H100's 0.794 (which the format-12 candidate, without device priors, keeps);
    a GPU without such a measurement keeps the H100 prior."""
    cpu = get_gpu("cpu")
    measured = cpu.decode_gemm_flops / cpu.peak_flops
    assert device_prior("eta_c", cpu).median == pytest.approx(measured)
    assert device_prior("eta_c", get_gpu("h100-sxm-80gb")) is None
    assert device_prior("eta_attn", cpu) is None
    axis = next(a for a in build_axis_folds(datasets=["engine-cpu"]) if a.axis == "batch")
    df = next(f for f in axis.folds if f.label == "opt-1.3b-s8").train
    m = _fit(SlimModel(n_starts=2), df)
    assert m.params_["eta_c"] == pytest.approx(measured) and "decode_gemm_flops" in m.held_reasons_["eta_c"]
    h100 = _fit(TermModel(slim_terms(), n_starts=2, test_priors_at_bound=True), df)
    assert h100.params_["eta_c"] == pytest.approx(ps.ETA_C.prior.median)


def test_a_few_point_fit_holds_the_devices_own_prior():
    axis = next(a for a in build_axis_folds(datasets=["engine-cpu"]) if a.axis == "batch")
    df = next(f for f in axis.folds if f.label == "opt-1.3b-s8").train.head(4).drop(columns=LATENCIES)
    m = _fit(SlimModel(n_starts=0), df)
    cpu = get_gpu("cpu")
    assert m.params_["eta_c"] == pytest.approx(cpu.decode_gemm_flops / cpu.peak_flops)
    assert "free parameters" in m.held_reasons_["eta_c"]
