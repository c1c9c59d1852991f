"""The Gated DeltaNet and Kimi Delta Attention decode tables (aic-gdn, aic-kda): the parser's refusals, and the
state-traffic check against them."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from shared_paths import RAW, needs

from slimlib.data import load
from slimlib.data.aiconfigurator_layers import MSA_CONFIG, build_layer_tables
from slimlib.errors import DataError
from slimlib.experiments.kernel_timing import linear_check as lc
from slimlib.registry.gpus import get_gpu

AIC = RAW / "aiconfigurator-kernels"


def _rows(batch=(128, 256), latency=None) -> pd.DataFrame:
    rows = []
    for kernel in (lc.RECURRENT, lc.CONV):
        for b in batch:
            rows.append({"system": "h200_sxm", "gpu": "h200-sxm-141gb", "vllm_version": "0.24.0",
                         "kernel_source": kernel, "model": "Qwen/Qwen3.5-27B", "batch_size": b, "hidden_size": 5120,
                         "conv_kernel": 4, "key_heads": 16, "key_head_dim": 128, "value_heads": 48,
                         "value_head_dim": 128, "latency_ms": 1.0})  # fmt: skip
    return pd.DataFrame(rows)


def test_state_bytes_by_hand():
    t = _rows(batch=(256,))
    got = lc.decode_state_bytes(t).tolist()
    assert got == [2 * 256 * 48 * 128 * 128 * 4.0, 2 * 256 * (2 * 16 * 128 + 48 * 128) * 3 * 2.0]


def test_the_check_is_exact_where_the_kernels_run_at_the_terms_speed():
    t = _rows(batch=(64, 128, 1024))
    gpu = get_gpu("h200-sxm-141gb")
    t["latency_ms"] = 1e3 * lc.decode_state_bytes(t) / (lc.device_efficiency(gpu.name) * gpu.mem_bw)
    pts = lc.gdn_points(t)
    assert len(pts) == 3 and pts["ratio"].to_numpy() == pytest.approx(1.0, rel=1e-12)
    assert pts["role"].tolist() == ["floor", "score", "score"]  # batch 64 sits below the scored range
    s = lc.gdn_check(pts, n_boot=200).set_index("gpu")
    assert s.loc["all", "n_scored"] == 2 and s.loc["all", "mape_pct"] == pytest.approx(0.0, abs=1e-9)
    # a kernel twice as slow as the term is 50% off, predicted/measured 0.5
    t["latency_ms"] *= 2
    s = lc.gdn_check(lc.gdn_points(t), n_boot=200).set_index("gpu")
    assert s.loc["all", "mape_pct"] == pytest.approx(50.0) and s.loc["all", "ratio_median"] == pytest.approx(
        0.5
    )


def test_a_shape_missing_one_of_its_kernels_is_not_scored():
    t = _rows(batch=(128, 256))
    t = t.drop(index=t.index[(t["kernel_source"] == lc.CONV) & (t["batch_size"] == 256)])
    assert lc.gdn_points(t)["batch_size"].tolist() == [128]


def test_unknown_kernel_is_refused():
    t = _rows()
    t.loc[0, "kernel_source"] = "chunk_gated_delta_rule"
    with pytest.raises(DataError, match="row 0: kernel 'chunk_gated_delta_rule'"):
        lc.decode_state_bytes(t)


def test_committed_table_is_physical_at_fp32_states():
    """At 4-byte states no scored point moves its bytes more than 10% above the peak bandwidth; at 2-byte states
    (the alternative reading of the collector's dtype) every point would be below half its speed: fp32 it is."""
    pts = lc.gdn_points(load("aic-gdn"))
    scored = pts[pts["role"] == "score"]
    bw = scored["gpu"].map(lambda g: get_gpu(g).mem_bw)
    share = scored["state_bytes"] / (scored["latency_ms"] * 1e-3 * bw)
    assert share.max() < 1.1 and share.median() > 0.5
    assert set(scored["gpu"]) == {"h100-sxm-80gb", "h200-sxm-141gb", "b200-sxm-180gb"}


@needs(AIC, "AIConfigurator kernel mirror")
def test_parser_refuses_a_wrong_version_and_phase_naming_file_and_row(tmp_path):
    src = AIC / "aiconfigurator_core" / "systems" / "data"
    root = tmp_path / "aic"
    for system in ("b200_sxm", "h100_sxm", "h200_sxm"):
        d = (
            root
            / "aiconfigurator_core"
            / "systems"
            / "data"
            / system
            / "linear_attention"
            / "vllm"
            / "0.24.0"
        )
        d.mkdir(parents=True)
        s = src / system / "linear_attention" / "vllm" / "0.24.0"
        shutil.copy(s / "collection_meta.yaml", d)
        raw = pd.read_parquet(s / "gdn_perf.parquet")
        if system == "h100_sxm":
            raw.loc[raw.index[3], "phase"] = "mixed"
        raw.to_parquet(d / "gdn_perf.parquet")
        sparse = (
            root
            / "aiconfigurator_core"
            / "systems"
            / "data"
            / system
            / "sparse_attention"
            / "vllm"
            / "0.24.0"
        )
        shutil.copytree(src / system / "sparse_attention" / "vllm" / "0.24.0", sparse)
        kda = root / "aiconfigurator_core" / "systems" / "data" / system / "kda"
        shutil.copytree(src / system / "kda", kda)
        for kind in ("msa", "mhc"):
            shutil.copytree(
                src / system / kind, root / "aiconfigurator_core" / "systems" / "data" / system / kind
            )
    (root / MSA_CONFIG).parent.mkdir(parents=True)
    shutil.copy(AIC / MSA_CONFIG, root / MSA_CONFIG)  # MiniMax-M3's head shapes (aic-msa)
    with pytest.raises(DataError) as err:
        build_layer_tables(root)
    msg = str(err.value)
    assert "h100_sxm" in msg and "gdn_perf.parquet" in msg and "'mixed'" in msg and "\n" not in msg
    tables, files = build_layer_tables(AIC)
    committed = load("aic-gdn")
    assert len(tables["aic-gdn"]) == len(committed) and len(files) == 40
    assert len(tables["aic-kda"]) == len(load("aic-kda"))
    prefill = load("aic-gdn-prefill")
    assert len(tables["aic-gdn-prefill"]) == len(prefill) and list(tables["aic-gdn-prefill"]) == list(prefill)
    assert np.allclose(tables["aic-gdn-prefill"]["latency_ms"].to_numpy(), prefill["latency_ms"].to_numpy())
    assert np.allclose(tables["aic-gdn"]["latency_ms"].to_numpy(), committed["latency_ms"].to_numpy())


def test_kda_paths_pair_each_recurrent_kernel_with_the_convolution():
    """Each of vLLM's two recurrent Kimi Delta Attention kernels is a path with the convolution update; the bytes are
    the Gated DeltaNet's (the state 2 B H_v d_k d_v fp32, the convolution's bf16 K - 1 inputs)."""
    t = _rows(batch=(128,))
    t = pd.concat([t[t["kernel_source"] == lc.CONV]] + [t[t["kernel_source"] == lc.RECURRENT].assign(kernel_source=k)
                   for k in lc.KDA_RECURRENT], ignore_index=True)  # fmt: skip
    pts = lc.kda_points(t)
    assert sorted(pts["path"]) == sorted(lc.KDA_RECURRENT) and (pts["latency_ms"] == 2.0).all()
    gdn = lc.gdn_points(_rows(batch=(128,)))
    assert np.allclose(pts["state_bytes"], gdn["state_bytes"].iloc[0])
    with pytest.raises(DataError, match="aic-kda: row .*is neither fused_kda_decode"):
        lc.decode_state_bytes(t, "fused_kda_decode", "aic-kda")


def test_committed_kda_table_is_physical_at_fp32_states():
    pts = lc.kda_points(load("aic-kda"))
    scored = pts[pts["role"] == "score"]
    share = scored["state_bytes"] / (
        scored["latency_ms"] * 1e-3 * scored["gpu"].map(lambda g: get_gpu(g).mem_bw)
    )
    assert share.max() < 1.1 and set(scored["path"]) == set(lc.KDA_RECURRENT)
