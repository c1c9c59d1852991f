"""Roofline arithmetic (Williams et al., 2009): attainable FLOP/s, ridge point, regimes, achieved rates.

Units: FLOP, bytes, seconds, FLOP/s, bytes/s; arithmetic intensity (AI) in FLOP per byte of DRAM traffic.
All functions are vectorized over numpy arrays.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from slimlib.errors import DataError
from slimlib.model.equations import FloatArray
from slimlib.schema import plain

__all__ = [
    "arithmetic_intensity",
    "ridge_point",
    "attainable_flops",
    "regime",
    "achieved_rates",
    "roofline_curve",
]


def _positive(name: str, value: ArrayLike) -> FloatArray:
    arr = np.asarray(value, dtype=float)
    if np.any(~(arr > 0)):
        raise DataError(f"roofline: {name} must be positive, got {plain(value)}")
    return arr


def arithmetic_intensity(flops: ArrayLike, bytes_moved: ArrayLike) -> FloatArray:
    """AI = FLOPs / bytes moved from DRAM (FLOP/byte)."""
    return np.asarray(flops, dtype=float) / _positive("bytes_moved", bytes_moved)


def ridge_point(peak_flops: ArrayLike, mem_bw: ArrayLike) -> FloatArray:
    """AI where the memory and compute roofs meet, ``peak_flops / mem_bw`` (FLOP/byte)."""
    return _positive("peak_flops", peak_flops) / _positive("mem_bw", mem_bw)


def attainable_flops(ai: ArrayLike, peak_flops: ArrayLike, mem_bw: ArrayLike) -> FloatArray:
    """Roofline bound ``min(peak_flops, ai * mem_bw)`` in FLOP/s."""
    return np.minimum(
        _positive("peak_flops", peak_flops), np.asarray(ai, dtype=float) * _positive("mem_bw", mem_bw)
    )


def regime(ai: ArrayLike, peak_flops: ArrayLike, mem_bw: ArrayLike) -> npt.NDArray[np.str_]:
    """'memory-bound' where AI is below the ridge point, else 'compute-bound' (array of str)."""
    ridge = ridge_point(peak_flops, mem_bw)
    return np.where(np.asarray(ai, dtype=float) < ridge, "memory-bound", "compute-bound")


def achieved_rates(
    flops: ArrayLike, bytes_moved: ArrayLike, time_s: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Achieved ``(FLOP/s, bytes/s)`` of a kernel doing `flops` and moving `bytes_moved` in `time_s` seconds."""
    t = _positive("time_s", time_s)
    return np.asarray(flops, dtype=float) / t, np.asarray(bytes_moved, dtype=float) / t


def roofline_curve(
    peak_flops: ArrayLike, mem_bw: ArrayLike, ai_min: float = 0.1, ai_max: float = 1e4, n: int = 200
) -> tuple[FloatArray, FloatArray]:
    """``(ai, attainable)`` arrays on a log-spaced AI grid, for plotting the roof."""
    if not (0 < ai_min < ai_max):
        raise DataError(f"roofline_curve: need 0 < ai_min < ai_max, got {plain(ai_min)}, {plain(ai_max)}")
    ai = np.logspace(np.log10(ai_min), np.log10(ai_max), int(n))
    return ai, attainable_flops(ai, peak_flops, mem_bw)
