"""Parsers of nvidia-smi telemetry CSVs: the ``--query-gpu`` log and the ``dmon`` log, both sampled about 1 Hz."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.data.engine_metrics import read_csv_checked
from slimlib.errors import DataError
from slimlib.registry.gpus import GIB

MIB = 1024**2
#: query column -> unit suffix each value must carry
QUERY_COLUMNS = {
    "memory.total [MiB]": "MiB",
    "memory.used [MiB]": "MiB",
    "utilization.gpu [%]": "%",
    "utilization.memory [%]": "%",
}
#: dmon column -> unit on its second header line
DMON_COLUMNS = {"time": "s", "pwr": "W", "sm": "%", "mem": "%", "mclk": "MHz", "pclk": "MHz"}


def _strip_unit(path: Path, col: str, series: pd.Series, unit: str) -> np.ndarray:
    text = series.astype(str).str.strip()
    ok = text.str.endswith(" " + unit)
    if not ok.all():
        row = int(np.flatnonzero(~ok.to_numpy())[0])
        raise DataError(
            f"{path}: line {row + 2}, column {col!r} is {text.iloc[row]!r}, expected a value in {unit}"
        )
    values = pd.to_numeric(text.str.slice(0, -len(unit) - 1), errors="coerce")
    if values.isna().any():
        row = int(np.flatnonzero(values.isna().to_numpy())[0])
        raise DataError(f"{path}: line {row + 2}, column {col!r} is {text.iloc[row]!r}, expected a number")
    return values.to_numpy(dtype=float)


def summarize_query_csv(path: str | Path) -> dict:
    """Summary of an nvidia-smi query CSV: ``n_samples``, ``mem_total_gib``, ``mem_used_max_gib`` (GiB, 2**30 bytes),
    ``gpu_util_mean_pct`` / ``mem_util_mean_pct`` over busy samples (GPU utilization > 0), ``busy_samples``."""
    p = Path(path)
    df = read_csv_checked(p, "an nvidia-smi --query-gpu CSV", skipinitialspace=True)
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in QUERY_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(
            f"{p}: missing column(s) {', '.join(missing)}; not an nvidia-smi query CSV with units"
        )
    v = {c: _strip_unit(p, c, df[c], unit) for c, unit in QUERY_COLUMNS.items()}
    util = v["utilization.gpu [%]"]
    busy = util > 0
    return {
        "n_samples": int(len(df)),
        "busy_samples": int(busy.sum()),
        "mem_total_gib": float(v["memory.total [MiB]"].max() * MIB / GIB),
        "mem_used_max_gib": float(v["memory.used [MiB]"].max() * MIB / GIB),
        "gpu_util_mean_pct": float(util[busy].mean()) if busy.any() else 0.0,
        "mem_util_mean_pct": float(v["utilization.memory [%]"][busy].mean()) if busy.any() else 0.0,
    }


def summarize_dmon_csv(path: str | Path) -> dict:
    """Summary of an nvidia-smi dmon CSV (second line holds units): busy samples are those with SM activity > 0.

    Returns ``dmon_samples``, ``sm_mean_pct`` and ``dram_mean_pct`` (busy), ``power_mean_w`` (busy), ``power_max_w``,
    ``sm_clock_mean_mhz`` and ``mem_clock_mean_mhz`` (busy)."""
    p = Path(path)
    df = read_csv_checked(p, "an nvidia-smi dmon CSV", skipinitialspace=True, dtype=str)
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in DMON_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{p}: missing column(s) {', '.join(missing)}; not an nvidia-smi dmon CSV")
    units = df.iloc[0]
    for col, unit in DMON_COLUMNS.items():
        if str(units[col]).strip() != unit:
            raise DataError(f"{p}: line 2, column {col!r} has unit {units[col]!r}, expected {unit!r}")
    body = df.iloc[1:]
    if len(body) == 0:
        raise DataError(f"{p}: header only, no samples (expected an nvidia-smi dmon CSV)")
    v = {}
    for col in DMON_COLUMNS:
        values = pd.to_numeric(body[col].str.strip(), errors="coerce")
        if values.isna().any():
            row = int(np.flatnonzero(values.isna().to_numpy())[0])
            raise DataError(
                f"{p}: line {row + 3}, column {col!r} is {body[col].iloc[row]!r}, expected a number"
            )
        v[col] = values.to_numpy(dtype=float)
    busy = v["sm"] > 0

    def busy_mean(a: np.ndarray) -> float:
        return float(a[busy].mean()) if busy.any() else 0.0

    return {
        "dmon_samples": int(len(body)),
        "sm_mean_pct": busy_mean(v["sm"]),
        "dram_mean_pct": busy_mean(v["mem"]),
        "power_mean_w": busy_mean(v["pwr"]),
        "power_max_w": float(v["pwr"].max()),
        "sm_clock_mean_mhz": busy_mean(v["pclk"]),
        "mem_clock_mean_mhz": busy_mean(v["mclk"]),
    }
