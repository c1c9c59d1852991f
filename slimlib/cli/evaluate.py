"""`slim evaluate`: the SLIM evaluation's MAPE table (scenarios x methods) from the committed data."""

from __future__ import annotations

import argparse
import sys

EXAMPLES = """\
Fits SLIM, the extended model, both ablations and both baselines on every scenario of slimlib.experiments.scenarios
(the committed data/ tables) and prints throughput and latency MAPE. Nothing is stored: the table is computed.

examples:
  slim evaluate                                  # wide tables, throughput and latency
  slim evaluate --out mape.csv                   # long CSV: scenario, method, metric, mape_pct, n_train, n_test
  slim evaluate --scenario same-curve --method SLIM --method SLIM-extended
"""


def register_cli(sub: argparse._SubParsersAction) -> None:
    from slimlib.experiments.evaluation import METHODS
    from slimlib.experiments.scenarios import scenario_names

    p = sub.add_parser(
        "evaluate",
        help="compute the evaluation's MAPE table (scenarios x methods) from the committed data",
        description="Reproduce the SLIM evaluation (paper Table II scenarios) and print the MAPE table.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", help="write the long table as CSV to this file")
    p.add_argument("--scenario", action="append", default=None, metavar="NAME",
                   help=f"only these scenarios (repeatable): {', '.join(scenario_names())}")  # fmt: skip
    p.add_argument("--method", action="append", default=None, metavar="NAME",
                   help=f"only these methods (repeatable): {', '.join(METHODS)}")  # fmt: skip
    p.add_argument(
        "--starts", type=int, default=8, help="extra deterministic starting points per fit (default 8)"
    )
    p.set_defaults(func=_run)


def _run(args) -> int:
    from slimlib.experiments.evaluation import evaluate, wide_table

    table = evaluate(methods=args.method, only=args.scenario, n_starts=args.starts)
    if args.out:
        table.to_csv(args.out, index=False, lineterminator="\n")
        print(f"wrote {len(table)} rows to {args.out}")
    for metric in ("throughput", "latency"):
        print(f"\n{metric} MAPE (%)")
        print(wide_table(table, metric).to_string(index=False, na_rep="n/a"))
    for key, note in table.attrs.get("notes", {}).items():
        print(f"note: {key}: {note}", file=sys.stdout)
    return 0
