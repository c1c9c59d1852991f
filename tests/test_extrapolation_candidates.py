"""The batch axis's candidate terms (`slimlib.experiments.accuracy.extrapolation_candidates`): the decode-step GEMM
roofline turns compute-bound exactly at `decode_gemm_ridge`, the ridge `ROOF_LINEAR` shares and that
`slimlib.experiments.kernel_timing.ridge_check` validates against the measured vLLM GEMM kernels (tests of
`test_roofline_model`); the candidates are the recommended terms with one change; names resolve."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import UnknownNameError
from slimlib.experiments.accuracy.extrapolation import new_model
from slimlib.experiments.accuracy.extrapolation_candidates import (
    REPRODUCED_CANDIDATES,
    SLIM_V3_TERMS,
    TERM_CANDIDATES,
    resolve_candidate,
)
from slimlib.model.extended import slim_terms
from slimlib.model.features import model_features
from slimlib.model.terms import (
    ACTIVATION_WORK,
    ATTENTION_FACTOR,
    ATTENTION_FACTOR_MEASURED,
    DECODE_ATTENTION_KERNEL,
    HOST_SEQUENCE_OVERHEAD,
    PREEMPTION_RECOMPUTE,
    PREFILL_SERVED,
    PREFILL_SERVED_MEASURED,
    TP_WORKER_COMM,
)
from slimlib.model.terms.rooflines import (
    STEP_GEMM_ROOFLINE,
    STEP_GEMM_ROOFLINE_ALL,
    STEP_GEMM_ROOFLINE_FLOOR,
    STEP_GEMM_ROOFLINE_V5,
    STEP_GEMM_ROOFLINE_V6,
    decode_gemm_ridge,
    measured_curve_time,
)
from slimlib.registry.gpus import get_gpu

P = {"eta_c": 0.7, "eta_w": 0.9}


@pytest.mark.parametrize(("model", "gpu"), [("llama-2-7b", "h100-sxm-80gb"), ("opt-6.7b-s8", "cpu")])
def test_the_step_gemm_roofline_turns_compute_bound_at_the_decode_gemm_ridge(model, gpu):
    """Format 5's step roofline (eta_c of the registry peak on every device), which the recommended one still is on
    a device without a measured decode-GEMM roof."""
    b = np.unique(np.round(np.geomspace(1, 8192, 200)))
    df = pd.DataFrame({"model": model, "gpu": gpu, "batch_size": b, "input_len": 128.0, "output_len": 128.0})
    hw = get_gpu(gpu)
    f = model_features(df, hw)
    assert STEP_GEMM_ROOFLINE_V5.times is not None and STEP_GEMM_ROOFLINE.times is not None
    t = np.asarray(STEP_GEMM_ROOFLINE_V5.times(P, f, hw).step, dtype=float)
    if hw.decode_gemm_flops is None and not hw.decode_gemm_curve:
        np.testing.assert_array_equal(np.asarray(STEP_GEMM_ROOFLINE.times(P, f, hw).step, dtype=float), t)
    ridge = float(decode_gemm_ridge(f, hw, P["eta_c"], P["eta_w"])[0])
    below, above = b < ridge, b > ridge
    assert below.any() and above.any()
    assert np.ptp(t[below]) == pytest.approx(0.0, abs=1e-15)  # the weight read: flat in B
    np.testing.assert_allclose(
        t[above] / b[above], t[above][0] / b[above][0], rtol=1e-12
    )  # the FLOPs: linear
    assert t[below][0] == pytest.approx(f["dense_weight_bytes"][0] / (P["eta_w"] * hw.mem_bw), rel=1e-12)
    if (
        gpu == "cpu"
    ):  # the CPU engine: about 417 GFLOP/s over 30.6 GB/s, b_w 2 -> about 14 at equal eta
        assert 5 < ridge < 40
    else:
        assert ridge > 100
    t_all = np.asarray(STEP_GEMM_ROOFLINE_ALL.times(P, f, hw).step, dtype=float)  # type: ignore[misc]
    assert (t_all >= t - 1e-15).all()  # the LM head's FLOPs only add (earlier turn)


def _cpu_steps(term, b_max: int, hw=None, p=P):
    """(B, features, device, step seconds of `term`) for qwen3s-h1024 on the CPU engine at B = 1 ... `b_max`."""
    hw = hw or get_gpu("cpu")
    b = np.arange(1.0, b_max + 1.0)
    df = pd.DataFrame({"model": "qwen3s-h1024", "gpu": "cpu", "batch_size": b, "input_len": 128.0,
                       "output_len": 64.0})  # fmt: skip
    f = model_features(df, hw)
    assert term.times is not None
    return b, f, hw, np.asarray(term.times(p, f, hw).step, dtype=float)


def test_format_6_runs_the_cpu_engines_step_gemms_at_the_measured_decode_gemm_roof():
    """``B (F_dense + F_head) / decode_gemm_flops`` past the weight read: the FLOPs the benchmark timed, over its
    roof, no eta_c; the weight read unchanged."""
    b, f, hw, t = _cpu_steps(STEP_GEMM_ROOFLINE_V6, 256)
    assert hw.decode_gemm_flops is not None and hw.decode_gemm_flops < hw.peak_flops  # one thread of two
    read = f["dense_weight_bytes"][0] / (P["eta_w"] * hw.mem_bw)
    per_seq = (f["linear_flops_per_token"][0] + f["lm_head_flops_per_token"][0]) / hw.decode_gemm_flops
    np.testing.assert_allclose(t, np.maximum(read, b * per_seq), rtol=1e-12)
    assert t[0] == pytest.approx(read) and t[-1] == pytest.approx(256 * per_seq)
    assert f["lm_head_flops_per_token"][0] == pytest.approx(
        2 * 18992 * 1024
    )  # Qwen3's vocabulary / 8, D 1024
    # eta_c no longer enters the CPU's decode GEMMs
    np.testing.assert_array_equal(_cpu_steps(STEP_GEMM_ROOFLINE_V6, 256, p={**P, "eta_c": 0.1})[3], t)
    # the recommended term on a device with the roof but no curve is format 6's
    roof_only = replace(hw, decode_gemm_curve=())
    np.testing.assert_array_equal(_cpu_steps(STEP_GEMM_ROOFLINE, 256, hw=roof_only)[3], t)


def test_on_the_cpu_engine_the_step_gemms_follow_the_measured_decode_gemm_curve():
    """The weights the benchmark timed times the registry's seconds per weight: the measured pass itself at every
    measured token count, linear between them and past the last one; no eta_w, no eta_c."""
    b, f, hw, t = _cpu_steps(STEP_GEMM_ROOFLINE, 512)
    curve = dict(hw.decode_gemm_curve)
    assert sorted(curve) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    weights = (f["linear_flops_per_token"][0] + f["lm_head_flops_per_token"][0]) / 2
    for m, s in curve.items():
        assert t[m - 1] == pytest.approx(weights * s, rel=1e-12)
    assert t[11] == pytest.approx(weights * (curve[8] + curve[16]) / 2, rel=1e-12)  # B 12: halfway
    slope = (curve[256] - curve[128]) / 128
    assert t[511] == pytest.approx(weights * (curve[256] + 256 * slope), rel=1e-12)  # past 256: its slope
    # near the ridge the measured pass is slower than the max of its weight read and its roof (one thread)
    read, roof = weights * curve[1], 16 * 2 * weights / hw.decode_gemm_flops
    assert t[15] / max(read, roof) == pytest.approx(1.36, abs=0.005)  # the figure the docs quote
    for p in ({**P, "eta_c": 0.1}, {**P, "eta_w": 0.1}):  # neither efficiency enters
        np.testing.assert_array_equal(_cpu_steps(STEP_GEMM_ROOFLINE, 512, p=p)[3], t)
    # a GPU without a curve keeps the roofline of the registry peaks
    gpu = get_gpu("h100-sxm-80gb")
    g = model_features(pd.DataFrame({"model": "llama-2-7b", "gpu": gpu.name, "batch_size": b, "input_len": 128.0,
                                     "output_len": 64.0}), gpu)  # fmt: skip
    np.testing.assert_array_equal(np.asarray(STEP_GEMM_ROOFLINE.times(P, g, gpu).step, dtype=float),
                                  np.asarray(STEP_GEMM_ROOFLINE_V5.times(P, g, gpu).step, dtype=float))  # type: ignore[misc]  # fmt: skip


def test_the_measured_curve_is_linear_between_points_flat_below_and_extended_past_the_last():
    points = ((1, 2.0), (4, 2.0), (8, 4.0))
    got = measured_curve_time(points, [0.5, 1, 2.5, 6, 8, 12])
    np.testing.assert_allclose(got, [2.0, 2.0, 2.0, 3.0, 4.0, 6.0])


def test_a_fit_on_the_cpu_engine_holds_eta_w_and_fits_t_step():
    """On a device with a measured curve the recommended model reads no eta_w: it is held (saying why), and
    t_step is no longer one constant with the weight read, so it is fitted."""
    from slimlib.model.extended import ExtendedSlimModel

    truth = {"eta_c": 0.6, "t_fixed": 0.05, "eta_attn": 1.0, "eta_w": 0.758, "eta_e": 0.437, "alpha": 2e-5,
             "t_step": 4e-3, "t_layer": 0.0, "t_act": 0.0}  # fmt: skip
    df = pd.DataFrame([(b, il, ol) for b in (1, 2, 4, 8, 16, 32) for il in (128, 512) for ol in (64, 256)],
                      columns=["batch_size", "input_len", "output_len"]).assign(model="qwen3s-h768", gpu="cpu")  # fmt: skip
    gen = ExtendedSlimModel.with_params(truth, "cpu")
    df["throughput_tok_s"] = gen.predict(df)["pred_throughput_tok_s"].to_numpy()
    fit = ExtendedSlimModel(n_starts=2).fit(df)
    assert "unused" in fit.held_reasons_["eta_w"] and "decode_gemm_curve" in fit.held_reasons_["eta_w"]
    assert "t_step" not in fit.held_
    assert fit.params_["t_step"] == pytest.approx(4e-3, rel=0.05)


#: the candidates with the recommended model's terms of parameter-file format 10 or later
_SINCE_V10 = ("slim-v10", "slim-v11", "slim-v12", "slim-v13", "slim-v14", "slim-v15", "slim+tp-comm",
              "slim+zero-test")  # fmt: skip


def test_candidates_are_the_previous_recommended_terms_with_one_change():
    base = [t.name for t in SLIM_V3_TERMS]
    for name, terms in TERM_CANDIDATES.items():
        if name in ("slim-v4", "slim-v5", "slim-v6", "slim-v7", "slim-v8", "slim-v9", *_SINCE_V10):
            continue  # the recommended terms before the causal count, the measured roof, curve, attention, t_act,
            # the measured prefill-attention rate, the host work per sequence, and with the TP communication (next
            # tests)
        names = [t.name for t in terms]
        assert len(set(names) ^ set(base)) in (0, 1, 2), name
        assert resolve_candidate(name) == (name, terms)
    assert "step_weight_read" not in [t.name for t in TERM_CANDIDATES["slim-v3+step-roofline"]]
    assert resolve_candidate("slim") == "slim"
    with pytest.raises(UnknownNameError, match="slim-v3\\+step-roofline"):
        resolve_candidate("slim-v3+step-rooflin")
    assert set(REPRODUCED_CANDIDATES) <= set(TERM_CANDIDATES)


def test_the_recommended_terms_are_v3_with_the_step_roofline_the_layer_overhead_and_the_causal_prefill():
    # the changes the cross-validation admitted (README "Selection by extrapolation"), nothing else
    now = {t.name for t in slim_terms()}
    roof = {t.name for t in TERM_CANDIDATES["slim-v3+step-roofline"]}
    layer = {t.name for t in TERM_CANDIDATES["slim-v3+layer-overhead"]}
    v4 = {t.name for t in TERM_CANDIDATES["slim-v4"]}
    assert v4 == (roof | layer) - {"step_weight_read"}
    assert now == v4 - {"prefill_compute_served_eq8", "attention_factor", "decode_attention"} | {
        "decode_attention_kernel",
        "prefill_compute_served_measured",
        "attention_factor_measured",
        "activation_work",
        "host_sequence_overhead",
        "preemption_recompute",
    }
    # slim-v15, before the layer floor: format 13's terms (the step roofline without it), with the prior test and
    # device priors; only the recommended model and its two variants carry the floor
    v15 = TERM_CANDIDATES["slim-v15"]
    assert [t.name for t in v15] == [t.name for t in slim_terms()]

    def has(terms, term):  # by identity: the two step rooflines share their name and parameters
        return any(t is term for t in terms)

    assert has(v15, STEP_GEMM_ROOFLINE) and not has(v15, STEP_GEMM_ROOFLINE_FLOOR)
    assert has(slim_terms(), STEP_GEMM_ROOFLINE_FLOOR) and not has(slim_terms(), STEP_GEMM_ROOFLINE)

    def with_priors(name):  # fitted with the prior test and the device's priors
        m = new_model(resolve_candidate(name), 0)
        return m.test_priors_at_bound is True and m.device_priors is True

    def carriers(term):
        return [n for n in TERM_CANDIDATES if has(TERM_CANDIDATES[n], term)]

    assert with_priors("slim-v15") and carriers(STEP_GEMM_ROOFLINE_FLOOR) == [
        "slim+tp-comm",
        "slim+zero-test",
    ]
    # slim-v14, before the measured kernel's attention width: format 12's terms, with the prior test and device
    # priors; the paged-attention widening on every device
    v14 = TERM_CANDIDATES["slim-v14"]
    assert [t.name for t in v14] == [
        "decode_attention" if t is DECODE_ATTENTION_KERNEL else t.name for t in v15
    ] and has(v14, STEP_GEMM_ROOFLINE)
    assert with_priors("slim-v14")
    assert carriers(DECODE_ATTENTION_KERNEL) == ["slim-v15", "slim+tp-comm", "slim+zero-test"]
    # slim-v13, before the recompute of preempted prompts: format 11's terms, with the prior test and device priors
    v13 = TERM_CANDIDATES["slim-v13"]
    assert [t.name for t in v13] == [t.name for t in v14 if t is not PREEMPTION_RECOMPUTE]
    assert with_priors("slim-v13")
    assert carriers(PREEMPTION_RECOMPUTE) == ["slim-v14", "slim-v15", "slim+tp-comm", "slim+zero-test"]
    # slim+zero-test: the recommended terms and fitting rules plus the zero test, nothing else
    assert [t.name for t in TERM_CANDIDATES["slim+zero-test"]] == [t.name for t in slim_terms()]
    zt = new_model(resolve_candidate("slim+zero-test"), 0)
    assert zt.test_zero_costs is True and zt.test_priors_at_bound is True and zt.device_priors is True
    assert [
        n for n in TERM_CANDIDATES if getattr(new_model(resolve_candidate(n), 0), "test_zero_costs", False)
    ] == ["slim+zero-test"]
    v10 = TERM_CANDIDATES["slim-v10"]  # format 10: without the host work per sequence, nothing else changed
    assert [t.name for t in v10] == [t.name for t in v13 if t is not HOST_SEQUENCE_OVERHEAD]
    assert all(
        HOST_SEQUENCE_OVERHEAD not in TERM_CANDIDATES[n]
        for n in TERM_CANDIDATES
        if n.startswith("slim-v") and n not in ("slim-v11", "slim-v12", "slim-v13", "slim-v14", "slim-v15")
    )
    # format 11 before the prior test: its terms, fitted without it; slim+tp-comm fits with it
    assert [t.name for t in TERM_CANDIDATES["slim-v11"]] == [t.name for t in v13]
    assert resolve_candidate("slim-v11") == ("slim-v11", TERM_CANDIDATES["slim-v11"])
    assert new_model(resolve_candidate("slim-v11"), 0).test_priors_at_bound is False
    assert new_model(resolve_candidate("slim+tp-comm"), 0).test_priors_at_bound is True
    assert new_model("slim", 0).test_priors_at_bound is True
    # slim-v12, before the device's own priors: the recommended terms with the prior test, the H100 priors
    assert [t.name for t in TERM_CANDIDATES["slim-v12"]] == [t.name for t in v13]
    v12 = new_model(resolve_candidate("slim-v12"), 0)
    assert v12.test_priors_at_bound is True and v12.device_priors is False
    assert new_model(resolve_candidate("slim+tp-comm"), 0).device_priors is True
    assert new_model("slim", 0).device_priors is True
    # the recommended terms plus the TP communication, nothing else; no other candidate has it
    assert [t.name for t in TERM_CANDIDATES["slim+tp-comm"]] == [
        t.name for t in (*slim_terms(), TP_WORKER_COMM)
    ]
    assert [n for n in TERM_CANDIDATES if TP_WORKER_COMM in TERM_CANDIDATES[n]] == ["slim+tp-comm"]
    v9 = TERM_CANDIDATES[
        "slim-v9"
    ]  # format 9: the prompt's attention at eta_c everywhere, nothing else changed
    assert [t.name for t in v9 if t is not PREFILL_SERVED] == [
        t.name for t in v10 if t is not PREFILL_SERVED_MEASURED
    ]
    assert PREFILL_SERVED in v9 and PREFILL_SERVED_MEASURED in slim_terms()
    v8 = TERM_CANDIDATES["slim-v8"]  # format 8: format 9's terms without t_act, nothing else changed
    assert [t.name for t in v8] == [t.name for t in v9 if t is not ACTIVATION_WORK]
    assert ACTIVATION_WORK in slim_terms()
    assert "prefill_compute_served_eq8" in {t.name for t in SLIM_V3_TERMS}  # format 3 counted Eq. 8's square
    v5 = TERM_CANDIDATES["slim-v5"]  # format 5: format 7's names, the step roofline at eta_c everywhere
    assert [t.name for t in v5] == [t.name for t in TERM_CANDIDATES["slim-v7"]]
    assert (
        STEP_GEMM_ROOFLINE in TERM_CANDIDATES["slim-v15"]
        and STEP_GEMM_ROOFLINE_V5 in v5
        and STEP_GEMM_ROOFLINE not in v5
    )
    v7 = TERM_CANDIDATES["slim-v7"]  # format 7: eta_attn fitted on every device, nothing else changed
    assert [t.name for t in v7 if t is not ATTENTION_FACTOR] == [
        t.name for t in v8 if t is not ATTENTION_FACTOR_MEASURED
    ]
    assert ATTENTION_FACTOR in v7 and ATTENTION_FACTOR_MEASURED in slim_terms()
    v6 = TERM_CANDIDATES[
        "slim-v6"
    ]  # format 6: format 7's terms, the measured roof's max instead of the curve
    assert [t.name for t in v6] == [t.name for t in v7]
    assert STEP_GEMM_ROOFLINE_V6 in v6 and STEP_GEMM_ROOFLINE not in v6
    assert all(
        ATTENTION_FACTOR_MEASURED not in TERM_CANDIDATES[n]
        for n in TERM_CANDIDATES
        if n not in ("slim-v8", "slim-v9", *_SINCE_V10)
    )
    assert all(
        PREFILL_SERVED_MEASURED not in TERM_CANDIDATES[n] for n in TERM_CANDIDATES if n not in _SINCE_V10
    )
    assert all(
        ACTIVATION_WORK not in TERM_CANDIDATES[n]
        for n in TERM_CANDIDATES
        if n not in ("slim-v9", *_SINCE_V10)
    )


def test_the_layer_overhead_is_per_layer_of_the_model_and_not_divided_by_tp():
    from slimlib.model.terms import LAYER_STEP_OVERHEAD

    df = pd.DataFrame({"model": "llama-2-70b", "gpu": "h100-sxm-80gb", "batch_size": [8.0, 8.0],
                       "input_len": 128.0, "output_len": 64.0, "tensor_parallel": [1, 4]})  # fmt: skip
    hw = get_gpu("h100-sxm-80gb")
    f = model_features(df, hw)
    assert LAYER_STEP_OVERHEAD.times is not None
    step = np.asarray(LAYER_STEP_OVERHEAD.times({"t_layer": 2e-5}, f, hw).step, dtype=float)
    np.testing.assert_allclose(step, [80 * 2e-5, 80 * 2e-5])  # 80 layers, every rank launches every one
    assert f["n_layers"][1] == pytest.approx(20.0)  # while the per-rank layer costs are split


def test_a_fit_holds_t_layer_on_one_layer_count_and_recovers_it_on_two():
    from slimlib.model.calibrated import TermModel

    terms = TERM_CANDIDATES["slim-v3+layer-overhead"]
    truth = {"eta_c": 0.6, "t_fixed": 0.05, "eta_attn": 0.8, "eta_w": 0.9, "eta_e": 0.5, "alpha": 2e-5,
             "t_step": 2e-3, "t_layer": 5e-5}  # fmt: skip
    grid = [(m, b, ol) for m in ("llama-2-7b", "llama-2-13b", "llama-2-70b") for b in (1, 4, 16, 64)
            for ol in (64, 256)]  # fmt: skip
    df = pd.DataFrame(grid, columns=["model", "batch_size", "output_len"]).assign(
        gpu="h100-sxm-80gb", input_len=256
    )
    gen = TermModel.with_params(truth, "h100-sxm-80gb", term_list=terms)
    df["throughput_tok_s"] = gen.predict(df)["pred_throughput_tok_s"].to_numpy()
    one = TermModel(terms, n_starts=2).fit(df[df["model"] == "llama-2-7b"])
    assert one.params_["t_layer"] == 0.0 and "one layer count" in one.held_reasons_["t_layer"]
    two = TermModel(terms, n_starts=2).fit(df)
    assert "t_layer" not in two.held_
    assert two.params_["t_layer"] == pytest.approx(5e-5, rel=0.05)


def test_the_activation_work_is_per_sequence_layer_and_width_and_not_divided_by_tp():
    df = pd.DataFrame({"model": ["llama-2-70b", "llama-2-70b", "llama-2-7b"], "gpu": "h100-sxm-80gb",
                       "batch_size": [8.0, 8.0, 2.0], "input_len": 128.0, "output_len": 64.0,
                       "tensor_parallel": [1, 4, 1]})  # fmt: skip
    hw = get_gpu("h100-sxm-80gb")
    f = model_features(df, hw)
    assert ACTIVATION_WORK.times is not None
    step = np.asarray(ACTIVATION_WORK.times({"t_act": 1e-7}, f, hw).step, dtype=float)
    # B sequences x L layers x D / 1024: 70B has 80 layers of 8192, 7B 32 layers of 4096; TP does not split them
    np.testing.assert_allclose(step, [8 * 80 * 8 * 1e-7, 8 * 80 * 8 * 1e-7, 2 * 32 * 4 * 1e-7])


def test_the_host_work_is_vidurs_measured_slope_per_sequence_and_not_divided_by_tp():
    from slimlib.data import load
    from slimlib.data.vidur import HOST_OPERATIONS, host_sequence_slopes
    from slimlib.model.terms.recommended import HOST_SEQUENCE_S

    slopes = host_sequence_slopes(load("vidur-cpu-overheads"))
    assert list(slopes.index) == list(HOST_OPERATIONS)
    assert slopes.sum() == pytest.approx(HOST_SEQUENCE_S, rel=1e-4)  # 37.5 us
    assert slopes["process_model_outputs"] > 0.8 * slopes.sum()  # output processing is most of it
    df = pd.DataFrame({"model": ["llama-2-70b", "llama-2-70b", "llama-2-7b"], "gpu": "h100-sxm-80gb",
                       "batch_size": [8.0, 8.0, 2.0], "input_len": 128.0, "output_len": 64.0,
                       "tensor_parallel": [1, 4, 1]})  # fmt: skip
    hw = get_gpu("h100-sxm-80gb")
    f = model_features(df, hw)
    assert HOST_SEQUENCE_OVERHEAD.specs == () and HOST_SEQUENCE_OVERHEAD.times is not None
    step = np.asarray(HOST_SEQUENCE_OVERHEAD.times({}, f, hw).step, dtype=float)
    np.testing.assert_allclose(
        step, np.array([8.0, 8.0, 2.0]) * HOST_SEQUENCE_S
    )  # per sequence, any model or TP


def test_host_slopes_refuse_an_operation_measured_at_one_batch_size():
    from slimlib.data.vidur import host_sequence_slopes
    from slimlib.errors import DataError

    one = pd.DataFrame(
        {"operation": ["schedule", "schedule"], "batch_size": [8, 8], "time_ms_median": [0.1, 0.2]}
    )
    with pytest.raises(DataError, match="schedule"):
        host_sequence_slopes(one)


def test_the_tp_communication_is_vidurs_measured_line_at_tp_above_one_only():
    from slimlib.data import load
    from slimlib.data.vidur import worker_comm_fit
    from slimlib.model.terms.recommended import TP_COMM_SEQUENCE_S, TP_COMM_STEP_S

    step_s, seq_s = worker_comm_fit(load("vidur-cpu-overheads"))
    assert step_s == pytest.approx(TP_COMM_STEP_S, rel=1e-4)  # 2.31 ms per step
    assert seq_s == pytest.approx(TP_COMM_SEQUENCE_S, rel=1e-4)  # 32.5 us per sequence and step
    df = pd.DataFrame({"model": "llama-2-70b", "gpu": "h100-sxm-80gb", "batch_size": [8.0, 8.0, 64.0, 64.0],
                       "input_len": 128.0, "output_len": 64.0, "tensor_parallel": [1, 2, 2, 8]})  # fmt: skip
    hw = get_gpu("h100-sxm-80gb")
    f = model_features(df, hw)
    assert TP_WORKER_COMM.specs == () and TP_WORKER_COMM.times is not None
    step = np.asarray(TP_WORKER_COMM.times({}, f, hw).step, dtype=float)
    line = TP_COMM_STEP_S + np.array([8.0, 64.0]) * TP_COMM_SEQUENCE_S
    np.testing.assert_allclose(step, [0.0, line[0], line[1], line[1]])  # 0 at TP 1, the same at TP 2 and 8


def test_worker_comm_fit_refuses_one_batch_size():
    from slimlib.data.vidur import worker_comm_fit
    from slimlib.errors import DataError

    one = pd.DataFrame({"operation": ["ray_comm_time"] * 2, "batch_size": [8, 8], "time_ms_mean": [2.0, 2.1]})
    with pytest.raises(DataError, match="ray_comm_time"):
        worker_comm_fit(one)


def test_a_candidate_option_a_term_model_does_not_take_is_refused_in_one_line():
    from slimlib.errors import DataError

    terms = TERM_CANDIDATES["slim-v11"]
    with pytest.raises(
        DataError, match=r"candidate 'x': unknown option\(s\) test_prior; a term-list candidate takes"
    ):
        new_model(("x", terms, {"test_prior": True}), 0)
    assert new_model(("x", terms, {"test_priors_at_bound": True, "seed": 3}), 0).seed == 3


def test_a_term_candidate_moved_to_another_gpu_keeps_its_parameter_uncertainty():
    """The cross-validation's device folds move a term candidate as `slim transfer` moves a file: the parameters
    and their standard errors by the declared ratios, the held parameters and the correlations kept."""
    from slimlib.experiments.accuracy.extrapolation import transferred
    from slimlib.model.extended import ExtendedSlimModel

    truth = {"eta_c": 0.6, "t_fixed": 0.05, "eta_attn": 1.0, "eta_w": 0.758, "eta_e": 0.437, "alpha": 2e-5,
             "t_step": 4e-3, "t_layer": 0.0, "t_act": 1e-7}  # fmt: skip
    df = pd.DataFrame([(b, il, ol) for b in (1, 2, 4, 8, 16, 32) for il in (128, 512) for ol in (64, 256)],
                      columns=["batch_size", "input_len", "output_len"]).assign(model="llama-2-7b", gpu="a100-sxm-80gb")  # fmt: skip
    gen = ExtendedSlimModel.with_params(truth, "a100-sxm-80gb")
    noise = np.exp(0.03 * np.random.default_rng(5).standard_normal(len(df)))
    df["throughput_tok_s"] = gen.predict(df)["pred_throughput_tok_s"].to_numpy() * noise
    fit = new_model(("slim terms", slim_terms()), 0).fit(df)
    moved = transferred(fit, "h100-sxm-80gb")
    assert moved.gpu_ == get_gpu("h100-sxm-80gb").name
    assert moved.held_ == fit.held_ and moved.free_params_ == fit.free_params_
    pd.testing.assert_frame_equal(moved.corr_, fit.corr_)
    free = [k for k in fit.free_params_ if np.isfinite(fit.stderr_[k]) and fit.params_[k] != 0]
    assert free
    for k in free:
        assert moved.stderr_[k] / moved.params_[k] == pytest.approx(
            fit.stderr_[k] / fit.params_[k], rel=1e-12
        )
    rows = df.assign(gpu="h100-sxm-80gb", batch_size=df["batch_size"] * 8)
    s = moved.parameter_log_sds(rows)
    assert s is not None and np.isfinite(s["throughput"]).all() and (s["throughput"] > 0).all()
