"""`slim reproduce` (run every notebook through papermill) and `slim nbstrip` (clean notebooks before commit)."""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from slimlib.cli.common import output_folder, positive_int
from slimlib.cli.table import command_help
from slimlib.errors import DataError
from slimlib.experiments.outputs.paper_differences import sync_docs
from slimlib.experiments.outputs.runner import run_notebooks, strip_or_check

REPRODUCE_EXAMPLES = """\
Runs notebooks/NN_*.ipynb in numeric order, up to --jobs at once (each in its own kernel; the paper-differences
notebook, which reads the others' tables, after all of them), writes the executed copies to build/ and the
figures and tables to figures/. Each notebook receives only the parameters its `parameters` cell declares.
--quick never writes into figures/ (the committed outputs): its figures go to a new temporary folder, whose
path is printed, or to --figures-dir.

examples:
  slim reproduce                          # every notebook, full parameters
  slim reproduce --quick                  # small-parameter mode (sets quick=True), figures to a temporary folder
  slim reproduce --only 01 03             # notebooks 01_* and 03_* only
  slim reproduce --params params.yaml     # parameters from a YAML mapping (one file serves all notebooks)
  slim reproduce --only 06 07 -p n_starts 4 -p epsilon 0.25   # single parameters, read as YAML scalars
  slim reproduce --jobs 1                 # one notebook at a time (the outputs are the same)
"""

#: the most notebooks `slim reproduce` runs at once by default
MAX_DEFAULT_JOBS = 2


def notebook_jobs() -> int:
    """`slim reproduce`'s default --jobs: the smaller of `MAX_DEFAULT_JOBS` and the machine's cores."""
    return max(1, min(MAX_DEFAULT_JOBS, os.cpu_count() or 1))


NBSTRIP_EXAMPLES = """\
Removes outputs, execution counts, papermill cells and metadata noise from notebooks, in place.
With --check nothing is changed; the command lists each problem and exits 1 if any notebook is not clean.

examples:
  slim nbstrip                            # strip every notebooks/*.ipynb
  slim nbstrip notebooks/02_fit.ipynb
  slim nbstrip --check                    # before a commit or in CI
"""


def _yaml_scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(
            f"-p value {text!r} is not a YAML scalar ({exc}); quote strings with special characters"
        ) from exc


