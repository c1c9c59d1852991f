"""SLIM models for tensor-parallel, mixture-of-experts and static-batch tables (LLM-Inference-Bench and alike).

Every calibrated model reads the table's ``tensor_parallel`` column (per-GPU features and all-reduces,
`slimlib.model.parallel`) and counts a mixture of experts' active FFN width and touched expert weights.
`LongContextModel` is `slimlib.model.extended.ExtendedSlimModel` with three changes, read off the residuals of the context-transfer
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
from slimlib.model.calibrated import Components
from slimlib.model.extended import ExtendedSlimModel
from slimlib.model.features import Features, FloatArray, prefill_peak_flops
from slimlib.model.parallel import allreduce_times, step_weight_bytes
from slimlib.model.params import ParamSpec
from slimlib.registry.gpus import GPU

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


def dense_decode_flops(f: Features) -> FloatArray:
    """Per-token, per-rank GEMM FLOPs of one decode step: ``2 L (2 D^2 + 2 D D_kv + m D D_ff)``."""
    d = f["hidden_size"]
    return 2.0 * f["n_layers"] * (2.0 * d**2 + 2.0 * d * f["d_kv"] + f["n_ffn_matrices"] * d * f["ffn_size"])


#: (sequence, query head) pairs per rank above which vLLM 0.6.1 runs its unpartitioned paged-attention kernel
ATTENTION_SWITCH_PAIRS = 512


def attention_width(f: Features) -> FloatArray:
    """KV width the decode attention streams per layer: ``D_kv`` up to `ATTENTION_SWITCH_PAIRS` (sequence, query
    head) pairs per rank, the query width ``D`` above (see the module docstring)."""
    heads_per_rank = f["n_heads"] / f["tensor_parallel"]
    wide = f["batch_size"] * heads_per_rank > ATTENTION_SWITCH_PAIRS
    return np.asarray(np.where(wide, f["hidden_size"], f["d_kv"]), dtype=float)


class LongContextModel(ExtendedSlimModel):
    """The extended model with static-batch KV capacity, kernel-regime attention traffic and FLOP-based dense
    decode (see the module docstring); variant "longctx". `kv_context_frac` defaults to 1 (static batch); the other
    arguments are `ExtendedSlimModel`'s."""

    variant = "longctx"

    def __init__(
        self,
        gpu: str | None = None,
        *,
        kv_context_frac: float = 1.0,
        max_batched_tokens: float = 512.0,
        gpu_mem_util: float = 0.9,
        block_size: float = 16.0,
        fixed: dict[str, float] | None = None,
        n_starts: int = 8,
        max_nfev: int = 4000,
        seed: int = 0,
    ) -> None:
        super().__init__(
            gpu, kv_context_frac=kv_context_frac, max_batched_tokens=max_batched_tokens, gpu_mem_util=gpu_mem_util,
            block_size=block_size, fixed=fixed, n_starts=n_starts, max_nfev=max_nfev, seed=seed,
        )  # fmt: skip

    def param_specs(self) -> tuple[ParamSpec, ...]:
        return _LONG_SPECS

    def _components(self, p: dict[str, float], f: Features, hw: GPU) -> Components:
        b = f["batch_size"]
        flops = eq.prefill_flops(
            b, f["input_len"], f["n_layers"], f["hidden_size"], f["d_kv"], f["ffn_size"], f["n_ffn_matrices"]
        )
        pre = eq.prefill_time(flops, prefill_peak_flops(f, hw), p["eta_c"])
        attn = eq.decode_kv_bytes(
            f["n_layers"],
            attention_width(f),
            f["kv_bytes"],
            eq.kv_scan_tokens(f["input_len"], f["output_len"]),
        )
        dense = f["output_len"] * dense_decode_flops(f) / (p["eta_d"] * prefill_peak_flops(f, hw))
        per_step = step_weight_bytes(f) / (p["eta_w"] * hw.mem_bw) + p["t_step"]
        dec = f["output_len"] * per_step + b * (dense + attn / (p["eta_m"] * hw.mem_bw))
        step_ar, pre_ar = allreduce_times(f, hw)
        pre = pre + pre_ar
        dec = dec + f["output_len"] * step_ar
        return pre, dec, eq.e2e_latency(pre, dec, p["t_fixed"])
