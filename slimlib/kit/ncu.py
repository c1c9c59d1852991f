"""Nsight Compute (ncu): the command that collects the kit's fixed counter list, and a parser of its CSV output.

`ncu_command` profiles chosen decode steps of the harness (``python -m slimlib.kit.harness``, run eagerly
with NVTX ranges ``slim_step``/``slim_attn``/``slim_ffn`` opened in those steps only) for one target:
``attention`` (the decode attention kernel: paper Figs. 6-8, Table I), ``ffn`` (the FFN GEMMs) or ``step``
(every kernel of the step; duration-weighted averages stand in for the paper's whole-phase metrics, Fig. 4).

`parse_ncu_csv` reads ``ncu --csv --page details`` output: a header line ``"ID","Process ID","Process Name",
"Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name",
"Metric Unit","Metric Value"`` (newer versions add rule columns, ignored), one row per kernel launch x metric,
possibly preceded by ``==PROF==`` lines and program output. Values may carry thousands separators ("1,234.5");
units are normalized to seconds, bytes, bytes/second and percent (`UNIT_SCALE`).
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.errors import DataError

# short name -> ncu metric; the fixed list collected at every point
METRICS: dict[str, str] = {
    "duration": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_bytes": "dram__bytes.sum",
    "dram_read_throughput": "dram__bytes_read.sum.per_second",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "hadd": "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "hmul": "sm__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "hfma": "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "fadd": "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "fmul": "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "ffma": "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "tensor_ops_fp16": "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
    "tensor_ops_bf16": "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "l1_hit_pct": "l1tex__t_sector_hit_rate.pct",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "long_scoreboard_pct": "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "tensor_active_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm_issue_pct": "sm__inst_issued.avg.pct_of_peak_sustained_active",
}
# Hopper (compute capability 9.x) runs warpgroup MMA on its own pipe counter
HOPPER_METRICS: dict[str, str] = {
    "tensor_gmma_active_pct": "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
}

TARGETS = {
    # target -> (NVTX range, kernel-name regex or None, kernel launches per layer and step or None = all)
    "attention": ("slim_attn", "flash|fmha|sdpa|attention|attn|softmax", 1),
    "ffn": ("slim_ffn", "gemm|gemv|nvjet|cutlass|xmma", None),
    "step": ("slim_step", None, None),
}

CSV_COLUMNS = (
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
    "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
)  # fmt: skip
_REQUIRED = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "Ki": 1024.0, "Mi": 1024.0**2,
           "Gi": 1024.0**3, "Ti": 1024.0**4}  # fmt: skip
_TIME = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1.0,
         "s": 1.0}  # fmt: skip
_BYTE = re.compile(r"^(Ki|Mi|Gi|Ti|[kKMGTP])?(byte|B)$")


def unit_scale(unit: str) -> tuple[float, str]:
    """(factor, base unit) turning a value in ncu's `unit` into seconds, bytes, bytes/second or a count.

    Known: time (nsecond/usecond/msecond/second and ns/us/ms/s), bytes with SI prefixes (Kbyte = 1e3 byte,
    ncu's convention) or binary ones (KiB), byte rates per second/ms/us/ns, '%', and plain counts ('' , 'inst',
    'cycle', 'warp', 'sector', 'request', 'thread', ...) which are kept as they are. Unknown units are kept
    unscaled with their own name.
    """
    u = (unit or "").strip()
    if u in _TIME:
        return _TIME[u], "second"
    if u == "%":
        return 1.0, "%"
    if "/" in u:
        num, den = u.split("/", 1)
        m = _BYTE.match(num)
        if m and den in _TIME:
            return _PREFIX[m.group(1) or ""] / _TIME[den], "byte/second"
        return 1.0, u
    m = _BYTE.match(u)
    if m:
        return _PREFIX[m.group(1) or ""], "byte"
    return 1.0, u


def _number(text: str) -> float:
    t = str(text).strip().replace(",", "")
    if t.lower() in ("", "n/a", "nan"):
        return float("nan")
    return float(t)


def parse_ncu_csv(source: str | Path | io.TextIOBase) -> pd.DataFrame:
    """Tidy table of an ncu ``--csv --page details`` output: one row per kernel launch x metric.

    Columns: launch (int, ncu's ID), kernel_name, block_size, grid_size, device, cc, section, metric, unit (as
    printed), value (as printed, float), value_si (scaled to `unit_si`), unit_si. `source` is a path or the text.
    Raises DataError naming the line for a missing header, missing columns, short rows or non-numeric values.
    """
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and Path(source).is_file()
    ):
        where = str(source)
        text = Path(source).read_text(encoding="utf-8", errors="replace")
    elif isinstance(source, str):
        where, text = "ncu CSV text", source
    else:
        where, text = "ncu CSV stream", source.read()
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",') and '"Metric Name"' in ln), None)
    if start is None:
        raise DataError(
            f'{where}: no ncu CSV header (a line starting with "ID", holding "Metric Name"); '
            "give the output of `ncu --csv --page details ...` (did ncu fail? see its ==ERROR== lines)"
        )
    reader = csv.reader(lines[start:])
    header = next(reader)
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        raise DataError(f"{where} line {start + 1}: header lacks column(s) {', '.join(missing)}")
    col = {c: header.index(c) for c in header}
    rows = []
    for offset, fields in enumerate(reader, start=start + 2):
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if fields[0].startswith("==PROF==") or fields[0].startswith("==WARNING=="):
            continue
        if len(fields) < len(header):
            raise DataError(f"{where} line {offset}: {len(fields)} fields, the header has {len(header)}")
        raw_value = fields[col["Metric Value"]]
        try:
            value = _number(raw_value)
            launch = int(fields[col["ID"]].replace(",", ""))
        except ValueError:
            raise DataError(
                f"{where} line {offset}: metric {fields[col['Metric Name']]!r} has non-numeric value "
                f"{raw_value!r} (or ID {fields[col['ID']]!r})"
            ) from None
        unit = fields[col["Metric Unit"]]
        factor, unit_si = unit_scale(unit)
        rows.append(
            {
                "launch": launch,
                "kernel_name": fields[col["Kernel Name"]],
                "block_size": fields[col["Block Size"]] if "Block Size" in col else "",
                "grid_size": fields[col["Grid Size"]] if "Grid Size" in col else "",
                "device": fields[col["Device"]] if "Device" in col else "",
                "cc": fields[col["CC"]] if "CC" in col else "",
                "section": fields[col["Section Name"]] if "Section Name" in col else "",
                "metric": fields[col["Metric Name"]],
                "unit": unit,
                "value": value,
                "value_si": value * factor,
                "unit_si": unit_si,
            }
        )
    if not rows:
        raise DataError(
            f"{where}: the ncu CSV has a header but no metric rows (no kernel matched the filters?)"
        )
    return pd.DataFrame(rows)


def counters_wide(long: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel launch with the kit's metrics under short names (`METRICS`), plus derived columns.

    Derived: duration_s; flop = 2 (hfma + ffma) + hadd + hmul + fadd + fmul + tensor ops (fp16 and bf16 paths);
    achieved_flop_s = flop / duration_s; arithmetic_intensity = flop / dram_bytes (FLOP per DRAM byte, Fig. 6).
    Metrics not collected are NaN.
    """
    names = {v: k for k, v in {**METRICS, **HOPPER_METRICS}.items()}
    sub = long[long["metric"].isin(names)].assign(short=lambda d: d["metric"].map(names))
    keys = ["launch", "kernel_name", "block_size", "grid_size", "device", "cc"]
    wide = sub.pivot_table(index=keys, columns="short", values="value_si", aggfunc="first").reset_index()
    wide.columns.name = None
    for short in [*METRICS, *HOPPER_METRICS]:
        if short not in wide.columns:
            wide[short] = np.nan
    zero = lambda c: wide[c].fillna(0.0)  # noqa: E731 - a FLOP counter not collected adds nothing
    wide["flop"] = (
        2 * (zero("hfma") + zero("ffma")) + zero("hadd") + zero("hmul") + zero("fadd") + zero("fmul")
        + zero("tensor_ops_fp16") + zero("tensor_ops_bf16")
    )  # fmt: skip
    wide["duration_s"] = wide["duration"]
    wide["achieved_flop_s"] = wide["flop"] / wide["duration_s"]
    wide["arithmetic_intensity"] = wide["flop"] / wide["dram_bytes"]
    return wide.sort_values("launch", ignore_index=True)


