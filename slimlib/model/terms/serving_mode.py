"""The two serving modes of the roofline model (beyond the paper): the engine steps a request's E2E is made of.

One model, two documented modes, chosen per row by the table's optional ``static_batch`` column (B is the
KV-capped batch ``B_eff = min(B, B_kv)``, `slimlib.model.terms.batch.effective_batch` without its token-budget cap,
which the steps below model; ``N``: feature ``max_num_batched_tokens``, vLLM's chunked-prefill token budget per
step, only where feature ``chunked_prefill`` is true):

* **static** (``static_batch`` true: B requests that start together, as offline batch sweeps or a benchmark client
  sending B equal requests at concurrency B): the B IL prompt tokens run first, in ``n_c = ceil(B IL / N)``
  prefill passes of at most N tokens (one pass without chunked prefill); then OL - 1 decode steps of B sequences.
  Request i gets its first token at the end of the pass holding its prompt's last token, so the mean TTFT is
  ``t_fixed + (n_c + 1) / (2 n_c) T_pre``; its later token gaps carry the passes still running (vLLM schedules
  running decodes first, then prefill chunks), so every request ends at about ``T_pre + (OL - 1) t_dec``: the mean
  E2E is ``t_fixed + T_pre + (OL - 1) t_dec`` and the mean TPOT ``(E2E - TTFT) / (OL - 1)``, which is ``t_dec``
  plus the prefill chunk share ``(n_c - 1) / (2 n_c) T_pre / (OL - 1)``.
* **continuous** (otherwise: requests arrive while others decode, B running at a time, as a benchmark client at
  concurrency B in steady state): every step carries the running sequences' decodes and prefill chunks of new
  requests. In the fluid steady state a request lives ``S = max(OL, B (IL + OL - 1) / N)`` steps (the B requests'
  IL + OL - 1 step tokens fill at most N per step; ``S = OL`` without chunked prefill), each step processing
  ``B (IL + OL - 1) / S`` tokens: prefill attention of ``B / S`` prompts and decode attention of
  ``B (OL - 1) / S`` sequences. Its first ``n_p = S - (OL - 1)`` steps carry its prompt: ``TTFT = t_fixed + n_p
  t_s``, ``TPOT = t_s``, ``E2E = TTFT + (OL - 1) TPOT``. Past ``B = N OL / (IL + OL - 1)`` the budget binds and
  throughput saturates at N tokens per step (the physics behind `effective_batch`'s ``B_tok``).

`SERVING_MODE` sets, per row, for the two kinds of step ``pass`` (a prefill pass; in continuous mode the mixed
step) and ``step`` (a decode step; in continuous mode the same mixed step): ``{kind}_count`` (how many one
request's E2E holds), ``{kind}_tokens`` (tokens through the linear layers), ``{kind}_prompts`` (prompts whose
prefill attention it runs), ``{kind}_decodes`` (sequences whose decode attention it runs), ``{kind}_seqs``
(sequences it schedules); and ``ttft_share`` (the mean TTFT's share of the prefill time).
"""

from __future__ import annotations

import numpy as np

from slimlib.model.features import Features
from slimlib.model.terms.batch import effective_batch
from slimlib.model.terms.term import Term

#: the two kinds of engine step every roofline term is timed on
STEP_KINDS = ("pass", "step")


def prefill_passes(b: np.ndarray, il: np.ndarray, budget: np.ndarray, chunked: np.ndarray) -> np.ndarray:
    """``n_c``: the prefill passes of a static batch of `b` prompts of `il` tokens, ``ceil(b IL / N)`` with
    chunked prefill, else 1."""
    return np.asarray(np.where(chunked, np.ceil(b * il / budget), 1.0), dtype=float)


