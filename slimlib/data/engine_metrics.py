"""Parsers of vLLM engine telemetry: the sampled Prometheus metrics CSV and the `cache_config*.txt` dump."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.errors import DataError

ENGINE_COLUMNS = (
    "time [s]",
    "gpu_cache_usage_perc",
    "num_requests_running",
    "num_requests_waiting",
    "num_preemptions_total",
)
#: Cumulative counters that are read and so must only grow during a run (the mirror's generation_tokens_total
#: sometimes drops to 0 mid-run, so unread counters are not checked).
ENGINE_COUNTERS = ("num_preemptions_total",)


def read_csv_checked(path: Path, what: str, **kwargs) -> pd.DataFrame:
    """Read a CSV; an unreadable, empty or header-only file raises DataError naming it as `what`."""
    try:
        df = pd.read_csv(path, **kwargs)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file (expected {what})") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: empty file (expected {what})") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable CSV ({str(exc).strip()}); expected {what}") from None
    if len(df) == 0:
        raise DataError(f"{path}: header only, no samples (expected {what})")
    return df


def summarize_engine_csv(path: str | Path) -> dict:
    """Summary of one engine metrics CSV (samples about 1 Hz).

    The active window is the samples with at least one running request. Returns ``n_samples``, ``active_samples``,
    ``mean_running_batch`` and ``max_running_batch`` (requests running, active window), ``mean_waiting``,
    ``mean_kv_usage_frac`` and ``max_kv_usage_frac`` (GPU KV-cache usage, fraction 0..1), ``num_preemptions`` (last
    value of the cumulative counter). Raises DataError for missing columns, non-numeric values, a decreasing counter,
    a KV usage outside [0, 1], or no active sample.
    """
    p = Path(path)
    df = read_csv_checked(p, "a vLLM engine metrics CSV")
    missing = [c for c in ENGINE_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{p}: missing column(s) {', '.join(missing)}; not a vLLM engine metrics CSV")
    num = {}
    for col in df.columns:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(
                f"{p}: line {row + 2}, column {col!r} is {df[col].iloc[row]!r}, expected a number"
            )
        num[col] = values.to_numpy(dtype=float)
    for col in ENGINE_COUNTERS:
        if col in num and np.any(np.diff(num[col]) < 0):
            row = int(np.flatnonzero(np.diff(num[col]) < 0)[0]) + 1
            raise DataError(
                f"{p}: line {row + 2}, cumulative counter {col!r} decreases; the file is not one run"
            )
    kv = num["gpu_cache_usage_perc"]
    if np.any((kv < 0) | (kv > 1)):
        row = int(np.flatnonzero((kv < 0) | (kv > 1))[0])
        raise DataError(
            f"{p}: line {row + 2}, gpu_cache_usage_perc is {kv[row]}, expected a fraction in [0, 1] (unexpected unit)"
        )
    running = num["num_requests_running"]
    active = running > 0
    if not active.any():
        raise DataError(f"{p}: no sample with a running request; the run did not serve any request")
    return {
        "n_samples": int(len(df)),
        "active_samples": int(active.sum()),
        "mean_running_batch": float(running[active].mean()),
        "max_running_batch": float(running.max()),
        "mean_waiting": float(num["num_requests_waiting"][active].mean()),
        "mean_kv_usage_frac": float(kv[active].mean()),
        "max_kv_usage_frac": float(kv.max()),
        "num_preemptions": int(num["num_preemptions_total"][-1]),
    }


_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def parse_cache_config(path: str | Path) -> dict:
    """Read ``block_size`` (tokens) and ``num_gpu_blocks`` from a Prometheus dump holding vllm:cache_config_info."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{p}: not UTF-8 text; expected a Prometheus metrics dump") from None
    m = _CACHE_INFO.search(text)
    if m is None:
        raise DataError(f"{p}: no 'vllm:cache_config_info' line; not a vLLM cache config dump (or truncated)")
    labels = dict(_LABEL.findall(m.group("labels")))
    out: dict[str, float] = {}
    for key in ("block_size", "num_gpu_blocks"):
        if key not in labels:
            raise DataError(f"{p}: vllm:cache_config_info has no label {key!r}")
        try:
            out[key] = int(labels[key])
        except ValueError:
            raise DataError(f"{p}: label {key!r} is {labels[key]!r}, expected an integer") from None
        if out[key] <= 0:
            raise DataError(f"{p}: label {key!r} is {out[key]}, expected > 0")
    try:
        out["gpu_memory_utilization"] = float(labels.get("gpu_memory_utilization", "nan"))
    except ValueError:
        raise DataError(
            f"{p}: label 'gpu_memory_utilization' is {labels['gpu_memory_utilization']!r}"
        ) from None
    return out
