"""The SLIM evaluation (paper Sec. VII-A, Table II): every method fitted on every scenario, MAPE computed on the fly.

`evaluate()` returns the MAPE table (columns `TABLE_COLUMNS`); it is
always computed from the data, never stored. `run_evaluation()` also returns the per-row predictions and the
fitted models, for plots and parameter tables. Methods are keyed by registry name (`slimlib.model.methods.METHODS`)
everywhere; display labels (`slimlib.model.method_label`) appear only in `scenario_wide_table` and in figures' legends.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from slimlib.errors import SlimError, UnknownNameError, close_matches_message
from slimlib.experiments.accuracy.scenarios import Scenario, build_scenarios
from slimlib.experiments.outputs.table_format import SCENARIO_LABELS
from slimlib.metrics import mape
from slimlib.model import METHODS as REGISTRY
from slimlib.model import Estimator, IdentifiabilityWarning, make_model, method_label

#: columns of the MAPE table; ``n_warnings`` counts the warnings of that scenario and method (all folds),
#: ``n_unstable_folds`` the folds whose fit was flagged unstable (`slimlib.model.calibrated`, fit stability),
#: ``at_bound`` the parameters at a bound in any fold (comma-separated), ``note`` why a cell is empty
TABLE_COLUMNS = (
    "scenario", "method", "metric", "mape_pct", "n_train", "n_test", "n_warnings", "n_unstable_folds", "at_bound",
    "note",
)  # fmt: skip
METRICS = ("throughput", "latency")


#: registry names of the evaluated methods, in table order (`slimlib.model.methods.METHODS`, less the experimental)
METHODS: tuple[str, ...] = tuple(name for name, m in REGISTRY.items() if not m.experimental)
#: columns of `EvaluationResult.warnings`
WARNING_COLUMNS = ("scenario", "method", "fold", "category", "message")


def _new_model(method: str, n_starts: int) -> Estimator:
    return make_model(method, n_starts=n_starts)


@dataclass
class EvaluationResult:
    """Per-row predictions (test rows of every fold, all methods), fitted models, the notes of failed fits and
    every warning a fit or prediction raised (solver, identifiability, regression), one row each."""

    predictions: pd.DataFrame
    models: dict[tuple[str, str, str], Estimator]
    notes: dict[tuple[str, str], str]
    scenarios: list[Scenario]
    warnings: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(WARNING_COLUMNS)))
    #: the methods run, in table order (a method dropped from every scenario still gets its rows and notes)
    methods: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        methods = self.methods or list(dict.fromkeys(self.predictions["method"]))
        table = mape_table(self.predictions, self.scenarios, methods, self.notes)
        counts = self.warnings.groupby(["scenario", "method"]).size() if len(self.warnings) else pd.Series()
        keys = list(zip(table["scenario"], table["method"], strict=True))
        table["n_warnings"] = [int(counts.get(k, 0)) for k in keys]
        flags = fit_flags(self.models)
        table["n_unstable_folds"] = [int(flags.get(k, (0, ""))[0]) for k in keys]
        table["at_bound"] = [flags.get(k, (0, ""))[1] for k in keys]
        table["note"] = [self.notes.get(k, "") for k in keys]
        return table


def _check_methods(methods: Iterable[str] | None) -> list[str]:
    names = list(METHODS) if methods is None else list(methods)
    for m in names:
        if m not in METHODS:
            raise UnknownNameError(close_matches_message("method", m, list(METHODS)))
    return names


def run_evaluation(
    scenarios: list[Scenario] | None = None,
    methods: Iterable[str] | None = None,
    *,
    n_starts: int = 8,
    only: Iterable[str] | None = None,
) -> EvaluationResult:
    """Fit each method on each fold of each scenario and predict its test rows.

    A method that cannot be fitted on a scenario (missing inputs, too few rows) gets no rows and a note."""
    names = _check_methods(methods)
    scen = build_scenarios() if scenarios is None else scenarios
    if only is not None:
        wanted = list(only)
        known = [s.name for s in scen]
        for w in wanted:
            if w not in known:
                raise UnknownNameError(close_matches_message("scenario", w, known))
        scen = [s for s in scen if s.name in wanted]
    parts: list[pd.DataFrame] = []
    models: dict[tuple[str, str, str], Estimator] = {}
    notes: dict[tuple[str, str], str] = {}
    caught: list[dict[str, str]] = []
    for s in scen:
        for method in names:
            scenario_parts: list[pd.DataFrame] = []
            scenario_models: dict[tuple[str, str, str], Estimator] = {}
            for fold in s.folds:
                model = _new_model(method, n_starts)
                with warnings.catch_warnings(record=True) as record:
                    warnings.simplefilter("always")
                    try:
                        model.fit(fold.train)
                        pred = model.predict(fold.test)
                    except (
                        SlimError
                    ) as exc:  # the whole scenario is dropped for this method: MAPEs on equal rows
                        notes[(s.name, method)] = f"not fitted on fold {fold.label}: {exc}"
                        pred = None
                caught += [
                    {"scenario": s.name, "method": method, "fold": fold.label,
                     "category": w.category.__name__, "message": str(w.message)}
                    for w in record
                ]  # fmt: skip
                if pred is None:
                    scenario_parts, scenario_models = [], {}
                    break
                scenario_models[(s.name, method, fold.label)] = model
                part = fold.test.copy()
                part.insert(0, "fold", fold.label)
                part.insert(0, "method", method)
                part.insert(0, "scenario", s.name)
                for c in pred.columns:
                    part[c] = pred[c].to_numpy()
                scenario_parts.append(part)
            parts += scenario_parts
            models.update(scenario_models)
    preds = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["scenario", "method"])
    warn = pd.DataFrame(caught, columns=list(WARNING_COLUMNS))
    return EvaluationResult(preds, models, notes, scen, warn, names)


def fit_flags(models: dict[tuple[str, str, str], Estimator]) -> dict[tuple[str, str], tuple[int, str]]:
    """(scenario, method) -> (folds whose fit is flagged unstable, parameters at a bound in any fold)."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for (scen, meth, _), model in models.items():
        n, bound = out.get((scen, meth), (0, ""))
        info = getattr(model, "fit_info_", {}) or {}
        n += int(bool((info.get("stability") or {}).get("unstable", False)))
        names = [p for p in bound.split(", ") if p]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IdentifiabilityWarning)
            summ = model.summary()
        if "at_bound" in summ.columns:
            names += [str(p) for p in summ.index[summ["at_bound"].astype(bool)] if str(p) not in names]
        out[(scen, meth)] = (n, ", ".join(names))
    return out


