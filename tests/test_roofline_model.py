"""SLIM-roofline: its terms against hand computation (the max() switch at the ridge), its serving modes (TTFT and
TPOT consistent with E2E), the decode GEMM turn against the measured kernel tables, and its fit."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from slimlib.experiments.kernel_timing.ridge_check import (
    attention_regimes,
    gemm_ridge_summary,
    gemm_turns,
    mla_compute_efficiency,
    mla_turns,
    moe_compute_efficiency,
    moe_turns,
)
from slimlib.model import priors
from slimlib.model.features import model_features
from slimlib.model.roofline_model import RooflineSlimModel, robust_residuals
from slimlib.model.terms.batch import chunked_prefill_column, static_batch_column
from slimlib.model.terms.rooflines import (
    ROOF_LINEAR,
    decode_gemm_ridge,
    dense_linear_flops_per_token,
    ridge_tokens,
    roofline,
)
from slimlib.model.terms.serving_mode import serving_steps
from slimlib.registry.gpus import get_gpu

GPU = "h100-sxm-80gb"
P = {
    "eta_c": 0.7,
    "eta_w": 0.8,
    "eta_e": 0.45,
    "eta_attn": 0.85,
    "eta_ac": 0.5,
    "t_step": 2e-3,
    "t_seq": 3e-5,
    "t_fixed": 0.05,
}


def _features(df: pd.DataFrame, gpu: str = GPU) -> dict:
    f = model_features(df, gpu)
    f["static_batch"] = static_batch_column(df)
    f["chunked_prefill"] = chunked_prefill_column(df)
    return serving_steps(f)


def _rows(batch, static=True, chunked=False, il=512.0, ol=128.0, model="llama-2-7b") -> pd.DataFrame:
    b = np.asarray(batch, dtype=float)
    return pd.DataFrame({"model": model, "gpu": GPU, "batch_size": b, "input_len": il, "output_len": ol,
                         "static_batch": static, "chunked_prefill": chunked, "gpu_blocks": 1e6,
                         "block_size": 16.0})  # fmt: skip


def test_roofline_is_the_larger_side():
    assert roofline(2e12, 1e9, 1e15, 1e12, 0.5, 1.0) == pytest.approx(4e-3)  # compute: 2e12 / 5e14
    assert roofline(1e9, 4e9, 1e15, 1e12, 0.5, 0.8) == pytest.approx(5e-3)  # memory: 4e9 / 8e11


def test_decode_gemm_term_switches_at_its_ridge_by_hand():
    """Static decode steps of B sequences: the weight read below the ridge, B F_dense / (eta_c F_max) above it."""
    hw = get_gpu(GPU)
    f = _features(_rows([1.0]))
    ridge = float(decode_gemm_ridge(f, hw, P["eta_c"], P["eta_w"])[0])
    w = float(f["dense_weight_bytes"][0])
    flops = float(dense_linear_flops_per_token(f)[0])
    assert ridge == pytest.approx(P["eta_c"] * hw.peak_flops * w / (P["eta_w"] * hw.mem_bw * flops))
    below, above = 0.9 * ridge, 1.1 * ridge
    g = _features(_rows([below, above]))
    t = ROOF_LINEAR.times(P, g, hw).decode / g["step_count"]  # type: ignore[misc,operator]
    memory = w / (P["eta_w"] * hw.mem_bw)
    assert t[0] == pytest.approx(memory, rel=1e-12)
    assert t[1] == pytest.approx(above * flops / (P["eta_c"] * hw.peak_flops), rel=1e-12)
    assert t[1] > memory


def test_ridge_is_peak_times_bytes_per_weight_over_twice_the_bandwidth():
    """One GEMM: ``eta_f peak b_w / (2 eta_b BW)``; on the CPU engine at equal efficiencies about 14."""
    cpu = get_gpu("cpu")
    assert ridge_tokens(4096 * 4096 * 2.0, 2.0 * 4096 * 4096, cpu.peak_flops, cpu.mem_bw, 1.0, 1.0) == (
        pytest.approx(cpu.peak_flops / cpu.mem_bw)
    )
    assert 12 < cpu.peak_flops / cpu.mem_bw < 15


def test_static_mode_by_hand():
    """Without chunked prefill one pass of B IL tokens, OL - 1 decode steps, TTFT = t_fixed + T_pre."""
    df = _rows([4.0], static=True, chunked=False)
    f = _features(df)
    assert f["pass_count"][0] == 1 and f["pass_tokens"][0] == 4 * 512 and f["step_count"][0] == 127
    pred = RooflineSlimModel.with_params(P, gpu=GPU).predict(df).iloc[0]
    assert pred["pred_ttft_s"] == pytest.approx(P["t_fixed"] + pred["pred_prefill_s"], rel=1e-12)
    assert pred["pred_tpot_s"] == pytest.approx(pred["pred_decode_s"] / 127, rel=1e-12)


def test_static_chunked_prefill_passes_and_mean_ttft():
    """B IL = 8 x 512 tokens in passes of 512: 8 passes; the mean TTFT is (8 + 1) / 16 of the prefill."""
    df = _rows([8.0], static=True, chunked=True).assign(max_num_batched_tokens=512.0)
    f = _features(df)
    assert (
        f["pass_count"][0] == 8 and f["pass_tokens"][0] == 512 and f["ttft_share"][0] == pytest.approx(9 / 16)
    )
    pred = RooflineSlimModel.with_params(P, gpu=GPU).predict(df).iloc[0]
    assert pred["pred_ttft_s"] == pytest.approx(P["t_fixed"] + 9 / 16 * pred["pred_prefill_s"], rel=1e-12)


def test_continuous_mode_steps_and_budget_plateau():
    """Mixed steps: S = max(OL, B (IL + OL - 1) / N); every step the same; throughput saturates at the budget."""
    n = 2048.0
    b = np.array([1.0, 4.0, 64.0, 256.0, 1024.0, 4096.0])
    df = _rows(b, static=False, chunked=True).assign(max_num_batched_tokens=n)
    f = _features(df)
    steps = np.maximum(128.0, b * (512 + 127) / n)
    np.testing.assert_allclose(f["pass_count"] + f["step_count"], steps)
    np.testing.assert_allclose(f["step_tokens"], b * (512 + 127) / steps)
    assert (f["step_tokens"] <= n + 1e-9).all()
    m = RooflineSlimModel.with_params({**P, "t_seq": 0.0}, gpu=GPU)
    pred = m.predict(df)
    np.testing.assert_allclose(
        pred["pred_prefill_s"] / f["pass_count"], pred["pred_decode_s"] / f["step_count"]
    )
    thr = pred["pred_throughput_tok_s"].to_numpy()
    assert thr[-1] == pytest.approx(thr[-2], rel=0.05)  # budget-bound: N tokens per step
    assert thr[1] > 3 * thr[0]


def test_ttft_tpot_e2e_consistent_in_both_modes():
    rng = np.random.default_rng(3)
    k = 40
    df = pd.DataFrame({"model": rng.choice(["llama-2-7b", "mistral-7b", "opt-1.3b"], k), "gpu": GPU,
                       "batch_size": rng.integers(1, 512, k).astype(float),
                       "input_len": rng.integers(16, 4096, k).astype(float),
                       "output_len": rng.integers(2, 1024, k).astype(float),
                       "static_batch": rng.random(k) < 0.5, "chunked_prefill": rng.random(k) < 0.5})  # fmt: skip
    pred = RooflineSlimModel.with_params(P, gpu=GPU).predict(df)
    ol = df["output_len"].to_numpy(dtype=float)
    lhs = pred["pred_ttft_s"] + (ol - 1) * pred["pred_tpot_s"]
    np.testing.assert_allclose(lhs, pred["pred_e2e_s"], rtol=1e-12)
    np.testing.assert_allclose(
        pred["pred_e2e_s"], pred["pred_prefill_s"] + pred["pred_decode_s"] + P["t_fixed"], rtol=1e-12
    )
    assert (pred["pred_ttft_s"] <= pred["pred_e2e_s"]).all() and (pred["pred_tpot_s"] > 0).all()


def test_decode_gemm_turn_matches_the_measured_gemm_tables():
    """Per GPU and dtype of ``aic-gemm``: the term's ridge (registry peak, priors) within a factor 1.5 of the
    measured turn in the median over the (n, k) shapes, and within 2 for every shape: where the kernels turn
    compute-bound, the term does."""
    turns = gemm_turns()
    summary = gemm_ridge_summary(turns)
    assert set(summary["gpu"]) >= {"a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "b200-sxm-180gb"}
    assert set(summary["dtype"]) == {"bfloat16", "fp8", "nvfp4"}
    assert summary["ratio_median"].between(1 / 1.5, 1.5).all(), summary
    wide = turns[turns["dtype"] != "nvfp4"]
    assert wide["ratio"].between(0.5, 2.0).all(), wide[~wide["ratio"].between(0.5, 2.0)]
    # the B200's NVFP4 GEMM: its two smallest shapes (Llama-3-8B's O and QKV, k = 4096), whose latency floor is a
    # larger share at 0.5 byte per weight, turn compute-bound later than the term (0.31x and 0.42x); the rest within 2
    fp4 = turns[turns["dtype"] == "nvfp4"]
    small = fp4["n"] * fp4["k"] <= 6144 * 4096
    assert small.sum() == 2 and (fp4.loc[small, "ratio"] < 0.5).all()
    assert fp4.loc[~small, "ratio"].between(0.5, 2.0).all()
    assert (turns["measured_turn_m"] > 100).all()  # hundreds of tokens on GPUs
    # the per-GPU shapes at TP 8 are narrow: their latency floor is a larger share, so they turn later than at TP 1
    assert gemm_turns(tp_degrees=(8,))["ratio"].median() < 0.9 * turns["ratio"].median()


def test_expert_compute_prior_is_the_measured_fused_moe_efficiency():
    e = moe_compute_efficiency()
    p = priors.EXPERT_COMPUTE
    assert e.size == p.n_points
    assert (np.median(e), e.min(), e.max(), np.std(e, ddof=1)) == pytest.approx(
        (p.median, p.low, p.high, p.sd), abs=6e-4
    )


def test_moe_term_turns_where_the_fused_moe_kernels_do():
    """bf16 and fp8 (per-tensor) experts on one GPU: the term's ridge (eta_e and eta_w priors) within a factor 2
    of the measured turn in the median over the shapes, per GPU and dtype."""
    t = moe_turns()
    med = t[t["dtype"].isin(["bfloat16", "fp8"])].groupby(["gpu", "dtype"])["ratio"].median()
    assert len(med) >= 5 and med.between(0.5, 2.0).all(), med


def test_mla_decode_compute_prior_is_the_measured_kernel_efficiency():
    e = mla_compute_efficiency()
    p = priors.DECODE_ATTENTION_COMPUTE
    assert e.size == p.n_points
    assert (np.median(e), e.min(), e.max(), np.std(e, ddof=1)) == pytest.approx(
        (p.median, p.low, p.high, p.sd), abs=6e-4
    )


def test_mla_decode_term_turns_compute_bound_where_the_kernels_do():
    """MLA decode: the term's turn (heads per GPU) within a factor 2 of the measured one on every GPU and KV dtype;
    at DeepSeek-V3's 128 heads per GPU (TP 1) both are compute-bound."""
    t = mla_turns()
    assert len(t) == 6 and t["ratio"].between(0.5, 2.0).all(), t
    assert (t["measured_turn_heads"] < 128).all() and (t["term_turn_heads"] < 128).all()


