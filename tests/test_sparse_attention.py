"""DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): the indexer read into exact parameter counts and the KV cache,
the decode read capped at the selected tokens, the sparse prompt's pairs, and the refusals of what the reader
cannot represent."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from shared_paths import RAW, needs

from slimlib.errors import DataError
from slimlib.model import equations as eq
from slimlib.model.features import model_features
from slimlib.model.serving import serving_config
from slimlib.model.terms.recommended import attention_bytes
from slimlib.registry.architectures import architecture_from_config

CONFIGS = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "model_configs"
pytestmark = needs(CONFIGS, "AIConfigurator model_configs mirror")


def _config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}_config.json").read_text())


def _write(tmp_path, data: dict, name: str = "config.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def test_deepseek_v32_is_v3_plus_one_indexer_per_layer():
    v3 = architecture_from_config(CONFIGS / "deepseek-ai--DeepSeek-V3_config.json")
    v32 = architecture_from_config(CONFIGS / "deepseek-ai--DeepSeek-V3.2_config.json")
    d, heads, width = 7168, 64, 128
    indexer = (
        1536 * heads * width + d * width + 2 * width + d * heads
    )  # wq_b, wk, k_norm (weight, bias), weights
    assert v32.n_params - v3.n_params == 61 * indexer
    assert v32.active_params - v3.active_params == 61 * indexer
    assert (v32.index_topk, v32.n_indexer_layers, v32.index_heads) == (2048, 61, 64)


def test_glm52_shares_57_indexers(tmp_path):
    glm5 = architecture_from_config(CONFIGS / "zai-org--GLM-5_config.json")
    glm52 = architecture_from_config(CONFIGS / "zai-org--GLM-5.2_config.json")
    types = _config("zai-org--GLM-5.2")["indexer_types"]
    assert glm52.n_indexer_layers == types.count("full") == 21 and glm5.n_indexer_layers == 78
    indexer = 2048 * 32 * 128 + 6144 * 128 + 2 * 128 + 6144 * 32
    assert glm5.n_params - glm52.n_params == 57 * indexer
    # NVIDIA's copy spells every layer's kind and the expert count twice: the same model
    nv = architecture_from_config(CONFIGS / "nvidia--GLM-5.2-NVFP4_config.json")
    assert nv.n_params == glm52.n_params and nv.n_indexer_layers == 21
    # vLLM's schedule from the frequency and offset alone gives the same 21
    cfg = {k: v for k, v in _config("zai-org--GLM-5.2").items() if k != "indexer_types"}
    assert architecture_from_config(_write(tmp_path, cfg)).n_indexer_layers == 21


def test_kv_cache_holds_the_latent_and_the_indexer_keys():
    a = architecture_from_config(CONFIGS / "deepseek-ai--DeepSeek-V3.2_config.json")
    s = serving_config(a, "h200", tensor_parallel=8, expert_parallel=8)
    latent = 61 * (512 + 64) * 2  # bf16 latent and RoPE key, whole on every rank
    assert s.kv_bytes_selected == latent and s.kv_bytes_per_token == latent + 61 * (
        128 + 4
    )  # fp8 keys, fp32 scale
    s8 = serving_config(a, "h200", tensor_parallel=8, expert_parallel=8, kv_cache_dtype="fp8")
    # fp8: vLLM's fp8_ds_mla layout (512 fp8 values, 4 fp32 scales, the 64-wide RoPE key in bf16); the indexer's
    # keys are fp8 whatever the KV dtype
    assert s8.kv_bytes_per_token == 61 * (512 + 16 + 128) + 61 * 132


def test_decode_reads_the_selection_and_every_indexer_key(tmp_path):
    path = CONFIGS / "deepseek-ai--DeepSeek-V3.2_config.json"
    df = pd.DataFrame({"model": [str(path)] * 2, "batch_size": [1, 1], "input_len": [1000, 8192],
                       "output_len": [2, 2], "gpu": ["h200"] * 2, "tensor_parallel": [8, 8]})  # fmt: skip
    f = model_features(df)
    got = attention_bytes(f)
    latent, keys = 61 * 576 * 2, 61 * 132
    # IL 1000: both steps read all 1001 and 1002 tokens; IL 8192: the latent of 2048 per step, every indexer key
    want = [latent * (1001 + 1002) + keys * (1001 + 1002), latent * 2 * 2048 + keys * (8193 + 8194)]
    assert got == pytest.approx(want, rel=1e-12)


def test_sparse_prompt_pairs():
    k = 2048.0
    share = eq.sparse_pair_share([100, 2048, 4096, 8192], [k, k, k, 0])
    assert share[0] == share[1] == share[3] == 1.0
    assert share[2] == pytest.approx((k * (k + 1) / 2 + 2048 * k) / (4096 * 4097 / 2))


@pytest.mark.parametrize(
    "change, words",
    [
        ({"indexer_types": ["full"] * 77 + ["half"]}, "'indexer_types' must list 'full' or 'shared'"),
        ({"indexer_types": ["shared"] + ["full"] * 77, "index_topk_freq": None}, "no earlier selection"),
        ({"indexer_types": ["full"] * 78}, "'indexer_types' does not match 'index_topk_freq' 4"),
        ({"index_topk_pattern": "FSSS"}, "'index_topk_pattern'"),
        ({"mlp_layer_types": ["sparse"] * 78}, "'mlp_layer_types' does not match"),
        ({"num_experts": 128}, "'num_experts' (128) differs from 'n_routed_experts' (256)"),
        ({"q_lora_rank": 0}, "'q_lora_rank' is 0"),
        ({"layer_types": ["deepseek_sparse_attention"] * 77 + ["full_attention"]}, "'layer_types' mixes"),
        ({"index_n_heads": 0}, "'index_n_heads'"),
    ],
)
def test_inconsistent_sparse_configs_are_refused_naming_the_key(tmp_path, change, words):
    cfg = {**_config("nvidia--GLM-5.2-NVFP4"), **change}
    with pytest.raises(DataError) as err:
        architecture_from_config(_write(tmp_path, cfg, "g.json"))
    msg = str(err.value)
    assert "g.json" in msg and words in msg and "\n" not in msg


def test_indexers_are_whole_on_every_rank_and_blackwell_keeps_a_plain_fp8_latent():
    v3 = serving_config(architecture_from_config(CONFIGS / "deepseek-ai--DeepSeek-V3_config.json"), "h200",
                        tensor_parallel=8, expert_parallel=8)  # fmt: skip
    a = architecture_from_config(CONFIGS / "deepseek-ai--DeepSeek-V3.2_config.json")
    v32 = serving_config(a, "h200", tensor_parallel=8, expert_parallel=8)
    indexer = 61 * (1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64)
    assert a.indexer_params == indexer
    assert v32.linear_flops_per_token - v3.linear_flops_per_token == pytest.approx(2 * indexer)  # not / 8
    assert v32.dense_weights - v3.dense_weights == pytest.approx(
        indexer * v32.bytes_per_weight
    )  # fp8, not / 8
    b200 = serving_config(a, "b200", tensor_parallel=8, expert_parallel=8, kv_cache_dtype="fp8")
    assert b200.kv_bytes_per_token == 61 * 576 + 61 * 132


def test_prompt_attention_width_of_each_attention_form():
    from slimlib.model.features import attention_width

    assert (
        attention_width(architecture_from_config(CONFIGS / "deepseek-ai--DeepSeek-V3_config.json"))
        == 128 * (128 + 64 + 128) / 2
    )  # expanded MLA: q.k over nope + rope, p.v over the value heads
    assert (
        attention_width(architecture_from_config(CONFIGS / "deepseek-ai--DeepSeek-V3.2_config.json"))
        == 128 * (512 + 64 + 512) / 2
    )  # absorbed: over the latent and rope, values in the latent
    assert (
        attention_width(architecture_from_config(CONFIGS / "Qwen--Qwen3-8B_config.json")) == 4096.0
    )  # Eq. 8's D


def test_the_dsa_check_is_exact_where_the_module_grows_at_the_terms_speed():
    from slimlib.experiments.kernel_timing import sparse_check as sc
    from slimlib.registry.gpus import get_gpu

    ctx = np.array([2, 1024, 4096, 65536])
    t = pd.DataFrame({"system": "h200_sxm", "gpu": "h200-sxm-141gb", "vllm_version": "0.24.0",
                      "kernel_source": "FLASHMLA_SPARSE", "model": "deepseek-ai/DeepSeek-V3.2",
                      "kv_cache_dtype": "fp8", "n_heads": 128, "batch_size": 64, "context": ctx})  # fmt: skip
    latent, key = 512 + 16 + 128, 128 + 4  # one layer: fp8_ds_mla latent, the indexer's fp8 key and scale
    nbytes = 64 * (latent * np.minimum(ctx, 2048) + key * ctx)
    eff = sc.device_efficiency("h200-sxm-141gb")
    t["latency_ms"] = 0.25 + 1e3 * (nbytes - nbytes[0]) / (eff * get_gpu("h200").mem_bw)
    pts = sc.dsa_points(t)
    assert pts["role"].tolist() == ["base", "short", "score", "score"]
    assert pts["ape_pct"].max() < 1e-9 and pts.loc[
        pts["role"] == "score", "growth_ratio"
    ].tolist() == pytest.approx([1.0, 1.0])
    s = sc.dsa_check(pts, n_boot=200).set_index("gpu")
    assert s.loc["all", "n_scored"] == 2 and s.loc["all", "growth_ratio_median"] == pytest.approx(1.0)


def test_dsa_parser_refuses_a_model_it_has_no_heads_for(tmp_path):
    import shutil

    from slimlib.data.aiconfigurator_layers import MSA_CONFIG, build_layer_tables

    src = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "systems" / "data"
    root = tmp_path / "aic"
    for system in ("b200_sxm", "h100_sxm", "h200_sxm"):
        for kind in ("linear_attention", "sparse_attention", "msa", "mhc"):
            dst = root / "aiconfigurator_core" / "systems" / "data" / system / kind / "vllm" / "0.24.0"
            shutil.copytree(src / system / kind / "vllm" / "0.24.0", dst)
        shutil.copytree(
            src / system / "kda", root / "aiconfigurator_core" / "systems" / "data" / system / "kda"
        )
    (root / MSA_CONFIG).parent.mkdir(parents=True)
    shutil.copy(RAW / "aiconfigurator-kernels" / MSA_CONFIG, root / MSA_CONFIG)  # MiniMax-M3's head shapes
    p = (
        root
        / "aiconfigurator_core"
        / "systems"
        / "data"
        / "b200_sxm"
        / "sparse_attention"
        / "vllm"
        / "0.24.0"
    )
    raw = pd.read_parquet(p / "dsa_generation_module_perf.parquet")
    raw.loc[raw.index[5], "model"] = "someone/Other-DSA"
    raw.to_parquet(p / "dsa_generation_module_perf.parquet")
    with pytest.raises(DataError) as err:
        build_layer_tables(root)
    msg = str(err.value)
    assert "dsa_generation_module_perf.parquet: row 5: model 'someone/Other-DSA'" in msg and "\n" not in msg


def test_the_pool_holds_the_latent_of_every_token_not_only_the_read_one():
    """The KV capacity counts what a sparse model's cache holds per token (every token's latent and indexer key:
    61 x (656 + 132) bytes at fp8 on Hopper), not the part a decode step reads for every token (the indexer keys)."""
    df = pd.DataFrame({"model": ["deepseek-v3.2"], "batch_size": [8], "input_len": [8000], "output_len": [1000],
                       "tensor_parallel": [8], "gpu": ["h200"], "kv_cache_dtype": ["fp8"]})  # fmt: skip
    f = model_features(df)
    s = serving_config(architecture_from_config(CONFIGS / "deepseek-ai--DeepSeek-V3.2_config.json"), "h200",
                       tensor_parallel=8, kv_cache_dtype="fp8")  # fmt: skip
    assert f["kv_bytes_per_token"][0] == 61 * (656 + 132)
    assert f["kv_token_capacity"][0] == pytest.approx(s.kv_pool / (61 * (656 + 132)))