def _mape_or_nan(true: np.ndarray, pred: np.ndarray) -> float:
    """MAPE in percent; NaN when the method predicts no such quantity (a baseline without that part).

    A missing or zero measured value is an error (`slimlib.metrics.mape`), never a silently dropped row."""
    if not np.isfinite(pred).all():
        return float("nan")
    return mape(true, pred)


def mape_table(
    predictions: pd.DataFrame,
    scenarios: list[Scenario],
    methods: list[str],
    notes: dict[tuple[str, str], str] | None = None,
) -> pd.DataFrame:
    """Throughput and latency MAPE (percent) per scenario x method; NaN where a method did not run or a scenario
    has no data. ``attrs["notes"]`` maps "scenario / method" to the reason."""
    rows = []
    all_notes = {f"{k[0]} / {k[1]}": v for k, v in (notes or {}).items()}
    for s in scenarios:
        if not s.available:
            all_notes[s.name] = s.reason
        for method in methods:
            sel = predictions[(predictions["scenario"] == s.name) & (predictions["method"] == method)] if len(
                predictions) else predictions  # fmt: skip
            for metric, truth, pred in (
                ("throughput", "throughput_tok_s", "pred_throughput_tok_s"),
                ("latency", "e2e_s", "pred_e2e_s"),
            ):
                value = float("nan")
                if len(sel):
                    value = _mape_or_nan(sel[truth].to_numpy(dtype=float), sel[pred].to_numpy(dtype=float))
                rows.append(
                    {"scenario": s.name, "method": method, "metric": metric, "mape_pct": value,
                     "n_train": s.n_train, "n_test": s.n_test}
                )  # fmt: skip
    out = pd.DataFrame(rows, columns=list(TABLE_COLUMNS[:6]))
    out.attrs["notes"] = all_notes
    return out


