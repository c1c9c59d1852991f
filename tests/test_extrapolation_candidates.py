"""The batch axis's candidate terms (`slimlib.experiments.accuracy.extrapolation_candidates`): the decode-step GEMM
roofline turns compute-bound exactly at `decode_gemm_ridge`, the ridge `ROOF_LINEAR` shares and that
`slimlib.experiments.kernel_timing.ridge_check` validates against the measured vLLM GEMM kernels (tests of
`test_roofline_model`); the candidates are the recommended terms with one change; names resolve."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import UnknownNameError
from slimlib.experiments.accuracy.extrapolation_candidates import TERM_CANDIDATES, resolve_candidate
from slimlib.model.extended import slim_terms
from slimlib.model.features import model_features
from slimlib.model.terms.rooflines import STEP_GEMM_ROOFLINE, STEP_GEMM_ROOFLINE_ALL, decode_gemm_ridge
from slimlib.registry.gpus import get_gpu

P = {"eta_c": 0.7, "eta_w": 0.9}


@pytest.mark.parametrize(("model", "gpu"), [("llama-2-7b", "h100-sxm-80gb"), ("opt-6.7b-s8", "cpu")])
def test_the_step_gemm_roofline_turns_compute_bound_at_the_decode_gemm_ridge(model, gpu):
    b = np.unique(np.round(np.geomspace(1, 8192, 200)))
    df = pd.DataFrame({"model": model, "gpu": gpu, "batch_size": b, "input_len": 128.0, "output_len": 128.0})
    hw = get_gpu(gpu)
    f = model_features(df, hw)
    assert STEP_GEMM_ROOFLINE.times is not None
    t = np.asarray(STEP_GEMM_ROOFLINE.times(P, f, hw).step, dtype=float)
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


def test_candidates_are_the_recommended_terms_with_one_change():
    base = [t.name for t in slim_terms()]
    for name, terms in TERM_CANDIDATES.items():
        names = [t.name for t in terms]
        assert len(set(names) ^ set(base)) in (1, 2, 3), name
        assert resolve_candidate(name) == (name, terms)
    assert "step_weight_read" not in [t.name for t in TERM_CANDIDATES["slim+step-roofline"]]
    assert resolve_candidate("slim") == "slim"
    with pytest.raises(UnknownNameError, match="slim\\+step-roofline"):
        resolve_candidate("slim+step-rooflin")
