"""`slim profile ...`: measure points and budgeted campaigns with the kit's minimal PyTorch engine (not vLLM).

Works without torch for --help, `campaign --dry-run` and `tidy`; measuring needs the profiling extra. The one
function-local import is `torch` in `_detect_gpu`: importing it is the check that the optional extra is installed.
"""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from slimlib.batchjobs import add_scheduler_arguments, check_scheduler_options, options_from_args
from slimlib.cli.common import (
    nonnegative_int,
    output_folder,
    positive_float,
    positive_int,
)
from slimlib.cli.table import OUTPUTS_NOTE, command_help
from slimlib.errors import SlimError
from slimlib.kit import counter_campaign as cp
from slimlib.kit.harness import run_point
from slimlib.kit.kernel_classes import kernel_breakdown
from slimlib.kit.kit_slurm import write_kit_array
from slimlib.kit.tidy import build_profiling_tables, write_tables

PROFILE_EXAMPLES = f"""\
The kit measures a minimal static-batch PyTorch engine with random weights (not vLLM) on your GPU: prefill and
decode times, per-step times, memory, kernel time shares and Nsight Compute counters.

examples:
  slim profile campaign --budget-s 600 --gpu h200 --dry-run
  slim profile campaign --budget-s 600 --out kit-raw
  slim profile run --model opt-1.3b --batch-size 64 --input-len 128 --output-len 384
  slim profile tidy kit-raw --out data/kit

{OUTPUTS_NOTE}
"""

CAMPAIGN_EXAMPLES = """\
Points are taken in priority order (model-, input-length- and output-length-transfer curves at coarse batch
sizes, then Mistral-7B/Granite-8B kernel breakdowns and Nsight Compute counters, then the other batch sizes)
while their roofline cost estimates fit the budget. Output folder: runs.csv, steps.csv, kernels.csv,
ncu_*.csv and manifest.json (GPU, driver, CUDA and torch versions, date, command, engine).

examples:
  slim profile campaign --budget-s 600 --gpu h200 --dry-run      # print the plan, measure nothing
  slim profile campaign --budget-s 600 --out kit-raw               # GPU detected by torch
  slim profile campaign --budget-s 60 --device cpu --dry-run
  slim profile campaign --budget-s 14400 --gpu h100 --scheduler slurm --task-budget-s 3600 --out kit-raw
      (then: (cd kit-raw && sbatch slurm_array.sh))
"""

RUN_EXAMPLES = """\
examples:
  slim profile run --model opt-1.3b --batch-size 64 --input-len 128 --output-len 384
  slim profile run --model mistral-7b --batch-size 16 --input-len 512 --output-len 64 --kernels 8
  slim profile run --model path/to/config.json --batch-size 1 --input-len 16 --output-len 8 --device cpu
"""

TIDY_EXAMPLES = f"""\
Writes kit-runs.csv, kit-kernels.csv and kit-counters.csv (byte-identical for the same raw folder).

examples:
  slim profile tidy kit-raw --out data/kit

{OUTPUTS_NOTE}
"""