def evaluate(
    scenarios: list[Scenario] | None = None,
    methods: Iterable[str] | None = None,
    *,
    n_starts: int = 8,
    only: Iterable[str] | None = None,
) -> pd.DataFrame:
    """The MAPE table of the evaluation (columns `TABLE_COLUMNS`)."""
    return run_evaluation(scenarios, methods, n_starts=n_starts, only=only).table()


def scenario_wide_table(table: pd.DataFrame, metric: str = "throughput") -> pd.DataFrame:
    """One row per scenario, one column per method label (MAPE %, rounded to 0.1), for the paper-style table."""
    t = table[table["metric"] == metric]
    order_s = list(dict.fromkeys(t["scenario"]))
    order_m = list(dict.fromkeys(t["method"]))
    wide = t.pivot(index="scenario", columns="method", values="mape_pct").reindex(
        index=order_s, columns=order_m
    )
    wide.columns = [method_label(str(m)) for m in wide.columns]  # labels at the edge
    counts = t.drop_duplicates("scenario").set_index("scenario")[["n_train", "n_test"]].reindex(order_s)
    return pd.concat([counts, wide.round(1)], axis=1).reset_index()


#: columns of `fitted_parameters` (the flags: see `slimlib.model.calibrated.CalibratedModel.summary`)
PARAMETER_COLUMNS = (
    "scenario", "fold", "gpu", "parameter", "estimate", "stderr", "ci95_low", "ci95_high", "unit", "at_bound", "held",
    "ci_clipped", "start_dispersion", "unstable", "fit_unstable", "note",
)  # fmt: skip


def fitted_parameters(result: EvaluationResult, method: str = "paper") -> pd.DataFrame:
    """Estimate, standard error, 95% interval and unit of every parameter of `method`, per scenario and fold (with
    the GPU the fold was fitted on);
    ``at_bound`` for the calibrated methods (their identifiability warnings are in ``result.warnings``)."""
    rows = []
    for (scen, meth, fold), model in result.models.items():
        if meth != method:
            continue
        with warnings.catch_warnings():  # already recorded once per fit in result.warnings
            warnings.simplefilter("ignore", IdentifiabilityWarning)
            summ = model.summary()
        unstable_fit = bool(
            ((getattr(model, "fit_info_", {}) or {}).get("stability") or {}).get("unstable", False)
        )
        for name, r in summ.iterrows():
            rows.append({"scenario": scen, "fold": fold, "gpu": str(getattr(model, "gpu_", "")), "parameter": name, "estimate": r["estimate"],
                         "stderr": r["stderr"], "ci95_low": r["ci95_low"], "ci95_high": r["ci95_high"],
                         "unit": r["unit"], "at_bound": bool(r.get("at_bound", False)),
                         "held": bool(r.get("fixed", False)), "ci_clipped": bool(r.get("ci_clipped", False)),
                         "start_dispersion": float(r.get("start_dispersion", np.nan)), "unstable": bool(r.get("unstable", False)),
                         "fit_unstable": unstable_fit, "note": str(r.get("note", ""))})  # fmt: skip
    return pd.DataFrame(rows, columns=list(PARAMETER_COLUMNS))


# ------------------------------------------------------------------------------------------- Table II's notes
#: Table II cells whose test rows are not held out ("scenario / method" -> why), marked "†" in every Table II output
NOT_HELD_OUT = {"context-transfer / slim": "its decode-attention rule was developed on this data"}
_NA_NOTE = re.compile(r"n/a \(note (\d+)\)")


