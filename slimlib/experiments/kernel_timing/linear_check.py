"""The linear-attention decode term against measured Gated DeltaNet kernels: vLLM's on NVIDIA GPUs (`data/aic-gdn.csv`)
and ROCm aiter's on an MI355X-class GPU (`data/aiter-gdn.csv`; the recurrent kernel only, with a bf16 or an fp32
state), notebook 09, beyond the paper.

The model prices a hybrid's linear-attention decode as traffic (`slimlib.model.terms.recommended`,
`DECODE_ATTENTION`): each sequence's recurrent state, ``H_v`` states of ``d_k x d_v`` elements of `STATE_BYTES`, is
read and written at every step, and the convolution's last ``K - 1`` inputs over ``2 H_k d_k + H_v d_v`` channels
(bf16) too, at the device's decode-attention bandwidth efficiency (registry ``decode_attention_eff``, else the
measured prior `slimlib.model.priors.ATTENTION_BANDWIDTH`). Nothing is fitted here: the term's time for both kernels
of a step is set against their summed measured latency per (GPU, head shape, batch), scored at batches >=
`MIN_BATCH` (below, a launch floor the model's per-step overheads carry dominates). The state's 4-byte elements
are the Qwen3.5 configs' ``mamba_ssm_dtype`` (float32); the table does not name the collector's dtype, but 2-byte
states would put the measured traffic far above the peak bandwidth at every scored batch.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.errors import DataError
from slimlib.experiments.outputs.uncertainty import N_BOOT, ape, bootstrap_mean_ci
from slimlib.model.priors import ATTENTION_BANDWIDTH
from slimlib.registry.config_reader import TORCH_DTYPE_BYTES
from slimlib.registry.gpus import get_gpu

#: bytes of one recurrent-state element (``mamba_ssm_dtype`` float32) and of one convolution-state element (bf16)
STATE_BYTES = 4.0
CONV_BYTES = 2.0
RECURRENT = "fused_recurrent_gated_delta_rule_packed_decode"
CONV = "causal_conv1d_update"
#: the two recurrent Kimi Delta Attention decode kernels vLLM has (each a path with the convolution update)
KDA_RECURRENT = ("fused_kda_decode", "fused_recurrent_kda_packed_decode")
#: smallest batch scored (smaller ones sit on the kernels' launch floor)
MIN_BATCH = 128


def decode_state_bytes(t: pd.DataFrame, recurrent: str = RECURRENT, table: str = "aic-gdn") -> pd.Series:
    """Bytes each decode kernel of `t` (rows of `table`: aic-gdn, aic-kda) moves: the `recurrent` kernel the state
    ``2 B H_v d_k d_v`` x `STATE_BYTES` (read and written), the convolution update its state
    ``2 B (2 H_k d_k + H_v d_v) (K - 1)`` x `CONV_BYTES`."""
    b = t["batch_size"].astype(float)
    state = 2.0 * b * t["value_heads"] * t["key_head_dim"] * t["value_head_dim"] * STATE_BYTES
    channels = 2 * t["key_heads"] * t["key_head_dim"] + t["value_heads"] * t["value_head_dim"]
    conv = 2.0 * b * channels * (t["conv_kernel"] - 1) * CONV_BYTES
    out = pd.Series(np.where(t["kernel_source"] == recurrent, state, conv), index=t.index, dtype=float)
    unknown = ~t["kernel_source"].isin([recurrent, CONV])
    if unknown.any():
        raise DataError(f"{table}: row {t.index[unknown][0]}: kernel {t.loc[unknown, 'kernel_source'].iloc[0]!r} "
                        f"is neither {recurrent} nor {CONV}")  # fmt: skip
    return out


def device_efficiency(gpu: str) -> float:
    """The decode-attention bandwidth efficiency the model uses on `gpu`: the registry's, else the prior."""
    eff = get_gpu(gpu).decode_attention_eff
    return float(eff) if eff is not None else ATTENTION_BANDWIDTH.median


def gdn_points(
    gdn: pd.DataFrame | None = None,
    *,
    min_batch: int = MIN_BATCH,
    recurrent: str = RECURRENT,
    table: str = "aic-gdn",
) -> pd.DataFrame:
    """One row per (GPU, model shape, batch): both decode kernels' bytes (`decode_state_bytes`) and summed
    measured latency, the term's time (bytes over the device's efficiency x peak bandwidth), their ratio and the
    error; role 'score' at batches >= `min_batch`, else 'floor'."""
    df = load(table) if gdn is None else gdn
    if len(df) == 0:
        raise DataError(f"{table}: no rows")
    df = df.assign(state_bytes=decode_state_bytes(df, recurrent, table))
    keys = ["gpu", "model", "hidden_size", "key_heads", "value_heads", "key_head_dim", "value_head_dim",
            "batch_size"]  # fmt: skip
    g = df.groupby(keys, sort=True)
    pts = g[["state_bytes", "latency_ms"]].sum().reset_index()
    pts["kernels"] = g.size().to_numpy()
    pts = pts[pts["kernels"] == 2].drop(columns="kernels")  # a shape whose kernel failed has no pair
    pts = _score(pts, min_batch)
    pts["shape"] = pts["shape"] + " D" + pts["hidden_size"].astype(str)
    return pts


