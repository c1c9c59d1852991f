"""`slim transfer PARAMS --gpu NAME --out FILE`: re-target a calibrated parameter file to another GPU."""

from __future__ import annotations

import argparse

from slimlib.cli.common import output_file
from slimlib.cli.table import command_help
from slimlib.model.gpu_transfer import read_params_file, transfer_file
from slimlib.model.validity import check_param_values

EXAMPLES = """\
rule: as the method declares it (Estimator.transfer_scaling): efficiencies (eta_*) are kept and the target GPU's
registry peak FLOP/s, bandwidth and memory enter through the equations; gamma (paper Eq. 10) is scaled by the ratio
of peak FLOP/s; host/software overheads (t_fixed, t_step, alpha, B0) are kept; standard errors are scaled as their
parameters and the correlations kept (`slim predict --interval` keeps the fit's parameter uncertainty). Methods
without a hardware term (llmvisor-agg, imai-ood-lr) are refused. The output records the source file under
`transferred_from`; transferring back to the source GPU returns the source file's parameters exactly.

examples:
  slim transfer mi250.json --gpu mi300x --out mi300x-from-mi250.json
  slim predict mi300x-from-mi250.json runs-on-mi300x.csv
  slim transfer mi300x-from-mi250.json --gpu mi250-gcd --out back.json   # back.json == mi250.json
"""


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "transfer",
        help=command_help("transfer"),
        description="Write a parameter file for another GPU from a calibrated one (see the rule below).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("params", help="parameter file written by `slim fit`")
    p.add_argument("--gpu", required=True, help="target GPU (registry name or alias; see `slim gpus`)")
    p.add_argument("--out", required=True, help="output parameter file (never the input)")
    p.set_defaults(func=_cmd_transfer)


def _cmd_transfer(args: argparse.Namespace) -> int:
    output_file(args.out, "--out", inputs=[args.params])  # before anything is read or written
    check_param_values(read_params_file(args.params), args.params)  # variant known, parameters in bounds
    source_gpu = read_params_file(args.params)["gpu"]
    doc = transfer_file(args.params, args.gpu, args.out)
    src = doc.get("transferred_from")
    if doc["gpu"] == source_gpu:
        origin = " (already for this GPU: copied unchanged)"
    elif src and src["gpu"] == source_gpu:
        origin = f" from {src['gpu']}"
    else:
        origin = f" (the original {doc['gpu']} file, restored from the transfer record of {args.params})"
    print(f"wrote {args.out}: {doc['variant']} parameters for {doc['gpu']}{origin}")
    return 0
