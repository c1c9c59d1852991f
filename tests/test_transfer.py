"""`slim transfer`: re-targeting a parameter file, its round trip, and the LLM-Inference-Bench transfer scenarios."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from synthetic import SLIM_TRUE_PARAMS

from slimlib.cli.main import main
from slimlib.errors import DataError, SlimError
from slimlib.experiments.transfer_study.transfer_eval import (
    context_scenario,
    gpu_transfer_scenario,
    llmib_table,
    tp_scenario,
)
from slimlib.model import PaperModel, SlimModel, load_params, make_model
from slimlib.model.gpu_transfer import transfer_file, transfer_params, untransferred
from slimlib.registry.gpus import get_gpu

PAPER = {"eta_c": 0.4, "t_fixed": 0.2, "eta_m": 0.6, "B0": 3.0, "alpha": 2e-4, "gamma": 3e-6}


def _doc(gpu="mi250-gcd"):
    m = PaperModel.with_params(PAPER, gpu)
    m.fit_info_ = {"n_rows": 3}
    return json.loads(m.to_json())


def _rows(gpu):
    return pd.DataFrame({"model": ["llama-2-7b"] * 2, "gpu": [gpu] * 2, "batch_size": [1, 32],
                         "input_len": [512, 512], "output_len": [512, 512]})  # fmt: skip


def test_transfer_keeps_efficiencies_and_scales_gamma():
    doc = _doc()
    new = transfer_params(doc, "MI300X")
    assert new["gpu"] == "mi300x"
    ratio = get_gpu("mi250-gcd").peak_flops / get_gpu("mi300x").peak_flops
    assert new["params"]["gamma"] == pytest.approx(PAPER["gamma"] * ratio, rel=1e-12)
    for k in ("eta_c", "eta_m", "t_fixed", "B0", "alpha"):
        assert new["params"][k] == PAPER[k]
    assert all(v is None for v in new["stderr"].values())
    assert new["transferred_from"]["gpu"] == "mi250-gcd"
    assert new["transferred_from"]["params"] == doc["params"]
    # the transferred file loads and predicts on the new GPU, faster than on the old one
    fast = load_params(json.dumps(untransferred(new))).predict(_rows("mi300x"))
    slow = load_params(json.dumps(doc)).predict(_rows("mi250-gcd"))
    assert (fast["pred_e2e_s"].to_numpy() < slow["pred_e2e_s"].to_numpy()).all()


def test_round_trip_returns_the_original_exactly():
    doc = _doc()
    back = transfer_params(transfer_params(doc, "mi300x"), "mi250-gcd")
    assert back == doc
    chain = transfer_params(transfer_params(transfer_params(doc, "mi300x"), "h100"), "mi250-gcd")
    assert chain == doc


def test_transferred_file_refuses_rows_of_a_third_gpu(tmp_path):
    src = tmp_path / "a.json"
    src.write_text(json.dumps(_doc()))
    out = tmp_path / "b.json"
    transfer_file(src, "mi300x", out)
    model = load_params(out)
    assert model.gpu_ == "mi300x"
    model.predict(_rows("mi300x"))
    with pytest.raises(DataError, match="mi250-gcd"):
        model.predict(_rows("mi250-gcd"))
    with pytest.raises(DataError, match="h100-sxm-80gb"):
        model.predict(_rows("h100"))


def test_cli_transfer_round_trip_and_errors(tmp_path, capsys):
    src = tmp_path / "a.json"
    src.write_text(json.dumps(_doc(), indent=2, sort_keys=True) + "\n")
    assert main(["transfer", str(src), "--gpu", "mi300x", "--out", str(tmp_path / "b.json")]) == 0
    assert (
        main(["transfer", str(tmp_path / "b.json"), "--gpu", "mi250-gcd", "--out", str(tmp_path / "c.json")])
        == 0
    )
    assert json.loads((tmp_path / "c.json").read_text())["params"] == json.loads(src.read_text())["params"]
    assert main(["transfer", str(src), "--gpu", "mi300x", "--out", str(src)]) == 2  # never over the input
    assert main(["transfer", str(src), "--gpu", "no-such-gpu", "--out", str(tmp_path / "d.json")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["transfer", str(bad), "--gpu", "mi300x", "--out", str(tmp_path / "e.json")]) == 2
    err = capsys.readouterr().err
    assert "is also an input" in err and "not a SLIM parameter file" in err


def test_transfer_needs_a_parameter_document():
    with pytest.raises(SlimError, match="format"):
        transfer_params({"gpu": "mi300x"}, "mi250")


def test_scenarios_deterministic_and_disjoint():
    t = llmib_table()
    for build in (context_scenario, tp_scenario, gpu_transfer_scenario):
        a, b = build(t), build(t)
        assert a.available and [f.label for f in a.folds] == [f.label for f in b.folds]
        for fa, fb in zip(a.folds, b.folds, strict=True):
            pd.testing.assert_frame_equal(fa.train, fb.train)
            pd.testing.assert_frame_equal(fa.test, fb.test)
            assert set(fa.train["source_line"]).isdisjoint(fa.test["source_line"])
    ctx = context_scenario(t)
    for f in ctx.folds:
        assert f.train["input_len"].max() <= 256 and f.test["input_len"].min() >= 512
        assert f.train["gpu"].nunique() == 1 and f.train["tensor_parallel"].nunique() == 1
    tp = tp_scenario(t)
    for f in tp.folds:
        assert (f.test["tensor_parallel"] > f.train["tensor_parallel"].max()).all()
    g = gpu_transfer_scenario(t)
    assert [sorted(set(f.train["gpu"]) | set(f.test["gpu"])) for f in g.folds] == [
        ["mi250-gcd", "mi300x"]
    ] * 2
    assert np.array_equal(np.sort(g.folds[0].train["source_line"]), np.sort(g.folds[1].test["source_line"]))


def test_transfer_applies_the_estimators_own_declaration():
    """The rule comes from the estimator (`transfer_scaling`), not from parameter names in the transfer code."""
    assert PaperModel.with_params(PAPER, "mi250-gcd").transfer_scaling() == {
        "eta_c": "kept", "t_fixed": "kept", "eta_m": "kept", "B0": "kept", "alpha": "kept", "gamma": "flops",
    }  # fmt: skip
    slim = {**SLIM_TRUE_PARAMS, "t_act": 1e-7}
    m = SlimModel.with_params(slim, "mi250-gcd")
    m.fit_info_ = {}
    scaling = m.transfer_scaling()
    assert scaling.pop("t_act") == "bandwidth" and set(scaling.values()) == {"kept"}
    new = transfer_params(json.loads(m.to_json()), "mi300x")
    ratio = get_gpu("mi250-gcd").mem_bw / get_gpu("mi300x").mem_bw
    assert new["params"] == pytest.approx({**slim, "t_act": 1e-7 * ratio}) and ratio < 0.5
    assert new["transferred_from"]["scaling"] == m.transfer_scaling()


def test_methods_without_a_hardware_term_refuse_to_transfer():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"model": "llama-2-7b", "gpu": "mi250-gcd", "batch_size": rng.integers(1, 64, 20),
                       "input_len": rng.integers(64, 512, 20), "output_len": rng.integers(64, 512, 20)})  # fmt: skip
    df["e2e_s"] = 0.01 * df["output_len"] + 1e-4 * df["batch_size"] * df["input_len"]
    df["throughput_tok_s"] = df["batch_size"] * (df["input_len"] + df["output_len"]) / df["e2e_s"]
    df["mean_ttft_ms"], df["mean_itl_ms"] = 1000 * 1e-4 * df["batch_size"] * df["input_len"], 10.0
    for name in ("llmvisor-agg", "imai-ood-lr"):
        doc = json.loads(make_model(name).fit(df).to_json())
        with pytest.raises(DataError, match=f"method '{name}' cannot be transferred to another GPU"):
            transfer_params(doc, "mi300x")


def _fitted_on(gpu: str) -> PaperModel:
    """The paper model fitted on noisy rows of `gpu` (so it has standard errors and correlations)."""
    truth = PaperModel.with_params(PAPER, gpu)
    rows = pd.DataFrame([{"model": "llama-2-7b", "gpu": gpu, "batch_size": b, "input_len": i, "output_len": o}
                         for b in (1, 2, 4, 8, 16, 32, 64) for i in (128, 512, 2048) for o in (64, 256)])  # fmt: skip
    pred = truth.predict(rows)
    factor = np.exp(0.03 * np.random.default_rng(3).standard_normal(len(rows)))
    rows["throughput_tok_s"] = pred["pred_throughput_tok_s"].to_numpy() * factor
    rows["e2e_s"] = pred["pred_e2e_s"].to_numpy() / factor
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return PaperModel(gpu=gpu, n_starts=0).fit(rows)


def test_transfer_keeps_the_fits_parameter_uncertainty():
    """Each standard error moves with its parameter (a constant factor) and the correlations are kept, so that a
    prediction on the new GPU keeps the fit's parameter part in its interval (before, the transfer cleared them
    and `predict(..., interval=)` left every parameter's uncertainty out)."""
    model = _fitted_on("mi250-gcd")
    doc = json.loads(model.to_json())
    assert all(np.isfinite(v) and v > 0 for k, v in doc["stderr"].items() if k not in doc["held"])
    new = transfer_params(doc, "mi300x")
    for k, se in doc["stderr"].items():
        if se:  # relative standard errors unchanged
            assert new["stderr"][k] / new["params"][k] == pytest.approx(se / doc["params"][k], rel=1e-12)
    ratio = get_gpu("mi250-gcd").peak_flops / get_gpu("mi300x").peak_flops
    if "gamma" not in doc["held"]:
        assert new["stderr"]["gamma"] == pytest.approx(doc["stderr"]["gamma"] * ratio, rel=1e-12)
    assert new["corr"] == doc["corr"]
    moved = load_params(json.dumps(untransferred(new)))
    rows = _rows("mi300x")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = moved.predict(rows, interval=0.9)
    said = " ".join(str(w.message) for w in caught)
    assert "no residual model" in said and "no parameter covariance" not in said
    assert (pred["pred_throughput_low_tok_s"] < pred["pred_throughput_tok_s"]).all()
    assert (pred["pred_throughput_tok_s"] < pred["pred_throughput_high_tok_s"]).all()
    # the parameter part on the new GPU is that of the same covariance: positive and finite on every row
    s = moved.parameter_log_sds(rows)["throughput"]
    assert np.isfinite(s).all() and (s > 0).all()
