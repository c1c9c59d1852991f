"""The two knee rules measure different things, and both are needed (slimlib.experiments.characterization.knees)."""

from __future__ import annotations

import numpy as np
import pytest

from slimlib.data import load
from slimlib.experiments.accuracy.scenarios import online_runs, pre_knee_points
from slimlib.experiments.characterization.knees import knee_batch, linear_regime


def test_linear_regime_and_plateau_knee_on_a_saturating_curve():
    b = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], dtype=float)
    t = 1000 * b / (1 + b / 64)  # saturates at 64 000 tok/s: half of linear at B = 64
    run = linear_regime(b, t, min_batch=1)
    assert b[run].tolist() == [1, 2, 4, 8, 16, 32, 64]  # each doubling still >= 1.5x up to 64
    assert knee_batch(b, t) == 128  # gain per added request < 10% of T(1) from 128 on
    assert b[run[-1]] < knee_batch(b, t)


def test_on_every_public_curve_the_linear_regime_ends_before_the_plateau_knee():
    runs = online_runs(load("memgap-online"))
    n = 0
    for _, g in runs.groupby(["model", "output_len"]):
        b, t = g["batch_size"].to_numpy(float), g["throughput_tok_s"].to_numpy(float)
        order = np.argsort(b)
        end = b[linear_regime(b, t)[-1]]
        knee = knee_batch(b[order], t[order])
        assert end < knee, (g["model"].iloc[0], g["output_len"].iloc[0], end, knee)
        # training points of the same-curve scenario lie in the linear regime, never at the plateau knee
        assert b[pre_knee_points(b, t)].max() <= end
        n += 1
    assert n == 16


def test_linear_regime_rejects_nothing_silently():
    with pytest.raises(Exception, match="at least 2 batch sizes"):
        knee_batch([1.0], [10.0])
    assert linear_regime(np.array([1.0]), np.array([5.0]), min_batch=2).size == 0
