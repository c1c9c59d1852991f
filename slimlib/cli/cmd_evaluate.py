"""`slim evaluate`: the SLIM evaluation's MAPE table (scenarios x methods) from the committed data."""

from __future__ import annotations

import argparse

from slimlib.cli.common import nonnegative_int, output_file
from slimlib.cli.table import OUTPUTS_NOTE, command_help
from slimlib.experiments.accuracy.evaluation import METHODS, evaluate, scenario_wide_table
from slimlib.experiments.accuracy.scenarios import scenario_names
from slimlib.io import write_csv

EXAMPLES = f"""\
Fits SLIM, the recommended model (slim, SLIM-extended), both ablations and both baselines on every scenario of slimlib.experiments.accuracy.scenarios
(the committed data/ tables) and prints throughput and latency MAPE. Nothing is stored: the table is computed.

examples:
  slim evaluate                                  # wide tables, throughput and latency
  slim evaluate --out mape.csv                   # long CSV: scenario, method, metric, mape_pct, n_train, n_test
  slim evaluate --scenario same-curve --method paper --method slim

{OUTPUTS_NOTE}
"""


def register_cli(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slim evaluate`."""
    p = sub.add_parser(
        "evaluate",
        help=command_help("evaluate"),
        description="Reproduce the SLIM evaluation (paper Table II scenarios) and print the MAPE table.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", help="write the long table as CSV to this file (replaced atomically)")
    p.add_argument("--scenario", action="append", default=None, metavar="NAME",
                   help=f"only these scenarios (repeatable): {', '.join(scenario_names())}")  # fmt: skip
    p.add_argument("--method", action="append", default=None, metavar="NAME",
                   help=f"only these methods (repeatable, registry names): {', '.join(METHODS)}")  # fmt: skip
    p.add_argument(
        "--starts",
        type=nonnegative_int,
        default=8,
        help="extra deterministic starting points per fit (default 8)",
    )
    p.set_defaults(func=_cmd_evaluate)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    out = output_file(args.out, "--out") if args.out else None
    table = evaluate(methods=args.method, only=args.scenario, n_starts=args.starts)
    if out is not None:
        write_csv(table, out)
        print(f"wrote {len(table)} rows to {out}")
    for metric in ("throughput", "latency"):
        print(f"\n{metric} MAPE (%)")
        print(scenario_wide_table(table, metric).to_string(index=False, na_rep="n/a"))
    for key, note in table.attrs.get("notes", {}).items():
        print(f"note: {key}: {note}")
    return 0
