"""Preemption past the KV pool in a static batch (`slimlib.model.preemption`, the recommended model's
`PREEMPTION_RECOMPUTE`): the replay of vLLM's scheduler and what the model charges for it."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from synthetic import SLIM_TRUE_PARAMS

from slimlib.errors import DataError
from slimlib.model import SlimModel
from slimlib.model.calibrated import TermModel
from slimlib.model.preemption import recompute_counts, recompute_features
from slimlib.model.slim import slim_terms
from slimlib.model.terms import PREEMPTION_RECOMPUTE, without
from slimlib.registry.gpus import get_gpu
from slimlib.schema import validate_table

GPU = "mi300x"


def test_a_hand_replayed_batch():
    """Token-sized blocks, no watermark, a pool of 6 tokens, 3 requests of 2 + 2 tokens: all three are admitted
    (2 tokens each); the first decode step needs a block per request and none is free, so the last is preempted
    with 1 token generated; the other two finish (2 tokens) and free 6; the preempted one recomputes its 2 + 1
    tokens and its prefill samples its last token."""
    assert recompute_counts(3, 2, 2, 6, 1, 256, 0.0) == (1, 3)


def test_a_batch_the_pool_holds_is_not_preempted():
    assert recompute_counts(32, 1024, 1024, 32 * 2048 + 16 * 64) == (0, 0)
    assert recompute_counts(300, 128, 128, 256 * 256 + 16 * 64) == (0, 0)  # beyond max_num_seqs: waits, fits


def test_past_the_pool_about_half_the_admitted_requests_are_preempted_and_recomputed():
    """IL = OL: the engine admits about pool / IL requests, and as they grow to IL + OL about half of them do not
    fit; each recomputes its prompt and what it had generated (between IL and IL + OL tokens)."""
    pool = 100_000
    pre, tokens = recompute_counts(128, 1024, 1024, pool)
    admitted, fit = pool / 1024, pool / 2048
    assert 0.8 * (admitted - fit) <= pre <= 1.5 * (128 - fit)
    assert 1024 * pre < tokens < 2048 * pre
    # more requests past the pool: more recomputed
    assert recompute_counts(256, 1024, 1024, pool)[1] > tokens


def test_a_prompt_the_pool_cannot_hold_is_refused():
    with pytest.raises(DataError, match="does not fit a pool"):
        recompute_counts(4, 4096, 4096, 4096)
    one = np.ones(2)
    with pytest.raises(
        DataError, match=r"^row 2 of the table: a request of 4096 \+ 4096 tokens does not fit"
    ):
        recompute_features(np.array([1.0, 4.0]), one, 4096 * one, 4096 * one, np.array([1e6, 4096.0]),
                           16 * one, 256 * one, one)  # fmt: skip


def _rows(batches, static=True):
    return pd.DataFrame({"model": "llama-3-70b", "gpu": GPU, "batch_size": batches, "input_len": 1024,
                         "output_len": 1024, "static_batch": static})  # fmt: skip


def test_the_model_charges_the_recompute_only_past_the_pool_and_in_a_static_batch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params = dict(SLIM_TRUE_PARAMS)
        slim = SlimModel.with_params(params, gpu=GPU)
        clean = TermModel.with_params(params, GPU, term_list=without(slim_terms(), PREEMPTION_RECOMPUTE.name))
        df = _rows([8, 16, 64, 128, 256])
        a, b = slim.predict(df), clean.predict(df)
        served = _rows([128, 256], static=False)
        sa, sb = slim.predict(served), clean.predict(served)
    past = slim._features(validate_table(df, require_target=False), get_gpu(GPU))["recompute_seqs"] > 0
    assert past.any() and not past.all()
    # rows the pool holds: identical; rows past it: slower, by time charged to the decode phase only (the prefill,
    # and so the TTFT, unchanged)
    np.testing.assert_allclose(a["pred_e2e_s"][~past], b["pred_e2e_s"][~past], rtol=1e-12)
    assert np.all(a["pred_throughput_tok_s"][past] < b["pred_throughput_tok_s"][past])
    np.testing.assert_allclose(a["pred_prefill_s"], b["pred_prefill_s"], rtol=1e-12)
    # under continuous batching the model does not charge it
    np.testing.assert_allclose(sa["pred_e2e_s"], sb["pred_e2e_s"], rtol=1e-12)