def ttft_share(f: Features) -> np.ndarray:
    """The mean TTFT's share of the prefill time per row: ``(n_c + 1) / (2 n_c)`` for a static batch
    (`prefill_passes` on the row's batch), 1 under continuous batching (module docstring)."""
    chunked = np.asarray(f["chunked_prefill"], dtype=float) > 0
    static = np.asarray(f["static_batch"], dtype=float) > 0
    n_c = prefill_passes(f["batch_size"], f["input_len"], f["max_num_batched_tokens"], chunked)
    return np.asarray(np.where(static, (n_c + 1.0) / (2.0 * n_c), 1.0), dtype=float)


def serving_latencies(
    pre: np.ndarray, dec: np.ndarray, e2e: np.ndarray, share: np.ndarray, output_len: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(TTFT, TPOT) from a model's composed prefill, decode and E2E seconds and the TTFT's `share` of the prefill
    (`ttft_share`): ``TTFT = (E2E - T_pre - T_dec) + share T_pre`` (the fixed part, then the prefill passes up to
    the request's own) and ``TPOT = (E2E - TTFT) / (OL - 1)`` (NaN at OL = 1), so ``E2E = TTFT + (OL - 1) TPOT``."""
    fixed = e2e - pre - dec
    ttft = fixed + share * pre
    later = np.asarray(output_len, dtype=float) - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(later > 0, (e2e - ttft) / later, np.nan)
    return np.asarray(ttft, dtype=float), np.asarray(tpot, dtype=float)


def _static(f: Features, b: np.ndarray, chunked: np.ndarray) -> dict[str, np.ndarray]:
    il, ol = f["input_len"], f["output_len"]
    n_c = prefill_passes(b, il, f["max_num_batched_tokens"], chunked)
    return {
        "pass_count": n_c,
        "pass_tokens": b * il / n_c,
        "pass_prompts": b / n_c,
        "pass_decodes": np.zeros_like(b),
        "pass_seqs": np.maximum(b / n_c, 1.0),
        "step_count": ol - 1.0,
        "step_tokens": b,
        "step_prompts": np.zeros_like(b),
        "step_decodes": b,
        "step_seqs": b,
        "ttft_share": (n_c + 1.0) / (2.0 * n_c),
    }


def _continuous(f: Features, b: np.ndarray, chunked: np.ndarray) -> dict[str, np.ndarray]:
    il, ol = f["input_len"], f["output_len"]
    later = ol - 1.0
    steps = np.where(chunked, np.maximum(ol, b * (il + later) / f["max_num_batched_tokens"]), ol)
    mixed = {
        "tokens": b * (il + later) / steps,
        "prompts": b / steps,
        "decodes": b * later / steps,
        "seqs": b,
    }
    out = {f"{kind}_{k}": np.asarray(v, dtype=float) for kind in STEP_KINDS for k, v in mixed.items()}
    out["pass_count"] = steps - later
    out["step_count"] = later
    out["ttft_share"] = np.ones_like(b)
    return out


def serving_steps(f: Features) -> Features:
    """`f` with the KV-capped batch (the requested one kept as ``batch_cap``) and the step features of its mode
    (module docstring)."""
    shape = np.shape(f["batch_size"])
    no_budget = {**f, "chunked_prefill": np.zeros(shape)}
    b = np.asarray(effective_batch(no_budget), dtype=float)
    chunked = np.asarray(f["chunked_prefill"], dtype=float) > 0
    static = np.asarray(f["static_batch"], dtype=float) > 0
    s, c = _static(f, b, chunked), _continuous(f, b, chunked)
    out = dict(f)
    out["batch_cap"] = f["batch_size"]
    out["batch_size"] = b
    for k in s:
        out[k] = np.asarray(np.where(static, s[k], c[k]), dtype=float)
    return out


SERVING_MODE = Term(
    "serving_mode",
    "static batch (prefill passes of the token budget, then OL - 1 decode steps) or continuous batching (mixed "
    "steps of decodes and prefill chunks), B_eff = min(B, KV slots / (IL + kappa OL))",
    adjust=serving_steps,
    reads=("kv_token_capacity", "max_num_batched_tokens", "static_batch", "chunked_prefill"),
)