def kda_points(kda: pd.DataFrame | None = None, *, min_batch: int = MIN_BATCH) -> pd.DataFrame:
    """`gdn_points` for Kimi Delta Attention (`data/aic-kda.csv`), once per recurrent decode kernel of
    `KDA_RECURRENT` with the convolution update (column ``path``): its state is a Gated DeltaNet's, per-channel
    gates aside, so the same traffic term prices it."""
    df = load("aic-kda") if kda is None else kda
    parts = []
    for path in KDA_RECURRENT:
        rows = df[df["kernel_source"].isin([path, CONV])]
        parts.append(gdn_points(rows, min_batch=min_batch, recurrent=path, table="aic-kda").assign(path=path))
    return pd.concat(parts, ignore_index=True)


def _score(pts: pd.DataFrame, min_batch: int) -> pd.DataFrame:
    eff = pts["gpu"].map(device_efficiency).astype(float)
    bw = pts["gpu"].map(lambda name: get_gpu(str(name)).mem_bw).astype(float)
    pts["efficiency"] = eff
    pts["modelled_ms"] = 1e3 * pts["state_bytes"] / (eff * bw)
    pts["ratio"] = pts["modelled_ms"] / pts["latency_ms"]
    pts["ape_pct"] = ape(pts["latency_ms"], pts["modelled_ms"])
    pts["role"] = np.where(pts["batch_size"] >= min_batch, "score", "floor")
    pts["shape"] = "v" + pts["value_heads"].astype(str) + "/k" + pts["key_heads"].astype(str)
    return pts.reset_index(drop=True)


def aiter_gdn_points(gdn: pd.DataFrame | None = None, *, min_batch: int = MIN_BATCH) -> pd.DataFrame:
    """`gdn_points` for ROCm aiter's recurrent decode kernel (`data/aiter-gdn.csv`): its state ``2 B H_v d_k d_v``
    elements of the row's ``state_dtype``, read and written (the convolution update is not in the table)."""
    df = load("aiter-gdn") if gdn is None else gdn
    if len(df) == 0:
        raise DataError("aiter-gdn: no rows")
    unknown = ~df["state_dtype"].isin(list(TORCH_DTYPE_BYTES))
    if unknown.any():
        raise DataError(f"aiter-gdn: row {df.index[unknown][0]}: state dtype {df.loc[unknown, 'state_dtype'].iloc[0]!r}"
                        f" is not one of {sorted(TORCH_DTYPE_BYTES)}")  # fmt: skip
    b = df["batch_size"].astype(float)
    elements = 2.0 * b * df["value_heads"] * df["key_head_dim"] * df["value_head_dim"]
    pts = df.assign(state_bytes=elements * df["state_dtype"].map(TORCH_DTYPE_BYTES).astype(float))
    return _score(pts, min_batch)


def gdn_check(points: pd.DataFrame, *, by: tuple[str, ...] = ("gpu",), n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per group of `by` and overall, over the scored rows: the term's efficiency, rows, MAPE with its bootstrap 95%
    interval, and the predicted/measured ratio's median and 10th-90th percentiles."""
    rows = []
    scored = points[points["role"] == "score"]
    keys = list(by)
    everything = (("all",) * len(keys), scored)
    for key, g in [*scored.groupby(keys, sort=True), everything]:
        key = key if isinstance(key, tuple) else (key,)
        label = dict(zip(keys, key, strict=True))
        mean, lo, hi = bootstrap_mean_ci(g["ape_pct"].to_numpy(), n_boot=n_boot,
                                         label="gdn decode " + " ".join(map(str, key)))  # fmt: skip
        r = g["ratio"]
        rows.append({**label, "efficiency": float(g["efficiency"].iloc[0]) if key[0] != "all" else np.nan,
                     "n_scored": len(g), "shapes": g["shape"].nunique(), "mape_pct": mean, "mape_lo_pct": lo,
                     "mape_hi_pct": hi, "ratio_median": r.median(), "ratio_p10": r.quantile(0.1),
                     "ratio_p90": r.quantile(0.9)})  # fmt: skip
    return pd.DataFrame(rows)
