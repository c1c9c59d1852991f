"""Rebuild every tidy table in `data/` from the raw mirrors, byte-identically (`slim data build --raw DIR`).

Output: one CSV per table (schema column order, stable row order, floats as ``%.10g``, ``\\n`` line ends),
`raw_manifest.csv` (path, bytes, sha256 of every raw file read) and `README.md` generated from the schema.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from slimlib.data.aiconfigurator import AIC_NAME, build_aic_tables, readme_section
from slimlib.data.aiconfigurator import SOURCE as AIC_SOURCE
from slimlib.data.aiconfigurator_layers import build_layer_tables, layers_readme_section
from slimlib.data.aiconfigurator_moe import build_moe_mla_tables, moe_readme_section
from slimlib.data.aiter import AITER_NAME, aiter_readme_section, build_aiter_tables
from slimlib.data.aiter import SOURCE as AITER_SOURCE
from slimlib.data.catalog import SCHEMA, _file_name, coerce, data_dir
from slimlib.data.engine_runs import CAMPAIGNS, build_engine_tables, campaign_tables
from slimlib.data.engine_runs import readme_lines as engine_readme
from slimlib.data.llmib import LLMIB_NAME, build_llmib_tables
from slimlib.data.markdown import count_table
from slimlib.data.memgap import MIRROR_NAME, build_memgap_tables, find_mirror
from slimlib.data.vidur import build_vidur_tables
from slimlib.errors import DataError
from slimlib.kit.tidy import KEYS, build_profiling_tables
from slimlib.kit.vllm_runner import MANIFEST, sha256_file

FLOAT_FORMAT = "%.10g"
VIDUR_NAME = "vidur-profiling"

SOURCES = {
    MIRROR_NAME: (
        "FerranAgulloLopez/vLLMBatchingMemoryGap",
        "a9186347e6146b4547ed25674b4e9034eb1e9abf",
        "Apache-2.0",
        "Recasens, Agullo, et al., Mind the Memory Gap (arXiv:2503.08311): vLLM online/offline runs, 64 GB H100",
    ),
    VIDUR_NAME: (
        "microsoft/vidur",
        "7d47513363ec447a741ac5e47241580b47724fbf (compute/), e2d00e9afba96cec9f0e7ea560bbfc4a539fae6a (legacy)",
        "MIT",
        "Vidur operator profiles (A100/H100 80 GB)",
    ),
    AIC_NAME: AIC_SOURCE,
    AITER_NAME: AITER_SOURCE,
    LLMIB_NAME: (
        "argonne-lcf/LLM-Inference-Bench",
        "4211f5d4e9bc0145ed541b6d372d5d8223b44235",
        "BSD-3-Clause",
        "Chitty-Venkata et al., LLM-Inference-Bench (arXiv:2411.00136): vLLM on AMD MI250/MI300X, other accelerators",
    ),
}


def write_data_table(df: pd.DataFrame, path: Path) -> None:
    """Write `df` deterministically: no index, fixed float format, '\\n' line ends, empty cells for missing."""
    df.to_csv(path, index=False, float_format=FLOAT_FORMAT, lineterminator="\n", na_rep="")


def _campaign_row(name: str, manifest: dict) -> dict:
    points = manifest.get("points", [])
    count = lambda status: sum(p.get("status") == status for p in points)  # noqa: E731
    row = {k: manifest.get(k) for k in ("engine", "gpu", "device", "gpu_name", "compute_capability",
                                        "driver_version", "cuda_version", "torch_version", "slimlib_version",
                                        "dtype", "cuda_graphs", "budget_s", "wall_s", "date_utc", "command",
                                        "status")}  # fmt: skip
    row = {k: (None if v == "" else v) for k, v in row.items()}
    return {"campaign": name, **row, "n_points": len(points), "n_done": count("done"),
            "n_failed": count("failed"), "n_skipped": count("skipped"), "n_not_run": count("not-run")}  # fmt: skip


def build_kit_tables(
    kit_dirs: list[str | Path], data_root: str | Path | None = None
) -> tuple[dict[str, pd.DataFrame], list[tuple[Path, str]]]:
    """The GPU kit's tables (kit-campaigns, kit-runs, kit-kernels, kit-counters) from campaign folders written by
    `slim profile campaign`, and the raw files read as (path, manifest path). Each row carries its folder name in
    `campaign`; a file's manifest path is relative to `data_root` when the folder lies inside it, else
    ``<folder name>/<file>``. Raises DataError for two folders of the same name or a folder without manifest."""

    root = Path(data_root).resolve() if data_root is not None else None
    parts: dict[str, list[pd.DataFrame]] = {"kit-runs": [], "kit-kernels": [], "kit-counters": []}
    campaigns, files = [], []
    seen: dict[str, Path] = {}
    for d in sorted((Path(k) for k in kit_dirs), key=lambda p: p.resolve().as_posix()):
        name = d.resolve().name
        if name in seen:
            raise DataError(f"kit folders {seen[name]} and {d} share the name {name!r}; rename one (the name "
                            "identifies the campaign in the tables)")  # fmt: skip
        seen[name] = d
        tables, used = build_profiling_tables(d)
        manifest = json.loads((d / "manifest.json").read_text())
        campaigns.append(_campaign_row(name, manifest))
        for tname, frame in tables.items():
            parts[tname].append(frame.assign(campaign=name))
        for f in used:
            rel = None
            if root is not None:
                try:
                    rel = f.resolve().relative_to(root).as_posix()
                except ValueError:
                    rel = None
            files.append((f, rel or f"{name}/{f.resolve().relative_to(d.resolve()).as_posix()}"))
    out = {"kit-campaigns": pd.DataFrame(campaigns, columns=list(SCHEMA["kit-campaigns"][1]))}
    sort_extra = {"kit-runs": [], "kit-kernels": [], "kit-counters": ["target", "launch"]}
    for tname, frames in parts.items():
        cols = list(SCHEMA[tname][1])
        nonempty = [f.reindex(columns=cols) for f in frames if len(f)]
        df = pd.concat(nonempty, ignore_index=True) if nonempty else pd.DataFrame(columns=cols)
        keys = [*KEYS, *sort_extra[tname], "campaign"]
        if tname == "kit-kernels":  # keep the category order of each point
            df = df.assign(_i=range(len(df))).sort_values([*KEYS, "campaign", "_i"], kind="mergesort")
            df = df.drop(columns="_i")
        else:
            df = df.sort_values(keys, kind="mergesort")
        out[tname] = df.reset_index(drop=True)
    return out, files


def _engine_sessions(campaign: str) -> list[Path]:
    """The committed sessions of a CPU-engine campaign (its `CAMPAIGNS` folders of data/ with a manifest)."""
    return [data_dir() / name for name in CAMPAIGNS[campaign] if (data_dir() / name / MANIFEST).is_file()]


def _provenance(root: Path) -> list[Path]:
    """The mirror folder's own PROVENANCE.md where it has one (read by the build, listed in the manifest)."""
    prov = root / "PROVENANCE.md"
    return [prov] if prov.is_file() else []


