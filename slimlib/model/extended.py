"""The recommended SLIM estimator (registry name ``slim``): the paper's equations with the serving engine's limits.

It replaces the earlier ``extended`` and ``longctx`` methods (one estimator, one name). Components, each the
paper's term made exact where the engine or the kernels differ from Eqs. 5-12:

1. **Effective batch** (KV capacity, chunked-prefill budget). Measured throughput plateaus where the cap B
   cannot run: ``B_eff = min(B, B_kv, B_tok)`` with ``B_kv = N_kv / (IL + kappa OL)`` (``N_kv`` the KV token
   slots: logged ``gpu_blocks x block_size`` where present, else `slimlib.model.memory.kv_pool_bytes` / KV
   bytes per token) and, with chunked prefill, ``B_tok = max_batched_tokens OL / (IL + OL)``. ``kappa`` is the
   fraction of OL a running sequence holds on average: under continuous batching with a queue the running
   sequences are spread over their decode (``kv_context_frac``, 0.5); in a static batch (column
   ``static_batch`` true: all B requests start together, as in offline batch sweeps and LLM-Inference-Bench) all
   grow to ``IL + OL`` together, so ``kappa = 1``. Throughput is ``B_eff (IL + OL) / E2E(B_eff)`` (Eq. 6).
2. **Per-step weight read instead of B0**: every decode step reads the (touched) weights once, whatever the
   batch, at efficiency ``eta_w``, plus a fixed ``t_step`` (scheduling, launches, sampling).
3. **Decode attention traffic by kernel regime**: ``M_dec = 2 L D_att b_kv C(IL, OL)`` (Eq. 11) with
   ``D_att = D_kv`` while a step has at most 512 (sequence, query head) pairs per rank and ``D`` (query width)
   above: vLLM's switch between its two paged-attention decode kernels (``vllm/attention/ops/paged_attn.py``,
   ``use_v1 = ... num_seqs * num_heads > 512``). Equal for multi-head models (``D_kv = D``).
4. **Dense decode**: ``T_d = alpha OL`` per request (Eq. 10 without ``gamma``), inside Eq. 9's
   ``B / eta_m [T_d + M_dec / BW]``. At decode batch sizes the projection
   and FFN GEMMs are bound by reading their weights, which component 2 charges per step.
5. Several GPUs and mixtures of experts: per-GPU features plus all-reduces (`slimlib.model.parallel`), only the
   touched experts' weights per step (`slimlib.model.parallel.step_weight_bytes`).

Each component was chosen on training rows only (`scripts/choose_components.py` prints the training MAPE of each
alternative per scenario): ``alpha`` against a FLOP-based per-request term ``OL F_tok / (eta_d F_max)`` (and both
together): lower on the vLLM 0.5.2 H100 scenarios, within a few hundredths of a point on LLM-Inference-Bench, with
one parameter fewer than both; the attention rule against ``D_kv`` always: lower on LLM-Inference-Bench, equal on
the multi-head models of the H100 data; ``kappa = 1`` for static batches against 0.5 everywhere: lower or equal.

When the training table holds one architecture the weight read ``P b_w / (eta_w BW)`` is a constant per step and
cannot be told apart from ``t_step``: `fit` then holds t_step at 0 (recorded in ``held_``; the constructor's
``fixed`` is not changed). The bandwidth efficiencies may reach 1.5: they are relative to the registry's bandwidth,
which for some GPUs is derived rather than measured (h100-sxm-64gb: uncertain by up to +25%).
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

#: (sequence, query head) pairs per rank above which vLLM runs its unpartitioned paged-attention kernel
ATTENTION_SWITCH_PAIRS = 512

_SPECS = (
    ParamSpec("eta_c", 1e-3, 1.0, 1.0, 0.5, "-", "prefill compute efficiency (Eq. 7)"),
    ParamSpec("t_fixed", 0.0, 1e3, 1.0, 0.1, "s", "batch-level fixed overhead (Eq. 5)"),
    ParamSpec("eta_m", 1e-3, 1.5, 1.0, 0.5, "-", "decode attention bandwidth efficiency (Eq. 9 without B0)"),
    ParamSpec("eta_w", 1e-3, 1.5, 1.0, 0.5, "-", "efficiency of the per-step weight read P b_w / BW"),
    ParamSpec(
        "alpha", 0.0, 1.0, 1e-5, 1e-5, "s/token", "per-request, per-output-token cost (Eq. 10's alpha)"
    ),
    ParamSpec(
        "t_step", 0.0, 1.0, 1e-3, 1e-3, "s/step", "per-decode-step overhead independent of batch and model"
    ),
)


def attention_width(f: Features) -> FloatArray:
    """KV width the decode attention streams per layer: ``D_kv`` up to `ATTENTION_SWITCH_PAIRS` (sequence, query
    head) pairs per rank, the query width ``D`` above (component 3 of the module docstring)."""
    heads_per_rank = f["n_heads"] / f["tensor_parallel"]
    wide = f["batch_size"] * heads_per_rank > ATTENTION_SWITCH_PAIRS
    return np.asarray(np.where(wide, f["hidden_size"], f["d_kv"]), dtype=float)


def static_batch_column(df: pd.DataFrame) -> FloatArray:
    """The optional boolean ``static_batch`` column as 0/1 floats (0 where absent or missing)."""
    if "static_batch" not in df.columns:
        return np.zeros(len(df))
    return np.asarray(df["static_batch"].fillna(False).to_numpy(dtype=bool), dtype=float)


class ExtendedSlimModel(CalibratedModel):
    """The recommended SLIM (registry name ``slim``; see the module docstring).

    Parameters
    ----------
    gpu : registry name of the GPU; default: the table's ``gpu`` column.
    kv_context_frac : kappa under continuous batching, the fraction of OL a running sequence holds on average in the
        KV cache (0.5); rows with ``static_batch`` true use 1.
    max_batched_tokens : chunked-prefill token budget per engine step (vLLM default 512).
    gpu_mem_util : KV-cache memory fraction used when the table has no ``gpu_blocks`` (vLLM default 0.9).
    block_size : tokens per KV block when the table has ``gpu_blocks`` but no ``block_size`` (16).
    fixed, n_starts, max_nfev, seed : as `CalibratedModel`.
    """

    variant = "slim"

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
        return _SPECS

    def _held(self, data: pd.DataFrame) -> dict[str, tuple[float, str]]:
        """The constructor's `fixed`, plus t_step = 0 when `data` holds one architecture (see the module doc)."""
        held = super()._held(data)
        if data["model"].nunique() == 1 and "t_step" not in held:
            held["t_step"] = (
                0.0,
                "held at 0: one architecture, so the per-step weight read and t_step are one constant",
            )
        return held

    def kv_token_capacity(self, df: pd.DataFrame, feats: Features, hw: GPU) -> FloatArray:
        """KV token slots per row: logged ``gpu_blocks x block_size`` where present, else from GPU memory."""
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
        """``B_eff = min(B, B_kv, B_tok)`` per row (component 1 of the module docstring)."""
        b = feats["batch_cap"]
        il, ol = feats["input_len"], feats["output_len"]
        static = static_batch_column(df)
        kappa = static + (1.0 - static) * float(self.kv_context_frac)
        b_kv = self.kv_token_capacity(df, feats, hw) / (il + kappa * ol)
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
        attn = eq.decode_kv_bytes(
            f["n_layers"],
            attention_width(f),
            f["kv_bytes"],
            eq.kv_scan_tokens(f["input_len"], f["output_len"]),
        )
        dense = eq.dense_decode_time(f["output_len"], f["n_layers"], f["hidden_size"], p["alpha"], 0.0)
        per_step = step_weight_bytes(f) / (p["eta_w"] * hw.mem_bw) + p["t_step"]
        dec = f["output_len"] * per_step + eq.decode_time(b, dense, attn, hw.mem_bw, p["eta_m"], 0.0)  # Eq. 9
        step_ar, pre_ar = allreduce_times(f, hw)  # tensor parallelism (zero at 1 GPU)
        pre, dec = pre + pre_ar, dec + f["output_len"] * step_ar
        return pre, dec, eq.e2e_latency(pre, dec, p["t_fixed"])