def duration_weighted(wide: pd.DataFrame, columns: list[str] | None = None, by: list[str] | None = None):
    """Duration-weighted mean of percentage metrics over the launches (of each `by` group): the stand-in for the
    paper's whole-decode-phase GPU metrics (Fig. 4). Returns one row per group with total duration_s too."""
    columns = columns or ["dram_throughput_pct", "tensor_active_pct", "sm_issue_pct", "occupancy_pct",
                          "long_scoreboard_pct", "l1_hit_pct", "l2_hit_pct"]  # fmt: skip
    by = list(by or [])

    def one(g: pd.DataFrame) -> dict:
        w = g["duration_s"].to_numpy(dtype=float)
        out = {"duration_s": float(np.nansum(w)), "n_launches": len(g)}
        for c in columns:
            v = g[c].to_numpy(dtype=float)
            ok = np.isfinite(v) & np.isfinite(w)
            out[c] = (
                float(np.sum(v[ok] * w[ok]) / np.sum(w[ok])) if ok.any() and np.sum(w[ok]) > 0 else np.nan
            )
        return out

    if not by:
        return pd.DataFrame([one(wide)])
    rows = [{**dict(zip(by, k if isinstance(k, tuple) else (k,), strict=True)), **one(g)}
            for k, g in wide.groupby(by, sort=True)]  # fmt: skip
    return pd.DataFrame(rows)