def test_decode_attention_is_memory_bound_in_term_and_kernels():
    regimes = attention_regimes()
    assert (regimes["term_regime"] == "memory-bound").all()
    assert (regimes["max_compute_fraction"] < 0.1).all()


def test_robust_residuals_are_linear_near_zero_and_sublinear_far():
    r = np.array([-1e-3, 1e-3, 10.0])
    out = robust_residuals(r, 0.25)
    np.testing.assert_allclose(out[:2], r[:2], rtol=1e-5)
    assert out[2] ** 2 == pytest.approx(2 * 0.25**2 * (np.sqrt(1 + 40.0**2) - 1))


def _truth(models=("llama-2-7b", "mistral-7b", "opt-6.7b"), params=P, tp=1) -> pd.DataFrame:
    rows = [
        (m, b, il, ol) for m in models for b in (1, 4, 16, 64, 256) for il in (128, 1024) for ol in (64, 256)
    ]
    df = pd.DataFrame(rows, columns=["model", "batch_size", "input_len", "output_len"]).assign(gpu=GPU)
    df = df.assign(static_batch=True, chunked_prefill=True, max_num_batched_tokens=2048.0, tensor_parallel=tp)
    pred = RooflineSlimModel.with_params(params, gpu=GPU).predict(df)
    return df.assign(throughput_tok_s=pred["pred_throughput_tok_s"], mean_ttft_ms=1e3 * pred["pred_ttft_s"],
                     mean_tpot_ms=1e3 * pred["pred_tpot_s"])  # fmt: skip


