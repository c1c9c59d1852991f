"""The per-sequence rate of static batches and its TP efficiency (`slimlib.experiments.accuracy.tp_scaling`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.experiments.accuracy.tp_scaling import per_sequence_rates, tp_efficiency
from slimlib.registry.architectures import get_architecture


def _curve(tp: int, gpu_tflops: float, il: int = 128, batches=(1, 16, 32, 64, 128)) -> pd.DataFrame:
    """Latencies of a static batch whose every sequence adds 2 P (IL + OL) FLOPs at `gpu_tflops` per GPU, plus a
    fixed 1 s (test data generated from the definition, not measured)."""
    p = get_architecture("llama-2-7b").active_params
    per_seq = 2.0 * p * 2 * il / (gpu_tflops * 1e12 * tp)
    return pd.DataFrame({"gpu": "mi300x", "model": "llama-2-7b", "tensor_parallel": float(tp), "input_len": il,
                         "output_len": il, "batch_size": [float(b) for b in batches],
                         "e2e_s": [1.0 + (50.0 if b == 1 else 0.0) + b * per_seq for b in batches]})  # fmt: skip


def test_rate_recovered_and_batch_one_left_out():
    runs = pd.concat([_curve(1, 50.0), _curve(1, 50.0, il=256), _curve(4, 25.0)], ignore_index=True)
    rates = per_sequence_rates(runs)
    assert len(rates) == 3 and (rates["n_batches"] == 4).all()  # B = 1 (50 s slower) is not in any slope
    assert np.allclose(rates["gpu_tflops"], [50.0, 50.0, 25.0])
    eff = tp_efficiency(rates)
    assert eff["ratio_to_base"].tolist() == pytest.approx([1.0, 0.5])
    assert eff["base_tp"].tolist() == [1.0, 1.0]


def test_short_curves_skipped_and_missing_columns_refused():
    assert per_sequence_rates(_curve(1, 50.0, batches=(16, 32))).empty
    with pytest.raises(DataError, match="e2e_s"):
        per_sequence_rates(_curve(1, 50.0).drop(columns="e2e_s"))


def test_kernel_tp_efficiency_on_the_vidur_tables():
    from slimlib.data import load
    from slimlib.experiments.accuracy.tp_scaling import LINEAR_OPERATIONS, kernel_tp_efficiency

    v = load("vidur-mlp")
    k = kernel_tp_efficiency(v).set_index(["gpu", "model", "tensor_parallel", "num_tokens"])
    key = ("h100-sxm-80gb", "meta-llama/Llama-2-7b-hf")
    by_hand = {
        tp: v[(v["gpu"] == key[0]) & (v["model"] == key[1]) & (v["num_tensor_parallel_workers"] == tp)
              & (v["num_tokens"] == 16) & v["operation"].isin(LINEAR_OPERATIONS)]
        .groupby("operation")["time_ms_median"].median().sum()
        for tp in (1, 8)
    }  # fmt: skip
    assert k.loc[(*key, 8, 16), "layer_ms"] == pytest.approx(by_hand[8])
    assert k.loc[(*key, 8, 16), "efficiency_vs_tp1"] == pytest.approx(by_hand[1] / (8 * by_hand[8]))
    assert (k.xs(1, level="tensor_parallel")["efficiency_vs_tp1"] == 1.0).all()
    # at decode-sized token counts a 7B model's 1/8-wide GEMMs keep less of TP 1's efficiency than a 70B model's
    small = k.loc[("h100-sxm-80gb", "meta-llama/Llama-2-7b-hf", 8, 16), "efficiency_vs_tp1"]
    large = k.loc[("h100-sxm-80gb", "meta-llama/Llama-2-70b-hf", 8, 16), "efficiency_vs_tp1"]
    assert small < large < 1.0
    with pytest.raises(DataError, match="num_tokens"):
        kernel_tp_efficiency(v.drop(columns="num_tokens"))


def test_tp_split_recovers_the_part_no_tp_degree_divides():
    from slimlib.experiments.accuracy.tp_scaling import tp_split

    # slopes a + b / TP per sequence with a = 0.128 s and b = 1.28 s over OL = 128 steps: 1 and 10 ms per step
    rates = pd.DataFrame({"gpu": "mi300x", "model": "llama-2-7b", "input_len": 128.0, "output_len": 128.0,
                          "tensor_parallel": [1.0, 2.0, 4.0, 8.0]})  # fmt: skip
    rates["slope_s_per_seq"] = 0.128 + 1.28 / rates["tensor_parallel"]
    two = rates.iloc[:2].assign(model="llama-3-8b")  # two TP degrees: no split
    s = tp_split(pd.concat([rates, two], ignore_index=True))
    assert s["model"].tolist() == ["llama-2-7b"] and s["tp_degrees"].iloc[0] == "1,2,4,8"
    assert (s["fixed_ms_per_step"].iloc[0], s["split_ms_per_step"].iloc[0]) == pytest.approx((1.0, 10.0))
    assert s["fixed_share_tp1"].iloc[0] == pytest.approx(1 / 11)


def test_tp_split_on_mi300x_finds_a_fixed_part_alike_across_small_models():
    from slimlib.experiments.accuracy.scenarios import llmib_table
    from slimlib.experiments.accuracy.tp_scaling import tp_split

    s = tp_split(per_sequence_rates(llmib_table()))
    small = s[(s["gpu"] == "mi300x") & (s["input_len"] <= 256) & ~s["model"].str.contains("70b")]
    assert len(small) == 8  # llama-2-7b, llama-3-8b, mixtral-8x7b, qwen2-7b at IL = OL 128 and 256
    # about 3x vLLM's measured host work on an A100 host (HOST_SEQUENCE_S)
    assert small["fixed_ms_per_step"].between(0.10, 0.15).all()
