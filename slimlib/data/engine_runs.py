"""Tidy table of a real-engine campaign (`slim bench run` / `slim bench campaign`): one row per result file.

Reads ``<campaign>/results/*.json`` with the project's one ingest path (`slimlib.data.ingest`, settings from the
campaign's ``slim-runs.csv`` sidecar), checks every file against the manifest's sha256, and adds the labels a
measurement on random weights needs: ``engine`` (name and version), ``weights`` and ``repeat``. Planned rows
that were skipped or failed are returned separately with their reasons (`exclusions`), never dropped silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from slimlib.data.ingest import ingest
from slimlib.errors import DataError
from slimlib.kit.vllm_runner import MANIFEST, sha256_file

__all__ = ["engine_table", "exclusions", "RUN_COLUMNS"]

RUN_COLUMNS = (
    "model", "gpu", "engine", "weights", "batch_size", "input_len", "output_len", "repeat", "throughput_tok_s",
    "e2e_s", "mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "request_throughput_req_s", "output_throughput_tok_s",
    "duration_s", "num_prompts", "completed", "failed", "max_concurrency", "source_file", "sha256",
)  # fmt: skip


def _manifest(root: Path) -> dict:
    p = root / MANIFEST
    if not p.is_file():
        raise DataError(f"{root}: no {MANIFEST}; give the output folder of `slim bench run`")
    return json.loads(p.read_text(encoding="utf-8"))


def _engine_label(manifest: dict) -> tuple[str, str]:
    sessions = manifest.get("sessions", [])
    versions = sorted({f"{s.get('engine', 'vllm')} {s.get('engine_version', '?')}" for s in sessions})
    dummy = {bool(s.get("dummy_weights")) for s in sessions}
    if len(versions) != 1 or len(dummy) != 1:
        raise DataError(f"the campaign mixes engines or weight kinds across sessions: {versions}, {dummy}; "
                        "measure it with one engine")  # fmt: skip
    return versions[0], "random (--load-format dummy)" if dummy.pop() else "checkpoint"


def engine_table(campaign_dir: str | Path) -> pd.DataFrame:
    """The tidy runs of one campaign folder (columns `RUN_COLUMNS`, sorted by model, IL, OL, repeat, B)."""
    root = Path(campaign_dir)
    manifest = _manifest(root)
    results = root / "results"
    df = ingest(results)
    sums = {r["file"]: r["sha256"] for r in manifest.get("results", [])}
    shas = []
    for f in df["source_file"]:
        got = sha256_file(results / f)
        if sums.get(f) != got:
            raise DataError(f"{results / f}: sha256 {got[:12]}... is not the manifest's "
                            f"({str(sums.get(f, 'missing'))[:12]}...); the file changed after the campaign")  # fmt: skip
        shas.append(got)
    df["sha256"] = shas
    df["repeat"] = [int(json.loads((results / f).read_text(encoding="utf-8")).get("repeat", 0))
                    for f in df["source_file"]]  # fmt: skip
    df["engine"], df["weights"] = _engine_label(manifest)
    df["input_len"] = df["input_len"].round().astype(int)
    df["output_len"] = df["output_len"].round().astype(int)
    df = df.sort_values(["model", "input_len", "output_len", "repeat", "batch_size"], kind="mergesort")
    return df.loc[:, list(RUN_COLUMNS)].reset_index(drop=True)


def exclusions(campaign_dir: str | Path) -> pd.DataFrame:
    """Planned configurations without a result: file, status (skipped or failed) and reason, from the manifest."""
    manifest = _manifest(Path(campaign_dir))
    have = {r["file"] for r in manifest.get("results", [])}
    rows = {}
    for s in manifest.get("sessions", []):
        for status in ("skipped", "failed"):
            for f, why in s.get(status, {}).items():
                if f not in have:
                    rows[f] = {"file": f, "status": status, "reason": why}
    return pd.DataFrame(sorted(rows.values(), key=lambda r: r["file"]), columns=["file", "status", "reason"])
