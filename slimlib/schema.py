"""The table schema that `SlimModel` and the `slim` command read, and its validation.

One row per configuration: ``model`` (registry name, Hugging Face id or path to a config.json), ``gpu`` (registry
name), ``batch_size``, ``input_len``, ``output_len`` (tokens, > 0), ``throughput_tok_s`` (total-token throughput,
tokens/s, > 0) and optionally ``e2e_s`` (batch end-to-end latency, seconds, > 0), ``tensor_parallel`` (GPUs the
model is split over, a whole number >= 1; 1 where absent) and the serving precision as vLLM names it (`PRECISION_COLUMNS`:
``quantization`` of the weights, e.g. fp8; ``kv_cache_dtype``, auto or fp8; ``dtype``, auto, float16 or bfloat16;
empty where absent: the config's dtype; `slimlib.registry.precision`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.errors import DataError

KEY_COLUMNS = ("model", "gpu", "batch_size", "input_len", "output_len")
TARGET_COLUMN = "throughput_tok_s"
#: optional text columns of the serving precision, named as vLLM's options (values checked when features are built)
PRECISION_COLUMNS = ("dtype", "quantization", "kv_cache_dtype")
OPTIONAL_COLUMNS = ("e2e_s", "tensor_parallel", *PRECISION_COLUMNS)
NUMERIC_COLUMNS = ("batch_size", "input_len", "output_len", "throughput_tok_s", "e2e_s", "tensor_parallel")
#: Columns that hold counts: whole numbers only (a batch of 6.5 requests is a typo or an average).
INTEGER_COLUMNS = ("batch_size", "tensor_parallel")
SCHEMA_HELP = (
    "expected columns: model, gpu, batch_size, input_len, output_len, throughput_tok_s (and optionally e2e_s, "
    "tensor_parallel, quantization, kv_cache_dtype, dtype); "
    "see README 'Input table'"
)
#: The same help for tables of configurations to predict (no measurements needed).
PREDICT_SCHEMA_HELP = (
    "columns needed to predict: model, batch_size, input_len, output_len (and optionally gpu, tensor_parallel, "
    "quantization, kv_cache_dtype, dtype); "
    "see README 'Input table'"
)


def plain(value: object) -> str:
    """`value` for a message: numpy scalars as plain Python values (6.5, not np.float64(6.5)); strings quoted."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, str | bytes):
        value = item()
    return repr(value) if isinstance(value, str) else f"{value}"


def row_label(df: pd.DataFrame, position: int) -> str:
    """Human name of the row at `position`: the CSV line when the table came from a file, else its index label."""
    source = df.attrs.get("source")
    if source:
        return f"{source} line {position + 2}"  # header is line 1
    return f"row {plain(df.index[position])}"


def read_csv_table(path: str | Path, *, require_target: bool = True) -> pd.DataFrame:
    """Read a CSV in the schema; unreadable or empty files raise DataError naming the file.

    `require_target=False` (a table to predict) makes the messages list the prediction columns."""
    p = Path(path)
    help_text = SCHEMA_HELP if require_target else PREDICT_SCHEMA_HELP
    if not p.is_file():
        raise DataError(f"{p}: no such file; give the path of a CSV table ({help_text})")
    try:
        df = pd.read_csv(p)
    except pd.errors.EmptyDataError:
        raise DataError(f"{p}: the file is empty; {help_text}") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: not a readable CSV table ({exc}); {help_text}") from None
    except OSError as exc:
        raise DataError(f"{p}: cannot read the file ({exc.strerror})") from None
    df.attrs["source"] = str(p)
    return df


