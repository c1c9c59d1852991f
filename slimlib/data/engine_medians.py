"""The fit table of a real-engine campaign: one row per configuration, the median over its passing repeats.

A configuration is (model, gpu, engine, weights, batch_size, input_len, output_len). Its repeats are the rows of
``engine-cpu-runs`` (`slimlib.data.engine_runs`); those failing a physical check (non-empty ``checks_failed``,
`slimlib.data.physical_checks`) are counted in ``n_excluded`` and take no part; those failing only a timing check
(``token_bunching``) take part in every median but the per-token latencies'. For each metric the row holds the
median over the passing repeats (the column keeps the runs table's name, so every consumer reads it as one run)
and the spread beside it (``<metric>_min``, ``<metric>_max``). A configuration whose every repeat fails is not
a row here: its runs are in the exclusions table. The repeats of every session (``session``) are pooled.
"""

from __future__ import annotations

import pandas as pd

from slimlib.data.physical_checks import TIMING_CHECKS, TIMING_COLUMNS

__all__ = [
    "MEDIANS_TABLE",
    "MEDIAN_SCHEMA",
    "MEDIAN_KEYS",
    "MEDIAN_METRICS",
    "median_table",
    "runs_for_medians",
]

MEDIANS_TABLE = "engine-cpu-medians"
_S, _I, _F = "string", "Int64", "float64"
MEDIAN_KEYS = ("model", "gpu", "engine", "weights", "client", "batch_size", "input_len", "output_len")
#: metric -> doc; the median and its min/max over the passing repeats
MEDIAN_METRICS: dict[str, str] = {
    "throughput_tok_s": "total (input + output) token throughput, tokens/s",
    "e2e_s": "mean request end-to-end latency of a run, s",
    "mean_ttft_ms": "mean time to first token of a run, ms",
    "mean_tpot_ms": "mean time per output token (first excluded) of a run, ms",
    "mean_itl_ms": "mean inter-token latency of a run, ms",
    **{
        f"p{q}_{m}_ms": f"{q}th percentile of a run's per-request {what}, ms"
        for m, what in (("ttft", "time to first token"), ("tpot", "time per output token"))
        for q in (50, 90, 99)
    },
    "duration_s": "benchmark duration of a run, s",
    "num_prompts": "requests a run sent",
}
MEDIAN_SCHEMA: dict[str, tuple[str, str]] = {
    "model": (_S, "served model (registry name)"),
    "gpu": (_S, "device registry name ('cpu': the host CPU)"),
    "engine": (_S, "serving engine and version"),
    "weights": (_S, "random (--load-format dummy) or checkpoint"),
    "client": (_S, "how the client sent the requests (slimlib.model.served): concurrency or burst"),
    "batch_size": (_I, "batch cap B = --max-concurrency of the client"),
    "input_len": (_I, "prompt tokens per request (IL)"),
    "output_len": (_I, "output tokens per request (OL)"),
    **{
        col: spec
        for m, doc in MEDIAN_METRICS.items()
        for col, spec in (
            (m, (_F, f"median over the passing repeats: {doc}")),
            (f"{m}_min", (_F, f"smallest over the passing repeats: {doc}")),
            (f"{m}_max", (_F, f"largest over the passing repeats: {doc}")),
        )
    },
    "n_repeats": (_I, "passing repeats the medians are taken over"),
    "n_sessions": (_I, "sessions (campaign folders) those repeats come from"),
    "n_excluded": (_I, "repeats of the configuration that failed a physical check (in the exclusions table)"),
}


def runs_for_medians(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """(the runs of a runs table that pass its physical checks, with the per-token latencies of those failing only
    a timing check voided; a mask of the runs left out). The medians are taken over these."""
    failed = runs["checks_failed"].fillna("").astype(str).str.split(";")
    timing = failed.map(lambda cs: any(c in TIMING_CHECKS for c in cs))
    bad = failed.map(lambda cs: any(c and c not in TIMING_CHECKS for c in cs))
    ok = runs[~bad].copy()
    timed = [m for m in TIMING_COLUMNS if m in ok.columns]
    ok.loc[timing[~bad].to_numpy(), timed] = float("nan")
    return ok, bad


def median_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The medians table (columns `MEDIAN_SCHEMA`) of a runs table with ``checks_failed`` (sorted by model, IL,
    OL, B)."""
    keys = list(MEDIAN_KEYS)
    absent = [c for c in (*keys, *MEDIAN_METRICS) if c not in runs.columns]  # a campaign before those columns
    runs = runs.assign(**{c: float("nan") for c in absent})
    ok, bad = runs_for_medians(runs)
    n_excluded = runs[bad].groupby(keys, sort=False, dropna=False).size()
    if ok.empty:
        return pd.DataFrame(columns=list(MEDIAN_SCHEMA))
    g = ok.groupby(keys, sort=False, dropna=False)
    metrics = list(MEDIAN_METRICS)
    med = g[metrics].median()
    lo = g[metrics].min().add_suffix("_min")
    hi = g[metrics].max().add_suffix("_max")
    out = pd.concat([med, lo, hi], axis=1)
    out["n_repeats"] = g.size()
    out["n_sessions"] = g["session"].nunique() if "session" in ok.columns else 1
    out["n_excluded"] = n_excluded.reindex(out.index).fillna(0).astype(int)
    out = out.reset_index()
    out = out.sort_values(["model", "input_len", "output_len", "batch_size"], kind="mergesort")
    return out.loc[:, list(MEDIAN_SCHEMA)].reset_index(drop=True)