def register_cli(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slim profile` with its subcommands campaign, run and tidy."""
    fmt = argparse.RawDescriptionHelpFormatter
    top = sub.add_parser(
        "profile",
        help=command_help("profile"),
        description="GPU characterization kit (a minimal PyTorch engine with random weights, not vLLM).",
        epilog=PROFILE_EXAMPLES,
        formatter_class=fmt,
    )
    psub = top.add_subparsers(dest="profile_command", metavar="SUBCOMMAND")
    psub.required = True

    c = psub.add_parser(
        "campaign",
        help="plan and run a prioritized measurement grid within a time budget",
        description="Plan (and unless --dry-run, measure) a prioritized grid that fits --budget-s.",
        epilog=CAMPAIGN_EXAMPLES,
        formatter_class=fmt,
    )
    c.add_argument("--budget-s", type=float, required=True, help="time budget in seconds")
    c.add_argument("--out", default="kit-raw", help="output folder (default kit-raw)")
    c.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="default cuda")
    c.add_argument("--gpu", help="GPU registry name for planning (default: detected by torch)")
    c.add_argument("--dtype", choices=["fp16", "bf16", "fp32"], help="default fp16 on cuda, fp32 on cpu")
    c.add_argument(
        "--safety", type=positive_float, default=None, help="cost-estimate safety factor (default 3)"
    )
    c.add_argument("--no-cuda-graphs", action="store_true", help="launch decode steps eagerly")
    c.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    c.add_argument("--task-budget-s", type=positive_float, default=3600.0,
                   help="with --scheduler slurm: estimated seconds per array task (default 3600)")  # fmt: skip
    add_scheduler_arguments(c, what="slice of points within --task-budget-s")
    c.set_defaults(func=_cmd_campaign)

    r = psub.add_parser(
        "run",
        help="measure one (model, batch size, input length, output length) point",
        description="Measure one point and print its row as JSON.",
        epilog=RUN_EXAMPLES,
        formatter_class=fmt,
    )
    r.add_argument("--model", required=True, help="registry name, Hugging Face id or config.json path")
    r.add_argument("--batch-size", type=positive_int, required=True)
    r.add_argument("--input-len", type=positive_int, required=True)
    r.add_argument("--output-len", type=positive_int, required=True)
    r.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="default cuda")
    r.add_argument("--dtype", choices=["fp16", "bf16", "fp32"], help="default fp16 on cuda, fp32 on cpu")
    r.add_argument(
        "--kernels", type=nonnegative_int, default=0, metavar="N", help="also profile N decode steps' kernels"
    )
    r.add_argument("--no-cuda-graphs", action="store_true", help="launch decode steps eagerly")
    r.set_defaults(func=_cmd_run)

    t = psub.add_parser(
        "tidy",
        help="turn a campaign folder into tidy tables (kit-runs, kit-kernels, kit-counters)",
        description="Build the kit's tidy tables from a campaign folder.",
        epilog=TIDY_EXAMPLES,
        formatter_class=fmt,
    )
    t.add_argument("raw_dir", help="folder written by `slim profile campaign`")
    t.add_argument("--out", required=True, help="folder for the CSV tables")
    t.set_defaults(func=_cmd_tidy)


def _detect_gpu() -> str:
    try:
        import torch
    except ImportError:
        raise SlimError("give --gpu NAME for planning (torch is not installed to detect the GPU)") from None
    if not torch.cuda.is_available():
        raise SlimError("no CUDA GPU visible to torch; give --gpu NAME to plan, or use --device cpu")
    return torch.cuda.get_device_name()


def _cmd_campaign(args: argparse.Namespace) -> int:
    check_scheduler_options(args)
    if not args.dry_run:
        output_folder(args.out, "--out")
    gpu = "" if args.device == "cpu" else (args.gpu or _detect_gpu())
    spec = cp.device_spec(gpu, args.device)
    kw = {} if args.safety is None else {"safety": args.safety}
    plan = cp.plan_campaign(args.budget_s, spec, dtype=args.dtype, **kw)
    print(cp.plan_text(plan, args.budget_s, spec))
    if args.dry_run:
        return 0
    if args.scheduler == "slurm":
        print(write_kit_array(plan, args.out, device=args.device, gpu=spec.name if args.device == "cuda" else "cpu",
                              dtype=args.dtype, cuda_graphs=not args.no_cuda_graphs, task_budget_s=args.task_budget_s,
                              options=options_from_args(args), env_file=args.env_file, command=cp.argv_string()))  # fmt: skip
        return 0
    manifest = cp.run_campaign(
        plan,
        args.out,
        device=args.device,
        gpu=spec.name if args.device == "cuda" else "cpu",
        dtype=args.dtype,
        budget_s=args.budget_s,
        cuda_graphs=not args.no_cuda_graphs,
        command=cp.argv_string(),
        log=lambda m: print(m, flush=True),
    )
    done = sum(p["status"] == "done" for p in manifest["points"])
    print(
        f"measured {done} of {len(manifest['points'])} planned points in {manifest['wall_s']:.0f} s -> {args.out}"
    )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    r = run_point(args.model, args.batch_size, args.input_len, args.output_len, device=args.device,
                  dtype=args.dtype, cuda_graphs=not args.no_cuda_graphs, kernel_profile_steps=args.kernels)  # fmt: skip
    row = r.to_row()
    if isinstance(r.kernels, pd.DataFrame):
        br = kernel_breakdown(r.kernels)
        row["kernel_shares"] = {c: round(s, 4) for c, s in zip(br["category"], br["share"], strict=True)}
    json.dump(row, sys.stdout, indent=2, sort_keys=True)
    print()
    return 0


def _cmd_tidy(args: argparse.Namespace) -> int:
    output_folder(args.out, "--out", inputs=[args.raw_dir])
    tables, used = build_profiling_tables(args.raw_dir)
    for p in write_tables(tables, args.out):
        print(f"{p} ({len(tables[p.stem])} rows)")
    print(f"from {len(used)} raw file(s) in {args.raw_dir}")
    return 0
