"""MiniMax-M3's block-sparse attention decode term against vLLM's measured MSA module (`data/aic-msa.csv`, notebook
09, beyond the paper).

The model prices a MiniMax-M3 sparse layer's decode step per sequence as traffic (`slimlib.model.serving`, the
block-sparse cache; read by `slimlib.model.terms.recommended.DECODE_ATTENTION`): the GQA keys and values of at most
``index_topk`` selected tokens (16 blocks of 128, the local block among them; ``2 H_kv d_h b_kv`` bytes each) and
the indexer's one 128-wide bf16 key of every cached token (`block_sparse_index_key_bytes`), at the device's
decode-attention bandwidth efficiency (`slimlib.experiments.kernel_timing.linear_check.device_efficiency`). The
measured module also holds the projections, the index queries' scoring and the block selection. As in the DSA check
(`sparse_check`), the module's time at the smallest context is its base and the term's time of the bytes beyond it
is set against the measured growth; nothing is fitted. Contexts of at least `MIN_CONTEXT` are scored; the growth up
to the selection's size (`fill_points`: the K/V read fills to ``index_topk`` tokens) is reported apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.errors import DataError
from slimlib.experiments.kernel_timing.sparse_check import context_growth, scored_points
from slimlib.experiments.outputs.uncertainty import N_BOOT, bootstrap_mean_ci
from slimlib.model.serving import block_sparse_index_key_bytes
from slimlib.registry.precision import kv_bytes_per_element

#: smallest cached context scored: the measured grid's first at twice the selection's 2,048 tokens less one (its
#: contexts are 2^k - 1, the collector's cached tokens)
MIN_CONTEXT = 4095
_KEYS = ["gpu", "kv_cache_dtype", "batch_size"]


def msa_layer_bytes(row: pd.Series | dict, context: np.ndarray) -> np.ndarray:
    """Bytes one sequence's decode step reads in one sparse layer at each `context`, from the row's head shapes and
    KV dtype (module docstring): the selected tokens' K/V and every cached token's index key."""
    kv_dtype = str(row["kv_cache_dtype"])
    b_kv = kv_bytes_per_element(
        "auto" if kv_dtype == "bfloat16" else kv_dtype, 2.0
    )  # auto: the bf16 checkpoint's
    kv = 2.0 * int(row["kv_heads"]) * int(row["head_dim"]) * b_kv
    c = np.asarray(context, dtype=float)
    index_key = float(block_sparse_index_key_bytes(int(row["index_head_dim"])))
    return kv * np.minimum(c, int(row["index_topk"])) + index_key * c


def msa_points(table: pd.DataFrame | None = None, *, min_context: int = MIN_CONTEXT) -> pd.DataFrame:
    """One row per measured decode module time: the bytes the term reads beyond the smallest context of its (GPU, KV
    dtype, batch), the term's time of them added to that context's measured time (``modelled_ms``), the measured
    and modelled growth, their ratio and the error; role 'base' at the smallest context, 'score' at contexts >=
    `min_context`, else 'short'."""
    df = load("aic-msa") if table is None else table
    df = df[df["phase"] == "generation"]
    if len(df) == 0:
        raise DataError("aic-msa: no generation rows")
    parts = []
    for (gpu, _, batch), g in df.groupby(_KEYS, sort=True):
        g = g.sort_values("context", kind="mergesort")
        c = g["context"].to_numpy(dtype=float)
        parts.append(context_growth(g, float(batch) * msa_layer_bytes(g.iloc[0], c), str(gpu), min_context))
    return scored_points(parts)


def fill_points(points: pd.DataFrame) -> pd.DataFrame:
    """Per (GPU, KV dtype, batch), the row at the largest context within the selection (``index_topk``): the
    growth from the base over which the selected K/V read fills up."""
    inside = points[points["context"] <= points["index_topk"]]
    return inside.sort_values("context", kind="mergesort").groupby(_KEYS, sort=True).tail(1)


def msa_check(points: pd.DataFrame, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per (GPU, KV dtype), per GPU (both dtypes) and overall, over the scored rows: rows, the module time's MAPE with its bootstrap 95%
    interval, the median modelled/measured module time, the median (10th-90th percentile) modelled/measured growth
    beyond the base over the rows whose growth is at least a tenth of the base, and the same median at the
    selection's fill (`fill_points`)."""
    scored = points[points["role"] == "score"]
    base = points[points["role"] == "base"].set_index(_KEYS)["latency_ms"]
    fill = fill_points(points)
    fill = fill[
        fill["measured_growth_ms"].to_numpy()
        >= 0.1 * base.reindex(pd.MultiIndex.from_frame(fill[_KEYS])).to_numpy()
    ]
    rows = []
    per_gpu = [((gpu, "all"), g) for gpu, g in scored.groupby("gpu", sort=True)]
    for key, g in [*scored.groupby(["gpu", "kv_cache_dtype"], sort=True), *per_gpu, (("all", "all"), scored)]:
        gpu, kv = key
        mean, lo, hi = bootstrap_mean_ci(g["ape_pct"].to_numpy(), n_boot=n_boot, label=f"msa {gpu} {kv}")
        b0 = base.reindex(pd.MultiIndex.from_frame(g[_KEYS])).to_numpy()
        grown = g[g["measured_growth_ms"].to_numpy() >= 0.1 * b0]
        f = fill[((fill["gpu"] == gpu) | (gpu == "all")) & ((fill["kv_cache_dtype"] == kv) | (kv == "all"))]
        rows.append({"gpu": gpu, "kv_cache_dtype": kv, "n_scored": len(g), "mape_pct": mean, "mape_lo_pct": lo,
                     "mape_hi_pct": hi, "time_ratio_median": (g["modelled_ms"] / g["latency_ms"]).median(),
                     "n_grown": len(grown), "growth_ratio_median": grown["growth_ratio"].median(),
                     "growth_ratio_p10": grown["growth_ratio"].quantile(0.1),
                     "growth_ratio_p90": grown["growth_ratio"].quantile(0.9),
                     "n_fill": len(f), "fill_ratio_median": f["growth_ratio"].median()})  # fmt: skip
    return pd.DataFrame(rows)


