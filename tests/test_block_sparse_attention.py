"""MiniMax-M3's block-sparse attention (MiniMax Sparse Attention, vLLM's ``vllm/models/minimax_m3``): the reader's
exact parameter counts from the config's numbers, the KV cache with the indexer's keys, the decode read capped at
the selected blocks, the prompt's pairs, the NVFP4 checkpoint's precisions, and the refusals of inconsistent
configs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from config_files import write_config
from shared_paths import RAW, needs

from slimlib.errors import DataError
from slimlib.experiments.kernel_timing.linear_check import device_efficiency
from slimlib.model.features import model_features
from slimlib.model.serving import serving_config
from slimlib.model.terms.recommended import attention_bytes
from slimlib.registry.architectures import architecture_from_config
from slimlib.registry.gpus import get_gpu

CONFIGS = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "model_configs"
M3 = CONFIGS / "MiniMaxAI--MiniMax-M3_config.json"
NVFP4 = CONFIGS / "nvidia--MiniMax-M3-NVFP4_config.json"
pytestmark = needs(CONFIGS, "AIConfigurator model_configs mirror")

# the config's numbers: 60 layers (3 full + 57 block-sparse; 3 dense + 57 MoE), D, heads, KV heads, d_h, vocab,
# index heads and width, experts (routed, per token, width), the dense layers' MLP width
L, SPARSE, DENSE, D, H, HKV, DH, V = 60, 57, 3, 6144, 64, 4, 128, 200064
HI, DI, X, K, F, FD = 4, 128, 128, 4, 3072, 12288
#: per layer: q and o (2 D H d_h), k and v (2 D H_kv d_h), the per-head q and k norms (2 d_h)
ATTENTION = 2 * D * H * DH + 2 * D * HKV * DH + 2 * DH
#: per sparse layer (K-only indexer): index_q_proj D H_i d_i, index_k_proj D d_i, index q and k norms 2 d_i
INDEXER = D * HI * DI + D * DI + 2 * DI
EXPERT = 3 * D * F  # gate, up, down
#: per MoE layer: router D X and its routing bias X, 128 routed experts, one shared expert of the same width
MOE = D * X + X + X * EXPERT + EXPERT
#: untied embedding and LM head, the final norm, each layer's two norms, the 3 dense MLPs
TOTAL = 2 * V * D + D + L * (ATTENTION + 2 * D) + SPARSE * INDEXER + DENSE * 3 * D * FD + SPARSE * MOE
ACTIVE = TOTAL - SPARSE * (X - K) * EXPERT


def test_counts_by_hand_and_the_published_size():
    """426.17B by hand: the card's ~428B (huggingface.co/MiniMaxAI/MiniMax-M3; NVIDIA's NVFP4 card the same) also
    counts the vision tower and the MTP module, which vLLM does not serve as decoder layers. Active 25.96B with the
    embedding and the LM head; the card's ~23B is the count without both (23.50B)."""
    a = architecture_from_config(M3)
    assert a.n_params == TOTAL == 426_174_572_928
    assert a.n_active_params == ACTIVE and a.expert_params == SPARSE * X * EXPERT
    assert a.n_params == pytest.approx(428e9, rel=0.03)
    assert a.active_params - 2 * V * D == pytest.approx(23e9, rel=0.03)
    assert (a.n_indexer_layers, a.n_dense_layers, a.n_moe_layers) == (SPARSE, DENSE, SPARSE)
    assert a.n_shared_experts == 1
    assert (a.index_heads, a.index_head_dim, a.sparse_block_size, a.index_topk) == (HI, DI, 128, 16 * 128)
    assert (a.ffn_size, a.moe_ffn_size, a.shared_ffn_size, a.quantization) == (FD, F, F, "")
    assert a.is_block_sparse and a.is_sparse and not a.is_mla
    # the replicated part: the one index-key head and its norms (the index queries split with the KV heads)
    assert a.indexer_params == SPARSE * (D * DI + 2 * DI)


def test_the_nvfp4_checkpoint_is_m3_with_mxfp8_layers_and_nvfp4_experts():
    a, q = architecture_from_config(M3), architecture_from_config(NVFP4)
    assert q.n_params == a.n_params and q.quantization == "mxfp8-nvfp4-experts"
    s = serving_config(q, gpu="h200", tensor_parallel=8)
    # MXFP8 layers (1 byte), the 16-bit embedding and LM head (left out of the quantization)
    dense = (TOTAL - SPARSE * X * EXPERT - 2 * V * D) * 1.0 + 2 * V * D * 2.0
    replicated = a.indexer_params * 1.0 * (1 - 1 / 8)
    assert s.dense_weights == pytest.approx(dense / 8 + replicated)
    assert s.expert_weights == pytest.approx(SPARSE * X * EXPERT * 0.5 / 8)  # NVFP4, scales not counted
    assert s.weight_precision == "fp8"


