"""`slim fit` and `slim predict`: calibrate SLIM on a CSV of measurements and predict new configurations."""

from __future__ import annotations

import argparse
import sys
import warnings

import pandas as pd

from slimlib.errors import DataError
from slimlib.model import (
    DEFAULT_VARIANT,
    IdentifiabilityWarning,
    load_params,
    make_model,
    variant_names,
)
from slimlib.schema import SCHEMA_HELP, read_csv_table, validate_table

FIT_EXAMPLES = """\
input CSV columns: model, gpu, batch_size, input_len, output_len, throughput_tok_s[, e2e_s]
  model: registry name (`slim models`), Hugging Face id, or path to a config.json
  gpu:   registry name (`slim gpus`); all rows must be on one GPU

examples:
  slim fit runs.csv --out params.json          # default variant (see --variant)
  slim fit runs.csv --out params.json --variant paper --fix B0=0   # the paper's model, B0 held at 0
  slim fit runs-*.csv --out params.json         # several files, e.g. one per `slim data ingest`
  slim predict params.json grid.csv --out pred.csv
"""

PREDICT_EXAMPLES = """\
The CSV needs model, batch_size, input_len, output_len (gpu optional: when present it must match the parameters).
Output: the input columns plus pred_throughput_tok_s, pred_e2e_s, pred_prefill_s, pred_decode_s.

examples:
  slim predict params.json grid.csv --out pred.csv
  slim predict params.json grid.csv            # prints CSV to stdout
"""


def register_cli(sub: argparse._SubParsersAction) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "fit",
        help="calibrate SLIM on measured configurations (CSV) and write a parameter file",
        description="Calibrate the SLIM parameters by nonlinear least squares on relative throughput error.",
        epilog=FIT_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("data", nargs="+", help="CSV file(s) of measurements (several are concatenated)")
    p.add_argument("--out", required=True, help="parameter file to write (JSON)")
    p.add_argument("--gpu", help="GPU name (default: the table's gpu column)")
    p.add_argument(
        "--variant",
        default=None,
        help=f"model variant: {', '.join(variant_names())} (default: {DEFAULT_VARIANT})",
    )
    p.add_argument("--fix", action="append", default=[], metavar="NAME=VALUE", help="hold a parameter fixed")
    p.add_argument("--starts", type=int, default=8, help="extra deterministic starting points (default 8)")
    p.set_defaults(func=_cmd_fit)

    q = sub.add_parser(
        "predict",
        help="predict throughput, E2E, prefill and decode time for configurations (CSV)",
        description="Predict with a parameter file written by `slim fit`.",
        epilog=PREDICT_EXAMPLES,
        formatter_class=fmt,
    )
    q.add_argument("params", help="parameter file (JSON) from `slim fit`")
    q.add_argument("data", help="CSV of configurations")
    q.add_argument("--out", help="CSV to write (default: standard output)")
    q.set_defaults(func=_cmd_predict)


def _parse_fix(items: list[str]) -> dict[str, float]:
    fixed = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            fixed[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise DataError(f"--fix {item!r}: write NAME=VALUE, e.g. --fix B0=0")
    return fixed


def _read_tables(paths: list[str]) -> pd.DataFrame:
    """Read and validate each CSV on its own (errors name the file and line), then concatenate them."""
    frames = []
    for path in paths:
        df = read_csv_table(path)
        validate_table(df)
        frames.append(df)
    if len(frames) == 1:
        return frames[0]
    combined = pd.concat(frames, ignore_index=True)
    combined.attrs["source"] = None
    return combined


def _cmd_fit(args) -> int:
    df = _read_tables(args.data)
    variant = args.variant or DEFAULT_VARIANT
    model = make_model(variant, gpu=args.gpu, fixed=_parse_fix(args.fix), n_starts=args.starts)
    model.fit(df)
    model.to_json(args.out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IdentifiabilityWarning)
        table = model.summary()
    print(f"fitted {model.variant!r} on {model.fit_info_['n_rows']} rows ({model.gpu_}); "
          f"train throughput MAPE {model.fit_info_['train_mape_pct']:.2f}%")  # fmt: skip
    print(table.to_string(float_format=lambda v: f"{v:.4g}"))
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    print(f"wrote {args.out}")
    return 0


def _cmd_predict(args) -> int:
    model = load_params(args.params)
    df = read_csv_table(args.data)
    clash = [
        c
        for c in ("pred_throughput_tok_s", "pred_e2e_s", "pred_prefill_s", "pred_decode_s")
        if c in df.columns
    ]
    if clash:
        raise DataError(f"{args.data}: already has column(s) {', '.join(clash)}; remove them ({SCHEMA_HELP})")
    pred = model.predict(df)
    out = pd.concat([df, pred], axis=1)
    if args.out:
        out.to_csv(args.out, index=False, lineterminator="\n")
        print(f"wrote {len(out)} predictions to {args.out}")
    else:
        out.to_csv(sys.stdout, index=False, lineterminator="\n")
    return 0