def validate_table(
    df: pd.DataFrame, *, require_target: bool = True, require_gpu: bool = True
) -> pd.DataFrame:
    """Check a configuration table and return a copy with numeric columns as float and names as str.

    Raises DataError for: an empty table, missing columns, non-numeric, NaN/inf, zero or negative values,
    non-whole batch sizes, empty model/gpu names, and duplicate configurations with conflicting measurements.
    Nothing is dropped. `require_gpu=False` accepts a table without the ``gpu`` column (prediction with
    parameters of a known GPU); `require_target=False` (prediction) makes messages list the prediction columns.
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(df).__name__}")
    where = df.attrs.get("source", "the table")
    help_text = SCHEMA_HELP if require_target else PREDICT_SCHEMA_HELP
    if len(df) == 0:
        raise DataError(f"{where} has no rows; {help_text}")
    keys = [c for c in KEY_COLUMNS if require_gpu or c != "gpu"]
    required = keys + ([TARGET_COLUMN] if require_target else [])
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(f"{where} lacks column(s) {', '.join(missing)}; {help_text}")
    out = df.copy()
    out.attrs = dict(df.attrs)
    for col in ("model", "gpu"):
        if col not in out.columns:
            continue
        values = out[col]
        bad = values.isna() | (values.astype(str).str.strip() == "")
        if bad.any():
            pos = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(
                f"{row_label(out, pos)}: field '{col}' is empty; give a registry name or config.json path"
            )
        out[col] = values.astype(str).str.strip()
    for col in NUMERIC_COLUMNS:
        if col not in out.columns:
            continue
        raw = out[col]
        if (
            col == "tensor_parallel"
        ):  # optional per row too: an empty cell means one GPU, as a missing column does
            raw = raw.where(raw.notna() & (raw.astype(str).str.strip() != ""), 1)
        num = pd.to_numeric(raw, errors="coerce")
        nonnum = num.isna() & raw.notna()
        if nonnum.any():
            pos = int(np.flatnonzero(nonnum.to_numpy())[0])
            raise DataError(
                f"{row_label(out, pos)}: field '{col}' is {plain(raw.iloc[pos])}, not a number; fix or remove the row"
            )
        arr = num.to_numpy(dtype=float)
        nan = ~np.isfinite(arr)
        if nan.any():
            pos = int(np.flatnonzero(nan)[0])
            raise DataError(
                f"{row_label(out, pos)}: field '{col}' is missing or not finite ({plain(raw.iloc[pos])}); "
                "measure it or remove the row"
            )
        nonpos = arr <= 0
        if nonpos.any():
            pos = int(np.flatnonzero(nonpos)[0])
            raise DataError(f"{row_label(out, pos)}: field '{col}' is {arr[pos]:g}; it must be positive")
        if col in INTEGER_COLUMNS:
            frac = arr != np.round(arr)
            if frac.any():
                pos = int(np.flatnonzero(frac)[0])
                what = "requests batched together" if col == "batch_size" else "GPUs the model is split over"
                raise DataError(
                    f"{row_label(out, pos)}: field '{col}' is {arr[pos]:g}; it must be a whole number (the number of "
                    f"{what})"
                )
        out[col] = arr
    _check_conflicting_duplicates(out, require_target)
    return out


def _check_conflicting_duplicates(df: pd.DataFrame, require_target: bool) -> None:
    if not require_target:
        return
    measured = [c for c in (TARGET_COLUMN, "e2e_s") if c in df.columns]
    keys = list(KEY_COLUMNS) + [c for c in ("tensor_parallel", *PRECISION_COLUMNS) if c in df.columns]
    dup = df.duplicated(keys, keep=False)
    if not dup.any():
        return
    by_position = df.reset_index(drop=True)  # group labels are row positions, even for a repeated index
    groups = by_position[dup.to_numpy()].groupby(keys, sort=True)
    for key, g in groups:
        if any(g[c].nunique() > 1 for c in measured):
            rows = ", ".join(row_label(df, int(p)) for p in g.index[:5])
            raise DataError(
                f"configuration {dict(zip(keys, key, strict=True))} appears in {len(g)} rows with different "
                f"measurements ({rows}); average the repeats into one row or remove the wrong ones"
            )
