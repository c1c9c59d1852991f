"""The estimator contract every method follows (the recommended model, the paper model and its ablations, baselines).

* ``__init__`` only stores its arguments, under their own names (`get_params` returns them); ``fit(df)`` never
  changes them: what a fit decides lives in attributes ending in ``_`` (``params_``, ``stderr_``, ``gpu_``,
  ``fit_info_``, and method-specific state).
* ``fit(df) -> self`` on a table in the `slimlib.schema` layout; a refit starts from the constructor state only.
* ``predict(df)`` returns `PRED_COLUMNS` (NaN where a method has no such part) and, for a method that predicts
  them, `SERVED_COLUMNS`, indexed like
  `df`: throughput, E2E, its prefill and decode parts, the serving latencies ``pred_ttft_s`` (mean time to first
  token) and ``pred_tpot_s`` (mean time per output token after the first; a request's E2E is ``TTFT + (OL - 1)
  TPOT``) where a method predicts them, and the served request's queue and percentiles (`slimlib.model.served`);
  ``predict_grid(workloads, batch_sizes)`` the (workloads x batch sizes) throughput and E2E arrays the advisor
  searches.
* ``summary()`` is a table of estimate, standard error and 95% interval per parameter.
* ``to_json()`` / `slimlib.model.methods.load_params` save and load every method, in one versioned file format.
"""

from __future__ import annotations

import inspect
import json
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import numpy as np
import pandas as pd

from slimlib.errors import DataError, NotFittedError, SlimError
from slimlib.io import write_text
from slimlib.metrics import mape
from slimlib.model.features import FloatArray, resolve_gpu
from slimlib.model.intervals import (
    INTERVAL_COLUMNS,
    INTERVAL_QUANTITIES,
    POOLED,
    Domain,
    IntervalWarning,
    ResidualModel,
    check_level,
    extrapolation_distance,
    fit_domain,
    interval_bounds,
    moe_narrow_message,
    moe_rows,
    residual_half_widths,
    row_axes,
)
from slimlib.registry.gpus import GPU
from slimlib.schema import TPOT_COLUMNS, TTFT_COLUMNS, measured_latency_s, validate_table

#: columns `predict` returns (module docstring; TTFT and TPOT NaN for a method without them, the served columns
#: NaN for a method without a replay of the engine's steps)
PRED_COLUMNS = (
    "pred_throughput_tok_s",
    "pred_e2e_s",
    "pred_prefill_s",
    "pred_decode_s",
    "pred_ttft_s",
    "pred_tpot_s",
)
#: the served request's columns `predict` adds (`slimlib.model.served`): the mean wait before its first step, and
#: the 50th, 90th and 99th percentiles of TTFT, TPOT and E2E over the requests, as the client sees them
#: (``pred_e2e_s`` is Eq. 5's batch E2E; how a request's relates to it depends on its client: `slimlib.model.served`)
SERVED_COLUMNS = (
    "pred_queue_s",
    *(f"pred_{q}_p{p}_s" for q in ("ttft", "tpot", "e2e") for p in (50, 90, 99)),
)
#: how much of the served latencies `predict` computes (`Estimator.predict`)
SERVED_LEVELS = ("none", "means", "all")
#: columns `predict` reads (``gpu`` optional: the parameters know their GPU)
PREDICT_COLUMNS = ("model", "batch_size", "input_len", "output_len")
#: the parameter-file format written by `Estimator.to_json`
PARAMS_FORMAT = "slim-params"
#: the parameter-file format version `to_json` writes (what each version changed: CHANGELOG.md)
PARAMS_FORMAT_VERSION = 14
#: a fit progress callback: ``progress(done, total)``
Progress = Callable[[int, int], None]

#: the arrays of `PRED_COLUMNS` and `SERVED_COLUMNS` a method returns, in that order (4, 6 or all of them)
Arrays = tuple[FloatArray, ...]


class AssumptionWarning(UserWarning):
    """A prediction rests on an assumption the table did not state (e.g. the client that sends the requests)."""


def one_batch_size_message(batch_size: float) -> str:
    """Why a fit on one batch size cannot predict another (`IdentifiabilityWarning` of `fit` and `predict`)."""
    return (
        f"the fit's rows hold one batch size (B = {batch_size:g}), so nothing in them sets how a step's time grows "
        "with the batch (per-sequence and per-step costs are one constant there): its predictions and intervals at "
        "other batch sizes are not supported by the data; profile at least three batch sizes (`slim plan`)"
    )


class IdentifiabilityWarning(UserWarning):
    """Some parameters are not identifiable from the fitted data (at a bound, unresolved or strongly correlated)."""


