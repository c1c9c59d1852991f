"""Per-row inputs of every estimator: architecture features from the registry and the GPU of a table.

Optional precision columns, named as vLLM's options (`slimlib.registry.precision`): ``dtype`` (``--dtype``),
``quantization`` (``--quantization``, weights) and ``kv_cache_dtype`` (``--kv-cache-dtype``). They set the weight
bytes, Eq. 11's ``b_kv`` (``kv_bytes``, ``kv_bytes_per_token``) and Eq. 7's ``F_max`` (`prefill_peak_flops`);
absent or empty, a row is served as today: the config's dtype (2 bytes) and the fp16/bf16 peak.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from slimlib.errors import DataError, UnknownNameError
from slimlib.model.memory import (
    kv_bytes_per_token,
    tensor_parallel_refusal,
    weight_bytes,
)
from slimlib.model.parallel import split_features, tensor_parallel_column
from slimlib.registry.architectures import Architecture, get_architecture
from slimlib.registry.gpus import GPU, get_gpu
from slimlib.registry.precision import (
    compute_peak,
    dtype_bytes,
    kv_bytes_per_element,
    weight_bytes_per_element,
    weight_precision,
)
from slimlib.schema import PRECISION_COLUMNS, row_label

FloatArray = npt.NDArray[np.float64]
Features = dict[str, FloatArray]

#: per-row features (see `slimlib.registry.architectures.Architecture`); for a mixture of experts ``ffn_size`` is
#: the FFN width a token passes through (its ``experts_per_token`` experts), and ``expert_weight_bytes`` the bytes of
#: all experts (``dense_weight_bytes`` the rest)
FEATURE_NAMES = (
    "n_layers",
    "hidden_size",
    "d_kv",
    "ffn_size",
    "n_ffn_matrices",
    "kv_bytes",
    "kv_bytes_per_token",
    "weight_bytes_total",
    "n_heads",
    "n_kv_heads",
    "n_experts",
    "experts_per_token",
    "dense_weight_bytes",
    "expert_weight_bytes",
    "weight_precision",
)
_PRECISION_CODE = {"none": 0.0, "fp8": 1.0, "fp4": 2.0}
_CODE_PRECISION = {v: k for k, v in _PRECISION_CODE.items()}


def _arch_row(
    a: Architecture, dtype: str = "", quantization: str = "", kv_cache_dtype: str = ""
) -> list[float]:
    serve = dtype_bytes(dtype, a.weight_bytes)
    quant = weight_bytes_per_element(quantization, serve)
    expert_bytes = (
        a.n_experts * a.n_ffn_matrices * a.hidden_size * a.ffn_size * a.n_layers * quant if a.is_moe else 0
    )
    kv_elem = kv_bytes_per_element(kv_cache_dtype, dtype_bytes(dtype, a.kv_bytes))
    total = weight_bytes(a, dtype, quantization)
    values = {
        "n_layers": a.n_layers,
        "hidden_size": a.hidden_size,
        "d_kv": a.d_kv,
        "ffn_size": a.ffn_size_active,
        "n_ffn_matrices": a.n_ffn_matrices,
        "kv_bytes": kv_elem,
        "kv_bytes_per_token": kv_bytes_per_token(a, dtype, kv_cache_dtype),
        "weight_bytes_total": total,
        "n_heads": a.n_heads,
        "n_kv_heads": a.n_kv_heads,
        "n_experts": a.n_experts,
        "experts_per_token": a.experts_per_token,
        "dense_weight_bytes": total - expert_bytes,
        "expert_weight_bytes": expert_bytes,
        "weight_precision": _PRECISION_CODE[weight_precision(quantization)],
    }
    return [float(values[f]) for f in FEATURE_NAMES]


@lru_cache(maxsize=512)
def _arch(name: str) -> Architecture:
    return get_architecture(name)


def _precision_cells(df: pd.DataFrame, col: str) -> list[str]:
    """Column `col` as stripped lower-case strings ('' where absent or empty)."""
    if col not in df.columns:
        return [""] * len(df)
    return [_cell(v) for v in df[col]]


def precision_columns(df: pd.DataFrame) -> dict[str, list[str]]:
    """The precision columns `df` has (`PRECISION_COLUMNS`), as strings: pass them on when rebuilding a table."""
    return {c: _precision_cells(df, c) for c in PRECISION_COLUMNS if c in df.columns}


def _distinct_rows(
    df: pd.DataFrame,
) -> tuple[npt.NDArray[np.intp], list[tuple[str, ...]], npt.NDArray[np.intp]]:
    """The distinct (model, *precision cells) of `df` in the order they first appear, each row's index into them,
    and each one's first row. Each column is factorized on its own (a million rows hold a handful of values);
    precision cells as `_precision_cells`."""
    key = np.zeros(len(df), dtype=np.int64)
    coded: dict[str, tuple[npt.NDArray[np.intp], list[str]]] = {}
    for col in ["model", *(c for c in PRECISION_COLUMNS if c in df.columns)]:
        raw, values = pd.factorize(df[col], use_na_sentinel=True)
        cells = [str(v) if col == "model" else _cell(v) for v in values] + [""]  # code -1 (missing): the last
        norm, distinct = pd.factorize(np.array(cells, dtype=object))
        coded[col] = (norm[raw], [str(v) for v in distinct])
        key = key * len(distinct) + coded[col][0]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # by first appearance: an error names the first bad row
    rank = np.empty(len(order), dtype=np.intp)
    rank[order] = np.arange(len(order))
    found = [{col: names[codes[row]] for col, (codes, names) in coded.items()} for row in first[order]]
    rows = [(cells["model"], *(cells.get(c, "") for c in PRECISION_COLUMNS)) for cells in found]
    return rank[inverse.ravel()], rows, first[order]


def _cell(v: Any) -> str:
    return "" if pd.isna(v) else str(v).strip().lower()


def model_features(df: pd.DataFrame) -> Features:
    """Architecture features per row of `df` (column ``model``, looked up once per distinct model and precision)
    plus ``batch_size``, ``input_len`` and ``output_len`` as float arrays, per GPU of the row's ``tensor_parallel``
    degree (column optional, default 1: `slimlib.model.parallel.split_features`; with 1 the features are the model's
    own). Optional precision columns (`PRECISION_COLUMNS`) set the weight and KV bytes (module docstring)."""
    codes, uniques, first_rows = _distinct_rows(df)
    table = np.empty((len(uniques), len(FEATURE_NAMES)))
    for i, (name, dtype, quant, kvd) in enumerate(uniques):
        try:
            a = _arch(name)
            table[i] = _arch_row(a, dtype, quant, kvd)
        except (UnknownNameError, DataError) as exc:
            pos = int(first_rows[i])
            raise type(exc)(f"{row_label(df, pos)}: {exc}") from None
    feats: Features = {f: table[codes, j] for j, f in enumerate(FEATURE_NAMES)}
    for col in ("batch_size", "input_len", "output_len"):
        feats[col] = df[col].to_numpy(dtype=float)
    tp = tensor_parallel_column(df)
    _check_tensor_parallel(df, feats, tp)
    out = split_features(feats, tp)
    for k in ("dense_weight_bytes", "expert_weight_bytes"):
        out[k] = feats[k] / tp
    return out


def _check_tensor_parallel(df: pd.DataFrame, feats: Features, tp: FloatArray) -> None:
    """DataError naming the first row whose model vLLM cannot split over its ``tensor_parallel`` GPUs (the heads
    rule of `tensor_parallel_refusal`; the one-node limit is `slimlib.model.validity`'s)."""
    if not np.any(tp > 1):
        return
    heads, kv_heads = feats["n_heads"], feats["n_kv_heads"]
    bad = np.zeros(len(tp), dtype=bool)
    for h, kv, p in {(int(h), int(kv), float(p)) for h, kv, p in zip(heads, kv_heads, tp, strict=True)}:
        if tensor_parallel_refusal("", h, kv, p, within_node=False):
            bad |= (heads == h) & (kv_heads == kv) & (tp == p)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])  # the first bad row
        name = str(df["model"].iloc[i])
        why = tensor_parallel_refusal(name, int(heads[i]), int(kv_heads[i]), float(tp[i]), within_node=False)
        raise DataError(f"{row_label(df, i)}: {why}")


