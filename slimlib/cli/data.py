"""`slim data ...` commands: `build` (here); `fetch` and `ingest` come from their modules."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

_DEFAULT_OUT = Path(__file__).resolve().parents[2] / "data"


def register_cli(subparsers) -> None:
    """Add the `data` command and its sub-commands to the `slim` parser."""
    parser = subparsers.add_parser(
        "data",
        help="build, fetch or ingest measurement tables",
        description="Measurement data: rebuild the tidy tables in data/ from raw mirrors, fetch raw files, "
        "or ingest your own vLLM results.\n\nExamples:\n  slim data build --raw ../shared/data\n"
        "  slim data build --raw ../shared/data --out /tmp/tables",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    data_sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    data_sub.required = True
    build = data_sub.add_parser(
        "build",
        help="rebuild all tidy tables from the raw mirrors (byte-identical)",
        description="Parse the raw mirrors (vllm-batching-memory-gap, vidur-profiling) and write every tidy table, "
        "raw_manifest.csv and README.md. With --kit, also the GPU characterization kit's tables (kit-campaigns, "
        "kit-runs, kit-kernels, kit-counters) from campaign folders written by `slim profile campaign`."
        "\n\nExamples:\n  slim data build --raw ../shared/data\n"
        "  slim data build --raw ../shared/data/vllm-batching-memory-gap --out /tmp/tables\n"
        "  slim data build --raw ../shared/data --kit kit-raw-h200 kit-raw-h100",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.add_argument(
        "--raw", required=True, type=Path, help="raw data root (holding the mirrors) or one mirror"
    )
    build.add_argument(
        "--kit",
        type=Path,
        nargs="+",
        action="extend",
        metavar="KITDIR",
        help="campaign folder(s) of `slim profile campaign` (manifest.json + raw CSVs) to build in",
    )
    build.add_argument(
        "--out", type=Path, default=_DEFAULT_OUT, help=f"output folder (default: {_DEFAULT_OUT})"
    )
    build.set_defaults(func=_run_build)
    for module, adder in (
        ("slimlib.data.fetch", "add_fetch_parser"),
        ("slimlib.data.ingest", "add_ingest_parser"),
    ):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        getattr(mod, adder)(data_sub)


def _run_build(args) -> int:
    from slimlib.data.build import build_all
    from slimlib.data.tables import load_csv_rows

    written = build_all(args.raw, args.out, kit=args.kit)
    for name, path in sorted(written.items()):
        extra = "" if name == "README" else f" ({load_csv_rows(path)} rows)"
        print(f"wrote {path}{extra}")
    return 0
