"""Selection by extrapolation: a candidate model (a registered method or a term list) scored by fitting one region
of the data and predicting another, along every axis a user extrapolates on (`extrapolation_folds`).

`run_extrapolation_cv` fits every candidate on every fold (the same folds and test rows for every candidate) and
records, per test row, the measured and predicted throughput, E2E, mean TTFT and TPOT and their 50th, 90th and 99th
percentiles (`SERVED_SCORES`; measured where the test table has them: ``mean_ttft_ms``, ``mean_tpot_ms`` or
``mean_itl_ms``, ``pNN_ttft_ms``, ``pNN_tpot_ms``; predicted where a method predicts them), the parameter
part of each prediction's uncertainty (`Estimator.parameter_log_sds`), the row's extrapolation distance from the
fold's training domain (`slimlib.model.intervals.extrapolation_distance`) and the fold fit's own training error
(`Estimator.training_error`): what the residual model of the intervals is learned from. A fold whose fit or prediction fails (a `SlimError`, or a non-finite
prediction) is recorded in ``failures`` and its cell is left empty for that candidate, never dropped silently.
`extrapolation_table` gives MAPE and bias (mean signed % error) per (axis, dataset) and candidate with bootstrap
95% intervals (`slimlib.experiments.outputs.uncertainty`); `recommend` picks the candidate with the best worst-axis
throughput MAPE, and of candidates tied on it within the paired bootstrap interval of the difference, the one with
the lowest mean MAPE over the cells. Intervals and their coverage:
`slimlib.experiments.accuracy.extrapolation_coverage`.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from slimlib.errors import DataError, SlimError
from slimlib.experiments.accuracy.extrapolation_folds import AXES, AxisFolds, Fold, build_axis_folds
from slimlib.experiments.accuracy.fit_cache import entry_key, read_entry, write_entry
from slimlib.experiments.outputs.uncertainty import N_BOOT, SEED, bootstrap_mean_ci, resample_indices, rng_for
from slimlib.experiments.workers import fork_map
from slimlib.model import METHODS, Estimator, load_params, make_model
from slimlib.model.calibrated import TermModel
from slimlib.model.gpu_transfer import transfer_params, transferred_params, transferred_stderr, untransferred
from slimlib.model.intervals import extrapolation_distance, fit_domain
from slimlib.model.terms import Term
from slimlib.registry.gpus import get_gpu
from slimlib.schema import TPOT_COLUMNS, TTFT_COLUMNS, measured_latency_s

#: a candidate: a registered method name, or (name, term list) for a model of any terms (`TermModel`), or (name,
#: term list, `TermModel` options such as ``test_priors_at_bound``)
Candidate = str | tuple[str, Sequence[Term]] | tuple[str, Sequence[Term], Mapping[str, Any]]
#: the `TermModel` options a (name, term list, options) candidate may set (`n_starts` is the protocol's)
TERM_MODEL_OPTIONS = ("test_priors_at_bound", "device_priors", "fixed", "max_nfev", "seed")
#: Sobol starts per fit in the protocol (the package default is 8; 2 keeps the protocol within minutes)
CV_STARTS = 2
#: the served latencies scored (`latency_table`): (name, the test table's columns, ms); the measured value is
#: ``<name>_s``, the prediction ``pred_<name>_s``
SERVED_SCORES = (
    ("ttft", TTFT_COLUMNS), ("tpot", TPOT_COLUMNS),
    *((f"{m}_p{q}", (f"p{q}_{m}_ms",)) for m in ("ttft", "tpot") for q in (50, 90, 99)),
)  # fmt: skip
_SERVED = tuple(name for name, _ in SERVED_SCORES)
#: columns of `CVResult.predictions`
PRED_COLUMNS = (
    "axis", "dataset", "fold", "method", "model", "gpu", "batch_size", "input_len", "output_len",
    "throughput_tok_s", "e2e_s", *(f"{n}_s" for n in _SERVED), "pred_throughput_tok_s", "pred_e2e_s",
    *(f"pred_{n}_s" for n in _SERVED), "log_sd", "log_sd_ttft", "log_sd_tpot", "distance", "train_error",
)  # fmt: skip
#: level of the paired bootstrap interval within which two worst-axis errors are a tie (`tied_best`)
TIE_LEVEL = 0.95
#: columns of `extrapolation_table`
TABLE_COLUMNS = (
    "axis", "dataset", "method", "n_folds", "n_failed_folds", "n_test", "mape_pct", "mape_lo_pct", "mape_hi_pct",
    "bias_pct", "bias_lo_pct", "bias_hi_pct", "latency_mape_pct", "note",
)  # fmt: skip


def calibrated_methods() -> list[str]:
    """The default candidates: every calibrated method of the registry (`METHODS`) that is not experimental, in
    registry order."""
    return [name for name, m in METHODS.items() if m.calibrated and not m.experimental]


def candidate_name(candidate: Candidate) -> str:
    return candidate if isinstance(candidate, str) else str(candidate[0])


def new_model(candidate: Candidate, n_starts: int) -> Estimator:
    """A fresh model of `candidate` (a registered name, or a `TermModel` of the given terms and options)."""
    if isinstance(candidate, str):
        return make_model(candidate, n_starts=n_starts)
    name, terms = candidate[0], candidate[1]
    options = dict(candidate[2]) if len(candidate) > 2 else {}
    if not terms or not all(isinstance(t, Term) for t in terms):
        raise DataError(
            f"candidate {name!r}: give a registered method name or a non-empty list of Term objects"
        )
    unknown = sorted(set(options) - set(TERM_MODEL_OPTIONS))
    if unknown:
        raise DataError(
            f"candidate {name!r}: unknown option(s) {', '.join(unknown)}; a term-list candidate takes "
            f"{', '.join(TERM_MODEL_OPTIONS)}"
        )
    return TermModel(tuple(terms), n_starts=n_starts, **options)


def transferred(model: Estimator, gpu: str) -> Estimator:
    """`model` moved to `gpu` as `slim transfer` moves it (`slimlib.model.gpu_transfer`); a `TermModel` (no
    parameter file) by the same rule on its parameters and standard errors, its held parameters and correlations
    kept."""
    if isinstance(model, TermModel):
        scaling = model.transfer_scaling()
        source, target = get_gpu(model.gpu_), get_gpu(gpu)
        params = transferred_params(dict(model.params_), scaling, source, target)
        out = TermModel.with_params(
            {k: float(v) for k, v in params.items() if v is not None}, gpu, term_list=model.term_list
        )
        out.stderr_ = {k: float("nan") if v is None else v
                       for k, v in transferred_stderr(dict(model.stderr_), scaling, source, target).items()}  # fmt: skip
        out.held_, out.held_reasons_ = list(model.held_), dict(model.held_reasons_)
        out.free_params_, out.corr_ = list(model.free_params_), model.corr_.copy()
        return out
    doc = transfer_params(json.loads(model.to_json()), gpu)
    return load_params(json.dumps(untransferred(doc)))


@dataclass
class CVResult:
    """Per-row held-out predictions of every candidate, the failed folds, the warnings, the run time."""

    predictions: pd.DataFrame
    failures: pd.DataFrame
    warnings: pd.DataFrame
    axes: list[AxisFolds]
    methods: list[str]
    seconds: float
    n_starts: int
    models: dict[tuple[str, str, str, str], Estimator] = field(default_factory=dict)

    def cell(self, ax: AxisFolds, method: str | None = None) -> pd.DataFrame:
        """The prediction rows of one (axis, dataset) cell, of one candidate where `method` is given, in the order
        of `predictions`."""
        key = (ax.axis, ax.dataset) if method is None else (ax.axis, ax.dataset, method)
        if self._positions is None or self._positions[0] is not self.predictions:
            p = self.predictions
            self._positions = (
                p,
                p.groupby(["axis", "dataset"], sort=False).indices,
                p.groupby(["axis", "dataset", "method"], sort=False).indices,
            )
        at = self._positions[1 if method is None else 2].get(key)
        return self.predictions.iloc[at if at is not None else []]

    _positions: tuple[pd.DataFrame, dict[Any, Any], dict[Any, Any]] | None = field(
        default=None, init=False, repr=False, compare=False
    )


def _fit_fold(candidate: Candidate, axis: AxisFolds, fold_train: pd.DataFrame, fold_test: pd.DataFrame,
              n_starts: int) -> tuple[Estimator, pd.DataFrame, dict[str, np.ndarray]]:  # fmt: skip
    model = new_model(candidate, n_starts).fit(fold_train)
    train_error = model.training_error()
    gpu = str(fold_test["gpu"].iloc[0])
    if axis.transfer:
        model = transferred(model, gpu)
    pred = model.predict(fold_test)
    sds = model.parameter_log_sds(fold_test) or {}
    zero = np.zeros(len(fold_test))
    extra = {
        "log_sd": np.asarray(sds.get("e2e", zero), dtype=float),
        "log_sd_ttft": np.asarray(sds.get("ttft", zero), dtype=float),
        "log_sd_tpot": np.asarray(sds.get("tpot", zero), dtype=float),
        "distance": extrapolation_distance(
            fold_test, fit_domain(fold_train, str(fold_train["gpu"].iloc[0])), gpu
        ),
        "train_error": np.full(len(fold_test), train_error),
    }
    return model, pred, extra


def candidate_description(candidate: Candidate) -> str:
    """What identifies a candidate's fits: its registered name, or its name, term names and options."""
    if isinstance(candidate, str):
        return candidate
    options = dict(candidate[2]) if len(candidate) > 2 else {}
    return json.dumps([candidate[0], [t.name for t in candidate[1]], options], sort_keys=True, default=str)


