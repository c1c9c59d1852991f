"""How well tensor parallelism divides the per-sequence work on measured static batches (the TP axis).

In a static batch of ``B`` prompts of ``IL`` tokens that each generate ``OL``, every sequence adds the same work:
its prompt and its ``OL`` decode steps, ``2 P (IL + OL)`` FLOPs with ``P`` the parameters one token uses. Past the
smallest batches the latency grows linearly in ``B``; its slope ``dE2E/dB`` is the time one more sequence costs
(`per_sequence_rates`). Divided into those FLOPs and by the TP degree it is the rate each GPU adds work at, a
throughput-weighted efficiency of everything that grows with the batch (GEMMs, attention, sampling, host work).
A TP degree that divided this work perfectly would keep the per-GPU rate of TP 1; the ratio (`tp_efficiency`)
says how much of it a model fitted at TP 1 cannot see. `kernel_tp_efficiency` measures the same loss on the
kernels alone: Vidur's per-TP timings of one layer's linear layers on A100 and H100 (``data/vidur-mlp.csv``).
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
    first = med.groupby(["gpu", "model"])[["tensor_parallel", "gpu_tflops"]].transform(
        "first"
    )  # sorted by TP
    med["base_tp"] = first["tensor_parallel"]
    med["ratio_to_base"] = med["gpu_tflops"] / first["gpu_tflops"]
    return med


#: Vidur's operator names of one layer's four linear layers (qkv, attention output, FFN up/gate, FFN down)
LINEAR_OPERATIONS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


def kernel_tp_efficiency(
    vidur_mlp: pd.DataFrame, tokens: tuple[int, ...] = (1, 16, 64, 256, 1024)
) -> pd.DataFrame:
    """Per GPU, model, TP degree and token count: one layer's measured linear-layer time (the median over
    `LINEAR_OPERATIONS`' ``time_ms_median``, summed, ``data/vidur-mlp.csv``) and ``t(TP 1) / (TP t(TP))``, the
    share of TP 1's per-GPU efficiency a rank keeps when its GEMMs are 1/TP as wide (1: TP divides the time)."""
    missing = [c for c in ("gpu", "model", "num_tensor_parallel_workers", "operation", "num_tokens",
                           "time_ms_median") if c not in vidur_mlp.columns]  # fmt: skip
    if missing:
        raise DataError(f"kernel_tp_efficiency: the table lacks column(s) {missing}")
    v = vidur_mlp[vidur_mlp["operation"].isin(LINEAR_OPERATIONS) & vidur_mlp["num_tokens"].isin(tokens)]
    keys = ["gpu", "model", "num_tensor_parallel_workers", "num_tokens"]
    t = (
        v.groupby([*keys, "operation"], sort=True)["time_ms_median"]
        .median()
        .groupby(keys)
        .sum()
        .reset_index()
    )
    t = t.rename(columns={"num_tensor_parallel_workers": "tensor_parallel", "time_ms_median": "layer_ms"})
    one = t[t["tensor_parallel"] == 1].set_index(["gpu", "model", "num_tokens"])["layer_ms"]
    t = t[t.set_index(["gpu", "model", "num_tokens"]).index.isin(one.index)].copy()
    base = one.reindex(pd.MultiIndex.from_frame(t[["gpu", "model", "num_tokens"]])).to_numpy()
    t["efficiency_vs_tp1"] = base / (t["tensor_parallel"] * t["layer_ms"])
    return t.reset_index(drop=True)


#: fewest TP degrees of one curve a split into a TP-invariant and a 1/TP part is fitted from
MIN_TP_DEGREES = 3
SPLIT_COLUMNS = ("gpu", "model", "input_len", "output_len", "tp_degrees", "fixed_ms_per_step", "split_ms_per_step",
                 "fixed_share_tp1")  # fmt: skip


def tp_split(rates: pd.DataFrame, min_degrees: int = MIN_TP_DEGREES) -> pd.DataFrame:
    """Per GPU, model and lengths measured at `min_degrees` TP degrees or more: the least-squares split of the time
    one more sequence costs (`per_sequence_rates`' slope) into ``a + b / TP``, per decode step (divided by ``OL``,
    ms): ``a`` the part no TP degree divides (host work per sequence, work every rank repeats), ``b / TP`` the part
    it does; ``fixed_share_tp1 = a / (a + b)``."""
    rows = []
    for (gpu, model, il, ol), g in rates.groupby(["gpu", "model", "input_len", "output_len"], sort=True):
        if g["tensor_parallel"].nunique() < min_degrees:
            continue
        x = np.c_[np.ones(len(g)), 1.0 / g["tensor_parallel"].to_numpy(float)]
        (a, b), *_ = np.linalg.lstsq(x, g["slope_s_per_seq"].to_numpy(float), rcond=None)
        per_step = 1e3 / float(ol)
        degrees = ",".join(str(int(t)) for t in sorted(g["tensor_parallel"].unique()))
        rows.append((gpu, model, il, ol, degrees, a * per_step, b * per_step, a / (a + b)))
    return pd.DataFrame(rows, columns=list(SPLIT_COLUMNS))
