"""The effective-batch caps (beyond the paper): the batch the engine actually runs.

Measured throughput plateaus where the requested concurrency B cannot run: ``B_eff = max(min(B, B_kv, B_tok), 1)``
with ``B_kv = N_kv / (IL + kappa OL)`` (``N_kv``: feature ``kv_token_capacity``, the KV token slots of one GPU)
and ``B_tok = N_tok OL / (IL + OL)`` (``N_tok``: feature ``max_num_batched_tokens``, the chunked-prefill token
budget per engine step; only where feature ``chunked_prefill``, from the table's optional column of that name, is
true: without chunked prefill a step admits whole prompts). ``kappa`` is the fraction of OL a running sequence
holds on average: under continuous batching with a queue the running sequences are spread over their decode
(``kv_context_frac``, 0.5); in a static batch (feature ``static_batch``, from the table's optional column of that
name: all B requests start together, as in offline batch sweeps and LLM-Inference-Bench) all grow to
``IL + OL`` together, so ``kappa = 1``. Throughput is then ``B_eff (IL + OL) / E2E(B_eff)`` (Eq. 6).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.model.features import Features, FloatArray
from slimlib.model.preemption import recompute_features
from slimlib.model.terms.term import Params, Term, Times
from slimlib.registry.gpus import GPU
from slimlib.schema import flag_column

#: kappa under continuous batching (module docstring)
KV_CONTEXT_FRAC = 0.5


def chunked_prefill_column(df: pd.DataFrame) -> FloatArray:
    """The optional boolean ``chunked_prefill`` column as 0/1 floats, 1 where absent or missing: a row that does
    not say is served by vLLM's V1 engine, which always chunks (V0 steps whole prompts: say ``false``)."""
    return np.asarray(flag_column(df, "chunked_prefill", True), dtype=float)


def kv_slots(f: Features, kv_context_frac: float = KV_CONTEXT_FRAC) -> FloatArray:
    """``B_kv = N_kv / (IL + kappa OL + S)`` per row of features `f`: the requests the KV pool holds (module
    docstring; a hybrid's context in whole blocks, plus ``S`` its state in pool tokens, feature ``state_tokens``,
    which does not shrink with kappa; NaN without a pool)."""
    static = f["static_batch"]
    kappa = static + (1.0 - static) * float(kv_context_frac)
    held = f["input_len"] + kappa * f["output_len"]
    state = f.get("state_tokens")
    if state is not None and np.any(state > 0):  # a hybrid's context fills whole (large) blocks
        held = np.where(state > 0, np.ceil(held / f["block_size"]) * f["block_size"] + state, held)
    return np.asarray(f["kv_token_capacity"] / held, dtype=float)


def effective_batch(f: Features, kv_context_frac: float = KV_CONTEXT_FRAC) -> FloatArray:
    """``B_eff`` per row of features `f` (module docstring)."""
    b = f["batch_size"]
    il, ol = f["input_len"], f["output_len"]
    b_kv = kv_slots(f, kv_context_frac)
    chunked = f["chunked_prefill"] > 0
    b_tok = np.where(chunked, f["max_num_batched_tokens"] * ol / (il + ol), np.inf)
    return np.asarray(np.maximum(np.minimum(np.minimum(b, b_kv), b_tok), 1.0), dtype=float)


def effective_batch_term(kv_context_frac: float = KV_CONTEXT_FRAC) -> Term:
    """The caps as a term: replaces feature ``batch_size`` by ``B_eff`` (the requested B kept as ``batch_cap``)."""

    def adjust(f: Features) -> Features:
        out = dict(f)
        out["batch_cap"] = f["batch_size"]
        out["batch_size"] = effective_batch(f, kv_context_frac)
        slots = kv_slots(f, kv_context_frac)
        out["kv_slots"] = np.where(np.isfinite(slots), slots, np.inf)
        return out

    return Term(
        "effective_batch",
        f"B_eff = min(B, KV slots / (IL + kappa OL), token budget OL / (IL + OL)), kappa = 1 for static batches, "
        f"{kv_context_frac:g} otherwise",
        adjust=adjust,
        reads=("kv_token_capacity", "max_num_batched_tokens", "static_batch", "chunked_prefill"),
    )


def preemption_recompute_term(prefill: Term) -> Term:
    """Past the KV pool, a static batch's preempted prompts recomputed (`slimlib.model.preemption`): the features
    ``recompute_seqs`` (requests recomputed per wave of ``B_eff``) and ``recompute_len`` (their mean recomputed
    tokens, prompt plus generated) from a replay of vLLM's scheduler, and the time of `prefill` (the model's prefill
    term, with its parameters) on that many requests of that length, charged to the decode phase, where those
    prefills run. Needs the effective batch's adjustment first (``batch_cap``: the requested B)."""
    if prefill.times is None:
        raise ValueError(f"term {prefill.name!r} has no times to charge a recompute with")
    prefill_times = prefill.times

    def adjust(f: Features) -> Features:
        out = dict(f)
        state = np.broadcast_to(np.asarray(f.get("state_tokens", 0.0), dtype=float), np.shape(f["input_len"]))
        # a hybrid's state pages ride with each request as a prompt of `state` pool tokens that is never recomputed
        seqs, length = recompute_features(
            f.get("batch_cap", f["batch_size"]), f["batch_size"], f["input_len"] + state, f["output_len"],
            f["kv_token_capacity"], f["block_size"], f["max_num_seqs"], f["static_batch"],
        )  # fmt: skip
        out["recompute_seqs"], out["recompute_len"] = seqs, np.where(seqs > 0, length - state, length)
        return out

    def times(p: Params, f: Features, hw: GPU) -> Times:
        seqs = f["recompute_seqs"]
        if not np.any(seqs > 0):
            return Times()
        redo = prefill_times(p, {**f, "batch_size": seqs, "input_len": f["recompute_len"]}, hw)
        return Times(decode=np.where(seqs > 0, redo.prefill, 0.0))

    return Term(
        "preemption_recompute",
        f"past the KV pool, a static batch's preempted requests recomputed (replay of vLLM's scheduler), at "
        f"{prefill.name}'s cost, in the decode phase",
        prefill.specs,
        times,
        adjust,
        reads=("batch_cap", "kv_token_capacity", "block_size", "max_num_seqs", "static_batch"),
    )
