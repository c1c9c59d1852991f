"""The table schema that `PaperModel` and the `slim` command read, and its validation.

One row per configuration: ``model`` (registry name, Hugging Face id or path to a config.json), ``gpu`` (registry
name), ``batch_size``, ``input_len``, ``output_len`` (tokens, > 0), ``throughput_tok_s`` (total-token throughput,
tokens/s, > 0) and optionally ``e2e_s`` (batch end-to-end latency, seconds, > 0), ``tensor_parallel`` (GPUs the
model is split over, a whole number >= 1; 1 where absent) and the serving precision as vLLM names it (`PRECISION_COLUMNS`:
``quantization`` of the weights, e.g. fp8; ``kv_cache_dtype``, auto or fp8; ``dtype``, auto, float16 or bfloat16;
empty where absent: the config's dtype; `slimlib.registry.precision`).
"""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from slimlib.errors import DataError

KEY_COLUMNS = ("model", "gpu", "batch_size", "input_len", "output_len")
TARGET_COLUMN = "throughput_tok_s"
#: optional text columns of the serving precision, named as vLLM's options (values checked when features are built)
PRECISION_COLUMNS = ("dtype", "quantization", "kv_cache_dtype")
#: optional engine-setting columns with vLLM's names (``gpu_blocks``: the logged ``num_gpu_blocks``), read by
#: `slimlib.model.serving`; all but the logged block count are part of a configuration
ENGINE_COLUMNS = (
    "gpu_memory_utilization",
    "block_size",
    "gpu_blocks",
    "max_num_batched_tokens",
    "max_num_seqs",
    "expert_parallel",
)
#: measured latency columns (ms) read where a table has them, first present wins: TTFT, then TPOT
TTFT_COLUMNS = ("mean_ttft_ms",)
TPOT_COLUMNS = ("mean_tpot_ms", "mean_itl_ms")
SETTING_COLUMNS = tuple(c for c in ENGINE_COLUMNS if c != "gpu_blocks")
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


#: the most characters of a text value a message quotes
MESSAGE_CHARS = 80


def _clip(text: str) -> str:
    """`text`, or its first `MESSAGE_CHARS` characters and its length where it is longer."""
    return text if len(text) <= MESSAGE_CHARS else f"{text[:MESSAGE_CHARS]}... ({len(text)} characters)"


def plain(value: object) -> str:
    """`value` for a message: numpy scalars as plain Python values (6.5, not np.float64(6.5)); strings quoted
    (clipped to `MESSAGE_CHARS`)."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, str | bytes):
        value = item()
    return repr(_clip(value)) if isinstance(value, str) else _clip(f"{value}")


def _cell(value: object) -> str:
    """A numeric cell that holds no finite number, for a message: ``empty`` (a column of empty cells), ``empty or
    nan`` (the reader gives both as NaN in a column of numbers), else the value (``inf``)."""
    if value is None:
        return "empty"
    if isinstance(value, float | np.floating) and np.isnan(value):
        return "empty or nan"
    return plain(value)


def _short(value: object) -> str:
    """A table value for a message: numbers as ``%g`` (1, not 1.0), strings as they are (clipped)."""
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        return f"{float(value):g}"
    return _clip(str(value))


def physical_line(position: int, blank_lines: list[int]) -> int:
    """File line of the data row at `position` (header on line 1), stepping over the blank lines the reader
    skipped."""
    line = position + 2
    for blank in blank_lines:  # sorted
        if blank <= line:
            line += 1
        else:
            break
    return line


def row_label(df: pd.DataFrame, position: int) -> str:
    """Human name of the row at `position`: ``FILE line N`` when the table came from a file (several files when
    concatenated by `concat_tables`; blank lines counted), else its index label."""
    whole = position + int(df.attrs.get("row_offset", 0))  # position in the whole table (`row_chunks`)
    segments = df.attrs.get("segments")
    if segments:
        for source, start, blanks in reversed(segments):
            if whole >= start:
                return f"{source} line {physical_line(whole - start, blanks)}"
    source = df.attrs.get("source")
    if source:
        return f"{source} line {physical_line(whole, df.attrs.get('blank_lines', []))}"
    return f"row {plain(df.index[position])}"


#: rows per chunk where a whole table is checked, predicted or written piece by piece (memory of one chunk)
CHUNK_ROWS = 16_384


#: the cells a true/false column reads as true or false (case aside); a blank cell takes the column's default
_TRUE, _FALSE = ("true", "1", "1.0", "yes"), ("false", "0", "0.0", "no")


def flag_column(df: pd.DataFrame, name: str, default: bool) -> np.ndarray:
    """The optional true/false column `name` as booleans, `default` where absent or blank; DataError naming the row
    and the value for a cell that is neither (``no`` is false, not a non-empty string read as true)."""
    if name not in df.columns:
        return np.full(len(df), default)
    col = df[name]
    if pd.api.types.is_bool_dtype(col):
        return col.to_numpy(dtype=bool)
    out = np.full(len(df), default)
    for i, v in enumerate(col.tolist()):
        if v is None or (isinstance(v, float) and v != v) or v is pd.NA or str(v).strip() == "":
            continue
        text = str(v).strip().lower()
        if text not in _TRUE + _FALSE:
            raise DataError(f"{row_label(df, i)}: {name} = {_short(v)} is not true or false")
        out[i] = text in _TRUE
    return out


def row_chunks(df: pd.DataFrame, rows: int = CHUNK_ROWS) -> Iterator[pd.DataFrame]:
    """Consecutive slices of at most `rows` rows (views, no copy); each keeps the table's attrs and records its
    first row's position, so `row_label` names its rows by their file line as in the whole table."""
    if rows < 1:
        raise ValueError("rows must be >= 1")
    for start in range(0, max(len(df), 1), rows):
        part = df.iloc[start : start + rows]
        part.attrs = {**df.attrs, "row_offset": int(df.attrs.get("row_offset", 0)) + start}
        yield part


