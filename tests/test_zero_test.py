"""The zero test of the candidate ``slim+zero-test`` (`CalibratedModel._zero_test`): an additive cost the rows do not
resolve is held at 0, the term's absence, by backward elimination with F-tests; a cost they resolve stays free.
The cross-validation rejects the rule (README, figures/extrap_cv.md); these tests pin what it does."""

from __future__ import annotations

import re
import warnings

import pytest
from scipy.stats import f as f_dist
from synthetic import SLIM_TRUE_PARAMS, grid, synthesize

from slimlib.experiments.accuracy.extrapolation import new_model
from slimlib.experiments.accuracy.extrapolation_candidates import resolve_candidate
from slimlib.experiments.accuracy.extrapolation_folds import build_axis_folds
from slimlib.model import ExtendedSlimModel
from slimlib.model.calibrated import PRIOR_TEST_LEVEL, ZERO_TEST_PARAMS, TermModel
from slimlib.model.extended import slim_terms


def _fit(model, df):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(df)


def _zero_tested(**kw) -> TermModel:
    return TermModel(slim_terms(), test_priors_at_bound=True, device_priors=True, test_zero_costs=True, **kw)


@pytest.fixture(scope="module")
def gqa_cpu_short_batches():
    """The CPU engine's qwen3s-h768 curves at B <= 4 (the batch fold's training rows): measured, and the
    per-sequence cost alpha is a small part of their time."""
    axis = next(a for a in build_axis_folds() if a.axis == "batch" and a.dataset == "engine-cpu")
    return next(f for f in axis.folds if f.label == "qwen3s-h768").train


def test_unresolved_costs_are_held_at_zero_with_the_f_test_in_the_reason(gqa_cpu_short_batches):
    df = gqa_cpu_short_batches
    plain = _fit(ExtendedSlimModel(n_starts=2), df)
    tested = _fit(_zero_tested(n_starts=2), df)
    # the recommended fit puts a per-sequence cost on these rows; the zero test holds it (and t_fixed) at 0
    assert plain.params_["alpha"] > 1e-4 and "alpha" in plain.free_params_
    assert {"alpha", "t_fixed"} <= set(tested.held_)
    assert tested.params_["alpha"] == 0.0 and tested.params_["t_fixed"] == 0.0
    assert set(tested.held_) - set(plain.held_) <= set(ZERO_TEST_PARAMS)
    # the last hold's F and p are the F-test of the two fits' costs, every zero hold together
    why = max((tested.held_reasons_[k] for k in ("alpha", "t_fixed")), key=len)
    q = len(re.search(r"holding (.*?) at 0", why).group(1).split(", "))
    assert q == 2
    n, p_free = len(df), len(plain.free_params_)
    rss, rss_held = 2 * plain.fit_info_["cost"], 2 * tested.fit_info_["cost"]
    stat = (rss_held - rss) / q / (rss / (n - p_free))
    m = re.search(r"F = ([\d.]+), p = ([\d.]+) >= [\d.]+ with (\d) and (\d+)", why)
    assert m is not None and int(m.group(3)) == q and int(m.group(4)) == n - p_free
    assert float(m.group(1)) == pytest.approx(stat, abs=0.006)
    assert float(m.group(2)) == pytest.approx(f_dist.sf(stat, q, n - p_free), abs=0.006)
    assert f_dist.sf(stat, q, n - p_free) >= PRIOR_TEST_LEVEL
    # the holds cost training error and make large batches faster (no per-sequence cost left to charge)
    assert tested.fit_info_["cost"] >= plain.fit_info_["cost"]
    large = df.assign(batch_size=32)
    assert (
        tested.predict(large)["pred_throughput_tok_s"] > plain.predict(large)["pred_throughput_tok_s"]
    ).all()


def test_a_cost_the_rows_resolve_stays_free():
    """Rows made by the model with a per-sequence cost that dominates the large batches: holding alpha at 0 misses
    them by far, so the test rejects it and alpha comes back."""
    truth = ExtendedSlimModel.with_params({**SLIM_TRUE_PARAMS, "alpha": 2e-4}, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid(), noise=0.01)
    m = _fit(_zero_tested(n_starts=2), df)
    assert "alpha" in m.free_params_ and "alpha" not in m.held_
    assert m.params_["alpha"] == pytest.approx(2e-4, rel=0.1)


def test_the_candidate_is_the_recommended_terms_with_the_zero_test():
    model = new_model(resolve_candidate("slim+zero-test"), 1)
    assert isinstance(model, TermModel) and model.test_zero_costs
    assert model.test_priors_at_bound and model.device_priors
    assert [t.name for t in model.terms()] == [t.name for t in ExtendedSlimModel().terms()]
    assert not ExtendedSlimModel.test_zero_costs
