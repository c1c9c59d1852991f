"""Roofline arithmetic checked by hand (slimlib.model.roofline)."""

from __future__ import annotations

import numpy as np
import pytest

from slimlib.errors import DataError
from slimlib.model import roofline

PEAK = 100e12  # 100 TFLOP/s
BW = 2e12  # 2 TB/s -> ridge at 50 FLOP/byte


def test_ridge_point_and_attainable_by_hand():
    assert roofline.ridge_point(PEAK, BW) == pytest.approx(50.0)
    ai = np.array([1.0, 10.0, 50.0, 200.0])
    np.testing.assert_allclose(roofline.attainable_flops(ai, PEAK, BW), [2e12, 20e12, 100e12, 100e12])


def test_regime_switches_at_the_ridge():
    assert roofline.regime(np.array([49.9, 50.0, 1e3]), PEAK, BW).tolist() == [
        "memory-bound",
        "compute-bound",
        "compute-bound",
    ]


def test_intensity_and_achieved_rates():
    # 8 GFLOP moving 1 GB in 1 ms: AI 8 FLOP/byte, 8 TFLOP/s, 1 TB/s
    assert roofline.arithmetic_intensity(8e9, 1e9) == pytest.approx(8.0)
    flops, bw = roofline.achieved_rates(8e9, 1e9, 1e-3)
    assert flops == pytest.approx(8e12)
    assert bw == pytest.approx(1e12)


def test_curve_is_log_spaced_and_capped():
    ai, roof = roofline.roofline_curve(PEAK, BW, ai_min=1, ai_max=1e3, n=4)
    np.testing.assert_allclose(ai, [1, 10, 100, 1000])
    np.testing.assert_allclose(roof, [2e12, 20e12, 100e12, 100e12])


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_non_positive_inputs_are_rejected(bad):
    with pytest.raises(DataError, match="must be positive"):
        roofline.ridge_point(PEAK, bad)
    with pytest.raises(DataError, match="time_s"):
        roofline.achieved_rates(1.0, 1.0, bad)
    with pytest.raises(DataError, match="ai_min"):
        roofline.roofline_curve(PEAK, BW, ai_min=10, ai_max=1)