def _fold_result(
    candidate: Candidate, ax: AxisFolds, fold: Fold, n_starts: int
) -> tuple[dict[str, Any], Estimator | None]:
    """One candidate on one fold: its held-out prediction rows, or the reason it has none, and the warnings raised
    (a JSON-ready dict, `fit_cache.RESULT_FIELDS`), and the fitted model."""
    key = {"axis": ax.axis, "dataset": ax.dataset, "fold": fold.label, "method": candidate_name(candidate)}
    failure: str | None = None
    model = None
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        try:
            model, pred, extra = _fit_fold(candidate, ax, fold.train, fold.test, n_starts)
        except SlimError as exc:
            failure = f"{type(exc).__name__}: {exc}"
    caught = [{"category": w.category.__name__, "message": str(w.message)} for w in record]
    part: dict[str, list[Any]] | None = None
    if model is not None:
        p_thr = pred["pred_throughput_tok_s"].to_numpy(dtype=float)
        if not (np.isfinite(p_thr).all() and (p_thr > 0).all()):
            failure, model = "non-finite or non-positive throughput prediction", None
        else:
            t = fold.test
            nan = np.full(len(t), np.nan)
            cols = {**key, **{c: t[c].to_numpy() for c in PRED_COLUMNS[4:11]},
                    **{f"{n}_s": measured_latency_s(t, c) for n, c in SERVED_SCORES},
                    "pred_throughput_tok_s": p_thr, "pred_e2e_s": pred["pred_e2e_s"].to_numpy(dtype=float),
                    **{f"pred_{n}_s": pred[f"pred_{n}_s"].to_numpy(dtype=float) if f"pred_{n}_s" in pred else nan
                       for n in _SERVED}, **extra}  # fmt: skip
            frame = pd.DataFrame(cols)[list(PRED_COLUMNS)]
            part = {c: frame[c].tolist() for c in PRED_COLUMNS}
    return {"part": part, "failure": failure, "warnings": caught}, model


