"""DeepSeek-V4's manifold-constrained hyper-connections (mHC): the reader of vLLM's measured ``mhc_pre`` /
``mhc_post`` kernels (data/aic-mhc.csv), the bytes the widened residual stream moves, and the kernel check."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from shared_paths import RAW, needs

from slimlib.data import load
from slimlib.errors import DataError

MHC_RAW = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "systems" / "data"
SYSTEMS = ("b200_sxm", "h100_sxm", "h200_sxm")


# ---------------------------------------------------------------------------------------------------------------
# The reader (data/aic-mhc.csv)
# ---------------------------------------------------------------------------------------------------------------
@needs(MHC_RAW, "AIConfigurator kernel mirror")
def test_the_committed_mhc_table_keeps_every_row_of_the_parquet_files():
    """Per system and op, the committed rows are the parquet file's rows, latencies summed alike; B200's 0.22.0
    folder (a reuse.yaml pointing at 0.24.0) adds none."""
    t = load("aic-mhc")
    total = 0
    for system in SYSTEMS:
        raw = pd.read_parquet(MHC_RAW / system / "mhc" / "vllm" / "0.24.0" / "mhc_module_perf.parquet")
        total += len(raw)
        for op in ("pre", "post"):
            want = raw[raw["op_name"] == op]
            got = t[(t["system"] == system) & (t["op"] == op)]
            assert len(got) == len(want) > 60, (system, op)
            assert got["latency_ms"].sum() == pytest.approx(want["latency"].sum())
    assert not list((MHC_RAW / "b200_sxm" / "mhc" / "vllm" / "0.22.0").glob("*.parquet"))
    assert len(t) == total == 139 + 140 + 134
    shapes = t[["vllm_version", "n_sites", "hc_mult", "sinkhorn_iters"]].drop_duplicates().values.tolist()
    assert shapes == [["0.24.0", 2, 4, 20]] and set(t["hidden_size"]) == {4096, 7168}


@needs(MHC_RAW, "AIConfigurator kernel mirror")
@pytest.mark.parametrize(
    "column, value, match",
    [
        ("latency", float("nan"), "row 7: latency must be a positive number"),
        ("version", "0.22.0", "row 7: version '0.22.0'"),
        ("architecture", "OtherForCausalLM", "row 7: architecture 'OtherForCausalLM'"),
        ("op_name", "fused", "row 7: op_name 'fused'"),
        ("num_tokens", 0, "row 7: num_tokens 0"),
    ],
)
def test_the_mhc_reader_refuses_a_malformed_row_naming_file_and_row(tmp_path, column, value, match):
    from slimlib.data.aiconfigurator_layers import _mhc

    raw = pd.read_parquet(MHC_RAW / "h200_sxm" / "mhc" / "vllm" / "0.24.0" / "mhc_module_perf.parquet")
    raw.loc[7, column] = value
    raw.to_parquet(tmp_path / "mhc_module_perf.parquet")
    with pytest.raises(DataError) as err:
        _mhc(tmp_path / "mhc_module_perf.parquet", "h200_sxm")
    msg = str(err.value)
    assert "mhc_module_perf.parquet: " + match in msg and "\n" not in msg, msg


@needs(MHC_RAW, "AIConfigurator kernel mirror")
def test_the_mhc_reader_refuses_a_repeated_shape(tmp_path):
    from slimlib.data.aiconfigurator_layers import _mhc

    raw = pd.read_parquet(MHC_RAW / "h100_sxm" / "mhc" / "vllm" / "0.24.0" / "mhc_module_perf.parquet")
    raw = pd.concat([raw, raw.iloc[[3]]], ignore_index=True)
    raw.to_parquet(tmp_path / "mhc_module_perf.parquet")
    with pytest.raises(DataError, match=f"mhc_module_perf.parquet: row {len(raw) - 1}: repeats"):
        _mhc(tmp_path / "mhc_module_perf.parquet", "h100_sxm")


# ---------------------------------------------------------------------------------------------------------------
# The bytes of the widened residual stream and the kernel check
# ---------------------------------------------------------------------------------------------------------------
def test_the_residual_stream_bytes_by_hand():
    """Per token and layer, 2 sites x (pre: the 4 copies read twice, the layer input written; post: the copies and
    the layer output read, the copies written) = 2 x 2 x 9 D bf16 elements; none without hyper-connections."""
    from slimlib.model.serving import hyper_connection_bytes

    assert hyper_connection_bytes(7168, 4) == 2 * (9 + 9) * 7168 * 2 == 516_096
    assert hyper_connection_bytes(4096, 0) == 0


def _curve(gpu: str, op: str, hidden: int, tokens, latency, sites: int = 2) -> pd.DataFrame:
    return pd.DataFrame({"gpu": gpu, "op": op, "hidden_size": hidden, "hc_mult": 4, "n_sites": sites,
                         "num_tokens": tokens, "latency_ms": latency})  # fmt: skip


def test_the_traffic_charge_is_exact_where_the_op_grows_at_the_peak_bandwidth():
    """A post curve whose growth is exactly its bytes over the peak bandwidth scores 0% with the traffic charge;
    the existing charge (no weights) stays at the base."""
    from slimlib.experiments.kernel_timing.hyper_connection_check import (
        hyper_connection_check,
        hyper_connection_points,
    )
    from slimlib.registry.gpus import get_gpu

    tokens = np.array([1, 64, 4096, 65536])
    bw = get_gpu("h100-sxm-80gb").mem_bw
    lat = 0.01 + 1e3 * (tokens - 1) * 2 * 9 * 7168 * 2 / bw
    pts = hyper_connection_points(_curve("h100-sxm-80gb", "post", 7168, tokens, lat))
    np.testing.assert_allclose(pts["traffic_ms"], lat)
    np.testing.assert_allclose(pts["existing_ms"], 0.01)
    assert list(pts["role"]) == ["base", "score", "score", "score"]
    assert list(pts["band"]) == ["small", "small", "large", "large"]
    c = hyper_connection_check(pts, n_boot=200)
    assert np.allclose(c["mape_traffic_pct"], 0.0)
    assert set(c["band"]) == {"small", "large", "all"}
    with pytest.raises(DataError, match="at other than 2 sites"):
        hyper_connection_points(_curve("h100-sxm-80gb", "post", 7168, tokens, lat, sites=1))


@needs(MHC_RAW, "AIConfigurator kernel mirror")
def test_the_committed_check_numbers():
    """The traffic charge brings the large steps within 25% on every GPU, where the existing charge misses >85%."""
    from slimlib.experiments.kernel_timing.hyper_connection_check import (
        hyper_connection_check,
        hyper_connection_points,
    )

    c = hyper_connection_check(hyper_connection_points(), n_boot=500)
    large = c[c["band"] == "large"]
    assert len(large) == 3
    assert (large["mape_traffic_pct"] < 25).all() and (large["mape_existing_pct"] > 85).all()


# ---------------------------------------------------------------------------------------------------------------
# The model's term (HYPER_CONNECTIONS)
# ---------------------------------------------------------------------------------------------------------------
def test_the_term_charges_nothing_for_every_registry_model_without_hyper_connections():
    """Every registry architecture with hc_mult 0 has hc_bytes_per_token 0 and the term's prefill and step 0, so
    no prediction of such a model moves; DeepSeek-V4 is charged its layers' bytes over the peak bandwidth."""
    from slimlib.model.features import model_features
    from slimlib.model.terms import HYPER_CONNECTIONS
    from slimlib.registry.architectures import get_architecture, list_architectures
    from slimlib.registry.gpus import get_gpu

    hw = get_gpu("h100-sxm-80gb")
    names = list(list_architectures()["name"])
    df = pd.DataFrame({"model": names, "batch_size": 64.0, "input_len": 1024.0, "output_len": 128.0})
    f = model_features(df, hw)
    times = HYPER_CONNECTIONS.times({}, f, hw)
    hc = np.array([get_architecture(n).hc_mult for n in names])
    assert (hc == 0).sum() == len(names) - 2 and (hc == 4).sum() == 2  # DeepSeek-V4-Flash and -Pro
    assert (f["hc_bytes_per_token"][hc == 0] == 0).all()
    assert (np.asarray(times.prefill)[hc == 0] == 0).all() and (np.asarray(times.step)[hc == 0] == 0).all()
    pro = names.index("deepseek-v4-pro")
    assert f["hc_bytes_per_token"][pro] == 61 * 516_096
    assert np.asarray(times.step)[pro] == pytest.approx(64 * 61 * 516_096 / hw.mem_bw)
    assert np.asarray(times.prefill)[pro] == pytest.approx(64 * 1024 * 61 * 516_096 / hw.mem_bw)
