"""DeepSeek-V4's compressed-attention decode terms against vLLM's measured CSA and HCA modules (`data/aic-dsv4.csv`,
beyond the paper).

The model prices one layer's decode step per sequence as traffic (`slimlib.model.serving.compressed_cache`, read by
`slimlib.model.terms.recommended.DECODE_ATTENTION`): every layer's window of ``W`` 584-byte entries; a CSA layer
also at most ``index_topk`` of its 4:1 compressed entries and the indexer's 132-byte key of every one; an HCA layer
every 128:1 entry; at the device's decode-attention bandwidth efficiency
(`slimlib.experiments.kernel_timing.linear_check.device_efficiency`). The measured module also holds the
projections, the compressors and a CSA layer's indexer scoring and top-k selection. As in the DSA check
(`sparse_check`), the module's time at a base context is its base and the term's time of the bytes beyond it is set
against the measured growth; nothing is fitted. The base is the smallest context of at least `BASE_CONTEXT`: below
the window the module runs the window alone, a different path. Contexts of at least `MIN_CONTEXT` are scored.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.errors import DataError
from slimlib.experiments.kernel_timing.sparse_check import context_growth, scored_points
from slimlib.experiments.outputs.uncertainty import N_BOOT, bootstrap_mean_ci
from slimlib.model.serving import V4_ENTRY_BYTES, indexer_key_bytes, serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.param_count import CSA_RATIO, HCA_RATIO

#: the measured modules' models (AIConfigurator's ids) -> the registry's architecture of their shapes
MODELS = {
    "sgl-project/DeepSeek-V4-Flash-FP8": "deepseek-v4-flash",
    "sgl-project/DeepSeek-V4-Pro-FP8": "deepseek-v4-pro",
    "deepseek-ai/DeepSeek-V4-Pro": "deepseek-v4-pro",
}
#: smallest context of a base (past the 128-token window) and smallest context scored
BASE_CONTEXT = 1024
MIN_CONTEXT = 4096
_KEYS = ["gpu", "model", "compress_ratio", "batch_size"]


def layer_bytes(model: str, ratio: int, gpu: str, context: np.ndarray) -> np.ndarray:
    """Bytes one sequence's decode step reads in one layer of compression `ratio` at each `context`, from the model's
    serving configuration on `gpu` (module docstring)."""
    if model not in MODELS:
        raise DataError(f"aic-dsv4: model {model!r} is not one of {', '.join(MODELS)}")
    a = get_architecture(MODELS[model])
    s = serving_config(a, gpu)
    c = np.asarray(context, dtype=float)
    window = float(V4_ENTRY_BYTES) * np.minimum(c, s.sliding_window)
    if ratio == CSA_RATIO:
        selected = float(V4_ENTRY_BYTES) / CSA_RATIO * np.minimum(c, s.sparse_topk)
        return window + selected + indexer_key_bytes(a.index_head_dim) / CSA_RATIO * c
    if ratio == HCA_RATIO:
        return window + float(V4_ENTRY_BYTES) / HCA_RATIO * c
    raise DataError(f"aic-dsv4: compress_ratio {ratio} is not {CSA_RATIO} or {HCA_RATIO}")


def compressed_points(
    table: pd.DataFrame | None = None, *, base_context: int = BASE_CONTEXT, min_context: int = MIN_CONTEXT
) -> pd.DataFrame:
    """One row per measured module time from `base_context` on: the bytes the term reads beyond the base context of
    its (GPU, model, ratio, batch), the term's time of them added to the base's measured time (``modelled_ms``), the
    measured and modelled growth, their ratio and the error; role 'base', 'score' (contexts >= `min_context`) or
    'short'."""
    df = load("aic-dsv4") if table is None else table
    df = df[df["context"] >= base_context]
    if len(df) == 0:
        raise DataError(f"aic-dsv4: no rows at contexts of {base_context} tokens or more")
    parts = []
    for (gpu, model, ratio, batch), g in df.groupby(_KEYS, sort=True):
        g = g.sort_values("context", kind="mergesort")
        c = g["context"].to_numpy(dtype=float)
        parts.append(
            context_growth(
                g, float(batch) * layer_bytes(str(model), int(ratio), str(gpu), c), str(gpu), min_context
            )
        )
    return scored_points(parts)


def compressed_check(points: pd.DataFrame, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per (GPU, module: CSA or HCA) and overall, over the scored rows: rows, the module time's MAPE with its
    bootstrap 95% interval, the median modelled/measured module time, and the median (10th-90th percentile)
    modelled/measured growth beyond the base over the rows whose growth is at least a tenth of the base time."""
    scored = points[points["role"] == "score"].assign(
        module=lambda d: np.where(d["compress_ratio"] == CSA_RATIO, "csa", "hca")
    )
    base = points[points["role"] == "base"].set_index(_KEYS)["latency_ms"]
    rows = []
    for (gpu, module), g in [*scored.groupby(["gpu", "module"], sort=True), (("all", "all"), scored)]:
        mean, lo, hi = bootstrap_mean_ci(g["ape_pct"].to_numpy(), n_boot=n_boot, label=f"dsv4 {gpu} {module}")
        b0 = base.reindex(pd.MultiIndex.from_frame(g[_KEYS])).to_numpy()
        grown = g[g["measured_growth_ms"].to_numpy() >= 0.1 * b0]
        rows.append({"gpu": gpu, "module": module, "n_scored": len(g), "mape_pct": mean, "mape_lo_pct": lo,
                     "mape_hi_pct": hi, "time_ratio_median": (g["modelled_ms"] / g["latency_ms"]).median(),
                     "n_grown": len(grown), "growth_ratio_median": grown["growth_ratio"].median(),
                     "growth_ratio_p10": grown["growth_ratio"].quantile(0.1),
                     "growth_ratio_p90": grown["growth_ratio"].quantile(0.9)})  # fmt: skip
    return pd.DataFrame(rows)
