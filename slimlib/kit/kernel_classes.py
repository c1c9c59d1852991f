"""Classify profiled kernels (GPU) or operators (CPU) by name, and sum them into time shares (paper Fig. 5).

Rules, tried in this order on the lower-cased name; the first that matches wins:

1. ``attention``: flash, fmha, sdpa, scaled_dot_product, attention, attn, softmax. Tried first because fused
   attention kernels also carry GEMM-library words (``fmha_cutlassF...``, ``cudnn..._sdpa_...``).
2. ``gemm``: gemm, gemv, nvjet (cuBLAS on Hopper), cutlass, xmma, cublas, splitkreduce, and the ATen ops
   ``aten::mm``, ``aten::addmm``, ``aten::bmm``, ``aten::matmul``, ``aten::linear``. A bare ``bmm`` counts as a
   dense GEMM: the harness computes attention only through ``scaled_dot_product_attention``, so a bmm outside it is
   a projection, not attention (should SDPA pick its math backend, its softmax still lands in attention).
3. ``norm_elementwise``: layer_norm/layernorm, rms_norm/rmsnorm, elementwise (PyTorch's vectorized, unrolled and
   index elementwise kernels, which also do the KV-cache writes), and the ATen ops add, mul, div, sub, silu, gelu,
   relu, pow, rsqrt, mean, sum, neg, exp, copy_, to/_to_copy, fill_.
4. ``other``: everything else (memcpy/memset, argmax and other reductions, embedding lookup, views).

`classify_kernel` and `kernel_breakdown` are pure: they take names and durations and use no profiler.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.schema import plain

CATEGORIES = ("attention", "gemm", "norm_elementwise", "other")

_ATEN_ELEMENTWISE = (
    r"add_?|mul_?|div_?|sub_?|silu_?|gelu_?|relu_?|pow|rsqrt|mean|sum|neg|exp|copy_|to|_to_copy|fill_"
)
PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("attention", re.compile(r"flash|fmha|sdpa|scaled_dot_product|attention|attn|softmax")),
    (
        "gemm",
        re.compile(
            r"gemm|gemv|nvjet|cutlass|xmma|cublas|splitkreduce|^aten::(mm|addmm|bmm|baddbmm|matmul|linear)$"
        ),
    ),
    (
        "norm_elementwise",
        re.compile(rf"layer_?norm|rms_?norm|elementwise|^aten::({_ATEN_ELEMENTWISE})$"),
    ),
)


def classify_kernel(name: str) -> str:
    """Category of one kernel/operator name: 'attention', 'gemm', 'norm_elementwise' or 'other'."""
    low = str(name).strip().lower()
    for category, pattern in PATTERNS:
        if pattern.search(low):
            return category
    return "other"


def kernel_breakdown(
    table: pd.DataFrame,
    name_col: str = "name",
    duration_col: str = "duration_us",
    by: list[str] | None = None,
) -> pd.DataFrame:
    """Time per category and its share of the total (within each `by` group): columns [*by, category,
    duration, share], every category present (zero if absent), categories in `CATEGORIES` order.
    """
    by = list(by or [])
    missing = [c for c in [name_col, duration_col, *by] if c not in table.columns]
    if missing:
        raise DataError(
            f"kernel table lacks column(s) {', '.join(missing)}; it needs {name_col!r}, {duration_col!r}"
        )
    dur = pd.to_numeric(table[duration_col], errors="coerce")
    bad = dur.isna() | (dur < 0) | ~np.isfinite(dur)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(
            f"kernel table row {row}: {duration_col}={plain(table[duration_col].iloc[row])} is not a duration >= 0"
        )
    work = table[by].copy() if by else pd.DataFrame(index=table.index)
    work["category"] = table[name_col].map(classify_kernel)
    work["duration"] = dur.to_numpy(dtype=float)
    groups = [()] if not by else list(work[by].drop_duplicates().itertuples(index=False, name=None))
    out = []
    for key in groups:
        sel = work if not by else work[(work[by] == pd.Series(key, index=by)).all(axis=1)]
        sums = sel.groupby("category")["duration"].sum()
        total = float(sums.sum())
        for cat in CATEGORIES:
            d = float(sums.get(cat, 0.0))
            out.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "category": cat,
                    "duration": d,
                    "share": d / total if total > 0 else float("nan"),
                }
            )
    return pd.DataFrame(out, columns=[*by, "category", "duration", "share"])