def test_kv_and_index_key_bytes_per_token():
    """Per token: every layer's GQA K and V (2 x 4 x 128 x 2 bytes at bf16), each sparse layer's one 128-wide bf16
    index key (256 bytes, whole on every rank); no per-sequence state; pages of the 128-token blocks."""
    a = architecture_from_config(M3)
    s = serving_config(a)
    assert s.kv_bytes_full == L * 2 * HKV * DH * 2 + SPARSE * DI * 2 == 137_472
    assert s.kv_bytes_selected == SPARSE * 2 * HKV * DH * 2 and s.sparse_topk == 2048
    assert (s.kv_bytes_window, s.sequence_bytes, s.state_bytes, s.block_size) == (0, 0, 0, 128)
    # eight ranks: one KV head each (4 replicated over 8), fp8 K/V, the index keys still bf16
    s8 = serving_config(a, gpu="h200", tensor_parallel=8, kv_cache_dtype="fp8", block_size=16)
    assert s8.kv_bytes_full == L * 2 * 1 * DH * 1 + SPARSE * DI * 2 == 29_952 and s8.block_size == 128


def test_decode_reads_the_selected_blocks_and_every_index_key():
    df = pd.DataFrame({"model": [str(M3)] * 2, "batch_size": [1, 1], "input_len": [100, 8000],
                       "output_len": [2, 2], "gpu": ["h200"] * 2, "tensor_parallel": [8, 8]})  # fmt: skip
    f = model_features(df)
    got = attention_bytes(f, get_gpu("h200"))
    kv = 2 * 1 * DH * 2  # one KV head per rank at bf16
    for i, il in enumerate((100, 8000)):
        want = 0.0
        for c in (il + 1, il + 2):  # the context of each decode step
            want += c * (DENSE * kv + SPARSE * DI * 2)  # the full layers' K/V, every index key
            want += min(c, 2048) * SPARSE * kv  # the 16 selected blocks of 128 (the local block among them)
        assert got[i] == pytest.approx(want)


def test_prompt_pairs_and_indexer_width():
    """Sparse layers compute at most 2048 keys per query, the 3 full layers every pair; the indexer's 4 heads
    split with the KV heads (one per rank at 8 ranks) and score every pair."""
    df = pd.DataFrame({"model": [str(M3)] * 2, "batch_size": [1, 1], "input_len": [8000, 8000],
                       "output_len": [2, 2], "gpu": ["h200"] * 2, "tensor_parallel": [1, 8]})  # fmt: skip
    f = model_features(df)
    assert list(f["sparse_layer_share"]) == [SPARSE / L] * 2
    assert list(f["attention_width"]) == [H * DH] * 2
    assert list(f["indexer_width"]) == [SPARSE / L * HI * DI / 2, SPARSE / L * 1 * DI / 2]


def _edit(tmp_path, name="MiniMax-M3-edit_config.json", **sparse):
    data = json.loads(M3.read_text())
    top = {k: sparse.pop(k) for k in list(sparse) if not k.startswith("sparse_")}
    data.update(top)
    data["sparse_attention_config"] = {**data["sparse_attention_config"], **sparse}
    return write_config(tmp_path, data, name)


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"sparse_attention_freq": [0, 0, 0] + [1] * 56}, "sparse_attention_freq"),  # 59 for 60 layers
        ({"sparse_topk_blocks": 0}, "sparse_topk_blocks"),
        ({"sparse_num_index_heads": 3}, "sparse_num_index_heads"),  # one index head per KV head
        ({"sparse_score_type": "mean"}, "sparse_score_type"),
        ({"sparse_block_size": 64}, "sparse_block_size"),
        ({"sparse_index_dim": 64}, "sparse_index_dim"),  # vLLM's indexer kernels take 128
        ({"sparse_disable_index_value": [0] * 60}, "sparse_disable_index_value"),
        ({"sparse_local_block": 17}, "sparse_local_block"),
        ({"moe_layer_freq": [0] * 3 + [1] * 58}, "moe_layer_freq"),
        ({"first_k_dense_replace": 2}, "first_k_dense_replace"),
        ({"shared_intermediate_size": 4096}, "shared_intermediate_size"),
        ({"attention_output_gate": True}, "attention_output_gate"),
    ],
)
def test_inconsistent_configs_are_refused_in_one_line_naming_file_and_key(tmp_path, changes, key):
    path = _edit(tmp_path, **changes)
    with pytest.raises(DataError) as err:
        architecture_from_config(path)
    msg = str(err.value)
    assert key in msg and path.name in msg and "\n" not in msg, msg


