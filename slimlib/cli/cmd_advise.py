"""`slim advise` (batch-size cap, paper Eq. 13, and the vLLM settings for it) and `slim plan` (calibration runs)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.advisor.capacity import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_MAX_BATCH,
    DEFAULT_RESERVE_GIB,
    advise,
    vllm_settings,
)
from slimlib.advisor.deploy import PRECISIONS, SearchResult, closest, pareto_front, search
from slimlib.advisor.launch import (
    CHECKPOINT_PLACEHOLDER,
    checkpoint_refusal,
    is_cpu,
    launch_settings,
    placeholder_note,
    served_model,
)
from slimlib.advisor.plan import (
    DEFAULT_N_BATCH,
    PLAN_COMMAND,
    is_plan_folder,
    make_plan,
    next_steps,
    write_plan,
)
from slimlib.advisor.slo import LIMITS, Slo
from slimlib.batchjobs import add_scheduler_arguments, check_scheduler_options, options_from_args
from slimlib.cli.common import (
    batch_size,
    model_argument,
    model_inputs,
    nonnegative_float,
    output_file,
    output_folder,
    port_number,
    positive_float,
    positive_int,
    read_text_input,
    slo_seconds,
    unit_fraction,
)
from slimlib.cli.table import OUTPUTS_NOTE, command_help
from slimlib.errors import DataError
from slimlib.io import OWNER_MARKER, check_owned, csv_bytes, is_stdout, write_csv, write_files
from slimlib.model.memory import GPUS_PER_NODE
from slimlib.model.serving import serving_config
from slimlib.model.validity import (
    check_allreduce,
    check_architecture,
    check_context,
    check_memory,
    check_tensor_parallel,
    load_checked_params,
)
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.registry.host_cpu import CPU_DEVICES
from slimlib.registry.precision import DTYPES, KV_CACHE_DTYPES, QUANTIZATIONS
from slimlib.registry.vllm_flags import VLLM_VERSION, budget_rule, server_batched_tokens

ADVISE_EXAMPLES = f"""\
B_cap = the batch size of highest predicted throughput with predicted E2E <= SLO and batching efficiency
T(B) / (B T(1)) > epsilon, whose KV cache fits in what the engine allocates by default (GPU memory x
utilization - weights - reserve, or --gpu-blocks from your vLLM log).

examples:
  slim advise params.json --model llama-2-7b --input-len 250 --output-len 260 --slo-s 60 --epsilon 0.3
  slim advise params.json --model opt-1.3b --input-len 242 --output-len 520 --slo-s 30 --curve curve.csv
  slim advise params.json --model config.json --input-len 512 --output-len 128 --slo-s 20 --format json
  slim advise params.json --model opt-1.3b --input-len 242 --output-len 130 --batch-sizes 8 16 32 64 128

deployment search (TTFT/TPOT/E2E limits; every TP degree and precision on a node; ranked by throughput per GPU):
  slim advise params.json --model llama-2-13b --input-len 512 --output-len 256 --ttft-ms 500 --tpot-ms 30 --gpus 8
  slim advise params.json --model llama-2-13b --input-len 512 --output-len 256 --e2e-s 10 --percentile 0.9
  slim advise params.json --model llama-2-13b --input-len 512 --output-len 256 --gpus 8 --frontier front.csv

{OUTPUTS_NOTE}
"""

PLAN_EXAMPLES = f"""\
Writes plan.csv, run_plan.sh (one vLLM server per --max-num-seqs, one `vllm bench serve` client per length pair;
each finished run is appended to RESULT_DIR/slim-runs.csv, the sidecar `slim data ingest` reads) and README.txt.

examples:
  slim plan --model llama-2-7b --gpu h100-sxm-80gb --input-len 512 --output-len 128 512 --out plan/
  slim plan --model opt-1.3b --gpu h100-sxm-64gb --input-len 242 --output-len 130 520 --n-batch 4 --out plan/
  slim plan --model facebook/opt-2.7b --gpu a100-sxm-80gb --batch-sizes 8 32 128 --legacy-client --out plan/
  slim plan --model llama-2-7b --gpu h100-sxm-80gb --scheduler slurm --partition gpu --time 01:00:00 --out plan/
      (then: (cd plan && sbatch slurm_array.sh); when the array ends: slim data ingest plan --out runs.csv)

