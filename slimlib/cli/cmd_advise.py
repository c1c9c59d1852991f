"""`slim advise` (batch-size cap, paper Eq. 13, and the vLLM settings for it) and `slim plan` (calibration runs)."""

from __future__ import annotations

import argparse
import json

import numpy as np

from slimlib.advisor.capacity import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_MAX_BATCH,
    DEFAULT_RESERVE_GIB,
    advise,
    vllm_settings,
)
from slimlib.advisor.plan import make_plan, next_steps, write_plan
from slimlib.batchjobs import add_scheduler_arguments, options_from_args
from slimlib.cli.common import (
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
from slimlib.io import write_csv
from slimlib.model.serving import serving_config
from slimlib.model.validity import (
    check_architecture,
    check_context,
    check_memory,
    check_tensor_parallel,
    load_checked_params,
)
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.registry.precision import DTYPES, KV_CACHE_DTYPES, QUANTIZATIONS

ADVISE_EXAMPLES = f"""\
B_cap = the batch size of highest predicted throughput with predicted E2E <= SLO and batching efficiency
T(B) / (B T(1)) > epsilon, whose KV cache fits in what the engine allocates by default (GPU memory x
utilization - weights - reserve, or --gpu-blocks from your vLLM log).

examples:
  slim advise params.json --model llama-2-7b --input-len 250 --output-len 260 --slo-s 60 --epsilon 0.3
  slim advise params.json --model opt-1.3b --input-len 242 --output-len 520 --slo-s 30 --curve curve.csv
  slim advise params.json --model config.json --input-len 512 --output-len 128 --slo-s 20 --format json
  slim advise params.json --model opt-1.3b --input-len 242 --output-len 130 --batch-sizes 8 16 32 64 128

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
        "--tensor-parallel", type=positive_int, default=1,
        help="GPUs the model is split over (default 1); memory figures are per GPU",
    )  # fmt: skip
    _add_precision_arguments(p)
    batches = p.add_mutually_exclusive_group()
    batches.add_argument(
        "--max-batch", type=positive_int, default=DEFAULT_MAX_BATCH,
        help=f"candidates are 1..MAX_BATCH (default {DEFAULT_MAX_BATCH})",
    )  # fmt: skip
    batches.add_argument(
        "--batch-sizes", type=positive_int, nargs="+", metavar="B", help="explicit candidate batch sizes"
    )
    p.add_argument(
        "--block-size", type=positive_int, default=DEFAULT_BLOCK_SIZE, help="vLLM KV block size (tokens)"
    )
    _add_memory_utilization_argument(p)
    p.add_argument(
        "--reserve-gb", type=nonnegative_float, default=DEFAULT_RESERVE_GIB,
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
    q.add_argument("--n-batch", type=positive_int, default=3, help="batch sizes to profile (default 3)")
    q.add_argument(
        "--batch-sizes", type=positive_int, nargs="+", help="explicit batch sizes instead of --n-batch"
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
        help="fewest runs the plan may have (default 6, SLIM's parameters; lower for a smoke test)",
    )
    q.add_argument("--result-dir", default="results", help="client --result-dir (default results)")
    q.add_argument("--legacy-client", action="store_true", help="use benchmarks/benchmark_serving.py")
    q.add_argument("--port", type=port_number, default=8000, help="server port (default 8000)")
    q.add_argument("--out", required=True, help="folder to write the plan into")
    q.add_argument("--tensor-parallel", type=positive_int, default=1, help="GPUs per vLLM server (default 1)")
    _add_precision_arguments(q)
    _add_memory_utilization_argument(q)
    add_scheduler_arguments(q)
    q.set_defaults(func=_cmd_plan)


def _cmd_advise(args: argparse.Namespace) -> int:
    model_argument(args.model)
    inputs = [args.params, *model_inputs([args.model])]  # a config.json given as --model is an input too
    curve_path = output_file(args.curve, "--curve", inputs=inputs) if args.curve else None
    read_text_input(args.params, "parameter file")
    model = load_checked_params(args.params)
    arch = get_architecture(args.model)
    hw = get_gpu(model.gpu_)
    if args.batch_sizes:
        candidates = np.array(sorted(set(args.batch_sizes)))
    else:
        candidates = np.arange(1, args.max_batch + 1)
    precision = {
        "dtype": args.dtype,
        "quantization": args.quantization,
        "kv_cache_dtype": args.kv_cache_dtype,
    }
    check_architecture(arch, f"--model {args.model}")
    check_tensor_parallel(arch, args.tensor_parallel, "--tensor-parallel")
    check_context(arch, args.input_len, args.output_len, "--input-len + --output-len")
    config = serving_config(
        arch, hw, tensor_parallel=args.tensor_parallel, block_size=args.block_size,
        gpu_memory_utilization=args.gpu_memory_utilization, gpu_blocks=args.gpu_blocks, reserve_gib=args.reserve_gb,
        **precision,
    )  # fmt: skip
    config.check_fits(f"--model {args.model}")
    # one request must fit in the pool; with --no-memory-limit so must the largest candidate batch (or a warning)
    biggest = candidates.max() if args.no_memory_limit else 1
    check_memory(config, biggest, args.input_len, args.output_len)
    adv = advise(
        model, args.model, args.input_len, args.output_len, args.slo_s,
        args.epsilon, tensor_parallel=args.tensor_parallel, gpu=args.gpu, batch_sizes=candidates, block_size=args.block_size,
        gpu_memory_utilization=args.gpu_memory_utilization, reserve_gib=args.reserve_gb,
        gpu_blocks=args.gpu_blocks, respect_memory=not args.no_memory_limit, **precision,
    )  # fmt: skip
    if curve_path is not None:
        write_csv(adv.curve, curve_path)
    s = adv.summary
    settings = None
    if adv.feasible:
        settings = vllm_settings(
            arch, hw, adv.b_cap, args.input_len, args.output_len, tensor_parallel=args.tensor_parallel,
            block_size=args.block_size, reserve_gib=args.reserve_gb, **precision,
        )  # fmt: skip
    if args.format == "json":
        rec = {k: (v.item() if hasattr(v, "item") else v) for k, v in s.items()}
        rec = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in rec.items()}
        rec["vllm"] = settings
        print(json.dumps(rec, indent=2, sort_keys=True))
        return 0 if adv.feasible else 1
    slo = "none" if not np.isfinite(s["slo_s"]) else f"{s['slo_s']:.4g} s"
    print(f"{arch.name} on {hw.name}, IL={s['input_len']:g}, OL={s['output_len']:g}, SLO {slo}, "
          f"epsilon {s['epsilon']:g}")  # fmt: skip
    if settings is None:  # not feasible
        print(s["reason"])
        return 1
    print(f"B_cap = {adv.b_cap}  (bound by: {s['reason']})")
    print(f"predicted throughput {s['pred_throughput_tok_s']:.1f} tok/s, E2E {s['pred_e2e_s']:.3g} s, "
          f"batching efficiency {s['efficiency']:.3f}")  # fmt: skip
    if s["kv_saved_gb"] >= 0:
        saving = f"saved {s['kv_saved_gb']:.2f} GiB"
    else:  # only with --no-memory-limit: B_cap needs more than the default pool
        saving = f"{-s['kv_saved_gb']:.2f} GiB MORE than the default allocation: vLLM would preempt requests"
    per_gpu = f" per GPU (of {args.tensor_parallel})" if args.tensor_parallel > 1 else ""
    print(f"KV cache{per_gpu}: B_cap needs {s['kv_needed_gb']:.2f} GiB ({int(s['blocks_needed'])} blocks of "
          f"{args.block_size} tokens); default allocation {s['kv_default_gb']:.2f} GiB; {saving}")  # fmt: skip
    flags = (f"--max-num-seqs {settings['max_num_seqs']} --gpu-memory-utilization "
             f"{settings['gpu_memory_utilization']:.2f} --max-model-len {settings['max_model_len']}")  # fmt: skip
    if settings["tensor_parallel_size"] > 1:
        flags += f" --tensor-parallel-size {settings['tensor_parallel_size']}"
    flags += f" --dtype {settings['dtype']} --kv-cache-dtype {settings['kv_cache_dtype']}"
    if "quantization" in settings:
        flags += f" --quantization {settings['quantization']}"
    print(f"vLLM: {flags}")
    print(f"  or: --max-num-seqs {settings['max_num_seqs']} --num-gpu-blocks-override "
          f"{settings['num_gpu_blocks_override']}")  # fmt: skip
    if curve_path is not None:
        print(f"wrote the predicted curve ({len(adv.curve)} batch sizes) to {curve_path}")
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    model_argument(args.model)
    env = [args.env_file] if args.env_file else []
    output_folder(args.out, "--out", inputs=env, configs=model_inputs([args.model]))
    arch = get_architecture(args.model)
    check_architecture(arch, f"--model {args.model}")
    check_tensor_parallel(arch, args.tensor_parallel, "--tensor-parallel")
    plan = make_plan(
        args.model, args.gpu, args.input_len, args.output_len, n_batch=args.n_batch,
        batch_sizes=args.batch_sizes, rounds=args.rounds, min_prompts=args.min_prompts,
        tensor_parallel=args.tensor_parallel, min_runs=args.min_runs, dtype=args.dtype,
        quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )  # fmt: skip
    paths = write_plan(plan, args.out, result_dir=args.result_dir, legacy=args.legacy_client, port=args.port,
                       scheduler=args.scheduler, slurm=options_from_args(args), env_file=args.env_file)  # fmt: skip
    bs = ", ".join(str(b) for b in sorted(plan["batch_size"].unique()))
    print(f"{len(plan)} runs for {plan['model'].iloc[0]} on {plan['gpu'].iloc[0]}: batch sizes {bs}; "
          f"{int(plan['num_prompts'].sum())} prompts in all")  # fmt: skip
    for p in paths:
        print(f"wrote {p}")
    print(next_steps(paths, args.scheduler, args.out, args.result_dir))
    return 0