def build_all(raw: str | Path, out: str | Path, kit: list[str | Path] | None = None) -> dict[str, Path]:
    """Parse the raw mirrors under `raw` (the data root holding vllm-batching-memory-gap/ and vidur-profiling/,
    or the memgap mirror itself) and write every table into `out`; returns table name -> written path.

    `kit`: campaign folders of the GPU characterization kit; when given, their tables (`build_kit_tables`) are
    written too and their raw files enter the manifest. Without it the output is exactly that of the mirrors."""
    mirror = find_mirror(raw)
    data_root = mirror.parent
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables, files = build_memgap_tables(mirror)
    vidur_root = data_root / VIDUR_NAME
    if vidur_root.is_dir():
        vt, vfiles = build_vidur_tables(vidur_root)
        tables.update(vt)
        files = files + list(vfiles) + _provenance(vidur_root)
    aic_root = data_root / AIC_NAME
    if aic_root.is_dir():
        at, afiles = build_aic_tables(aic_root)
        tables.update(at)
        mt, mfiles = build_moe_mla_tables(aic_root)
        tables.update(mt)
        lt, lfiles = build_layer_tables(aic_root)
        tables.update(lt)
        files = files + list(afiles) + list(mfiles) + list(lfiles)
    aiter_root = data_root / AITER_NAME
    if aiter_root.is_dir():
        it, ifiles = build_aiter_tables(aiter_root)
        tables.update(it)
        files = files + list(ifiles) + _provenance(aiter_root)
    llmib_root = data_root / LLMIB_NAME
    if llmib_root.is_dir():
        lt, lfiles = build_llmib_tables(llmib_root)
        tables.update(lt)
        files = files + list(lfiles)
    for campaign in CAMPAIGNS:  # the project's own CPU-engine campaigns, committed in data/
        sessions = _engine_sessions(campaign)
        if sessions:
            tables.update(build_engine_tables(*sessions, campaign=campaign))
    rows = []
    for f in sorted(set(files), key=lambda p: p.as_posix()):
        try:
            rel = f.resolve().relative_to(data_root.resolve()).as_posix()
        except ValueError:
            raise DataError(f"{f}: raw file outside the data root {data_root}") from None
        rows.append({"path": rel, "bytes": f.stat().st_size, "sha256": sha256_file(f)})
    if kit:
        kit_tables, kit_files = build_kit_tables(kit, data_root)
        tables.update(kit_tables)
        known = {r["path"] for r in rows}
        for f, rel in kit_files:  # a file can serve several points
            if rel not in known:
                known.add(rel)
                rows.append({"path": rel, "bytes": f.stat().st_size, "sha256": sha256_file(f)})
        rows.sort(key=lambda r: str(r["path"]))
    tables["raw-manifest"] = pd.DataFrame(rows, columns=["path", "bytes", "sha256"])
    written = {}
    for name in sorted(tables):
        if name not in SCHEMA:
            raise DataError(f"table {name!r} has no schema entry in slimlib.data.catalog.SCHEMA")
        path = out_dir / _file_name(name)
        write_data_table(coerce(name, tables[name]), path)
        written[name] = path
    readme = out_dir / "README.md"
    readme.write_text(render_readme(tables, written), encoding="utf-8", newline="\n")
    written["README"] = readme
    return written