def test_fit_recovers_parameters_from_throughput_and_latencies():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = RooflineSlimModel(n_starts=2).fit(_truth())
    for k, v in P.items():
        if k not in ("eta_e", "eta_ac"):  # no experts, no latent attention here: held at their priors
            assert m.params_[k] == pytest.approx(v, rel=1e-3, abs=1e-7), k
    assert m.held_ == ["eta_ac", "eta_e"]


def test_one_architecture_holds_eta_w_at_its_prior():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = RooflineSlimModel(n_starts=2).fit(_truth(("llama-2-7b",)))
    assert m.params_["eta_w"] == priors.WEIGHT_READ.median
    assert "one architecture" in m.held_reasons_["eta_w"]


def test_efficiency_at_its_bound_is_held_at_its_prior():
    """Truth with the attention efficiency at its bound (1.5): the first fit ends there, so the fit holds it at
    its measured prior and refits the rest."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = RooflineSlimModel(n_starts=2).fit(_truth(params={**P, "eta_attn": 1.5}))
    assert m.params_["eta_attn"] == priors.ATTENTION_BANDWIDTH.median
    assert "not resolved by the rows (at its bound)" in m.held_reasons_["eta_attn"]
    assert "eta_c" not in m.held_


def test_expert_efficiency_is_held_without_experts_and_fitted_with_them():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = RooflineSlimModel(n_starts=2).fit(_truth())
        moe = RooflineSlimModel(n_starts=2).fit(_truth(("mixtral-8x7b", "llama-2-7b", "mistral-7b"), tp=2))
    assert "no row has routed experts" in dense.held_reasons_["eta_e"]
    assert "no row has latent attention" in dense.held_reasons_["eta_ac"]
    assert "eta_e" not in moe.held_ and moe.params_["eta_e"] == pytest.approx(P["eta_e"], rel=1e-3)


def test_few_values_hold_every_prior_and_latencies_count_as_values():
    """4 rows of throughput alone: fewer values than free parameters, so every prior is held; with their TTFT and
    TPOT the same rows give 12 values and the efficiencies are fitted."""
    df = _truth(("llama-2-7b", "mistral-7b")).query("batch_size == 1 and output_len == 64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bare = RooflineSlimModel(n_starts=2).fit(df.drop(columns=["mean_ttft_ms", "mean_tpot_ms"]))
        timed = RooflineSlimModel(n_starts=2).fit(df)
    assert len(df) == 4
    assert bare.params_["eta_c"] == priors.PREFILL_COMPUTE.median
    assert "4 measured values (throughput, TTFT, TPOT) < 6 free" in bare.held_reasons_["eta_c"]
    assert "eta_c" not in timed.held_
