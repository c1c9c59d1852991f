"""The estimator contract, checked over every registered method (as scikit-learn's `check_estimator` does): fit
returns self and leaves constructor parameters alone, predict's shape and columns, determinism, refit
independence, save/load round trip, the not-fitted error and the parameter summary."""

from __future__ import annotations

import contextlib
import copy
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid

from slimlib.errors import DataError, NotFittedError
from slimlib.model import METHODS, PRED_COLUMNS, Estimator, PaperModel, load_params, make_model
from slimlib.model.base import PARAMS_FORMAT_VERSION, SERVED_COLUMNS
from slimlib.registry.gpus import get_gpu

GPU = "h100-sxm-80gb"


def _table(models: tuple[str, ...], noise: float, seed: int) -> pd.DataFrame:
    """Synthetic truth from the paper model (tests only), with the extra columns the baselines fit to."""
    df = grid(
        models=models,
        gpu=GPU,
        batch=(1, 2, 4, 8, 16, 32, 64, 128),
        input_len=(128, 512),
        output_len=(64, 256),
    )
    pred = PaperModel.with_params(TRUE_PARAMS, gpu=GPU).predict(df)
    rng = np.random.default_rng(seed)
    f = 1.0 + noise * rng.standard_normal(len(df))
    out = df.copy()
    out["e2e_s"] = pred["pred_e2e_s"].to_numpy() * f
    out["throughput_tok_s"] = (df["batch_size"] * (df["input_len"] + df["output_len"])).to_numpy() / out[
        "e2e_s"
    ]
    out["mean_ttft_ms"] = 1000 * pred["pred_prefill_s"].to_numpy() * f
    out["mean_itl_ms"] = 1000 * pred["pred_decode_s"].to_numpy() / (df["output_len"].to_numpy() - 1) * f
    return out


TRAIN_A = _table(("opt-125m", "opt-1.3b", "opt-6.7b"), 0.02, 0)
TRAIN_B = _table(("opt-350m", "opt-2.7b", "llama-2-7b"), 0.02, 1)
TEST = _table(("opt-1.3b", "llama-2-7b"), 0.0, 2)


def _new(name: str) -> Estimator:
    return make_model(name, n_starts=2)


