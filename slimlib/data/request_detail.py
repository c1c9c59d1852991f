"""The waves of a closed-loop campaign run with per-request detail (`slim bench run --detailed`): when each request
was sent and when its first token came, wave by wave.

A run of k waves of B clients (``--max-concurrency B``, ``num_prompts = k B``) sends its requests in order, so wave
``w`` is requests ``w B`` to ``(w + 1) B - 1``. Per wave (`wave_table`): how far apart its requests were sent
(``spread_ms``), its first-sent request (the leader) and when the leader's first token came against the others'.
This is the evidence behind the scheduler replay's rule that an idle engine starts its step with the first arrival
alone (`slimlib.model.schedule`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.errors import DataError

__all__ = ["WAVE_COLUMNS", "SAME_STEP_MS", "wave_table", "waves_of_result"]

#: first tokens this close (ms) to the leader's came in the leader's step
SAME_STEP_MS = 1.0

WAVE_COLUMNS = (
    "model", "batch_size", "input_len", "output_len", "repeat", "wave", "requests", "spread_ms", "leader_ttft_ms",
    "others_ttft_ms", "others_after_leader_ms", "with_leader",
)  # fmt: skip


def _lists(path: Path, res: dict, n: int) -> dict[str, np.ndarray]:
    out = {}
    for key in ("start_times", "ttfts"):
        v = res.get(key)
        if not isinstance(v, list) or len(v) != n:
            raise DataError(
                f"{path}: '{key}' is missing or does not hold one value per request ({n}); run the campaign with "
                "--detailed (vllm bench serve --save-detailed)"
            )
        ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
        a = np.asarray(v, dtype=float) if ok else np.array([np.nan])
        if not np.isfinite(a).all() or (a < 0).any():
            raise DataError(
                f"{path}: '{key}' holds a value that is not a finite time >= 0 in seconds; re-run the configuration"
            )
        out[key] = a
    return out


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def waves_of_result(path: str | Path) -> pd.DataFrame:
    """`WAVE_COLUMNS` (``model`` to ``repeat`` left to the caller) for one ``--save-detailed`` result file; DataError
    naming the file and field for a run with failed requests, no detail or a count that is not whole waves."""
    p = Path(path)
    try:
        res = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(
            f"{p}: not a readable result JSON ({exc}); give a result file of `vllm bench serve`"
        ) from None
    if not isinstance(res, dict):
        raise DataError(f"{p}: not a result of `vllm bench serve` (the JSON is not an object)")
    b, n = res.get("max_concurrency"), res.get("completed")
    if b is None:
        raise DataError(f"{p}: no 'max_concurrency': not a closed-loop run; run it with --max-concurrency B")
    if not _whole(b) or not _whole(n):
        raise DataError(f"{p}: 'max_concurrency' ({b!r}) and 'completed' ({n!r}) must be whole numbers >= 1")
    if res.get("failed", 0) or n % b:
        raise DataError(
            f"{p}: {res.get('failed', 0)} failed requests, {n} completed at concurrency {b}: the waves are not "
            "whole; re-run the configuration"
        )
    lists = _lists(p, res, n)
    start = lists["start_times"] * 1000.0
    first = start + lists["ttfts"] * 1000.0
    rows = []
    for w in range(n // b):
        s, f = start[w * b : (w + 1) * b], first[w * b : (w + 1) * b]
        lead = int(np.argmin(s))
        others = np.delete(np.arange(b), lead)
        rows.append({
            "wave": w, "requests": b, "spread_ms": float(s.max() - s.min()),
            "leader_ttft_ms": float(f[lead] - s[lead]),
            "others_ttft_ms": float(np.median(f[others] - s[others])) if others.size else np.nan,
            "others_after_leader_ms": float(np.median(f[others]) - f[lead]) if others.size else np.nan,
            "with_leader": int((np.abs(f - f[lead]) <= SAME_STEP_MS).sum()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def wave_table(campaign_dir: str | Path) -> pd.DataFrame:
    """`WAVE_COLUMNS` for every result of the campaign folder `campaign_dir` (its ``plan.csv`` names the model,
    lengths and repeat of each ``results/<file>``), in the plan's order."""
    root = Path(campaign_dir)
    plan_path = root / "plan.csv"
    if not plan_path.is_file():
        raise DataError(f"{root}: no plan.csv; give a campaign folder written by `slim bench run`")
    plan = pd.read_csv(plan_path)
    missing = [c for c in ("file", *WAVE_COLUMNS[:5]) if c not in plan.columns]
    if missing:
        raise DataError(
            f"{plan_path}: no column {', '.join(missing)}; give the plan.csv `slim bench run` ran"
        )
    parts = []
    for _, row in plan.iterrows():
        path = root / "results" / str(row["file"])
        if not path.is_file():
            raise DataError(
                f"{path}: planned run has no result; finish the campaign (rerun `slim bench run`)"
            )
        w = waves_of_result(path)
        for c in ("model", "batch_size", "input_len", "output_len", "repeat"):
            w[c] = row[c]
        parts.append(w)
    if not parts:
        raise DataError(f"{plan_path}: no planned runs")
    return pd.concat(parts, ignore_index=True)[list(WAVE_COLUMNS)]
