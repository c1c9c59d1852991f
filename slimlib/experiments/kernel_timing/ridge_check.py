"""Where the measured vLLM kernels turn compute-bound, and where rooflines at the model's priors do (beyond the paper).

On the committed kernel tables (NVIDIA AIConfigurator data, ``aic-*``), per GPU and dtype:

* GEMM (`gemm_turns`, `gemm_ridge_summary`): for each measured (n, k), the **measured turn** is where the two
  asymptotes of the latency vs M meet (the roofline's own definition of the ridge): the memory floor ``t0`` (median
  latency at M <= `FLOOR_MAX_M`, the weight read) and the compute slope ``s`` (median ``t / M`` over the
  `SLOPE_POINTS` largest M): ``M_meas = t0 / s``. The **term's ridge** is `slimlib.model.terms.rooflines.
  ridge_tokens` of the same GEMM (``k n b_w`` weight bytes, ``2 k n`` FLOPs per token) at the registry's peak for
  the dtype and the priors of ``eta_c`` and ``eta_w``: ``eta_c F_max b_w / (2 eta_w BW)``, the tokens per step
  where the dense GEMMs' roofline switches from its weight read to its FLOPs.
* MoE experts (`moe_turns`, one GPU: ``moe_tp = moe_ep = 1``, balanced routing): past the expert-touch knee
  every expert is read, so the measured turn is where the compute slope (median ``t / T`` over the
  `SLOPE_POINTS` largest token counts) meets the all-experts plateau (median latency over ``[4, 16] x`` the
  knee ``X / k``); the term's ridge is `ridge_tokens` of all experts' bytes and ``2 k 3 D F`` FLOPs per token at
  the priors of ``eta_e`` (measured here: `moe_compute_efficiency`) and ``eta_w``.
* MLA decode (`mla_turns`, ``aic-mla`` generation): the latent is read once for all heads, so the FLOPs per byte
  grow with the heads per GPU; at each (batch, context) of at least `MLA_MIN_TOKENS` tokens the measured turn is
  where the head slope (median ``t / H`` at H >= 64) meets the memory floor (median latency at H <= 4), in
  heads; the term's turn is where DeepSeek-V3's intensity (`slimlib.model.features.attention_intensity`, per
  head) reaches ``eta_ac F_max / (eta_attn BW)`` at the priors (bf16 peak: the fp8 KV is dequantized).
* decode attention (`attention_regimes`): the largest fraction of the peak FLOP/s any measured point reaches
  (``4 B (C + 1) H_q d_h`` FLOPs per layer) next to the term's arithmetic intensity (feature
  ``attn_flops_per_kv_byte``: ``2 H_q / (H_kv b_kv)``) and its ridge intensity ``eta_c F_max / (eta_attn BW)``:
  the term is memory-bound at every batch when its intensity is below the ridge, and so should the kernels be.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.data.aiconfigurator import (
    dense_gpu_architectures,
    gemm_grid_pairs,
    needed_gemm_shapes,
    rank_heads,
)
from slimlib.errors import SlimError
from slimlib.experiments.kernel_timing.moe_mla_terms import (
    EXPERT_MATRICES,
    expert_touch_knee,
    mla_decode_flops,
    moe_flops,
)
from slimlib.model.equations import FloatArray, decode_attention_flops
from slimlib.model.features import attention_intensity
from slimlib.model.params import ParamSpec
from slimlib.model.serving import serving_config
from slimlib.model.terms import specs as ps
from slimlib.model.terms.rooflines import ridge_tokens
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.registry.precision import kernel_peak, kernel_weight_bytes, kv_bytes_per_element

__all__ = [
    "gemm_turns",
    "gemm_ridge_summary",
    "moe_turns",
    "moe_compute_efficiency",
    "mla_turns",
    "mla_compute_efficiency",
    "attention_regimes",
]

#: GEMM rows at or below this M form the memory floor
FLOOR_MAX_M = 8
#: the largest M values whose ``t / M`` give the compute slope
SLOPE_POINTS = 3
#: MLA (batch, context) points with at least this many context tokens are scored
MLA_MIN_TOKENS = 2**17


def prior_pair(compute: ParamSpec, nbytes: ParamSpec) -> tuple[float, float]:
    """The prior medians of a roofline's (compute, bytes) efficiencies."""
    if compute.prior is None or nbytes.prior is None:
        raise SlimError(f"{compute.name} or {nbytes.name} has no prior")
    return compute.prior.median, nbytes.prior.median


