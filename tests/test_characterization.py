"""Characterization computations (slimlib.experiments.characterization.plateau) on hand-made data, plus one check on the real tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.experiments.characterization import plateau as ch
from slimlib.model.equations import decode_attention_bytes, decode_attention_flops


def _curve():
    # linear (100 tok/s per request) up to B=8, then +20/request to 16, then +1/request: knee at 8 with 0.1
    b = np.array([1, 2, 4, 8, 16, 32])
    t = np.array([100, 200, 400, 800, 960, 976])
    return b, t


def test_marginal_gain_by_hand():
    b, t = _curve()
    g = ch.marginal_gain(b[::-1], t[::-1])  # order does not matter
    np.testing.assert_allclose(g["gain_tok_s_per_req"], [100, 100, 100, 20, 1])
    np.testing.assert_allclose(g["rel_gain"], [1, 1, 1, 0.2, 0.01])


def test_knee_batch_on_hand_made_curve():
    b, t = _curve()
    assert ch.knee_batch(b, t, threshold=0.1) == 16
    assert ch.knee_batch(b, t, threshold=0.5) == 8
    assert np.isnan(ch.knee_batch(b, t, threshold=0.005))  # never that flat


def test_knee_rejects_bad_curves():
    with pytest.raises(DataError, match="at least 2"):
        ch.knee_batch([1], [10])
    with pytest.raises(DataError, match="distinct"):
        ch.knee_batch([1, 1, 2], [1, 2, 3])
    with pytest.raises(DataError, match="positive"):
        ch.knee_batch([1, 2], [1, 2], threshold=0)


def _online():
    b, t = _curve()
    return pd.DataFrame(
        {
            "model": "m",
            "batch_size": b,
            "throughput_tok_s": t,
            "mean_itl_ms": [10, 10, 11, 12, 20, 40],
            "max_kv_usage_frac": [0.1, 0.2, 0.4, 0.8, 0.995, 1.0],
            "num_preemptions": [0, 0, 0, 0, 0, 7],
        }
    )


def test_kv_exhaustion_uses_usage_and_preemptions():
    df = _online()
    assert ch.kv_exhaustion_batch(df) == 16
    assert ch.kv_exhaustion_batch(df, usage_threshold=1.1) == 32  # only the preemption counts
    df["num_preemptions"] = 0
    assert np.isnan(ch.kv_exhaustion_batch(df, usage_threshold=1.1))


def test_plateau_table():
    row = ch.plateau_table(_online(), threshold=0.1).iloc[0]
    assert row["knee_batch"] == 16
    assert row["knee_throughput_tok_s"] == 960
    assert row["knee_share_of_max"] == pytest.approx(960 / 976)
    assert row["itl_growth_to_knee"] == pytest.approx(2.0)
    assert row["kv_full_batch"] == 16


def test_active_context_eq3():
    df = pd.DataFrame(
        {"batch_size": [4], "mean_running_batch": [3.0], "input_len": [100], "output_len": [50]}
    )
    out = ch.run_active_context(df)
    assert out["active_ctx_mean"].iloc[0] == pytest.approx(4 * (100 + 25))
    assert out["active_ctx_peak"].iloc[0] == pytest.approx(4 * 150)
    out = ch.run_active_context(df, concurrency="mean_running_batch")
    assert out["active_ctx_mean"].iloc[0] == pytest.approx(3 * 125)


def test_phase_split_shares_sum_to_one():
    df = pd.DataFrame({"prefill_s": [1.0, 0.5], "decode_s": [3.0, 9.5], "n_decode_steps": [100, 50]})
    out = ch.phase_split(df)
    np.testing.assert_allclose(out["prefill_share"], [0.25, 0.05])
    np.testing.assert_allclose(out["prefill_share"] + out["decode_share"], 1.0)
    np.testing.assert_allclose(out["decode_step_ms"], [30.0, 190.0])
    with pytest.raises(DataError, match="positive"):
        ch.phase_split(df.assign(prefill_s=0.0, decode_s=0.0))


def _vidur_tables():
    attn = []
    for b in (1, 4):
        for c in (100, 200):
            attn.append(
                dict(operation="attn_decode", batch_size=b, kv_cache_size=c, time_ms_median=0.001 * b * c)
            )
            attn.append(
                dict(operation="attn_input_reshape", batch_size=b, kv_cache_size=c, time_ms_median=0.01)
            )
    attn = pd.DataFrame(attn).assign(
        gpu="g", n_embd=64, n_q_head=8, n_kv_head=2, head_dim=8, num_tensor_parallel_workers=2
    )
    mlp = []
    for n in (1, 4):
        for op in ch.VIDUR_GEMM_OPS:
            mlp.append(dict(operation=op, num_tokens=n, time_ms_median=0.1))
        for op in ch.VIDUR_OTHER_OPS:
            mlp.append(dict(operation=op, num_tokens=n, time_ms_median=0.02))
        mlp.append(dict(operation="emb", num_tokens=n, time_ms_median=5.0))  # left out: once per step
    mlp = pd.DataFrame(mlp).assign(gpu="g", n_embd=64, num_tensor_parallel_workers=2)
    return attn, mlp


def test_vidur_breakdown_by_hand_and_shares_sum_to_one():
    attn, mlp = _vidur_tables()
    out = ch.vidur_decode_breakdown(attn, mlp, [4, 1], [200, 100])
    assert out[["batch_size", "kv_cache_size"]].values.tolist() == [[1, 100], [1, 200], [4, 100], [4, 200]]
    row = out[(out.batch_size == 4) & (out.kv_cache_size == 200)].iloc[0]
    assert row["attention_ms"] == pytest.approx(0.8 + 0.01)
    assert row["gemm_ms"] == pytest.approx(0.4)
    assert row["other_ms"] == pytest.approx(0.1)
    np.testing.assert_allclose(out[["attention_share", "gemm_share", "other_share"]].sum(axis=1), 1.0)
    assert out["attention_share"].is_monotonic_increasing
    with pytest.raises(DataError, match="num_tokens=8"):
        ch.vidur_decode_breakdown(attn, mlp, [8], [100])
    with pytest.raises(DataError, match="mixes"):
        ch.vidur_decode_breakdown(pd.concat([attn, attn.assign(gpu="h")]), mlp, [1], [100])


def test_attention_flops_and_bytes_by_hand():
    # B=2, C=10, 4 q heads, 1 kv head, d=8: FLOPs 4*2*10*4*8 = 2560; bytes 2*2*10*1*8*2 + 2*2*4*8*2 = 640 + 256
    assert decode_attention_flops(2, 10, 4, 8) == pytest.approx(2560)
    assert decode_attention_bytes(2, 10, 4, 1, 8) == pytest.approx(896)


def test_attention_roofline_table_uses_per_gpu_heads():
    from slimlib.registry.gpus import GPU

    attn, _ = _vidur_tables()
    gpu = GPU(name="toy", peak_flops=1e12, mem_bw=1e10, mem_bytes=1e9, aliases=(), source="test")
    out = ch.attention_roofline_table(attn, gpu, [4], [200])
    row = out.iloc[0]
    flops = 4 * 4 * 200 * 4 * 8  # 4 q heads per GPU (8 / TP 2)
    nbytes = 2 * 4 * 200 * 1 * 8 * 2 + 2 * 4 * 4 * 8 * 2  # 1 kv head per GPU
    assert row["gflop"] * 1e9 == pytest.approx(flops)
    assert row["mbytes"] * 1e6 == pytest.approx(nbytes)
    assert row["time_ms"] == pytest.approx(0.8)
    assert row["achieved_tflop_s"] * 1e12 == pytest.approx(flops / 0.8e-3)
    assert row["bw_util"] == pytest.approx(nbytes / 0.8e-3 / 1e10)
    assert row["ridge_flop_per_byte"] == pytest.approx(100.0)


def test_offline_sweeps_pick_unprofiled_family():
    rows = []
    for fam, prof, bs in (
        ("prefill_vs_decode/batch_evolution", "none", [1, 2]),
        ("decode_kernels/distinct_kernels", "nsys", [1, 2, 4]),
        ("attention_kernel/roofline/flash", "ncu", [1, 2, 4, 8]),
    ):
        for b in bs:
            rows.append(
                dict(
                    family=fam,
                    model="a",
                    batch_size=b,
                    profiler=prof,
                    timing_valid=prof != "ncu",
                    preempted=False,
                )
            )
    rows.append(
        dict(
            family="decode_kernels/distinct_kernels",
            model="b",
            batch_size=1,
            profiler="nsys",
            timing_valid=True,
            preempted=False,
        )
    )
    out = ch.offline_batch_sweeps(pd.DataFrame(rows))
    assert out[out.model == "a"]["family"].unique().tolist() == ["prefill_vs_decode/batch_evolution"]
    assert out[out.model == "b"]["batch_size"].tolist() == [1]
