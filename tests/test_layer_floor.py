"""The per-layer decode-kernel latency floor (registry ``layer_floor_s``, ``layer_floor_eff``) and the recommended
model's decode GEMMs that carry it: the part of a decode step tensor parallelism does not divide."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from synthetic import SLIM_TRUE_PARAMS, grid, synthesize

from slimlib.data.aiconfigurator import SYSTEMS
from slimlib.experiments.kernel_timing.layer_floor import layer_floor
from slimlib.model import make_model
from slimlib.model.features import prefill_peak_flops
from slimlib.model.slim import SlimModel
from slimlib.model.terms.rooflines import DECODE_GEMMS, dense_linear_flops_per_token
from slimlib.registry.gpus import get_gpu, gpu_names


def test_registry_layer_floors_are_the_kernel_tables():
    measured = {}
    for system, spec in SYSTEMS.items():
        floor, eff, nbytes, secs = layer_floor(spec["gpu"])
        gpu = get_gpu(spec["gpu"])
        assert gpu.layer_floor_s == pytest.approx(floor, abs=0.006e-6), system
        assert not gpu.layer_floor_source.startswith("proxy") and system in gpu.layer_floor_source
        # a line holds the four TP degrees: latency floor plus bytes at a bandwidth efficiency below 1
        fit = floor + nbytes / (eff * gpu.mem_bw)
        assert np.abs(fit / secs - 1).max() < 0.1 and 0.6 < eff <= 1.0
        # the floor is the part TP does not divide: TP 8 takes more than an eighth of TP 1 by at least most of it
        assert secs[-1] - secs[0] / 8 > 0.6 * floor and 15e-6 < floor < 40e-6
        measured[gpu.name] = gpu.layer_floor_s
    for g in map(get_gpu, gpu_names()):
        if g.name in measured or g.layer_floor_s is None:
            continue
        assert g.layer_floor_source.startswith("proxy") and g.layer_floor_s in measured.values(), g.name
    assert get_gpu("mi300x").layer_floor_s is None and get_gpu("cpu").layer_floor_s is None


def _no_floor(p, f, hw) -> np.ndarray:
    """The decode GEMMs' roofline without a floor: max(W / (eta_w BW), B F / (eta_c F_max))."""
    compute = f["batch_size"] * dense_linear_flops_per_token(f) / (p["eta_c"] * prefill_peak_flops(f, hw))
    return np.maximum(compute, f["dense_weight_bytes"] / (p["eta_w"] * hw.mem_bw))


def _features(gpu: str, tp: int, batch: list[float]):
    from slimlib.model.features import model_features

    df = pd.DataFrame({"model": "llama-3-8b", "gpu": gpu, "tensor_parallel": tp, "batch_size": batch,
                       "input_len": 512.0, "output_len": 128.0})  # fmt: skip
    hw = get_gpu(gpu)
    return model_features(df, hw), hw


def test_the_floor_sits_on_the_weight_reads_side_of_the_roofline_and_tp_does_not_divide_it():
    p = {"eta_w": 0.9, "eta_c": 0.8}
    f1, hw = _features("h100-sxm-80gb", 1, [1.0, 4096.0])
    f8, _ = _features("h100-sxm-80gb", 8, [1.0, 4096.0])
    floor = 32 * hw.layer_floor_s
    new = [np.asarray(DECODE_GEMMS.times(p, f, hw).step, dtype=float) for f in (f1, f8)]
    old = [_no_floor(p, f, hw) for f in (f1, f8)]
    # B = 1: the weight read plus every layer's floor, on one GPU or eight
    np.testing.assert_allclose(new[0][0], old[0][0] + floor, rtol=1e-12)
    np.testing.assert_allclose(new[1][0], old[1][0] + floor, rtol=1e-12)
    # far past the ridge: compute-bound, the floor hidden as the kernels' is
    np.testing.assert_allclose(new[0][1], old[0][1], rtol=1e-12)
    # no measured floor (AMD): the roofline alone
    f, g = _features("mi300x", 1, [1.0, 64.0])
    np.testing.assert_allclose(DECODE_GEMMS.times(p, f, g).step, _no_floor(p, f, g), rtol=1e-12)


def test_one_architecture_holds_eta_w_at_the_floor_lines_efficiency():
    truth = SlimModel.with_params({**SLIM_TRUE_PARAMS, "t_layer": 0.0, "t_act": 1e-7}, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid(gpu="h100-sxm-80gb"))
    one = SlimModel(n_starts=0).fit(df[df["model"] == df["model"].iloc[0]])
    assert one.params_["eta_w"] == get_gpu("h100-sxm-80gb").layer_floor_eff
    assert "layer_floor_eff" in one.held_reasons_["eta_w"]


def test_a_tp1_fit_predicts_the_composed_tp_curves(composed):
    # H100, Llama-3-8B: fit the TP-1 rows, predict TP 8 at B <= 32 (the protocol's tp fold); the kernels' latencies
    # do not shrink with TP, which the floor carries
    t = composed
    g = t[(t["gpu"] == "h100-sxm") & (t["model"] == "llama-3-8b") & (t["quantization"] == "")]
    train, test = g[g["tensor_parallel"] == 1], g[(g["tensor_parallel"] == 8) & (g["batch_size"] <= 32)]
    floor = make_model("slim", n_starts=0).fit(train)
    truth = test["throughput_tok_s"].to_numpy()
    with_floor = floor.predict(test)["pred_throughput_tok_s"].to_numpy() / truth - 1
    assert np.abs(with_floor).mean() < 0.08


def test_slim_parameter_files_before_the_floor_are_refused(tmp_path):
    import json

    from slimlib.errors import SlimError
    from slimlib.model import load_params

    m = make_model("slim")
    doc = json.loads(m.with_params({s.name: s.init for s in m.param_specs()}, gpu="h100-sxm").to_json())
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**doc, "format_version": 13}), encoding="utf-8")
    with pytest.raises(SlimError, match="format version 13.*refit"):
        load_params(path)
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert load_params(path).params_ == doc["params"]
