"""Characterization computations behind paper Figs. 1-6 and Table I, on the public measurement tables.

Throughput plateau (knee, KV-cache exhaustion), active context per run (Eq. 3), prefill/decode split, the decode-time
breakdown of a decoder layer from Vidur operator timings, and analytic FLOPs/bytes of decode attention for the roofline
(arithmetic in `slimlib.model.roofline`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.experiments.characterization.knees import DEFAULT_KNEE_THRESHOLD, knee_batch, marginal_gain
from slimlib.model.equations import active_context, decode_attention_bytes, decode_attention_flops
from slimlib.model.roofline import achieved_rates, arithmetic_intensity, ridge_point
from slimlib.model.serving import kv_heads_per_rank

__all__ = [
    "DEFAULT_KNEE_THRESHOLD",
    "marginal_gain",
    "knee_batch",
    "kv_exhaustion_batch",
    "plateau_table",
    "add_request_latency",
    "run_active_context",
    "phase_split",
    "VIDUR_GEMM_OPS",
    "VIDUR_OTHER_OPS",
    "vidur_decode_breakdown",
    "attention_roofline_table",
    "OFFLINE_SWEEP_FAMILIES",
    "offline_batch_sweeps",
]


def _require(df: pd.DataFrame, columns, what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f"{what}: missing column(s) {missing}; got {list(df.columns)}")


def kv_exhaustion_batch(runs: pd.DataFrame, usage_threshold: float = 0.99) -> float:
    """Smallest batch size of `runs` (one curve) where the KV cache runs out: vLLM preempted requests or the
    maximum KV-cache usage reached `usage_threshold`; NaN if none did."""
    _require(runs, ["batch_size", "max_kv_usage_frac", "num_preemptions"], "kv_exhaustion_batch")
    full = (runs["num_preemptions"].fillna(0).astype(float) > 0) | (
        runs["max_kv_usage_frac"].astype(float) >= usage_threshold
    )
    hits = runs.loc[full.to_numpy(), "batch_size"].astype(float)
    return float(hits.min()) if len(hits) else float("nan")


def plateau_table(
    online: pd.DataFrame, by=("model",), threshold: float = DEFAULT_KNEE_THRESHOLD
) -> pd.DataFrame:
    """Per curve (groups of `by`): knee batch, throughput there and its share of the curve's maximum, KV-exhaustion
    batch, and the ITL growth from the smallest batch to the knee. Rows sorted by `by`."""
    by = list(by)
    _require(online, [*by, "batch_size", "throughput_tok_s", "mean_itl_ms"], "plateau_table")
    rows = []
    for key, g in online.groupby(by, sort=True):
        g = g.sort_values("batch_size")
        b = g["batch_size"].to_numpy(dtype=float)
        t = g["throughput_tok_s"].to_numpy(dtype=float)
        knee = knee_batch(b, t, threshold)
        at = g[g["batch_size"].astype(float) == knee]
        knee_t = float(at["throughput_tok_s"].iloc[0]) if len(at) else float("nan")
        knee_itl = float(at["mean_itl_ms"].iloc[0]) if len(at) else float("nan")
        row = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        row.update(
            n_points=len(g),
            knee_batch=knee,
            knee_throughput_tok_s=knee_t,
            max_throughput_tok_s=float(t.max()),
            knee_share_of_max=knee_t / float(t.max()),
            itl_growth_to_knee=knee_itl / float(g["mean_itl_ms"].iloc[0]),
            kv_full_batch=kv_exhaustion_batch(g) if "max_kv_usage_frac" in g else float("nan"),
        )
        rows.append(row)
    return pd.DataFrame(rows)


def add_request_latency(online: pd.DataFrame) -> pd.DataFrame:
    """Copy of `online` with `decode_latency_s` = mean TPOT x (mean output tokens - 1), the per-request generation
    time after the first token, and `e2e_request_s` = mean TTFT + `decode_latency_s` (includes queueing)."""
    _require(online, ["mean_tpot_ms", "mean_ttft_ms", "mean_output_len_tok"], "add_request_latency")
    out = online.copy()
    out["decode_latency_s"] = (
        out["mean_tpot_ms"].astype(float) * (out["mean_output_len_tok"].astype(float) - 1) / 1e3
    )
    out["e2e_request_s"] = out["mean_ttft_ms"].astype(float) / 1e3 + out["decode_latency_s"]
    return out


def run_active_context(runs: pd.DataFrame, concurrency: str = "batch_size") -> pd.DataFrame:
    """Copy of `runs` with the active context of Eq. 3 over the decode phase of each run.

    `active_ctx_mean` = C (IL + OL/2) (tokens held on average while requests generate), `active_ctx_peak`
    = C (IL + OL), where C is the column `concurrency` (`batch_size` for offline runs, `mean_running_batch` for
    online runs, whose running batch falls short of the cap once the KV cache is full)."""
    _require(runs, [concurrency, "input_len", "output_len"], "run_active_context")
    out = runs.copy()
    c = out[concurrency].astype(float).to_numpy()
    il = out["input_len"].astype(float).to_numpy()
    ol = out["output_len"].astype(float).to_numpy()
    out["active_ctx_mean"] = active_context(c, il, ol / 2.0)
    out["active_ctx_peak"] = active_context(c, il, ol)
    return out


def phase_split(offline: pd.DataFrame) -> pd.DataFrame:
    """Copy of the offline runs with `prefill_share`, `decode_share` (of prefill + decode time, summing to 1) and
    `decode_step_ms` (decode time per engine decode step)."""
    _require(offline, ["prefill_s", "decode_s", "n_decode_steps"], "phase_split")
    out = offline.copy()
    total = out["prefill_s"].astype(float) + out["decode_s"].astype(float)
    if np.any(~(total.to_numpy() > 0)):
        raise DataError("phase_split: prefill_s + decode_s must be positive in every row")
    out["prefill_share"] = out["prefill_s"].astype(float) / total
    out["decode_share"] = out["decode_s"].astype(float) / total
    out["decode_step_ms"] = out["decode_s"].astype(float) * 1e3 / out["n_decode_steps"].astype(float)
    return out


#: Vidur operations that are dense GEMMs (QKV and output projections, FFN matrices).
VIDUR_GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
#: Other per-layer operations (norms, rotary embedding, activation, residual add).
VIDUR_OTHER_OPS = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add")
_ATTN_OPS = ("attn_input_reshape", "attn_decode", "attn_output_reshape")


def _op_times(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Median over repeats of each operation's median time, one column per operation."""
    t = df.groupby([*keys, "operation"], sort=True)["time_ms_median"].median().unstack("operation")
    return t