def render_readme(tables: dict[str, pd.DataFrame], written: dict[str, Path]) -> str:
    """Markdown documenting sources, tables, columns (from SCHEMA), row counts and the raw-file manifest."""
    lines = [
        "# data/: tidy tables derived from raw measurements",
        "",
        "Generated by `slim data build --raw ../shared/data` (do not edit by hand; the rebuild is byte-identical).",
        "Load a table with `slimlib.data.load(name)`; `slimlib.data.load_fit_table(...)` gives the columns",
        "`slim fit` reads. Units are in column names (`_s`, `_ms`, `_tok_s`, `_gib`, `_pct`, `_w`, `_mhz`, `_frac`);",
        "`_gib` is GiB (2**30 bytes) in every table.",
        "",
        "## Sources",
        "",
        "| raw folder | upstream repository | commit | licence | what |",
        "|---|---|---|---|---|",
    ]
    for folder, (repo, commit, lic, what) in SOURCES.items():
        lines.append(f"| `{folder}/` | https://github.com/{repo} | {commit} | {lic} | {what} |")
    manifest = tables["raw-manifest"]
    digest = hashlib.sha256(written["raw-manifest"].read_bytes()).hexdigest()
    lines += [
        "",
        f"`raw_manifest.csv` lists the path (relative to the raw data root), size and sha256 of each of the "
        f"{len(manifest)} raw files read ({int(manifest['bytes'].sum())} bytes); its own sha256 is `{digest}`.",
        "",
        "## Tables",
        "",
    ]
    for name in sorted(written):
        if name == "README":
            continue
        desc, spec = SCHEMA[name]
        lines += [f'### `{_file_name(name)}` (`load("{name}")`, {len(tables[name])} rows)', "", desc, ""]
        lines += ["| column | dtype | meaning |", "|---|---|---|"]
        lines += [f"| `{c}` | {dt} | {doc} |" for c, (dt, doc) in spec.items()]
        lines.append("")
    lines += ["## Row counts", "", "memgap-online by family:", ""]
    lines.append(count_table(tables["memgap-online"], ["family", "subfamily"]))
    lines += ["memgap-offline by family and profiler:", ""]
    lines.append(count_table(tables["memgap-offline"], ["family", "profiler"]))
    lines += ["memgap-exclusions by reason (in_table empty: the run is in no table):", ""]
    lines.append(count_table(tables["memgap-exclusions"], ["reason", "in_table"]))
    if "llmib-runs" in tables:
        lines += ["llmib-runs by GPU and tensor-parallel degree:", ""]
        lines.append(count_table(tables["llmib-runs"], ["gpu", "tensor_parallel"]))
        lines += ["llmib-exclusions by reason:", ""]
        lines.append(count_table(tables["llmib-exclusions"], ["reason"]))
    if "kit-campaigns" in tables:
        lines += _kit_readme(tables)
    if "aic-systems" in tables:
        lines += readme_section(tables)
    if "aic-moe" in tables:
        lines += moe_readme_section(tables)
    if "aic-gdn" in tables:
        lines += layers_readme_section(tables)
    if "aiter-gemm" in tables:
        lines += aiter_readme_section(tables)
    for campaign in CAMPAIGNS:
        if campaign_tables(campaign)[0] in tables:
            lines += [*engine_readme(tables, _engine_sessions(campaign), campaign), ""]
    lines += [
        "## Notes",
        "",
        "- Advisor input lengths are fixed by the dataset (242 tokens OPT, 250 Llama): the build checks them against",
        "  total_input_tokens/completed and the output length against the config (Llama counts one extra token).",
        "- Replicated runs: throughput is the sum over servers; mean_running_batch is per replica;",
        "  gpu_blocks is summed over servers.",
        "- Runs under Nsight Compute (offline attention_kernel/*) stay in memgap-offline with timing_valid=false and",
        "  are listed in the exclusions (profiler_inflated_timing). Preempted runs stay flagged (preempted=true).",
        "- The mirror's engine CSVs sometimes reset generation_tokens_total to 0 mid-run; that counter is not used.",
        "- LLM-Inference-Bench: an 'AMD MI250 GPU' is a whole card of two 64 GB dies; its runs used tensor parallel",
        "  2 x Num of Hardware (Mixtral-8x7B, 87 GiB, runs on one; the 70B models, >128 GiB, on two), so gpu =",
        "  mi250-gcd and tensor_parallel = 2 x n_hardware. Of repeated configurations the first run is kept.",
        "- `peers/llmib-peer-predictions.csv` is not built here: `slim peers --out` writes it (predictions of GenZ,",
        "  llm-analysis and AIConfigurator on the peer-comparison rows, each with the tool, version and exact call).",
        "",
    ]
    return "\n".join(lines)


