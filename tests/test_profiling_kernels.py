"""Kernel classification and time shares (paper Fig. 5) on a recorded CPU trace and on GPU kernel names."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.kit.kernel_classes import CATEGORIES, classify_kernel, kernel_breakdown

FIX = Path(__file__).parent / "fixtures" / "profiling"

GPU_NAMES = {
    # attention kernels, including those carrying GEMM-library words
    "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>(Flash_fwd_params)": "attention",
    "void pytorch_flash::flash_fwd_splitkv_combine_kernel<...>": "attention",
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params)": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1_kernel0_0": "attention",
    "void (anonymous namespace)::softmax_warp_forward<c10::Half, float, 10>": "attention",
    # dense GEMMs
    "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NNT": "gemm",
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel": "gemm",
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn": "gemm",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>(Params)": "gemm",
    "void gemv2T_kernel_val<int, int, __half, __half, float, 128, 16, 4, 4, false, false>": "gemm",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __half, float, false, __half, false>": "gemm",
    # norms and elementwise
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>": "norm_elementwise",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>>": "norm_elementwise",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>": "norm_elementwise",
    "void at::native::rms_norm_kernel<c10::BFloat16>": "norm_elementwise",
    # everything else
    "void at::native::reduce_kernel<512, 1, ReduceOp<c10::Half, ArgMaxOps<c10::Half>>>": "other",
    "Memcpy DtoD (Device -> Device)": "other",
    "void at::native::indexSelectLargeIndex<c10::Half, long>": "other",
}
CPU_NAMES = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "attention",
    "aten::scaled_dot_product_attention": "attention",
    "aten::mm": "gemm",
    "aten::addmm": "gemm",
    "aten::bmm": "gemm",
    "aten::linear": "gemm",
    "aten::matmul": "gemm",
    "aten::native_layer_norm": "norm_elementwise",
    "aten::_fused_rms_norm": "norm_elementwise",
    "aten::add_": "norm_elementwise",
    "aten::silu": "norm_elementwise",
    "aten::relu": "norm_elementwise",
    "aten::copy_": "norm_elementwise",
    "aten::normal_": "other",  # 'norm' inside 'normal' is not a normalization
    "aten::addmv_out_not_a_real_op": "other",
    "aten::argmax": "other",
    "aten::embedding": "other",
    "aten::transpose": "other",
}


@pytest.mark.parametrize("name,category", sorted({**GPU_NAMES, **CPU_NAMES}.items()))
def test_classify_known_names(name, category):
    assert classify_kernel(name) == category


def test_classify_is_case_insensitive_and_total():
    assert classify_kernel("FLASH_FWD_KERNEL") == "attention"
    assert classify_kernel("") == "other"
    assert classify_kernel(None) == "other"


def _trace():
    return pd.read_csv(FIX / "cpu_decode_ops_tiny_gqa.csv")


def test_breakdown_of_recorded_cpu_trace():
    trace = _trace()
    br = kernel_breakdown(trace)
    assert list(br["category"]) == list(CATEGORIES)
    assert br["share"].sum() == pytest.approx(1.0)
    assert br["duration"].sum() == pytest.approx(trace["duration_us"].sum())
    # recompute the attention and gemm sums from the rows independently
    cats = trace["name"].map(classify_kernel)
    for cat in ("attention", "gemm"):
        expected = trace.loc[cats == cat, "duration_us"].sum() / trace["duration_us"].sum()
        assert br.set_index("category").loc[cat, "share"] == pytest.approx(expected)
        assert expected > 0  # the trace holds SDPA and mm operators
    assert (br["share"] >= 0).all()


def test_breakdown_by_group_and_missing_categories_are_zero():
    gpu = pd.DataFrame({"name": list(GPU_NAMES), "duration_us": np.arange(1.0, len(GPU_NAMES) + 1)})
    two = pd.concat([gpu.assign(point="a"), gpu.assign(point="b", duration_us=gpu["duration_us"] * 2)])
    only_gemm = pd.DataFrame({"point": ["c"], "name": ["nvjet_tst_64x8"], "duration_us": [5.0]})
    br = kernel_breakdown(pd.concat([two, only_gemm]), by=["point"])
    assert len(br) == 3 * len(CATEGORIES)
    shares = br.pivot(index="point", columns="category", values="share")
    assert shares.loc["a"].to_dict() == pytest.approx(shares.loc["b"].to_dict())  # scale-free
    assert shares.loc["c", "gemm"] == 1.0 and shares.loc["c", "attention"] == 0.0


def test_breakdown_rejects_bad_tables():
    with pytest.raises(DataError, match="lacks column"):
        kernel_breakdown(pd.DataFrame({"kernel": ["x"], "duration_us": [1.0]}))
    with pytest.raises(DataError, match="row 1"):
        kernel_breakdown(pd.DataFrame({"name": ["a", "b"], "duration_us": [1.0, -2.0]}))
    with pytest.raises(DataError, match="not a duration"):
        kernel_breakdown(pd.DataFrame({"name": ["a"], "duration_us": ["fast"]}))
