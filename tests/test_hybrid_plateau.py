"""The hybrid plateau characterization: knees from decode-throughput curves, memory caps from vLLM's block
accounting, and a hybrid's decode step less bound to the context than its full-attention peer's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.experiments.characterization import hybrid_plateau as hp
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture


def _curve(model, batches, tok_s, cap):
    b = np.asarray(batches, float)
    return pd.DataFrame({"model": model, "kind": "full attention", "tensor_parallel": 1, "quantization": "",
                         "context": 1024, "batch_size": b,
                         "memory_cap": cap, "decode_tok_s": tok_s, "decode_step_ms": 1e3 * b / np.asarray(tok_s),
                         "context_share": 0.5})  # fmt: skip


def test_knee_is_the_first_doubling_under_ten_percent_else_the_memory_cap():
    flat = _curve("a", [1, 2, 4, 8, 16], [100.0, 190, 300, 320, 330], 16)  # 4 -> 8 adds 6.7%
    rising = _curve("b", [1, 2, 4, 8, 12], [100.0, 190, 300, 450, 600], 12)  # never flat: the cap
    # 8 -> 12 adds 10% over half a doubling: 21% per doubling, not a knee
    partial = _curve("c", [1, 2, 4, 8, 12], [100.0, 190, 300, 450, 495], 12)
    beyond = _curve("d", [1, 2, 4], [100.0, 190, 300], 6)  # the cap lies beyond the batches computed
    k = hp.knees(pd.concat([flat, rising, partial, beyond])).set_index("model")
    assert (k.loc["d", "knee_batch"], k.loc["d", "knee_reason"]) == (4, "largest batch computed")
    assert (k.loc["a", "knee_batch"], k.loc["a", "knee_reason"]) == (4, "doubling gains < 10%")
    assert (k.loc["b", "knee_batch"], k.loc["b", "knee_reason"]) == (12, "memory")
    assert (k.loc["c", "knee_batch"], k.loc["c", "knee_reason"]) == (12, "memory")
    assert k.loc["a", "max_decode_tok_s"] == 330


def test_memory_cap_is_whole_requests_of_the_pool():
    for name in ("qwen3-32b", "qwen3.5-27b"):
        s = serving_config(get_architecture(name), hp.GPU)
        cap = hp.memory_cap(name, hp.GPU, 32768 + 128)
        assert (
            cap == s.num_gpu_blocks // int(s.request_blocks(32768 + 128)) == int(s.max_sequences(32768 + 128))
        )
    # the hybrid caches keys and values in a quarter of its layers: more than 3x the sequences at 32k
    assert hp.memory_cap("qwen3.5-27b", hp.GPU, 32896) > 3 * hp.memory_cap("qwen3-32b", hp.GPU, 32896)


def test_hybrid_decode_step_is_less_bound_to_the_context():
    model, n = hp.calibrate()
    assert n > 1000  # every H200 curve: bf16 and fp8, TP 1 to 8
    pairs = (("qwen3-32b", "qwen3.5-27b", 1, ""),)
    curves = hp.plateau_curves(model, pairs=pairs, contexts=(8192,), batches=(1, 4, 16))
    assert (curves["batch_size"] <= curves["memory_cap"]).all()
    assert set(curves.groupby("model")["batch_size"].max()) == {16}
    at = curves.set_index(["model", "batch_size"])
    for b in (1, 4, 16):
        full, hybrid = at.loc[("qwen3-32b", b)], at.loc[("qwen3.5-27b", b)]
        assert 0 < hybrid["context_share"] < full["context_share"] < 1
        assert hybrid["decode_tok_s"] == pytest.approx(b / (hybrid["decode_step_ms"] / 1e3))


def test_the_kernel_composition_refuses_a_hybrid():
    from slimlib.experiments.kernel_timing.composition import OutOfGridError, kernel_set

    with pytest.raises(OutOfGridError, match="qwen3.5-27b on h200_sxm: linear-attention"):
        kernel_set("qwen3.5-27b", "h200")


def test_the_sparse_model_reads_less_of_its_context_on_eight_gpus():
    model, _ = hp.calibrate()
    pairs = (("deepseek-v3", "deepseek-v3.2", 8, "fp8"),)
    curves = hp.plateau_curves(model, pairs=pairs, contexts=(32768,), batches=(1, 8))
    at = curves.set_index(["model", "batch_size"])
    assert set(curves["tensor_parallel"]) == {8} and set(curves["quantization"]) == {"fp8"}
    for b in (1, 8):
        assert at.loc[("deepseek-v3.2", b), "context_share"] < at.loc[("deepseek-v3", b), "context_share"]
        assert at.loc[("deepseek-v3.2", b), "decode_step_ms"] < at.loc[("deepseek-v3", b), "decode_step_ms"]
    # its indexer keys add to the cache: fewer sequences than DeepSeek-V3 at the same context
    assert hp.memory_cap("deepseek-v3.2", hp.GPU, 32896, 8, "fp8") < hp.memory_cap(
        "deepseek-v3", hp.GPU, 32896, 8, "fp8"
    )