def concat_tables(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate tables read by `read_csv_table`, keeping for each row its file and line (`row_label`)."""
    if len(frames) == 1:
        return frames[0]
    segments, start = [], 0
    for f in frames:
        segments.append((f.attrs.get("source") or "table", start, list(f.attrs.get("blank_lines", []))))
        start += len(f)
    combined = pd.concat(frames, ignore_index=True)
    combined.attrs = {"source": None, "segments": segments}
    return combined


def blank_line_numbers(data: bytes) -> list[int]:
    """1-based numbers of the empty lines of `data` (CSV readers skip them, so row positions shift)."""
    arr = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], ends[:-1] + 1)) if ends.size else np.array([], dtype=int)
    length = ends - starts
    cr = np.zeros_like(length, dtype=bool)
    one = length == 1
    cr[one] = arr[starts[one]] == 13
    return [int(i) + 1 for i in np.flatnonzero((length == 0) | cr)]


#: bytes read at a time by the text check of `read_csv_table` (the file is never whole in memory)
TEXT_BLOCK_BYTES = 1 << 22


def _scan_text(p: Path, help_text: str) -> list[int]:
    """The blank lines of a CSV file (`blank_line_numbers`), read a block of whole lines at a time; DataError when
    it is empty or not UTF-8 text."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    blanks: list[int] = []
    lines = 0  # complete lines before `rest`
    rest = b""  # the unfinished last line of the blocks read so far
    content = False
    try:
        with p.open("rb") as fh:
            while block := fh.read(TEXT_BLOCK_BYTES):
                decoder.decode(block)
                content = content or bool(block.strip())
                text = rest + block
                cut = text.rfind(b"\n") + 1
                blanks.extend(lines + n for n in blank_line_numbers(text[:cut]))
                lines += text.count(b"\n", 0, cut)
                rest = text[cut:]
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        _raise_not_utf8(p, help_text)
    except OSError as exc:
        raise DataError(f"{p}: cannot read the file ({exc.strerror})") from None
    if not content:
        raise DataError(f"{p}: the file is empty; {help_text}")
    return blanks


def _raise_not_utf8(p: Path, help_text: str) -> NoReturn:
    """DataError naming the first byte of `p` that is not UTF-8 (the file is read whole: this is the error path)."""
    try:
        p.read_bytes().decode("utf-8")
        at = ""
    except UnicodeDecodeError as exc:
        at = f" at byte {exc.start}"
    raise DataError(f"{p}: not a readable CSV table (not UTF-8 text{at}); {help_text}")


def read_csv_table(path: str | Path, *, require_target: bool = True) -> pd.DataFrame:
    """Read a CSV (or, by extension, a Parquet file) in the schema with Arrow; unreadable or empty files raise
    DataError naming the file. Rows keep their file line for messages (blank lines counted).

    `require_target=False` (a table to predict) makes the messages list the prediction columns. Memory: the
    table once, as Arrow buffers that pandas uses in place (no second copy, no copy of the file)."""
    p = Path(path)
    help_text = SCHEMA_HELP if require_target else PREDICT_SCHEMA_HELP
    if p.is_dir():
        raise DataError(f"{p}: is a folder; give the path of a CSV table ({help_text})")
    if not p.is_file():
        raise DataError(f"{p}: no such file; give the path of a CSV table ({help_text})")
    if p.suffix.lower() in (".parquet", ".pq"):
        try:
            table = pq.read_table(p)
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"{p}: not a readable Parquet table ({exc}); {help_text}") from None
        _refuse_repeated_columns(table.column_names, p)
        df = _to_pandas(table)
        df.attrs["source"] = str(p)
        return df
    blanks = _scan_text(p, help_text)
    try:
        # only an empty cell is missing: "nan" is a number (not finite), "NA" or "None" a text the checks name
        table = pacsv.read_csv(
            p, convert_options=pacsv.ConvertOptions(strings_can_be_null=True, null_values=[""])
        )
    except pa.ArrowInvalid as exc:
        raise DataError(f"{p}: not a readable CSV table ({str(exc).splitlines()[0]}); {help_text}") from None
    except OSError as exc:
        raise DataError(f"{p}: cannot read the file ({exc.strerror or exc})") from None
    _refuse_repeated_columns(table.column_names, p)
    df = _to_pandas(table)
    df.attrs["source"] = str(p)
    df.attrs["blank_lines"] = blanks
    return df


