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