def _kit_readme(tables: dict[str, pd.DataFrame]) -> list[str]:
    """README section on the GPU-kit campaigns: where, with what, by which command; what the kit measures."""
    camp = tables["kit-campaigns"]
    lines = [
        "## GPU characterization kit (kit-* tables)",
        "",
        "The kit-* tables come from `slim profile campaign` folders built in with `slim data build --kit DIR`. The",
        "kit measures slimlib's minimal static-batch PyTorch engine with random weights (prefill, then decode",
        "steps over a preallocated KV cache, SDPA attention): it characterizes kernels and the GPU, it is not vLLM,",
        "and its throughputs are not vLLM serving throughputs. Counters come from Nsight Compute (ncu) over the",
        "last decode step of a point. Campaigns (from each folder's manifest.json):",
        "",
        "| campaign | device | GPU | driver | CUDA | torch | dtype | CUDA graphs | date (UTC) | points done/all |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def na(v: object) -> str:
        return "" if pd.isna(v) else str(v)

    for r in camp.itertuples(index=False):
        gpu: str = na(r.gpu_name) or na(r.gpu)
        if na(r.compute_capability):
            gpu += f" (CC {r.compute_capability})"
        lines.append(f"| {r.campaign} | {na(r.device)} | {gpu} | {na(r.driver_version)} | {na(r.cuda_version)} "
                     f"| {na(r.torch_version)} | {na(r.dtype)} | {na(r.cuda_graphs)} | {na(r.date_utc)} "
                     f"| {r.n_done}/{r.n_points} |")  # fmt: skip
    lines += ["", "Commands:", ""]
    lines += [f"- {r.campaign}: `{na(r.command)}`" for r in camp.itertuples(index=False)]
    lines += ["", "kit-runs by campaign and device:", ""]
    lines.append(count_table(tables["kit-runs"], ["campaign", "device"]))
    lines += ["kit-counters by campaign and ncu target:", ""]
    lines.append(count_table(tables["kit-counters"], ["campaign", "target"]))
    return lines
