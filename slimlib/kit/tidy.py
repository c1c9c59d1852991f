"""Tidy tables from a campaign folder (``manifest.json``, runs.csv, kernels.csv, ncu_*.csv).

Tables, with the column conventions of ``data/`` (units in names; ``_gib`` is GiB, 2**30 bytes):

* ``kit-runs``: one row per measured point: model, gpu, batch_size, input_len, output_len, throughput_tok_s
  (Eq. 6), e2e_s, prefill_s, decode_s, step_{mean,median,p90,min,max}_ms, peak_allocated_gib (empty on CPU),
  kv_cache_gib, weight_gib, dtype, device, device_name, cuda_graphs, groups, engine.
* ``kit-kernels``: one row per point x category (attention, gemm, norm_elementwise, other): the decode-step time
  per category (time_per_step_ms, over the profiled steps) and its share (paper Fig. 5).
* ``kit-counters``: one row per profiled kernel launch: the point, the ncu target, kernel name and the kit's
  counters (`slimlib.kit.ncu.counters_wide`; paper Figs. 4, 6-8, Table I).

Rows are sorted by their keys, so the same raw folder always gives byte-identical CSVs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from slimlib.errors import DataError
from slimlib.io import write_csv
from slimlib.kit.kernel_classes import kernel_breakdown
from slimlib.kit.ncu import counters_wide, parse_ncu_csv
from slimlib.registry.gpus import GIB

KEYS = ["model", "gpu", "batch_size", "input_len", "output_len"]
RUN_COLUMNS = [
    *KEYS, "throughput_tok_s", "e2e_s", "prefill_s", "decode_s", "step_mean_ms", "step_median_ms",
    "step_p90_ms", "step_min_ms", "step_max_ms", "peak_allocated_gib", "kv_cache_gib", "weight_gib", "dtype",
    "device", "device_name", "cuda_graphs", "groups", "engine",
]  # fmt: skip


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(
            f"{path}: not a readable campaign CSV ({exc}); rerun the campaign or remove it"
        ) from None


def _point_keys(manifest: dict) -> pd.DataFrame:
    rows = [{"point_id": r["point_id"], "model": r["model"], "batch_size": int(r["batch_size"]),
             "input_len": int(r["input_len"]), "output_len": int(r["output_len"])}
            for r in manifest.get("points", [])]  # fmt: skip
    return pd.DataFrame(rows, columns=["point_id", "model", "batch_size", "input_len", "output_len"])


def build_profiling_tables(raw_dir: str | Path) -> tuple[dict[str, pd.DataFrame], list[Path]]:
    """Tables 'kit-runs', 'kit-kernels', 'kit-counters' from a campaign folder, and the raw files read.

    Raises DataError when the folder has no manifest.json or a file lacks the columns it should have.
    """
    raw = Path(raw_dir)
    mpath = raw / "manifest.json"
    if not mpath.is_file():
        raise DataError(f"{raw}: no manifest.json; give the folder a `slim profile campaign --out DIR` wrote")
    try:
        manifest = json.loads(mpath.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{mpath}: not valid JSON ({exc})") from None
    gpu = manifest.get("gpu") or "cpu"
    used = [mpath]
    tables: dict[str, pd.DataFrame] = {}

    rpath = raw / "runs.csv"
    if rpath.is_file():
        runs = _read_csv(rpath)
        used.append(rpath)
        need = [*KEYS[:1], *KEYS[2:], "prefill_s", "decode_s", "kv_cache_bytes", "weight_bytes"]
        missing = [c for c in need if c not in runs.columns]
        if missing:
            raise DataError(f"{rpath}: lacks column(s) {', '.join(missing)}")
        runs = runs.copy()
        runs["gpu"] = runs["gpu"].fillna(gpu) if "gpu" in runs.columns else gpu
        for b in ("peak_allocated", "kv_cache", "weight"):
            runs[f"{b}_gib"] = runs[f"{b}_bytes"] / GIB
        runs = runs.reindex(columns=RUN_COLUMNS)
        tables["kit-runs"] = runs.sort_values(KEYS, ignore_index=True)
    else:
        tables["kit-runs"] = pd.DataFrame(columns=RUN_COLUMNS)

    kpath = raw / "kernels.csv"
    kcols = [*KEYS, "category", "time_per_step_ms", "share", "profiled_steps"]
    if kpath.is_file():
        k = _read_csv(kpath)
        used.append(kpath)
        missing = [c for c in ("point_id", "name", "duration_us", "profiled_steps") if c not in k.columns]
        if missing:
            raise DataError(f"{kpath}: lacks column(s) {', '.join(missing)}")
        br = kernel_breakdown(k, by=["point_id"])
        steps = k.groupby("point_id")["profiled_steps"].first()
        br["profiled_steps"] = br["point_id"].map(steps).astype(int)
        br["time_per_step_ms"] = br["duration"] / 1e3 / br["profiled_steps"]
        br = br.merge(_point_keys(manifest), on="point_id", how="left")
        br["gpu"] = gpu
        order = {c: i for i, c in enumerate(("attention", "gemm", "norm_elementwise", "other"))}
        br = br.assign(_c=br["category"].map(order)).sort_values([*KEYS, "_c"], ignore_index=True)
        tables["kit-kernels"] = br[kcols]
    else:
        tables["kit-kernels"] = pd.DataFrame(columns=kcols)

    tables["kit-counters"], ncu_files = _counters(raw, manifest, gpu)
    used += ncu_files
    return tables, sorted(used)


def _counters(raw: Path, manifest: dict, gpu: str) -> tuple[pd.DataFrame, list[Path]]:
    frames, used = [], []
    for rec in manifest.get("points", []):
        if rec.get("kind") != "counters" or rec.get("status") != "done" or not rec.get("file"):
            continue
        path = raw / rec["file"]
        if not path.is_file():
            raise DataError(f"{path}: named in manifest.json for {rec['point_id']} but missing")
        wide = counters_wide(parse_ncu_csv(path))
        used.append(path)
        head = {"model": rec["model"], "gpu": gpu, "batch_size": int(rec["batch_size"]),
                "input_len": int(rec["input_len"]), "output_len": int(rec["output_len"]),
                "target": rec.get("target", "")}  # fmt: skip
        frames.append(wide.assign(**head))
    if not frames:
        return pd.DataFrame(columns=[*KEYS, "target", "launch", "kernel_name"]), used
    df = pd.concat(frames, ignore_index=True)
    front = [*KEYS, "target", "launch", "kernel_name"]
    df = df[front + [c for c in df.columns if c not in front]]
    return df.sort_values([*KEYS, "target", "launch"], ignore_index=True), used


def write_tables(tables: dict[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    """Write each table as ``<name>.csv`` (fixed float format, '\\n' line ends); returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in sorted(tables):
        p = out / f"{name}.csv"
        write_csv(tables[name], p, float_format="%.9g")
        paths.append(p)
    return paths
