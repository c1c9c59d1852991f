"""Decode-step / prefill composition from measured vLLM kernel timings (slimlib.experiments.kernel_timing.composition)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.data import load
from slimlib.data.aiconfigurator import SYSTEMS, system_for_gpu
from slimlib.errors import DataError
from slimlib.experiments.kernel_timing.composition import OutOfGridError, compose_kernels, kernel_set
from slimlib.experiments.kernel_timing.composition_figures import GPU_LABEL
from slimlib.registry.gpus import get_gpu, gpu_label


@pytest.fixture(scope="module")
def ks():
    return kernel_set("mistral-7b", "h100")


@pytest.fixture(scope="module")
def tables():
    dec = load("aic-decode-attention")
    dec = dec[(dec.system == "h100_sxm") & (dec.n_heads == 32) & (dec.n_kv_heads == 8)
              & (dec.kv_cache_dtype == "bfloat16")]  # fmt: skip
    pre = load("aic-prefill-attention")
    pre = pre[(pre.system == "h100_sxm") & (pre.n_heads == 32) & (pre.n_kv_heads == 8)
              & (pre.kv_cache_dtype == "bfloat16") & (pre.head_dim == 128)]  # fmt: skip
    gem = load("aic-gemm")
    gem = gem[(gem.system == "h100_sxm") & (gem.gemm_dtype == "bfloat16")]
    return dec, pre, gem


def test_exact_at_grid_points(ks, tables):
    dec, pre, gem = tables
    got = ks.decode_attention_ms(dec["batch_size"].to_numpy(float), dec["context"].to_numpy(float))
    np.testing.assert_allclose(got, dec["latency_ms"].to_numpy(float), rtol=1e-12)
    got = ks.prefill_attention_ms(pre["batch_size"].to_numpy(float), pre["input_len"].to_numpy(float))
    np.testing.assert_allclose(got, pre["latency_ms"].to_numpy(float), rtol=1e-12)
    qkv = gem[(gem.n == 6144) & (gem.k == 4096)].sort_values("m")  # Mistral's fused QKV is on the grid
    np.testing.assert_allclose(ks.gemm_ms("qkv", qkv["m"].to_numpy(float)), qkv["latency_ms"], rtol=1e-12)


def test_monotone_where_the_data_are(ks, tables):
    dec = tables[0]
    checked = 0
    for b, row in dec.groupby("batch_size"):
        row = row.sort_values("context")
        c, t = row["context"].to_numpy(float), row["latency_ms"].to_numpy(float)
        for i in range(len(c) - 1):  # between each pair of measured contexts, the direction of the data
            x = np.geomspace(c[i], c[i + 1], 50)
            f = ks.decode_attention_ms(np.full(len(x), float(b)), x)
            d = np.diff(f) * np.sign(t[i + 1] - t[i])
            assert np.all(d >= -1e-15), (b, c[i])
            assert f.min() >= min(t[i], t[i + 1]) * (1 - 1e-12) and f.max() <= max(t[i], t[i + 1]) * (
                1 + 1e-12
            )
            checked += 1
    assert checked > 100
    # between measured batch sizes the interpolation is linear in B: B = 24 is the mean of 16 and 32
    a, b, m = ks.decode_attention_ms([16.0, 32.0, 24.0], [1023.0, 1023.0, 1023.0])
    assert m == pytest.approx((a + b) / 2, rel=1e-12)


def _loglog(x, x0, x1, y0, y1):
    u = np.log(x / x0) / np.log(x1 / x0)
    return np.exp((1 - u) * np.log(y0) + u * np.log(y1))


def test_decode_step_against_hand_sum(ks, tables):
    dec, _, gem = tables
    B, C = 64, 1023
    t = gem[gem.m == B].set_index(["n", "k"])["latency_ms"]
    attn = float(dec[(dec.batch_size == B) & (dec.context == C)]["latency_ms"].iloc[0])
    qkv, o = t[(6144, 4096)], t[(4096, 4096)]
    up = _loglog(28672, 16384, 51200, t[(16384, 4096)], t[(51200, 4096)])
    down = _loglog(14336, 12288, 16384, t[(4096, 12288)], t[(4096, 16384)])
    lm = _loglog(32000, 16384, 51200, t[(16384, 4096)], t[(51200, 4096)])
    hand = 32 * (qkv + attn + o + up + down) + lm
    step = ks.decode_step(B, C)
    assert float(step["total_ms"].iloc[0]) == pytest.approx(hand, rel=1e-10)
    assert float(step["attention"].iloc[0]) == pytest.approx(32 * attn, rel=1e-12)


def test_e2e_decode_is_the_sum_of_its_steps(ks):
    B, IL, OL = 48, 300, 40
    e = ks.e2e(B, IL, OL).iloc[0]
    steps = ks.decode_step(np.full(OL - 1, float(B)), IL + np.arange(OL - 1, dtype=float))
    assert e["decode_s"] * 1e3 == pytest.approx(steps["total_ms"].sum(), rel=1e-10)
    assert e["prefill_s"] * 1e3 == pytest.approx(float(ks.prefill(B, IL)["total_ms"].iloc[0]), rel=1e-12)
    assert e["throughput_tok_s"] == pytest.approx(B * (IL + OL) / e["e2e_s"])


def test_compose_groups_and_keeps_order():
    cfg = pd.DataFrame({"model": ["granite-8b", "mistral-7b", "granite-8b"], "gpu": ["h200", "h100", "h100"],
                        "batch_size": [8, 8, 8], "input_len": [512] * 3, "output_len": [128] * 3})  # fmt: skip
    out = compose_kernels(cfg)
    assert list(out["model"]) == list(cfg["model"])
    assert out.iloc[0]["e2e_s"] < out.iloc[2]["e2e_s"]  # H200's bandwidth beats H100's on the same model
    assert out.iloc[1]["e2e_s"] < out.iloc[2]["e2e_s"]  # Granite has 40 layers to Mistral's 32


def test_out_of_grid_requests_raise(ks):
    with pytest.raises(OutOfGridError, match="batch size 4096.*outside the measured"):
        ks.decode_attention_ms(4096, 100)
    with pytest.raises(OutOfGridError, match=r"context 20000 is beyond the measured grid .*B = 64: 8191"):
        ks.decode_attention_ms(64, 20000)
    with pytest.raises(OutOfGridError, match="beyond the measured grid"):
        ks.e2e(256, 512, 1024)  # B = 256 is measured only up to 1023 cached tokens
    with pytest.raises(OutOfGridError, match="input length 20000 is outside"):
        ks.prefill(1, 20000)
    with pytest.raises(OutOfGridError, match="at most 8 KV heads"):
        kernel_set("llama-2-7b", "h100")


def test_composition_rules_beyond_the_largest_sizes(ks, tables):
    # a GEMM with more rows than measured is timed as row blocks of the largest measured m
    top = ks.gemm_m[-1]
    assert ks.gemm_ms("o", 2 * top + 16) == pytest.approx(2 * ks.gemm_ms("o", top) + ks.gemm_ms("o", 16))
    # a prefill of more requests than measured at that length is back-to-back groups of the largest batch
    pre = tables[1]
    g = int(pre[pre.input_len == 16384]["batch_size"].max())  # 8: the largest batch measured at 16384 tokens
    assert g == 8
    assert ks.prefill_attention_ms(64, 16384) == pytest.approx(8 * ks.prefill_attention_ms(g, 16384)[()])
    assert ks.prefill_attention_ms(20, 16384) == pytest.approx(
        2 * ks.prefill_attention_ms(g, 16384)[()] + ks.prefill_attention_ms(4, 16384)[()]
    )


def test_kernel_tables_resolve_gpus_through_the_registry():
    """Kernel tables, figure labels and the registry agree: every system's GPU is a registry GPU (B200 included),
    any alias finds its system, and a registry GPU without tables is a clear error."""
    for system, spec in SYSTEMS.items():
        assert get_gpu(spec["gpu"]).name == spec["gpu"]
        assert system_for_gpu(system) == system_for_gpu(spec["gpu"]) == system
        assert GPU_LABEL[system] == gpu_label(spec["gpu"])
    assert system_for_gpu("NVIDIA B200") == "b200_sxm" and system_for_gpu("h100") == "h100_sxm"
    with pytest.raises(DataError, match="mi300x has no AIConfigurator kernel tables"):
        system_for_gpu("mi300x")


def test_tensor_parallel_times_one_gpus_share_plus_two_measured_allreduces_per_layer():
    from slimlib.data.aiconfigurator import model_gemm_shapes, rank_heads
    from slimlib.registry.architectures import get_architecture

    arch = get_architecture("llama-3-8b")
    one, two = kernel_set("llama-3-8b", "h100"), kernel_set("llama-3-8b", "h100", tp=2)
    # vLLM's split: half the query and KV heads, column-parallel QKV and gate/up, row-parallel O and down
    assert rank_heads(arch, 2) == (16, 4, 128) and two.heads == (16, 4, 128)
    assert two.shapes == model_gemm_shapes(arch, 2) and two.shapes["qkv"] == ((16 + 2 * 4) * 128, 4096)
    assert two.shapes["ffn_down"] == (4096, 14336 // 2) and two.shapes["lm_head"] == (128256 // 2, 4096)
    # the measured all-reduce: the CUDA-graph kernel for a decode step, exact at a measured message size
    ar = load("aic-allreduce")
    ar = ar[(ar.system == "h100_sxm") & (ar.n_gpus == 2)].set_index(["backend", "message_elements"])[
        "latency_ms"
    ]
    np.testing.assert_allclose(two.allreduce_ms([1.0]), ar[("vllm_graph", 4096)], rtol=1e-12)
    # a pass of more than 512 tokens runs eagerly; beyond the largest message, blocks of it
    np.testing.assert_allclose(two.allreduce_ms([1024.0]), ar[("vllm_eager", 1024 * 4096)], rtol=1e-12)
    top = int(ar.loc["vllm_eager"].index.max())
    np.testing.assert_allclose(two.allreduce_ms([2.0 * top / 4096]), 2 * ar[("vllm_eager", top)], rtol=1e-12)
    d1, d2 = one.decode_step([8.0], [512.0]), two.decode_step([8.0], [512.0])
    assert (d1["allreduce"] == 0).all() and float(d2["allreduce"].iloc[0]) == pytest.approx(
        2 * 32 * float(two.allreduce_ms([8.0])[0]), rel=1e-12
    )
    # at B = 1 a layer's kernels are faster on half the work, but by less than half: their latency does not halve
    s1, s2 = (float(k.decode_step([1.0], [512.0])[["qkv", "o", "ffn_up", "ffn_down", "attention"]].sum(axis=1).iloc[0])
              for k in (one, two))  # fmt: skip
    assert 0.5 * s1 < s2 < s1
    e = two.e2e([8.0], [512.0], [128.0])
    assert float(e["decode_allreduce_s"].iloc[0]) == pytest.approx(127 * float(d2["allreduce"].iloc[0]) / 1e3)
    with pytest.raises(DataError, match="tp must be one of"):
        kernel_set("llama-3-8b", "h100", tp=3)
    assert kernel_set("llama-3-8b", "h100", tp=8).heads == (4, 1, 128)
    with pytest.raises(OutOfGridError, match="cannot split"):
        kernel_set("qwen2-7b", "h100", tp=8)  # 28 query heads do not split over 8 GPUs
