"""Tensor parallelism: per-rank features, the all-reduce time, and TP = 1 giving exactly today's predictions."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from shared_paths import RAW, needs
from synthetic import TRUE_PARAMS

from slimlib.errors import DataError
from slimlib.model import PaperModel, SlimModel, model_features
from slimlib.model import equations as eq
from slimlib.model.parallel import (
    allreduce_time,
    allreduce_times,
    alltoall_time,
    split_features,
    step_weight_bytes,
    tensor_parallel_column,
    touched_expert_bytes,
)
from slimlib.registry.gpus import get_gpu, gpu_names
from slimlib.registry.host_cpu import CPU_DEVICES


def _table(models=("llama-2-7b", "qwen2-7b", "llama-2-70b"), gpu="mi300x", tp=None):
    rows = [
        {"model": m, "gpu": gpu, "batch_size": b, "input_len": il, "output_len": il}
        for m in models for b in (1, 16, 64) for il in (128, 1024)
    ]  # fmt: skip
    df = pd.DataFrame(rows)
    if tp is not None:
        df["tensor_parallel"] = tp
    return df


def test_split_features_tp1_is_identity_and_tp2_halves_per_rank_work():
    f = model_features(_table())
    one = split_features(f, 1)
    for k in f:
        np.testing.assert_array_equal(one[k], f[k])
    two = split_features(f, 2)
    np.testing.assert_array_equal(two["n_layers"], f["n_layers"] / 2)
    # memory is per GPU in the features already (the serving configuration): split_features leaves it alone
    np.testing.assert_array_equal(two["weight_bytes_total"], f["weight_bytes_total"])
    at2 = model_features(_table(tp=2))
    np.testing.assert_array_equal(at2["weight_bytes_total"], f["weight_bytes_total"] / 2)
    np.testing.assert_array_equal(at2["kv_bytes_per_token"], f["kv_bytes_per_token"] / 2)
    np.testing.assert_array_equal(two["n_layers_total"], f["n_layers"])
    np.testing.assert_array_equal(two["hidden_size"], f["hidden_size"])


def test_kv_heads_are_replicated_beyond_their_count():
    df = _table(models=("llama-2-70b",), tp=16)  # 8 KV heads over 16 ranks: one head (replicated) per rank
    f = model_features(df)
    base = model_features(df.drop(columns="tensor_parallel"))
    np.testing.assert_allclose(f["kv_bytes_per_token"], base["kv_bytes_per_token"] / 8)
    np.testing.assert_allclose(f["n_layers"] * f["d_kv"], base["n_layers"] * base["d_kv"] / 8)


def test_tensor_parallel_sizes_vllm_refuses_are_errors():
    """vLLM splits only when the query heads divide evenly (Qwen2-7B: 28 heads, not over 8 GPUs)."""
    df = _table(models=("qwen2-7b",), tp=8)
    df.attrs["source"] = "runs.csv"
    with pytest.raises(
        DataError,
        match=r"runs.csv line 2: tensor_parallel = 8 does not split qwen2-7b as vLLM requires \(its 28 attention",
    ):
        model_features(df)
    assert np.isfinite(model_features(_table(models=("qwen2-7b",), tp=4))["n_layers"]).all()


def test_allreduce_time_zero_at_tp1_and_grows_with_message():
    gpu = get_gpu("mi300x")
    assert allreduce_time(1e6, 1, gpu) == 0.0
    small, big = allreduce_time(np.array([1e3, 1e9]), 8, gpu)
    assert 4e-6 < small < 5e-6  # latency floor
    assert big == pytest.approx(4.713e-6 + 2 * 7 / 8 * 1e9 / (7 * 64e9), rel=1e-9)
    with pytest.raises(DataError, match="link_bw"):
        allreduce_time(1e6, 2, dataclasses.replace(get_gpu("h100"), link_bw=None))
    with pytest.raises(DataError, match="allreduce_latency_s"):
        allreduce_time(1e6, 2, dataclasses.replace(get_gpu("h100"), allreduce_latency_s=()))


def test_allreduce_switched_nvlink_bandwidth_does_not_grow_with_group():
    """NVSwitch: each H100 SXM has 450 GB/s per direction to all its peers, whatever the group size; the
    latency is H100's own measured table."""
    h100 = get_gpu("h100")
    m = 1e9
    for p, lat_us in ((2, 4.292), (4, 4.589), (8, 4.713)):
        assert allreduce_time(m, p, h100) == pytest.approx(
            lat_us * 1e-6 + 2 * (p - 1) / p * m / 450e9, rel=1e-12
        )
    b200 = get_gpu("b200")
    assert allreduce_time(256.0, 2, b200) == pytest.approx(6.589e-6 + 256 / 900e9, rel=1e-12)


