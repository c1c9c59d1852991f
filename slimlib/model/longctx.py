"""SLIM models for tensor-parallel, mixture-of-experts and static-batch tables (LLM-Inference-Bench and alike).

`TPSlimModel` (paper SLIM, Eqs. 5-12) and `TPExtendedModel` (`slimlib.model.extended`) read the table's
``tensor_parallel`` column (default 1) and

1. compute per-rank features with `slimlib.model.parallel.split_features` (layers, KV width, weights and KV bytes
   per token per rank) and add the all-reduce time (`slimlib.model.parallel.allreduce_times`): ``OL x`` the
   per-step all-reduce to decode and the prefill all-reduce to prefill. With ``tensor_parallel = 1`` both are
   exactly the parent model (tests check it);
2. for a mixture of experts (Mixtral) count the FLOPs of the ``experts_per_token`` experts a token passes
   through (FFN width ``ffn_size_active``). The extended model's per-step weight read counts the expected
   bytes a decode step touches: attention and embeddings plus ``X (1 - (1 - k/X)^B)`` of the ``X`` experts
   (each of ``B`` tokens picks ``k`` experts); its KV capacity still subtracts all weights.

`LongContextModel` is `TPExtendedModel` with three changes, read off the residuals of the context-transfer
scenario (fit L <= 256, validate L >= 512 on LLM-Inference-Bench) and visible inside the training range:

* Static-batch KV capacity (``kv_context_frac = 1``): in a static batch every request grows to ``IL + OL``
  tokens together, so the batch that fits the KV cache without preemption is ``N_kv / (IL + OL)``, not the
  continuous-batching average ``N_kv / (IL + OL/2)``. (A constructor option, as in the extended model.)
* Decode attention traffic by the kernel regime: ``M_dec = 2 L D_att b_kv C(IL, OL)`` (Eq. 11) with
  ``D_att = D_kv`` (KV heads) while a decode step has at most 512 (sequence, query head) pairs per rank,
  ``B_eff H_q / TP <= 512``, and ``D_att = D = H_q d_h`` (query heads) above. 512 is vLLM 0.6.1's switch between
  its two paged-attention decode kernels (``vllm/attention/ops/paged_attn.py``: ``use_v1 = max_seq_len <= 8192
  and (max_num_partitions == 1 or num_seqs * num_heads > 512)``). In the data, the per-step time a longer context
  adds per sequence jumps where ``B H_q / TP`` crosses 512 (MI300X between B = 16 and 32 at TP 1, MI250 between
  B = 32 and 64 at TP 2), and above it is no smaller for grouped-query models (Mistral-7B, Llama-3-8B: 8 KV heads)
  than for the multi-head Llama-2-7B of the same depth and width, already between L = 128 and 256 (training
  range): above the switch, grouped-query attention saves KV capacity, not bandwidth. (No kernel traces of these
  runs exist; the rule is the smallest one consistent with both observations, and it lowers the training error at
  the same parameter count: MI250 5.5% -> 3.7%, MI300X 16.5% -> 16.4%, against charging query heads always.)
* Dense decode by FLOPs (replaces the per-request ``alpha``): each request's decode step runs the projection and
  FFN GEMMs, ``F_tok = 2 L (2 D^2 + 2 D D_kv + m D D_ff)`` FLOPs (``D_ff`` of the active experts), at a
  calibrated efficiency ``eta_d`` of the peak: ``B_eff OL F_tok / (eta_d F_max)``. This is the paper's
  ``gamma L (D/1024)^2`` term (Eq. 10) made exact for GQA, gated FFNs and MoE, with a dimensionless parameter; it
  dominates on the ROCm runs, where per-request decode time grows tenfold from 7B to 70B models at B >= 32.

Parameters (six, as SLIM): eta_c, t_fixed, eta_m, eta_w, eta_d, t_step. When every training row has IL = OL
(LLM-Inference-Bench), prefill compute (eta_c) and dense decode compute (eta_d) both scale with ``B L``; only the
prefill's ``IL^2`` attention term tells them apart, so one of the two tends to its bound (`summary` flags it).
"""

from __future__ import annotations

import numpy as np