def run_extrapolation_cv(
    candidates: Iterable[Candidate] | None = None,
    *,
    axes: list[AxisFolds] | None = None,
    n_starts: int = CV_STARTS,
    keep_models: bool = False,
    jobs: int | None = None,
    cache_dir: str | Path | None = None,
) -> CVResult:
    """Fit each candidate (default `calibrated_methods`) on every fold of `axes` (default `build_axis_folds`) and
    predict the fold's test rows, in `jobs` worker processes (`slimlib.experiments.workers.fork_map`). With
    `cache_dir`, a fold whose inputs and code are unchanged is read from there instead of refitted
    (`slimlib.experiments.accuracy.fit_cache`), and so is the composed table the default folds are built from;
    `keep_models` fits every fold here and keeps the models."""
    cands = list(calibrated_methods() if candidates is None else candidates)
    names = [candidate_name(c) for c in cands]
    if len(set(names)) != len(names):
        raise DataError(f"candidate names must be unique, got {names}")
    for c in cands:
        new_model(c, n_starts)  # an invalid candidate fails here, before any fit
    folds = build_axis_folds(cache_dir=cache_dir) if axes is None else axes
    t0 = time.perf_counter()
    work = [(c, ax, fold) for c in cands for ax in folds for fold in ax.folds]
    cache = Path(cache_dir) if cache_dir is not None and not keep_models else None
    settings = {"n_starts": n_starts}
    keys = [
        entry_key(candidate_description(c), {**settings, "transfer": ax.transfer}, fold.train, fold.test)
        for c, ax, fold in work
    ] if cache is not None else [""] * len(work)  # fmt: skip
    results: list[dict[str, Any] | None] = [read_entry(cache, k) if cache is not None else None for k in keys]
    models: dict[tuple[str, str, str, str], Estimator] = {}
    todo = [i for i, r in enumerate(results) if r is None]
    if keep_models:
        for i in todo:
            cand, ax, fold = work[i]
            results[i], model = _fold_result(cand, ax, fold, n_starts)
            if model is not None:
                models[(ax.axis, ax.dataset, fold.label, candidate_name(cand))] = model
    else:
        done = fork_map(lambda j: _fold_result(*work[todo[j]], n_starts)[0], len(todo), jobs)
        for i, r in zip(todo, done, strict=True):
            results[i] = r
    if cache is not None:
        for i in todo:
            write_entry(cache, keys[i], results[i] or {})
    parts, failures, caught = [], [], []
    for (cand, ax, fold), r in zip(work, results, strict=True):
        assert r is not None
        key = {"axis": ax.axis, "dataset": ax.dataset, "fold": fold.label, "method": candidate_name(cand)}
        caught += [{**key, **w} for w in r["warnings"]]
        if r["failure"] is not None:
            failures.append({**key, "error": r["failure"]})
        if r["part"] is not None:
            parts.append(pd.DataFrame(r["part"], columns=list(PRED_COLUMNS)))
    preds = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(PRED_COLUMNS))
    for c in preds.columns:  # text in one piece, not one per fold: selecting a cell's rows is 4x faster
        if isinstance(preds[c].dtype, pd.StringDtype):
            preds[c] = pd.array(preds[c].to_numpy(dtype=object), dtype=preds[c].dtype)
    return CVResult(
        preds[list(PRED_COLUMNS)],
        pd.DataFrame(failures, columns=["axis", "dataset", "fold", "method", "error"]),
        pd.DataFrame(caught, columns=["axis", "dataset", "fold", "method", "category", "message"]),
        folds, names, time.perf_counter() - t0, n_starts, models,
    )  # fmt: skip


