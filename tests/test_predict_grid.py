"""One predict path: `predict_grid` equals `predict` on the same rows, for every calibrated method, over random
(model, GPU, B, IL, OL, TP, optional engine columns) draws, including rows where the KV cap and chunked prefill bind.

Each column is one entry of `DRAWS`: a new table column (e.g. a precision) is one more draw."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.model import METHODS, SlimModel
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.memory import tensor_parallel_problem
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import architecture_names, get_architecture
from slimlib.registry.gpus import get_gpu, gpu_names

Draw = Callable[[np.random.Generator, int], np.ndarray]
MODELS = ["opt-1.3b", "llama-2-7b", "llama-2-13b", "mistral-7b", "llama-3-8b", "qwen2-7b"]
#: workload column -> random values for n workloads (NaN / None: the column is missing in that row)
DRAWS: dict[str, Draw] = {
    "model": lambda rng, n: rng.choice([m for m in MODELS if m in architecture_names()], n),
    "input_len": lambda rng, n: rng.integers(16, 4097, n).astype(float),
    "output_len": lambda rng, n: rng.integers(16, 2049, n).astype(float),
    "gpu_blocks": lambda rng, n: np.where(rng.random(n) < 0.5, rng.integers(200, 8000, n), np.nan),
    "block_size": lambda rng, n: rng.choice([16.0, 32.0], n),
    "chunked_prefill": lambda rng, n: rng.random(n) < 0.5,
    "static_batch": lambda rng, n: rng.random(n) < 0.5,
    "kv_cache_dtype": lambda rng, n: rng.choice(["auto", "fp8"], n),
    "quantization": lambda rng, n: rng.choice(["", "fp8"], n),
}
#: GPUs a tensor-parallel degree above 1 can be drawn for (those with an interconnect in the registry)
TP_CHOICES = (1, 2, 4, 8)
PARAMS = {
    "slim": {
        "eta_c": 0.6,
        "t_fixed": 0.05,
        "eta_attn": 0.8,
        "eta_w": 0.9,
        "alpha": 2e-5,
        "t_step": 3e-3,
        "t_layer": 0.0,
        "t_act": 0.0,
    },
    "paper": {"eta_c": 0.6, "t_fixed": 0.05, "eta_m": 0.8, "B0": 4.0, "alpha": 2e-5, "gamma": 3e-7},
}


def _model(name: str, gpu: str) -> CalibratedModel:
    m = METHODS[name]
    params = PARAMS.get(name) or PARAMS["slim" if m.cls is SlimModel else "paper"]
    model = m.cls.with_params(params, gpu=gpu, **m.options)  # type: ignore[attr-defined]
    assert isinstance(model, CalibratedModel)
    return model


def _workloads(rng: np.random.Generator, n: int, gpu: str) -> pd.DataFrame:
    w = pd.DataFrame({col: draw(rng, n) for col, draw in DRAWS.items()})
    try:  # only the weight precisions vLLM runs on this GPU
        serving_config(get_architecture(MODELS[0]), gpu, quantization="fp8")
    except DataError:
        w["quantization"] = ""
    if not get_gpu(gpu).link_bw:
        return w.assign(tensor_parallel=1.0)
    tp = []
    for m in w["model"]:  # only the degrees vLLM accepts for the model's heads
        a = get_architecture(str(m))
        tp.append(
            rng.choice([p for p in TP_CHOICES if not tensor_parallel_problem(a.n_heads, a.n_kv_heads, p)])
        )
    return w.assign(tensor_parallel=np.asarray(tp, dtype=float))


CALIBRATED = [k for k, m in METHODS.items() if issubclass(m.cls, CalibratedModel)]


@pytest.mark.parametrize("method", CALIBRATED)
def test_grid_is_predict_on_random_configurations(method: str) -> None:
    rng = np.random.default_rng(18)
    bound_kv = bound_tok = 0
    for trial in range(12):
        gpu = str(rng.choice(gpu_names()))
        model = _model(method, gpu)
        w = _workloads(rng, 6, gpu)
        b = np.unique(rng.integers(1, 1025, 5).astype(float))
        thr, e2e = model.predict_grid(w, b)
        # the same rows built one at a time, independently of the grid's own cross product
        rows = pd.DataFrame([{**w.iloc[i].to_dict(), "batch_size": bb} for i in range(len(w)) for bb in b])
        pred = model.predict(
            rows, served="none"
        )  # the throughput path alone (the served latencies add columns)
        np.testing.assert_allclose(
            thr.ravel(), pred["pred_throughput_tok_s"], rtol=1e-9, err_msg=f"trial {trial}"
        )
        np.testing.assert_allclose(e2e.ravel(), pred["pred_e2e_s"], rtol=1e-9, err_msg=f"trial {trial}")
        if isinstance(model, SlimModel):
            b_eff = model.effective_batch(rows, get_gpu(gpu))
            capped = b_eff < rows["batch_size"].to_numpy() - 1e-9
            chunk = rows["chunked_prefill"].to_numpy(dtype=bool)
            bound_tok += int((capped & chunk).sum())
            bound_kv += int((capped & ~chunk).sum())
    if METHODS[method].cls is SlimModel:  # the draws must reach the caps, or the test proves little
        assert bound_kv > 20 and bound_tok > 20, (bound_kv, bound_tok)


def test_grid_applies_the_caps_on_public_style_rows() -> None:
    """Llama-2-7B at B = 512, OL 520, with the logged KV blocks: the grid is capped as predict is (an earlier
    grid ran B = 512 uncapped)."""
    model = _model("slim", "h100-sxm-64gb")
    w = pd.DataFrame({"model": ["llama-2-7b"], "input_len": [250.0], "output_len": [520.0],
                      "gpu_blocks": [2900.0], "block_size": [16.0], "chunked_prefill": [True]})  # fmt: skip
    thr, _ = model.predict_grid(w, np.array([64.0, 512.0]))
    uncapped = model.predict(w.drop(columns=["gpu_blocks", "chunked_prefill"]).assign(batch_size=512.0))
    assert thr[0, 1] < 0.95 * float(uncapped["pred_throughput_tok_s"].iloc[0])
