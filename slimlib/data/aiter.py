"""Parser of AMD's measured GEMM and fused-MoE kernel times from ROCm aiter's tuned tables (raw folder `aiter/`,
see its PROVENANCE.md). `build_aiter_tables` writes:

- ``aiter-gemm``: the best kernel time aiter's tuner found per GEMM shape ``C[M, N] = A[M, K] B[N, K]^T`` on one GPU
  (bf16; fp8 with per-token scales; fp8 with 128-wide block scales; MXFP4), in the columns of ``aic-gemm``;
- ``aiter-moe``: the same for one fused-MoE layer on one GPU (both stages, uniform routing);
- ``aiter-gdn``: the Gated DeltaNet recurrent decode kernel (``ops/flydsl/gdr_decode_tuned.csv``: one token per
  sequence, bf16 activations, a bf16 or fp32 state) by batch and head shape, on gfx950 only (its gfx942 rows carry
  no CU count: an MI300X-class part or an MI308X);
- ``aiter-exclusions``: every data row of those files that is not in the three tables, with the reason.

A row is kept when it is a timing (not a placeholder: ``us`` finite and positive, not 1.0 with ``tflops`` 0), its
time is not copied across shapes (the same time and kernel written for two or more shapes of one table family on
one GPU: measured for at most one of them), it does not exceed the GPU's dense peak for its precision (for GEMMs
the whole (file, GPU) block is dropped when one row does: its GPU label is then suspect), its GPU has a registry
entry (gfx942 with 304 CUs: ``mi300x``, the MI325X's die and clock too; gfx950 with 256 CUs: ``mi355x``, or an
MI350X at 8% lower clock) and its precision is one the model prices. Of the rows of one shape the lowest time is
kept, as aiter's runtime merge does. The tables' own ``tflops`` column is not used (10x off in places).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.data.markdown import count_table
from slimlib.errors import DataError
from slimlib.registry.gpus import get_gpu
from slimlib.registry.precision import kernel_peak
from slimlib.schema import plain

AITER_NAME = "aiter"
SOURCE = (
    "ROCm/aiter",
    "e4048607a535ace3a2b51ded31b1c8c2d45c0879",
    "MIT",
    "AMD ROCm aiter: tuned GEMM and fused-MoE kernel times on AMD Instinct GPUs (MI300X/MI325X, MI355X)",
)
#: (gfx, CUs) -> registry GPU the rows are checked against
DEVICES = {("gfx942", 304): "mi300x", ("gfx950", 256): "mi355x"}
#: CUs -> gfx of files without a ``gfx`` column (aiter's own ``chip_info.py`` rule)
LEGACY_GFX = {256: "gfx950", 80: "gfx942", 304: "gfx942"}
#: GEMM table family, by file name (first match), -> the kernel dtype (``aic-gemm``'s ``gemm_dtype``); None: not kept
GEMM_FAMILIES: tuple[tuple[str, str, str | None], ...] = (
    ("batched", r"batched", None),
    ("asm", r"^asm_", None),
    ("a8w8_blockscale", r"a8w8_blockscale_(bpreshuffle_)?tuned_gemm", "fp8_block"),
    ("a8w8", r"a8w8_(bpreshuffle_)?tuned_gemm", "fp8"),
    ("a4w4_blockscale", r"a4w4_blockscale_tuned_gemm", "mxfp4"),
    ("bf16", r"bf16_tuned_gemm", "bfloat16"),
)
#: fused-MoE (activation, weight, scaling) -> kernel dtype; other combinations are not kept
MOE_DTYPES = {
    ("bfloat16", "bfloat16", "No"): "bfloat16",
    ("float8", "float8", "per_Token"): "fp8",
    ("float8", "float8", "per_Tensor"): "fp8",
    ("float8", "float8", "per_1x128"): "fp8_block",
    ("float8", "float8", "per_1x32"): "mxfp8",
    ("float4", "float4", "per_1x32"): "mxfp4",
    ("float8", "float4", "per_1x32"): "w4a8_mxfp4_mxfp8",
    ("bfloat16", "float4", "per_1x32"): "w4a16_mxfp4",
}
#: why a row is in aiter-exclusions
REASONS = {
    "placeholder": "no timing (us not finite and positive, or 1.0 with tflops 0)",
    "repeated": "the same time and kernel written for several shapes of this table family on this GPU",
    "over_peak": "faster than the GPU's dense peak for its precision (for GEMMs: a row of its file and GPU is)",
    "device": "no registry GPU: MI308X (gfx942, 80 CUs) and gfx1250 have no published peaks",
    "precision": "an operation the model does not price (int8, int4 weights, batched or unlabelled GEMMs, a GEMM "
    "with a bias or an fp32 output)",
    "not_gated": "a non-gated expert FFN (the MoE term prices gate, up and down)",
    "no_cu_count": "a gfx942 row without a CU count: an MI300X-class GPU or an MI308X, which cannot be told apart",
    "superseded": "a faster row of the same shape on the same GPU is kept",
}

_S, _I, _F = "string", "Int64", "float64"
_SOURCE_DOCS = {
    "gpu": (
        _S,
        "GPU registry name (slimlib.registry.gpus): mi300x for gfx942 with 304 CUs, mi355x for gfx950",
    ),
    "gfx": (_S, "AMD ISA of the GPU the row was tuned on"),
    "cu_num": (_I, "compute units the tuner saw"),
    "file": (_S, "aiter file the row is from (path under aiter/)"),
    "row": (_I, "data row of that file, from 0"),
}
TABLE_DOCS = {
    "aiter-gemm": (
        "AMD ROCm aiter: the fastest tuned kernel time per GEMM shape on one AMD Instinct GPU (MI300X-class, "
        "MI355X-class), bf16, fp8 and MXFP4, clean rows only (slimlib.data.aiter)."
    ),
    "aiter-moe": (
        "AMD ROCm aiter: the fastest tuned fused-MoE time per layer shape on one AMD Instinct GPU (both stages, "
        "uniform routing), clean rows only (slimlib.data.aiter)."
    ),
    "aiter-gdn": (
        "AMD ROCm aiter: the tuned Gated DeltaNet recurrent decode kernel (FlyDSL) per batch and head shape on one "
        "MI355X-class GPU, bf16 or fp32 state (slimlib.data.aiter)."
    ),
    "aiter-exclusions": (
        "AMD ROCm aiter: every GEMM, fused-MoE and Gated DeltaNet decode data row not in aiter-gemm, aiter-moe or "
        "aiter-gdn, with the reason (slimlib.data.aiter)."
    ),
}
COLUMN_DOCS: dict[str, dict[str, tuple[str, str]]] = {
    "aiter-gemm": {
        **_SOURCE_DOCS,
        "family": (_S, "aiter table family (bf16, a8w8, a8w8_blockscale, a4w4_blockscale)"),
        "gemm_dtype": (_S, "kernel dtype as the aic-* tables name it (bfloat16, fp8, fp8_block, mxfp4)"),
        "m": (_I, "tokens (rows of the activations)"),
        "n": (_I, "output features"),
        "k": (_I, "input features"),
        "libtype": (
            _S,
            "kernel library of the fastest kernel (asm, ck, cktile, flydsl, triton, torch, ...; empty where the file does not say)",
        ),
        "latency_ms": (_F, "GPU time per call, ms (aiter's us / 1000)"),
    },
    "aiter-moe": {
        **_SOURCE_DOCS,
        "moe_dtype": (_S, "kernel dtype as the aic-moe table names it"),
        "num_tokens": (_I, "tokens entering the layer on this GPU"),
        "hidden_size": (_I, "model hidden size"),
        "inter_size": (_I, "expert FFN width on this GPU"),
        "n_experts": (_I, "experts on this GPU (a fused shared expert counts as one)"),
        "top_k": (_I, "experts per token (a fused shared expert included)"),
        "run_1stage": (_I, "1: one kernel runs both stages"),
        "latency_ms": (_F, "GPU time per call of both stages, ms"),
    },
    "aiter-gdn": {
        **_SOURCE_DOCS,
        "state_dtype": (_S, "recurrent state's dtype (bfloat16 or float32)"),
        "batch_size": (_I, "sequences in the decode step (one token each)"),
        "key_heads": (_I, "linear-attention key heads on the GPU"),
        "value_heads": (_I, "value heads on the GPU (one recurrent state each)"),
        "key_head_dim": (_I, "key head width"),
        "value_head_dim": (_I, "value head width"),
        "latency_ms": (
            _F,
            "kernel time, ms (the file's duration / 1000: the file states no unit, microseconds are "
            "assumed, which put the state traffic at 3-6 TB/s, within the bandwidth)",
        ),
    },
    "aiter-exclusions": {
        "file": (_S, "aiter file (path under aiter/)"),
        "row": (_I, "data row of that file, from 0"),
        "gfx": (_S, "AMD ISA of the row's GPU"),
        "cu_num": (_I, "compute units of the row's GPU"),
        "reason": (
            _S,
            "why the row is not in aiter-gemm, aiter-moe or aiter-gdn: "
            + "; ".join(f"{k}: {v}" for k, v in REASONS.items()),
        ),
    },
}
_GEMM_COLUMNS = ["M", "N", "K", "us", "kernelName"]
_MOE_COLUMNS = ["token", "model_dim", "inter_dim", "expert", "topk", "q_dtype_a", "q_dtype_w", "q_type", "use_g1u1",
                "us1", "us2", "us", "run_1stage"]  # fmt: skip


def _csv(path: Path) -> pd.DataFrame:
    """`path` read as a CSV; DataError naming it where it is missing or not a table."""
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise DataError(f"{path}: missing; the aiter mirror is incomplete (see its PROVENANCE.md)") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable CSV ({str(exc).splitlines()[0][:80]})") from None


def _positive(df: pd.DataFrame, cols: list[str], path: Path) -> None:
    """Each of `cols` as numbers, every value finite and positive (DataError naming the row and column)."""
    for col in cols:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = ~(np.isfinite(values) & (values > 0))
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(f"{path}: row {i}: {col} {plain(df[col].iloc[i])} is not a positive number")
        df[col] = values


def _read(root: Path, path: Path, need: list[str], shape: tuple[str, ...] = ()) -> pd.DataFrame:
    df = _csv(path)
    df = df.rename(columns={c: c.upper() for c in ("b", "m", "n", "k") if c in df.columns})
    rel = path.relative_to(root).as_posix()
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise DataError(f"{path}: no column {missing}; expected aiter's tuned-table layout (PROVENANCE.md)")
    _positive(df, [c for c in shape if c in df.columns], path)
    if "us" in df.columns:
        text = df["us"].astype(str).str.strip().str.lower()
        unreadable = (
            pd.to_numeric(df["us"], errors="coerce").isna() & df["us"].notna() & ~text.isin(["inf", "nan"])
        )
        if unreadable.any():
            i = int(np.flatnonzero(unreadable.to_numpy())[0])
            raise DataError(f"{path}: row {i}: us {plain(df['us'].iloc[i])} is not a time in microseconds")
    if "gfx" not in df.columns and "cu_num" not in df.columns:
        if need:
            raise DataError(f"{path}: neither gfx nor cu_num; the row's GPU cannot be told")
        df["gfx"] = pd.NA
    if "cu_num" not in df.columns:
        df["cu_num"] = df["gfx"].map({"gfx950": 256})
    cu = pd.to_numeric(df["cu_num"], errors="coerce")
    if (cu.isna() & df["cu_num"].notna()).any():
        i = int(np.flatnonzero((cu.isna() & df["cu_num"].notna()).to_numpy())[0])
        raise DataError(
            f"{path}: row {i}: cu_num {plain(df['cu_num'].iloc[i])} is not a number of compute units"
        )
    df["cu_num"] = cu
    legacy = df["cu_num"].map(LEGACY_GFX)
    df["gfx"] = df["gfx"].fillna(legacy) if "gfx" in df.columns else legacy
    df["file"], df["row"] = rel, np.arange(len(df))
    df["us"] = pd.to_numeric(df["us"], errors="coerce") if "us" in df.columns else np.nan
    tfl = (
        pd.to_numeric(df["tflops"], errors="coerce")
        if "tflops" in df.columns
        else pd.Series(1.0, index=df.index)
    )
    df["reason"] = ""
    df.loc[~(np.isfinite(df["us"]) & (df["us"] > 0)) | ((df["us"] == 1.0) & (tfl == 0)), "reason"] = (
        "placeholder"
    )
    gpu = [
        DEVICES.get((g, int(c)) if pd.notna(c) else None)
        for g, c in zip(df["gfx"], df["cu_num"], strict=True)
    ]
    df["gpu"] = gpu
    df.loc[(df["reason"] == "") & df["gpu"].isna(), "reason"] = "device"
    return df


def _flag_repeated(df: pd.DataFrame, family: str, shape: list[str], times: list[str]) -> None:
    """Mark ``repeated`` the rows whose time columns repeat over several shapes of one family and GPU (counted
    over every row with a timing, as the mirror's sanity check does; rows already excluded keep their reason)."""
    timed = df["reason"] != "placeholder"
    keys = [family, "gfx", "cu_num", *times]
    shapes = df[timed].drop_duplicates([*keys, *shape]).groupby(keys, dropna=False).size()
    many = shapes[shapes > 1].index
    hit = pd.MultiIndex.from_frame(df[keys]).isin(many)
    df.loc[(df["reason"] == "") & hit, "reason"] = "repeated"


def _over_peak(flops: pd.Series, us: pd.Series, gpus: pd.Series, dtypes: pd.Series) -> np.ndarray:
    peaks = np.array([kernel_peak(get_gpu(g), d) for g, d in zip(gpus, dtypes, strict=True)])
    return np.asarray(flops / (us * 1e-6) > peaks)


def _keep_fastest(df: pd.DataFrame, keys: list[str]) -> None:
    ok = df.index[df["reason"] == ""]
    order = df.loc[ok].sort_values(["us", "file", "row"], kind="mergesort")
    slow = order.index[order.duplicated(keys)]
    df.loc[slow, "reason"] = "superseded"


def _gemm(root: Path) -> pd.DataFrame:
    parts = []
    for path in sorted((root / "configs").rglob("*.csv")):
        if "fmoe" in path.name or "gdn" in path.name or "untuned" in path.name:
            continue
        family, dtype = next(((f, d) for f, rx, d in GEMM_FAMILIES if re.search(rx, path.name)), (None, None))
        if family is None:
            raise DataError(
                f"{path}: a GEMM table of no known family; add it to slimlib.data.aiter.GEMM_FAMILIES"
            )
        need = [] if dtype is None else _GEMM_COLUMNS
        df = _read(root, path, need, () if dtype is None else ("M", "N", "K"))
        df["family"], df["gemm_dtype"] = family, dtype
        if "libtype" not in df.columns:
            df["libtype"] = ""
        if dtype is None:
            df["reason"] = "precision"
        elif "q_dtype_w" in df.columns:
            not8 = ~df["q_dtype_w"].astype(str).str.contains("float8")
            df.loc[(df["reason"] == "") & not8, "reason"] = "precision"
        for col, want in (("bias", "False"), ("outdtype", "torch.bfloat16"), ("dtype", "torch.bfloat16")):
            if col in df.columns:
                df.loc[(df["reason"] == "") & (df[col].astype(str) != want), "reason"] = "precision"
        parts.append(df)
    g = pd.concat(parts, ignore_index=True)
    shape = ["M", "N", "K", "gemm_dtype"]
    _flag_repeated(g, "family", shape, ["us", "kernelName"])
    ok = g["reason"] == ""
    over = pd.Series(False, index=g.index)
    over[ok] = _over_peak(2.0 * g.loc[ok, "M"] * g.loc[ok, "N"] * g.loc[ok, "K"], g.loc[ok, "us"],
                          g.loc[ok, "gpu"], g.loc[ok, "gemm_dtype"])  # fmt: skip
    block = over.groupby([g["file"], g["gfx"], g["cu_num"]]).transform("any")
    g.loc[ok & block, "reason"] = "over_peak"
    _keep_fastest(g, ["gpu", *shape])
    return g


def _moe_dtype(a: str, w: str, q: str) -> str | None:
    def kind(t: str) -> str:
        t = t.removeprefix("torch.")
        return next((k for k in ("bfloat16", "float8", "float4") if t.startswith(k)), t)

    return MOE_DTYPES.get((kind(a), kind(w), q.removeprefix("QuantType.")))


def _moe(root: Path) -> pd.DataFrame:
    shape = ("token", "model_dim", "inter_dim", "expert", "topk")
    parts = [_read(root, p, _MOE_COLUMNS, shape) for p in sorted((root / "configs").rglob("*fmoe*.csv"))
             if "untuned" not in p.name and "grouped" not in p.name]  # fmt: skip
    grouped = [_read(root, p, ["us"]) for p in sorted((root / "configs").rglob("*grouped*fmoe*.csv"))]
    for df in grouped:  # tile parameters instead of layer shapes (gfx1250 only)
        df.loc[df["reason"] == "", "reason"] = "device"
    m = pd.concat(parts, ignore_index=True)
    m["moe_dtype"] = [_moe_dtype(str(a), str(w), str(q))
                      for a, w, q in zip(m["q_dtype_a"], m["q_dtype_w"], m["q_type"], strict=True)]  # fmt: skip
    m.loc[(m["reason"] == "") & m["moe_dtype"].isna(), "reason"] = "precision"
    m.loc[(m["reason"] == "") & (m["use_g1u1"].fillna(1).astype(int) != 1), "reason"] = "not_gated"
    m["family"] = "fmoe"
    keys = ["token", "model_dim", "inter_dim", "expert", "topk", "moe_dtype", "q_type"]
    _flag_repeated(m, "family", keys, ["us1", "us2", "us"])
    ok = m["reason"] == ""
    n1 = 2 * m.loc[ok, "inter_dim"]
    flops = (
        m.loc[ok, "token"] * m.loc[ok, "topk"] * 2.0 * m.loc[ok, "model_dim"] * (n1 + m.loc[ok, "inter_dim"])
    )
    over = _over_peak(flops, m.loc[ok, "us"], m.loc[ok, "gpu"], m.loc[ok, "moe_dtype"])
    m.loc[ok[ok].index[over], "reason"] = "over_peak"
    _keep_fastest(m, ["gpu", *keys])
    return pd.concat([m, *grouped], ignore_index=True)


GDN_FILE = "ops/flydsl/gdr_decode_tuned.csv"
_GDN_COLUMNS = ["arch", "dtype", "state_dtype", "b", "sq", "num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim",
                "duration"]  # fmt: skip


def _gdn(root: Path) -> pd.DataFrame:
    path = root / GDN_FILE
    df = _csv(path)
    missing = [c for c in _GDN_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{path}: no column {missing}; expected aiter's gdr_decode layout (PROVENANCE.md)")
    _positive(df, ["b", "sq", "num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim"], path)
    df = df.assign(file=GDN_FILE, row=np.arange(len(df)), gfx=df["arch"], cu_num=pd.NA, reason="")
    bad = ~((df["sq"] == 1) & (df["dtype"].astype(str) == "torch.bfloat16"))
    if bad.any():
        raise DataError(f"{path}: row {int(np.flatnonzero(bad)[0])}: not a one-token bf16 decode (sq, dtype)")
    df.loc[df["gfx"] == "gfx942", "reason"] = "no_cu_count"
    df.loc[(df["reason"] == "") & (df["gfx"] != "gfx950"), "reason"] = "device"
    df.loc[df["gfx"] == "gfx950", "cu_num"] = 256
    df["gpu"] = np.where(df["gfx"] == "gfx950", "mi355x", None)
    df["us"] = pd.to_numeric(df["duration"], errors="coerce")
    df.loc[(df["reason"] == "") & ~(np.isfinite(df["us"]) & (df["us"] > 0)), "reason"] = "placeholder"
    keys = ["gpu", "state_dtype", "b", "num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim"]
    _keep_fastest(df, keys)
    return df


def build_aiter_tables(root: str | Path) -> tuple[dict[str, pd.DataFrame], list[Path]]:
    """The aiter-gemm, aiter-moe, aiter-gdn and aiter-exclusions tables from the raw folder `root` (aiter/) and the
    raw files read."""
    base = Path(root)
    if not (base / "configs").is_dir():
        raise DataError(f"{root}: no configs/ here; expected the {AITER_NAME} mirror (see its PROVENANCE.md)")
    g, m, d = _gemm(base), _moe(base), _gdn(base)
    gk = g[g["reason"] == ""].rename(columns={"M": "m", "N": "n", "K": "k"})
    gk = gk.assign(latency_ms=gk["us"] / 1e3, libtype=gk["libtype"].astype(str))
    gk = gk.sort_values(["gpu", "gemm_dtype", "n", "k", "m"], kind="mergesort").reset_index(drop=True)
    mk = m[m["reason"] == ""].rename(
        columns={
            "token": "num_tokens",
            "model_dim": "hidden_size",
            "inter_dim": "inter_size",
            "expert": "n_experts",
            "topk": "top_k",
        }
    )
    mk = mk.assign(latency_ms=mk["us"] / 1e3)
    mk = mk.sort_values(["gpu", "moe_dtype", "hidden_size", "inter_size", "n_experts", "top_k", "num_tokens"],
                        kind="mergesort").reset_index(drop=True)  # fmt: skip
    dk = d[d["reason"] == ""].rename(columns={"b": "batch_size", "num_k_heads": "key_heads",
                                              "num_v_heads": "value_heads", "head_k_dim": "key_head_dim",
                                              "head_v_dim": "value_head_dim"})  # fmt: skip
    dk = dk.assign(
        latency_ms=dk["us"] / 1e3, state_dtype=dk["state_dtype"].astype(str).str.removeprefix("torch.")
    )
    dk = dk.sort_values(["gpu", "state_dtype", "key_heads", "value_heads", "batch_size"], kind="mergesort")
    ex = pd.concat([g[g["reason"] != ""], m[m["reason"] != ""], d[d["reason"] != ""]], ignore_index=True)
    ex = ex.sort_values(["file", "row"], kind="mergesort").reset_index(drop=True)
    files = sorted({base / f for f in pd.concat([g["file"], m["file"], d["file"]]).unique()})
    return {
        "aiter-gemm": gk[list(COLUMN_DOCS["aiter-gemm"])],
        "aiter-moe": mk[list(COLUMN_DOCS["aiter-moe"])],
        "aiter-gdn": dk[list(COLUMN_DOCS["aiter-gdn"])].reset_index(drop=True),
        "aiter-exclusions": ex[list(COLUMN_DOCS["aiter-exclusions"])],
    }, files


def aiter_readme_section(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Lines of data/README.md on the aiter tables: what is kept, what is left out and why."""
    return [
        "## AMD ROCm aiter kernel tables (aiter-gemm, aiter-moe, aiter-gdn, aiter-exclusions)",
        "",
        f"Kept: {len(tables['aiter-gemm'])} GEMM, {len(tables['aiter-moe'])} fused-MoE and {len(tables['aiter-gdn'])} "
        "Gated DeltaNet decode shapes, the fastest clean",
        "row of each shape per GPU. gfx942 rows of 304 CUs are an MI300X or an MI325X (same die and clock; the MI325X",
        "has 6.0 TB/s against 5.3) and are checked as mi300x; gfx950 rows of 256 CUs are an MI355X or an MI350X (8%",
        "lower clock) and are checked as mi355x. No row records its ROCm or aiter version or its date; each shape was",
        "timed once. Excluded rows by reason:",
        "",
        count_table(tables["aiter-exclusions"], ["reason"]),
        "aiter-gemm by GPU and dtype:",
        "",
        count_table(tables["aiter-gemm"], ["gpu", "gemm_dtype"]),
        "aiter-moe by GPU and dtype:",
        "",
        count_table(tables["aiter-moe"], ["gpu", "moe_dtype"]),
    ]
