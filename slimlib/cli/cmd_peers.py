"""`slim peers`: SLIM against peer estimators (GenZ, llm-analysis, AIConfigurator, a plain roofline)."""

from __future__ import annotations

import argparse

from slimlib.cli.common import nonnegative_int, output_file
from slimlib.cli.table import command_help
from slimlib.errors import SlimError
from slimlib.experiments.transfer_study import peer_comparison as P
from slimlib.experiments.transfer_study.peer_adapters import ADAPTERS, run_peers
from slimlib.io import write_csv

EXAMPLES = """\
The peer tools are an optional extra: pip install 'slimlib[peers]'. Without them, `slim peers --table` scores the
committed predictions (data/peers/llmib-peer-predictions.csv: tool, version and exact call per row).

examples:
  slim peers --out data/peers/llmib-peer-predictions.csv      # run every installed peer on the evaluation rows
  slim peers --tools genz llm-analysis --out peers.csv
  slim peers --table                                    # MAPE, bias and calibration points per method and dataset
"""


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "peers",
        help=command_help("peers"),
        description="Regenerate the peer predictions table, or print the peer comparison (MAPE, bias).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", help="write the peer predictions (CSV) here")
    p.add_argument("--tools", nargs="+", help="peers to run (default: genz llm-analysis aiconfigurator)")
    p.add_argument(
        "--table", action="store_true", help="print the comparison table from the committed predictions"
    )
    p.add_argument(
        "--n-starts", type=nonnegative_int, default=8, help="multi-starts of each SLIM fit (default 8)"
    )
    p.set_defaults(func=_cmd_peers)


def _cmd_peers(args: argparse.Namespace) -> int:
    if not args.out and not args.table:
        raise SlimError("give --out FILE to run the peers, or --table to score the committed predictions")
    out = output_file(args.out, "--out") if args.out else None
    if out is not None:
        unknown = [t for t in args.tools or [] if t not in ADAPTERS]
        if unknown:
            raise SlimError(f"unknown peer(s) {unknown}; known: {', '.join(ADAPTERS)}")
        rows = {name: P.calibration_split(d)[1] for name, d in P.datasets().items()}
        pred = run_peers(rows, args.tools)
        write_csv(pred, out, index=False, float_format="%.10g", lineterminator="\n")
        print(f"wrote {args.out}: {len(pred)} predictions from {', '.join(sorted(set(pred['tool'])))}")
    if args.table:
        print(P.peer_table(n_starts=args.n_starts).round(2).to_string(index=False))
    return 0
