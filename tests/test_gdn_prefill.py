"""The Gated DeltaNet prefill kernels (aic-gdn-prefill): the parser's refusals, the rates the registry holds, the
prefill term's check against the measured kernels, and the term in the recommended model."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from shared_paths import RAW, needs

from slimlib.data import load
from slimlib.data.aiconfigurator_layers import GDN_PREFILL_KERNELS, _gdn_prefill
from slimlib.errors import DataError
from slimlib.experiments.kernel_timing import linear_check as lc
from slimlib.model import equations as eq
from slimlib.model.features import model_features
from slimlib.model.terms.recommended import SERVED_PREFILL, linear_attention_prefill
from slimlib.registry.architectures import architecture_from_config
from slimlib.registry.config_reader import MAMBA2_CHUNK
from slimlib.registry.gpus import get_gpu

SYSTEM_GPU = {"h100_sxm": "h100-sxm-80gb", "h200_sxm": "h200-sxm-141gb", "b200_sxm": "b200-sxm-180gb"}


def _raw(rows: int = 2) -> pd.DataFrame:
    return pd.DataFrame({
        "version": "0.24.0", "kernel_source": [GDN_PREFILL_KERNELS[i % 2] for i in range(rows)],
        "phase": "context", "batch_size": 2, "seq_len": 512, "num_tokens": 1024, "d_model": 5120, "d_conv": 4,
        "num_k_heads": 16, "head_k_dim": 128, "num_v_heads": 48, "head_v_dim": 128, "model_name": "Qwen/Qwen3.5-27B",
        "latency": 0.1,
    })  # fmt: skip


def test_the_parser_keeps_the_context_rows_and_refuses_bad_ones_naming_file_and_row(tmp_path):
    path = tmp_path / "gdn_perf.parquet"
    raw = pd.concat([_raw(), _raw().assign(phase="generation", seq_len=1, num_tokens=2)], ignore_index=True)
    raw.to_parquet(path)
    t = _gdn_prefill(path, "h200_sxm")
    assert len(t) == 2 and (t["input_len"] == 512).all() and (t["gpu"] == "h200-sxm-141gb").all()
    for change, message in (
        ({"num_tokens": 1000}, "row 1: a context row must have num_tokens = batch_size x seq_len"),
        ({"kernel_source": "chunk_gated_delta_rule"}, "row 1: context kernel 'chunk_gated_delta_rule'"),
        ({"latency": float("nan")}, "row 1: latency must be a positive number of ms"),
        (
            {"model_name": "Qwen/Qwen3.5-27B", "kernel_source": GDN_PREFILL_KERNELS[0]},
            "row 1: repeats the shape",
        ),
    ):
        bad = _raw()
        for col, value in change.items():
            bad.loc[1, col] = value
        bad.to_parquet(path)
        with pytest.raises(DataError) as err:
            _gdn_prefill(path, "h200_sxm")
        assert (
            str(err.value).startswith(str(path)) and message in str(err.value) and "\n" not in str(err.value)
        )


def test_registry_rates_are_the_committed_tables():
    rates = lc.gdn_prefill_rates(lc.gdn_prefill_points(load("aic-gdn-prefill"))).set_index("gpu")
    assert set(rates.index) == set(SYSTEM_GPU.values())
    for gpu in SYSTEM_GPU.values():
        hw = get_gpu(gpu)
        assert hw.linear_prefill_token_s == pytest.approx(rates.loc[gpu, "token_s"], rel=1e-3)
        assert hw.linear_prefill_flops == pytest.approx(rates.loc[gpu, "flops_s"], rel=1e-3)
        assert hw.linear_conv_bw == pytest.approx(rates.loc[gpu, "conv_bw"], rel=1e-3)
        # physical: below the bf16 peak and the bandwidth
        assert hw.linear_prefill_flops < hw.peak_flops and hw.linear_conv_bw < hw.mem_bw
    assert get_gpu("a100-sxm-80gb").linear_prefill_flops is None  # no measured kernel, no borrowed rate


def test_the_term_holds_on_shapes_it_did_not_read():
    """Each head shape scored with the rates of the other shapes' rows: within 15% MAPE on every GPU, the held-out
    ratio's median within 5% of 1."""
    s = lc.gdn_prefill_check(lc.gdn_prefill_points(), n_boot=200).set_index("gpu")
    assert s.loc["all", "n_scored"] > 5000 and s.loc["all", "shapes"] == 18
    for gpu in SYSTEM_GPU.values():
        assert s.loc[gpu, "held_out_mape_hi_pct"] < 15.0
        assert abs(s.loc[gpu, "ratio_median"] - 1.0) < 0.05


