"""Parser of one vLLM `benchmark_serving` result JSON (`openai-*.json`), the single JSON parser of the project.

Throughputs are per second of benchmark duration; TTFT/TPOT/ITL statistics are in milliseconds, as vLLM writes them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from slimlib.errors import DataError

#: Keys every result must hold, with the type they must have (int fields may be written as whole floats).
REQUIRED_KEYS: dict[str, type] = {
    "duration": float,
    "completed": int,
    "total_input_tokens": int,
    "total_output_tokens": int,
    "request_throughput": float,
    "output_throughput": float,
    "total_token_throughput": float,
}
#: Latency statistics (milliseconds) read when present; vLLM versions differ in which percentiles they write.
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
LATENCY_STATS = ("mean", "median", "std", "p50", "p90", "p99")


def _number(path: Path, key: str, value: object, kind: type) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataError(
            f"{path}: field {key!r} is {value!r}, expected a number; the file is not a vLLM result"
        )
    if not math.isfinite(float(value)):
        raise DataError(f"{path}: field {key!r} is {value!r}, expected a finite number")
    if kind is int:
        if float(value) != int(value):
            raise DataError(f"{path}: field {key!r} is {value!r}, expected a whole number")
        return int(value)
    return float(value)


def parse_benchmark_json(path: str | Path) -> dict:
    """Read one vLLM benchmark_serving result JSON into a flat dict.

    Keys: ``duration_s, completed, num_prompts, total_input_tokens, total_output_tokens, request_throughput_req_s,
    output_throughput_tok_s, total_token_throughput_tok_s``, ``<mean|median|std|p50|p90|p99>_<ttft|tpot|itl|e2el>_ms`` where
    present, ``date, model_id, request_rate`` (float, ``inf`` for an unpaced run), ``backend``.
    Raises DataError naming the file and field for invalid JSON, a non-object, missing or non-numeric fields,
    or negative counts.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{p}: no such file; give the path of a vLLM benchmark_serving result JSON") from None
    except UnicodeDecodeError:
        raise DataError(f"{p}: not UTF-8 text; expected a vLLM benchmark_serving result JSON") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"{p}: invalid or truncated JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(raw, dict):
        raise DataError(
            f"{p}: expected a JSON object (a vLLM benchmark_serving result), got {type(raw).__name__}"
        )
    missing = [k for k in REQUIRED_KEYS if k not in raw]
    if missing:
        raise DataError(
            f"{p}: missing field(s) {', '.join(missing)}; not a vLLM benchmark_serving result saved with --save-result"
        )
    out: dict = {}
    for key, kind in REQUIRED_KEYS.items():
        out[key] = _number(p, key, raw[key], kind)
    for key in ("completed", "total_input_tokens", "total_output_tokens"):
        if out[key] < 0:
            raise DataError(f"{p}: field {key!r} is {out[key]}, expected >= 0")
    if out["duration"] <= 0:
        raise DataError(f"{p}: field 'duration' is {out['duration']}, expected seconds > 0")
    result = {
        "duration_s": out["duration"],
        "completed": out["completed"],
        "num_prompts": _number(p, "num_prompts", raw["num_prompts"], int) if "num_prompts" in raw else None,
        "total_input_tokens": out["total_input_tokens"],
        "total_output_tokens": out["total_output_tokens"],
        "request_throughput_req_s": out["request_throughput"],
        "output_throughput_tok_s": out["output_throughput"],
        "total_token_throughput_tok_s": out["total_token_throughput"],
    }
    for metric in LATENCY_METRICS:
        for stat in LATENCY_STATS:
            key = f"{stat}_{metric}_ms"
            if key in raw and raw[key] is not None:
                result[key] = _number(p, key, raw[key], float)
    rate = raw.get("request_rate", "inf")
    try:
        result["request_rate"] = float(rate)
    except (TypeError, ValueError):
        raise DataError(f"{p}: field 'request_rate' is {rate!r}, expected a number or 'inf'") from None
    result["date"] = str(raw.get("date", ""))
    result["model_id"] = str(raw.get("model_id", ""))
    result["backend"] = str(raw.get("backend", ""))
    return result
