"""Latency SLOs in the units serving teams set them: TTFT, TPOT and E2E, each optional, at the mean or a percentile.

`Slo` holds the limits (seconds; ``inf`` = no limit). `serving_grid` is the advisor's one call of the model for
them: one `predict` over workloads x batch sizes giving throughput, E2E, TTFT and TPOT as (W, N) arrays (or, for
the deployment search, a `LazyGrid`: the served latencies predicted at the points asked for, with the same values).

* TTFT and TPOT are the model's ``pred_ttft_s`` and ``pred_tpot_s`` where it predicts them (``slim``: the served
  request's, `slimlib.model.served`). A method that predicts only Eq. 5's batch split (``pred_prefill_s``,
  ``pred_decode_s``; ``paper`` and its variants) gets them from that split, said in ``latency_source``:
  ``TPOT = decode / OL`` (one decode step per output token) and ``TTFT = E2E - (OL - 1) TPOT`` (the batch's
  prefill, fixed overheads and its first token), so that ``E2E = TTFT + (OL - 1) TPOT`` as for the methods that
  predict them.
* `percentile` P (0.5, 0.9 or 0.99) bounds each constrained quantity at its Pth percentile over the served
  requests (``pred_ttft_p90_s``, ...: `slimlib.model.served`, the spread of requests within a run of the row's
  client). A method without them (every method but ``slim``) cannot take a percentile: refused in one line.

The advisor's rows are served to a closed loop at concurrency B (client ``concurrency``, `slimlib.model.served`)
by a server that runs B at once (``--max-num-seqs B``), unless the workload says otherwise.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.model.base import grid_table
from slimlib.model.served import DEFAULT_CLIENT, PERCENTILES

__all__ = ["LIMITS", "LazyGrid", "Slo", "percentile_label", "serving_grid"]

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
    """Latency limits in seconds (``inf``: none) and the per-request `percentile` they hold at (0.5, 0.9 or 0.99;
    None: the predicted mean)."""

    ttft_s: float = math.inf
    tpot_s: float = math.inf
    e2e_s: float = math.inf
    percentile: float | None = None

    def __post_init__(self) -> None:
        for q in LIMITS:
            _limit(getattr(self, f"{q}_s"), f"{q}_s")
        if self.percentile is not None:
            percentile_label(self.percentile)

    def limits(self) -> dict[str, float]:
        """The finite limits, quantity -> seconds, in `LIMITS` order."""
        return {q: float(getattr(self, f"{q}_s")) for q in LIMITS if math.isfinite(getattr(self, f"{q}_s"))}

    def statistic(self, quantity: str) -> str:
        """Which statistic of `quantity` (``ttft``, ``tpot``, ``e2e``) the search reports and checks: the SLO's
        percentile (``p90``) where it limits that quantity, else ``mean`` (`serving_grid`)."""
        if self.percentile is not None and quantity in self.limits():
            return percentile_label(self.percentile)
        return "mean"

    def describe(self) -> str:
        """E.g. 'TTFT <= 200 ms, TPOT <= 25 ms at P90' ('no latency limit' without one)."""
        parts = [f"{LIMITS[q]} <= {_show(q, v)}" for q, v in self.limits().items()]
        if not parts:
            return "no latency limit"
        at = (
            f" at {percentile_label(self.percentile)}" if self.percentile is not None else " (predicted mean)"
        )
        return ", ".join(parts) + at


def _show(quantity: str, seconds: float) -> str:
    return f"{seconds:.4g} s" if quantity == "e2e" else f"{seconds * 1e3:.4g} ms"


def percentile_label(percentile: float) -> str:
    """``p90`` for 0.9: the served columns' name of a percentile; DataError for one `PERCENTILES` does not hold."""
    p = float(percentile)
    match = [n for n in PERCENTILES if abs(p * 100.0 - n) < 1e-9]
    if not match:
        raise DataError(
            f"percentile {p:g}: the model predicts the {', '.join(f'{n / 100:g}' for n in PERCENTILES)} percentiles of "
            "TTFT, TPOT and E2E over the served requests; give one of them"
        )
    return f"p{match[0]}"


