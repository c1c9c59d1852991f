"""Scenario splits: disjoint, deterministic, the documented pre-knee rule, and the input-length switch."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import UnknownNameError
from slimlib.experiments.accuracy.scenarios import (
    COLUMNS,
    ENGINE_IL_ROW,
    build_scenarios,
    get_scenario,
    input_length_scenario,
    pre_knee_points,
    same_curve_split,
    scenario_names,
)

KEYS = ["model", "gpu", "batch_size", "input_len", "output_len"]


def _curve_table():
    rows = []
    for model, ol in (("opt-1.3b", 130.0), ("opt-1.3b", 520.0), ("llama-2-7b", 130.0)):
        for b, t in ((1, 100), (2, 200), (4, 390), (8, 760), (16, 1400), (32, 2300), (64, 2600), (128, 2650)):
            rows.append({"model": model, "gpu": "h100-sxm-64gb", "batch_size": float(b), "input_len": 242.0,
                         "output_len": ol, "throughput_tok_s": float(t), "e2e_s": 1.0})  # fmt: skip
    df = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in df.columns:
            df[c] = np.nan
    df["curve"] = df["model"] + " OL=" + df["output_len"].astype(str)
    return df[list(COLUMNS)]


def test_pre_knee_rule_takes_ends_and_geometric_middle_of_the_pre_knee_run():
    b = np.array([1, 2, 4, 8, 16, 32, 64, 128])
    t = np.array([100, 200, 390, 760, 1400, 2300, 2600, 2650])
    # gains per doubling: 1.95, 1.95, 1.84, 1.64, 1.13 -> pre-knee run is B = 2..32
    sel = pre_knee_points(b, t)
    assert list(b[sel]) == [2, 8, 32]


def test_pre_knee_falls_back_to_smallest_batches_when_the_knee_is_early():
    b = np.array([16, 2, 4, 8, 1])
    t = np.array([500, 200, 250, 300, 100])  # gain 1.25 already at 2 -> 4
    assert sorted(b[pre_knee_points(b, t)]) == [2, 4, 8]


def test_same_curve_split_is_disjoint_covers_the_table_and_is_deterministic():
    df = _curve_table()
    tr, te = same_curve_split(df)
    assert len(tr) == 3 * 3 and len(tr) + len(te) == len(df)
    assert not set(map(tuple, tr[KEYS].to_numpy())) & set(map(tuple, te[KEYS].to_numpy()))
    tr2, te2 = same_curve_split(df)
    pd.testing.assert_frame_equal(tr, tr2)
    pd.testing.assert_frame_equal(te, te2)


@pytest.fixture(scope="module")
def scenarios():
    return build_scenarios()


def test_real_scenarios_are_disjoint_and_match_their_definition(scenarios):
    names = [s.name for s in scenarios]
    assert names == scenario_names()
    for s in scenarios:
        for f in s.folds:
            tr = set(map(tuple, f.train[KEYS].to_numpy()))
            te = set(map(tuple, f.test[KEYS].to_numpy()))
            assert tr and te and not tr & te, (s.name, f.label)
    olt = get_scenario("output-length-transfer", scenarios)
    assert len(olt.folds) == 4
    for f in olt.folds:
        assert set(f.train["output_len"]) == {130.0, 260.0, 390.0} and set(f.test["output_len"]) == {520.0}
        assert f.train["model"].nunique() == 1
    comb = get_scenario("combined", scenarios).folds[0]
    assert "llama-2-13b" not in set(comb.train["model"]) and 520.0 not in set(comb.train["output_len"])
    assert set(comb.test["model"]) == {"llama-2-13b"} and set(comb.test["output_len"]) == {520.0}
    mt = get_scenario("model-transfer", scenarios).folds[0]
    assert set(mt.test["model"]) == {"llama-2-13b"} and "llama-2-13b" not in set(mt.train["model"])


def test_scenarios_are_deterministic(scenarios):
    again = build_scenarios()
    for a, b in zip(scenarios, again, strict=True):
        for fa, fb in zip(a.folds, b.folds, strict=True):
            pd.testing.assert_frame_equal(fa.train, fb.train)
            pd.testing.assert_frame_equal(fa.test, fb.test)


def test_online_latency_truth_is_littles_law_and_offline_is_logged_e2e(scenarios):
    from slimlib.data import load

    on = get_scenario("same-curve", scenarios).folds[0].test
    raw = load("memgap-online")
    raw = raw[raw["family"] == "advisor"]
    row = on.iloc[0]
    r = raw[(raw["model"] == row["model"]) & (raw["batch_size"] == row["batch_size"])
            & (raw["output_len"] == row["output_len"])].iloc[0]  # fmt: skip
    assert row["e2e_s"] == pytest.approx(r["mean_running_batch"] / r["request_throughput_req_s"])
    off = get_scenario("same-curve-offline", scenarios).folds[0].test
    thr = off["batch_size"] * (off["input_len"] + off["output_len"]) / off["e2e_s"]
    np.testing.assert_allclose(off["throughput_tok_s"], thr)


def test_input_length_transfer_switches_on_with_a_kit_table():
    assert input_length_scenario(pd.DataFrame()).available is False
    rows = [
        {
            "model": "opt-1.3b",
            "gpu": "h100-sxm-80gb",
            "batch_size": b,
            "input_len": il,
            "output_len": 256.0,
            "throughput_tok_s": 1000.0 + b + il,
            "e2e_s": 2.0,
        }
        for il in (128.0, 512.0, 1024.0)
        for b in (1.0, 8.0)
    ]
    s = input_length_scenario(pd.DataFrame(rows))
    assert s.available and len(s.folds) == 1
    assert set(s.folds[0].test["input_len"]) == {1024.0} and set(s.folds[0].train["input_len"]) == {
        128.0,
        512.0,
    }


def test_unknown_scenario_lists_close_matches(scenarios):
    with pytest.raises(UnknownNameError, match="combined"):
        get_scenario("combind", scenarios)


def test_input_length_transfer_switches_on_by_itself_when_kit_runs_exist(tmp_path, monkeypatch):
    """A kit-runs table with an input-length sweep in the data folder turns the scenario on, with no argument."""
    from slimlib.data.catalog import SCHEMA

    assert input_length_scenario().available is False  # the committed data/ has no kit measurements
    rows = []
    for il in (128, 512, 1024):
        for b in (1, 8, 32):
            e2e = 0.5 + 0.01 * b + 1e-4 * b * il  # test input only, not a measurement
            rows.append({"model": "opt-1.3b", "gpu": "h100-sxm-80gb", "batch_size": b, "input_len": il,
                         "output_len": 256, "e2e_s": e2e, "throughput_tok_s": b * (il + 256) / e2e,
                         "prefill_s": 0.1, "decode_s": e2e - 0.1, "groups": "input-length-transfer",
                         "campaign": "test"})  # fmt: skip
    pd.DataFrame(rows).reindex(columns=list(SCHEMA["kit-runs"][1])).to_csv(
        tmp_path / "kit-runs.csv", index=False
    )
    monkeypatch.setenv("SLIM_DATA_DIR", str(tmp_path))
    s = input_length_scenario()
    assert s.available and [len(f.test) for f in s.folds] == [3]
    assert set(s.folds[0].train["input_len"]) == {128.0, 512.0}


def test_the_amd_context_transfer_has_its_own_row_and_the_paper_row_stays_empty_without_data(scenarios):
    """Table II's input-length row is the paper's experiment (an input-length sweep of our own); the IL = OL
    LLM-Inference-Bench transfer is a different experiment under its own name, never that row."""
    names = [s.name for s in scenarios]
    # with the committed CPU-engine campaign and no GPU kit sweep, the paper's row is the engine's, labelled so
    il = get_scenario(ENGINE_IL_ROW if ENGINE_IL_ROW in names else "input-length-transfer", scenarios)
    ctx = get_scenario("context-transfer", scenarios)
    assert ctx.available and "LLM-Inference-Bench" in ctx.description
    assert {f.label for f in ctx.folds} == {"MI300X", "MI250"}
    assert "LLM-Inference-Bench" not in il.description
    if not il.available:  # until a kit-runs input-length sweep exists
        assert il.reason.startswith("no data")