def test_the_check_is_exact_where_the_kernels_follow_the_term():
    """Kernels timed exactly as the term says (the recurrence's max of serial and filled, the convolution's bytes
    over a bandwidth): the rates read back are those, and every error is 0."""
    pts = lc.gdn_prefill_points()
    token_s, flops_s, conv_bw = 5e-8, 4e14, 2.5e12
    chunk = np.maximum(pts["input_len"] * token_s, pts["tokens"] * pts["flops_per_token"] / flops_s)
    conv = pts["tokens"] * pts["conv_bytes_per_token"] / conv_bw
    pts = pts.assign(chunk_ms=1e3 * chunk, conv_ms=1e3 * conv, latency_ms=1e3 * (chunk + conv))
    rates = lc.gdn_prefill_rates(pts)
    assert rates["token_s"].to_numpy() == pytest.approx(token_s) and rates[
        "flops_s"
    ].to_numpy() == pytest.approx(flops_s)
    assert rates["conv_bw"].to_numpy() == pytest.approx(conv_bw)
    s = lc.gdn_prefill_check(pts, n_boot=100).set_index("gpu")
    assert s.loc["all", "held_out_mape_pct"] < 1e-9 and s.loc["all", "all_rows_mape_pct"] < 1e-9
    with pytest.raises(DataError, match="no prefill rates for GPU h200-sxm-141gb"):
        lc.gdn_prefill_modelled_ms(pts, rates[rates["gpu"] != "h200-sxm-141gb"])


def test_chunked_flops_by_hand():
    """Per chunk, summed and shared over its c tokens (2 FLOPs a multiply-add)."""
    c, dk, dv = eq.DELTA_RULE_CHUNK, 128, 96
    # K K^T and Q K^T; the triangular solve; W and U; the state's read, output and update; the intra-chunk output
    per_chunk = 2 * c * c * dk + c**3 / 3 + c * c * (dk + dv) + 3 * c * dk * dv + c * c * dv
    assert float(eq.delta_rule_prefill_flops(dk, dv)) == pytest.approx(2 * per_chunk / c)
    c, n, p, h, g = MAMBA2_CHUNK, 128, 64, 64, 8
    # C B^T per group; its masked product with each head's inputs; each head's chunk state and carried state
    per_chunk = g * c * c * n + h * (c * c * p + 2 * c * n * p)
    assert float(eq.ssd_prefill_flops(n, p, h, g, c)) == pytest.approx(2 * per_chunk / c)


def test_the_recurrence_is_serial_per_prompt_until_the_batch_fills_the_device():
    # one layer, 1 kFLOP per token, 1 ns per token serial, 1 TFLOP/s full: the crossover at B = 1
    t = eq.linear_prefill_time([1, 1, 4, 8], [1000, 2000, 1000, 1000], 1.0, 1e3, 0.0, 1e-9, 1e12, 1.0)
    assert t == pytest.approx([1e-6, 2e-6, 4e-6, 8e-6])
    t = eq.linear_prefill_time([1, 4], 1000, 1.0, 1e2, 0.0, 1e-9, 1e12, 1.0)
    assert t == pytest.approx(
        [1e-6, 1e-6]
    )  # the device idle: each prompt's chunks in order, whatever the batch
    assert eq.linear_prefill_time(2, 1000, 1.0, 0.0, 100.0, 0.0, 1.0, 1e9) == pytest.approx(
        2e-4
    )  # the convolution


def _features(model: str, gpu: str, tp: int = 1) -> dict:
    df = pd.DataFrame({"model": model, "batch_size": [1, 64], "input_len": [8192, 2048], "output_len": 128,
                       "tensor_parallel": tp})  # fmt: skip
    return model_features(df, gpu)


