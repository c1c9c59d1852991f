"""TODO(merge): serving features. The one place that fills the per-GPU feature keys the terms read from today's
features, until `slimlib.model.features.model_features` provides them (the resolved serving configuration). Delete
this module and its one call in `slimlib.model.calibrated` at the merge.

Keys (per GPU of the row's tensor-parallel group), and what they are filled with here (exact for the dense,
full-attention models today's features describe):

* ``kv_token_capacity``: logged ``gpu_blocks x block_size`` (block size 16 where absent), else the default KV pool
  (`slimlib.model.memory.kv_pool_bytes` at vLLM's 0.9 utilization) over the KV bytes per token;
* ``max_num_batched_tokens``: 512 (vLLM's chunked-prefill budget) where ``chunked_prefill`` is true, else infinite;
* ``attn_bytes_per_context_token``: ``kv_bytes_per_token``; ``attn_bytes_per_window_token``: 0;
  ``sliding_window``: 0; ``latent_attention``: 0;
* ``expert_parallel``: 1; ``n_moe_layers``: all layers of a mixture of experts, 0 otherwise;
* ``linear_flops_per_token``: the per-GPU layers times Eq. 8's bracket without attention
  (`slimlib.model.equations.dense_flops_per_token`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.model import equations as eq
from slimlib.model.features import Features
from slimlib.model.memory import DEFAULT_BLOCK_SIZE, kv_pool_bytes
from slimlib.registry.gpus import GPU

#: vLLM's chunked-prefill token budget per step (its V0 default ``max_num_batched_tokens`` with chunked prefill)
CHUNKED_PREFILL_BUDGET = 512.0


def _column(df: pd.DataFrame, name: str) -> np.ndarray:
    if name not in df.columns:
        return np.full(len(df), np.nan)
    return df[name].to_numpy(dtype=float, na_value=np.nan)


def fill_serving_features(df: pd.DataFrame, f: Features, hw: GPU) -> Features:
    """`f` with the serving keys it lacks filled from today's features and `df` (module docstring)."""
    out = dict(f)
    n = len(f["batch_size"])
    if "kv_token_capacity" not in out:
        est = np.maximum(kv_pool_bytes(hw, f["weight_bytes_total"]) / f["kv_bytes_per_token"], 0.0)
        blocks, bsize = _column(df, "gpu_blocks"), _column(df, "block_size")
        bsize = np.where(np.isfinite(bsize), bsize, float(DEFAULT_BLOCK_SIZE))
        out["kv_token_capacity"] = np.where(np.isfinite(blocks), blocks * bsize, est)
    if "max_num_batched_tokens" not in out:
        chunked = (
            df["chunked_prefill"].fillna(False).to_numpy(dtype=bool)
            if "chunked_prefill" in df.columns
            else np.zeros(n, dtype=bool)
        )
        out["max_num_batched_tokens"] = np.where(chunked, CHUNKED_PREFILL_BUDGET, np.inf)
    defaults = {
        "attn_bytes_per_context_token": f["kv_bytes_per_token"],
        "attn_bytes_per_window_token": np.zeros(n),
        "sliding_window": np.zeros(n),
        "latent_attention": np.zeros(n),
        "expert_parallel": np.ones(n),
        "n_moe_layers": np.where(f["n_experts"] > 1, f.get("n_layers_total", f["n_layers"]), 0.0),
        "linear_flops_per_token": f["n_layers"]
        * eq.dense_flops_per_token(f["hidden_size"], f["d_kv"], f["ffn_size"], f["n_ffn_matrices"]),
    }
    for k, v in defaults.items():
        out.setdefault(k, np.asarray(v, dtype=float))
    return out
