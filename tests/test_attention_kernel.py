"""The decode attention's width on a device with the measured kernel, and the kernel-composed curves that showed it,
a mixture of experts' among them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.data import load
from slimlib.experiments.accuracy.composed_curves import (
    COMPOSED,
    COMPOSED_FP4,
    COMPOSED_FP4_GPUS,
    COMPOSED_FP8,
    COMPOSED_FP8_GPUS,
    COMPOSED_GPUS,
    COMPOSED_MOE,
    COMPOSED_MOE_MODELS,
    FP4,
    FP8,
    composed_configs,
)
from slimlib.experiments.kernel_timing.composition import (
    MOE_DISTRIBUTION,
    OutOfGridError,
    compose_kernels,
    kernel_set,
)
from slimlib.model import make_model
from slimlib.model.features import model_features
from slimlib.model.serving import serving_config
from slimlib.model.terms import DECODE_ATTENTION, attention_bytes
from slimlib.model.terms.recommended import ATTENTION_SWITCH_PAIRS, HOST_SEQUENCE_S
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu


def _attention_s(model: str, gpu: str, batch: list[float], paged_rule: bool = False) -> np.ndarray:
    """Seconds of one request's decode attention reads at `batch`; `paged_rule`: vLLM's paged-attention widening
    whatever the device measures."""
    df = pd.DataFrame(
        {"model": model, "gpu": gpu, "batch_size": batch, "input_len": 512.0, "output_len": 128.0}
    )
    hw = get_gpu(gpu)
    f = model_features(df, hw)
    if paged_rule:
        return np.asarray(attention_bytes(f) / hw.mem_bw, dtype=float)
    assert DECODE_ATTENTION.times is not None
    return np.asarray(DECODE_ATTENTION.times({}, f, hw).request, dtype=float)


def test_the_measured_kernel_reads_each_kv_head_once_at_every_batch():
    # the fact behind the rule: vLLM's decode kernel in AIConfigurator's tables (32 query / 8 KV heads) has no step
    # where the paged-attention rule switches (B x 32 > 512 from B = 32): twice the batch costs about twice (the
    # median ratio over the contexts measured), never the 2 x 4 the widening would charge
    a = load("aic-decode-attention")
    a = a[(a["system"] == "h100_sxm") & (a["n_heads"] == 32) & (a["n_kv_heads"] == 8) & (a["head_dim"] == 128)
          & (a["kv_cache_dtype"] == "bfloat16")]  # fmt: skip
    piv = a.pivot_table(index="context", columns="batch_size", values="latency_ms", aggfunc="first")
    switch = ATTENTION_SWITCH_PAIRS // 32
    both = piv[[switch, 2 * switch]].dropna()
    assert len(both) >= 3
    ratio = both[2 * switch] / both[switch]
    assert ratio.median() < 2.0 and ratio.max() < 4.0


def test_kernel_aware_attention_drops_the_widening_only_on_the_measured_kernels_devices():
    b = [8.0, 16.0, 32.0, 64.0]
    d = get_architecture("llama-3-8b").hidden_size / get_architecture("llama-3-8b").d_kv  # 4
    old, new = (
        _attention_s("llama-3-8b", "h100-sxm", b, paged_rule=True),
        _attention_s("llama-3-8b", "h100-sxm", b),
    )
    np.testing.assert_allclose(new[:2], old[:2])  # below the switch the two agree
    np.testing.assert_allclose(new[2:] * d, old[2:])  # above it the paged rule reads D / D_kv = 4x the bytes
    np.testing.assert_allclose(new, new[0])  # the kernel's: the same bytes per request at every B
    # no measured kernel (AMD): the paged-attention rule stays
    amd = [_attention_s("llama-3-8b", "mi300x", b, paged_rule=rule) for rule in (True, False)]
    np.testing.assert_allclose(amd[0], amd[1])
    assert amd[1][2] / amd[1][1] == pytest.approx(d)


def test_a_mixture_of_experts_is_composed_with_its_measured_fused_moe_kernel():
    # Mixtral on the H200: its experts are the fused-MoE kernel at the step's tokens (exact at the measured token
    # counts, blocks of the largest beyond), no dense FFN GEMMs; its attention-side GEMMs are Llama-3-8B's shapes
    moe = load("aic-moe")
    moe = moe[(moe["system"] == "h200_sxm") & (moe["hidden_size"] == 4096) & (moe["inter_size"] == 14336)
              & (moe["moe_dtype"] == "bfloat16") & (moe["moe_tp"] == 1) & (moe["moe_ep"] == 1)
              & (moe["distribution"] == MOE_DISTRIBUTION)].sort_values("num_tokens")  # fmt: skip
    ks, dense = kernel_set("mixtral-8x7b", "h200"), kernel_set("llama-3-8b", "h200")
    assert ks.layer_kinds == ("qkv", "o", "experts") and "ffn_up" not in ks.shapes
    tokens, ms = moe["num_tokens"].to_numpy(float), moe["latency_ms"].to_numpy(float)
    np.testing.assert_allclose(ks.experts_ms(tokens), ms, rtol=1e-12)
    assert ks.experts_ms(3 * tokens[-1]) == pytest.approx(3 * ms[-1])
    b = np.array([1.0, 8.0, 64.0])
    step = ks.decode_step(b, 512.0)
    np.testing.assert_allclose(step["experts"], ks.n_layers * ks.experts_ms(b), rtol=1e-12)
    np.testing.assert_allclose(step["qkv"], dense.decode_step(b, 512.0)["qkv"], rtol=1e-12)
    parts = step[["qkv", "o", "experts", "attention", "lm_head", "allreduce"]].sum(axis=1)
    np.testing.assert_allclose(step["total_ms"], parts, rtol=1e-12)
    # a layout the tables do not keep (fp8 experts split over 2 GPUs) is refused, nothing extrapolated
    with pytest.raises(OutOfGridError, match="no measured fused-MoE kernel"):
        kernel_set("mixtral-8x7b", "h200", gemm_dtype="fp8", tp=2)


def test_a_fine_grained_mixture_of_experts_reads_only_the_experts_its_tokens_touch(composed):
    # Qwen3-30B-A3B: 128 experts of width 768, 8 per token. One token's fused-MoE kernel reads 8 of them, 128 tokens
    # read all: on every GPU the first takes under a fifth of the second (0.09-0.13 in the tables), which is the
    # touched-expert read the model charges, not a dense FFN's
    for gpu in COMPOSED_GPUS:
        one, all_read = kernel_set("qwen3-30b-a3b", gpu).experts_ms(np.array([1.0, 128.0]))
        assert one < 0.2 * all_read, gpu
    # its 61 GB of weights leave a KV pool on every GPU at TP 1, and its rows are the mixture-of-experts dataset
    g = composed[composed["model"] == "qwen3-30b-a3b"]
    assert set(g.loc[g["tensor_parallel"] == 1, "gpu"]) == set(COMPOSED_GPUS)
    assert (g["source"] == COMPOSED_MOE).all() and (g["quantization"] == "").all()
    # a few experts are read at a lower efficiency than all of them: per touched expert, one token's read costs
    # 1.35-2.1x an expert's share of the 128-token read (H200: 5.1 us against 2.5 us; 9.4 MB at 4.8 TB/s: 2.0 us)
    for gpu in COMPOSED_GPUS:
        one, all_read = kernel_set("qwen3-30b-a3b", gpu).experts_ms(np.array([1.0, 128.0]))
        assert one / 8 > 1.3 * all_read / 128, gpu
    # so a slim fit at B <= 4 sees the expert read grow faster with B than the touched experts' bytes at eta_w do,
    # gives the surplus to the per-sequence cost alpha, which keeps growing once every expert is read: the larger
    # batches are under-predicted (the protocol's batch fold; the aic-composed-moe cells of extrap_cv_models)
    h200 = g[(g["gpu"] == "h200-sxm") & (g["tensor_parallel"] == 1)]
    fit = make_model("slim", n_starts=0).fit(h200[h200["batch_size"] <= 4])
    big = h200[h200["batch_size"] >= 128]
    err = fit.predict(big)["pred_throughput_tok_s"].to_numpy() / big["throughput_tok_s"].to_numpy() - 1
    assert fit.params_["alpha"] > 0 and len(big) and (err < -0.2).all()
    # its experts split over 2 GPUs are the kernel measured at that split (kept by `slim data build`): each GPU
    # reads half of every expert's weights, in about half the time (0.56x on the H200 at 128 tokens)
    whole, half = (
        kernel_set("qwen3-30b-a3b", "h200", tp=tp).experts_ms(np.array([128.0]))[0] for tp in (1, 2)
    )
    assert 0.4 * whole < half < 0.7 * whole


def test_composed_curves_are_the_kernels_plus_the_host_work_within_the_kv_pool(composed):
    cfg, left = composed_configs()
    assert left["no KV pool for the weights"] > 0  # a 70B model has no pool on one 80 GB GPU
    assert set(composed["gpu"]) == set(COMPOSED_GPUS)
    moe, fp8, fp4 = (composed["model"].isin(COMPOSED_MOE_MODELS), composed["quantization"] == FP8,
                     composed["quantization"] == FP4)  # fmt: skip
    assert moe.any() and fp8.any() and fp4.any() and not (moe & (fp8 | fp4)).any()
    assert set(composed.loc[fp8, "gpu"]) == set(COMPOSED_FP8_GPUS)
    assert set(composed.loc[fp4, "gpu"]) == set(COMPOSED_FP4_GPUS)
    expected = np.where(moe, COMPOSED_MOE, np.where(fp8, COMPOSED_FP8, np.where(fp4, COMPOSED_FP4, COMPOSED)))
    assert (composed["source"] == expected).all()
    assert set(composed["tensor_parallel"]) == {1, 2, 4, 8}
    for (model, gpu, tp, quant), g in composed.groupby(["model", "gpu", "tensor_parallel", "quantization"]):
        sc = serving_config(get_architecture(model), gpu, tensor_parallel=tp, quantization=quant or None)
        tokens = g["batch_size"] * (g["input_len"] + g["output_len"])
        assert (tokens <= np.asarray(sc.kv_token_capacity(g["input_len"] + g["output_len"]))).all()
    plain = composed[composed["quantization"] == ""]
    one = plain.iloc[[0, len(plain) // 3, len(plain) // 2, len(plain) - 1]]
    assert one["tensor_parallel"].nunique() > 1
    k = compose_kernels(one)
    host = (one["output_len"] - 1) * one["batch_size"] * HOST_SEQUENCE_S
    np.testing.assert_allclose(one["e2e_s"], k["e2e_s"].to_numpy() + host.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(
        one["throughput_tok_s"], one["batch_size"] * (one["input_len"] + one["output_len"]) / one["e2e_s"]
    )
    # the FP8 curves are the FP8 GEMMs': a 70B model's B = 1 decode on one H100, bound by reading its weights, takes
    # about half the bf16 GEMM time (half the bytes)
    eight = composed[fp8 & (composed["batch_size"] == 1) & (composed["gpu"] == "h100-sxm")
                     & (composed["model"] == "llama-3-70b") & (composed["tensor_parallel"] == 1)]  # fmt: skip
    host = (eight["output_len"] - 1) * eight["batch_size"] * HOST_SEQUENCE_S
    k8 = compose_kernels(eight, gemm_dtype="fp8")
    np.testing.assert_allclose(eight["e2e_s"], k8["e2e_s"].to_numpy() + host.to_numpy(), rtol=1e-12)
    ratio = k8["decode_gemm_s"].to_numpy() / compose_kernels(eight)["decode_gemm_s"].to_numpy()
    assert len(eight) and ((ratio > 0.45) & (ratio < 0.6)).all()
    # and the FP4 curves the B200's NVFP4 GEMMs: a 70B B = 1 decode on one B200 in under half the bf16 GEMM time
    four = composed[fp4 & (composed["batch_size"] == 1) & (composed["model"] == "llama-3-70b")
                    & (composed["tensor_parallel"] == 1)]  # fmt: skip
    host = (four["output_len"] - 1) * four["batch_size"] * HOST_SEQUENCE_S
    k4 = compose_kernels(four, gemm_dtype="nvfp4")
    np.testing.assert_allclose(four["e2e_s"], k4["e2e_s"].to_numpy() + host.to_numpy(), rtol=1e-12)
    assert (
        len(four)
        and (k4["decode_gemm_s"].to_numpy() < 0.5 * compose_kernels(four)["decode_gemm_s"].to_numpy()).all()
    )
    assert composed["mean_ttft_ms"].isna().all() and composed["static_batch"].all()


def test_slim_fitted_before_the_knee_predicts_the_composed_curve_past_it(composed):
    # H100, Llama-3-8B: fit B <= 4 of every curve, predict B 8-256 (the protocol's batch fold); the kernel-aware
    # attention stays within 12% where the paged-attention widening, on that kernel, is 20-40% slow at B >= 64
    g = composed[
        (composed["gpu"] == "h100-sxm")
        & (composed["model"] == "llama-3-8b")
        & (composed["tensor_parallel"] == 1)
        & (composed["quantization"] == "")
    ]
    train, test = g[g["batch_size"] <= 4], g[g["batch_size"] >= 64]
    fit = make_model("slim", n_starts=0).fit(train)
    err = fit.predict(test)["pred_throughput_tok_s"].to_numpy() / test["throughput_tok_s"].to_numpy() - 1
    assert np.abs(err).max() < 0.12
