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

The prefill (`gdn_prefill_points`, `gdn_prefill_check`): vLLM's chunked recurrence and causal convolution over a
batch of prompts (`data/aic-gdn-prefill.csv`) against `slimlib.model.equations.linear_prefill_time`, whose three
rates per GPU (`gdn_prefill_rates`) the registry holds; each head shape is scored on rates read from the other
shapes' rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.errors import DataError
from slimlib.experiments.outputs.uncertainty import N_BOOT, ape, bootstrap_mean_ci
from slimlib.model import equations as eq
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


def conv_channels(t: pd.DataFrame) -> pd.Series:
    """Channels of the causal convolution of each row of `t`: ``2 H_k d_k + H_v d_v`` (queries, keys and values;
    `slimlib.registry.architectures.Architecture.linear_conv_channels` of a model)."""
    return 2 * t["key_heads"] * t["key_head_dim"] + t["value_heads"] * t["value_head_dim"]


def decode_state_bytes(t: pd.DataFrame, recurrent: str = RECURRENT, table: str = "aic-gdn") -> pd.Series:
    """Bytes each decode kernel of `t` (rows of `table`: aic-gdn, aic-kda) moves: the `recurrent` kernel the state
    ``2 B H_v d_k d_v`` x `STATE_BYTES` (read and written), the convolution update its state
    ``2 B (2 H_k d_k + H_v d_v) (K - 1)`` x `CONV_BYTES`."""
    b = t["batch_size"].astype(float)
    state = 2.0 * b * t["value_heads"] * t["key_head_dim"] * t["value_head_dim"] * STATE_BYTES
    channels = conv_channels(t)
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


#: the Gated DeltaNet prefill kernels (`data/aic-gdn-prefill.csv`): the chunked recurrence and the convolution
CHUNK = "chunk_gated_delta_rule_flashinfer"
CONV_PREFILL = "causal_conv1d_fn"
#: rows each prefill rate is read from: the recurrence with the device mostly idle (batch x value heads <=
#: `SERIAL_PAIRS`) or full (>= `FULL_PAIRS`), prompts of `RATE_MIN_LEN`+ tokens; the convolution over steps of
#: `CONV_MIN_TOKENS`+ tokens
SERIAL_PAIRS = 64
FULL_PAIRS = 1024
RATE_MIN_LEN = 1024
CONV_MIN_TOKENS = 65_536
#: prefill points scored: prompts of `PREFILL_MIN_LEN`+ tokens in steps of `PREFILL_MIN_TOKENS`+ tokens (shorter
#: ones sit on the kernels' launch floor, which the model's prefill does not carry)
PREFILL_MIN_LEN = 256
PREFILL_MIN_TOKENS = 1024


def gdn_prefill_points(t: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (GPU, model shape, batch, prompt length) of `t` (default ``aic-gdn-prefill``) with both prefill
    kernels: their latencies (``chunk_ms``, ``conv_ms``, summed in ``latency_ms``), the recurrence's FLOPs
    (`slimlib.model.equations.delta_rule_prefill_flops` x B IL H_v) and the convolution's bytes (its ``2 H_k d_k +
    H_v d_v`` channels read and written, `CONV_BYTES` each, per token); role 'score' where `PREFILL_MIN_LEN` and
    `PREFILL_MIN_TOKENS` hold, else 'floor'."""
    df = load("aic-gdn-prefill") if t is None else t
    if len(df) == 0:
        raise DataError("aic-gdn-prefill: no rows")
    unknown = ~df["kernel_source"].isin([CHUNK, CONV_PREFILL])
    if unknown.any():
        raise DataError(f"aic-gdn-prefill: row {df.index[unknown][0]}: kernel {df.loc[unknown, 'kernel_source'].iloc[0]!r}"
                        f" is neither {CHUNK} nor {CONV_PREFILL}")  # fmt: skip
    keys = ["gpu", "model", "hidden_size", "key_heads", "value_heads", "key_head_dim", "value_head_dim",
            "batch_size", "input_len"]  # fmt: skip
    chunk = df[df["kernel_source"] == CHUNK].set_index(keys)["latency_ms"].rename("chunk_ms")
    conv = df[df["kernel_source"] == CONV_PREFILL]
    conv = conv.assign(conv_bytes_per_token=2.0 * conv_channels(conv) * CONV_BYTES).set_index(keys)
    pts = pd.concat([chunk, conv["latency_ms"].rename("conv_ms"), conv["conv_bytes_per_token"]], axis=1,
                    join="inner").reset_index()  # fmt: skip
    pts["latency_ms"] = pts["chunk_ms"] + pts["conv_ms"]
    pts["flops_per_token"] = pts["value_heads"] * eq.delta_rule_prefill_flops(pts["key_head_dim"],
                                                                              pts["value_head_dim"])  # fmt: skip
    pts["tokens"] = pts["batch_size"] * pts["input_len"]
    pts["pairs"] = pts["batch_size"] * pts["value_heads"]
    scored = (pts["input_len"] >= PREFILL_MIN_LEN) & (pts["tokens"] >= PREFILL_MIN_TOKENS)
    pts["role"] = np.where(scored, "score", "floor")
    pts["shape"] = "v" + pts["value_heads"].astype(str) + "/k" + pts["key_heads"].astype(str)
    return pts.sort_values(keys, kind="mergesort").reset_index(drop=True)


def gdn_prefill_rates(points: pd.DataFrame) -> pd.DataFrame:
    """Per GPU of `points` (`gdn_prefill_points`), the three rates the model's linear-attention prefill reads
    (`slimlib.model.equations.linear_prefill_time`): seconds per prompt token of one layer's recurrence on a mostly
    idle device (``token_s``), FLOP/s of the recurrence on a full one (``flops_s``) and bytes/s of the convolution
    (``conv_bw``), each the median over its rows (module constants), with their efficiencies against the
    registry's bf16 peak and bandwidth."""
    rows = []
    for gpu, g in points.groupby("gpu", sort=True):
        serial = g[(g["pairs"] <= SERIAL_PAIRS) & (g["input_len"] >= RATE_MIN_LEN)]
        full = g[(g["pairs"] >= FULL_PAIRS) & (g["input_len"] >= RATE_MIN_LEN)]
        conv = g[g["tokens"] >= CONV_MIN_TOKENS]
        if serial.empty or full.empty or conv.empty:
            raise DataError(
                f"aic-gdn-prefill: GPU {gpu} lacks the rows one of its prefill rates is read from"
            )
        hw = get_gpu(str(gpu))
        flops_s = float(np.median(full["tokens"] * full["flops_per_token"] / (1e-3 * full["chunk_ms"])))
        conv_bw = float(np.median(conv["tokens"] * conv["conv_bytes_per_token"] / (1e-3 * conv["conv_ms"])))
        rows.append({"gpu": gpu, "token_s": float(np.median(1e-3 * serial["chunk_ms"] / serial["input_len"])),
                     "flops_s": flops_s, "flops_eff": flops_s / hw.peak_flops, "conv_bw": conv_bw,
                     "conv_eff": conv_bw / hw.mem_bw, "n_serial": len(serial), "n_full": len(full),
                     "n_conv": len(conv)})  # fmt: skip
    return pd.DataFrame(rows)


