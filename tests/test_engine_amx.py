"""The served-latency campaign on the AMX host (`data/engine-cpu-amx/`): its tables are rebuilt from its results,
its servers cached no prefix, its requests came from a closed loop, and its latencies are in order."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.data.catalog import data_dir
from slimlib.data.engine_runs import CAMPAIGNS, build_engine_tables, campaign_tables
from slimlib.registry.vllm_flags import NO_PREFIX_CACHING

CAMPAIGN = "engine-cpu-amx"
FOLDER = data_dir() / CAMPAIGN


def test_the_tables_are_rebuilt_from_the_committed_results():
    tables = build_engine_tables(*(data_dir() / s for s in CAMPAIGNS[CAMPAIGN]), campaign=CAMPAIGN)
    for name in campaign_tables(CAMPAIGN):
        got, committed = tables[name].reset_index(drop=True), load(name)
        pd.testing.assert_frame_equal(
            got, committed.astype(got.dtypes.to_dict()), check_exact=False, rtol=1e-9
        )


def test_no_server_cached_prefixes_and_every_run_is_a_closed_loop_on_the_amx_device():
    sessions = json.loads((FOLDER / "manifest.json").read_text())["sessions"]
    argvs = [a for s in sessions for a in s["servers"].values()]
    assert argvs and all(NO_PREFIX_CACHING in a for a in argvs)
    runs = load("engine-cpu-amx-runs")
    assert set(runs["client"]) == {"concurrency"} and set(runs["gpu"]) == {"cpu-amx"}
    assert (runs["num_prompts"] == runs["waves"] * runs["batch_size"]).all()


def test_the_medians_hold_ordered_percentiles_of_ttft_and_tpot():
    med = load("engine-cpu-amx-medians")
    assert len(med) and med["n_repeats"].min() >= 1
    timed = med["mean_ttft_ms"].notna()
    assert timed.mean() > 0.95  # where every repeat's tokens arrived in bunches the latencies are empty
    for m in ("ttft", "tpot"):
        p = med.loc[timed, [f"p{q}_{m}_ms" for q in (50, 90, 99)]].to_numpy(dtype=float)
        assert np.isfinite(p).all() and (np.diff(p, axis=1) >= 0).all()
    # every run's means obey TTFT + (OL - 1) TPOT = E2E, and no run was excluded for its latencies' order
    runs = load("engine-cpu-amx-runs")
    assert not runs["checks_failed"].fillna("").str.contains("latency_sum|latency_order").any()