def test_the_recommended_prefill_charges_a_hybrids_linear_layers():
    hw = get_gpu("h200-sxm-141gb")
    f = _features("qwen3.5-35b-a3b", hw.name)
    p = {"eta_c": 0.5}
    rec = linear_attention_prefill(p, f, hw)
    assert f["n_linear_layers"][0] == 30 and (rec > 0).all()
    # B = 1: each layer's prompt in order at the measured time per token, plus the convolution
    conv = 8192 * f["linear_conv_bytes_per_token"][0] / hw.linear_conv_bw
    assert rec[0] == pytest.approx(30 * 8192 * hw.linear_prefill_token_s + conv)
    # B = 64 fills the device: the FLOPs at the measured rate
    assert rec[1] > 64 * 2048 * f["linear_prefill_flops_per_token"][1] / hw.linear_prefill_flops
    # the prefill term carries it: without linear layers' FLOPs and bytes, it is that much shorter
    full = SERVED_PREFILL.times(p, f, hw).prefill
    bare = SERVED_PREFILL.times(p, {**f, "n_linear_layers": f["n_linear_layers"] * 0,
                                 "linear_prefill_flops_per_token": f["linear_prefill_flops_per_token"] * 0,
                                 "linear_conv_bytes_per_token": f["linear_conv_bytes_per_token"] * 0}, hw).prefill  # fmt: skip
    assert full - bare == pytest.approx(rec)
    # a dense model has none
    assert (linear_attention_prefill(p, _features("llama-2-7b", hw.name), hw) == 0).all()


def test_tensor_parallel_splits_the_heads_not_the_serial_chunks():
    hw = get_gpu("h200-sxm-141gb")
    one, two = _features("qwen3.5-27b", hw.name), _features("qwen3.5-27b", hw.name, tp=2)
    assert two["linear_prefill_flops_per_token"] == pytest.approx(one["linear_prefill_flops_per_token"] / 2)
    assert two["linear_conv_bytes_per_token"] == pytest.approx(one["linear_conv_bytes_per_token"] / 2)
    p = {"eta_c": 0.5}
    a, b = linear_attention_prefill(p, one, hw), linear_attention_prefill(p, two, hw)
    conv = (
        8192
        * np.array([one["linear_conv_bytes_per_token"][0], two["linear_conv_bytes_per_token"][0]])
        / hw.linear_conv_bw
    )
    assert b[0] - conv[1] == pytest.approx(a[0] - conv[0])  # one prompt: its chunks in order on either split
    assert b[1] == pytest.approx(a[1] / 2, rel=0.05)  # a full device: half the FLOPs and bytes per GPU


def test_a_mamba2_hybrid_pays_its_scan_per_group_and_head():
    f = _features("nemotron-3-nano-30b-a3b", "h200-sxm-141gb")
    assert f["n_linear_layers"][0] == 23
    assert f["linear_prefill_flops_per_token"][0] == pytest.approx(
        23 * float(eq.ssd_prefill_flops(128, 64, 64, 8, MAMBA2_CHUNK))
    )
    two = _features("nemotron-3-nano-30b-a3b", "h200-sxm-141gb", tp=2)
    assert two["linear_prefill_flops_per_token"][0] == pytest.approx(
        f["linear_prefill_flops_per_token"][0] / 2
    )


def test_a_device_without_the_measured_kernels_prices_flops_and_bytes_at_the_peaks():
    hw = get_gpu("mi300x")
    f = _features("qwen3.5-35b-a3b", hw.name)
    p = {"eta_c": 0.5}
    tokens = np.array([8192.0, 64 * 2048.0])
    want = tokens * (f["linear_prefill_flops_per_token"] / (0.5 * hw.peak_flops)
                     + f["linear_conv_bytes_per_token"] / hw.mem_bw)  # fmt: skip
    assert linear_attention_prefill(p, f, hw) == pytest.approx(want)


@needs(RAW, "the shared data mirror")
def test_a_mamba2_scan_of_another_chunk_is_refused_naming_the_key(tmp_path):
    src = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "model_configs"
    config = json.loads((src / "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16_config.json").read_text())
    assert config["chunk_size"] == MAMBA2_CHUNK
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "chunk_size": 256}))
    with pytest.raises(DataError) as err:
        architecture_from_config(path)
    assert (
        "key 'chunk_size' 256" in str(err.value)
        and str(path) in str(err.value)
        and "\n" not in str(err.value)
    )