def test_the_mixed_checkpoint_must_be_nvfp4_experts_beside_mxfp8(tmp_path):
    data = json.loads(NVFP4.read_text())
    layers = data["quantization_config"]["quantized_layers"]
    name = next(n for n in layers if ".self_attn.q_proj" in n)
    layers[name] = {"quant_algo": "NVFP4", "group_size": 16}
    path = write_config(tmp_path, data, "MiniMax-M3-mixed_config.json")
    with pytest.raises(DataError, match="quantized_layers"):
        architecture_from_config(path)


def test_without_the_unread_index_value_key_it_reads_the_same(tmp_path):
    data = json.loads(M3.read_text())
    del data["sparse_attention_config"]["sparse_disable_index_value"]  # vLLM never reads it
    assert architecture_from_config(write_config(tmp_path, data)).n_params == TOTAL


def test_the_mixed_checkpoint_on_ampere_and_its_launch_line():
    from slimlib.advisor.launch import launch_settings

    nvfp4 = architecture_from_config(CONFIGS / "nvidia--MiniMax-M3-NVFP4_config.json")
    # vLLM runs ModelOpt's mixed checkpoints from compute capability 7.5 (Marlin weight-only kernels)
    assert serving_config(nvfp4, "a100", tensor_parallel=8).quantization == "mxfp8-nvfp4-experts"
    flags = launch_settings(serving_config(nvfp4, "b200", tensor_parallel=8), 16, 1000, 100).flags
    assert flags[flags.index("--quantization") + 1] == "modelopt_mixed"
    assert flags[flags.index("--block-size") + 1] == "128"  # its 128-token sparse blocks are its pages


def test_a_page_size_other_than_its_blocks_is_refused():
    a = architecture_from_config(M3)
    assert (
        serving_config(a, "h200", tensor_parallel=8, block_size=16).block_size == 128
    )  # vLLM's default: its blocks
    with pytest.raises(DataError, match="pages are its 128-token sparse blocks"):
        serving_config(a, "h200", tensor_parallel=8, block_size=32)


# ---------------------------------------------------------------------------------------------------------------
# The reader of vLLM's measured MiniMax-M3 modules (data/aic-msa.csv)
# ---------------------------------------------------------------------------------------------------------------
MSA_RAW = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "systems" / "data"


def test_the_committed_msa_table_keeps_every_tp1_bf16_gemm_row_of_the_parquet_files():
    """Per system and phase, the committed rows are the parquet files' rows at 64 query heads and bf16 GEMMs, with
    the config's shapes (4 KV heads of 128, a 128-wide index key, 16 blocks of 128 selected)."""
    from slimlib.data import load
    from slimlib.data.aiconfigurator_layers import MSA_PHASES

    t = load("aic-msa")
    for system in ("b200_sxm", "h100_sxm", "h200_sxm"):
        for stem, phase in MSA_PHASES.items():
            raw = pd.read_parquet(MSA_RAW / system / "msa" / "vllm" / "0.24.0" / f"{stem}.parquet")
            want = raw[(raw["num_heads"] == 64) & (raw["gemm_type"] == "bfloat16")]
            got = t[(t["system"] == system) & (t["phase"] == phase)]
            assert len(got) == len(want) > 350, (system, phase)
            assert got["latency_ms"].sum() == pytest.approx(want["latency"].sum())
    assert len(t) == 2565 and set(t["kv_cache_dtype"]) == {"bfloat16", "fp8"}
    shapes = t[["tensor_parallel", "n_heads", "kv_heads", "head_dim", "index_head_dim", "index_topk"]]
    assert shapes.drop_duplicates().values.tolist() == [[1, H, HKV, DH, DI, 16 * 128]]
    assert (t.loc[t["phase"] == "generation", "input_len"] == 1).all()


