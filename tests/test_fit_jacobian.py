"""The fit's Jacobian: every parameter's forward difference in one evaluation on copies of the rows."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slimlib.model import PaperModel, SlimModel
from slimlib.model.calibrated import FD_STEP
from slimlib.model.features import resolve_gpu
from slimlib.schema import validate_table

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    """One model's served runs on the CPU engine (throughput, TTFT and TPOT measured)."""
    df = pd.read_csv(DATA / "engine-cpu-amx-medians.csv")
    return df[df["model"] == df["model"].iloc[0]].reset_index(drop=True)


def _objective(model, rows: pd.DataFrame):
    data = validate_table(rows)
    hw = resolve_gpu(data, None)
    feats, targets = model._features(data, hw), model._fit_targets(data)
    free = list(model.param_specs())
    scale = np.array([s.scale for s in free])
    model._fit_cache = []
    residuals, jacobian = model._objective(feats, hw, targets, {}, free)
    z = np.array([s.init for s in free]) / scale
    hi = np.array([s.upper for s in free]) / scale
    return residuals, jacobian, z, hi


@pytest.mark.parametrize("cls", [SlimModel, PaperModel])
def test_the_jacobian_is_each_parameter_stepped_alone(cls, rows):
    """Each column equals the residuals with that one parameter stepped, minus the residuals at the point, over the
    step (the copies of the rows do not mix); a parameter on its upper bound is stepped backwards."""
    model = cls()
    residuals, jacobian, z, hi = _objective(model, rows)
    z[0] = hi[0]  # on its bound: the step goes down
    r0 = residuals(z)
    got = jacobian(z)
    assert got.shape == (r0.size, z.size)
    if cls is SlimModel:
        assert r0.size > len(rows)  # the latencies are residuals too
    for j in range(z.size):
        h = FD_STEP * max(1.0, abs(z[j]))
        h = -h if z[j] + h > hi[j] else h
        step = z.copy()
        step[j] += h
        want = (residuals(step) - r0) / (step[j] - z[j])
        np.testing.assert_allclose(got[:, j], want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    assert np.any(got != 0.0)


def test_the_jacobian_reuses_the_residuals_at_its_point_only(rows):
    """Asked at a point other than the last residuals', the Jacobian evaluates that point itself."""
    residuals, jacobian, z, _ = _objective(SlimModel(), rows)
    residuals(z * 1.01)
    np.testing.assert_allclose(jacobian(z), _objective(SlimModel(), rows)[1](z), rtol=1e-12)


def test_a_fit_with_every_parameter_held_returns_them(rows):
    """No free parameter: no Jacobian column to compute, and the held values are the fit."""
    held = {s.name: s.init for s in PaperModel().param_specs()}
    model = PaperModel(fixed=held).fit(rows)
    assert model.params_ == pytest.approx(held) and model.free_params_ == []