def test_every_gpu_has_interconnect_and_latency():
    """Tensor parallelism is accepted on every GPU of the registry (NVIDIA TP rows used to stop); the host
    CPU devices (`CPU_DEVICES`) are one socket with no interconnect, so TP > 1 there is refused (tests/test_bad_inputs.py)."""
    assert all(get_gpu(name).link_bw is None for name in CPU_DEVICES)
    for name in gpu_names():
        if name in CPU_DEVICES:
            continue
        g = get_gpu(name)
        assert g.link_bw and g.link_bw > 0 and g.link_source, name
        assert g.allreduce_latency_s and g.allreduce_source, name
        assert g.link_kind in ("switch", "pair"), name
        assert allreduce_time(1e6, 2, g) > 0


def test_allreduce_times_two_calls_per_layer():
    f = model_features(_table(tp=4))
    step, pre = allreduce_times(f, get_gpu("mi300x"))
    layers = model_features(_table())["n_layers"]
    d, b = f["hidden_size"], f["batch_size"]
    np.testing.assert_allclose(step, 2 * layers * allreduce_time(b * d * 2, 4, get_gpu("mi300x")))
    assert (pre > step).all()


def test_tensor_parallel_column_default_and_errors():
    np.testing.assert_array_equal(tensor_parallel_column(_table()), 1.0)
    with pytest.raises(DataError, match="tensor_parallel"):
        tensor_parallel_column(_table(tp=1.5))
    with pytest.raises(DataError, match="tensor_parallel"):
        tensor_parallel_column(_table(tp=0))


@pytest.mark.parametrize("with_column", [False, True])
def test_tp1_gives_exactly_the_paper_equations(with_column):
    df = _table(tp=1 if with_column else None)
    paper = {"eta_c": 0.4, "t_fixed": 0.2, "eta_m": 0.6, "B0": 3.0, "alpha": 2e-4, "gamma": 3e-6}
    got = PaperModel.with_params(paper, "mi300x").predict(df)
    hw, f = get_gpu("mi300x"), model_features(df.drop(columns="tensor_parallel", errors="ignore"))
    b, il, ol, L, D = f["batch_size"], f["input_len"], f["output_len"], f["n_layers"], f["hidden_size"]
    pre = eq.prefill_time(eq.prefill_flops(b, il, L, D, f["d_kv"], f["ffn_size"], f["n_ffn_matrices"]),
                          hw.peak_flops, paper["eta_c"])  # fmt: skip
    kv = eq.decode_kv_bytes(L, f["d_kv"], f["kv_bytes"], eq.kv_scan_tokens(il, ol))
    dense = eq.dense_decode_time(ol, L, D, paper["alpha"], paper["gamma"])
    dec = eq.decode_time(b, dense, kv, hw.mem_bw, paper["eta_m"], paper["B0"])
    e2e = eq.e2e_latency(pre, dec, paper["t_fixed"])
    np.testing.assert_array_equal(got["pred_e2e_s"], e2e)  # bit for bit: no all-reduce term at 1 GPU
    np.testing.assert_array_equal(got["pred_throughput_tok_s"], eq.throughput(b, il, ol, e2e))
    ext = {
        "eta_c": 0.4,
        "t_fixed": 0.2,
        "eta_attn": 0.6,
        "eta_w": 0.7,
        "alpha": 2e-4,
        "t_step": 1e-3,
        "t_layer": 0.0,
        "t_act": 0.0,
    }
    a = SlimModel.with_params(ext, "mi300x").predict(df)
    b2 = SlimModel.with_params(ext, "mi300x").predict(df.drop(columns="tensor_parallel", errors="ignore"))
    pd.testing.assert_frame_equal(a, b2, check_exact=True)


