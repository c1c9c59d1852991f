"""The sparse-attention decode term against vLLM's measured DeepSeek sparse attention module (`data/aic-dsa.csv`,
notebook 09, beyond the paper).

The model prices a sparse-attention decode step as traffic (`slimlib.model.terms.recommended`,
`DECODE_ATTENTION`): per sequence and layer the latent of at most ``k`` selected tokens (``index_topk``, from the
registry's architecture of the model) and the indexer's key of every cached token, at the device's
decode-attention bandwidth efficiency (`slimlib.experiments.kernel_timing.linear_check.device_efficiency`). The
measured module also holds the projections, which do not grow with the context: as in the MLA check, the module's
time at the smallest measured context is its base, and the term's time of the bytes beyond that context is set
against the measured growth. Nothing is fitted; contexts of at least `MIN_CONTEXT` are scored, and the growth below
and above the selection's size is reported apart (the latent read stops growing at ``k``, the indexer's does not).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.errors import DataError
from slimlib.experiments.kernel_timing.linear_check import device_efficiency
from slimlib.experiments.outputs.uncertainty import N_BOOT, ape, bootstrap_mean_ci
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu

#: smallest cached context scored (shorter contexts move the module time by a few percent only)
MIN_CONTEXT = 4096


def _layer_bytes(model: str, kv_cache_dtype: str, gpu: str) -> tuple[float, float, int]:
    """(latent bytes per selected token, indexer key bytes per cached token, k) of one layer on one `gpu`, from the
    model's serving configuration at the row's KV dtype (the fp8 latent's layout depends on the GPU)."""
    a = get_architecture(model)
    if not a.is_sparse:
        raise DataError(f"aic-dsa: model {model!r} has no sparse attention in the registry")
    s = serving_config(a, gpu, kv_cache_dtype="auto" if kv_cache_dtype == "bfloat16" else kv_cache_dtype)
    latent = s.kv_bytes_selected / a.n_layers
    return latent, (s.kv_bytes_full - s.kv_bytes_selected) / a.n_indexer_layers, a.index_topk


def dsa_points(dsa: pd.DataFrame | None = None, *, min_context: int = MIN_CONTEXT) -> pd.DataFrame:
    """One row per measured module time: the bytes the term reads beyond the smallest context of its (GPU, model,
    KV dtype, batch), the term's time of them over the device's efficiency x peak bandwidth added to that context's
    measured time (``modelled_ms``), the measured and modelled growth, their ratio and the error; role 'score' at
    contexts >= `min_context`, 'base' at the smallest, else 'short'."""
    df = load("aic-dsa") if dsa is None else dsa
    if len(df) == 0:
        raise DataError("aic-dsa: no rows")
    parts = []
    keys = ["gpu", "model", "kv_cache_dtype", "batch_size"]
    for (gpu, model, kv, _), g in df.groupby(keys, sort=True):
        latent, key, k = _layer_bytes(str(model), str(kv), str(gpu))
        g = g.sort_values("context", kind="mergesort")
        c = g["context"].to_numpy(dtype=float)
        b = g["batch_size"].to_numpy(dtype=float)
        nbytes = b * (latent * np.minimum(c, k) + key * c)
        parts.append(context_growth(g, nbytes, str(gpu), min_context, topk=k))
    return scored_points(parts)


def context_growth(
    g: pd.DataFrame, nbytes: np.ndarray, gpu: str, min_context: int, **extra: object
) -> pd.DataFrame:
    """One measured curve `g` (sorted by context) with `extra` columns and the term's growth: the bytes `nbytes` its
    decode step reads beyond the smallest context, over `gpu`'s decode-attention bandwidth, added to that context's
    measured time (``modelled_ms``); the measured growth; role 'base' at the smallest context, 'score' from
    `min_context`, else 'short'."""
    c = g["context"].to_numpy(dtype=float)
    eff = device_efficiency(gpu)
    grown_ms = 1e3 * (nbytes - nbytes[0]) / (eff * get_gpu(gpu).mem_bw)
    base = float(g["latency_ms"].iloc[0])
    return g.assign(efficiency=eff, **extra, modelled_growth_ms=grown_ms, measured_growth_ms=g["latency_ms"] - base,
                    modelled_ms=base + grown_ms,
                    role=np.where(c == c[0], "base", np.where(c >= min_context, "score", "short")))  # fmt: skip


def scored_points(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """`parts` (per curve: measured ``latency_ms``, ``modelled_ms`` and both growths beyond the base) as one table
    with each row's error ``ape_pct`` and modelled/measured ``growth_ratio``."""
    pts = pd.concat(parts, ignore_index=True)
    pts["ape_pct"] = ape(pts["latency_ms"], pts["modelled_ms"])
    with np.errstate(divide="ignore", invalid="ignore"):
        pts["growth_ratio"] = pts["modelled_growth_ms"] / pts["measured_growth_ms"]
    return pts


def dsa_check(points: pd.DataFrame, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per (GPU, KV dtype) and overall (both models together), over the scored rows: rows, the module time's MAPE with its bootstrap 95%
    interval, and the median modelled/measured growth beyond the smallest context, for the rows whose growth is
    at least a tenth of the base time (below, the measured growth is mostly noise)."""
    scored = points[points["role"] == "score"]
    base = points[points["role"] == "base"].set_index(["gpu", "model", "kv_cache_dtype", "batch_size"])[
        "latency_ms"
    ]
    rows = []
    groups = [*scored.groupby(["gpu", "kv_cache_dtype"], sort=True), (("all", "all"), scored)]
    for (gpu, kv), g in groups:
        mean, lo, hi = bootstrap_mean_ci(g["ape_pct"].to_numpy(), n_boot=n_boot, label=f"dsa {gpu} {kv}")
        b0 = base.reindex(
            pd.MultiIndex.from_frame(g[["gpu", "model", "kv_cache_dtype", "batch_size"]])
        ).to_numpy()
        grown = g[g["measured_growth_ms"].to_numpy() >= 0.1 * b0]
        rows.append({"gpu": gpu, "kv_cache_dtype": kv, "n_scored": len(g), "mape_pct": mean, "mape_lo_pct": lo,
                     "mape_hi_pct": hi, "n_grown": len(grown), "growth_ratio_median": grown["growth_ratio"].median(),
                     "growth_ratio_p10": grown["growth_ratio"].quantile(0.1),
                     "growth_ratio_p90": grown["growth_ratio"].quantile(0.9)})  # fmt: skip
    return pd.DataFrame(rows)