def _load_params_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise DataError(f"parameters file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"parameters file {path}: not UTF-8 text; save it as UTF-8 YAML") from None
    except yaml.YAMLError as exc:
        raise DataError(f"parameters file {path}: not valid YAML ({exc})") from exc
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise DataError(
            f"parameters file {path}: expected a mapping of parameter names to values at the top level"
        )
    return data


def collect_parameters(args: argparse.Namespace) -> dict[str, Any]:
    """Parameters from --params FILE, then -p KEY VALUE overrides, then --quick."""
    params = _load_params_file(Path(args.params)) if args.params else {}
    for key, value in args.param or []:
        if not key.isidentifier():
            raise DataError(f"-p {key} {value}: {key!r} is not a valid notebook parameter name")
        params[key] = _yaml_scalar(value)
    if args.quick:
        params["quick"] = True
    return params


def reproduce_figures_folder(args: argparse.Namespace, parameters: dict[str, Any]) -> str:
    """--figures-dir if given; else a new temporary folder in quick mode (--quick or -p quick true: figures/
    holds the committed full-parameter outputs), else figures/."""
    if args.figures_dir is not None:
        return str(args.figures_dir)
    if parameters.get("quick"):
        return tempfile.mkdtemp(prefix="slim-quick-figures-")
    return "figures"


def _cmd_reproduce(args: argparse.Namespace) -> int:
    parameters = collect_parameters(args)
    output_folder(
        args.build_dir, "--build-dir", inputs=[args.notebook_dir]
    )  # notebooks are never overwritten
    if args.figures_dir is not None:
        output_folder(args.figures_dir, "--figures-dir", inputs=[args.notebook_dir])
    figures = reproduce_figures_folder(args, parameters)
    scratch = bool(parameters.get("quick")) and args.figures_dir is None
    if scratch:
        print(f"quick mode: figures and tables go to {figures} (figures/ is left as it is)", file=sys.stderr)
    t0 = time.perf_counter()
    try:
        summary = run_notebooks(
            notebook_dir=args.notebook_dir,
            build_dir=args.build_dir,
            figures_dir=figures,
            only=args.only,
            parameters=parameters,
            progress=not args.no_progress,
            kernel_name=args.kernel,
            jobs=args.jobs,
        )
    except BaseException:
        if scratch and not any(Path(figures).iterdir()):
            Path(figures).rmdir()  # the unused temporary folder of --quick
        raise
    width = max(len(r["notebook"]) for r in summary)
    for r in summary:
        wall = "" if math.isnan(r["wall_s"]) else f"{r['wall_s']:7.1f} s"
        print(f"{r['notebook']:<{width}}  {r['status']:<7}  {wall}")
    total = sum(r["wall_s"] for r in summary if not math.isnan(r["wall_s"]))
    print(f"{'total':<{width}}  {'':<7}  {total:7.1f} s")
    print(f"{'elapsed':<{width}}  {f'{args.jobs} at once':<7}  {time.perf_counter() - t0:7.1f} s")
    print(f"figures and tables in {figures}")
    if figures == "figures" and Path("README.md").is_file() and Path("docs", "paper.md").is_file():
        try:  # the README's and docs' generated tables follow the repository's outputs
            changed = sync_docs(".", figures)
        except DataError as exc:
            print(f"README and docs tables not regenerated: {exc}", file=sys.stderr)
        else:
            if changed:
                print(f"regenerated from the outputs: {', '.join(changed)}")
    return 0


def _cmd_nbstrip(args: argparse.Namespace) -> int:
    paths = args.paths
    if not paths:
        folder = Path(args.notebook_dir)
        if not folder.is_dir():
            raise DataError(f"notebook folder {str(folder)!r} does not exist; name the notebooks to strip")
        paths = sorted(folder.glob("*.ipynb"))
    return strip_or_check(paths, check=args.check)


def register_cli(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slim reproduce` and `slim nbstrip`."""
    p = sub.add_parser(
        "reproduce",
        help=command_help("reproduce"),
        description="Reproduce every figure and table of the paper by running the notebooks.",
        epilog=REPRODUCE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--only",
        nargs="+",
        action="extend",
        metavar="NN",
        help="run only these notebook numbers (e.g. 01 03)",
    )
    p.add_argument("--params", metavar="FILE.yaml", help="YAML mapping of notebook parameters")
    p.add_argument(
        "-p",
        "--param",
        nargs=2,
        action="append",
        metavar=("KEY", "VALUE"),
        help="one notebook parameter (value parsed as YAML: 3, 0.5, true, text); repeatable",
    )
    p.add_argument("--quick", action="store_true", help="small-parameter mode: sets the parameter quick=True")
    p.add_argument("--build-dir", default="build", help="folder for executed notebooks (default: build)")
    p.add_argument(
        "--figures-dir",
        default=None,
        help="folder for figures and tables (default: figures; with --quick a new temporary folder)",
    )
    p.add_argument("--notebook-dir", default="notebooks", help="folder of NN_*.ipynb (default: notebooks)")
    p.add_argument("--kernel", default="python3", help="Jupyter kernel (default python3 = this Python)")
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=notebook_jobs(),
        metavar="N",
        help=f"notebooks run at once, each in its own kernel (default {notebook_jobs()}: the smaller of "
        f"{MAX_DEFAULT_JOBS} and this machine's cores; the evaluation notebook takes most of the time, so more gain "
        "little); 1 runs them one after another",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_reproduce)

    s = sub.add_parser(
        "nbstrip",
        help=command_help("nbstrip"),
        description="Clean notebooks before a commit.",
        epilog=NBSTRIP_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("paths", nargs="*", type=Path, help="notebooks (default: every notebooks/*.ipynb)")
    s.add_argument("--check", action="store_true", help="change nothing; list problems; exit 1 if any")
    s.add_argument("--notebook-dir", default="notebooks", help="folder used when no paths are given")
    s.set_defaults(func=_cmd_nbstrip)
