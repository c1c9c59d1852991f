"""`slim models` and `slim gpus`: print the architecture and GPU registries (table, CSV or JSON)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

import pandas as pd

from slimlib.cli.common import model_argument
from slimlib.cli.table import command_help
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture, list_architectures
from slimlib.registry.gpus import get_gpu, list_gpus

MODELS_EXAMPLES = """\
columns: params_b / active_b (all parameters / those one token uses, 1e9), experts (routed / per token), d_kv =
n_kv_heads * head_dim (Eq. 4), kv_kib_per_token = KV bytes per token of vLLM's default serving configuration (one
GPU, the config's 16-bit dtype: L x (2 d_kv, or MLA's latent + RoPE key) x 2 bytes; DeepSeek-V4: its fp8 entries,
compressed entries and indexer keys per token with its windows counted whole; MiniMax-M3: 2 d_kv x 2 bytes in every
layer and its 256-byte bf16 index key in each block-sparse layer) / 1024, state_mib_per_seq (a hybrid's
linear-attention state, DeepSeek-V4's compressor state), window (sliding-window tokens x layers), quant (the
checkpoint's own --quantization).
Shapes come from each model's Hugging Face config.json (csv/json output carry the URL in `source`).

examples:
  slim models                              # the whole registry
  slim models llama-2-70b Qwen/Qwen2-7B    # selected models, by short name or Hugging Face id
  slim models ./my-model/config.json       # read a Hugging Face config.json (file or folder), no network
  slim models --format csv > models.csv
"""

GPUS_EXAMPLES = """\
columns: peak_tflops is dense fp16/bf16 tensor peak (no sparsity), peak_fp8_tflops and peak_fp4_tflops the dense
fp8 and fp4 ones (empty: no such tensor cores), mem_bw_tb_s peak memory bandwidth, mem_gib nominal capacity (the vendor's GB, 2**30 bytes each),
link_gb_s one-direction interconnect bandwidth per GPU (link_kind switch) or per GPU pair (pair). Each number's
data sheet is listed under the table.

examples:
  slim gpus
  slim gpus h100 a100            # aliases resolve to canonical names (h100 -> h100-sxm-80gb)
  slim gpus --format json
"""

_MODEL_TABLE_COLUMNS = [
    "name",
    "params_b",
    "active_b",
    "experts",
    "n_layers",
    "layer_kinds",
    "hidden_size",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "d_kv",
    "ffn_size",
    "ffn_kind",
    "vocab_size",
    "kv_kib_per_token",
    "state_mib_per_seq",
    "window",
    "max_position",
    "quant",
    "hf_id",
]


def register_cli(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slim models` and `slim gpus`."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "models",
        help=command_help("models"),
        description="List model architectures: layers, widths, heads, KV width, FFN, parameters, KV bytes/token.",
        epilog=MODELS_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument(
        "names", nargs="*", metavar="MODEL", help="models to show: name, HF id or config.json path"
    )
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    p.set_defaults(func=_cmd_models)

    q = sub.add_parser(
        "gpus",
        help=command_help("gpus"),
        description="List GPUs: dense fp16/bf16 tensor peak, peak memory bandwidth, capacity, data-sheet source.",
        epilog=GPUS_EXAMPLES,
        formatter_class=fmt,
    )
    q.add_argument("names", nargs="*", metavar="GPU", help="GPUs to show (names or aliases)")
    q.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    q.set_defaults(func=_cmd_gpus)


def _write_records(df: pd.DataFrame, fmt: str) -> None:
    if fmt == "csv":
        sys.stdout.write(df.to_csv(index=False, lineterminator="\n"))
    else:
        records = json.loads(df.to_json(orient="records", double_precision=15))
        sys.stdout.write(json.dumps(records, indent=2) + "\n")


def _cmd_models(args: argparse.Namespace) -> int:
    for name in args.names or ():
        model_argument(name, "model")  # a path names a config.json or a folder holding one
    df = list_architectures(args.names or None)
    names = args.names or list(df["name"])
    configs = [serving_config(get_architecture(n)) for n in names]
    at = list(df.columns).index("weight_bytes") + 1
    df.insert(at, "kv_bytes_per_token", [round(s.kv_bytes_per_token) for s in configs])
    # a hybrid's linear-attention state, DeepSeek-V4's compressor state
    df.insert(at + 1, "state_bytes_per_sequence", [round(s.state_bytes + s.sequence_bytes) for s in configs])
    if args.format != "table":
        _write_records(df, args.format)
        return 0
    moe = df["n_experts"] > 1
    table = df.assign(
        params_b=(df["n_params"] / 1e9).round(3),
        active_b=(df["n_active_params"] / 1e9).round(3),
        experts=(df["n_experts"].astype(str) + "/" + df["experts_per_token"].astype(str)).where(moe, "-"),
        kv_kib_per_token=(df["kv_bytes_per_token"] / 1024).round(1),
        window=(df["sliding_window"].astype(str) + "x" + df["n_sliding_layers"].astype(str)).where(
            df["n_sliding_layers"] > 0, "-"
        ),
        quant=df["quantization"].replace("", "-"),
        layer_kinds=[_layer_kinds(r) for r in df.itertuples(index=False)],
        state_mib_per_seq=(df["state_bytes_per_sequence"] / 2**20)
        .round(1)
        .astype(str)
        .where(df["state_bytes_per_sequence"] > 0, "-"),
    )[_MODEL_TABLE_COLUMNS]
    print(table.to_string(index=False))
    print(
        "\nsource: the Hugging Face config.json of each hf_id (or the file given); `--format csv` lists them."
    )
    return 0


def _layer_kinds(row: Any) -> str:
    """Layer-kind counts of one `list_architectures` row, e.g. "16 full + 48 linear" ("mamba2" for Mamba-2);
    DeepSeek-V4's "2 sliding + 21 csa + 20 hca" (every layer has the window; csa and hca also compressed);
    MiniMax-M3's "3 full + 57 block-sparse"."""
    if row.sparse_block_size:
        return f"{row.n_layers - row.n_indexer_layers} full + {row.n_indexer_layers} block-sparse"
    if row.n_csa_layers or row.n_hca_layers:
        window = row.n_layers - row.n_csa_layers - row.n_hca_layers
        kinds = {"sliding": window, "csa": row.n_csa_layers, "hca": row.n_hca_layers}
        return " + ".join(f"{n} {kind}" for kind, n in kinds.items() if n)
    linear = "mamba2" if row.linear_kind == "mamba2" else "linear"
    kinds = {"sliding": row.n_sliding_layers, linear: row.n_linear_layers, "ffn-only": row.n_mixerless_layers}
    full = row.n_layers - sum(kinds.values())
    return " + ".join(f"{n} {kind}" for kind, n in {"full": full, **kinds}.items() if n)


def _cmd_gpus(args: argparse.Namespace) -> int:
    df = list_gpus(args.names or None)
    if args.format != "table":
        _write_records(df, args.format)
        return 0
    cols = [
        "name",
        "peak_tflops",
        "peak_fp8_tflops",
        "peak_fp4_tflops",
        "mem_bw_tb_s",
        "mem_gib",
        "link_gb_s",
        "link_kind",
        "attn_eff",
        "layer_floor_us",
        "aliases",
    ]
    print(df[cols].to_string(index=False, na_rep=""))
    print("\nsources:")
    for row in df.itertuples(index=False):
        print(_wrap(str(row.source), f"  {row.name}: "))
        if row.notes:
            print(_wrap(str(row.notes), "    note: "))
        g = get_gpu(str(row.name))
        if g.link_source:
            print(_wrap(g.link_source, "    interconnect: "))
        if g.allreduce_source:
            print(_wrap(g.allreduce_source, "    all-reduce latency: "))
        if g.decode_attention_source:
            print(_wrap(g.decode_attention_source, "    decode attention efficiency: "))
        if g.layer_floor_source:
            print(_wrap(g.layer_floor_source, "    layer floor: "))
        if g.linear_prefill_source:
            print(_wrap(g.linear_prefill_source, "    linear-attention prefill: "))
    return 0


def _wrap(text: str, first: str) -> str:
    return textwrap.fill(
        text,
        width=110,
        initial_indent=first,
        subsequent_indent="      ",
        break_on_hyphens=False,
        break_long_words=False,
    )
