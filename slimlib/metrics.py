"""Error metrics used everywhere in slimlib: signed relative error and MAPE."""

from __future__ import annotations

import numpy as np

from slimlib.errors import DataError
from slimlib.schema import plain


def _pair(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(y_true, dtype=float)
    p = np.asarray(y_pred, dtype=float)
    if t.shape != p.shape:
        raise DataError(f"measured and predicted values differ in shape: {t.shape} vs {p.shape}")
    if t.size == 0:
        raise DataError("no values to compare: both arrays are empty")
    if not np.all(np.isfinite(t)) or np.any(t == 0):
        bad = int(np.flatnonzero(~np.isfinite(t) | (t == 0))[0])
        raise DataError(
            f"measured value at position {bad} is {plain(t.flat[bad])}; relative errors need finite, non-zero values"
        )
    return t, p


def relative_error(y_true, y_pred) -> np.ndarray:
    """Signed relative error ``(pred - true) / true`` as a fraction (positive means over-prediction)."""
    t, p = _pair(y_true, y_pred)
    return (p - t) / t


def mape(y_true, y_pred) -> float:
    """Mean absolute percentage error ``100 * mean(|pred - true| / |true|)``, in percent."""
    t, p = _pair(y_true, y_pred)
    return float(100.0 * np.mean(np.abs(p - t) / np.abs(t)))
