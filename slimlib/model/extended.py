"""An extended SLIM (beyond the paper): SLIM's structure plus the serving limits its physics leaves out.

Same prefill (Eqs. 7-8), per-request decode cost (alpha of Eq. 10), KV-scan traffic (Eqs. 11-12) and fixed overhead
(Eq. 5) as SLIM, with these changes, each a physical effect the residuals of the faithful model show on the public
vLLM data:

1. Effective batch. A serving engine runs at most ``B_eff = min(B, B_kv, B_tok)`` sequences at once:
   * KV-cache capacity ``B_kv = N_kv / (IL + kappa OL)``: ``N_kv`` KV token slots (the engine's logged
     ``gpu_blocks x block_size`` when the table has them, else ``(mem x util - weights - reserve) /
     kv_bytes_per_token``, the default pool `slimlib.advisor.capacity.default_kv_bytes` describes),
     over the mean context a running sequence holds; in steady-state continuous batching requests sit at uniformly
     spread decode stages, so ``kappa = 0.5`` (an option, not fitted).
   * Chunked-prefill token budget (rows with ``chunked_prefill`` true): each engine step processes at most
     ``N_tok`` tokens (vLLM default 512), decodes first; in steady state requests finish at ``B_eff / OL`` per
     step and are replaced by prefills of ``IL`` tokens in the remaining budget, so ``B_tok = N_tok OL / (IL + OL)``.
   Beyond the limit requests queue (or are preempted); throughput is ``B_eff (IL + OL) / E2E(B_eff)`` (Eq. 6 at
   the effective batch) and the predicted E2E is the latency of a request of that running batch.
2. Per-step costs separated from per-request costs. SLIM's ``(B + B0)`` in Eq. 9 makes the batch-independent
   part proportional to a request's cost (including its KV scan). Here decode is
   ``T_dec = OL [P b_w / (eta_w BW) + t_step] + B_eff / eta_m [alpha OL + M_dec / BW]``: every decode step reads
   the weights once, whatever the batch, at efficiency ``eta_w`` (this replaces ``B0``), and pays a fixed
   ``t_step`` (scheduling, kernel launches, sampling; it does not grow with model size).
3. No ``gamma L (D/1024)^2`` term. At decode batch sizes the dense GEMMs are bound by reading their weights, which
   item 2 charges per step; a per-request cost growing with ``L D^2`` is not what the data show. In the faithful
   model's residuals the single-request step time exceeds the weight read by an offset of a few milliseconds that
   does not scale with the weights (compare `mean_itl_ms` at batch size 1 across models in `memgap-online` with
   ``P b_w / BW``), and ``gamma`` fits to zero whenever several models are fitted together. ``t_step`` takes its
   place, so the parameter count stays six.
4. Prefill and dense decode computed at the effective batch.
5. Several GPUs and mixtures of experts: with a ``tensor_parallel`` column the features are per GPU and the
   all-reduces are added (`slimlib.model.parallel`); a mixture of experts reads per step only the experts the
   batch's tokens touch (`slimlib.model.parallel.step_weight_bytes`). One GPU and a dense model: unchanged.

Parameters: eta_c, t_fixed, eta_m, eta_w, alpha, t_step (six, as SLIM). The bandwidth efficiencies eta_m and eta_w
may reach 1.5: they are relative to the registry's bandwidth, which for some GPUs is derived rather than measured
(h100-sxm-64gb: uncertain by up to +25%). When the training table holds a single architecture, the weight read
``P b_w / (eta_w BW)`` is a constant per step and cannot be told apart from ``t_step``: `fit` then holds t_step at 0
(unless it was fixed explicitly; recorded in ``held_``, the constructor's ``fixed`` is not changed), and the weight
read carries the whole per-step cost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.model import equations as eq
from slimlib.model.calibrated import CalibratedModel, Components
from slimlib.model.features import Features, FloatArray, model_features, prefill_peak_flops
from slimlib.model.memory import kv_pool_bytes
from slimlib.model.parallel import allreduce_times, step_weight_bytes
from slimlib.model.params import ParamSpec
from slimlib.registry.gpus import GPU

_EXT_SPECS = (
    ParamSpec("eta_c", 1e-3, 1.0, 1.0, 0.5, "-", "prefill compute efficiency (Eq. 7)"),
    ParamSpec("t_fixed", 0.0, 1e3, 1.0, 0.1, "s", "batch-level fixed overhead (Eq. 5)"),
    ParamSpec("eta_m", 1e-3, 1.5, 1.0, 0.5, "-", "per-request decode efficiency (Eq. 9 without B0)"),
    ParamSpec("eta_w", 1e-3, 1.5, 1.0, 0.5, "-", "efficiency of the per-step weight read P b_w / BW"),
    ParamSpec(
        "alpha", 0.0, 1.0, 1e-5, 1e-5, "s/token", "per-request, per-output-token cost (Eq. 10's alpha)"
    ),
    ParamSpec(
        "t_step", 0.0, 1.0, 1e-3, 1e-3, "s/step", "per-decode-step overhead independent of batch and model"
    ),
)


class ExtendedSlimModel(CalibratedModel):
    """SLIM with the effective-batch limit (KV capacity, chunked-prefill token budget) and a per-step weight read.

    Parameters
    ----------
    gpu : registry name of the GPU; default: the table's ``gpu`` column.
    kv_context_frac : kappa, the fraction of OL a running sequence holds on average in the KV cache (0.5).
    max_batched_tokens : chunked-prefill token budget per engine step (vLLM default 512).
    gpu_mem_util : KV-cache memory fraction used when the table has no ``gpu_blocks`` (vLLM default 0.9).
    block_size : tokens per KV block when the table has ``gpu_blocks`` but no ``block_size`` (16).
    fixed, n_starts, max_nfev, seed : as `CalibratedModel`.
    """

    variant = "extended"

    def __init__(
        self,
        gpu: str | None = None,
        *,
        kv_context_frac: float = 0.5,
        max_batched_tokens: float = 512.0,
        gpu_mem_util: float = 0.9,
        block_size: float = 16.0,
        fixed: dict[str, float] | None = None,
        n_starts: int = 8,
        max_nfev: int = 4000,
        seed: int = 0,
    ) -> None:
        self.kv_context_frac = kv_context_frac
        self.max_batched_tokens = max_batched_tokens
        self.gpu_mem_util = gpu_mem_util
        self.block_size = block_size
        super().__init__(gpu, fixed=fixed, n_starts=n_starts, max_nfev=max_nfev, seed=seed)

    def param_specs(self) -> tuple[ParamSpec, ...]:
        return _EXT_SPECS

    def _held(self, data: pd.DataFrame) -> dict[str, float]:
        """The constructor's `fixed`, plus t_step = 0 when `data` holds one architecture (see the module doc)."""
        held = super()._held(data)
        if data["model"].nunique() == 1 and "t_step" not in held:
            held["t_step"] = 0.0
        return held

    def kv_token_capacity(self, df: pd.DataFrame, feats: Features, hw: GPU) -> FloatArray:
        """KV token slots per row: logged ``gpu_blocks x block_size`` where present, else from GPU memory."""
        # the engine's default pool, as the advisor counts it: memory x utilization - weights - activation reserve
        pool = kv_pool_bytes(hw, feats["weight_bytes_total"], float(self.gpu_mem_util))
        est = np.maximum(pool / feats["kv_bytes_per_token"], 0.0)
        if "gpu_blocks" not in df.columns:
            return est
        blocks = df["gpu_blocks"].to_numpy(dtype=float, na_value=np.nan)
        bsize = (
            df["block_size"].to_numpy(dtype=float, na_value=np.nan)
            if "block_size" in df.columns
            else np.full(len(df), np.nan)
        )
        bsize = np.where(np.isfinite(bsize), bsize, float(self.block_size))
        return np.where(np.isfinite(blocks), blocks * bsize, est)

    def effective_batch(self, df: pd.DataFrame, feats: Features, hw: GPU) -> FloatArray:
        """``B_eff = min(B, B_kv, B_tok)`` per row (see the module docstring)."""
        b = feats["batch_cap"]
        il, ol = feats["input_len"], feats["output_len"]
        b_kv = self.kv_token_capacity(df, feats, hw) / (il + float(self.kv_context_frac) * ol)
        chunked = (
            df["chunked_prefill"].fillna(False).to_numpy(dtype=bool)
            if "chunked_prefill" in df.columns
            else np.zeros(len(df), dtype=bool)
        )
        b_tok = np.where(chunked, float(self.max_batched_tokens) * ol / (il + ol), np.inf)
        return np.asarray(np.maximum(np.minimum(np.minimum(b, b_kv), b_tok), 1.0), dtype=float)

    def _features(self, df: pd.DataFrame, hw: GPU) -> Features:
        f = model_features(df)
        f["batch_cap"] = f["batch_size"]
        f["batch_size"] = self.effective_batch(df, f, hw)
        return f

    def _components(self, p: dict[str, float], f: Features, hw: GPU) -> Components:
        b = f["batch_size"]
        flops = eq.prefill_flops(
            b, f["input_len"], f["n_layers"], f["hidden_size"], f["d_kv"], f["ffn_size"], f["n_ffn_matrices"]
        )
        pre = eq.prefill_time(flops, prefill_peak_flops(f, hw), p["eta_c"])
        dense = eq.dense_decode_time(f["output_len"], f["n_layers"], f["hidden_size"], p["alpha"], 0.0)
        kv = eq.decode_kv_bytes(
            f["n_layers"], f["d_kv"], f["kv_bytes"], eq.kv_scan_tokens(f["input_len"], f["output_len"])
        )
        per_step = step_weight_bytes(f) / (p["eta_w"] * hw.mem_bw) + p["t_step"]
        dec = f["output_len"] * per_step + eq.decode_time(b, dense, kv, hw.mem_bw, p["eta_m"], 0.0)
        step_ar, pre_ar = allreduce_times(f, hw)  # tensor parallelism (zero at 1 GPU)
        pre, dec = pre + pre_ar, dec + f["output_len"] * step_ar
        return pre, dec, eq.e2e_latency(pre, dec, p["t_fixed"])