def vidur_decode_breakdown(attention: pd.DataFrame, mlp: pd.DataFrame, batch_sizes, contexts) -> pd.DataFrame:
    """Per-layer decode-step time split into attention, dense GEMMs and the rest, from Vidur operator timings.

    `attention` and `mlp` must each hold one model shape on one GPU (filter them first). For each batch size B and
    KV context C (tokens per request): attention = decode attention kernel and its reshapes at (B, C); GEMMs and
    the rest = the `VIDUR_GEMM_OPS` / `VIDUR_OTHER_OPS` at `num_tokens` = B (one new token per request). The
    embedding (run once per step, not per layer) is left out. Shares `*_share` sum to 1 in every row."""
    _require(attention, ["operation", "batch_size", "kv_cache_size", "time_ms_median"], "vidur attention")
    _require(mlp, ["operation", "num_tokens", "time_ms_median"], "vidur mlp")
    for name, df, cols in (
        ("attention", attention, ["gpu", "n_embd", "num_tensor_parallel_workers"]),
        ("mlp", mlp, ["gpu", "n_embd", "num_tensor_parallel_workers"]),
    ):
        present = [c for c in cols if c in df.columns]
        if len(df[present].drop_duplicates()) > 1:
            raise DataError(
                f"vidur_decode_breakdown: {name} table mixes several GPUs/shapes; filter it first"
            )
    att = _op_times(attention[attention["operation"].isin(_ATTN_OPS)], ["batch_size", "kv_cache_size"])
    dense = _op_times(mlp[mlp["operation"].isin(VIDUR_GEMM_OPS + VIDUR_OTHER_OPS)], ["num_tokens"])
    rows = []
    for b in sorted(int(x) for x in batch_sizes):
        if b not in dense.index:
            raise DataError(f"vidur_decode_breakdown: Vidur MLP table has no num_tokens={b}")
        gemm = float(dense.loc[b, list(VIDUR_GEMM_OPS)].sum())
        other = float(dense.loc[b, [c for c in VIDUR_OTHER_OPS if c in dense.columns]].sum())
        for c in sorted(int(x) for x in contexts):
            if (b, c) not in att.index:
                raise DataError(
                    f"vidur_decode_breakdown: no attention timing at batch_size={b}, kv_cache_size={c}"
                )
            attn = float(att.loc[(b, c)].fillna(0.0).sum())
            total = attn + gemm + other
            rows.append(
                dict(
                    batch_size=b,
                    kv_cache_size=c,
                    attention_ms=attn,
                    gemm_ms=gemm,
                    other_ms=other,
                    total_ms=total,
                    attention_share=attn / total,
                    gemm_share=gemm / total,
                    other_share=other / total,
                )
            )
    return pd.DataFrame(rows)