def _refuse_repeated_columns(names: list[str], where: object) -> None:
    """DataError naming the first column name that appears more than once in a header."""
    seen: set[str] = set()
    for name in map(str, names):
        if name in seen:
            raise DataError(f"{where}: column {_clip(name)!r} appears twice in the header; keep one")
        seen.add(name)


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """`table` as a DataFrame, each column converted and released in turn (no second copy of the table)."""
    return table.to_pandas(split_blocks=True, self_destruct=True)


def validate_table(
    df: pd.DataFrame,
    *,
    require_target: bool = True,
    require_gpu: bool = True,
    canonical: Mapping[str, Callable[[str], str]] | None = None,
) -> pd.DataFrame:
    """Check a configuration table and return a copy with numeric columns as float and names as str.

    Raises DataError for: an empty table, missing columns, non-numeric, NaN/inf, zero or negative values,
    non-whole batch sizes, empty model/gpu names, and duplicate configurations with conflicting measurements.
    Nothing is dropped. `require_gpu=False` accepts a table without the ``gpu`` column (prediction with
    parameters of a known GPU); `require_target=False` (prediction) makes messages list the prediction columns.
    `canonical` (column -> registry-name function) makes aliases of one model or GPU count as duplicates.
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(df).__name__}")
    where = df.attrs.get("source", "the table")
    help_text = SCHEMA_HELP if require_target else PREDICT_SCHEMA_HELP
    _refuse_repeated_columns(list(df.columns), where)
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
        # on the distinct values only (a million rows hold a handful of names)
        codes, uniques = pd.factorize(out[col], use_na_sentinel=True)
        names = np.array([str(v).strip() for v in uniques], dtype=object)
        bad = (codes < 0) | np.isin(codes, np.flatnonzero(names == ""))
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"{row_label(out, pos)}: field '{col}' is empty; give a registry name or config.json path"
            )
        if not all(isinstance(u, str) and u == n for u, n in zip(uniques, names, strict=True)):
            out[col] = pd.Series(names[codes], index=out.index).astype(str)
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
                f"{row_label(out, pos)}: field '{col}' is missing or not finite ({_cell(raw.iloc[pos])}); "
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
    if require_target:
        _check_latencies(out)
    _check_conflicting_duplicates(out, require_target, canonical)
    return out


#: the longest latency a benchmark row can hold: a day, in ms
MAX_LATENCY_MS = 86_400_000.0
#: how far a row's mean E2E may exceed its run's span (`latency_order_problems`): exact in one run, but a table of
#: medians over repeats takes each column's median apart (the committed campaigns' medians exceed it by up to 18%)
SPAN_REL_TOL = 0.25


def _run_span_ms(row: Mapping[Any, object], num: Callable[[str], float]) -> tuple[float, float]:
    """(requests the row's client keeps out, the run's span in ms from its throughput: those requests' ``IL + OL``
    tokens over ``throughput_tok_s``): a closed loop's ``max_concurrency`` clients (``batch_size`` where the row
    has no such column), a static batch's ``batch_size``, a burst's ``num_prompts``; NaN where the row does not say
    its client (``client``, ``static_batch``) or has no positive throughput."""
    value = row.get("client")
    blank = value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
    client = "" if blank else str(value).strip().lower()
    if not client and str(row.get("static_batch")).strip().lower() in _TRUE:
        client = "static"
    clients = num("max_concurrency")
    n = {
        "static": num("batch_size"),
        "concurrency": clients if clients > 0 else num("batch_size"),
        "burst": num("num_prompts"),
    }.get(client, math.nan)
    thr = num("throughput_tok_s")
    if not (math.isfinite(thr) and thr > 0):
        return n, math.nan
    return n, 1e3 * n * (num("input_len") + num("output_len")) / thr


def latency_order_problems(
    row: Mapping[Any, object], tol: float = 0.01, span_tol: float = SPAN_REL_TOL
) -> list[str]:
    """Why a row's measured latencies cannot be: mean TTFT or (OL - 1) x mean TPOT above the client's mean E2E
    (``mean_e2el_ms``, as vLLM's benchmark reports it; relative tolerance `tol`), a request's mean E2E (TTFT +
    (OL - 1) TPOT) above the run's span where the row says its client (`_run_span_ms`: Little's law for a closed
    loop, the batch for a static one, every prompt for a burst; relative tolerance `span_tol`), or a latency's
    percentiles out of order (``p50_ttft_ms`` <= ``p90_ttft_ms`` <= ``p99_ttft_ms``, and of TPOT, ITL and E2E);
    empty where none, or nothing to compare. (``e2e_s`` is not compared: a table may hold the time in the engine
    there, without the queue its TTFT includes.)"""

    def num(key: str) -> float:
        try:
            return float(row.get(key))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return math.nan

    ol, e2e = num("output_len"), num("mean_e2el_ms")
    ttft, tpot = num("mean_ttft_ms"), num("mean_tpot_ms")
    out = []
    for key in row:
        if not (
            key in ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms") or re.fullmatch(r"p\d+_\w+_ms", str(key))
        ):
            continue
        v = num(str(key))
        zero_ok = "tpot" in str(key) or "itl" in str(key)  # one output token: no gap between tokens
        if not math.isnan(v) and not ((0 <= v if zero_ok and ol <= 1 else 0 < v) and v <= MAX_LATENCY_MS):
            out.append(
                f"{key} = {v:.4g} is not a measured latency (above 0 and at most a day, {MAX_LATENCY_MS:.0f})"
            )
    if ttft > e2e * (1 + tol):
        out.append(f"mean TTFT {ttft:.4g} ms > mean E2E {e2e:.4g} ms")
    n, span = _run_span_ms(row, num)
    served = float(np.nansum([ttft, max(ol - 1, 0.0) * tpot]))
    if served > span * (1 + span_tol):
        out.append(
            f"mean TTFT + (OL - 1) x mean TPOT = {served:.4g} ms > the run's span, {n:g} requests x (IL + OL) / "
            f"throughput = {span:.4g} ms"
        )
    if ol > 1 and (ol - 1) * tpot > e2e * (1 + tol):
        out.append(f"(OL - 1) x mean TPOT = {(ol - 1) * tpot:.4g} ms > mean E2E {e2e:.4g} ms")
    for metric in ("ttft", "tpot", "itl", "e2el"):
        known = [(p, num(f"p{p}_{metric}_ms")) for p in (50, 90, 99)]
        known = [(p, v) for p, v in known if not math.isnan(v)]
        for (p1, v1), (p2, v2) in zip(known, known[1:], strict=False):
            if v1 > v2:
                out.append(f"p{p1} {metric.upper()} {v1:.4g} ms > p{p2} {v2:.4g} ms")
    return out


def _check_latencies(df: pd.DataFrame) -> None:
    """DataError naming the first row whose measured latencies cannot be (`latency_order_problems`)."""
    cols = [c for c in df.columns if c in ("mean_ttft_ms", "mean_tpot_ms") or re.fullmatch(r"p\d+_\w+_ms", c)]
    if not cols:
        return
    for pos, row in enumerate(df.to_dict("records")):
        problems = latency_order_problems(row)
        if problems:
            raise DataError(
                f"{row_label(df, pos)}: {'; '.join(problems)}; a request's first token and later gaps lie inside its "
                "E2E, its E2E inside the run, and percentiles grow: fix or remove the row"
            )


def configuration_columns(df: pd.DataFrame) -> list[str]:
    """The columns of `df` that name a configuration: `KEY_COLUMNS`, and the parallelism, precision, engine
    settings and client where given (two rows that differ in one are two configurations)."""
    extra = (
        "tensor_parallel",
        *PRECISION_COLUMNS,
        *SETTING_COLUMNS,
        "client",
        "num_prompts",
        "max_concurrency",
    )
    return list(KEY_COLUMNS) + [c for c in extra if c in df.columns]


def _check_conflicting_duplicates(
    df: pd.DataFrame, require_target: bool, canonical: Mapping[str, Callable[[str], str]] | None = None
) -> None:
    """DataError for two rows of one configuration with different measurements; `canonical` maps a column
    (``model``, ``gpu``) to a function giving the canonical key of a value (a registry name; a model's content
    identity), so aliases count as one name."""
    if not require_target:
        return
    measured = [c for c in (TARGET_COLUMN, "e2e_s", *TTFT_COLUMNS, *TPOT_COLUMNS) if c in df.columns]
    keys = configuration_columns(df)
    key_df = df[keys].reset_index(drop=True)
    for col, fn in (canonical or {}).items():
        if col in key_df.columns:
            values = key_df[col].astype(str)
            names = {v: fn(v) for v in values.unique()}
            key_df[col] = values.map(names)
    dup = key_df.duplicated(keys, keep=False).to_numpy()
    if not dup.any():
        return
    by_position = df.reset_index(drop=True)  # group labels are row positions, even for a repeated index
    # vectorized: a configuration conflicts when one of its measurements takes more than one value
    group = key_df[dup].groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    measured_values = by_position.loc[dup, measured].reset_index(drop=True)
    measured_values.insert(0, "_group", group)
    distinct = measured_values.groupby("_group", sort=False)[measured].nunique(dropna=False)
    conflicting = distinct.index.to_numpy()[distinct.to_numpy().max(axis=1) > 1]
    if len(conflicting) == 0:
        return
    dup_pos = np.flatnonzero(dup)
    g0 = group[np.flatnonzero(np.isin(group, conflicting))[0]]  # the conflict starting earliest
    members = dup_pos[group == g0]
    vals = by_position[measured].to_numpy(dtype=float)
    first = int(members[0])
    differ = lambda r: (vals[r] != vals[first]) & ~(np.isnan(vals[r]) & np.isnan(vals[first]))  # noqa: E731
    other = next(int(r) for r in members[1:] if differ(r).any())
    config = ", ".join(f"{k}={_short(by_position[k].iloc[first])}" for k in keys)
    diff = "; ".join(
        f"{c} {_short(vals[first, j])} vs {_short(vals[other, j])}"
        for j, c in enumerate(measured)
        if differ(other)[j]
    )
    raise DataError(
        f"configuration {config} has different measurements in {row_label(df, first)} and "
        f"{row_label(df, other)} ({diff}); average the repeats into one row or remove the wrong one"
    )


def aggregate_repeats(df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The distinct configurations of a validated measurement table and the number of rows merged into them.

    Rows that repeat a configuration (`configuration_columns`) with the same measurements (the
    only repeats `validate_table` accepts) are one measurement: each is counted once, so a million-row log of a
    few thousand configurations costs the least squares a few thousand residuals. The first row of each
    configuration is kept, with its index label."""
    keep = ~df.duplicated(configuration_columns(df), keep="first").to_numpy()
    if keep.all():
        return df, 0
    out = df[keep]
    out.attrs = {}  # row positions changed: messages name rows by their index label (the original position)
    return out, int((~keep).sum())


def measured_latency_s(data: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """Per row, the first of `columns` (ms) that holds a value, in seconds (NaN where none does)."""
    out = np.full(len(data), np.nan)
    for c in columns:
        if c in data.columns:
            v = pd.to_numeric(data[c], errors="coerce").to_numpy(dtype=float) / 1000.0
            out = np.where(np.isnan(out), v, out)
    return out
