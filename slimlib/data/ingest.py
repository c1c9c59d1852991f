"""Ingest a folder of the user's vLLM ``benchmark_serving`` / ``vllm bench serve`` result JSONs into the fit table.

One row per result file, in file-name order. The run settings SLIM needs come, field by field, from (first found):

1. a sidecar table (``slim-runs.csv`` or ``slim-runs.yaml`` in the folder, or ``sidecar=``) mapping file name to
   ``batch_size, input_len, output_len, model, gpu``;
2. the JSON itself: ``batch_size`` or ``max_num_seqs`` metadata (``--metadata max_num_seqs=B``), else
   ``max_concurrency`` (the smaller of the two caps when both are there); per-request ``input_lens``/``output_lens``
   (``--save-detailed``), else ``total_input_tokens``/``total_output_tokens`` over ``completed`` (mean lengths);
   ``model_id`` when it names a known architecture; ``gpu`` metadata;
3. the values given to :func:`ingest` (command-line ``--batch-size`` etc.).

A field that none provides raises DataError naming the file, the field and how to supply it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml  # at the top: an interrupt never lands in a half-done import

from slimlib.data.physical_checks import TIMING_COLUMNS, Checked, check_runs
from slimlib.data.serving_json import parse_benchmark_json
from slimlib.errors import DataError, UnknownNameError
from slimlib.io import write_text
from slimlib.registry.architectures import registry_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.registry.precision import DTYPES, KV_CACHE_DTYPES, QUANTIZATIONS
from slimlib.schema import PRECISION_COLUMNS, blank_line_numbers, physical_line

SETTINGS = ("batch_size", "input_len", "output_len", "model", "gpu")
#: Optional sidecar columns, carried into the table when present: the server's tensor-parallel size (read by the
#: physical checks) and the measurement protocol of `slim bench campaign` (repeat, waves, timing, host CPU split,
#: server identity, outside-load flag; `slimlib.data.engine_runs.RUN_SCHEMA` documents them).
OPTIONAL_FIELDS = (
    "tensor_parallel",
    "repeat",
    "waves",
    "started_utc",
    "wall_s",
    "load1",
    "cpu_user",
    "cpu_system",
    "cpu_steal",
    "cpu_idle",
    "outside_cpu",
    "server_pid",
    "server_started_utc",
    "outside_load",
)
#: how the server ran, from the sidecar or the result's metadata (``--metadata quantization=fp8 ...``, as `slim plan`'s
#: clients record it): vLLM's precision options, the memory fraction, the token budget, the running-request cap and
#: whether prefill was chunked
RUN_OPTION_FIELDS = (
    *PRECISION_COLUMNS,
    "gpu_memory_utilization",
    "max_num_batched_tokens",
    "max_num_seqs",
    "chunked_prefill",
)
SIDECAR_NAMES = ("slim-runs.csv", "slim-runs.yaml", "slim-runs.yml")
#: the latency percentiles carried into the table where a result has them (vLLM's ``--metric-percentiles``; its
#: ``median`` stands for the 50th where a version writes no ``p50``)
PERCENTILE_COLUMNS = tuple(f"p{p}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for p in (50, 90, 99))
COLUMNS = (
    "model",
    "gpu",
    "batch_size",
    "input_len",
    "output_len",
    "throughput_tok_s",
    "e2e_s",
    "request_throughput_req_s",
    "output_throughput_tok_s",
    "mean_ttft_ms",
    "mean_tpot_ms",
    "mean_itl_ms",
    "mean_e2el_ms",
    *PERCENTILE_COLUMNS,
    "duration_s",
    "num_prompts",
    "client",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrency",
    "settings_from",
    "source_file",
)
_HOW = {
    "batch_size": "add it to slim-runs.csv, run the benchmark with --max-concurrency or --metadata max_num_seqs=B, "
    "or pass --batch-size",
    "input_len": "add it to slim-runs.csv or pass --input-len",
    "output_len": "add it to slim-runs.csv or pass --output-len",
    "model": "add it to slim-runs.csv or pass --model",
    "gpu": "add it to slim-runs.csv, run the benchmark with --metadata gpu=NAME, or pass --gpu (see `slim gpus`)",
}
# Relative tolerance of the throughput cross-checks (vLLM writes them from the same counts and duration).
_REL_TOL = 0.01


def ingest(
    folder: str | Path,
    *,
    model: str | None = None,
    gpu: str | None = None,
    batch_size: int | None = None,
    input_len: float | None = None,
    output_len: float | None = None,
    sidecar: str | Path | None = None,
) -> pd.DataFrame:
    """Read every ``*.json`` in `folder` (not recursive), or the one result file `folder` names, into the table
    `slim fit` reads, one row per file.

    Columns: ``model, gpu, batch_size, input_len, output_len, throughput_tok_s`` (total tokens/s), ``e2e_s`` (mean
    request end-to-end latency, only when every file has ``mean_e2el_ms``, i.e. ``--percentile-metrics`` has e2el), ``request_throughput_req_s,
    output_throughput_tok_s, mean_ttft_ms, mean_tpot_ms, mean_itl_ms, duration_s, num_prompts, completed, failed,
    total_input_tokens, total_output_tokens, max_concurrency``, ``settings_from`` (where each setting came from),
    ``source_file`` (file name) and the sidecar's `OPTIONAL_FIELDS` columns where it has them. Every file is a row,
    including runs that fail a physical check: :func:`checked` splits those off.
    """
    root = Path(folder)
    single = root.is_file()
    if single:  # one result file: its folder holds the sidecar, if any
        files, root = [root], root.parent
    elif not root.is_dir():
        raise DataError(
            f"{root}: no such folder or result file; give the --result-dir of your runs or one .json"
        )
    else:
        files = sorted(p for p in root.glob("*.json") if p.is_file())
    if not files:
        raise DataError(
            f"{root}: no *.json result files; run the vLLM benchmark with --save-result --result-dir {root}"
        )
    # the sidecar may describe the folder's other results too
    names = {p.name for p in root.glob("*.json") if p.is_file()} if single else {p.name for p in files}
    table = _sidecar_table(root, sidecar, names)
    defaults = {
        "batch_size": batch_size,
        "input_len": input_len,
        "output_len": output_len,
        "model": model,
        "gpu": gpu,
    }
    return ingest_files(files, table, defaults)


def ingest_files(
    files, settings: dict[str, dict] | None = None, defaults: dict | None = None
) -> pd.DataFrame:
    """The rows of :func:`ingest` for the given result files, in the order given; `settings` maps a file name to
    its sidecar fields, `defaults` holds the command-line values (both as in :func:`ingest`)."""
    settings = settings or {}
    defaults = {k: (defaults or {}).get(k) for k in SETTINGS}
    rows = [_row(Path(path), settings.get(Path(path).name, {}), defaults) for path in files]
    if not rows:
        return pd.DataFrame(columns=list(COLUMNS))
    df = pd.DataFrame(rows)
    df["max_concurrency"] = df["max_concurrency"].astype("Int64")  # whole numbers; empty where not set
    if (
        df["e2e_s"].isna().any()
    ):  # the fit table takes e2e_s for every row or none; mean_e2el_ms keeps what exists
        df = df.drop(columns=["e2e_s"])
    extra = [
        c for c in (*OPTIONAL_FIELDS, *RUN_OPTION_FIELDS) if c in df.columns
    ]  # sidecar protocol columns and how the server ran, where known
    return df.loc[:, [c for c in COLUMNS if c in df.columns] + extra].reset_index(drop=True)


def checked(df: pd.DataFrame) -> tuple[pd.DataFrame, Checked]:
    """The rows of an ingested table that pass the physical checks (`slimlib.data.physical_checks`), those that
    fail only a timing check without their per-token latencies (`TIMING_COLUMNS` emptied), and the check result
    (exclusions with check name and reason, counts of checks not evaluated)."""
    got = check_runs(df)
    files = df["source_file"].astype(str)
    keep = ~files.isin(got.failing()) if len(df) else pd.Series([], dtype=bool)
    out = df[keep].copy()
    untimed = files[keep].isin(got.untimed())
    for c in TIMING_COLUMNS:
        if c in out.columns:
            out.loc[untimed, c] = np.nan
    return out.reset_index(drop=True), got


def read_result_extras(path: str | Path) -> dict:
    """The run-setting keys of one result JSON that :func:`parse_benchmark_json` does not return.

    Keys (absent when the file lacks them): ``max_concurrency``, ``batch_size``/``max_num_seqs``/``gpu`` (from
    ``--metadata``), ``failed``, ``input_lens``, ``output_lens``, ``errors``. A file holding several results (one per
    line, as ``--append-result`` writes) raises DataError.
    """
    p = Path(path)
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            raise DataError(
                f"{p}: holds more than one JSON result (written with --append-result?); "
                "save one result per file (--result-filename) or split the lines into separate .json files"
            ) from None
        parse_benchmark_json(p)  # raises its DataError naming the file and position
        raise  # pragma: no cover - parse_benchmark_json always raises on invalid JSON
    except (OSError, UnicodeDecodeError):
        parse_benchmark_json(p)
        raise  # pragma: no cover
    if not isinstance(raw, dict):
        parse_benchmark_json(p)
        raise DataError(f"{p}: expected a JSON object")  # pragma: no cover
    keys = (
        "max_concurrency",
        "batch_size",
        "gpu",
        "failed",
        "input_lens",
        "output_lens",
        "errors",
        *RUN_OPTION_FIELDS,
    )
    return {k: raw[k] for k in keys if k in raw and raw[k] is not None}


_VOCABULARY = {"dtype": DTYPES, "quantization": QUANTIZATIONS, "kv_cache_dtype": KV_CACHE_DTYPES}


def _run_options(path: Path, side: dict, extras: dict) -> dict:
    """`RUN_OPTION_FIELDS` of one run, the sidecar's before the result's metadata, each checked (DataError naming
    the file, the field and where it came from)."""
    out: dict = {}
    for field in RUN_OPTION_FIELDS:
        for where, source in (("sidecar", side), ("json", extras)):
            if field not in source:
                continue
            value = source[field]
            text = str(value).strip().lower()
            if field in _VOCABULARY:
                if text not in _VOCABULARY[field]:
                    raise DataError(
                        f"{path}: {field} = {value!r} ({where}) is not one of {', '.join(_VOCABULARY[field])}"
                    )
                out[field] = text
            elif field == "chunked_prefill":
                if text not in ("true", "false", "1", "0"):
                    raise DataError(f"{path}: chunked_prefill = {value!r} ({where}) must be true or false")
                out[field] = text in ("true", "1")
            else:
                number = _as_number(path, field, value, where)
                whole = field != "gpu_memory_utilization"
                if not number > 0 or (whole and number != int(number)) or (not whole and number > 1):
                    want = "a whole number >= 1" if whole else "a fraction in (0, 1]"
                    raise DataError(f"{path}: {field} = {value!r} ({where}) must be {want}")
                out[field] = int(number) if whole else float(number)
            break
    return out


def write_ingested(df: pd.DataFrame, out) -> None:
    """Write the ingested table as CSV (deterministic: fixed column order, '\\n' line ends, no index); a path is
    written atomically (temporary file beside it, then renamed)."""
    if hasattr(out, "write"):
        df.to_csv(out, index=False, lineterminator="\n")
        return
    write_text(out, df.to_csv(index=False, lineterminator="\n"))


# ----------------------------------------------------------------------------------------------- one file


def _row(path: Path, side: dict, defaults: dict) -> dict:
    extras = read_result_extras(path)
    res = parse_benchmark_json(path)
    _check_counts(path, res, extras)
    from_json = _json_settings(path, res, extras)
    values, origin = {}, {}
    for field in SETTINGS:
        for where, source in (("sidecar", side), ("json", from_json), ("cli", defaults)):
            if source.get(field) is not None:
                values[field], origin[field] = source[field], where
                break
        else:
            hint = ""
            if field == "model" and res.get("model_id"):
                hint = f" (its model_id {res['model_id']!r} is not a known architecture)"
            raise DataError(f"{path}: no value for {field!r}{hint}; {_HOW[field]}")
        values[field] = _check_setting(path, field, values[field], origin[field])
    e2el = res.get("mean_e2el_ms")
    return {
        **values,
        "throughput_tok_s": res["total_token_throughput_tok_s"],
        "e2e_s": e2el / 1000.0 if e2el is not None else np.nan,
        "request_throughput_req_s": res["request_throughput_req_s"],
        "output_throughput_tok_s": res["output_throughput_tok_s"],
        "mean_ttft_ms": res.get("mean_ttft_ms", np.nan),
        "mean_tpot_ms": res.get("mean_tpot_ms", np.nan),
        "mean_itl_ms": res.get("mean_itl_ms", np.nan),
        "mean_e2el_ms": e2el if e2el is not None else np.nan,
        **_percentiles(res),
        "duration_s": res["duration_s"],
        "num_prompts": res["num_prompts"] if res["num_prompts"] is not None else np.nan,
        "client": _client(res, extras),
        "completed": res["completed"],
        "failed": int(extras.get("failed", 0)),
        "total_input_tokens": res["total_input_tokens"],
        "total_output_tokens": res["total_output_tokens"],
        "max_concurrency": extras.get("max_concurrency", np.nan),
        "settings_from": ";".join(f"{f}={origin[f]}" for f in SETTINGS),
        "source_file": path.name,
        **{k: side[k] for k in OPTIONAL_FIELDS if k in side},
        **_run_options(path, side, extras),
    }


def _percentiles(res: dict) -> dict[str, float]:
    """`PERCENTILE_COLUMNS` of one parsed result: its ``pNN`` values, ``median`` for a missing 50th, NaN else."""
    out = {}
    for col in PERCENTILE_COLUMNS:
        stat, metric = col.split("_")[:2]
        value = res.get(f"{stat}_{metric}_ms")
        if value is None and stat == "p50":
            value = res.get(f"median_{metric}_ms")
        out[col] = value if value is not None else np.nan
    return out


def _client(res: dict, extras: dict) -> str:
    """How the benchmark sent its requests (`slimlib.model.served`): ``concurrency`` when a ``--max-concurrency`` at
    most the requests capped it, ``burst`` for every request at once (``--request-rate inf``) without one, ``rate``
    for a paced run (which SLIM does not model; `slim fit` refuses it by name)."""
    cap = extras.get("max_concurrency")
    if cap is not None and (res.get("num_prompts") is None or float(cap) < float(res["num_prompts"])):
        return "concurrency"
    return "burst" if math.isinf(float(res.get("request_rate", math.inf))) else "rate"


def _check_counts(path: Path, res: dict, extras: dict) -> None:
    """Throughputs must equal counts / duration (catches edited files and other units); no empty runs."""
    if res["completed"] == 0:
        raise DataError(f"{path}: field 'completed' is 0; no request finished, so the run measured nothing")
    dur = res["duration_s"]
    checks = (
        ("request_throughput", res["request_throughput_req_s"], res["completed"] / dur),
        ("output_throughput", res["output_throughput_tok_s"], res["total_output_tokens"] / dur),
        (
            "total_token_throughput",
            res["total_token_throughput_tok_s"],
            (res["total_input_tokens"] + res["total_output_tokens"]) / dur,
        ),
    )
    for key, written, expected in checks:
        if not math.isclose(written, expected, rel_tol=_REL_TOL):
            raise DataError(
                f"{path}: field {key!r} = {written:.6g} disagrees with the counts over 'duration' ({expected:.6g}/s); "
                "expected vLLM's units (duration in seconds, throughputs per second); the file was edited or is "
                "not a vLLM result"
            )
    if "failed" not in extras and res["num_prompts"] is not None and res["completed"] < res["num_prompts"]:
        raise DataError(
            f"{path}: {res['completed']} of {res['num_prompts']} requested prompts completed and the file has no "
            f"'failed' field, so the run is incomplete for an unknown reason; rerun it, or add "
            f'"failed": {res["num_prompts"] - res["completed"]} to record it as a run with failed requests (the physical checks exclude it)'
        )
    failed = extras.get("failed", 0)
    if not isinstance(failed, int) or isinstance(failed, bool) or failed < 0:
        raise DataError(f"{path}: field 'failed' is {failed!r}, expected a count >= 0")


def _json_settings(path: Path, res: dict, extras: dict) -> dict:
    out: dict = {}
    caps = []
    for key in ("batch_size", "max_num_seqs"):
        if key in extras:
            caps.append(_as_number(path, key, extras[key], "json"))
            break
    if "max_concurrency" in extras:
        caps.append(_as_number(path, "max_concurrency", extras["max_concurrency"], "json"))
    if caps:
        out["batch_size"] = min(caps)
    lens = _mean_lengths(path, extras)
    done = res["completed"]
    out["input_len"] = lens.get("input_len", res["total_input_tokens"] / done)
    out["output_len"] = lens.get("output_len", res["total_output_tokens"] / done)
    out["model"] = _known_model(res.get("model_id") or "")
    if "gpu" in extras:
        out["gpu"] = str(extras["gpu"])
    return out


def _mean_lengths(path: Path, extras: dict) -> dict:
    """Mean input/output length of the successful requests from ``--save-detailed`` per-request lists."""
    out = {}
    errors = extras.get("errors")
    for key, field in (("input_lens", "input_len"), ("output_lens", "output_len")):
        values = extras.get(key)
        if values is None:
            continue
        if not isinstance(values, list) or not values:
            raise DataError(f"{path}: field {key!r} is not a non-empty list of token counts")
        arr = np.asarray([_as_number(path, key, v, "json") for v in values], dtype=float)
        if isinstance(errors, list) and len(errors) == len(arr):
            ok = np.asarray([not e for e in errors], dtype=bool)
            arr = arr[ok] if ok.any() else arr
        out[field] = float(arr.mean())
    return out


def _known_model(model_id: str) -> str | None:
    """`model_id` (or its last path component) when the architecture registry knows it, else None."""
    model_id = model_id.strip().rstrip("/")
    if not model_id:
        return None
    for candidate in (model_id, model_id.rsplit("/", 1)[-1]):
        if Path(candidate).exists():
            continue  # a local checkpoint folder: the user names the model explicitly
        arch = registry_architecture(candidate)
        if arch is not None:
            return arch.name
    return None


def _check_setting(path: Path, field: str, value, origin: str):
    if field in ("model", "gpu"):
        text = str(value).strip()
        if not text:
            raise DataError(f"{path}: field {field!r} (from {origin}) is empty; {_HOW[field]}")
        if field == "gpu":
            try:
                return get_gpu(text).name
            except UnknownNameError as exc:
                raise UnknownNameError(f"{path}: field 'gpu' (from {origin}): {exc}") from None
        return text
    number = _as_number(path, field, value, origin)
    if field == "batch_size":
        if number != int(number):
            raise DataError(
                f"{path}: field 'batch_size' (from {origin}) is {value!r}; expected a whole number >= 1"
            )
        return int(number)
    return float(number)


def _as_number(path: Path, field: str, value, origin: str) -> float:
    if isinstance(value, bool):
        number = math.nan
    else:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise DataError(f"{path}: field {field!r} (from {origin}) is {value!r}; expected a number > 0")
    return number


# ----------------------------------------------------------------------------------------------- sidecar


def _sidecar_table(root: Path, sidecar: str | Path | None, names: set[str]) -> dict[str, dict]:
    if sidecar is None:
        found = [root / n for n in SIDECAR_NAMES if (root / n).is_file()]
        if len(found) > 1:
            raise DataError(f"{root}: both {found[0].name} and {found[1].name}; keep one sidecar")
        if not found:
            return {}
        sidecar = found[0]
    path = Path(sidecar)
    if not path.is_file():
        raise DataError(f"{path}: no such sidecar file")
    entries = (
        _read_yaml_sidecar(path) if path.suffix.lower() in (".yaml", ".yml") else _read_csv_sidecar(path)
    )
    table: dict[str, dict] = {}
    for where, name, fields in entries:
        if name in table:
            raise DataError(f"{path} {where}: file {name!r} is listed twice")
        if name not in names:
            raise DataError(f"{path} {where}: file {name!r} is not a *.json result in {root}")
        known = SETTINGS + OPTIONAL_FIELDS + RUN_OPTION_FIELDS
        unknown = sorted(set(fields) - set(known))
        if unknown:
            raise DataError(
                f"{path} {where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(known)}"
            )
        table[name] = {k: v for k, v in fields.items() if v is not None and str(v).strip() != ""}
    return table


def _read_csv_sidecar(path: Path) -> list[tuple[str, str, dict]]:
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the sidecar is empty; expected a header 'file,batch_size,...'") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable CSV ({exc})") from None
    if "file" not in df.columns:
        raise DataError(f"{path}: missing column 'file' (the result JSON file name of each row)")
    out = []
    blanks = blank_line_numbers(path.read_bytes())  # the reader skips blank lines: count them in line numbers
    for i, rec in enumerate(df.to_dict("records")):
        line = physical_line(i, blanks)
        name = str(rec.pop("file")).strip()
        if not name:
            raise DataError(f"{path} line {line}: field 'file' is empty")
        out.append((f"line {line}", name, rec))
    return out


def _read_yaml_sidecar(path: Path) -> list[tuple[str, str, dict]]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not readable YAML ({exc})") from None
    if isinstance(data, dict) and set(data) == {"runs"}:
        data = data["runs"]
    out = []
    if isinstance(data, dict):  # {file name: {field: value}}
        for name, fields in data.items():
            if not isinstance(fields, dict):
                raise DataError(f"{path}: entry {name!r} is not a mapping of field: value")
            out.append((f"entry {name!r}", str(name), dict(fields)))
    elif isinstance(data, list):  # [{file: name, field: value}, ...]
        for i, item in enumerate(data):
            if not isinstance(item, dict) or not item.get("file"):
                raise DataError(f"{path}: item {i + 1} is not a mapping with a 'file' key")
            fields = dict(item)
            out.append((f"item {i + 1}", str(fields.pop("file")), fields))
    else:
        raise DataError(f"{path}: expected a mapping of file name to settings, or a list of them")
    return out
