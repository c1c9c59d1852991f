"""The parameter part of a prediction interval (`CalibratedModel.log_sds`): the delta method on the covariance
bounded by the parameters' boxes (`box_bounded_covariance`), as the log distance to the one-standard-deviation
bound. It must stay finite where the rows barely determine a parameter, and equal the plain delta method where they
determine it well."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from synthetic import SLIM_TRUE_PARAMS, grid, synthesize

import slimlib.model.calibrated as calibrated
from slimlib.experiments.accuracy.extrapolation_folds import build_axis_folds
from slimlib.model import SlimModel
from slimlib.model.calibrated import box_bounded_covariance
from slimlib.model.params import ParamSpec


def _spec(name: str, lower: float, upper: float) -> ParamSpec:
    return ParamSpec(name=name, lower=lower, upper=upper, scale=1.0, init=lower + 0.5, unit="", doc="")


def _sds(model, df, bounded: bool, monkeypatch) -> dict[str, np.ndarray]:
    """`parameter_log_sds` of `model` on `df`; ``bounded=False``: the earlier rule (the covariance as fitted, the
    delta method's relative deviation itself)."""
    with monkeypatch.context() as m:
        if not bounded:
            m.setattr(calibrated, "box_bounded_covariance", lambda cov, specs: cov)
            m.setattr(calibrated, "one_sd_log_distance", lambda r: r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return model.parameter_log_sds(df)


def _fit(df):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SlimModel(n_starts=2).fit(df)


def test_an_unresolved_parameter_keeps_no_more_spread_than_its_box():
    specs = [_spec("a", 0.0, 1.0), _spec("b", 0.0, 1.0)]
    cov = np.array([[1e6, 0.0], [0.0, 1e-6]])
    out = box_bounded_covariance(cov, specs)
    assert out[0, 0] == pytest.approx(1 / 12, rel=1e-3)  # the uniform's variance: the rows say nothing
    assert out[1, 1] == pytest.approx(1e-6, rel=1e-3)  # well determined: unchanged


def test_the_bounded_covariance_is_a_smaller_covariance():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3))
    cov = a @ a.T * np.array([1.0, 100.0, 0.01])[:, None] * np.array([1.0, 100.0, 0.01])[None, :]
    specs = [_spec("a", 0.0, 2.0), _spec("b", 0.001, 1.5), _spec("c", 0.0, np.inf)]
    out = box_bounded_covariance(cov, specs)
    assert np.allclose(out, out.T)
    assert np.linalg.eigvalsh(out).min() > -1e-12  # a covariance
    assert np.linalg.eigvalsh(cov - out).min() > -1e-9  # never wider than the fitted one in any direction
    assert out[1, 1] <= (1.5 - 0.001) ** 2 / 12
    only_unbounded = box_bounded_covariance(cov[2:, 2:], specs[2:])
    assert np.array_equal(only_unbounded, cov[2:, 2:])  # no finite box: nothing to bound by


#: the measured latency columns of a scenario table (a fit reads them beside the throughput)
LATENCIES = ["mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms"]


def test_ttft_part_stays_finite_where_the_rows_do_not_determine_the_prefill(monkeypatch):
    """The public H100 offline batches at B <= 4 (the batch fold): E2E barely sees the prefill, so eta_c's
    standard error exceeds its box and the earlier rule gave TTFT a log deviation above 10 (a factor e^20 at 90%)."""
    axis = next(a for a in build_axis_folds(datasets=["memgap-offline"]) if a.axis == "batch")
    fold = axis.folds[0]
    model = _fit(fold.train.drop(columns=LATENCIES))  # its throughput alone: the logged TPOT would resolve it
    assert model.stderr_["eta_c"] > 1.0  # the box is [0.001, 1]: unresolved
    before = _sds(model, fold.test, bounded=False, monkeypatch=monkeypatch)
    after = _sds(model, fold.test, bounded=True, monkeypatch=monkeypatch)
    assert np.max(before["ttft"]) > 10
    assert np.all(np.isfinite(after["ttft"])) and np.max(after["ttft"]) < 1.5
    for q in after:
        assert np.all(after[q] <= before[q] + 1e-12)


def test_a_well_determined_fit_keeps_the_delta_method(monkeypatch):
    truth = SlimModel.with_params(SLIM_TRUE_PARAMS, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid(batch=(1, 2, 4, 8, 16, 64, 256)))
    noise = np.exp(0.02 * np.random.default_rng(1).standard_normal(len(df)))
    df["throughput_tok_s"] *= noise
    df["e2e_s"] /= noise
    model = _fit(df)
    before = _sds(model, df, bounded=False, monkeypatch=monkeypatch)
    after = _sds(model, df, bounded=True, monkeypatch=monkeypatch)
    assert 0 < np.median(before["throughput"]) < 0.05
    np.testing.assert_allclose(after["throughput"], np.log1p(before["throughput"]), rtol=0.02)
    np.testing.assert_allclose(after["throughput"], before["throughput"], rtol=0.05)