def serving_grid(
    model, base: pd.DataFrame, batch_sizes, slo: Slo | None = None, lazy: bool = False
) -> dict[str, np.ndarray]:
    """Throughput, E2E, TTFT and TPOT (each (W, N)) of `base`'s workload rows x `batch_sizes`: one `predict`, the
    rows served to a closed loop at concurrency B where `base` has no ``client`` column.

    With ``slo.percentile`` the limited quantities are their per-request percentiles (module docstring). Returns
    keys ``throughput``, ``e2e``, ``ttft``, ``tpot`` (the values the limits are checked against), ``e2e_mean`` (the
    predicted mean E2E, for per-user rates) and ``latency_source`` (a one-element array: `MODEL_SOURCE` or
    `SPLIT_SOURCE`). With `lazy`, for a model that replays the scheduler for its TTFT and TPOT (``slim``), a
    `LazyGrid`: the same values, the served latencies predicted only at the points asked for."""
    b = np.asarray(batch_sizes, dtype=float).ravel()
    limits = slo.limits() if slo is not None else {}
    rows = base if "client" in base.columns else base.assign(client=DEFAULT_CLIENT)
    grid = grid_table(rows, b)
    if (
        "max_num_seqs" not in grid.columns
    ):  # the server runs B at once: its --max-num-seqs (`launch_settings`)
        grid["max_num_seqs"] = grid["batch_size"]
    percentile = slo is not None and slo.percentile is not None and bool(limits)
    served = "all" if percentile else "means"
    if lazy and getattr(model, "replays_scheduler", False):
        tag = percentile_label(slo.percentile) if percentile and slo is not None else ""
        columns = {q: f"pred_{q}_{tag}_s" if tag and q in limits else PRED_OF[q] for q in ("ttft", "tpot")}
        if tag and "e2e" in limits:
            columns["e2e"] = f"pred_e2e_{tag}_s"
        lazy_grid = LazyGrid.start(model, grid, (len(base), b.size), served, columns)
        if lazy_grid is not None:
            return lazy_grid
    pred = model.predict(grid, served=served)
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
    if slo is not None and slo.percentile is not None and limits:
        tag = percentile_label(slo.percentile)
        for q in limits:
            name = f"pred_{q}_{tag}_s"
            values = col(name) if name in pred.columns else np.full(shape, np.nan)
            if not np.isfinite(values).any():
                raise DataError(
                    f"--percentile {slo.percentile:g}: this method predicts no per-request {LIMITS[q]} percentiles (the "
                    "recommended model, slim, does); drop --percentile or fit slim"
                )
            out[q] = values
    out["latency_source"] = np.array([source])
    return out


#: the warnings `LazyGrid.start` gave again, as a module's registry holds those it gave (shown once by default)
_SHOWN: dict = {}