#: the (compute, bytes) efficiencies of the dense GEMMs, the routed experts and the decode attention
LINEAR_EFFS, EXPERT_EFFS, ATTENTION_EFFS = (
    (ps.ETA_C, ps.ETA_W),
    (ps.ETA_E, ps.ETA_W),
    (ps.ETA_AC, ps.ETA_ATTN),
)


def gemm_turns(gemm: pd.DataFrame | None = None, tp_degrees: tuple[int, ...] | None = (1,)) -> pd.DataFrame:
    """Per (gpu, dtype, n, k) of ``aic-gemm``: the measured turn and the term's ridge, in tokens (module
    docstring), and their ratio ``term_ridge_m / measured_turn_m``; with `tp_degrees`, only the grid points that
    bracket the per-GPU shapes at those degrees of the models whose decode attention is measured (the table also
    holds those of TP 2-8, whose narrow GEMMs turn later: their latency floor is a larger share; None: all)."""
    g = load("aic-gemm") if gemm is None else gemm
    if tp_degrees is not None:
        g = g[_bracketing(g, tp_degrees)]
    rows = []
    for (gpu, dtype, n, k), grp in g.groupby(["gpu", "gemm_dtype", "n", "k"], sort=True):
        m = grp["m"].to_numpy(dtype=float)
        t = grp["latency_ms"].to_numpy(dtype=float) / 1e3
        order = np.argsort(m)
        m, t = m[order], t[order]
        floor = float(np.median(t[m <= FLOOR_MAX_M]))
        slope = float(np.median(t[-SLOPE_POINTS:] / m[-SLOPE_POINTS:]))
        hw = get_gpu(str(gpu))
        b_w = kernel_weight_bytes(str(dtype))
        term = float(
            ridge_tokens(
                float(k) * float(n) * b_w, 2.0 * float(k) * float(n), kernel_peak(hw, str(dtype)), hw.mem_bw,
                *prior_pair(*LINEAR_EFFS),
            )
        )  # fmt: skip
        rows.append({"gpu": hw.name, "dtype": str(dtype), "n": int(n), "k": int(k), "floor_ms": floor * 1e3,
                     "measured_turn_m": floor / slope, "term_ridge_m": term})  # fmt: skip
    out = pd.DataFrame(rows)
    out["ratio"] = out["term_ridge_m"] / out["measured_turn_m"]
    return out


def _bracketing(g: pd.DataFrame, tp_degrees: tuple[int, ...]) -> pd.Series:
    """Rows of the GEMM table `g` on the grid points bracketing the per-GPU shapes at `tp_degrees` of the models
    whose TP-1 decode attention is measured (`slimlib.data.aiconfigurator.needed_gemm_shapes`), per GPU and dtype."""
    dec = load("aic-decode-attention")
    measured = set(zip(dec["n_heads"], dec["n_kv_heads"], dec["head_dim"], strict=True))
    archs = [a for a in dense_gpu_architectures() if rank_heads(a) in measured]
    needed = needed_gemm_shapes(archs, tp_degrees)
    keep = pd.Series(False, index=g.index)
    for _, grp in g.groupby(["gpu", "gemm_dtype"], sort=False):
        pairs = gemm_grid_pairs(
            needed, sorted(int(v) for v in grp["n"].unique()), sorted(int(v) for v in grp["k"].unique())
        )
        keep[grp.index] = [(int(n), int(k)) in pairs for n, k in zip(grp["n"], grp["k"], strict=True)]
    return keep


