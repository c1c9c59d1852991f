"""Latency SLOs in the units serving teams set them: TTFT, TPOT and E2E, each optional, at the mean or a percentile.

`Slo` holds the limits (seconds; ``inf`` = no limit). `serving_grid` is the advisor's one call of the model for
them: one `predict` over workloads x batch sizes giving throughput, E2E, TTFT and TPOT as (W, N) arrays.

* TTFT and TPOT are the model's ``pred_ttft_s`` and ``pred_tpot_s`` where it predicts them
  (`slimlib.model.base.PRED_COLUMNS`). A method that predicts only Eq. 5's batch split (``pred_prefill_s``,
  ``pred_decode_s``; e.g. ``slim`` and ``paper``) gets them from that split, said in ``latency_source``:
  ``TPOT = decode / OL`` (one decode step per output token) and ``TTFT = E2E - (OL - 1) TPOT`` (the batch's
  prefill, fixed overheads and its first token), so that ``E2E = TTFT + (OL - 1) TPOT`` as for the methods that
  predict them.
* `percentile` P (e.g. 0.9) bounds each constrained quantity by the upper end of the model's prediction interval
  at level ``2 P - 1`` (`slimlib.model.intervals`): the value the measured mean stays below with probability P
  given the model's held-out error. It is not a per-request latency percentile (no method predicts the spread of
  requests within a run). A quantity without an interval (`slimlib.model.intervals.INTERVAL_COLUMNS`) cannot take
  a percentile: refused in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.model.base import grid_table
from slimlib.model.intervals import INTERVAL_COLUMNS

__all__ = ["LIMITS", "Slo", "percentile_level", "serving_grid"]

#: the latency limits, in the order a binding limit is named: quantity -> label
LIMITS = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E"}
#: the model's prediction column of each limited quantity
PRED_OF = {"ttft": "pred_ttft_s", "tpot": "pred_tpot_s", "e2e": "pred_e2e_s"}
#: ``latency_source`` values of `serving_grid`
MODEL_SOURCE = "model"
SPLIT_SOURCE = "prefill/decode split"


def _limit(value: float, name: str) -> float:
    v = float(value)
    if math.isnan(v) or v <= 0:
        raise DataError(f"SLO {name} = {v:g}: give a positive number (or leave it out for no limit)")
    return v


@dataclass(frozen=True)
class Slo:
    """Latency limits in seconds (``inf``: none) and the `percentile` they hold at (None: the predicted mean)."""

    ttft_s: float = math.inf
    tpot_s: float = math.inf
    e2e_s: float = math.inf
    percentile: float | None = None

    def __post_init__(self) -> None:
        for q in LIMITS:
            _limit(getattr(self, f"{q}_s"), f"{q}_s")
        if self.percentile is not None:
            percentile_level(self.percentile)

    def limits(self) -> dict[str, float]:
        """The finite limits, quantity -> seconds, in `LIMITS` order."""
        return {q: float(getattr(self, f"{q}_s")) for q in LIMITS if math.isfinite(getattr(self, f"{q}_s"))}

    def describe(self) -> str:
        """E.g. 'TTFT <= 200 ms, TPOT <= 25 ms at P90' ('no latency limit' without one)."""
        parts = [f"{LIMITS[q]} <= {_show(q, v)}" for q, v in self.limits().items()]
        if not parts:
            return "no latency limit"
        at = f" at P{self.percentile * 100:g}" if self.percentile is not None else " (predicted mean)"
        return ", ".join(parts) + at


def _show(quantity: str, seconds: float) -> str:
    return f"{seconds:.4g} s" if quantity == "e2e" else f"{seconds * 1e3:.4g} ms"


def percentile_level(percentile: float) -> float:
    """The interval level ``2 P - 1`` whose upper end is the `percentile` P; DataError outside (0.5, 1)."""
    p = float(percentile)
    if not 0.5 < p < 1.0:
        raise DataError(
            f"percentile {p:g} must be in (0.5, 1), e.g. 0.9: it is read from the upper end of the model's "
            "central prediction interval"
        )
    return 2.0 * p - 1.0


def serving_grid(model, base: pd.DataFrame, batch_sizes, slo: Slo | None = None) -> dict[str, np.ndarray]:
    """Throughput, E2E, TTFT and TPOT (each (W, N)) of `base`'s workload rows x `batch_sizes`: one `predict`.

    With ``slo.percentile`` the limited quantities are the upper ends of the interval at ``2 P - 1`` (module
    docstring). Returns keys ``throughput``, ``e2e``, ``ttft``, ``tpot`` (the values the limits are checked
    against), ``e2e_mean`` (the predicted mean E2E, for per-user rates) and ``latency_source`` (a one-element
    array: `MODEL_SOURCE` or `SPLIT_SOURCE`)."""
    b = np.asarray(batch_sizes, dtype=float).ravel()
    limits = slo.limits() if slo is not None else {}
    level = None
    if slo is not None and slo.percentile is not None:
        lacking = [LIMITS[q] for q in limits if q not in INTERVAL_COLUMNS]
        if lacking:
            raise DataError(
                f"--percentile {slo.percentile:g}: the model's intervals give no {' or '.join(lacking)} percentile "
                f"(they cover {', '.join(sorted(INTERVAL_COLUMNS))}); drop --percentile or that limit"
            )
        level = percentile_level(slo.percentile)
    pred = model.predict(grid_table(base, b), interval=level)
    shape = (len(base), b.size)

    def col(name: str) -> np.ndarray:
        return pred[name].to_numpy(dtype=float).reshape(shape)

    e2e = col("pred_e2e_s")
    ttft, tpot = col("pred_ttft_s"), col("pred_tpot_s")
    source = MODEL_SOURCE
    if not (np.isfinite(ttft).any() or np.isfinite(tpot).any()):  # a method without the TTFT/TPOT split
        ol = base["output_len"].to_numpy(dtype=float)[:, None]
        step = col("pred_decode_s") / ol
        ttft, tpot = e2e - (ol - 1.0) * step, step
        source = SPLIT_SOURCE
    out = {
        "throughput": col("pred_throughput_tok_s"),
        "e2e": e2e,
        "ttft": ttft,
        "tpot": tpot,
        "e2e_mean": e2e,
    }
    split = [LIMITS[q] for q in limits if q in ("ttft", "tpot")]
    if level is not None and source == SPLIT_SOURCE and split:
        raise DataError(
            f"--percentile {slo.percentile:g}: this method predicts no {' or '.join(split)} of its own (the advisor "
            "reads them from its prefill/decode split), so it has no interval for them; drop --percentile or that limit"
        )
    if level is not None:
        for q in limits:
            out[q] = col(INTERVAL_COLUMNS[q][1])
    out["latency_source"] = np.array([source])
    return out