def metric_list(compute_capability: str | float | None = None) -> list[str]:
    """The ncu metrics to collect; Hopper (CC 9.x) adds the warpgroup-MMA tensor-pipe counter."""
    out = list(METRICS.values())
    if compute_capability is not None and float(compute_capability) >= 9.0:
        out += list(HOPPER_METRICS.values())
    return out


def ncu_command(
    model: str,
    batch_size: int,
    input_len: int,
    output_len: int,
    *,
    target: str = "attention",
    steps: tuple[int, int] | None = None,
    n_layers: int | None = None,
    log_file: str | Path = "ncu.csv",
    ncu: str = "ncu",
    python: str | None = None,
    dtype: str = "fp16",
    compute_capability: str | float | None = None,
) -> list[str]:
    """argv of one Nsight Compute run of the harness for `target` ('attention', 'ffn' or 'step').

    `steps` = (first decode step, count) to profile, default the last step (context IL + OL - 1). With `n_layers`
    the attention run also gets ``--launch-count`` = layers x steps (one attention kernel per layer and step).
    """
    if target not in TARGETS:
        raise DataError(f"unknown ncu target {target!r}; use one of {', '.join(TARGETS)}")
    first, count = steps if steps is not None else (output_len - 1, 1)
    if not (0 <= first and count >= 1 and first + count <= output_len):
        raise DataError(f"steps {first}:{count} outside the decode of {output_len} steps")
    nvtx_range, regex, per_layer = TARGETS[target]
    cmd = [ncu, "--csv", "--page", "details", "--print-units", "base", "--log-file", str(log_file)]
    cmd += ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    cmd += ["--metrics", ",".join(metric_list(compute_capability))]
    if regex:
        cmd += ["--kernel-name", f"regex:{regex}"]
    cmd += ["--launch-skip", "0"]
    if per_layer is not None and n_layers:
        cmd += ["--launch-count", str(per_layer * n_layers * count)]
    cmd += [python or sys.executable, "-m", "slimlib.kit.harness", "--model", model]
    cmd += ["--batch-size", str(batch_size), "--input-len", str(input_len), "--output-len", str(output_len)]
    cmd += ["--device", "cuda", "--dtype", dtype, "--no-cuda-graphs", "--nvtx-steps", f"{first}:{count}"]
    return cmd