def test_more_ranks_predict_faster_decode_of_a_big_model():
    ext = {
        "eta_c": 0.4,
        "t_fixed": 0.0,
        "eta_attn": 0.6,
        "eta_w": 0.7,
        "alpha": 0.0,
        "t_step": 0.0,
        "t_layer": 0.0,
        "t_act": 0.0,
    }
    m = SlimModel.with_params(ext, "mi300x")
    e2e = [m.predict(_table(models=("llama-2-70b",), tp=p))["pred_e2e_s"].to_numpy() for p in (1, 2, 8)]
    assert (e2e[1] < e2e[0]).all() and (e2e[2] < e2e[1]).all()


AIC_SYSTEMS = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "systems" / "data"


@needs(AIC_SYSTEMS, "AIConfigurator kernel tables")
@pytest.mark.parametrize(
    "gpu, system, version",
    [("h100-sxm-80gb", "h100_sxm", "0.24.0"), ("h200-sxm-141gb", "h200_sxm", "0.24.0"),
     ("a100-sxm-80gb", "a100_sxm", "0.14.0"), ("b200-sxm-180gb", "b200_sxm", "0.24.0")],
)  # fmt: skip
def test_allreduce_latency_is_the_measured_nccl_table(gpu, system, version):
    """The registry's small-message latencies are AIConfigurator's measured vLLM custom all-reduce (CUDA graph,
    128 bf16 elements), to the table's 1 ns resolution; GPUs without a table say they use a proxy."""
    t = pd.read_parquet(AIC_SYSTEMS / system / "comm" / "vllm" / version / "custom_allreduce_perf.parquet")
    t = t[(t["message_size"] == 128) & (t["backend"] == "vllm_graph") & (t["allreduce_dtype"] == "bfloat16")]
    measured = {int(p): float(ms) * 1e-3 for p, ms in zip(t["num_gpus"], t["latency"], strict=True)}
    g = get_gpu(gpu)
    assert dict(g.allreduce_latency_s) == pytest.approx(measured, abs=1e-9)
    assert system in g.allreduce_source and "proxy" not in g.allreduce_source
    measured_gpus = ("h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "b200-sxm-180gb")
    for name in (n for n in gpu_names() if n not in CPU_DEVICES):  # a host CPU has no all-reduce at all
        assert ("proxy" in get_gpu(name).allreduce_source) == (name not in measured_gpus), name


def test_h100_tensor_parallel_rows_predict():
    """`predict` on H100 TP 2 rows used to stop with 'no interconnect bandwidth'. With the paper's parameters, a
    70B model on 2 GPUs predicts more than on 1 (half the per-GPU work) and less than twice (the all-reduces)."""
    m = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    rows = _table(models=("llama-2-70b",), gpu="h100-sxm-80gb")
    one = m.predict(rows)["pred_throughput_tok_s"].to_numpy()
    two = m.predict(rows.assign(tensor_parallel=2))["pred_throughput_tok_s"].to_numpy()
    assert np.isfinite(two).all()
    assert (two > one).all() and (two < 2 * one).all()


def test_expert_reads_follow_the_touch_curve_and_dense_models_read_everything():
    f = {"n_experts": np.array([8.0, 1.0]), "experts_per_token": np.array([2.0, 1.0]),
         "expert_weight_bytes": np.array([80e9, 0.0]), "dense_weight_bytes": np.array([4e9, 14e9]),
         "batch_size": np.array([3.0, 3.0])}  # fmt: skip
    share = 1 - (1 - 2 / 8) ** 3
    assert touched_expert_bytes(f, f["batch_size"]) == pytest.approx([80e9 * share, 0.0])
    assert step_weight_bytes(f) == pytest.approx([4e9 + 80e9 * share, 14e9])
    assert touched_expert_bytes(f, np.array([1e6, 1e6]))[0] == pytest.approx(80e9)  # a long prefill: all


def test_alltoall_is_zero_on_one_gpu_and_needs_a_link_elsewhere():
    hw = get_gpu("h100-sxm-80gb")
    assert alltoall_time(1e6, 1.0, hw) == 0.0
    assert alltoall_time(1e6, 8.0, hw) == pytest.approx(
        float(allreduce_time(0.0, 8.0, hw)) + 7 / 8 * 1e6 / hw.link_bw, rel=1e-12
    )
    with pytest.raises(DataError, match="link_bw"):
        alltoall_time(1e6, 2.0, dataclasses.replace(hw, link_bw=None))
