"""DeepSeek-V4 compressed attention (Flash, Pro and their NVIDIA and SGLang checkpoints): the layer kinds and exact
parameter counts by hand from the config numbers, the checkpoints' precisions, the refusals of inconsistent
layouts, and the served cache, weights, decode reads and prompt pairs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from config_files import write_config
from shared_paths import RAW, needs

from slimlib.advisor.launch import launch_settings
from slimlib.errors import DataError
from slimlib.experiments.kernel_timing.linear_check import device_efficiency
from slimlib.model import equations as eq
from slimlib.model.features import attention_width, model_features, refuse_unread_layers
from slimlib.model.serving import serving_config
from slimlib.model.terms.recommended import attention_bytes
from slimlib.registry.architectures import architecture_from_config, get_architecture
from slimlib.registry.gpus import get_gpu

CONFIGS = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "model_configs"
pytestmark = needs(CONFIGS, "AIConfigurator model_configs mirror")
FLASH = CONFIGS / "deepseek-ai--DeepSeek-V4-Flash_config.json"
PRO = CONFIGS / "deepseek-ai--DeepSeek-V4-Pro_config.json"


def _config(path) -> dict:
    return json.loads(path.read_text())


def _hand_count(d, heads, q_rank, groups, o_rank, experts, width, top_k, vocab, csa, hca, swa):
    """Parameters written out from vLLM's deepseek_v4.py modules (total, active), head_dim 512, one shared expert,
    hc_mult 4, indexer 64 heads of 128, 3 hash-routed layers, noaux_tc."""
    hd, hc, ih, iw, layers = 512, 4, 64, 128, csa + hca + swa
    attention = (
        d * q_rank  # wq_a (fused with wkv)
        + d * hd  # wkv: the one KV head
        + q_rank + hd  # q_norm, kv_norm
        + q_rank * heads * hd  # wq_b
        + heads * hd * o_rank  # wo_a: each of the groups maps heads * hd / groups values to o_rank
        + groups * o_rank * d  # wo_b
        + heads  # attn_sink
    )  # fmt: skip
    mix = (2 + hc) * hc
    hyper = 2 * (mix * hc * d + mix + 3)  # hc_attn_* and hc_ffn_*: fn (mix x hc d), base (mix), scale (3)
    expert = 3 * d * width  # w1, w2, w3
    layer = attention + 2 * d + hyper + d * experts + expert  # attn_norm, ffn_norm, gate, the shared expert
    # compressors: ape (ratio x c hd), wkv + wgate (c hd each; c = 2 for the overlapping 4:1 one), norm
    csa_compressor = 4 * 2 * hd + d * 2 * 2 * hd + hd
    hca_compressor = 128 * hd + d * 2 * hd + hd
    # indexer: wq_b, weights_proj, k_norm (weight, bias), its 4:1 compressor of width 128
    indexer = q_rank * ih * iw + d * ih + 2 * iw + (4 * 2 * iw + d * 2 * 2 * iw + iw)
    total = (
        2 * vocab * d  # embedding and the untied LM head
        + d + hc * hc * d + hc + 1  # final norm, hc_head fn / base / scale
        + layers * (layer + experts * expert)
        + (layers - 3) * experts  # e_score_correction_bias outside the hash-routed layers
        + csa * (csa_compressor + indexer) + hca * hca_compressor
    )  # fmt: skip
    return total, total - layers * (experts - top_k) * expert


def test_flash_and_pro_by_hand():
    """Flash 284.33B total, 13.27B active without the input embedding (card: 284B, 13B); Pro 1,573.0B and 48.86B
    (card: 1.6T, 49B); without either embedding 12.74B and 47.93B active."""
    flash, pro = architecture_from_config(FLASH), architecture_from_config(PRO)
    total, active = _hand_count(4096, 64, 1024, 8, 1024, 256, 2048, 6, 129280, csa=21, hca=20, swa=2)
    assert (flash.n_params, flash.n_active_params) == (total, active)
    assert flash.n_params == pytest.approx(284e9, rel=0.03)
    assert flash.n_active_params - 129280 * 4096 == pytest.approx(13e9, rel=0.03)
    total, active = _hand_count(7168, 128, 1536, 16, 1024, 384, 3072, 6, 129280, csa=30, hca=31, swa=0)
    assert (pro.n_params, pro.n_active_params) == (total, active)
    assert pro.n_params == pytest.approx(1.6e12, rel=0.03)
    assert pro.n_active_params - 129280 * 7168 == pytest.approx(49e9, rel=0.03)
    assert pro.expert_params == 61 * 384 * 3 * 7168 * 3072


def test_layer_kinds_leave_the_mtp_layer_out():
    ratios = _config(FLASH)["compress_ratios"]  # 44: 43 layers and the multi-token-prediction layer
    a = architecture_from_config(FLASH)
    assert len(ratios) == 44 and a.n_layers == 43
    assert (a.n_csa_layers, a.n_hca_layers, a.n_layers - a.n_csa_layers - a.n_hca_layers) == (21, 20, 2)
    assert (a.sliding_window, a.n_sliding_layers, a.n_indexer_layers, a.index_topk) == (128, 43, 21, 512)
    assert (a.n_kv_heads, a.head_dim, a.o_groups, a.hc_mult, a.n_moe_layers) == (1, 512, 8, 4, 43)
    pro = architecture_from_config(PRO)
    assert (pro.n_csa_layers, pro.n_hca_layers, pro.index_topk) == (30, 31, 1024)


@pytest.mark.parametrize(
    "name, quantization",
    [
        ("deepseek-ai--DeepSeek-V4-Flash", "fp8-mxfp4-experts"),  # expert_dtype fp4: vLLM's MXFP4 experts
        ("deepseek-ai--DeepSeek-V4-Pro", "fp8-mxfp4-experts"),
        ("nvidia--DeepSeek-V4-Flash-NVFP4", "fp8-nvfp4-experts"),  # moe_quant_algo NVFP4 + MIXED_PRECISION
        ("nvidia--DeepSeek-V4-Pro-NVFP4", "fp8-nvfp4-experts"),
        # SGLang's deepseek_ref: no expert dtype, fp8 throughout
        ("sgl-project--DeepSeek-V4-Flash-FP8", "fp8"),
        ("sgl-project--DeepSeek-V4-Pro-FP8", "fp8"),
    ],
)
def test_each_checkpoint_is_read_with_its_precision(name, quantization):
    a = architecture_from_config(CONFIGS / f"{name}_config.json")
    flash = architecture_from_config(FLASH if "Flash" in name else PRO)
    assert a.quantization == quantization and a.n_params == flash.n_params


def _edit(tmp_path, **changes):
    data = {**_config(FLASH), **changes}
    return write_config(tmp_path, {k: v for k, v in data.items() if v is not None})


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"compress_ratios": [0, 4, 128]}, "'compress_ratios'"),  # not one per layer and MTP layer
        ({"num_nextn_predict_layers": 0}, "'compress_ratios'"),
        ({"compress_ratios": [0, 0] + [8, 128] * 21}, "'compress_ratios'"),  # a ratio vLLM does not take
        ({"compress_ratios": "4"}, "'compress_ratios'"),
        ({"hc_mult": 0}, "'hc_mult'"),
        ({"hc_mult": -1}, "'hc_mult'"),
        ({"num_key_value_heads": 2}, "'num_key_value_heads'"),
        ({"o_groups": 7}, "'o_groups'"),
        ({"qk_rope_head_dim": 512}, "'qk_rope_head_dim'"),
        ({"head_dim": 128}, "'head_dim'"),  # vLLM's 584-byte entry and compressors take 512 (64 RoPE) only
        ({"compress_ratios": [0] * 44}, "'compress_ratios'"),  # no compressed layer: not V4's attention
        ({"num_hash_layers": 50}, "'num_hash_layers'"),
        ({"tie_word_embeddings": True}, "'tie_word_embeddings'"),
        ({"index_topk": None}, "'index_topk'"),
        ({"first_k_dense_replace": 3}, "'first_k_dense_replace'"),
        ({"expert_dtype": "int4"}, "'expert_dtype'"),
        ({"quantization_config": {"quant_method": "awq"}}, "'quantization_config.quant_method'"),
    ],
)
def test_inconsistent_configs_are_refused_naming_the_key(tmp_path, changes, key):
    path = _edit(tmp_path, **changes)
    with pytest.raises(DataError) as err:
        architecture_from_config(path)
    msg = str(err.value)
    assert key in msg and str(path) in msg and "\n" not in msg


def test_nvfp4_experts_need_the_mixed_precision_side_file(tmp_path):
    data = _config(CONFIGS / "nvidia--DeepSeek-V4-Flash-NVFP4_config.json")
    path = write_config(tmp_path, data)  # no hf_quant_config.json beside it
    with pytest.raises(DataError, match="moe_quant_algo"):
        architecture_from_config(path)
    side = json.loads((CONFIGS / "nvidia--DeepSeek-V4-Flash-NVFP4_hf_quant_config.json").read_text())
    write_config(tmp_path, side, "hf_quant_config.json")
    assert architecture_from_config(path).quantization == "fp8-nvfp4-experts"


# ---------------------------------------------------------------------------------------------------------------
# Serving: vLLM's cache (584-byte fp8_ds_mla entries, 132-byte indexer keys, float32 compressor state), weights
# ---------------------------------------------------------------------------------------------------------------
#: per token: 20 HCA layers' 584-byte entry per 128 tokens, 21 CSA layers' entry and 132-byte indexer key per 4
FLASH_KV_PER_TOKEN = 20 * 584 / 128 + 21 * 584 / 4 + 21 * 132 / 4
#: per sequence: the compressors' float32 state of KV and score (c = 2 overlapping for 4:1): CSA (2 x 4 tokens of
#: 2 x 2 x 512) and its indexer's (of 2 x 2 x 128), HCA (128 tokens of 2 x 512)
FLASH_STATE = 21 * (8 * 2048 * 4 + 8 * 512 * 4) + 20 * (128 * 1024 * 4)


def test_flash_cache_by_hand():
    a = architecture_from_config(FLASH)
    for tp in (1, 8):  # one KV head: the cache is whole on every rank
        s = serving_config(a, "h200", tensor_parallel=tp)
        assert s.kv_bytes_full == FLASH_KV_PER_TOKEN == 3850.25
        assert (s.kv_bytes_window, s.sliding_window) == (43 * 584, 128)
        assert s.sequence_bytes == FLASH_STATE == 12_206_080
        assert (s.kv_bytes_selected, s.sparse_topk) == (21 * 584 / 4, 4 * 512)
    c = np.array([100, 1000])
    want = c * FLASH_KV_PER_TOKEN + np.minimum(c, 128) * 43 * 584 + FLASH_STATE
    assert np.allclose(s.kv_bytes(c), want)
    pro = serving_config(architecture_from_config(PRO), "h200", tensor_parallel=8)
    assert pro.kv_bytes_full == 31 * 584 / 128 + 30 * (584 + 132) / 4
    assert pro.sequence_bytes == 30 * (8 * 2048 * 4 + 8 * 512 * 4) + 31 * 128 * 1024 * 4


def test_weights_fp8_with_4_bit_experts():
    a = architecture_from_config(FLASH)
    experts = 43 * 256 * 3 * 4096 * 2048
    emb = 2 * 129280 * 4096
    for q in (None, "fp8"):  # fp8 asked of the checkpoint keeps its 4-bit experts
        s = serving_config(a, "h200", tensor_parallel=8, expert_parallel=8, quantization=q)
        assert s.quantization == "fp8-mxfp4-experts" and s.expert_weights == experts * 0.5 / 8
        replicated = a.indexer_params  # indexers, compressors, the query / KV down-projections: on every rank
        dense = emb * 2 + (a.n_params - emb - experts) * 1.0
        assert s.dense_weights == pytest.approx(dense / 8 + replicated * (1 - 1 / 8))
    sgl = architecture_from_config(CONFIGS / "sgl-project--DeepSeek-V4-Flash-FP8_config.json")
    assert serving_config(sgl, "h200", tensor_parallel=8).expert_weights == experts * 1.0 / 8


def test_replicated_parameters_by_hand():
    a = architecture_from_config(FLASH)
    d, q, hd = 4096, 1024, 512
    indexer = q * 64 * 128 + d * 64 + 2 * 128 + (4 * 2 * 128 + d * 2 * 2 * 128 + 128)
    csa = 4 * 2 * hd + d * 2 * 2 * hd + hd
    hca = 128 * hd + d * 2 * hd + hd
    assert a.indexer_params == 21 * (indexer + csa) + 20 * hca + 43 * d * (q + hd)
    s = serving_config(a, "h200", tensor_parallel=8)
    split = a.n_active_params - 2 * 129280 * d - a.indexer_params
    assert s.linear_flops_per_token == pytest.approx(2 * split / 8 + 2 * a.indexer_params)


def test_the_kv_cache_is_fp8_as_vllm_requires():
    a = architecture_from_config(FLASH)
    for kv in (None, "auto", "fp8"):
        s = serving_config(a, "h200", tensor_parallel=8, kv_cache_dtype=kv)
        assert (s.kv_cache_dtype, s.kv_bytes_per_element) == ("fp8", 1.0)


def test_tensor_parallel_must_split_the_output_groups():
    with pytest.raises(DataError, match="o_groups"):
        serving_config(architecture_from_config(FLASH), "h200", tensor_parallel=16)


def test_what_vllm_asserts_of_the_ranks_is_refused(tmp_path):
    # FlashMLA runs at most 128 heads per rank: 256 heads need two ranks or more
    (tmp_path / "wide").mkdir()
    (tmp_path / "odd").mkdir()
    wide = architecture_from_config(_edit(tmp_path / "wide", num_attention_heads=256))
    with pytest.raises(DataError, match="at most 128"):
        serving_config(wide, "h200", tensor_parallel=1)
    assert serving_config(wide, "h200", tensor_parallel=2).tensor_parallel == 2
    # the routed experts split evenly over the ranks
    odd = architecture_from_config(_edit(tmp_path / "odd", n_routed_experts=255))
    assert serving_config(odd, "h200", tensor_parallel=1).tensor_parallel == 1
    with pytest.raises(DataError, match="255 routed experts"):
        serving_config(odd, "h200", tensor_parallel=2)


def test_the_4_bit_expert_methods_belong_to_their_own_checkpoints():
    own = {
        "fp8-mxfp4-experts": FLASH,
        "fp8-nvfp4-experts": CONFIGS / "nvidia--DeepSeek-V4-Flash-NVFP4_config.json",
    }
    others = [
        architecture_from_config(CONFIGS / "sgl-project--DeepSeek-V4-Flash-FP8_config.json"),
        "qwen3-30b-a3b",
    ]
    for q, path in own.items():
        assert (
            serving_config(
                architecture_from_config(path), "b200", tensor_parallel=8, quantization=q
            ).quantization
            == q
        )
        other = own["fp8-nvfp4-experts" if q == "fp8-mxfp4-experts" else "fp8-mxfp4-experts"]
        for arch in [*others, architecture_from_config(other)]:
            a = get_architecture(arch) if isinstance(arch, str) else arch
            with pytest.raises(DataError, match="mixed checkpoint's own method"):
                serving_config(a, "b200", tensor_parallel=8, quantization=q)


def test_every_v4_checkpoint_is_launched_with_vllms_v4_method():
    for name in ("deepseek-ai--DeepSeek-V4-Flash", "sgl-project--DeepSeek-V4-Flash-FP8"):
        s = serving_config(
            architecture_from_config(CONFIGS / f"{name}_config.json"), "h200", tensor_parallel=8
        )
        flags = launch_settings(s, 16, 1000, 100).flags
        assert flags[flags.index("--quantization") + 1] == "deepseek_v4_fp8"
    dense = serving_config(get_architecture("qwen3-30b-a3b"), "h200", quantization="fp8")
    assert dense.vllm_quantization == "fp8"


def test_an_hca_only_layout_replicates_its_compressors_and_projections(tmp_path):
    no_index = dict(index_topk=None, index_n_heads=None, index_head_dim=None)
    a = architecture_from_config(_edit(tmp_path, compress_ratios=[128] * 44, **no_index))
    d, q, hd = 4096, 1024, 512
    assert (a.n_csa_layers, a.n_hca_layers, a.is_sparse) == (0, 43, False)
    assert a.indexer_params == 43 * (128 * hd + d * 2 * hd + hd) + 43 * d * (q + hd)


def test_decode_reads_window_selection_hca_entries_and_indexer_keys():
    df = pd.DataFrame({"model": [str(FLASH)] * 2, "batch_size": [1, 1], "input_len": [100, 8000],
                       "output_len": [2, 2], "gpu": ["h200"] * 2, "tensor_parallel": [8, 8]})  # fmt: skip
    f = model_features(df)
    got = attention_bytes(f, get_gpu("h200"))
    for i, il in enumerate((100, 8000)):
        want = 0.0
        for c in (il + 1, il + 2):  # the context of each decode step
            want += c * (20 * 584 / 128 + 21 * 132 / 4)  # every HCA entry and every indexer key
            want += min(c, 128) * 43 * 584  # each layer's window
            want += min(c / 4, 512) * 21 * 584  # the top-k compressed entries of each CSA layer
        assert got[i] == pytest.approx(want)
    # the pool: what a row's context holds per token, the compressor state spread over it
    c = 8002.0
    held = FLASH_KV_PER_TOKEN + 128 * 43 * 584 / c + FLASH_STATE / c
    assert f["kv_bytes_per_token"][1] == pytest.approx(held)
    assert (
        f["latent_attention"][0] == 1
    )  # one KV head read once for all query heads: no paged-attention widening


@pytest.mark.parametrize(
    "il, selected",
    [
        (1000.0, 1000 * 1001 / 2 / 4),  # sum_i min(i / 4, 512): never capped below 2048 tokens
        (8000.0, (2048 * 2049 / 2 + (8000 - 2048) * 2048) / 4),  # capped at 512 entries from token 2048 on
    ],
)
def test_prompt_pairs_by_hand(il, selected):
    window = 128 * 129 / 2 + (il - 128) * 128  # sum_i min(i, 128)
    full = il * (il + 1) / 2
    want = (window + 21 / 43 * selected + 20 / 43 * full / 128) / full
    got = eq.compressed_pair_share(il, 128, 2048, 21 / 43, 20 / 43, 4, 128)
    assert float(got) == pytest.approx(want)
    assert float(eq.compressed_pair_share(100.0, 128, 0, 0.0, 0.0, 4, 128)) == pytest.approx(
        1.0
    )  # all windowed


def test_prompt_attention_runs_at_flashmla_s_padded_heads():
    """vLLM pads each rank's heads to 64 or 128 for FlashMLA: Flash's 64 heads cost 64 heads' work on each of 8
    ranks (8 x 64 x 512 per pair in Eq. 8's units), Pro's 128 at one rank are not padded."""
    flash, pro = architecture_from_config(FLASH), architecture_from_config(PRO)
    assert attention_width(flash) == 64 * 512 and attention_width(flash, 8) == 8 * 64 * 512
    assert attention_width(pro) == 128 * 512 and attention_width(pro, 2) == 2 * 64 * 512


def test_methods_without_the_compressed_terms_refuse_it():
    df = pd.DataFrame({"model": [str(FLASH)], "batch_size": [1], "input_len": [100], "output_len": [2],
                       "gpu": ["h200"], "tensor_parallel": [8]})  # fmt: skip
    with pytest.raises(DataError, match="DeepSeek-V4 compressed attention"):
        refuse_unread_layers(model_features(df), "paper", ("attn_bytes_per_context_token",))


# ---------------------------------------------------------------------------------------------------------------
# The kernel check: the CSA / HCA decode terms against vLLM's measured modules (data/aic-dsv4.csv)
# ---------------------------------------------------------------------------------------------------------------
def test_the_compressed_check_is_exact_where_the_module_grows_at_the_terms_speed():
    from slimlib.experiments.kernel_timing import compressed_check as cc

    ctx = np.array([64, 1024, 2048, 4096, 65536])
    rows = []
    for ratio in (4, 128):
        t = pd.DataFrame({"system": "h200_sxm", "gpu": "h200-sxm-141gb", "vllm_version": "0.24.0",
                          "kernel_source": "FLASHMLA_SPARSE_DSV4", "model": "sgl-project/DeepSeek-V4-Flash-FP8",
                          "compress_ratio": ratio, "n_heads": 64, "batch_size": 32, "context": ctx})  # fmt: skip
        # one layer, per sequence: the window's 128 entries of 584 bytes, then the CSA layer's top-512 of its 4:1
        # entries and the indexer's 132-byte key per 4 tokens, or the HCA layer's entry per 128 tokens
        per = 584 * np.minimum(ctx, 128) + (
            584 * np.minimum(ctx / 4, 512) + 132 * ctx / 4 if ratio == 4 else 584 * ctx / 128
        )
        t["latency_ms"] = 0.1 + 1e3 * 32 * (per - per[1]) / (
            device_efficiency("h200") * get_gpu("h200").mem_bw
        )
        rows.append(t)
    pts = cc.compressed_points(pd.concat(rows, ignore_index=True))
    assert len(pts) == 8 and pts["role"].tolist()[:4] == [
        "base",
        "short",
        "score",
        "score",
    ]  # context 64 left out
    assert pts["ape_pct"].max() < 1e-9
    s = cc.compressed_check(pts, n_boot=200).set_index(["gpu", "module"])
    assert s.loc[("all", "all"), "n_scored"] == 4 and s.loc[
        ("all", "all"), "growth_ratio_median"
    ] == pytest.approx(1)


def test_the_committed_modules_grow_faster_than_the_csa_traffic():
    """vLLM's measured CSA module grows with the context about four times as fast as its traffic term (the indexer's
    selection is not priced); the HCA module, whose entries are few, stays within a few percent of its base."""
    from slimlib.data import load
    from slimlib.experiments.kernel_timing import compressed_check as cc

    table = load("aic-dsv4")
    assert set(table["compress_ratio"]) == {4, 128} and set(table["n_heads"]) == {64, 128}
    s = cc.compressed_check(cc.compressed_points(table), n_boot=200).set_index(["gpu", "module"])
    csa = s.xs("csa", level="module")
    assert (csa["growth_ratio_median"] < 0.5).all() and (csa["mape_pct"] < 15).all()
    assert (s.xs("hca", level="module")["mape_pct"] < 5).all()


def test_the_dsv4_parser_refuses_a_model_it_has_no_heads_for(tmp_path):
    import shutil

    from slimlib.data.aiconfigurator_layers import _dsv4

    src = (
        RAW / "aiconfigurator-kernels/aiconfigurator_core/systems/data/h200_sxm/sparse_attention/vllm/0.24.0"
    )
    shutil.copy(src / "dsv4_hca_generation_module_perf.parquet", tmp_path / "t.parquet")
    raw = pd.read_parquet(tmp_path / "t.parquet")
    raw.loc[5, "model"] = "someone/Other-V4"
    raw.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(DataError) as err:
        _dsv4(tmp_path / "t.parquet", "h200_sxm", "hca")
    assert "t.parquet: row 5: model 'someone/Other-V4'" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(DataError, match="compress_ratio"):
        _dsv4(src / "dsv4_hca_generation_module_perf.parquet", "h200_sxm", "csa")