@pytest.mark.parametrize(
    "column, value, match",
    [
        ("latency", float("nan"), "row 7: latency must be a positive number"),
        ("tp_size", 2, "row 7: tp_size"),
        ("model", "someone/Other-MSA", "row 7: model 'someone/Other-MSA'"),
        ("isl", 16, "row 7: isl"),
    ],
)
def test_the_msa_reader_refuses_a_malformed_row_naming_file_and_row(tmp_path, column, value, match):
    from slimlib.data.aiconfigurator_layers import _msa, msa_shapes

    raw = pd.read_parquet(
        MSA_RAW / "h200_sxm" / "msa" / "vllm" / "0.24.0" / "msa_generation_module_perf.parquet"
    )
    raw = raw[(raw["num_heads"] == 64) & (raw["gemm_type"] == "bfloat16")].reset_index(drop=True)
    raw.loc[7, column] = value
    raw.to_parquet(tmp_path / "msa_generation_module_perf.parquet")
    with pytest.raises(DataError) as err:
        _msa(tmp_path / "msa_generation_module_perf.parquet", "h200_sxm", "generation", msa_shapes(M3))
    msg = str(err.value)
    assert "msa_generation_module_perf.parquet: " + match in msg and "\n" not in msg, msg


# ---------------------------------------------------------------------------------------------------------------
# The kernel check: the decode term against vLLM's measured MSA module (data/aic-msa.csv)
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kv", ["bfloat16", "fp8"])
def test_the_checks_layer_bytes_are_the_terms_of_one_sparse_layer(kv):
    """The check's bytes per sparse layer are the model's: `serving_config`'s selected K/V per sparse layer (capped
    at index_topk by the term) and its index key, at tensor parallel 1."""
    from slimlib.experiments.kernel_timing.block_sparse_check import msa_layer_bytes

    a = architecture_from_config(M3)
    s = serving_config(a, gpu="h200", kv_cache_dtype="auto" if kv == "bfloat16" else kv)
    selected = s.kv_bytes_selected / SPARSE
    index_key = (s.kv_bytes_full - L * selected) / SPARSE
    row = {"kv_cache_dtype": kv, "kv_heads": HKV, "head_dim": DH, "index_head_dim": DI, "index_topk": 2048}
    c = np.array([1, 2047, 2048, 131071])
    want = selected * np.minimum(c, s.sparse_topk) + index_key * c
    assert index_key == 256 and msa_layer_bytes(row, c) == pytest.approx(want)


def test_the_msa_check_is_exact_where_the_module_grows_at_the_terms_speed():
    from slimlib.experiments.kernel_timing import block_sparse_check as bs

    ctx = np.array([1, 1023, 2047, 4095, 131071])
    rows = []
    for kv, b_kv in (("bfloat16", 2), ("fp8", 1)):
        per = 2 * HKV * DH * b_kv * np.minimum(ctx, 2048) + 256 * ctx  # one sequence, one sparse layer
        rows.append(pd.DataFrame({
            "system": "h200_sxm", "gpu": "h200-sxm-141gb", "phase": "generation", "kv_cache_dtype": kv,
            "kv_heads": HKV, "head_dim": DH, "index_head_dim": DI, "index_topk": 2048, "batch_size": 64,
            "input_len": 1, "context": ctx,
            "latency_ms": 0.1 + 1e3 * 64 * (per - per[0]) / (device_efficiency("h200") * get_gpu("h200").mem_bw),
        }))  # fmt: skip
    pts = bs.msa_points(pd.concat(rows, ignore_index=True))
    assert pts["role"].tolist()[:5] == ["base", "short", "short", "score", "score"]
    assert pts["ape_pct"].max() < 1e-9
    s = bs.msa_check(pts, n_boot=200).set_index(["gpu", "kv_cache_dtype"])
    assert s.loc[("all", "all"), "n_scored"] == 4 and s.loc[("all", "all"), "n_fill"] == 2
    assert s.loc[("all", "all"), "growth_ratio_median"] == pytest.approx(1)
    assert s.loc[("all", "all"), "fill_ratio_median"] == pytest.approx(1)
    assert bs.fp8_fill_ratios(pts).tolist() == pytest.approx([(1024 + 256) / (2048 + 256)])


def test_the_committed_msa_modules_against_the_term():
    """The module time is within 13% MAPE per GPU and KV dtype; the fp8-KV module's growth up to the selection is
    not the halved read the term prices: on B200 it is more than the bf16 module's."""
    from slimlib.data import load
    from slimlib.experiments.kernel_timing import block_sparse_check as bs

    pts = bs.msa_points(load("aic-msa"))
    s = bs.msa_check(pts, n_boot=200).set_index(["gpu", "kv_cache_dtype"])
    assert (s["mape_pct"] < 13).all() and s.loc[("all", "all"), "n_scored"] == 375
    assert 0.8 < s.loc[("all", "all"), "growth_ratio_median"] < 1.1
    fp8 = bs.fp8_fill_ratios(pts)
    assert (fp8 > 0.8).all() and fp8["b200-sxm-180gb"] > 1.2