{OUTPUTS_NOTE}
"""


def _add_precision_arguments(p: argparse.ArgumentParser) -> None:
    """vLLM's precision options, with vLLM's names and values (`slimlib.registry.precision`)."""
    p.add_argument(
        "--dtype", choices=sorted(DTYPES), default=None,
        help="vLLM --dtype of weights and activations (default auto: the config's torch_dtype)",
    )  # fmt: skip
    p.add_argument(
        "--quantization", choices=sorted(QUANTIZATIONS), default=None,
        help="vLLM --quantization of the weights: fp8 (1 byte, fp8 tensor peak where the GPU has one) or fp4",
    )  # fmt: skip
    p.add_argument(
        "--kv-cache-dtype", choices=sorted(KV_CACHE_DTYPES), default=None,
        help="vLLM --kv-cache-dtype: auto (the serving dtype) or fp8 (1 byte per KV element)",
    )  # fmt: skip


def _add_budget_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-num-batched-tokens", type=positive_int, default=None, metavar="N",
        help=f"vLLM's token budget per step (chunked prefill); default vLLM {VLLM_VERSION}'s for the GPU: "
        f"{budget_rule()}",
    )  # fmt: skip


def _add_memory_utilization_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpu-memory-utilization", type=unit_fraction, default=DEFAULT_GPU_MEMORY_UTILIZATION,
        help="vLLM's --gpu-memory-utilization, in (0, 1]: sets the KV pool of the memory constraint and of the "
        f"model's predictions (default {DEFAULT_GPU_MEMORY_UTILIZATION})",
    )  # fmt: skip


def register_cli(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slim advise` and `slim plan`."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "advise",
        help=command_help("advise"),
        description="SLIM-BCA (paper Eq. 13): search batch sizes with a fitted parameter file.",
        epilog=ADVISE_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("params", help="parameter file (JSON) from `slim fit`")
    p.add_argument("--model", required=True, help="model: registry name, Hugging Face id or config.json")
    p.add_argument(
        "--input-len", type=positive_float, required=True, help="input (prompt) tokens per request, IL > 0"
    )
    p.add_argument(
        "--output-len", type=positive_float, required=True, help="output tokens per request, OL > 0"
    )
    p.add_argument(
        "--slo-s", type=slo_seconds, default=float("inf"), help="E2E latency SLO in seconds (default: none)"
    )
    p.add_argument(
        "--epsilon",
        type=float,  # range-checked by the advisor, NaN included
        default=0.3,
        help="minimum batching efficiency in (0, 1] (default 0.3)",
    )
    p.add_argument("--gpu", help="GPU to advise for; must be the one the parameters were calibrated on")
    p.add_argument(
        "--tensor-parallel", type=positive_int,
        help="GPUs the model is split over (default 1); memory figures are per GPU; with --gpus, the one degree "
        "the search tries",
    )  # fmt: skip
    _add_precision_arguments(p)
    batches = p.add_mutually_exclusive_group()
    batches.add_argument(
        "--max-batch", type=batch_size, default=DEFAULT_MAX_BATCH,
        help=f"candidates are 1..MAX_BATCH (default {DEFAULT_MAX_BATCH})",
    )  # fmt: skip
    batches.add_argument(
        "--batch-sizes", type=batch_size, nargs="+", metavar="B", help="explicit candidate batch sizes"
    )
    p.add_argument(
        "--block-size", type=positive_int, default=DEFAULT_BLOCK_SIZE, help="vLLM KV block size (tokens)"
    )
    _add_budget_argument(p)
    _add_memory_utilization_argument(p)
    p.add_argument(
        "--reserve-gib", "--reserve-gb", dest="reserve_gib", type=nonnegative_float, default=DEFAULT_RESERVE_GIB,
        help=f"activation reserve in GiB (default {DEFAULT_RESERVE_GIB})",
    )  # fmt: skip
    p.add_argument(
        "--gpu-blocks",
        type=positive_int,
        help="num_gpu_blocks logged by your vLLM server (default: estimate)",
    )
    p.add_argument("--no-memory-limit", action="store_true", help="do not cap B by the default KV cache")
    p.add_argument(
        "--curve",
        metavar="CSV",
        help="write the predicted curve (all candidates) to this CSV (replaced atomically)",
    )
    p.add_argument(
        "--cpu-threads", type=positive_int,
        help="CPU engine only: threads to bind (VLLM_CPU_OMP_THREADS_BIND=0-(N-1); default auto)",
    )  # fmt: skip
    s = p.add_argument_group(
        "deployment search (any of these replaces Eq. 13's single-deployment advice by the search)"
    )
    s.add_argument("--ttft-ms", type=positive_float, help="time-to-first-token limit, ms")
    s.add_argument("--tpot-ms", type=positive_float, help="time-per-output-token limit, ms")
    s.add_argument("--e2e-s", type=positive_float, help="end-to-end latency limit, s")
    s.add_argument(
        "--percentile", type=float,
        help="hold the limits at this percentile of the served requests: 0.5, 0.9 or 0.99 (the recommended model's "
        "replay of vLLM's scheduler; default: the predicted mean)",
    )  # fmt: skip
    s.add_argument(
        "--gpus", type=positive_int,
        help=f"GPUs of the node (at most {GPUS_PER_NODE}): search every TP degree dividing it that vLLM accepts, "
        "or --tensor-parallel's only; replicas = GPUS / TP (default: --tensor-parallel GPUs)",
    )  # fmt: skip
    s.add_argument(
        "--precision", nargs="+", choices=list(PRECISIONS), metavar="P",
        help=f"precisions to search, of {', '.join(PRECISIONS)} (default: all the GPU has)",
    )  # fmt: skip
    s.add_argument(
        "--frontier", metavar="CSV",
        help="write the Pareto set (throughput per GPU vs per-user tokens/s) to CSV and a figure "
        "(same name, .pdf and .png)",
    )  # fmt: skip
    p.add_argument("--format", choices=["text", "json"], default="text", help="output format")
    p.set_defaults(func=_cmd_advise)

    q = sub.add_parser(
        "plan",
        help=command_help("plan"),
        description="Few configurations spanning the pre-knee region and your lengths, as runnable commands.",
        epilog=PLAN_EXAMPLES,
        formatter_class=fmt,
    )
    q.add_argument("--model", required=True, help="model: registry name, Hugging Face id or config.json")
    q.add_argument("--gpu", required=True, help="GPU registry name (`slim gpus`)")
    q.add_argument(
        "--input-len", type=positive_int, nargs="+", default=[512], help="input lengths of interest (tokens)"
    )
    q.add_argument(
        "--output-len", type=positive_int, nargs="+", default=[128, 512], help="output lengths of interest"
    )
    q.add_argument(
        "--n-batch", type=positive_int,
        help=f"batch sizes to profile (default {DEFAULT_N_BATCH}, or as many as --min-runs needs with one length pair)",
    )  # fmt: skip
    q.add_argument(
        "--batch-sizes", type=batch_size, nargs="+", help="explicit batch sizes instead of --n-batch"
    )
    q.add_argument(
        "--rounds", type=positive_int, default=20, help="prompts per run = max(min, rounds x B) (default 20)"
    )
    q.add_argument(
        "--min-prompts", type=positive_int, default=200, help="fewest prompts per run (default 200)"
    )
    q.add_argument(
        "--min-runs",
        type=positive_int,
        default=6,
        help="fewest runs the plan may have (default 6: one measured throughput per parameter of the paper's "
        "model; lower for a smoke test)",
    )
    q.add_argument("--result-dir", default="results", help="client --result-dir (default results)")
    q.add_argument("--legacy-client", action="store_true", help="use benchmarks/benchmark_serving.py")
    q.add_argument("--port", type=port_number, default=8000, help="server port (default 8000)")
    q.add_argument("--out", required=True, help="folder to write the plan into")
    q.add_argument("--tensor-parallel", type=positive_int, default=1, help="GPUs per vLLM server (default 1)")
    _add_precision_arguments(q)
    _add_memory_utilization_argument(q)
    _add_budget_argument(q)
    add_scheduler_arguments(q)
    q.set_defaults(func=_cmd_plan)


#: options that select the deployment search (`slimlib.advisor.deploy`) instead of Eq. 13
SEARCH_OPTIONS = ("ttft_ms", "tpot_ms", "e2e_s", "percentile", "gpus", "precision", "frontier")


def _check_checkpoint(arch, quantization: str | None) -> None:
    """DataError where vLLM cannot serve the checkpoint in `quantization` (`checkpoint_refusal`)."""
    refusal = checkpoint_refusal(arch, quantization)
    if refusal:
        raise DataError(f"--quantization {quantization}: {refusal}")


def _candidates(args: argparse.Namespace, default_budget: int) -> np.ndarray:
    """The candidate batch caps (`--batch-sizes`, else 1..`--max-batch`) up to the token budget: vLLM refuses a
    ``--max-num-seqs`` above ``--max-num-batched-tokens`` (the output says which were left out)."""
    b = np.array(sorted(set(args.batch_sizes))) if args.batch_sizes else np.arange(1, args.max_batch + 1)
    budget = args.max_num_batched_tokens or default_budget
    keep = b <= budget
    if not keep.any():
        raise DataError(
            f"every candidate batch cap is above the token budget {budget} (vLLM refuses --max-num-seqs above "
            "--max-num-batched-tokens): give smaller batch sizes or a larger --max-num-batched-tokens"
        )
    if not keep.all():
        print(f"(batch caps above {budget}, the token budget per step, are not candidates: vLLM refuses "
              "--max-num-seqs above --max-num-batched-tokens)", file=sys.stderr)  # fmt: skip
    return b[keep]


def _cmd_advise(args: argparse.Namespace) -> int:
    if any(getattr(args, k) is not None for k in SEARCH_OPTIONS):
        return _search(args)
    args.tensor_parallel = args.tensor_parallel or 1
    model_argument(args.model)
    inputs = [args.params, *model_inputs([args.model])]  # a config.json given as --model is an input too
    curve_path = output_file(args.curve, "--curve", inputs=inputs) if args.curve else None
    read_text_input(args.params, "parameter file")
    model = load_checked_params(args.params)
    arch = get_architecture(args.model)
    hw = get_gpu(model.gpu_)
    candidates = _candidates(args, server_batched_tokens(hw, args.tensor_parallel))
    precision = {
        "dtype": args.dtype,
        "quantization": args.quantization,
        "kv_cache_dtype": args.kv_cache_dtype,
    }
    check_architecture(arch, f"--model {args.model}")
    _check_checkpoint(arch, args.quantization)
    check_tensor_parallel(arch, args.tensor_parallel, "--tensor-parallel")
    check_allreduce(hw, args.tensor_parallel, "--tensor-parallel")
    check_context(arch, args.input_len, args.output_len, "--input-len + --output-len")
    budget = args.max_num_batched_tokens or server_batched_tokens(hw, args.tensor_parallel)
    config = serving_config(
        arch, hw, tensor_parallel=args.tensor_parallel, block_size=args.block_size,
        gpu_memory_utilization=args.gpu_memory_utilization, gpu_blocks=args.gpu_blocks, reserve_gib=args.reserve_gib,
        max_num_batched_tokens=budget, **precision,
    )  # fmt: skip
    config.check_fits(f"--model {args.model}")
    # one request must fit in the pool; with --no-memory-limit so must the largest candidate batch (or a warning)
    biggest = candidates.max() if args.no_memory_limit else 1
    check_memory(config, biggest, args.input_len, args.output_len)
    adv = advise(
        model, args.model, args.input_len, args.output_len, args.slo_s,
        args.epsilon, tensor_parallel=args.tensor_parallel, gpu=args.gpu, batch_sizes=candidates, block_size=args.block_size,
        gpu_memory_utilization=args.gpu_memory_utilization, reserve_gib=args.reserve_gib,
        gpu_blocks=args.gpu_blocks, respect_memory=not args.no_memory_limit, max_num_batched_tokens=budget,
        **precision,
    )  # fmt: skip
    if curve_path is not None:
        write_csv(adv.curve, curve_path)
    s = adv.summary
    settings = None
    if adv.feasible:
        settings = vllm_settings(
            arch, hw, adv.b_cap, args.input_len, args.output_len, tensor_parallel=args.tensor_parallel,
            block_size=args.block_size, reserve_gib=args.reserve_gib, max_num_batched_tokens=budget, **precision,
        )  # fmt: skip
    if args.format == "json":
        rec = {k: (v.item() if hasattr(v, "item") else v) for k, v in s.items()}
        rec = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in rec.items()}
        rec["vllm"] = settings
        if (
            adv.feasible
        ):  # the device's own launch settings (CPU engine: KV space and threads, no GPU fraction)
            launch = launch_settings(
                config,
                adv.b_cap,
                args.input_len,
                args.output_len,
                cpu_threads=args.cpu_threads,
                dtype=args.dtype,
            )
            rec["launch"] = {"env": launch.env, "flags": launch.flags}
        print(json.dumps(rec, indent=2, sort_keys=True))
        return 0 if adv.feasible else 1
    slo = "none" if not np.isfinite(s["slo_s"]) else f"{s['slo_s']:.4g} s"
    print(f"{arch.name} on {hw.name}, IL={s['input_len']:g}, OL={s['output_len']:g}, SLO {slo}, "
          f"epsilon {s['epsilon']:g}")  # fmt: skip
    # not feasible: the curve still shows why, and the exit status says no batch size fits
    if settings is None:
        print(s["reason"])
        if curve_path is not None:
            print(f"wrote the predicted curve ({len(adv.curve)} batch sizes, none feasible) to {curve_path}")
        return 1
    print(f"B_cap = {adv.b_cap}  (bound by: {s['reason']})")
    print(f"predicted throughput {s['pred_throughput_tok_s']:.1f} tok/s, E2E {s['pred_e2e_s']:.3g} s, "
          f"batching efficiency {s['efficiency']:.3f}")  # fmt: skip
    if s["kv_saved_gib"] >= 0:
        saving = f"saved {s['kv_saved_gib']:.2f} GiB"
    else:  # only with --no-memory-limit: B_cap needs more than the default pool
        saving = f"{-s['kv_saved_gib']:.2f} GiB MORE than the default allocation: vLLM would preempt requests"
    per_gpu = f" per GPU (of {args.tensor_parallel})" if args.tensor_parallel > 1 else ""
    print(f"KV cache{per_gpu}: B_cap needs {s['kv_needed_gib']:.2f} GiB ({int(s['blocks_needed'])} blocks of "
          f"{config.block_size} tokens); default allocation {s['kv_default_gib']:.2f} GiB; {saving}")  # fmt: skip
    launch = launch_settings(
        config, adv.b_cap, args.input_len, args.output_len, cpu_threads=args.cpu_threads, dtype=args.dtype
    )
    served = served_model(args.model, arch.hf_id or arch.name)
    print(f"vLLM: {launch.command(served)}")
    if served == CHECKPOINT_PLACEHOLDER:
        print(placeholder_note(args.model))
    if not is_cpu(config):
        blocks = (
            "" if config.compressed else f"--num-gpu-blocks-override {settings['num_gpu_blocks_override']} "
        )
        print(f"  or: --max-num-seqs {settings['max_num_seqs']} {blocks}--max-num-batched-tokens "
              f"{settings['max_num_batched_tokens']} --max-model-len {settings['max_model_len']}")  # fmt: skip
    if curve_path is not None:
        print(f"wrote the predicted curve ({len(adv.curve)} batch sizes) to {curve_path}")
    return 0


def frontier_outputs(path: str, inputs: list[str | Path]) -> tuple[Path, Path, Path]:
    """The files `--frontier` writes: the CSV `path` and its figure beside it (same name, .pdf and .png), each
    checked as an output that is not one of `inputs`; DataError when the CSV's name is one of its figure's."""
    if is_stdout(path):
        raise DataError(
            "--frontier -: the frontier needs a file name (its figure is written beside it as .pdf and .png)"
        )
    csv_path = Path(path)
    figure = (csv_path.with_suffix(".pdf"), csv_path.with_suffix(".png"))
    if csv_path.suffix.lower() in (".pdf", ".png"):
        raise DataError(
            f"--frontier {path}: the figure is written beside the CSV as {figure[0].name} and {figure[1].name}; "
            "give the CSV its own name, e.g. front.csv"
        )
    for p in (csv_path, *figure):
        what = "--frontier" if p == csv_path else f"--frontier {path}: its figure"
        output_file(p, what, inputs=inputs)
    return csv_path, *figure


#: interval level of the throughput interval the search reports
SEARCH_INTERVAL = 0.9


def _search(args: argparse.Namespace) -> int:
    """`slim advise` with TTFT/TPOT/E2E limits, --gpus or --frontier: the deployment search."""
    model_argument(args.model)
    inputs = [args.params, *model_inputs([args.model])]
    front_paths = frontier_outputs(args.frontier, inputs) if args.frontier else None
    given = [
        o for o in ("dtype", "quantization", "kv_cache_dtype", "gpu_blocks", "curve") if getattr(args, o)
    ]
    if given or args.no_memory_limit or args.slo_s != float("inf"):
        bad = ["--" + o.replace("_", "-") for o in given] + (
            ["--no-memory-limit"] if args.no_memory_limit else []
        )
        bad += ["--slo-s"] if args.slo_s != float("inf") else []
        raise DataError(
            f"{', '.join(bad)} {'belongs' if len(bad) == 1 else 'belong'} to Eq. 13's single-deployment advice; the deployment search (--ttft-ms, "
            "--tpot-ms, --e2e-s, --percentile, --gpus, --precision, --frontier) takes --e2e-s for the E2E limit "
            "and --precision for the precisions"
        )
    read_text_input(args.params, "parameter file")
    model = load_checked_params(args.params)
    arch = get_architecture(args.model)
    hw = get_gpu(model.gpu_)
    if args.gpu is not None and get_gpu(args.gpu).name != hw.name:
        raise DataError(f"the parameters were calibrated on {hw.name}, not {get_gpu(args.gpu).name}")
    check_architecture(arch, f"--model {args.model}")
    check_context(arch, args.input_len, args.output_len, "--input-len + --output-len")
    slo = Slo(
        ttft_s=args.ttft_ms / 1e3 if args.ttft_ms else float("inf"),
        tpot_s=args.tpot_ms / 1e3 if args.tpot_ms else float("inf"),
        e2e_s=args.e2e_s or float("inf"),
        percentile=args.percentile,
    )
    if args.gpus is not None and args.gpus > GPUS_PER_NODE:
        raise DataError(
            f"--gpus {args.gpus}: a node holds at most {GPUS_PER_NODE} GPUs (tensor parallelism runs within one); "
            f"advise one node: its throughput per GPU is that of every node"
        )
    if args.gpus and args.tensor_parallel and args.gpus % args.tensor_parallel:
        raise DataError(
            f"--tensor-parallel {args.tensor_parallel} does not divide --gpus {args.gpus}: the node runs "
            "--gpus / --tensor-parallel replicas; give a degree that divides it, or leave it out to search every one"
        )
    gpus = args.gpus or args.tensor_parallel or 1
    tps = [args.tensor_parallel or 1] if args.tensor_parallel or not args.gpus else None
    candidates = _candidates(args, server_batched_tokens(hw, 1))
    wl = pd.DataFrame(
        {"model": [str(args.model)], "input_len": [args.input_len], "output_len": [args.output_len]}
    )
    res = search(
        model, wl, gpus, slo, args.epsilon, batch_sizes=candidates, precisions=args.precision or tuple(PRECISIONS),
        tensor_parallels=tps, interval=SEARCH_INTERVAL, block_size=args.block_size,
        gpu_memory_utilization=args.gpu_memory_utilization, reserve_gib=args.reserve_gib,
        max_num_batched_tokens=args.max_num_batched_tokens,
    )  # fmt: skip
    front = (
        pareto_front(res, model=model, level=SEARCH_INTERVAL)
        if front_paths is not None
        else pareto_front(res)
    )
    best, dep = res.best()
    launch = None
    if best["b_cap"] > 0:
        launch = launch_settings(dep.config, int(best["b_cap"]), args.input_len, args.output_len,
                                 cpu_threads=args.cpu_threads)  # fmt: skip
    if front_paths is not None and len(front) == 0:
        print(f"slim advise: no deployment meets the limits, so the frontier is empty: nothing written to "
              f"{', '.join(map(str, front_paths))}", file=sys.stderr)  # fmt: skip
        front_paths = None
    if front_paths is not None:
        label = f"best: TP{best['tensor_parallel']} {best['precision']} B={best['b_cap']}"
        pick = {label: (best["per_user_tok_s"], best["throughput_per_gpu_tok_s"])} if launch else {}
        from slimlib.experiments.bca.advisor_figures import bca_frontier  # matplotlib: only a frontier draws
        from slimlib.experiments.outputs.plotting import figure_bytes

        fig = bca_frontier(front, pick, f"{arch.name} on {gpus} x {hw.name}\n{slo.describe()}")
        drawn = figure_bytes(fig, ("pdf", "png"))
        csv_path, pdf_path, png_path = front_paths
        write_files({csv_path: csv_bytes(front), pdf_path: drawn["pdf"], png_path: drawn["png"]})
    if args.format == "json":
        rec = {
            "slo": slo.describe(),
            "latency_statistic": {q: slo.statistic(q) for q in LIMITS},
            "epsilon": args.epsilon,
            "ranked": json.loads(res.ranked.to_json(orient="records")),
            "skipped": json.loads(res.skipped.to_json(orient="records")),
            "frontier": json.loads(front.to_json(orient="records")),
            "vllm": None if launch is None else {"env": launch.env, "flags": launch.flags},
            "closest": None if launch else closest(res),
        }
        print(json.dumps(rec, indent=2, sort_keys=True))
        return 0 if launch else 1
    _print_search(res, arch.name, hw.name, gpus, args.epsilon)
    if launch is None:
        print(closest(res))
        return 1
    print(f"best: TP{best['tensor_parallel']} {best['precision']} x {best['replicas']} replica(s), "
          f"B_cap {best['b_cap']} (bound by: {best['binding']})")  # fmt: skip
    served = served_model(args.model, arch.hf_id or arch.name)
    print(f"vLLM (each replica): {launch.command(served)}")
    if served == CHECKPOINT_PLACEHOLDER:
        print(placeholder_note(args.model))
    if front_paths is not None:
        print(f"wrote the frontier ({len(front)} points) to {', '.join(map(str, front_paths))}")
    return 0


def _print_search(res: SearchResult, model: str, gpu: str, gpus: int, epsilon: float) -> None:
    r0 = res.ranked.iloc[0]
    print(f"{model} on {gpus} x {gpu}, IL={r0['input_len']:g}, OL={r0['output_len']:g}: {res.slo.describe()}, "
          f"efficiency > {epsilon:g}")  # fmt: skip
    if r0["latency_source"] != "model":
        print(
            f"(TTFT and TPOT from the model's {r0['latency_source']}: TPOT = decode / OL, TTFT = E2E - (OL - 1) TPOT)"
        )
    stat = {q: res.slo.statistic(q) for q in LIMITS}
    heads = {q: f"{name}{'' if stat[q] == 'mean' else ' ' + stat[q]} {unit}"
             for q, name, unit in (("ttft", "TTFT", "ms"), ("tpot", "TPOT", "ms"), ("e2e", "E2E", "s"))}  # fmt: skip
    dev = "CPU" if gpu in CPU_DEVICES else "GPU"  # vLLM's CPU engine: the device is the host
    labels = [f"TP{r.tensor_parallel} {r.precision} x{r.replicas}" for r in res.ranked.itertuples()]
    w = max(16, *map(len, labels))
    print(f"{'rank':>4} {'deployment':<{w}} {'B_cap':>5} {'tok/s/' + dev:>10} {'90% interval':>17} {'tok/s/user':>10} "
          f"{heads['ttft']:>12} {heads['tpot']:>12} {heads['e2e']:>9} {'weights':>8} {'KV pool':>8} {'KV tokens':>9}  "
          "binding")  # fmt: skip
    for _, r in res.ranked.iterrows():
        dep = f"TP{r['tensor_parallel']} {r['precision']} x{r['replicas']}"
        if r["b_cap"] > 0:
            scale = r["replicas"] / r["gpus"]
            lo, hi = r.get("pred_throughput_low_tok_s", np.nan), r.get("pred_throughput_high_tok_s", np.nan)
            vals = (f"{r['throughput_per_gpu_tok_s']:>10.1f} {f'[{lo * scale:.0f}, {hi * scale:.0f}]':>17} "
                    f"{r['per_user_tok_s']:>10.1f} {r['pred_ttft_s'] * 1e3:>12.1f} {r['pred_tpot_s'] * 1e3:>12.2f} "
                    f"{r['pred_e2e_s']:>9.3g}")  # fmt: skip
        else:
            vals = f"{'-':>10} {'-':>17} {'-':>10} {'-':>12} {'-':>12} {'-':>9}"
        print(f"{int(r['rank']):>4} {dep:<{w}} {int(r['b_cap']):>5} {vals} {r['weights_gib']:>7.1f}G "
              f"{r['kv_pool_gib']:>7.1f}G {int(r['kv_tokens']):>9}  {r['binding']}")  # fmt: skip
    print(
        f"(memory per {dev}, GiB; tok/s/{dev} = replicas x server throughput / {dev}s; tok/s/user = OL / mean E2E)"
    )
    weight_only = sorted(set(res.ranked.loc[res.ranked["weight_only"], "precision"]))
    if weight_only:
        print(f"({', '.join(weight_only)} on {gpu}: weight-only, its GEMMs compute in 16 bits: the {dev} has no "
              "tensor cores of that precision)")  # fmt: skip
    for skip in res.skipped.itertuples():
        print(f"skipped TP{skip.tensor_parallel} {skip.precision}: {skip.reason}")


def _cmd_plan(args: argparse.Namespace) -> int:
    check_scheduler_options(args)
    model_argument(args.model)
    env = [args.env_file] if args.env_file else []
    output_folder(args.out, "--out", inputs=env, configs=model_inputs([args.model]))
    check_owned(args.out, "--out", PLAN_COMMAND, legacy=is_plan_folder)
    arch = get_architecture(args.model)
    check_architecture(arch, f"--model {args.model}")
    _check_checkpoint(arch, args.quantization)
    check_tensor_parallel(arch, args.tensor_parallel, "--tensor-parallel")
    plan = make_plan(
        args.model, args.gpu, args.input_len, args.output_len, n_batch=args.n_batch,
        batch_sizes=args.batch_sizes, rounds=args.rounds, min_prompts=args.min_prompts,
        tensor_parallel=args.tensor_parallel, min_runs=args.min_runs, dtype=args.dtype,
        quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype,
        gpu_memory_utilization=args.gpu_memory_utilization, max_num_batched_tokens=args.max_num_batched_tokens,
    )  # fmt: skip
    paths = write_plan(plan, args.out, result_dir=args.result_dir, legacy=args.legacy_client, port=args.port,
                       scheduler=args.scheduler, slurm=options_from_args(args), env_file=args.env_file)  # fmt: skip
    bs = ", ".join(str(b) for b in sorted(plan["batch_size"].unique()))
    print(f"{len(plan)} runs for {plan['model'].iloc[0]} on {plan['gpu'].iloc[0]}: batch sizes {bs}; "
          f"{int(plan['num_prompts'].sum())} prompts in all")  # fmt: skip
    for p in paths:
        if p.name != OWNER_MARKER:
            print(f"wrote {p}")
    print(next_steps(paths, args.scheduler, args.out, args.result_dir))
    return 0
