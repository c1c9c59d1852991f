"""Synthetic tables generated from a model itself: for tests only, never presented as measurements."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

TRUE_PARAMS = {"eta_c": 0.45, "t_fixed": 0.2, "eta_m": 0.6, "B0": 3.0, "alpha": 2e-5, "gamma": 5e-7}
#: parameters of the recommended `slim` for synthetic tables (t_layer, t_act 0: no per-layer overhead, no
#: width-dependent per-sequence work)
SLIM_TRUE_PARAMS = {"eta_c": 0.4, "t_fixed": 0.1, "eta_attn": 0.5, "eta_w": 0.7, "alpha": 3e-5, "t_step": 2e-3,
                    "t_layer": 0.0, "t_act": 0.0}  # fmt: skip


def grid(models=("opt-125m", "opt-1.3b", "opt-6.7b"), gpu="h100-sxm-80gb", batch=(1, 4, 16, 64, 256),
         input_len=(128, 512), output_len=(64, 256)) -> pd.DataFrame:  # fmt: skip
    rows = list(itertools.product(models, batch, input_len, output_len))
    df = pd.DataFrame(rows, columns=["model", "batch_size", "input_len", "output_len"])
    df.insert(1, "gpu", gpu)
    return df


def synthesize(model, df: pd.DataFrame, noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Add `throughput_tok_s` and `e2e_s` predicted by `model`, with optional multiplicative Gaussian noise."""
    pred = model.predict(df)
    out = df.copy()
    rng = np.random.default_rng(seed)
    factor = 1.0 + noise * rng.standard_normal(len(df)) if noise else 1.0
    out["throughput_tok_s"] = pred["pred_throughput_tok_s"].to_numpy() * factor
    out["e2e_s"] = (df["batch_size"] * (df["input_len"] + df["output_len"])).to_numpy() / out[
        "throughput_tok_s"
    ]
    return out