def prefill_peak_flops(f: Features, hw: GPU) -> FloatArray:
    """Eq. 7's ``F_max`` per row: `hw`'s tensor peak at the row's weight precision (feature ``weight_precision``;
    `slimlib.registry.precision.compute_peak`), the fp16/bf16 peak without it."""
    code = f.get("weight_precision")
    if code is None:
        return np.asarray(hw.peak_flops, dtype=float)
    peaks = {c: compute_peak(hw, p) for c, p in _CODE_PRECISION.items()}
    out = np.full(np.shape(code), float(hw.peak_flops))
    for c, peak in peaks.items():
        out = np.where(np.asarray(code) == c, peak, out)
    return out


def resolve_gpu(df: pd.DataFrame, gpu: str | None, *, fitting: bool = False) -> GPU:
    """The one GPU of a table (or the given one); a table spanning several GPUs is an error, and so are rows of
    another GPU than the given one (worded for a fit when `fitting`, else for parameters being used)."""
    names = sorted(set(df["gpu"].astype(str))) if "gpu" in df.columns else []
    if gpu is None:
        if not names:
            raise DataError("no 'gpu' column and no GPU given; add the column or pass the GPU name")
        canon = sorted({get_gpu(n).name for n in names})
        if len(canon) > 1:
            raise DataError(
                f"the table spans several GPUs ({', '.join(canon)}); SLIM parameters belong to one GPU: "
                "fit each GPU's rows separately"
            )
        return get_gpu(canon[0])
    hw = get_gpu(gpu)
    other = sorted({get_gpu(n).name for n in names} - {hw.name})
    if other and fitting:
        raise DataError(
            f"rows for GPU(s) {', '.join(other)} but the fit was asked for {hw.name}; fit each GPU's own rows "
            "(leave out the GPU name to take the table's)"
        )
    if other:
        raise DataError(
            f"rows for GPU(s) {', '.join(other)} but the parameters are for {hw.name}; "
            "use parameters calibrated on that GPU, or fit a new set"
        )
    return hw