@contextlib.contextmanager
def _quiet():
    """Identifiability and rank warnings are expected on these small tables; the evaluation tests cover them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _fit(name: str, df: pd.DataFrame) -> Estimator:
    with _quiet():
        return _new(name).fit(df)


@pytest.fixture(params=sorted(METHODS))
def name(request) -> str:
    return request.param


def test_every_method_is_an_estimator(name):
    m = _new(name)
    assert isinstance(m, Estimator) and m.variant == name and not m.is_fitted


def test_fit_returns_self_and_keeps_constructor_parameters(name):
    m = _new(name)
    before = copy.deepcopy(m.get_params())
    with _quiet():
        assert m.fit(TRAIN_A) is m
    assert m.get_params() == before
    assert type(m)(**m.get_params()).get_params() == before


def test_predict_shape_columns_and_index(name):
    m = _fit(name, TRAIN_A)
    test = TEST.set_index(pd.RangeIndex(100, 100 + len(TEST)))
    pred = m.predict(test)
    served = list(SERVED_COLUMNS) if name in SERVED_METHODS else []
    assert list(pred.columns) == [*PRED_COLUMNS, *served] and pred.index.equals(test.index)
    assert np.isfinite(pred["pred_throughput_tok_s"]).all() and np.isfinite(pred["pred_e2e_s"]).all()
    thr, e2e = m.predict_grid(TEST[["model", "input_len", "output_len"]].head(3), np.array([1.0, 8.0, 64.0]))
    assert thr.shape == e2e.shape == (3, 3)
    row = TEST.head(3).assign(batch_size=8.0)
    np.testing.assert_allclose(thr[:, 1], m.predict(row)["pred_throughput_tok_s"], rtol=1e-12)


#: methods that predict TTFT and TPOT (the others return NaN there and say so in their docstrings)
LATENCY_METHODS = {"slim", "llmvisor-agg"}
#: methods that predict a served request's queue and percentiles (`SERVED_COLUMNS`)
SERVED_METHODS = {"slim"}


def test_ttft_tpot_columns_are_consistent_or_nan(name):
    """TTFT and TPOT: both finite for the methods that predict them, both NaN (never one of the two) for the others.
    LLMVisor-Agg's batch gives ``E2E = TTFT + (OL - 1) TPOT``; the recommended model's closed loop of B clients
    (the rows say no client) keeps its throughput ``B_eff / E2E``, so by Little's law a request's mean
    ``TTFT + (OL - 1) TPOT`` (its queue included) is ``E2E B / B_eff``."""
    model = _fit(name, TRAIN_A)
    pred = model.predict(TEST)
    ttft, tpot = pred["pred_ttft_s"].to_numpy(), pred["pred_tpot_s"].to_numpy()
    if name not in LATENCY_METHODS:
        assert np.isnan(ttft).all() and np.isnan(tpot).all()
        return
    assert np.isfinite(ttft).all() and np.isfinite(tpot).all()
    ol = TEST["output_len"].to_numpy(dtype=float)
    e2e = pred["pred_e2e_s"].to_numpy()
    if name in SERVED_METHODS:
        b = TEST["batch_size"].to_numpy(dtype=float)
        e2e = e2e * b / model.effective_batch(TEST, get_gpu(GPU))
        assert (pred["pred_queue_s"] < ttft).all()
    np.testing.assert_allclose(ttft + (ol - 1.0) * tpot, e2e, rtol=1e-9)


def test_fit_is_deterministic(name):
    a = _fit(name, TRAIN_A).predict(TEST)
    b = _fit(name, TRAIN_A).predict(TEST)
    pd.testing.assert_frame_equal(a, b)


def test_refit_depends_only_on_the_new_data(name):
    m = _fit(name, TRAIN_A)
    with _quiet():
        m.fit(TRAIN_B)
    fresh = _fit(name, TRAIN_B)
    pd.testing.assert_frame_equal(m.predict(TEST), fresh.predict(TEST))
    assert m.params_ == fresh.params_


def test_save_load_round_trip(name, tmp_path):
    m = _fit(name, TRAIN_A)
    path = tmp_path / f"{name}.json"
    m.to_json(path)
    d = json.loads(path.read_text())
    assert d["variant"] == name and d["format_version"] == PARAMS_FORMAT_VERSION and d["gpu"] == GPU
    back = load_params(path)
    assert type(back) is type(m) and back.get_params() == {**m.get_params(), "gpu": GPU}
    pd.testing.assert_frame_equal(back.predict(TEST), m.predict(TEST))
    with _quiet():
        pd.testing.assert_frame_equal(back.summary(), m.summary(), check_exact=False, rtol=1e-12)


def test_not_fitted_error(name):
    m = _new(name)
    for call in (lambda: m.predict(TEST), m.summary, m.to_json):
        with pytest.raises(NotFittedError, match="not fitted"):
            call()


def test_summary_has_estimate_stderr_interval_and_unit(name):
    with _quiet():
        s = _fit(name, TRAIN_A).summary()
    assert {"estimate", "stderr", "ci95_low", "ci95_high", "unit"} <= set(s.columns)
    ok = np.isfinite(s["ci95_low"])  # no interval where the method has no standard error or sits at a bound
    assert ok.any()
    assert (s.loc[ok, "ci95_low"] <= s.loc[ok, "estimate"]).all()
    assert (s.loc[ok, "estimate"] <= s.loc[ok, "ci95_high"]).all()


def test_newer_or_unknown_format_version_is_refused(tmp_path):
    m = _fit("paper", TRAIN_A)
    d = json.loads(m.to_json())
    for version in (PARAMS_FORMAT_VERSION + 1, "2.0"):
        path = tmp_path / "p.json"
        path.write_text(json.dumps({**d, "format_version": version}))
        with pytest.raises(
            DataError, match=rf"version .*{PARAMS_FORMAT_VERSION + 1 if version != '2.0' else ''}"
        ):
            load_params(path)
