"""`slim data build|fetch|ingest`: rebuild the tidy tables, download raw files, turn your vLLM results into a table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slimlib.cli.common import model_inputs, output_file, output_folder, positive_float, positive_int
from slimlib.cli.table import OUTPUTS_NOTE, command_help
from slimlib.data.build import build_all
from slimlib.data.campaign_collect import collect
from slimlib.data.catalog import load_csv_rows
from slimlib.data.fetch import CACHE_ENV, fetch
from slimlib.data.ingest import write_ingested
from slimlib.errors import DataError
from slimlib.io import atomic_open

_DEFAULT_OUT = Path(__file__).resolve().parents[2] / "data"

DATA_EXAMPLES = """\
examples:
  slim data build --raw ../shared/data
  slim data fetch --dest raw && slim data build --raw raw --out tables
  slim data ingest runs/ --gpu h100-sxm-80gb --out my-runs.csv
"""

BUILD_EXAMPLES = f"""\
examples:
  slim data build --raw ../shared/data
  slim data build --raw ../shared/data/vllm-batching-memory-gap --out tables
  slim data build --raw ../shared/data --kit kit-raw-h200 kit-raw-h100

{OUTPUTS_NOTE}
"""

FETCH_EXAMPLES = f"""\
Files already in the folder with the right hash are kept; a hash mismatch is an error naming the file.
Default folder: ${CACHE_ENV} or the user cache (pooch).

examples:
  slim data fetch
  slim data fetch --dest raw --only 'vidur-profiling/*'
  slim data fetch --dest raw --only '*/background/opt-1.3b/*'
  slim data fetch --base-url http://mirror.example/data   # a mirror laid out like the cache folder
  slim data build --raw raw                              # then rebuild the tidy tables from it
"""

INGEST_EXAMPLES = f"""\
Settings come from, per field: a sidecar slim-runs.csv/.yaml beside the results (columns file,batch_size,input_len,
output_len,model,gpu), then the JSON (max_concurrency or --metadata max_num_seqs=B, token counts, model_id,
--metadata gpu=NAME), then these options. A campaign folder of `slim plan --scheduler slurm` (slurm_tasks.tsv)
is read task by task: settings from its table, missing and failed tasks reported with their logs (no table is
written then, unless --allow-incomplete). Several PATHs are merged; duplicates must agree.

examples:
  slim data ingest runs/ --gpu h100-sxm-80gb --out my-runs.csv
  slim data ingest runs/ --sidecar settings.yaml --out my-runs.csv
  slim data ingest runs/ --model llama-2-7b --gpu a100-sxm-80gb --batch-size 64 --out my-runs.csv
  slim data ingest plan/ --out my-runs.csv     # a `slim plan --scheduler slurm` campaign folder
  slim data ingest runs/b8.json --gpu h100-sxm-80gb --out b8.csv   # one result file
  slim fit my-runs.csv --out params.json

