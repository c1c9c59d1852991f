"""Baselines recover their own synthetic ground truth; the roofline sum matches a step-by-step loop."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from synthetic import grid

from slimlib.errors import DataError, NotFittedError
from slimlib.model import model_features
from slimlib.model.baselines import ImaiOodLR, LLMVisorAgg, llm_roofline_time
from slimlib.registry.gpus import get_gpu


def _llmvisor_truth(df: pd.DataFrame) -> pd.DataFrame:
    b, il, ol = df["batch_size"], df["input_len"], df["output_len"]
    ttft = np.where(b * il <= 4000, 0.01 + 2e-6 * b * il + 1e-10 * b * il**2 + 1e-4 * b,
                    0.05 + 4e-6 * b * il + 2e-10 * b * il**2 + 3e-4 * b)  # fmt: skip
    c = il + (ol + 1) / 2
    itl = np.where(b <= 16, 0.004 + 1e-5 * b + 2e-8 * b * c, 0.002 + 8e-5 * b + 5e-8 * b * c)
    out = df.copy()
    out["mean_ttft_ms"] = 1000 * ttft
    out["mean_itl_ms"] = 1000 * itl
    out["e2e_s"] = ttft + (ol - 1) * itl
    out["throughput_tok_s"] = b * (il + ol) / out["e2e_s"]
    return out


def test_llmvisor_agg_recovers_its_piecewise_truth():
    df = _llmvisor_truth(grid(models=("opt-1.3b",), batch=(1, 2, 4, 8, 16, 32, 64, 128, 256),
                              input_len=(64, 128, 512), output_len=(64, 256)))  # fmt: skip
    m = LLMVisorAgg().fit(df)
    assert 16 <= m.params_["tau_D"] < 32
    assert m.params_["b_D0"] == pytest.approx(1e-5, rel=1e-3) and m.params_["a2_D1"] == pytest.approx(
        5e-8, rel=1e-3
    )
    pred = m.predict(df)
    np.testing.assert_allclose(pred["pred_e2e_s"], df["e2e_s"], rtol=1e-6)
    np.testing.assert_allclose(pred["pred_throughput_tok_s"], df["throughput_tok_s"], rtol=1e-6)
    np.testing.assert_allclose(pred["pred_prefill_s"] * 1000, df["mean_ttft_ms"], rtol=1e-6)
    assert set(m.summary().index) >= {"tau_P", "tau_D", "beta_P0", "a2_D0"}


def test_llmvisor_agg_says_when_ttft_itl_are_missing():
    df = _llmvisor_truth(grid()).drop(columns=["mean_ttft_ms"])
    with pytest.raises(DataError, match="mean_ttft_ms"):
        LLMVisorAgg().fit(df)
    with pytest.raises(NotFittedError):
        LLMVisorAgg().predict(df)


def test_imai_recovers_a_linear_truth_in_its_features():
    df = grid(models=("opt-125m", "opt-1.3b", "opt-6.7b", "llama-2-7b"), batch=(1, 4, 16, 64),
              input_len=(128, 512, 1024), output_len=(64, 256))  # fmt: skip
    m = ImaiOodLR()
    x = m._design(df, get_gpu("h100-sxm-80gb"))
    rng = np.random.default_rng(0)
    coef = rng.uniform(0.5, 1.5, x.shape[1]) / np.abs(x).max(axis=0)
    df["e2e_s"] = x @ coef + 1.0
    df["throughput_tok_s"] = df["batch_size"] * (df["input_len"] + df["output_len"]) / df["e2e_s"]
    m.fit(df)
    pred = m.predict(df)
    np.testing.assert_allclose(pred["pred_e2e_s"], df["e2e_s"], rtol=1e-6)
    assert pred["pred_prefill_s"].isna().all()
    with pytest.raises(DataError, match="e2e_s"):
        ImaiOodLR().fit(df.drop(columns=["e2e_s"]))


def test_roofline_closed_form_matches_the_step_loop():
    df = grid(
        models=("opt-125m", "llama-2-7b"), batch=(1, 8, 512), input_len=(16, 2048), output_len=(1, 7, 300)
    )
    hw = get_gpu("h100-sxm-80gb")
    f = model_features(df)
    fast = llm_roofline_time(f, hw)
    for i in range(len(df)):
        g = {k: v[i] for k, v in f.items()}
        b, il, ol = g["batch_size"], g["input_len"], int(g["output_len"])
        L, D, dkv = g["n_layers"], g["hidden_size"], g["d_kv"]
        dense = b * L * (4 * D**2 + 4 * D * dkv + 2 * g["n_ffn_matrices"] * D * g["ffn_size"])
        f_pre = L * (
            b * il * (4 * D**2 + 4 * D * dkv + 2 * g["n_ffn_matrices"] * D * g["ffn_size"])
            + 4 * b * il**2 * D
        )
        t = max(
            f_pre / hw.peak_flops,
            (g["weight_bytes_total"] + 2 * L * dkv * g["kv_bytes"] * b * il) / hw.mem_bw,
        )
        for j in range(ol):
            fj = dense + 4 * b * L * D * (il + j)
            mj = g["weight_bytes_total"] + 2 * L * dkv * g["kv_bytes"] * b * (il + j)
            t += max(fj / hw.peak_flops, mj / hw.mem_bw)
        assert fast[i] == pytest.approx(t, rel=1e-9)