def gemm_ridge_summary(turns: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (gpu, dtype): median measured turn over the (n, k) shapes, the term's ridge, and the ratio's median,
    minimum and maximum."""
    t = gemm_turns() if turns is None else turns
    return (
        t.groupby(["gpu", "dtype"], sort=True)
        .agg(
            n_shapes=("ratio", "size"),
            measured_turn_m=("measured_turn_m", "median"),
            term_ridge_m=("term_ridge_m", "median"),
            ratio_median=("ratio", "median"),
            ratio_min=("ratio", "min"),
            ratio_max=("ratio", "max"),
        )
        .reset_index()
    )


def moe_turns(moe: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (gpu, dtype, hidden, inter, top_k, experts) of ``aic-moe`` on one GPU with balanced routing: the
    measured turn and the term's ridge in tokens per step, and their ratio (module docstring)."""
    m = load("aic-moe") if moe is None else moe
    m = m[(m["moe_tp"] == 1) & (m["moe_ep"] == 1) & (m["distribution"] == "balanced")]
    keys = ["gpu", "moe_dtype", "hidden_size", "inter_size", "top_k", "n_experts"]
    rows = []
    for (gpu, dtype, hidden, inter, top_k, x), grp in m.groupby(keys, sort=True):
        tok = grp["num_tokens"].to_numpy(dtype=float)
        t = grp["latency_ms"].to_numpy(dtype=float) / 1e3
        order = np.argsort(tok)
        tok, t = tok[order], t[order]
        knee = float(expert_touch_knee(x, top_k))
        plateau = t[(tok >= 4 * knee) & (tok <= 16 * knee)]
        if not plateau.size:
            continue
        slope = float(np.median(t[-SLOPE_POINTS:] / tok[-SLOPE_POINTS:]))
        hw = get_gpu(str(gpu))
        all_bytes = (
            EXPERT_MATRICES * float(hidden) * float(inter) * float(x) * kernel_weight_bytes(str(dtype))
        )
        term = float(
            ridge_tokens(
                all_bytes, moe_flops(1.0, top_k, hidden, inter), kernel_peak(hw, str(dtype)), hw.mem_bw,
                *prior_pair(*EXPERT_EFFS),
            )
        )  # fmt: skip
        rows.append({"gpu": hw.name, "dtype": str(dtype), "hidden": int(hidden), "inter": int(inter),
                     "top_k": int(top_k), "n_experts": int(x), "measured_turn_tokens": float(np.median(plateau)) / slope,
                     "term_ridge_tokens": term})  # fmt: skip
    out = pd.DataFrame(rows)
    out["ratio"] = out["term_ridge_tokens"] / out["measured_turn_tokens"]
    return out


def moe_compute_efficiency(
    gpu: str = "h100-sxm-80gb",
    dtype: str = "bfloat16",
    min_tokens: int = 4096,
    moe: pd.DataFrame | None = None,
) -> FloatArray:
    """Expert FLOPs / (latency x peak) of every ``aic-moe`` point on one GPU with balanced routing at
    `min_tokens` tokens or more (`slimlib.model.priors.EXPERT_COMPUTE` is their summary)."""
    m = load("aic-moe") if moe is None else moe
    hw = get_gpu(gpu)
    keep = (m["moe_tp"] == 1) & (m["moe_ep"] == 1) & (m["distribution"] == "balanced") & (m["gpu"] == hw.name)
    m = m[keep & (m["moe_dtype"] == dtype) & (m["num_tokens"] >= min_tokens)]
    flops = moe_flops(m["num_tokens"], m["top_k"], m["hidden_size"], m["inter_size"])
    return np.asarray(
        flops / (m["latency_ms"].to_numpy(dtype=float) / 1e3) / kernel_peak(hw, dtype), dtype=float
    )


def mla_turns(mla: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (gpu, kv dtype) of the ``aic-mla`` generation rows: the median measured turn and the term's turn, in
    heads per GPU, and their ratio (module docstring)."""
    m = load("aic-mla") if mla is None else mla
    m = m[m["phase"] == "generation"]
    arch = get_architecture("deepseek-v3")
    rows = []
    for (gpu, kvd), grp in m.groupby(["gpu", "kv_cache_dtype"], sort=True):
        turns = []
        for _, x in grp.groupby(["batch_size", "context"]):
            h = x["n_heads"].to_numpy(dtype=float)
            t = x["latency_ms"].to_numpy(dtype=float)
            if x["batch_size"].iloc[0] * x["context"].iloc[0] < MLA_MIN_TOKENS or h.max() < 64 or h.min() > 4:
                continue
            turns.append(float(np.median(t[h <= 4]) / np.median(t[h >= 64] / h[h >= 64])))
        hw = get_gpu(str(gpu))
        s = serving_config(arch, None, kv_cache_dtype="auto" if kvd == "bfloat16" else str(kvd))
        per_head = attention_intensity(arch, s) / arch.n_heads
        eta_f, eta_b = prior_pair(*ATTENTION_EFFS)
        ridge = eta_f * hw.peak_flops / (eta_b * hw.mem_bw)
        rows.append({"gpu": hw.name, "kv_dtype": str(kvd), "n_points": len(turns),
                     "measured_turn_heads": float(np.median(turns)), "term_turn_heads": ridge / per_head})  # fmt: skip
    out = pd.DataFrame(rows)
    out["ratio"] = out["term_turn_heads"] / out["measured_turn_heads"]
    return out


def mla_compute_efficiency(
    gpu: str = "h100-sxm-80gb", heads: int = 128, min_tokens: int = 2**20, mla: pd.DataFrame | None = None
) -> FloatArray:
    """Absorbed-MLA FLOPs / (latency x bf16 peak) of the ``aic-mla`` generation rows of `gpu` with bf16 KV,
    `heads` heads and batch x context >= `min_tokens` (`slimlib.model.priors.DECODE_ATTENTION_COMPUTE`)."""
    m = load("aic-mla") if mla is None else mla
    hw = get_gpu(gpu)
    keep = (m["phase"] == "generation") & (m["gpu"] == hw.name) & (m["kv_cache_dtype"] == "bfloat16")
    m = m[keep & (m["n_heads"] == heads) & (m["batch_size"] * m["context"] >= min_tokens)]
    flops = mla_decode_flops(m["batch_size"], m["context"], m["n_heads"])
    return np.asarray(flops / (m["latency_ms"].to_numpy(dtype=float) / 1e3) / hw.peak_flops, dtype=float)


def attention_regimes(attn: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (gpu, kv dtype, query heads, KV heads) of ``aic-decode-attention``: the largest measured fraction of
    the bf16 peak FLOP/s, the term's intensity and its ridge intensity (module docstring)."""
    a = load("aic-decode-attention") if attn is None else attn
    eta_f, eta_b = prior_pair(*ATTENTION_EFFS)
    rows = []
    keys = ["gpu", "kv_cache_dtype", "n_heads", "n_kv_heads", "head_dim"]
    for (gpu, kvd, hq, hkv, d), grp in a.groupby(keys, sort=True):
        hw = get_gpu(str(gpu))
        flops = decode_attention_flops(grp["batch_size"], grp["context"] + 1, int(hq), int(d))
        achieved = flops / (grp["latency_ms"].to_numpy(dtype=float) / 1e3)
        b_kv = kv_bytes_per_element("auto" if kvd == "bfloat16" else str(kvd), 2.0)
        intensity = 2.0 * float(hq) / (float(hkv) * b_kv)
        ridge = eta_f * hw.peak_flops / (eta_b * hw.mem_bw)
        rows.append({"gpu": hw.name, "kv_dtype": str(kvd), "n_heads": int(hq), "n_kv_heads": int(hkv),
                     "max_compute_fraction": float(np.max(achieved) / hw.peak_flops),
                     "term_intensity": intensity, "term_ridge_intensity": ridge,
                     "term_regime": "memory-bound" if intensity < ridge else "compute-bound"})  # fmt: skip
    return pd.DataFrame(rows)
