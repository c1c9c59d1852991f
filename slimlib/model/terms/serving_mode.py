"""TTFT and TPOT from a batch's prefill and decode (beyond the paper).

A static batch (``static_batch`` true: B requests that start together) runs its B IL prompt tokens first, in
``n_c = ceil(B IL / N)`` prefill passes of the chunked-prefill budget N (one pass without chunked prefill); request
i gets its first token at the end of the pass holding its prompt's last token, so the mean TTFT is ``t_fixed +
(n_c + 1) / (2 n_c) T_pre``. Otherwise the whole batch prefill counts (``ttft_share`` 1). ``TPOT = (E2E - TTFT) /
(OL - 1)``, so ``E2E = TTFT + (OL - 1) TPOT``.
"""

from __future__ import annotations

import numpy as np

from slimlib.model.features import Features


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