def gdn_prefill_modelled_ms(points: pd.DataFrame, rates: pd.DataFrame) -> pd.Series:
    """`slimlib.model.equations.linear_prefill_time` of one layer at each point of `points`, with its GPU's
    `rates` (`gdn_prefill_rates`), ms."""
    missing = sorted(set(points["gpu"]) - set(rates["gpu"]))
    if missing:
        raise DataError(
            f"aic-gdn-prefill: no prefill rates for GPU {missing[0]}; read them from its rows first"
        )
    r = rates.set_index("gpu").loc[points["gpu"]].reset_index(drop=True)
    t = eq.linear_prefill_time(points["batch_size"], points["input_len"], 1.0, points["flops_per_token"],
                               points["conv_bytes_per_token"], r["token_s"], r["flops_s"], r["conv_bw"])  # fmt: skip
    return pd.Series(1e3 * np.asarray(t), index=points.index)


def gdn_prefill_check(points: pd.DataFrame, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per GPU and overall, over the scored points: the modelled prefill time against the measured sum of both
    kernels, each head shape scored with rates read from the other shapes' rows (held out; several models share a
    shape, and the kernels' time depends on the shape alone), and with the
    GPU's rates from every row (the registry's): MAPE with its bootstrap 95% interval, the held-out ratio's median
    and 10th-90th percentiles, and the rates (ns per token, TFLOP/s, TB/s) with their efficiencies."""
    parts = []
    for shape in sorted(points["shape"].unique()):
        held = points[points["shape"] == shape]
        parts.append(held.assign(held_out_ms=gdn_prefill_modelled_ms(held, gdn_prefill_rates(
            points[points["shape"] != shape]))))  # fmt: skip
    rates = gdn_prefill_rates(points)
    pts = pd.concat(parts).sort_index()
    pts["all_rows_ms"] = gdn_prefill_modelled_ms(pts, rates)
    scored = pts[pts["role"] == "score"]
    rows = []
    for gpu, g in [*scored.groupby("gpu", sort=True), ("all", scored)]:
        out: dict[str, object] = {"gpu": gpu, "n_scored": len(g), "shapes": g["shape"].nunique()}
        for col, name in (("held_out_ms", "held_out"), ("all_rows_ms", "all_rows")):
            mean, lo, hi = bootstrap_mean_ci(np.asarray(ape(g["latency_ms"], g[col])), n_boot=n_boot,
                                             label=f"gdn prefill {gpu} {name}")  # fmt: skip
            out |= {f"{name}_mape_pct": mean, f"{name}_mape_lo_pct": lo, f"{name}_mape_hi_pct": hi}
        r = g["held_out_ms"] / g["latency_ms"]
        out |= {"ratio_median": r.median(), "ratio_p10": r.quantile(0.1), "ratio_p90": r.quantile(0.9)}
        if gpu != "all":
            q = rates.set_index("gpu").loc[gpu]
            out |= {"token_ns": 1e9 * q["token_s"], "tflops": q["flops_s"] / 1e12, "flops_eff": q["flops_eff"],
                    "conv_tb_s": q["conv_bw"] / 1e12, "conv_eff": q["conv_eff"]}  # fmt: skip
        rows.append(out)
    return pd.DataFrame(rows)
