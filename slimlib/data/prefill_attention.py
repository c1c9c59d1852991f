"""The CPU engine's prefill-attention micro-benchmark (`slimlib.kit.prefill_attention_bench`): run, write, read it.

``slim bench attention`` runs the benchmark with the engine's interpreter (`slimlib.data.kernel_bench`: a run with
outside load is refused, not written) and writes ``prefill_attention.csv`` (one row per model and prompt length:
the causal and the unmasked call's best and median seconds) and ``manifest.json`` (engine version, kernel, threads,
host, date, load, sha256 of the table) into one folder, together (`slimlib.io.atomic_folder`).

The registry's host CPU takes one fact from the committed table (``data/engine-cpu-attention/``):
`prefill_attention_flops`, the rate of the causal call in the FLOPs the recommended model charges a causal prompt's
attention (``2 IL^2 D`` per layer and prompt, `slimlib.model.equations.ATTENTION_FLOPS_CAUSAL`, ``D`` = query heads x
head width), median over models at the longest prompt: the rate the recommended model's prefill attention runs at
on that device (`slimlib.model.terms.recommended.SERVED_PREFILL`). `causal_share` is the evidence that
this count is the kernel's: the causal call's time over the unmasked one's (0.5 for a kernel that skips the masked
half, 1 for one that computes the whole square and masks it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from slimlib.data.kernel_bench import run_bench_script
from slimlib.data.manifest_folder import read_manifest_table, write_manifest_folder
from slimlib.errors import DataError
from slimlib.kit import prefill_attention_bench
from slimlib.model.equations import ATTENTION_FLOPS_CAUSAL

__all__ = [
    "COLUMNS",
    "TABLE_FILE",
    "causal_flops",
    "causal_share",
    "prefill_attention_flops",
    "read_prefill_attention",
    "run_prefill_attention",
    "write_prefill_attention",
]

TABLE_FILE = "prefill_attention.csv"
COLUMNS = ("model", "input_len", "n_heads", "n_kv_heads", "head_dim", "isa", "best_causal_s", "median_causal_s",
           "best_full_s", "median_full_s", "repeats", "threads")  # fmt: skip
#: the committed benchmark, relative to the repository root
COMMITTED = Path(__file__).resolve().parents[2] / "data" / "engine-cpu-attention"
#: prompt lengths `slim bench attention` times by default (the campaigns' input lengths and one longer)
ATTENTION_LENGTHS = (128, 512, 1024, 2048, 4096)


def run_prefill_attention(
    engine_python: str,
    models: dict[str, dict[str, Any]],
    lengths: list[int],
    repeats: int,
    threads: int,
    *,
    check_load: bool = True,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run the benchmark script with `engine_python`; (table, manifest). DataError when the script fails, prints
    no row, or (`check_load`) the host had outside load during it."""
    spec = {"models": models, "lengths": lengths, "repeats": repeats, "threads": threads}
    rows, common = run_bench_script(
        engine_python, prefill_attention_bench.__file__, spec, "prefill-attention",
        lambda r: f"{r['model']} IL={r['input_len']}: causal {r['best_causal_s'] * 1e3:.2f} ms, "
        f"unmasked {r['best_full_s'] * 1e3:.2f} ms", check_load=check_load,
    )  # fmt: skip
    manifest = {
        "what": "vLLM CPU prefill attention of one prompt, causal and unmasked (slimlib.kit.prefill_attention_bench), "
        "random bf16 tensors",
        "kernel": "vllm._custom_ops.cpu_attention_with_kv_cache",
        "block_size": prefill_attention_bench.BLOCK_SIZE,
        "threads": threads, "lengths": lengths, "repeats": repeats, "models": sorted(models), **common,
    }  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS)), manifest


def write_prefill_attention(out: str | Path, table: pd.DataFrame, manifest: dict[str, Any]) -> Path:
    """``prefill_attention.csv`` and ``manifest.json`` (with the table's sha256) into folder `out`, together."""
    return write_manifest_folder(out, TABLE_FILE, table, manifest)


def read_prefill_attention(folder: str | Path = COMMITTED) -> pd.DataFrame:
    """The table of a benchmark folder, checked against its manifest's sha256; DataError naming what is wrong."""
    df = read_manifest_table(folder, TABLE_FILE, COLUMNS, "slim bench attention")
    path = Path(folder) / TABLE_FILE
    positive = ("input_len", "n_heads", "n_kv_heads", "head_dim", "best_causal_s", "best_full_s")
    bad = df[~(df[list(positive)] > 0).all(axis=1)]
    if len(bad):
        raise DataError(f"{path}: row {int(bad.index[0]) + 2}: {', '.join(positive)} must be > 0")
    return df


def causal_flops(table: pd.DataFrame) -> pd.Series:
    """FLOPs the recommended model charges each row's causal prompt attention in one layer: ``2 IL^2 D``,
    ``D`` = query heads x head width (`slimlib.model.equations.layer_prefill_flops`)."""
    il = table["input_len"].astype(float)
    return ATTENTION_FLOPS_CAUSAL * il * il * table["n_heads"] * table["head_dim"]


def prefill_attention_flops(table: pd.DataFrame) -> float:
    """FLOP/s of the causal call in `causal_flops`: median over models at the longest prompt length."""
    top = table[table["input_len"] == table["input_len"].max()]
    return float((causal_flops(top) / top["best_causal_s"]).median())


def causal_share(table: pd.DataFrame) -> pd.Series:
    """Per row, the causal call's best time over the unmasked one's (module docstring)."""
    return table["best_causal_s"] / table["best_full_s"]