from slimlib.model import equations as eq
from slimlib.model.base import ParamSpec, SlimModel, model_features, register_variant
from slimlib.model.extended import ExtendedSlimModel
from slimlib.model.parallel import allreduce_times, split_features, tensor_parallel_column


def _arch_extras(df) -> dict[str, np.ndarray]:
    """Per-row n_kv_heads, FFN width per token, experts and the non-expert weight bytes (registry lookups)."""
    from slimlib.registry.architectures import get_architecture

    codes, uniques = np.unique(df["model"].astype(str).to_numpy(), return_inverse=True)
    rows = []
    for name in codes:
        a = get_architecture(str(name))
        expert_bytes = (
            a.n_experts * a.n_ffn_matrices * a.hidden_size * a.ffn_size * a.n_layers * a.weight_bytes
        )
        rows.append([a.n_heads, a.n_kv_heads, a.ffn_size_active, a.n_experts, a.experts_per_token,
                     a.weight_bytes_total - (expert_bytes if a.is_moe else 0), expert_bytes if a.is_moe else 0])  # fmt: skip
    t = np.array(rows, dtype=float)[uniques]
    keys = ("n_heads", "n_kv_heads", "ffn_size_active", "n_experts", "experts_per_token", "dense_weight_bytes",
            "expert_weight_bytes")  # fmt: skip
    return {k: t[:, j] for j, k in enumerate(keys)}


def tp_features(df) -> dict[str, np.ndarray]:
    """`model_features` plus the MoE/GQA extras, split per rank by the ``tensor_parallel`` column."""
    f = model_features(df)
    f.update(_arch_extras(df))
    f["ffn_size"] = f["ffn_size_active"]  # FLOPs: the experts a token passes through
    tp = tensor_parallel_column(df)
    out = split_features(f, tp)
    for k in ("dense_weight_bytes", "expert_weight_bytes"):
        out[k] = f[k] / tp
    return out


def step_weight_bytes(f) -> np.ndarray:
    """Bytes one decode step reads per rank: dense weights plus the experts the batch's tokens touch."""
    x, k, b = f["n_experts"], f["experts_per_token"], f["batch_size"]
    touched = np.where(x > 1, 1.0 - (1.0 - k / np.maximum(x, 1.0)) ** b, 1.0)
    return f["dense_weight_bytes"] + f["expert_weight_bytes"] * touched


class TPSlimModel(SlimModel):
    """Paper SLIM with a ``tensor_parallel`` column and MoE FLOPs (see the module docstring); variant "paper-tp"."""

    def __init__(self, gpu=None, **kwargs):
        super().__init__(gpu, variant="paper", **kwargs)
        self.variant = "paper-tp"  # SlimModel's equations with no ablation switched on

    def _features(self, df, hw):
        return tp_features(df)

    def _components(self, p, f, hw):
        pre, dec, _ = super()._components(p, f, hw)
        step_ar, pre_ar = allreduce_times(f, hw)
        pre = pre + pre_ar
        dec = dec + f["output_len"] * step_ar
        return pre, dec, eq.e2e_latency(pre, dec, p["t_fixed"])


class TPExtendedModel(ExtendedSlimModel):
    """Extended SLIM with a ``tensor_parallel`` column, MoE weight reads and FLOPs; variant "extended-tp"."""

    variant = "extended-tp"

    def _features(self, df, hw):
        f = tp_features(df)
        f["batch_cap"] = f["batch_size"]
        f["batch_size"] = self.effective_batch(df, f, hw)
        return f

    def _attention_bytes(self, p, f):
        return eq.decode_kv_bytes(
            f["n_layers"], f["d_kv"], f["kv_bytes"], eq.kv_scan_tokens(f["input_len"], f["output_len"])
        )

    def _components(self, p, f, hw):
        b = f["batch_size"]
        flops = eq.prefill_flops(
            b, f["input_len"], f["n_layers"], f["hidden_size"], f["d_kv"], f["ffn_size"], f["n_ffn_matrices"]
        )
        pre = eq.prefill_time(flops, hw.peak_flops, p["eta_c"])
        dense = eq.dense_decode_time(f["output_len"], f["n_layers"], f["hidden_size"], p["alpha"], 0.0)
        kv = self._attention_bytes(p, f)
        per_step = step_weight_bytes(f) / (p["eta_w"] * hw.mem_bw) + p["t_step"]
        dec = f["output_len"] * per_step + eq.decode_time(b, dense, kv, hw.mem_bw, p["eta_m"], 0.0)
        step_ar, pre_ar = allreduce_times(f, hw)
        pre = pre + pre_ar
        dec = dec + f["output_len"] * step_ar
        return pre, dec, eq.e2e_latency(pre, dec, p["t_fixed"])