def signed_pct_error(true: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """100 (pred / true - 1) per row: the bias of a prediction (positive: over-predicted)."""
    return 100.0 * (np.asarray(pred, dtype=float) / np.asarray(true, dtype=float) - 1.0)


def _error_cis(
    g: pd.DataFrame, label: str, n_boot: int, seed: int
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """Throughput MAPE and bias of the prediction rows `g`, each (mean, low, high) with its bootstrap 95%
    interval (streams named by `label`)."""
    signed = signed_pct_error(
        g["throughput_tok_s"].to_numpy(float), g["pred_throughput_tok_s"].to_numpy(float)
    )
    mape = bootstrap_mean_ci(np.abs(signed), n_boot=n_boot, seed=seed, label=label)
    bias = bootstrap_mean_ci(signed, n_boot=n_boot, seed=seed, label="bias " + label)
    return mape, bias


def cell_text(r: Any) -> str:
    """A cell's ``MAPE [95% CI] (bias %)`` from a row with ``mape_pct``, ``mape_lo_pct``, ``mape_hi_pct`` and
    ``bias_pct``."""
    return f"{r['mape_pct']:.1f} [{r['mape_lo_pct']:.1f}, {r['mape_hi_pct']:.1f}] ({r['bias_pct']:+.1f})"


def extrapolation_table(
    result: CVResult, *, n_boot: int = N_BOOT, seed: int = SEED, jobs: int | None = None
) -> pd.DataFrame:
    """Per (axis, dataset, candidate): folds, failed folds, test rows, throughput MAPE and bias with bootstrap 95%
    intervals, latency (E2E) MAPE; a candidate with a failed fold gets no numbers there (``note`` says why). The
    cells' resamples run in `jobs` worker processes (`slimlib.experiments.workers.fork_map`)."""
    cells = [(ax, name) for ax in result.axes for name in result.methods]

    def numbers(i: int) -> list[float]:
        ax, name = cells[i]
        g = result.cell(ax, name)
        if len(g) != ax.n_test:
            raise DataError(f"{ax.axis}/{ax.dataset}/{name}: {len(g)} predictions for {ax.n_test} test rows")
        (m, lo, hi), (b, blo, bhi) = _error_cis(
            g, f"extrapolation {ax.axis} / {ax.dataset} / {name}", n_boot, seed
        )
        e, qe = g["e2e_s"].to_numpy(float), g["pred_e2e_s"].to_numpy(float)
        lat = float(np.mean(np.abs(signed_pct_error(e, qe)))) if np.isfinite(qe).all() else np.nan
        return [m, lo, hi, b, blo, bhi, lat]

    fails = result.failures
    failed = [
        fails[(fails["axis"] == ax.axis) & (fails["dataset"] == ax.dataset) & (fails["method"] == name)]
        for ax, name in cells
    ]
    todo = [i for i, f in enumerate(failed) if not len(f)]
    values = dict(zip(todo, fork_map(lambda j: numbers(todo[j]), len(todo), jobs), strict=True))
    rows = []
    for i, (ax, name) in enumerate(cells):
        f = failed[i]
        row = {"axis": ax.axis, "dataset": ax.dataset, "method": name, "n_folds": len(ax.folds),
               "n_failed_folds": len(f), "n_test": ax.n_test}  # fmt: skip
        if len(f):
            m, lo, hi, b, blo, bhi, lat = [np.nan] * 7
            row["note"] = f"{len(f)} of {len(ax.folds)} fold(s) not fitted: " + "; ".join(
                f"{r.fold}: {str(r.error)[:120]}" for r in f.itertuples()
            )
        else:
            m, lo, hi, b, blo, bhi, lat = values[i]
            row["note"] = ""
        row.update(mape_pct=m, mape_lo_pct=lo, mape_hi_pct=hi, bias_pct=b, bias_lo_pct=blo, bias_hi_pct=bhi,
                   latency_mape_pct=lat)  # fmt: skip
        rows.append(row)
    order = {a: i for i, a in enumerate(AXES)}
    out = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    return out.sort_values("axis", key=lambda s: s.map(order), kind="mergesort").reset_index(drop=True)


#: columns of `latency_table`
LATENCY_COLUMNS = (
    "axis", "dataset", "quantity", "method", "n_test", "mape_pct", "mape_lo_pct", "mape_hi_pct", "bias_pct",
)  # fmt: skip


def latency_table(result: CVResult, *, n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """Per (axis, dataset, served latency of `SERVED_SCORES`, candidate): the MAPE [bootstrap 95%] and bias of the
    held-out rows where that latency was measured, for every candidate that predicts it on all of them (the same
    rows for each; a candidate that does not predict it, or failed a fold of the cell, has no row)."""
    rows = []
    for ax in result.axes:
        for name in _SERVED:
            for method in result.methods:
                g = result.cell(ax, method)
                if len(g) != ax.n_test:  # a failed fold: not on the same rows
                    continue
                y = g[f"{name}_s"].to_numpy(float)
                keep = np.isfinite(y) & (y > 0)
                q = g[f"pred_{name}_s"].to_numpy(float)[keep]
                if not keep.any() or not np.isfinite(q).all():
                    continue
                signed = signed_pct_error(y[keep], q)
                label = f"latency {ax.axis} / {ax.dataset} / {name} / {method}"
                m, lo, hi = bootstrap_mean_ci(np.abs(signed), n_boot=n_boot, seed=seed, label=label)
                rows.append({"axis": ax.axis, "dataset": ax.dataset, "quantity": name, "method": method,
                             "n_test": int(keep.sum()), "mape_pct": m, "mape_lo_pct": lo, "mape_hi_pct": hi,
                             "bias_pct": float(signed.mean())})  # fmt: skip
    return pd.DataFrame(rows, columns=list(LATENCY_COLUMNS))


#: columns of `model_table`
MODEL_TABLE_COLUMNS = (
    "axis", "dataset", "model", "method", "n_test", "mape_pct", "mape_lo_pct", "mape_hi_pct", "bias_pct",
    "bias_lo_pct", "bias_hi_pct",
)  # fmt: skip


def model_table(result: CVResult, method: str, *, n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """`method`'s throughput MAPE and bias [bootstrap 95%] per (axis, dataset) and held-out model, for the cells
    whose test rows hold more than one model: which model's rows make the cell's error (the same rows and numbers
    as `extrapolation_table`, split)."""
    rows = []
    for ax in result.axes:
        g = result.cell(ax, method)
        if g["model"].nunique() < 2:
            continue
        for model, h in g.groupby("model", sort=True):
            label = f"extrapolation {ax.axis} / {ax.dataset} / {model} / {method}"
            (m, lo, hi), (b, blo, bhi) = _error_cis(h, label, n_boot, seed)
            rows.append({"axis": ax.axis, "dataset": ax.dataset, "model": model, "method": method,
                         "n_test": len(h), "mape_pct": m, "mape_lo_pct": lo, "mape_hi_pct": hi, "bias_pct": b,
                         "bias_lo_pct": blo, "bias_hi_pct": bhi})  # fmt: skip
    return pd.DataFrame(rows, columns=list(MODEL_TABLE_COLUMNS))


def worst_axis(table: pd.DataFrame) -> pd.DataFrame:
    """Per candidate: the worst (axis, dataset) throughput MAPE, where it is, and the cells without numbers."""
    rows = []
    for name, g in table.groupby("method", sort=False):
        missing = g[g["mape_pct"].isna()]
        ok = g[g["mape_pct"].notna()]
        worst = ok.loc[ok["mape_pct"].idxmax()] if len(ok) else None
        rows.append({"method": name,
                     "worst_mape_pct": float(worst["mape_pct"]) if worst is not None else np.nan,
                     "worst_cell": f"{worst['axis']} / {worst['dataset']}" if worst is not None else "",
                     "n_failed_cells": len(missing),
                     "mean_mape_pct": float(ok["mape_pct"].mean()) if len(ok) else np.nan})  # fmt: skip
    return pd.DataFrame(rows)


def worst_axis_draws(
    result: CVResult, methods: Sequence[str], *, n_boot: int = N_BOOT, seed: int = SEED
) -> np.ndarray:
    """``(n_boot, len(methods))`` worst-axis throughput MAPEs of `methods` on paired bootstrap resamples: every
    cell's test rows are resampled with the same indices for every method (all score the same rows, which is
    checked), each method's MAPE per cell taken on them, and the largest over the cells kept."""
    worst = np.full((int(n_boot), len(methods)), -np.inf)
    for ax in result.axes:
        measured, errors = _cell_errors(result, ax, methods)
        if measured.size == 0:
            continue
        rng = rng_for(seed, measured, f"worst axis {ax.axis} {ax.dataset}")
        idx = resample_indices(rng, measured.size, (int(n_boot), measured.size))
        for j, e in enumerate(errors):
            worst[:, j] = np.maximum(worst[:, j], np.take(e, idx).mean(axis=1))
    return worst


def _cell_errors(
    result: CVResult, ax: AxisFolds, methods: Sequence[str]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The measured throughputs of one cell's test rows and each method's absolute % errors on them (DataError when
    a method did not score exactly those rows)."""
    errors, measured = [], None
    for m in methods:
        g = result.cell(ax, m)
        t = g["throughput_tok_s"].to_numpy(float)
        if len(g) != ax.n_test or (measured is not None and not np.array_equal(t, measured)):
            raise DataError(
                f"{ax.axis}/{ax.dataset}/{m}: not the {ax.n_test} test rows of the other candidates"
            )
        measured = t
        errors.append(np.abs(signed_pct_error(t, g["pred_throughput_tok_s"].to_numpy(float))))
    return (np.zeros(0) if measured is None else measured), errors


#: columns of `paired_differences`
PAIRED_COLUMNS = ("method", "axis", "dataset", "n_test", "reference_mape_pct", "mape_pct", "diff_pct",
                  "diff_lo_pct", "diff_hi_pct")  # fmt: skip


def paired_differences(
    result: CVResult,
    reference: str,
    methods: Sequence[str] | None = None,
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> pd.DataFrame:
    """Per candidate of `methods` (default: every other one without a failed fold) and cell: its throughput MAPE
    minus `reference`'s on the same test rows (points; positive: `reference` is better) with the paired bootstrap
    95% interval (the same resampled rows for both), and per candidate one row of axis and dataset ``"all"``: the
    difference of the mean MAPE over the cells (the selection's tie-break), every cell's rows resampled together."""
    failed = set(result.failures["method"]) if len(result.failures) else set()
    if reference in failed:
        raise DataError(
            f"paired differences: {reference!r} has failed folds; no paired comparison on every cell"
        )
    names = [m for m in (methods or result.methods) if m != reference and m not in failed]
    rows: list[dict[str, Any]] = []
    means = np.zeros((int(n_boot), len(names) + 1))
    n_cells = 0
    for ax in result.axes:
        measured, errors = _cell_errors(result, ax, [reference, *names])
        if measured.size == 0:
            continue
        n_cells += 1
        rng = rng_for(seed, measured, f"paired {ax.axis} {ax.dataset}")
        idx = resample_indices(rng, measured.size, (int(n_boot), measured.size))
        draws = np.stack([np.take(e, idx).mean(axis=1) for e in errors], axis=1)
        means += draws
        for j, name in enumerate(names, start=1):
            d = draws[:, j] - draws[:, 0]
            lo, hi = np.quantile(d, (0.025, 0.975))
            rows.append({"method": name, "axis": ax.axis, "dataset": ax.dataset, "n_test": int(measured.size),
                         "reference_mape_pct": float(errors[0].mean()), "mape_pct": float(errors[j].mean()),
                         "diff_pct": float(errors[j].mean() - errors[0].mean()), "diff_lo_pct": float(lo),
                         "diff_hi_pct": float(hi)})  # fmt: skip
    for j, name in enumerate(names, start=1):
        cells = [r for r in rows if r["method"] == name]
        d = (means[:, j] - means[:, 0]) / max(n_cells, 1)
        lo, hi = np.quantile(d, (0.025, 0.975))
        ref_mean = float(np.mean([r["reference_mape_pct"] for r in cells]))
        mean = float(np.mean([r["mape_pct"] for r in cells]))
        rows.append({"method": name, "axis": "all", "dataset": "all", "n_test": sum(int(r["n_test"]) for r in cells),
                     "reference_mape_pct": ref_mean, "mape_pct": mean, "diff_pct": mean - ref_mean,
                     "diff_lo_pct": float(lo), "diff_hi_pct": float(hi)})  # fmt: skip
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def tied_best(
    table: pd.DataFrame, result: CVResult | None = None, *, n_boot: int = N_BOOT, seed: int = SEED
) -> pd.DataFrame:
    """`worst_axis` rows of the candidates with numbers in every cell that are tied with the lowest worst-axis MAPE,
    ordered by their mean MAPE over the cells (the tie-break), lowest first. Tied: equal at the 0.1 point the table
    prints, or, with the cross-validation's `result`, within the uncertainty of the difference: the paired
    bootstrap `TIE_LEVEL` interval of a candidate's worst-axis MAPE minus the lowest one (`worst_axis_draws`)
    reaches below 0, i.e. the candidate has the lower worst axis in more than its lower tail of the resamples (a
    candidate that is never lower, as when both share the worst cell in some resamples and it is worse in the
    others, is not tied)."""
    w = worst_axis(table)
    eligible = w[(w["n_failed_cells"] == 0) & w["worst_mape_pct"].notna()]
    if eligible.empty:
        raise DataError("no candidate has numbers on every axis; see the table's notes for the failed folds")
    shown = eligible["worst_mape_pct"].round(1)
    tied = shown == shown.min()
    if result is not None:
        names = list(eligible["method"])
        draws = worst_axis_draws(result, names, n_boot=n_boot, seed=seed)
        best = names.index(str(eligible.loc[eligible["worst_mape_pct"].idxmin(), "method"]))
        low = np.quantile(draws - draws[:, [best]], (1 - TIE_LEVEL) / 2, axis=0)
        tied = tied | pd.Series(low < 0, index=eligible.index)
    return eligible[tied].sort_values("mean_mape_pct", kind="mergesort")


def recommend(
    table: pd.DataFrame,
    result: CVResult | None = None,
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    tied: pd.DataFrame | None = None,
) -> tuple[str, str]:
    """(name, reason): the candidate with the lowest worst-axis throughput MAPE among those with numbers in
    every (axis, dataset) cell (a candidate that cannot be fitted on a fold cannot be recommended there); of
    candidates tied on it (`tied_best`, within the paired bootstrap interval when `result` is given), the one with
    the lowest mean MAPE over the cells. `tied`: `tied_best`'s frame when the caller has it already."""
    w = worst_axis(table)
    tied = tied_best(table, result, n_boot=n_boot, seed=seed) if tied is None else tied
    best = tied.iloc[0]
    others = "; ".join(
        f"{r.method} {r.worst_mape_pct:.1f}% ({r.worst_cell})" if r.n_failed_cells == 0
        else f"{r.method}: {r.n_failed_cells} cell(s) not fitted"
        for r in w.itertuples() if r.method != best["method"]
    )  # fmt: skip
    how = (
        f"within the paired bootstrap {TIE_LEVEL:.0%} interval of the difference"
        if result is not None
        else "at 0.1 point"
    )
    tie = (
        f" (tied with {', '.join(tied['method'].iloc[1:])} {how}; lowest mean MAPE over the cells, "
        + ", ".join(f"{r.method} {r.mean_mape_pct:.1f}%" for r in tied.itertuples())
        + ")"
        if len(tied) > 1
        else ""
    )
    lowest = (
        "the lowest" if best["worst_mape_pct"] == tied["worst_mape_pct"].min() else "tied with the lowest"
    )
    reason = (
        f"{best['method']}: worst-axis throughput MAPE {best['worst_mape_pct']:.1f}% ({best['worst_cell']}), "
        f"{lowest}{tie}; others: {others or 'none'}"
    )
    return str(best["method"]), reason


def wide_table(table: pd.DataFrame, labels: dict[str, str] | None = None) -> pd.DataFrame:
    """The display table: one row per (axis, dataset) with folds and test rows, one column per candidate with
    ``MAPE [95% CI] (bias %)`` or the reason it has none, and the worst-axis row."""
    labels = labels or {}
    keys = list(dict.fromkeys(zip(table["axis"], table["dataset"], strict=True)))
    methods = list(dict.fromkeys(table["method"]))
    out = []
    for axis, ds in keys:
        g = table[(table["axis"] == axis) & (table["dataset"] == ds)].set_index("method")
        first = g.iloc[0]
        row: dict[str, object] = {"axis": axis, "dataset": ds, "n_folds": int(first["n_folds"]),
                                  "n_test": int(first["n_test"])}  # fmt: skip
        for m in methods:
            r = g.loc[m]
            row[labels.get(m, m)] = (
                cell_text(r) if np.isfinite(r["mape_pct"]) else f"not fitted ({int(r['n_failed_folds'])} folds)"
            )  # fmt: skip
        out.append(row)
    w = worst_axis(table).set_index("method")
    worst: dict[str, object] = {"axis": "worst axis", "dataset": "", "n_folds": "", "n_test": ""}
    for m in methods:
        r = w.loc[m]
        worst[labels.get(m, m)] = (f"{r['worst_mape_pct']:.1f} ({r['worst_cell']})" if r["n_failed_cells"] == 0
                                   else f"{int(r['n_failed_cells'])} cell(s) not fitted")  # fmt: skip
    out.append(worst)
    return pd.DataFrame(out).astype(str)