def table2_row_notes(
    scenarios: list[Scenario], metric: str | None = None, scenario_labels: dict[str, str] | None = None
) -> list[str]:
    """Table II's notes on its rows, one note per fact: each scenario without data (its reason); each
    LLM-Inference-Bench row's design and that it is not the paper's experiment; for latency (`metric` "latency",
    or None: the long table of both metrics) that the online ground truth's running batch is smaller than the cap
    B that SLIM (paper) predicts at where the KV cache binds; that SLIM-extended's terms were chosen on the same
    data. Rows are named as the table names them: by scenario name in the long table (`metric` None), else by
    `scenario_labels` (default `table_format.SCENARIO_LABELS`)."""
    labels = dict(SCENARIO_LABELS if scenario_labels is None else scenario_labels)

    def row(s: Scenario) -> str:
        return s.name if metric is None else labels.get(s.name, s.name)

    notes = [f"{s.name}: {s.reason}." for s in scenarios if not s.available]
    notes += [
        f"{row(s)}: {s.description} (data/llmib-runs.csv); a different experiment from the paper's input-length row."
        for s in scenarios
        if s.available and "LLM-Inference-Bench" in s.description
    ]
    online = [row(s) for s in scenarios if s.available and "Little's law" in s.latency_truth]
    if online and metric in (None, "latency"):
        notes.append(
            f"Latency of {', '.join(online)}: the ground truth (Little's law: mean running batch / request throughput) "
            "is the time of the batch that actually ran, which is smaller than the cap B where the KV cache (or the "
            f"chunked-prefill token budget) binds; {method_label('paper')} has no KV-cache limit and predicts at the "
            "cap B there (slimlib.experiments.accuracy.scenarios)."
        )
    notes.append(
        f"{method_label('slim')}: its terms were chosen by the extrapolation cross-validation (extrap_cv) on the "
        "same datasets as this table, so its rows are not independent of that choice."
    )
    return notes


def table2_truth_notes(scenarios: list[Scenario]) -> list[str]:
    """The long Table II's ground-truth notes: per metric, the scenarios sharing one ground truth listed together
    (as the paper-shaped tables list them)."""
    notes = []
    for metric in METRICS:
        by_truth: dict[str, list[str]] = {}
        for s in scenarios:
            if s.available:
                by_truth.setdefault(getattr(s, f"{metric}_truth"), []).append(s.name)
        notes += [f"Ground truth of {', '.join(n)} ({metric}): {t}." for t, n in by_truth.items()]
    return notes


def mark_not_held_out(long: pd.DataFrame, not_held_out: dict[str, str] | None = None) -> pd.DataFrame:
    """The long Table II for display: the cells of `not_held_out` (default `NOT_HELD_OUT`) marked "†" in the
    ``note`` column with the reason, as the paper-shaped tables mark them."""
    marks = NOT_HELD_OUT if not_held_out is None else not_held_out
    out = long.copy()
    key = out["scenario"].astype(str) + " / " + out["method"].astype(str)
    old = out["note"].where(out["note"].notna(), "").astype(str)
    mark = key.map(lambda k: f"† not held out ({marks[k]})" if k in marks else "")
    out["note"] = [("; ".join(p for p in (m, o) if p) or np.nan) for m, o in zip(mark, old, strict=True)]
    return out


def number_notes(
    notes: list[str], display: pd.DataFrame | None = None
) -> tuple[list[str], pd.DataFrame | None]:
    """`notes` numbered "(1) ...", in order, and `display` (a table from `table_format.paper_table2`, whose
    "n/a (note k)" cells count only its own notes) with every such reference, in its cells and in the notes,
    renumbered to the note it names in the full list."""
    renumber = {}
    for i, n in enumerate(notes, start=1):
        m = re.match(r"n/a \(note (\d+)\): ", n)
        if m:
            renumber[m.group(1)] = str(i)

    def fix(text: str) -> str:
        return _NA_NOTE.sub(lambda m: f"n/a (note {renumber.get(m.group(1), m.group(1))})", text)

    numbered = [f"({i}) {fix(n)}" for i, n in enumerate(notes, start=1)]
    if display is None:
        return numbered, None
    shown = display.copy()
    for c in shown.columns:  # object cells: a text column of pandas' own string type would drop `Bold`
        shown[c] = pd.Series(
            [fix(v) if type(v) is str else v for v in shown[c]], index=shown.index, dtype=object
        )  # a Bold cell is never n/a
    return numbered, shown