{OUTPUTS_NOTE}
"""


def register_cli(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slim data` with its subcommands build, fetch and ingest."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = sub.add_parser(
        "data",
        help=command_help("data"),
        description="Measurement data: rebuild the tidy tables in data/ from raw mirrors, fetch raw files, "
        "or ingest your own vLLM results.",
        epilog=DATA_EXAMPLES,
        formatter_class=fmt,
    )
    data_sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    data_sub.required = True

    build = data_sub.add_parser(
        "build",
        help="rebuild all tidy tables from the raw mirrors (byte-identical)",
        description="Parse the raw mirrors (vllm-batching-memory-gap, vidur-profiling) and write every tidy table, "
        "raw_manifest.csv and README.md. With --kit, also the GPU characterization kit's tables (kit-campaigns, "
        "kit-runs, kit-kernels, kit-counters) from campaign folders written by `slim profile campaign`.",
        epilog=BUILD_EXAMPLES,
        formatter_class=fmt,
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
    build.set_defaults(func=_cmd_build)

    fetch_p = data_sub.add_parser(
        "fetch",
        help="download the raw measurement files (sha256-checked) into a cache folder",
        description="Download the raw files the parsers read from their pinned upstream commits, checking each "
        "sha256 against the packaged registry.",
        epilog=FETCH_EXAMPLES,
        formatter_class=fmt,
    )
    fetch_p.add_argument("--dest", metavar="DIR", help="folder to download into (default: the cache folder)")
    fetch_p.add_argument(
        "--base-url", metavar="URL", default=None, help="mirror URL with the layout <URL>/<source>/<path>"
    )
    fetch_p.add_argument(
        "--only", metavar="GLOB", action="append", help="only registry paths matching GLOB (repeatable)"
    )
    fetch_p.add_argument("--quiet", action="store_true", help="no progress bar")
    fetch_p.set_defaults(func=_cmd_fetch)

    ing = data_sub.add_parser(
        "ingest",
        help="turn your vLLM benchmark result JSONs (files or folders) into the table `slim fit` reads",
        description="Read each result *.json of `benchmark_serving.py` / `vllm bench serve` (--save-result) given "
        "as PATH, or every one in a folder PATH, into one CSV row each.",
        epilog=INGEST_EXAMPLES,
        formatter_class=fmt,
    )
    ing.add_argument(
        "folder",
        metavar="PATH",
        nargs="+",
        help="folder(s) of result *.json files, single result files, or campaign folders of "
        "`slim plan --scheduler slurm` (merged)",
    )
    ing.add_argument("--out", metavar="CSV", default="-", help="output CSV (default: standard output)")
    ing.add_argument("--model", help="model when neither the sidecar nor the JSON names a known one")
    ing.add_argument("--gpu", help="GPU registry name (e.g. h100-sxm-80gb) when the files do not say")
    ing.add_argument(
        "--batch-size", type=positive_int, help="batch size (vLLM --max-num-seqs) when the files do not say"
    )
    ing.add_argument(
        "--input-len", type=positive_float, help="input length in tokens when the files do not say"
    )
    ing.add_argument(
        "--output-len", type=positive_float, help="output length in tokens when the files do not say"
    )
    ing.add_argument(
        "--chunked-prefill", choices=("true", "false"),
        help="whether the server chunked prefill, for runs whose files do not say (vLLM's V1 engine always does; "
        "V0 only with --enable-chunked-prefill; unsaid: read as V1 by `slim fit`)",
    )  # fmt: skip
    ing.add_argument(
        "--max-num-batched-tokens", type=positive_int, metavar="N",
        help="the server's token budget per step, for runs whose files do not say (vLLM 0.5-0.6 with chunked "
        "prefill: 512)",
    )  # fmt: skip
    ing.add_argument(
        "--sidecar", metavar="FILE", help="settings table (CSV or YAML) instead of DIR/slim-runs.*"
    )
    ing.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="write the table even when campaign tasks are missing or failed (they are still reported)",
    )
    ing.set_defaults(func=_cmd_ingest)


def _cmd_build(args: argparse.Namespace) -> int:
    output_folder(args.out, "--out", inputs=[args.raw, *(args.kit or [])])
    written = build_all(args.raw, args.out, kit=args.kit)
    for name, path in sorted(written.items()):
        extra = "" if name == "README" else f" ({load_csv_rows(path)} rows)"
        print(f"wrote {path}{extra}")
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    if args.dest is not None:
        output_folder(args.dest, "--dest")
    folder = fetch(args.dest, base_url=args.base_url, files=args.only, progress=not args.quiet)
    print(folder)
    return 0


def _cmd_ingest(args: argparse.Namespace) -> int:
    inputs = (
        [*args.folder]
        + ([args.sidecar] if args.sidecar else [])
        + model_inputs([args.model] if args.model else [])
    )
    out = None if args.out == "-" else output_file(args.out, "--out", inputs=inputs)
    got = collect(
        args.folder,
        model=args.model,
        gpu=args.gpu,
        batch_size=args.batch_size,
        input_len=args.input_len,
        output_len=args.output_len,
        sidecar=args.sidecar,
    )
    if got.table.empty:
        left = "nothing written" if out is None else f"{out} left as it was"
        first = ""
        if len(got.excluded):  # the check that stopped the first run, in the same one line
            x = got.excluded.iloc[0]
            first = f"; the first: {x['source_file']}: {x['check']}: {x['reason']}"
        raise DataError(
            f"no run to write: {len(got.missing)} task(s) missing, {len(got.failed)} failed, {len(got.excluded)} "
            f"result(s) excluded by the physical checks (without --allow-incomplete the report names them){first}; "
            f"{left}"
        )
    print(got.report_text(), end="", file=sys.stderr)
    table = _server_defaults(got.table, args)
    if not got.complete and not args.allow_incomplete:
        print(
            f"not written: {len(got.missing)} missing and {len(got.failed)} failed task(s) would leave `slim fit` "
            "fewer points than planned. Resubmit the array from the campaign folder (sbatch slurm_array.sh; "
            "finished tasks are skipped), or pass --allow-incomplete to write the runs that exist.",
            file=sys.stderr,
        )
        return 1
    if out is None:
        write_ingested(table, sys.stdout)
        return 0
    with atomic_open(out) as fh:
        write_ingested(table, fh)
    print(f"wrote {len(table)} run(s) to {out}", file=sys.stderr)
    return 0


def _server_defaults(table, args: argparse.Namespace):
    """`table` with ``--chunked-prefill`` and ``--max-num-batched-tokens`` filled in where its runs do not say."""
    given = {"chunked_prefill": None if args.chunked_prefill is None else args.chunked_prefill == "true",
             "max_num_batched_tokens": args.max_num_batched_tokens}  # fmt: skip
    for column, value in given.items():
        if value is None:
            continue
        table = table.assign(**{column: table[column].astype(object).where(table[column].notna(), value)
                                if column in table.columns else value})  # fmt: skip
    return table
