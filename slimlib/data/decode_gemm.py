"""The CPU engine's decode-GEMM micro-benchmark (`slimlib.kit.decode_gemm_bench`): run it, write it, read it.

``slim bench gemm`` runs the benchmark with the engine's interpreter (`slimlib.data.kernel_bench`: a benchmark with
outside load is refused, not written) and writes
``decode_gemm.csv`` (one row per model and token count) and ``manifest.json`` (engine version, threads, host, date,
load, sha256 of the table) into one folder, together (`slimlib.io.atomic_folder`).

Each registered host CPU takes two facts from its committed table (``data/engine-cpu-gemm/``, and
``data/engine-cpu-amx-gemm/`` for ``cpu-amx``):

* `decode_gemm_curve`: the pass's seconds per weight at each token count measured (median over models): the
  measured curve the recommended model's decode GEMMs follow on that device
  (`slimlib.model.terms.rooflines.DECODE_GEMMS`), weight read, compute and the transition between them;
* `decode_gemm_flops`: the median over models of the pass's FLOP/s at the largest token count measured, where every
  model's pass is compute-bound (the decode GEMMs' roof).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from slimlib.data.kernel_bench import run_bench_script
from slimlib.data.manifest_folder import read_manifest_table, write_manifest_folder
from slimlib.errors import DataError
from slimlib.kit import decode_gemm_bench

__all__ = [
    "COLUMNS",
    "TABLE_FILE",
    "decode_gemm_curve",
    "decode_gemm_flops",
    "read_decode_gemm",
    "run_decode_gemm",
    "write_decode_gemm",
]

TABLE_FILE = "decode_gemm.csv"
COLUMNS = ("model", "tokens", "n_gemms", "weight_bytes", "flops", "best_s", "median_s", "repeats", "threads")
#: the committed benchmark, relative to the repository root
COMMITTED = Path(__file__).resolve().parents[2] / "data" / "engine-cpu-gemm"


def run_decode_gemm(
    engine_python: str,
    models: dict[str, dict[str, Any]],
    tokens: list[int],
    repeats: int,
    threads: int,
    *,
    check_load: bool = True,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run the benchmark script with `engine_python`; (table, manifest). DataError when the script fails, prints
    no row, or (`check_load`) the host had outside load during it (`slimlib.data.kernel_bench`)."""
    spec = {"models": models, "tokens": tokens, "repeats": repeats, "threads": threads}
    rows, common = run_bench_script(
        engine_python, decode_gemm_bench.__file__, spec, "decode-GEMM",
        lambda r: f"{r['model']} M={r['tokens']}: {r['best_s'] * 1e3:.2f} ms", check_load=check_load,
    )  # fmt: skip
    manifest = {
        "what": "vLLM CPU decode-GEMM pass (slimlib.kit.decode_gemm_bench), random bf16 weights",
        "kernel": "vllm._custom_ops.onednn_mm",
        "threads": threads, "tokens": tokens, "repeats": repeats, "models": sorted(models), **common,
    }  # fmt: skip
    return pd.DataFrame(rows, columns=list(COLUMNS)), manifest


def write_decode_gemm(out: str | Path, table: pd.DataFrame, manifest: dict[str, Any]) -> Path:
    """``decode_gemm.csv`` and ``manifest.json`` (with the table's sha256) into folder `out`, together."""
    return write_manifest_folder(out, TABLE_FILE, table, manifest)


def read_decode_gemm(folder: str | Path = COMMITTED) -> pd.DataFrame:
    """The table of a benchmark folder, checked against its manifest's sha256; DataError naming what is wrong."""
    df = read_manifest_table(folder, TABLE_FILE, COLUMNS, "slim bench gemm")
    path = Path(folder) / TABLE_FILE
    bad = df[~((df["best_s"] > 0) & (df["flops"] > 0))]
    if len(bad):
        raise DataError(f"{path}: row {int(bad.index[0]) + 2}: best_s and flops must be > 0")
    return df


def decode_gemm_flops(table: pd.DataFrame) -> float:
    """FLOP/s of the decode GEMMs: median over models of ``flops / best_s`` at the largest token count."""
    top = table[table["tokens"] == table["tokens"].max()]
    return float((top["flops"] / top["best_s"]).median())


def decode_gemm_curve(table: pd.DataFrame) -> tuple[tuple[int, float], ...]:
    """(tokens, seconds per weight) of the pass at each token count: median over models of ``best_s`` over the
    pass's weights (``flops / (2 tokens)``); DataError for fewer than two token counts (no slope to extend)."""
    per_weight = table["best_s"] / (table["flops"] / (2.0 * table["tokens"]))
    curve = per_weight.groupby(table["tokens"]).median().sort_index()
    if len(curve) < 2:
        raise DataError(
            f"decode-GEMM table: {len(curve)} token count(s); the curve needs at least two (slim bench gemm --tokens)"
        )
    return tuple((int(m), float(s)) for m, s in curve.items())
