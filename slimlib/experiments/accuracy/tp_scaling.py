"""How well tensor parallelism divides the per-sequence work on measured static batches (the TP axis, issue 28).

In a static batch of ``B`` prompts of ``IL`` tokens that each generate ``OL``, every sequence adds the same work:
its prompt and its ``OL`` decode steps, ``2 P (IL + OL)`` FLOPs with ``P`` the parameters one token uses. Past the
smallest batches the latency grows linearly in ``B``; its slope ``dE2E/dB`` is the time one more sequence costs
(`per_sequence_rates`). Divided into those FLOPs and by the TP degree it is the rate each GPU adds work at, a
throughput-weighted efficiency of everything that grows with the batch (GEMMs, attention, sampling, host work).
A TP degree that divided this work perfectly would keep the per-GPU rate of TP 1; the ratio (`tp_efficiency`)
says how much of it a model fitted at TP 1 cannot see.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.registry.architectures import get_architecture

#: the smallest batch of the linear part: a slope from B >= 16 leaves out the weight-read-bound B = 1 point
MIN_BATCH = 16
#: fewest batch sizes a slope is fitted from
MIN_POINTS = 3
CURVE = ["gpu", "model", "tensor_parallel", "input_len", "output_len"]
RATE_COLUMNS = (*CURVE, "n_batches", "slope_s_per_seq", "gpu_tflops")


def per_sequence_rates(runs: pd.DataFrame, min_batch: int = MIN_BATCH) -> pd.DataFrame:
    """Per curve (`CURVE`) with at least `MIN_POINTS` batch sizes >= `min_batch`: the least-squares slope of E2E
    in the batch size (s per sequence) and the per-GPU rate ``2 P (IL + OL) / (slope TP)`` in TFLOP/s."""
    missing = [c for c in (*CURVE, "batch_size", "e2e_s") if c not in runs.columns]
    if missing:
        raise DataError(f"per_sequence_rates: the table lacks column(s) {missing}")
    rows = []
    for key, g in runs[runs["batch_size"] >= min_batch].groupby(CURVE, sort=True):
        if g["batch_size"].nunique() < MIN_POINTS:
            continue
        slope = float(np.polyfit(g["batch_size"].to_numpy(float), g["e2e_s"].to_numpy(float), 1)[0])
        gpu, model, tp, il, ol = key
        flops = 2.0 * get_architecture(str(model)).active_params * (float(il) + float(ol))
        rate = flops / (slope * float(tp)) / 1e12 if slope > 0 else np.nan
        rows.append((*key, int(g["batch_size"].nunique()), slope, rate))
    return pd.DataFrame(rows, columns=list(RATE_COLUMNS))


def tp_efficiency(rates: pd.DataFrame) -> pd.DataFrame:
    """Per GPU, model and TP degree: the median per-GPU rate over the lengths and its ratio to the same model's at
    the smallest TP degree measured on that GPU (1.0 there: TP divides the per-sequence work perfectly)."""
    med = rates.groupby(["gpu", "model", "tensor_parallel"], sort=True)["gpu_tflops"].median().reset_index()
    base = med.sort_values("tensor_parallel").groupby(["gpu", "model"])["gpu_tflops"].transform("first")
    first_tp = (
        med.sort_values("tensor_parallel").groupby(["gpu", "model"])["tensor_parallel"].transform("first")
    )
    med["base_tp"] = first_tp
    med["ratio_to_base"] = med["gpu_tflops"] / base
    return med
