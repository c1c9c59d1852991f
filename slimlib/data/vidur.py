"""Vidur operator profiles (microsoft/vidur, MIT) as tidy long tables.

Raw layout under the mirror root (see its PROVENANCE.md):
``compute/<gpu>/<org>/<model>/mlp.csv`` (commit 7d47513) and ``legacy-e2d00e9/<gpu>/{mlp,attention,cpu_overheads}.csv``.
Every time in the raw files is in milliseconds; MLP/attention times are per layer.

Tables (one row per raw measurement row and operation; repeated measurements of the same configuration are kept and
numbered by ``repeat`` in file order, nothing is averaged or dropped):

- ``vidur-mlp``: dense per-layer operations (QKV and output projections, MLP matrices, norms, ...) vs ``num_tokens``.
- ``vidur-attention``: attention kernel (``attn_decode``/``attn_prefill``) and its reshapes vs ``batch_size``,
  ``kv_cache_size`` (tokens already in the KV cache per request) and ``prefill_chunk_size`` (new tokens, prefill only).
- ``vidur-cpu-overheads``: CPU-side per-iteration times (scheduler, sampler, input preparation, ...) vs batch size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.errors import DataError

# Vidur's GPU folder names -> slimlib hardware registry names (Vidur profiled SXM 80 GB parts).
VIDUR_GPU_NAMES = {"a100": "a100-sxm-80gb", "h100": "h100-sxm-80gb"}
# Upstream commit of each layout (PROVENANCE.md); the short form goes into the `source_commit` column.
COMPUTE_COMMIT = "7d47513363ec447a741ac5e47241580b47724fbf"
LEGACY_COMMIT = "e2d00e9afba96cec9f0e7ea560bbfc4a539fae6a"

STATS = ("mean", "median", "min", "max", "std")
TIME_COLUMNS = tuple(f"time_ms_{s}" for s in STATS)
MLP_SHAPE_COLUMNS = ("n_embd", "n_head", "n_kv_head", "n_expanded_embd", "vocab_size")
MLP_META = (*MLP_SHAPE_COLUMNS, "use_gated_mlp", "num_tokens", "num_tensor_parallel_workers")
ATTN_INT_COLUMNS = (
    "n_embd",
    "n_q_head",
    "n_kv_head",
    "block_size",
    "num_tensor_parallel_workers",
    "max_model_len",
    "batch_size",
    "prefill_chunk_size",
    "kv_cache_size",
)
ATTN_META = (*ATTN_INT_COLUMNS, "is_prefill", "attention_backend", "profile_method")
# Operations in the order they run in a decoder layer (sort order of the tables; unknown names sort after, by name).
MLP_OP_ORDER = (
    "emb",
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
ATTN_OP_ORDER = ("attn_input_reshape", "attn_prefill", "attn_decode", "attn_output_reshape")
CPU_OPS = ("schedule", "sampler_e2e", "prepare_inputs_e2e", "model_execution_e2e", "process_model_outputs")
CPU_META = ("model_name", "batch_size", "tensor_parallel_degree")

MLP_COLUMNS = (
    "gpu",
    "model",
    "source_commit",
    *MLP_SHAPE_COLUMNS,
    "use_gated_mlp",
    "num_tensor_parallel_workers",
    "operation",
    "num_tokens",
    "repeat",
    *TIME_COLUMNS,
)
ATTENTION_COLUMNS = (
    "gpu",
    "model",
    "source_commit",
    "n_embd",
    "n_q_head",
    "n_kv_head",
    "head_dim",
    "block_size",
    "num_tensor_parallel_workers",
    "max_model_len",
    "attention_backend",
    "profile_method",
    "phase",
    "operation",
    "batch_size",
    "kv_cache_size",
    "prefill_chunk_size",
    "repeat",
    *TIME_COLUMNS,
)
CPU_COLUMNS = (
    "gpu",
    "model",
    "source_commit",
    "tensor_parallel_degree",
    "operation",
    "batch_size",
    "repeat",
    "time_ms_mean",
    "time_ms_median",
)


def build_vidur_tables(raw_root: Path) -> tuple[dict[str, pd.DataFrame], list[Path]]:
    """Parse the Vidur mirror at `raw_root` into ``{"vidur-mlp", "vidur-attention", "vidur-cpu-overheads"}``.

    Returns the tables (deterministic row order, index 0..n-1) and the sorted list of raw files read.
    Raises DataError for a missing root, an unknown file or folder layout, a malformed CSV or a missing column.
    """
    root = Path(raw_root)
    if not root.is_dir():
        raise DataError(
            f"{root}: no such folder; give the vidur-profiling mirror (e.g. ../shared/data/vidur-profiling)"
        )
    files = sorted(p for p in root.rglob("*.csv") if p.is_file())
    if not files:
        raise DataError(f"{root}: no CSV files found; expected compute/<gpu>/<org>/<model>/mlp.csv files")
    mlp, attn, cpu = [], [], []
    for path in files:
        rel = path.relative_to(root).parts
        if len(rel) == 5 and rel[0] == "compute":
            gpu, model, commit = _gpu_name(rel[1], path), f"{rel[2]}/{rel[3]}", COMPUTE_COMMIT[:7]
        elif len(rel) == 3 and rel[0].startswith("legacy-"):
            gpu, model, commit = _gpu_name(rel[1], path), None, rel[0].removeprefix("legacy-")
        else:
            raise DataError(
                f"{path}: unexpected location in the Vidur mirror; expected compute/<gpu>/<org>/<model>/<table>.csv "
                "or legacy-<commit>/<gpu>/<table>.csv"
            )
        kind = rel[-1]
        if kind == "mlp.csv":
            mlp.append((path, gpu, model, commit))
        elif kind == "attention.csv":
            attn.append((path, gpu, model, commit))
        elif kind == "cpu_overheads.csv":
            cpu.append((path, gpu, model, commit))
        else:
            raise DataError(
                f"{path}: unknown Vidur table {kind!r}; expected mlp.csv, attention.csv or cpu_overheads.csv"
            )

    cpu_tables = [parse_cpu_overheads_csv(p, gpu=g, source_commit=c) for p, g, _, c in cpu]
    # A legacy folder names its model only in cpu_overheads.csv (model_name); its mlp.csv is that model's profile.
    legacy_models = {}
    for (p, _g, _, c), t in zip(cpu, cpu_tables, strict=True):
        names = t["model"].unique()
        if len(names) == 1:
            legacy_models[(p.parent, c)] = str(names[0])
    mlp_tables = []
    for p, g, m, c in mlp:
        model = m if m is not None else legacy_models.get((p.parent, c))
        if model is None:
            raise DataError(
                f"{p}: cannot tell which model this legacy mlp.csv profiles; expected a sibling cpu_overheads.csv "
                "with a single model_name"
            )
        mlp_tables.append(parse_mlp_csv(p, gpu=g, model=model, source_commit=c))
    # Attention profiles depend only on the attention shape; the legacy file names no model, so `model` stays empty.
    attn_tables = [parse_attention_csv(p, gpu=g, model=m, source_commit=c) for p, g, m, c in attn]

    tables = {
        "vidur-mlp": _concat_sorted(
            mlp_tables,
            MLP_COLUMNS,
            [
                "gpu",
                "model",
                "source_commit",
                "num_tensor_parallel_workers",
                "operation",
                "num_tokens",
                "repeat",
            ],
        ),
        "vidur-attention": _concat_sorted(
            attn_tables,
            ATTENTION_COLUMNS,
            [
                "gpu",
                "model",
                "source_commit",
                "num_tensor_parallel_workers",
                "phase",
                "operation",
                "batch_size",
                "kv_cache_size",
                "prefill_chunk_size",
                "repeat",
            ],
        ),
        "vidur-cpu-overheads": _concat_sorted(
            cpu_tables,
            CPU_COLUMNS,
            ["gpu", "model", "source_commit", "tensor_parallel_degree", "operation", "batch_size", "repeat"],
        ),
    }
    return tables, files


def parse_mlp_csv(path: Path, *, gpu: str, model: str, source_commit: str) -> pd.DataFrame:
    """One Vidur ``mlp.csv`` as a long table: one row per (raw row, operation), times in ms per layer."""
    raw = _read_csv(path)
    _require(raw, MLP_META, path)
    ops = _operations(raw, path)
    if not ops:
        raise DataError(f"{path}: no time_stats.<operation>.<stat> columns; not a Vidur mlp.csv")
    meta = pd.DataFrame({c: _integers(raw, c, path, minimum=1) for c in MLP_META if c != "use_gated_mlp"})
    meta["use_gated_mlp"] = _booleans(raw, "use_gated_mlp", path)
    meta["repeat"] = _repeat_index(meta, ["num_tokens", "num_tensor_parallel_workers"])
    meta["gpu"], meta["model"], meta["source_commit"] = gpu, model, source_commit
    parts = []
    for op in ops:
        times = _times(raw, op, path, required=True)
        parts.append(pd.concat([meta, times], axis=1).assign(operation=op))
    return pd.concat(parts, ignore_index=True)


def parse_attention_csv(path: Path, *, gpu: str, model: str | None, source_commit: str) -> pd.DataFrame:
    """One Vidur ``attention.csv`` as a long table: one row per (raw row, measured operation), times in ms per layer.

    A decode row must carry ``attn_decode`` times and a prefill row ``attn_prefill`` times; operations that are
    empty in a row (the other phase's kernel) are not measurements and give no row.
    """
    raw = _read_csv(path)
    _require(raw, ATTN_META, path)
    ops = _operations(raw, path)
    if not ops:
        raise DataError(f"{path}: no time_stats.<operation>.<stat> columns; not a Vidur attention.csv")
    meta = pd.DataFrame({c: _integers(raw, c, path, minimum=0) for c in ATTN_INT_COLUMNS})
    for c in ("n_embd", "n_q_head", "n_kv_head", "block_size", "num_tensor_parallel_workers", "batch_size"):
        _check_min(meta[c], 1, path, c)
    is_prefill = _booleans(raw, "is_prefill", path)
    meta["phase"] = np.where(is_prefill, "prefill", "decode")
    if (meta["n_embd"] % meta["n_q_head"]).any():
        raise DataError(f"{path}: n_embd is not a multiple of n_q_head; cannot derive head_dim")
    meta["head_dim"] = meta["n_embd"] // meta["n_q_head"]
    meta["attention_backend"] = _enum_names(raw, "attention_backend", path)
    meta["profile_method"] = _enum_names(raw, "profile_method", path)
    meta["repeat"] = _repeat_index(
        meta, ["phase", "batch_size", "kv_cache_size", "prefill_chunk_size", "num_tensor_parallel_workers"]
    )
    meta["gpu"], meta["model"], meta["source_commit"] = gpu, model, source_commit
    parts = []
    for op in ops:
        times = _times(raw, op, path, required=False)
        present = times["time_ms_mean"].notna().to_numpy()
        parts.append(pd.concat([meta, times], axis=1).assign(operation=op)[present])
    for phase, kernel in (("decode", "attn_decode"), ("prefill", "attn_prefill")):
        rows = meta["phase"].to_numpy() == phase
        if not rows.any():
            continue
        have = (
            _times(raw, kernel, path, required=False)["time_ms_mean"].notna().to_numpy()
            if kernel in ops
            else np.zeros(len(raw), bool)
        )
        missing = np.flatnonzero(rows & ~have)
        if missing.size:
            raise DataError(
                f"{path} line {missing[0] + 2}: a {phase} row without time_stats.{kernel}.* values; "
                "the file is truncated or not a Vidur attention profile"
            )
    return pd.concat(parts, ignore_index=True)


def parse_cpu_overheads_csv(path: Path, *, gpu: str, source_commit: str) -> pd.DataFrame:
    """One Vidur ``cpu_overheads.csv`` as a long table of per-iteration CPU times (ms) vs batch size.

    Columns ``<op>_mean``/``<op>_median`` become one row per operation; ``ray_comm_time_mean`` has no median.
    """
    raw = _read_csv(path)
    _require(raw, CPU_META, path)
    meta = pd.DataFrame(
        {c: _integers(raw, c, path, minimum=1) for c in ("batch_size", "tensor_parallel_degree")},
    )
    names = raw["model_name"]
    if names.isna().any() or (names.astype(str).str.strip() == "").any():
        pos = int(np.flatnonzero((names.isna() | (names.astype(str).str.strip() == "")).to_numpy())[0])
        raise DataError(f"{path} line {pos + 2}: field 'model_name' is empty")
    meta["model"] = names.astype(str).str.strip().to_numpy()
    meta["repeat"] = _repeat_index(meta, ["model", "tensor_parallel_degree", "batch_size"])
    meta["gpu"], meta["source_commit"] = gpu, source_commit
    ops = [op for op in CPU_OPS if f"{op}_mean" in raw.columns or f"{op}_median" in raw.columns]
    if "ray_comm_time_mean" in raw.columns:
        ops.append("ray_comm_time")
    if not ops:
        raise DataError(
            f"{path}: no <operation>_mean columns (e.g. schedule_mean); not a Vidur cpu_overheads.csv"
        )
    parts = []
    for op in ops:
        mean_col, median_col = f"{op}_mean", f"{op}_median"
        _require(raw, [mean_col], path)
        part = meta.copy()
        part["operation"] = op
        part["time_ms_mean"] = _floats(raw, mean_col, path)
        part["time_ms_median"] = _floats(raw, median_col, path) if median_col in raw.columns else np.nan
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


# ---------------------------------------------------------------------------------------------------- helpers


def _gpu_name(folder: str, path: Path) -> str:
    try:
        return VIDUR_GPU_NAMES[folder.lower()]
    except KeyError:
        raise DataError(
            f"{path}: unknown Vidur GPU folder {folder!r}; known: {', '.join(sorted(VIDUR_GPU_NAMES))} "
            "(add it to slimlib.data.vidur.VIDUR_GPU_NAMES)"
        ) from None


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        head = path.read_bytes()[:200]
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    if head.startswith(b"version https://git-lfs"):
        raise DataError(f"{path}: a Git LFS pointer, not the data; fetch the LFS object or remove the file")
    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty; re-fetch it (slim data fetch)") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: not a readable CSV ({exc}); re-fetch it (slim data fetch)") from None
    if len(df) == 0:
        raise DataError(f"{path}: header only, no data rows; re-fetch it (slim data fetch)")
    return df


def _require(df: pd.DataFrame, columns, path: Path) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}; not a complete Vidur profile file")


def _operations(df: pd.DataFrame, path: Path) -> list[str]:
    found: dict[str, set[str]] = {}
    for col in df.columns:
        parts = str(col).split(".")
        if parts[0] != "time_stats":
            continue
        if len(parts) != 3 or parts[2] not in STATS:
            raise DataError(f"{path}: column {col!r} is not time_stats.<operation>.<{'|'.join(STATS)}>")
        found.setdefault(parts[1], set()).add(parts[2])
    for op, stats in found.items():
        lacking = [s for s in STATS if s not in stats]
        if lacking:
            raise DataError(f"{path}: missing column(s) {', '.join(f'time_stats.{op}.{s}' for s in lacking)}")
    order = {op: i for i, op in enumerate(MLP_OP_ORDER + ATTN_OP_ORDER)}
    return sorted(found, key=lambda op: (order.get(op, len(order)), op))


def _floats(df: pd.DataFrame, col: str, path: Path, *, allow_nan: bool = False) -> np.ndarray:
    raw = df[col]
    num = pd.to_numeric(raw, errors="coerce")
    bad = num.isna() & raw.notna()
    if bad.any():
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"{path} line {pos + 2}: field {col!r} = {raw.iloc[pos]!r} is not a number")
    values = num.to_numpy(dtype=float)
    invalid = ~np.isfinite(values) if not allow_nan else np.isinf(values)
    invalid |= values < 0
    if invalid.any():
        pos = int(np.flatnonzero(invalid)[0])
        raise DataError(
            f"{path} line {pos + 2}: field {col!r} = {raw.iloc[pos]!r}; expected a finite time >= 0 ms"
        )
    return values


def _integers(df: pd.DataFrame, col: str, path: Path, *, minimum: int) -> np.ndarray:
    values = _floats(df, col, path)
    frac = values != np.round(values)
    if frac.any():
        pos = int(np.flatnonzero(frac)[0])
        raise DataError(
            f"{path} line {pos + 2}: field {col!r} = {float(values[pos])!r} is not a whole number"
        )
    out = values.astype(np.int64)
    _check_min(pd.Series(out), minimum, path, col)
    return out


def _check_min(values: pd.Series, minimum: int, path: Path, col: str) -> None:
    low = values.to_numpy() < minimum
    if low.any():
        pos = int(np.flatnonzero(low)[0])
        raise DataError(f"{path} line {pos + 2}: field {col!r} = {values.iloc[pos]}; expected >= {minimum}")


def _booleans(df: pd.DataFrame, col: str, path: Path) -> np.ndarray:
    text = df[col].astype(str).str.strip().str.lower()
    ok = text.isin(["true", "false"])
    if not ok.all():
        pos = int(np.flatnonzero(~ok.to_numpy())[0])
        raise DataError(
            f"{path} line {pos + 2}: field {col!r} = {df[col].iloc[pos]!r}; expected True or False"
        )
    return (text == "true").to_numpy()


def _enum_names(df: pd.DataFrame, col: str, path: Path) -> np.ndarray:
    """'AttentionBackend.FLASH_ATTENTION' -> 'flash_attention'."""
    raw = df[col]
    text = raw.astype(str).str.strip()
    bad = raw.isna() | (text == "")
    if bad.any():
        pos = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"{path} line {pos + 2}: field {col!r} is empty")
    return text.str.split(".").str[-1].str.lower().to_numpy()


def _times(df: pd.DataFrame, op: str, path: Path, *, required: bool) -> pd.DataFrame:
    """The five statistics of `op` as time_ms_* columns; all five present or all empty in each row."""
    cols = {s: f"time_stats.{op}.{s}" for s in STATS}
    out = pd.DataFrame(
        {f"time_ms_{s}": _floats(df, c, path, allow_nan=not required) for s, c in cols.items()}
    )
    nan = out.isna().to_numpy()
    partial = nan.any(axis=1) & ~nan.all(axis=1)
    if partial.any():
        pos = int(np.flatnonzero(partial)[0])
        col = cols[STATS[int(np.flatnonzero(nan[pos])[0])]]
        raise DataError(f"{path} line {pos + 2}: field {col!r} is empty while other {op} statistics are not")
    present = ~nan.all(axis=1)
    v = {s: out[f"time_ms_{s}"].to_numpy() for s in STATS}
    tol = 1e-9 + 1e-6 * v["max"]
    disordered = present & (
        (v["min"] > v["median"] + tol)
        | (v["median"] > v["max"] + tol)
        | (v["min"] > v["mean"] + tol)
        | (v["mean"] > v["max"] + tol)
    )
    if disordered.any():
        pos = int(np.flatnonzero(disordered)[0])
        raise DataError(
            f"{path} line {pos + 2}: time_stats.{op}: min <= mean, median <= max does not hold; "
            "the statistics columns are mislabelled or corrupted"
        )
    return out


def _repeat_index(meta: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """0 for the first row of each configuration, 1 for its first re-measurement, ... (file order)."""
    return meta.groupby(keys, sort=False).cumcount().to_numpy(dtype=np.int64)


def _concat_sorted(parts: list[pd.DataFrame], columns, keys: list[str]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    df = pd.concat(parts, ignore_index=True)
    order = {op: i for i, op in enumerate(MLP_OP_ORDER + ATTN_OP_ORDER + CPU_OPS + ("ray_comm_time",))}
    rank = df["operation"].map(lambda op: order.get(op, len(order)))
    df = df.assign(_op_rank=rank, model=df["model"].astype(object))
    df["_model_key"] = df["model"].fillna("")
    sort_keys = ["_model_key" if k == "model" else k for k in keys]
    sort_keys.insert(sort_keys.index("operation"), "_op_rank")
    df = df.sort_values(sort_keys, kind="mergesort").reset_index(drop=True)
    return df.loc[:, list(columns)]


#: the host-side operations of one vLLM iteration in Vidur's CPU-overhead profile (``vidur-cpu-overheads``); the
#: model's execution and the Ray communication are not host work per sequence
HOST_OPERATIONS = ("schedule", "prepare_inputs_e2e", "sampler_e2e", "process_model_outputs")


def _batch_line(table: pd.DataFrame, op: str, column: str) -> tuple[float, float]:
    """(intercept, slope) in seconds of the least-squares line of `op`'s `column` (ms) over the batch size, every
    measured row; DataError when `table` has `op` at fewer than two batch sizes."""
    g = table[table["operation"] == op]
    if g["batch_size"].nunique() < 2:
        raise DataError(f"vidur-cpu-overheads: operation {op!r} needs rows at two batch sizes or more")
    slope, intercept = np.polyfit(g["batch_size"].to_numpy(float), g[column].to_numpy(float), 1)
    return float(intercept) / 1e3, float(slope) / 1e3


def host_sequence_slopes(table: pd.DataFrame) -> pd.Series:
    """Per operation of `HOST_OPERATIONS`: the least-squares slope of its median time over the batch size, every
    measured row (seconds per running sequence and iteration); DataError when `table` lacks one."""
    out = {op: _batch_line(table, op, "time_ms_median")[1] for op in HOST_OPERATIONS}
    return pd.Series(out, name="s_per_sequence")


#: the driver-to-worker communication of one vLLM iteration at TP > 1 in Vidur's CPU-overhead profile (Ray; its
#: mean only: the profile has no median of it)
WORKER_COMM_OPERATION = "ray_comm_time"


def worker_comm_fit(table: pd.DataFrame) -> tuple[float, float]:
    """(seconds per iteration, seconds per running sequence and iteration): the least-squares line of
    `WORKER_COMM_OPERATION`'s mean time over the batch size, every measured row; DataError when `table` has it at
    fewer than two batch sizes."""
    return _batch_line(table, WORKER_COMM_OPERATION, "time_ms_mean")
