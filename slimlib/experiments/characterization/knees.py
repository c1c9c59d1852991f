"""The two knee rules of a throughput curve T(B), and why there are two.

* `knee_batch` (characterization, Figs. 1-2): where **more batching stops paying**, the plateau's start: the first
  step whose throughput gain per added request falls below `DEFAULT_KNEE_THRESHOLD` (10%) of the per-request
  throughput at the smallest batch.
* `linear_regime` (the same-curve scenario's training points, Sec. VII-A "three points in the pre-knee regime"):
  where batching is **still close to linear**: the longest run of batch sizes along which every doubling of B at
  least multiplies T by `LINEAR_GAIN` (1.5, half of the ideal doubling).

The sub-linear bend starts before the plateau: on every public vLLM curve the linear regime ends one to three doublings
below the plateau knee (tests/test_knees.py shows it on the public data), so training "before the knee" by the
plateau rule would put points in the bend the model is asked to predict.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.schema import plain

#: `knee_batch`: relative marginal gain below which a curve has reached its plateau
DEFAULT_KNEE_THRESHOLD = 0.1
#: `linear_regime`: per-doubling throughput gain below which batching is no longer near-linear (ideal: 2)
LINEAR_GAIN = 1.5


def _sorted_curve(batch, throughput) -> tuple[np.ndarray, np.ndarray]:
    """The curve sorted by batch size; checks shapes and batch sizes."""
    b = np.asarray(batch, dtype=float)
    t = np.asarray(throughput, dtype=float)
    if b.shape != t.shape or b.ndim != 1:
        raise DataError(
            f"batch and throughput must be 1-D arrays of equal length, got {b.shape} and {t.shape}"
        )
    if len(b) < 2:
        raise DataError(f"a throughput curve needs at least 2 batch sizes, got {len(b)}")
    if len(np.unique(b)) != len(b) or np.any(~np.isfinite(b)) or np.any(b <= 0):
        raise DataError(f"batch sizes must be distinct positive numbers, got {b.tolist()}")
    order = np.argsort(b, kind="stable")
    return b[order], t[order]


def marginal_gain(batch, throughput) -> pd.DataFrame:
    """Throughput gain per added request between consecutive batch sizes.

    Columns: `batch_lo`, `batch_hi`, `gain_tok_s_per_req` (secant slope), `rel_gain` (slope divided by the
    per-request throughput ``T(B_min) / B_min`` of the smallest batch; 1 means linear scaling).
    """
    b, t = _sorted_curve(batch, throughput)
    slope = np.diff(t) / np.diff(b)
    base = t[0] / b[0]
    return pd.DataFrame(
        {"batch_lo": b[:-1], "batch_hi": b[1:], "gain_tok_s_per_req": slope, "rel_gain": slope / base}
    )


def knee_batch(batch, throughput, threshold: float = DEFAULT_KNEE_THRESHOLD) -> float:
    """Batch size at the knee: the lower end of the first step whose `rel_gain` (see `marginal_gain`) is below
    `threshold`; NaN when the gain never falls below it (no plateau within the measured range)."""
    if not (threshold > 0):
        raise DataError(f"knee threshold must be positive, got {plain(threshold)}")
    gains = marginal_gain(batch, throughput)
    below = gains.index[gains["rel_gain"] < threshold]
    return float(gains.loc[below[0], "batch_lo"]) if len(below) else float("nan")


def linear_regime(batch_size, throughput, min_batch: float = 2.0, gain: float = LINEAR_GAIN) -> np.ndarray:
    """Positions (into the inputs, ordered by batch size) of the near-linear run of a curve: from the smallest
    batch size >= `min_batch`, each next point while ``(T_k / T_{k-1}) ** (1 / log2(B_k / B_{k-1})) >= gain``."""
    b = np.asarray(batch_size, dtype=float)
    t = np.asarray(throughput, dtype=float)
    pos = np.flatnonzero(b >= min_batch)
    pos = pos[np.argsort(b[pos], kind="mergesort")]
    if len(pos) == 0:
        return pos
    run = [pos[0]]
    for cur in pos[1:]:
        prev = run[-1]
        if (t[cur] / t[prev]) ** (1.0 / np.log2(b[cur] / b[prev])) < gain:
            break
        run.append(cur)
    return np.array(run)
