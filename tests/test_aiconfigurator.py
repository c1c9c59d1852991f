"""Parser of NVIDIA AIConfigurator's kernel tables (slimlib.data.aiconfigurator) on the real raw files."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pandas as pd
import pytest
from shared_paths import RAW, needs

from slimlib.data import load
from slimlib.data.aiconfigurator import AIC_NAME, WHEEL_SHA256, build_aic_tables
from slimlib.data.build import write_data_table
from slimlib.data.catalog import coerce, data_dir
from slimlib.errors import DataError
from slimlib.kit.vllm_runner import sha256_file

pytest.importorskip("pyarrow")
AIC = RAW / AIC_NAME
pytestmark = needs(AIC, "AIConfigurator kernel mirror")


@pytest.fixture(scope="module")
def built():
    return build_aic_tables(AIC)


def test_row_counts_and_coverage(built):
    tables, files = built
    dec, pre, gemm = tables["aic-decode-attention"], tables["aic-prefill-attention"], tables["aic-gemm"]
    # + the B200's NVFP4 GEMMs, + the grid corners of Qwen3-30B-A3B's projections and LM head (hidden 2048)
    assert len(dec) == 8982 and len(pre) == 9928 and len(gemm) == 29232 + 4662 + 6986
    assert sorted(tables["aic-systems"]["system"]) == ["a100_sxm", "b200_sxm", "h100_sxm", "h200_sxm"]
    h100 = dec[(dec.system == "h100_sxm") & (dec.n_heads == 32) & (dec.n_kv_heads == 8)]
    # 12 batch sizes x 16 contexts, less the large-B, long-context points that were not measured
    assert len(h100[h100.kv_cache_dtype == "bfloat16"]) == 152
    assert set(h100["kernel_source"]) == {"vllm_flash_attn_fa3"}
    assert h100["batch_size"].max() == 2048 and h100["context"].max() == 65535
    assert dec["n_kv_heads"].max() == 8  # MHA decode (more than 8 KV heads) is not in the data
    # the per-GPU shapes at TP 2, 4, 8 of the models whose TP-1 decode is measured (32/8 and 64/8 heads), and no
    # split of a multi-head model (whose TP-1 decode is not measured)
    shapes = set(zip(dec["n_heads"], dec["n_kv_heads"], strict=True))
    assert shapes == {(32, 8), (16, 4), (8, 2), (4, 1), (64, 8), (32, 4), (16, 2), (8, 1)}
    ar = tables["aic-allreduce"]
    assert set(ar["n_gpus"]) == {2, 4, 8} and set(ar["backend"]) == {"vllm_graph", "vllm_eager"}
    assert len(ar) == 4 * 2 * 3 * 23 and (ar["latency_ms"] > 0).all()
    h = ar[(ar.system == "h100_sxm") & (ar.backend == "vllm_graph") & (ar.message_elements == 128)]
    # the small-message latencies the GPU registry cites (allreduce_latency_s)
    np.testing.assert_allclose(sorted(h["latency_ms"] * 1e-3), [4.292e-6, 4.589e-6, 4.713e-6], rtol=2e-3)
    assert set(gemm["gemm_dtype"]) == {"bfloat16", "fp8", "nvfp4"}
    assert set(gemm.loc[gemm["gemm_dtype"] == "nvfp4", "system"]) == {"b200_sxm"}
    # the Mistral-7B fused gate/up GEMM (n = 28672) is bracketed by measured n
    h = gemm[(gemm.system == "h100_sxm") & (gemm.k == 4096)]
    assert {16384, 51200} <= set(h["n"])
    q3 = gemm[(gemm.system == "h200_sxm") & (gemm.gemm_dtype == "bfloat16") & (gemm.k == 2048)]
    # its QKV (n 5120) and, at TP 2, its O projection (n 2048) at k = 2048
    assert {2048, 5120} <= set(q3["n"])
    assert len(files) == 34


def test_dtypes_and_committed_tables_match_a_rebuild(built, tmp_path):
    tables, _ = built
    for name in ("aic-decode-attention", "aic-prefill-attention", "aic-gemm", "aic-allreduce", "aic-systems"):
        committed = load(name)
        assert str(committed["latency_ms" if name != "aic-systems" else "mem_bw"].dtype) == "float64"
        buf = tmp_path / f"{name}.csv"
        write_data_table(coerce(name, tables[name]), buf)
        assert buf.read_bytes() == (data_dir() / f"{name}.csv").read_bytes(), name
    dec = load("aic-decode-attention")
    assert str(dec["batch_size"].dtype) == "Int64" and str(dec["kernel_source"].dtype) == "string"
    assert (dec["latency_ms"] > 0).all()


def test_provenance_hashes_in_manifest():
    manifest = load("raw-manifest")
    aic = manifest[manifest["path"].str.startswith(AIC_NAME + "/")]
    parquet = aic[aic["path"].str.endswith(".parquet")]
    # attention (2) and GEMM (1) tables of four systems; MoE tables (4 kept, 3 older ones counted as exclusions);
    # MLA (2), MLA-BMM and all-to-all tables of three systems; the all-reduce table of four; the Gated DeltaNet, Kimi
    # Delta Attention and sparse-attention decode tables of three, DeepSeek-V4's CSA and HCA decode tables of three,
    # MiniMax-M3's MSA decode and prompt tables of three, DeepSeek-V4's mHC table of three
    assert len(parquet) == 12 + 7 + 3 * 4 + 4 + 3 + 3 + 3 + 2 * 3 + 2 * 3 + 3
    for r in aic.itertuples(index=False):
        assert sha256_file(RAW / r.path) == r.sha256, r.path
    assert WHEEL_SHA256 in (AIC / "PROVENANCE.md").read_text()
    readme = (data_dir() / "README.md").read_text()
    assert WHEEL_SHA256 in readme and "aic-decode-attention" in readme


def _copy_mirror(tmp_path):
    dst = tmp_path / AIC_NAME
    shutil.copytree(AIC, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def test_bad_latency_names_the_file(tmp_path):
    dst = _copy_mirror(tmp_path)
    path = (
        dst
        / "aiconfigurator_core/systems/data/h200_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet"
    )
    df = pd.read_parquet(path)
    sel = (df.num_heads == 32) & (df.num_key_value_heads == 8) & (df.window_size == 0) & (df.head_dim == 128)
    sel &= (df.kernel_source == "vllm_flash_attn_fa3") & (df.kv_cache_dtype == "bfloat16")
    df.loc[df[sel].index[0], "latency"] = -1.0
    buf = io.BytesIO()
    df.to_parquet(buf)
    path.write_bytes(buf.getvalue())
    with pytest.raises(DataError, match="generation_attention_perf.parquet.*not a positive"):
        build_aic_tables(dst)


def test_bad_allreduce_latency_names_the_file(tmp_path):
    dst = _copy_mirror(tmp_path)
    path = dst / "aiconfigurator_core/systems/data/b200_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet"
    df = pd.read_parquet(path)
    df.loc[df.index[3], "latency"] = float("nan")
    buf = io.BytesIO()
    df.to_parquet(buf)
    path.write_bytes(buf.getvalue())
    with pytest.raises(
        DataError, match="custom_allreduce_perf.parquet: an all-reduce latency is not a positive"
    ):
        build_aic_tables(dst)


def test_tensor_parallel_shapes_follow_vllms_split():
    from slimlib.data.aiconfigurator import model_gemm_shapes, rank_heads
    from slimlib.registry.architectures import get_architecture

    llama, qwen2 = get_architecture("llama-3-70b"), get_architecture("qwen2-7b")
    assert [rank_heads(llama, p) for p in (1, 2, 4, 8)] == [
        (64, 8, 128),
        (32, 4, 128),
        (16, 2, 128),
        (8, 1, 128),
    ]
    assert rank_heads(qwen2, 8) is None and rank_heads(qwen2, 4) == (7, 1, 128)  # 4 KV heads over 4 GPUs
    one, four = model_gemm_shapes(llama), model_gemm_shapes(llama, 4)
    assert four["qkv"][0] * 4 == one["qkv"][0] and four["o"][1] * 4 == one["o"][1]
    assert four["ffn_up"][0] * 4 == one["ffn_up"][0] and four["ffn_down"] == (8192, 28672 // 4)
    with pytest.raises(DataError, match="cannot be split over 8 GPUs"):
        model_gemm_shapes(qwen2, 8)


def test_wrong_version_and_missing_mirror(tmp_path):
    with pytest.raises(DataError, match="expected the aiconfigurator-kernels mirror"):
        build_aic_tables(tmp_path)
    dst = _copy_mirror(tmp_path)
    meta = dst / "aiconfigurator_core/systems/data/a100_sxm/gemm/vllm/0.14.0/collection_meta.yaml"
    meta.write_text(meta.read_text().replace("version: 0.14.0", "version: 0.99.0"))
    with pytest.raises(DataError, match="collection_meta.yaml: runtime.version '0.99.0'"):
        build_aic_tables(dst)