class LazyGrid(dict):
    """`serving_grid`'s arrays where the served latencies (TTFT, TPOT, and E2E where limited at a percentile) are
    predicted only at the points asked for (`at`), each exactly what the one `predict` over the whole grid gives
    it (the model predicts each row on its own); indexing such a quantity predicts the rest of its grid. For the
    advisor's search, which needs them at a few batch sizes per deployment: each costs a replay of vLLM's
    scheduler (`slimlib.model.schedule`). Iterating over it (`keys`, `items`) gives the arrays predicted so far;
    ``[]``, `get` and `at` predict what they read."""

    def __init__(
        self, model, table: pd.DataFrame, shape: tuple[int, int], served: str, columns: dict[str, str]
    ):
        super().__init__()
        self._model, self._table, self._shape, self._served, self._columns = (
            model,
            table,
            shape,
            served,
            columns,
        )
        self._values = {q: np.full(shape, np.nan) for q in columns}
        self._known = np.zeros(shape, dtype=bool)
        self._cols = np.arange(shape[1])  # the grid's column of each of this one's

    @classmethod
    def start(
        cls, model, table: pd.DataFrame, shape: tuple[int, int], served: str, columns: dict[str, str]
    ) -> LazyGrid | None:
        """The lazy grid of `table` (the rows `predict` would be given, workload-major, `shape`; `columns`: the
        prediction column of each lazy quantity), or None where the model predicts none of them at the first batch
        of every row or refuses a row at its first or its largest batch (then `serving_grid`'s one `predict` says
        what they are, or refuses; a refusal that grows with the batch, such as a token budget below the running
        sequences, shows at the largest). The warnings are those of the rows' predictions, then those of the served
        latencies at the probed points that come from another place in the code (a served warning's count of rows
        is the probe's)."""
        first = np.arange(shape[0]) * shape[1]
        probe = np.concatenate([first, first + shape[1] - 1]) if shape[1] > 1 else first
        rows = table.iloc[probe].reset_index(drop=True)
        try:  # a refusal is the one `predict`'s own, naming its row of the whole grid
            with warnings.catch_warnings(record=True) as served_warnings:
                warnings.simplefilter("always")
                sub = model.predict(rows, served=served)
            if not all(np.isfinite(sub[c].to_numpy(dtype=float)).any() for c in columns.values()):
                return None
            with warnings.catch_warnings(record=True) as probe_row_warnings:
                warnings.simplefilter("always")
                model.predict(rows, served="none")
            with warnings.catch_warnings(record=True) as row_warnings:
                warnings.simplefilter("always")
                pred = model.predict(table, served="none")
        except DataError:
            return None
        # the rows' warnings are the whole grid's; the served latencies' own (those the probe's rows give only when
        # served) follow
        row_only = {(w.category, str(w.message)) for w in probe_row_warnings}
        for w in row_warnings + [w for w in served_warnings if (w.category, str(w.message)) not in row_only]:
            warnings.warn_explicit(
                w.message, w.category, w.filename, w.lineno, registry=_SHOWN, source=w.source
            )
        out = cls(model, table, shape, served, columns)
        out._fill(probe, sub)

        def col(name: str) -> np.ndarray:
            return pred[name].to_numpy(dtype=float).reshape(shape)

        out.update(throughput=col("pred_throughput_tok_s"), e2e_mean=col("pred_e2e_s"))
        if "e2e" not in columns:
            out["e2e"] = out["e2e_mean"]
        out["latency_source"] = np.array([MODEL_SOURCE])
        return out

    def select(self, keep: np.ndarray) -> LazyGrid:
        """The grid of the columns `keep` (booleans) only, sharing what is predicted; without ``latency_source``."""
        out = LazyGrid.__new__(LazyGrid)
        dict.__init__(out, {k: v[:, keep] for k, v in self.items() if k != "latency_source"})
        out._model, out._table, out._shape, out._served = self._model, self._table, self._shape, self._served
        out._columns, out._values, out._known = self._columns, self._values, self._known
        out._cols = self._cols[keep]
        return out

    def with_arrays(self, **arrays: np.ndarray) -> LazyGrid:
        """This grid with `arrays` added, sharing what is predicted."""
        out = self.select(np.ones(self._cols.size, dtype=bool))
        out.update(arrays)
        return out

    def _fill(self, flat: np.ndarray, pred: pd.DataFrame) -> None:
        for q, c in self._columns.items():
            self._values[q].flat[flat] = pred[c].to_numpy(dtype=float)
        self._known.flat[flat] = True

    def _predict(self, rows: np.ndarray, cols: np.ndarray) -> None:
        """Predict the points (`rows`, `cols`: this grid's columns) not yet known, in one `predict`."""
        flat = np.unique(np.ravel_multi_index((rows.ravel(), self._cols[cols.ravel()]), self._shape))
        flat = flat[~self._known.flat[flat]]
        if flat.size:
            with warnings.catch_warnings():  # the one `predict`'s warnings were given by `start`
                warnings.simplefilter("ignore")
                pred = self._model.predict(self._table.iloc[flat].reset_index(drop=True), served=self._served)
            self._fill(flat, pred)

    def at(self, quantity: str, rows, cols) -> np.ndarray:
        """`quantity` at the points (`rows`, `cols`) (integer arrays, broadcast together)."""
        rows, cols = np.broadcast_arrays(np.asarray(rows, dtype=int), np.asarray(cols, dtype=int))
        if dict.__contains__(self, quantity):
            return np.asarray(self[quantity][rows, cols])
        self._predict(rows, cols)
        return self._values[quantity][rows, self._cols[cols]]

    def lazy(self, quantity: str) -> bool:
        """Whether `quantity` is predicted point by point (`at`)."""
        return quantity in self._columns and not dict.__contains__(self, quantity)

    def __contains__(self, quantity: object) -> bool:
        return dict.__contains__(self, quantity) or quantity in self._columns

    def get(self, quantity: str, default=None):
        return self[quantity] if quantity in self else default

    def __missing__(self, quantity: str) -> np.ndarray:
        if quantity not in self._columns:
            raise KeyError(quantity)
        r, c = np.indices((self._shape[0], self._cols.size))
        self._predict(r, c)
        self[quantity] = self._values[quantity][:, self._cols]
        return self[quantity]