def attention_roofline_table(
    attention: pd.DataFrame, gpu, batch_sizes, contexts, kv_bytes: int = 2
) -> pd.DataFrame:
    """Analytic FLOPs/bytes, arithmetic intensity and achieved FLOP/s and bandwidth of Vidur's decode attention
    kernel at each (batch size, KV context), per GPU (heads divided by the tensor-parallel degree).

    `gpu` is a `slimlib.registry.gpus.GPU`; `attention` one model shape on that GPU. Columns include `ai_flop_per_byte`,
    `achieved_tflop_s`, `achieved_bw_tb_s`, `bw_util` (fraction of the GPU's peak bandwidth), `flop_util`."""
    _require(
        attention,
        [
            "operation",
            "batch_size",
            "kv_cache_size",
            "time_ms_median",
            "n_q_head",
            "n_kv_head",
            "head_dim",
            "num_tensor_parallel_workers",
        ],
        "attention_roofline_table",
    )
    dec = attention[attention["operation"] == "attn_decode"]
    shape = dec[["n_q_head", "n_kv_head", "head_dim", "num_tensor_parallel_workers"]].drop_duplicates()
    if len(shape) != 1:
        raise DataError(
            f"attention_roofline_table: expected one attention shape, got {len(shape)}; filter first"
        )
    hq, hkv, hd, tp = (int(v) for v in shape.iloc[0])
    hq_gpu, hkv_gpu = hq // tp, kv_heads_per_rank(hkv, tp)
    times = dec.groupby(["batch_size", "kv_cache_size"], sort=True)["time_ms_median"].median()
    rows = []
    for b in sorted(int(x) for x in batch_sizes):
        for c in sorted(int(x) for x in contexts):
            if (b, c) not in times.index:
                raise DataError(f"attention_roofline_table: no attn_decode timing at batch_size={b}, kv={c}")
            t_s = float(times.loc[(b, c)]) / 1e3
            flops = float(decode_attention_flops(b, c, hq_gpu, hd))
            nbytes = float(decode_attention_bytes(b, c, hq_gpu, hkv_gpu, hd, kv_bytes))
            fl_s, bw = achieved_rates(flops, nbytes, t_s)
            rows.append(
                dict(
                    batch_size=b,
                    kv_cache_size=c,
                    active_context=b * c,
                    time_ms=t_s * 1e3,
                    gflop=flops / 1e9,
                    mbytes=nbytes / 1e6,
                    ai_flop_per_byte=float(arithmetic_intensity(flops, nbytes)),
                    achieved_tflop_s=float(fl_s) / 1e12,
                    achieved_bw_tb_s=float(bw) / 1e12,
                    bw_util=float(bw) / gpu.mem_bw,
                    flop_util=float(fl_s) / gpu.peak_flops,
                    ridge_flop_per_byte=float(ridge_point(gpu.peak_flops, gpu.mem_bw)),
                )
            )
    return pd.DataFrame(rows)


#: Offline families that sweep the batch size at fixed IL/OL with usable timings.
OFFLINE_SWEEP_FAMILIES = (
    "prefill_vs_decode/batch_evolution",
    "decode_kernels/batch_size_evolution",
    "decode_kernels/distinct_kernels",
)


def offline_batch_sweeps(offline: pd.DataFrame) -> pd.DataFrame:
    """One batch-size sweep per model from the offline runs: timing-valid, unpreempted runs of
    `OFFLINE_SWEEP_FAMILIES`; per model the family run without a profiler if there is one, else the family with the
    most batch sizes (ties: first in `OFFLINE_SWEEP_FAMILIES`). Sorted by model and batch size."""
    _require(
        offline, ["family", "model", "batch_size", "profiler", "timing_valid", "preempted"], "offline sweeps"
    )
    ok = offline[
        offline["family"].isin(OFFLINE_SWEEP_FAMILIES)
        & offline["timing_valid"].fillna(False).astype(bool)
        & ~offline["preempted"].fillna(False).astype(bool)
    ]
    parts = []
    for _model, g in ok.groupby("model", sort=True):
        fams = []
        for rank, fam in enumerate(OFFLINE_SWEEP_FAMILIES):
            f = g[g["family"] == fam]
            if len(f):
                fams.append(((f["profiler"] != "none").any(), -f["batch_size"].nunique(), rank, fam))
        best = sorted(fams)[0][3]
        parts.append(g[g["family"] == best])
    if not parts:
        raise DataError("offline_batch_sweeps: no timing-valid sweep runs in the offline table")
    return pd.concat(parts).sort_values(["model", "batch_size"], kind="stable").reset_index(drop=True)