_LONG_SPECS = (
    ParamSpec("eta_c", 1e-3, 1.0, 1.0, 0.5, "-", "prefill compute efficiency (Eq. 7)"),
    ParamSpec("t_fixed", 0.0, 1e3, 1.0, 0.1, "s", "batch-level fixed overhead (Eq. 5)"),
    ParamSpec("eta_m", 1e-3, 1.5, 1.0, 0.5, "-", "decode attention bandwidth efficiency (Eq. 9 without B0)"),
    ParamSpec("eta_w", 1e-3, 1.5, 1.0, 0.5, "-", "efficiency of the per-step weight read"),
    ParamSpec("eta_d", 1e-4, 1.0, 0.1, 0.1, "-", "dense decode GEMM efficiency (per-request FLOPs / peak)"),
    ParamSpec(
        "t_step", 0.0, 1.0, 1e-3, 1e-3, "s/step", "per-decode-step overhead independent of batch and model"
    ),
)


def dense_decode_flops(f) -> np.ndarray:
    """Per-token, per-rank GEMM FLOPs of one decode step: ``2 L (2 D^2 + 2 D D_kv + m D D_ff)``."""
    d = f["hidden_size"]
    return 2.0 * f["n_layers"] * (2.0 * d**2 + 2.0 * d * f["d_kv"] + f["n_ffn_matrices"] * d * f["ffn_size"])


#: (sequence, query head) pairs per rank above which vLLM 0.6.1 runs its unpartitioned paged-attention kernel
ATTENTION_SWITCH_PAIRS = 512


def attention_width(f) -> np.ndarray:
    """KV width the decode attention streams per layer: ``D_kv`` up to `ATTENTION_SWITCH_PAIRS` (sequence, query
    head) pairs per rank, the query width ``D`` above (see the module docstring)."""
    heads_per_rank = f["n_heads"] / f.get("tensor_parallel", 1.0)
    wide = f["batch_size"] * heads_per_rank > ATTENTION_SWITCH_PAIRS
    return np.where(wide, f["hidden_size"], f["d_kv"])


class LongContextModel(TPExtendedModel):
    """`TPExtendedModel` with static-batch KV capacity, kernel-regime attention traffic and FLOP-based dense decode.

    See the module docstring; variant "longctx". `kv_context_frac` defaults to 1 (static batch)."""

    variant = "longctx"

    def __init__(self, gpu=None, *, kv_context_frac: float = 1.0, **kwargs):
        super().__init__(gpu, kv_context_frac=kv_context_frac, **kwargs)

    def param_specs(self):
        return _LONG_SPECS

    def _components(self, p, f, hw):
        b = f["batch_size"]
        flops = eq.prefill_flops(
            b, f["input_len"], f["n_layers"], f["hidden_size"], f["d_kv"], f["ffn_size"], f["n_ffn_matrices"]
        )
        pre = eq.prefill_time(flops, hw.peak_flops, p["eta_c"])
        attn = eq.decode_kv_bytes(
            f["n_layers"],
            attention_width(f),
            f["kv_bytes"],
            eq.kv_scan_tokens(f["input_len"], f["output_len"]),
        )
        dense = f["output_len"] * dense_decode_flops(f) / (p["eta_d"] * hw.peak_flops)
        per_step = step_weight_bytes(f) / (p["eta_w"] * hw.mem_bw) + p["t_step"]
        dec = f["output_len"] * per_step + b * (dense + attn / (p["eta_m"] * hw.mem_bw))
        step_ar, pre_ar = allreduce_times(f, hw)
        pre = pre + pre_ar
        dec = dec + f["output_len"] * step_ar
        return pre, dec, eq.e2e_latency(pre, dec, p["t_fixed"])


register_variant("paper-tp", TPSlimModel)
register_variant("longctx", LongContextModel)
register_variant("extended-tp", TPExtendedModel)