class Estimator(ABC):
    """Base of every method; subclasses implement `fit`, `_predict_rows` and the parameter tables."""

    #: registry name of the method (also the ``variant`` field of its parameter file)
    variant: str = ""

    def __init__(self, gpu: str | None = None) -> None:
        self.gpu = gpu

    # -- constructor state ---------------------------------------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [
            p.name
            for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments, as given (``type(m)(**m.get_params())`` is an unfitted copy)."""
        return {name: getattr(self, name) for name in self._param_names()}

    # -- fitting and prediction ----------------------------------------------------------------------------------
    @abstractmethod
    def fit(self, df: pd.DataFrame, *, progress: Progress | None = None) -> Self:
        """Calibrate on a table in the `slimlib.schema` layout; returns self."""

    @abstractmethod
    def _predict_rows(self, data: pd.DataFrame, hw: GPU, served: str = "all") -> Arrays:
        """(throughput, e2e, prefill, decode[, ttft, tpot[, served columns]]) arrays for the validated rows of
        `data`, as far as `served` asks (`SERVED_LEVELS`); `predict` reports NaN for the ones not returned."""

    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "params_")

    def check_fitted(self) -> None:
        """Raise `NotFittedError` unless the model was fitted or loaded."""
        if not self.is_fitted:
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted: call fit(df) or load a parameter file with load_params"
            )

    def predict(
        self,
        df: pd.DataFrame,
        *,
        check: Callable[[pd.DataFrame], None] | None = None,
        interval: float | None = None,
        served: str = "all",
    ) -> pd.DataFrame:
        """Predicted throughput (tok/s), E2E, prefill and decode time, TTFT and TPOT (s; NaN for a method without
        them) per row, indexed like `df` (`PRED_COLUMNS`). `check`, when
        given, is called on the validated table before anything is computed (e.g. the physical checks of
        `slimlib.model.validity.checking_rows`, whose messages then come before the model's own). `interval`
        (e.g. 0.9) adds the low and high columns of `slimlib.model.intervals.INTERVAL_COLUMNS`: parameter
        uncertainty plus the attached residual model (`attach_intervals`); without one, an `IntervalWarning`
        says the interval holds the parameter uncertainty only. `served` (`SERVED_LEVELS`): ``all`` the served
        latencies with their percentiles, ``means`` TTFT and TPOT only, ``none`` neither (throughput and E2E at
        their cheapest)."""
        self.check_fitted()
        if served not in SERVED_LEVELS:
            raise ValueError(f"served={served!r}: one of {', '.join(SERVED_LEVELS)}")
        level = None if interval is None else check_level(interval)
        data = validate_table(df, require_target=False, require_gpu="gpu" in df.columns)
        if check is not None:
            check(data)
        hw = resolve_gpu(data, self.gpu_)
        arrays: tuple[FloatArray, ...] = self._predict_rows(data, hw, served)
        columns = (*PRED_COLUMNS, *SERVED_COLUMNS) if len(arrays) > len(PRED_COLUMNS) else PRED_COLUMNS
        arrays = (*arrays, *(np.full(len(data), np.nan) for _ in columns[len(arrays) :]))
        out = pd.DataFrame(dict(zip(columns, arrays, strict=True)), index=df.index)
        if level is not None:
            self._add_intervals(out, data, hw, level)
        self._warn_if_batch_unsupported(data)
        return out

    def _warn_if_batch_unsupported(self, data: pd.DataFrame) -> None:
        """An `IdentifiabilityWarning` for the rows of `data` at another batch size than the fit's one, when its
        rows held only one (``fit_info_["batch_sizes"]``; `one_batch_size_message`)."""
        sizes = dict(getattr(self, "fit_info_", {}) or {}).get("batch_sizes")
        if not isinstance(sizes, list) or len(sizes) != 1:
            return
        other = data["batch_size"].to_numpy(dtype=float) != float(sizes[0])
        if other.any():
            warnings.warn(
                f"{int(other.sum())} row(s) at another batch size than the fit's: "
                + one_batch_size_message(sizes[0]), IdentifiabilityWarning, stacklevel=3,
            )  # fmt: skip

    # -- intervals -----------------------------------------------------------------------------------------------
    def log_sds(self, data: pd.DataFrame, hw: GPU) -> dict[str, FloatArray] | None:
        """Per quantity of `slimlib.model.intervals.INTERVAL_QUANTITIES` the model predicts, the standard deviation
        of its log per row from the fit's parameter covariance, or None where the method has none (the default;
        `slimlib.model.calibrated` computes it)."""
        return None

    def log_sd(self, data: pd.DataFrame, hw: GPU) -> FloatArray | None:
        """`log_sds`'s E2E part (= the throughput's: Eq. 6), or None."""
        sds = self.log_sds(data, hw)
        return None if sds is None else sds["e2e"]

    def parameter_log_sds(self, df: pd.DataFrame) -> dict[str, FloatArray] | None:
        """`log_sds` for the rows of `df` (validated as `predict` does)."""
        self.check_fitted()
        data = validate_table(df, require_target=False, require_gpu="gpu" in df.columns)
        return self.log_sds(data, resolve_gpu(data, self.gpu_))

    def parameter_log_sd(self, df: pd.DataFrame) -> FloatArray | None:
        """`log_sd` for the rows of `df` (validated as `predict` does)."""
        sds = self.parameter_log_sds(df)
        return None if sds is None else sds["e2e"]

    def training_error(self) -> float:
        """The fit's throughput MAPE on its own rows as a fraction (``fit_info_["train_mape_pct"] / 100``), NaN
        where the method records none; a term of the interval's scale (`slimlib.model.intervals`)."""
        self.check_fitted()
        v = dict(getattr(self, "fit_info_", {}) or {}).get("train_mape_pct")
        return float(v) / 100.0 if isinstance(v, int | float) and math.isfinite(v) else float("nan")

    def own_batch_errors(self, train: pd.DataFrame) -> pd.DataFrame:
        """Held-out log errors of the method on `train` itself along the batch axis: one refit (an unfitted copy,
        the same options) without each curve's largest batch size, on the curves with three or more, predicting
        those rows; the columns `ResidualModel.from_errors` reads, one row per (held-out row, measured quantity).
        Empty where fewer than two rows can be held out or the refit fails (the shipped residual model alone
        then)."""
        data = validate_table(train)
        keys = [
            c for c in ("model", "gpu", "input_len", "output_len", "tensor_parallel") if c in data.columns
        ]
        top = data.groupby(keys, sort=False)["batch_size"].transform("max").to_numpy(dtype=float)
        n_b = data.groupby(keys, sort=False)["batch_size"].transform("nunique").to_numpy()
        held = (data["batch_size"].to_numpy(dtype=float) == top) & (n_b >= 3)
        empty = pd.DataFrame(
            columns=["axis", "quantity", "log_error", "distance", "train_error", "log_sd", "fold"]
        )
        if held.sum() < 2:
            return empty
        fit_rows, test = data[~held], data[held]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                refit = type(self)(**self.get_params()).fit(fit_rows)
                pred = refit.predict(test)
                sds = refit.parameter_log_sds(test) or {}
        except SlimError:
            return empty
        hw_name = refit.gpu_
        distance = extrapolation_distance(test, fit_domain(fit_rows, hw_name), hw_name)
        parts = []
        for quantity, (pred_col, true_col) in INTERVAL_QUANTITIES.items():
            truth = (
                test[true_col].to_numpy(dtype=float)
                if true_col in test.columns
                else np.full(len(test), np.nan)
            )
            if quantity in ("ttft", "tpot"):
                cols = TTFT_COLUMNS if quantity == "ttft" else TPOT_COLUMNS
                truth = measured_latency_s(test, cols)
            q = pred[pred_col].to_numpy(dtype=float)
            ok = np.isfinite(truth) & (truth > 0) & np.isfinite(q) & (q > 0)
            if not ok.any():
                continue
            sd = np.asarray(sds.get(quantity, np.zeros(len(test))), dtype=float)
            parts.append(pd.DataFrame({
                "axis": "batch", "quantity": quantity, "log_error": np.log(truth[ok] / q[ok]),
                "distance": distance[ok], "train_error": refit.training_error(), "log_sd": sd[ok], "fold": "own",
            }))  # fmt: skip
        return pd.concat(parts, ignore_index=True) if parts else empty

    def attach_intervals(self, residuals: ResidualModel, train: pd.DataFrame) -> Self:
        """Store the residual model learned in the extrapolation cross-validation and the training table's
        domain (which rows extrapolate on which axis, and how far); both are saved in the parameter file.
        Returns self."""
        self.check_fitted()
        self.residuals_ = residuals
        self.domain_ = fit_domain(train, self.gpu_)
        return self

    def _add_intervals(self, out: pd.DataFrame, data: pd.DataFrame, hw: GPU, level: float) -> None:
        residuals: ResidualModel | None = getattr(self, "residuals_", None)
        domain: Domain | None = getattr(self, "domain_", None)
        sds = self.log_sds(data, hw)
        missing = []
        if sds is None:
            missing.append(f"{self.variant or type(self).__name__} has no parameter covariance")
        if residuals is None or domain is None:
            missing.append(
                "no residual model is stored with these parameters (refit with `slim fit ... --intervals`)"
            )
            axes: list[list[str]] = [[] for _ in range(len(data))]
            distance = np.zeros(len(data))
        else:
            axes = row_axes(data, domain, hw.name)
            distance = extrapolation_distance(data, domain, hw.name)
        moe = moe_rows(data)
        train_error = self.training_error()
        no_moe_part = []
        for quantity, (pred_col, _) in INTERVAL_QUANTITIES.items():
            pred = out[pred_col].to_numpy(dtype=float)
            predicted = bool(np.isfinite(pred).any())
            if predicted and residuals is not None and not residuals.has(POOLED, quantity):
                missing.append(
                    f"the stored residual model has no {quantity!r} part (its method predicts none)"
                )
            elif (
                predicted
                and residuals is not None
                and not (residuals.moe and residuals.moe.has(POOLED, quantity))
            ):
                no_moe_part.append(quantity)
            sd = np.zeros(len(data)) if sds is None else sds.get(quantity, np.zeros(len(data)))
            half = residual_half_widths(residuals, axes, quantity, level, distance, train_error, sd, moe)
            lo, hi = interval_bounds(pred, sd, half, level)
            low_col, high_col = INTERVAL_COLUMNS[quantity]
            out[low_col], out[high_col] = lo, hi
        if missing:
            warnings.warn(
                "prediction interval from part of its uncertainty only: " + "; ".join(missing),
                IntervalWarning, stacklevel=3,
            )  # fmt: skip
        narrow = moe_narrow_message(data, moe, axes, no_moe_part) if residuals is not None else None
        if narrow is not None:
            warnings.warn(narrow, IntervalWarning, stacklevel=3)

    def predict_grid(self, workloads: pd.DataFrame, batch_sizes: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Throughput and E2E, each of shape (workloads, batch sizes): `predict` on the cross product of the
        workload rows (every column they have: ``model``, ``input_len``, ``output_len`` and any optional ones such
        as ``tensor_parallel``, ``gpu_blocks``, ``chunked_prefill``) with the batch sizes. One predict path: the
        grid is exactly what `predict` gives for the same rows, caps included."""
        self.check_fitted()
        grid = grid_table(workloads, batch_sizes)
        b = np.asarray(batch_sizes, dtype=float).ravel()
        pred = self.predict(grid, served="none")
        shape = (len(workloads), b.size)
        thr = pred["pred_throughput_tok_s"].to_numpy(dtype=float).reshape(shape)
        e2e = pred["pred_e2e_s"].to_numpy(dtype=float).reshape(shape)
        return thr, e2e

    def score(self, df: pd.DataFrame) -> float:
        """Throughput MAPE (percent) on a table with measured ``throughput_tok_s``."""
        pred = self.predict(df)["pred_throughput_tok_s"]
        return mape(df["throughput_tok_s"].to_numpy(dtype=float), pred.to_numpy())

    # -- parameters ----------------------------------------------------------------------------------------------
    def _units(self) -> dict[str, str]:
        return {}

    def transfer_scaling(self) -> dict[str, str] | None:
        """How each parameter moves to another GPU (`slimlib.model.params.Scaling`: "kept", "flops",
        "bandwidth"), or None when the method has no hardware term and cannot be transferred (the default)."""
        return None

    def summary(self) -> pd.DataFrame:
        """Estimate, standard error and normal-approximation 95% interval per parameter, with units."""
        self.check_fitted()
        names = list(self.params_)
        est = np.array([self.params_[k] for k in names], dtype=float)
        se = np.array([_float(self.stderr_.get(k)) for k in names], dtype=float)
        units = self._units()
        # the method's own intervals where it has them (OLS: t-based), else estimate +- 1.96 standard errors
        own: dict[str, tuple[float, float]] = getattr(self, "ci95_", {})
        z = 1.959963984540054
        lo = np.array([own[k][0] if k in own else e - z * s for k, e, s in zip(names, est, se, strict=True)])
        hi = np.array([own[k][1] if k in own else e + z * s for k, e, s in zip(names, est, se, strict=True)])
        return pd.DataFrame(
            {
                "estimate": est,
                "stderr": se,
                "ci95_low": lo,
                "ci95_high": hi,
                "unit": [units.get(k, "") for k in names],
            },
            index=pd.Index(names, name="parameter"),
        )

    def identifiability_problems(self) -> list[str]:
        """Plain-language list of parameters the data do not determine (empty for methods without such checks)."""
        return []

    # -- persistence ---------------------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """Method-specific fitted state beyond ``params_`` / ``stderr_`` (JSON types only)."""
        return {}

    def _set_state(self, state: dict[str, Any], where: str) -> None:
        """Restore what `_state` wrote (after ``params_`` and ``stderr_`` are set); nothing by default."""
        return None

    def to_dict(self) -> dict[str, Any]:
        """The parameter file's content (see `PARAMS_FORMAT_VERSION`)."""
        self.check_fitted()
        options = {k: v for k, v in self.get_params().items() if k != "gpu"}
        return {
            "format": PARAMS_FORMAT,
            "format_version": PARAMS_FORMAT_VERSION,
            "variant": self.variant,
            "gpu": self.gpu_,
            "params": dict(self.params_),
            "param_order": list(self.params_),
            "stderr": dict(self.stderr_),
            "options": options,
            "fit": self.fit_info_,
            "state": self._state(),
            **self._intervals_dict(),
        }

    def _intervals_dict(self) -> dict[str, Any]:
        residuals: ResidualModel | None = getattr(self, "residuals_", None)
        domain: Domain | None = getattr(self, "domain_", None)
        if residuals is None or domain is None:
            return {}
        return {"intervals": {"residuals": residuals.to_dict(), "domain": domain.to_dict()}}

    def to_json(self, path: str | Path | None = None) -> str:
        """Serialize the fitted parameters as JSON (written atomically to `path` when given); returns the text."""
        text = json.dumps(finite_or_none(self.to_dict()), indent=2, sort_keys=True) + "\n"
        if path is not None:
            write_text(path, text)
        return text

    def _restore(self, d: dict[str, Any], where: str, gpu: str) -> None:
        """Set the fitted attributes from a parameter file's content `d` (already checked by the registry)."""
        params = d["params"]
        if not isinstance(params, dict) or not all(_is_number(v) for v in params.values()):
            raise DataError(f"{where}: field 'params' must map names to finite numbers")
        self.gpu_ = gpu
        order = [k for k in d.get("param_order") or [] if k in params]
        order += [k for k in params if k not in order]  # JSON objects are written with sorted keys
        self.params_ = {k: float(params[k]) for k in order}
        raw_se = dict(d.get("stderr") or {})
        self.stderr_ = {k: _float(v) for k, v in raw_se.items()}
        bad = [
            k for k, v in self.stderr_.items() if math.isinf(v) or v < 0 or (raw_se[k] is not None and v != v)
        ]
        if bad:
            raise DataError(f"{where}: field 'stderr' of {bad[0]!r} is {self.stderr_[bad[0]]}: a standard error is "
                            "a finite number >= 0 (null where unknown); refit with `slim fit`")  # fmt: skip
        self.fit_info_ = dict(d.get("fit") or {})
        self._set_state(dict(d.get("state") or {}), where)
        intervals = d.get("intervals")
        if intervals is not None:
            if not isinstance(intervals, dict):
                raise DataError(
                    f"{where}: field 'intervals' must be an object; refit with `slim fit ... --intervals`"
                )
            self.residuals_ = ResidualModel.from_dict(intervals.get("residuals"), where)
            self.domain_ = Domain.from_dict(intervals.get("domain"), where)

    def __repr__(self) -> str:
        state = f"fitted on {self.gpu_}" if self.is_fitted else "not fitted"
        return f"{type(self).__name__}(variant={self.variant!r}, {state})"


def grid_table(workloads: pd.DataFrame, batch_sizes: FloatArray) -> pd.DataFrame:
    """The (workloads x batch sizes) cross product, workload-major: every column of `workloads` repeated per batch
    size, ``batch_size`` tiled (replacing a ``batch_size`` column the workloads may have)."""
    b = np.asarray(batch_sizes, dtype=float).ravel()
    rows = np.repeat(np.arange(len(workloads)), b.size)
    grid = workloads.drop(columns=["batch_size"], errors="ignore").iloc[rows].reset_index(drop=True)
    grid["batch_size"] = np.tile(b, len(workloads))
    return grid


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _float(v: object) -> float:
    return float(v) if isinstance(v, int | float | np.floating) else float("nan")


def finite_or_none(obj: Any) -> Any:
    """JSON-safe copy of `obj`: NaN/inf become None, numpy scalars become Python numbers."""
    if isinstance(obj, dict):
        return {k: finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_or_none(v) for v in obj]
    if isinstance(obj, float | np.floating):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj
