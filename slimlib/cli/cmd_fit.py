"""`slim fit` and `slim predict`: calibrate SLIM on a CSV of measurements and predict new configurations."""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np
import pandas as pd
from tqdm import tqdm

from slimlib.cli.common import (
    model_inputs,
    nonnegative_int,
    output_file,
    preload,
    read_text_input,
)
from slimlib.cli.table import OUTPUTS_NOTE, command_help
from slimlib.errors import DataError, check_interrupted
from slimlib.io import is_stdout, returning_freed_memory, write_table, write_text
from slimlib.metrics import mape
from slimlib.model import (
    DEFAULT_VARIANT,
    PRED_COLUMNS,
    PREDICT_COLUMNS,
    IdentifiabilityWarning,
    get_method,
    make_model,
    variant_names,
)
from slimlib.model.base import PARAMS_FORMAT_VERSION, SERVED_COLUMNS
from slimlib.model.features import resolve_gpu
from slimlib.model.intervals import INTERVAL_COLUMNS, check_level
from slimlib.model.shipped_residuals import load_shipped
from slimlib.model.validity import (
    CANONICAL,
    check_measured_throughput,
    check_table,
    checking_rows,
    load_checked_params,
)
from slimlib.schema import (
    PREDICT_SCHEMA_HELP,
    TARGET_COLUMN,
    TPOT_COLUMNS,
    TTFT_COLUMNS,
    aggregate_repeats,
    concat_tables,
    measured_latency_s,
    read_csv_table,
    validate_table,
)

FIT_EXAMPLES = f"""\
input CSV columns: model, gpu, batch_size, input_len, output_len, throughput_tok_s[, e2e_s]
  model: registry name (`slim models`), Hugging Face id, or path to a config.json
  gpu:   registry name (`slim gpus`); all rows must be on one GPU
  batch_size: a whole number; input_len, output_len: tokens > 0
Progress (rows read, a bar over the starting points on a terminal, fit time) goes to standard error;
--quiet silences it.

examples:
  slim fit runs.csv --out params.json          # default variant (see --variant)
  slim fit runs.csv --out params.json --variant paper --fix B0=0   # the paper's model, B0 held at 0
  slim fit runs-*.csv --out params.json         # several files, e.g. one per `slim data ingest`
  slim predict params.json grid.csv --out pred.csv
  slim fit runs.csv --out params.json --intervals  # store the residual model for `slim predict --interval`

{OUTPUTS_NOTE}
"""

PREDICT_EXAMPLES = f"""\
The CSV needs {", ".join(PREDICT_COLUMNS)} (gpu optional: when present it must match the parameters);
batch_size is a whole number. Other columns are copied to the output.
Output: the input columns plus {", ".join(PRED_COLUMNS)} and {", ".join(SERVED_COLUMNS)} (the served request's
queue and TTFT/TPOT percentiles; NaN for a method without them); with --interval LEVEL also
{", ".join(c for pair in INTERVAL_COLUMNS.values() for c in pair)}.

examples:
  slim predict params.json grid.csv --out pred.csv
  slim predict params.json grid.csv            # prints CSV to stdout
  slim predict params.json grid.csv --interval 0.9 --out pred.csv   # adds low/high columns (each quantity)

{OUTPUTS_NOTE}
"""


def register_cli(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slim fit` and `slim predict`."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "fit",
        help=command_help("fit"),
        description="Calibrate the SLIM parameters by nonlinear least squares on relative throughput error.",
        epilog=FIT_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("data", nargs="+", help="CSV file(s) of measurements (several are concatenated)")
    p.add_argument("--out", required=True, help="parameter file to write (JSON; replaced atomically)")
    p.add_argument("--gpu", help="GPU name (default: the table's gpu column)")
    p.add_argument(
        "--variant",
        default=DEFAULT_VARIANT,
        choices=variant_names(),
        metavar="NAME",
        help=f"model variant: {', '.join(variant_names())} (default: {DEFAULT_VARIANT})",
    )
    p.add_argument("--fix", action="append", default=[], metavar="NAME=VALUE", help="hold a parameter fixed")
    p.add_argument(
        "--starts",
        type=nonnegative_int,
        default=8,
        metavar="K",
        help="extra deterministic starting points, >= 0 (default 8)",
    )
    p.add_argument(
        "--intervals",
        action="store_true",
        help="store the residual model the package ships for this variant (learned by its extrapolation "
        "cross-validation), pooled on the batch axis with this fit's own errors (one refit without each curve's "
        "largest batch size), so that `slim predict --interval` can give calibrated intervals",
    )
    p.add_argument("--quiet", action="store_true", help="no progress messages on standard error")
    p.set_defaults(func=_cmd_fit)

    q = sub.add_parser(
        "predict",
        help=command_help("predict"),
        description="Predict with a parameter file written by `slim fit`.",
        epilog=PREDICT_EXAMPLES,
        formatter_class=fmt,
    )
    q.add_argument("params", help="parameter file (JSON) from `slim fit`")
    q.add_argument("data", help="CSV (or .parquet) of configurations")
    q.add_argument(
        "--out", help="CSV or .parquet to write (default, or -: CSV on standard output; replaced atomically)"
    )
    q.add_argument(
        "--interval",
        type=float,
        metavar="LEVEL",
        help="add prediction intervals at this level, e.g. 0.9 (parameter uncertainty plus the residual model "
        "stored by `slim fit --intervals`)",
    )
    q.set_defaults(func=_cmd_predict)


#: modules a calibrated fit imports where it uses them (`slimlib.model.calibrated`), and the baselines' OLS:
#: imported before the work starts, so an interrupt never lands inside a half-done import
FIT_MODULES = ("scipy.optimize", "scipy.stats.qmc")
BASELINE_MODULES = ("statsmodels.api",)


def _parse_fix(items: list[str], variant: str) -> dict[str, float]:
    """--fix NAME=VALUE pairs, each a finite number within the parameter's bounds (`param_specs` of `variant`)."""
    fixed = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            fixed[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise DataError(f"--fix {item!r}: write NAME=VALUE, e.g. --fix B0=0")
        if not math.isfinite(fixed[name.strip()]):
            raise DataError(
                f"--fix {item!r}: {value.strip()} is not a finite number; give a value within the bounds"
            )
    specs = getattr(make_model(variant), "param_specs", None)
    bounds = {s.name: (s.lower, s.upper) for s in specs()} if callable(specs) else {}
    for name, held in fixed.items():
        if name in bounds and not bounds[name][0] <= held <= bounds[name][1]:
            lo, hi = bounds[name]
            raise DataError(
                f"--fix {name}={held:g}: outside the bounds [{lo:g}, {hi:g}] of {name} in {variant!r}; "
                "give a value within them"
            )
    return fixed


def _read_tables(paths: list[str]) -> pd.DataFrame:
    """Read and validate each CSV on its own (errors name the file and line), then concatenate them."""
    frames = []
    for path in paths:
        df = read_csv_table(path)
        validate_table(df)
        frames.append(df)
    combined = concat_tables(frames)
    validate_table(
        combined, canonical=CANONICAL
    )  # conflicts across files and aliases, named by file and line
    return combined


def _note(args: argparse.Namespace, message: str) -> None:
    if not args.quiet:
        print(message, file=sys.stderr, flush=True)


def _latency_mapes(model, df: pd.DataFrame) -> str:
    """ ", TTFT MAPE x%, TPOT MAPE y%" on the rows of `df` that measured them, where `model` predicts them."""
    measured = {
        q: measured_latency_s(df, cols) for q, cols in (("TTFT", TTFT_COLUMNS), ("TPOT", TPOT_COLUMNS))
    }
    if not any(np.isfinite(v).any() for v in measured.values()):
        return ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit has said what it assumed
        pred = model.predict(df)
    out = ""
    for q, y in measured.items():
        p = pred[f"pred_{q.lower()}_s"].to_numpy(dtype=float)
        keep = np.isfinite(y) & (y > 0) & np.isfinite(p)
        if keep.any():
            out += f", {q} MAPE {mape(y[keep], p[keep]):.2f}% ({int(keep.sum())} rows)"
    return out


def _cmd_fit(args: argparse.Namespace) -> int:
    output_file(args.out, "--out", inputs=args.data)
    fixed = _parse_fix(args.fix, args.variant)
    preload(*(FIT_MODULES if get_method(args.variant).calibrated else BASELINE_MODULES))
    t0 = time.perf_counter()
    with returning_freed_memory():  # a large table: the reading's peak stays near the table's size
        df = _read_tables(args.data)
    # the config files the table's `model` column names are inputs too
    out = output_file(args.out, "--out", inputs=[*args.data, *model_inputs(df["model"])])
    check_table(df, args.gpu)  # physical validity (slimlib.model.validity)
    resolve_gpu(df, args.gpu, fitting=True)  # rows of another GPU than --gpu: refused before the fit starts
    check_measured_throughput(df, args.gpu)
    n_rows = len(df)
    df, merged = aggregate_repeats(df)  # identical repeats of a configuration are one measurement
    if merged:
        _note(
            args,
            f"aggregated {n_rows} rows into {len(df)} distinct configurations ({merged} repeats counted once)",
        )
    model = make_model(args.variant, gpu=args.gpu, fixed=fixed, n_starts=args.starts)
    _note(args, f"read {len(df)} rows from {len(args.data)} file(s) in {time.perf_counter() - t0:.1f} s")
    starts = f" from {args.starts + 1} starting points" if get_method(args.variant).calibrated else ""
    _note(args, f"fitting {args.variant!r}{starts} ...")
    t1 = time.perf_counter()
    # the bar shows on a terminal only (disable=None), so logs and captured output get the plain lines;
    # warnings of the fit and of the summary (identifiability, solver, rank) are printed once each, after it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tqdm(desc="starts", unit="start", file=sys.stderr, disable=True if args.quiet else None) as bar:
            lines = not args.quiet and not sys.stderr.isatty()  # logs get one line per start instead of a bar

            def progress(done: int, total: int) -> None:
                check_interrupted()  # a signal swallowed inside a finalizer stops the fit here
                bar.total = total
                bar.update(done - bar.n)
                if lines:
                    _note(args, f"  start {done}/{total} done ({time.perf_counter() - t1:.1f} s)")

            model.fit(df, progress=progress)
    _note(args, f"fitted in {time.perf_counter() - t1:.1f} s")
    if args.intervals:
        t2 = time.perf_counter()
        shipped = load_shipped(args.variant, PARAMS_FORMAT_VERSION)
        _note(
            args, "residual model: the shipped one, and one refit without each curve's largest batch size ..."
        )
        residuals = shipped.pooled_with(model.own_batch_errors(df), "batch")
        model.attach_intervals(residuals, df)
        _note(args, f"residual model: {residuals.source} ({time.perf_counter() - t2:.1f} s)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifiabilityWarning)  # the fit has reported it
        table = model.summary()
    write_text(out, model.to_json())
    train_mape = model.fit_info_.get("train_mape_pct")
    if train_mape is None:  # methods that do not record it (the baselines)
        train_mape = mape(df[TARGET_COLUMN], model.predict(df)["pred_throughput_tok_s"])
    rows = f"{len(df)} rows" if not merged else f"{len(df)} distinct configurations of {n_rows} rows"
    print(f"fitted {args.variant!r} on {rows} ({model.gpu_}); train throughput MAPE {train_mape:.2f}%"
          + _latency_mapes(model, df))  # fmt: skip
    notes = table.pop("note") if "note" in table.columns else pd.Series(dtype=str)
    print(table.to_string(float_format=lambda v: f"{v:.4g}"))
    for name, note in notes.items():
        if note:
            print(f"  {name}: {note}")
    stability = model.fit_info_.get("stability")
    if stability:
        verdict = "UNSTABLE: " + "; ".join(stability["reasons"]) if stability["unstable"] else "stable"
        print(f"fit stability: {stability['n_best']} of {stability['n_converged']} converged starts reached the best "
              f"cost; {verdict}")  # fmt: skip
    for message in dict.fromkeys(f"{type(w.message).__name__}: {w.message}" for w in caught):
        print(f"warning: {message}", file=sys.stderr)
    print(f"wrote {out}")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    out = output_file(args.out, "--out", inputs=[args.params, args.data]) if args.out else None
    read_text_input(args.params, "parameter file")
    model = load_checked_params(args.params)
    with returning_freed_memory():  # a large table: the reading's peak stays near the table's size
        df = read_csv_table(args.data, require_target=False)
    if out is not None and "model" in df.columns:  # the config files the `model` column names are inputs too
        out = output_file(out, "--out", inputs=[args.params, args.data, *model_inputs(df["model"])])
    missing = [c for c in PREDICT_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{args.data} lacks column(s) {', '.join(missing)}; {PREDICT_SCHEMA_HELP}")
    level = None if args.interval is None else check_level(args.interval)
    clash = [
        c
        for c in (*PRED_COLUMNS, *SERVED_COLUMNS, *(c for pair in INTERVAL_COLUMNS.values() for c in pair))
        if c in df.columns
    ]
    if clash:
        raise DataError(
            f"{args.data}: already has column(s) {', '.join(clash)}; remove them ({PREDICT_SCHEMA_HELP})"
        )
    # a chunk at a time as it is written (memory of one chunk beside the input table; Arrow, Parquet by
    # extension): `predict` validates each chunk and checks its physical validity before predicting it; an error
    # in any chunk leaves the previous output intact. The rows' own GPU where they name one.
    with checking_rows(None if "gpu" in df.columns else model.gpu_) as check:
        write_table(
            df,
            out if out is not None else "-",
            extend=lambda part: model.predict(part, check=check, interval=level),
        )
    if out is not None and not is_stdout(out):
        print(f"wrote {len(df)} predictions to {out}")
    return 0