def plot_msa_check(ax, points: pd.DataFrame, gpu: str, batches: list[int], colors: list[str]) -> None:
    """One GPU's panel: the measured module time (markers: bf16 KV circles, fp8 crosses) and the base plus the term's
    growth (lines: bf16 solid, fp8 dashed) against the cached context, one colour per batch of `batches`; the
    selection's size dotted."""
    g = points[points["gpu"] == gpu]
    if g.empty:
        raise DataError(f"aic-msa: no decode points for {gpu}")
    for batch, color in zip(batches, colors, strict=True):
        for kv, marker, ls in (("bfloat16", "o", "-"), ("fp8", "x", "--")):
            c = g[(g["batch_size"] == batch) & (g["kv_cache_dtype"] == kv)].sort_values("context")
            if c.empty:
                raise DataError(f"aic-msa: no decode points for {gpu} batch {batch} KV {kv}")
            ax.plot(c["context"], c["latency_ms"], ls="none", marker=marker, markersize=2.5, color=color,
                    label=f"B={batch} {'bf16' if kv == 'bfloat16' else kv} KV")  # fmt: skip
            ax.plot(c["context"], c["modelled_ms"], ls=ls, linewidth=0.8, color=color)
    ax.axvline(float(g["index_topk"].iloc[0]), color="0.5", linewidth=0.5, linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")


#: smallest batch whose fill growth `fp8_fill_ratios` compares (below, the growth is within the module's noise)
FILL_MIN_BATCH = 16


def fp8_fill_ratios(points: pd.DataFrame, *, min_batch: int = FILL_MIN_BATCH) -> pd.Series:
    """Per GPU, the median over batches of at least `min_batch` of the measured fp8-KV module's growth up to the
    selection's fill (`fill_points`) over the bf16-KV module's at the same batch: the term's is about 0.56 (the
    selected K/V halved, the bf16 index keys not)."""
    f = fill_points(points)
    f = f[f["batch_size"] >= min_batch]
    m = f.pivot_table(index=["gpu", "batch_size"], columns="kv_cache_dtype", values="measured_growth_ms")
    if not {"bfloat16", "fp8"} <= set(m.columns):
        raise DataError("aic-msa: the fill needs decode rows of both KV dtypes")
    return (m["fp8"] / m["bfloat16"]).groupby(level="gpu", sort=True).median()
