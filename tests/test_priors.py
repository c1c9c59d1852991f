"""The efficiency priors of few-point fits (`slimlib.model.priors`) are what the kernel data measure, and they sit
on the parameter of the term they were measured for (never on a bare name)."""

from __future__ import annotations

import numpy as np
import pytest

from slimlib.experiments.kernel_timing import composition_figures as kf
from slimlib.experiments.kernel_timing.composition import gemm_bytes, gemm_flops, kernel_set
from slimlib.model import PaperModel, make_model, priors
from slimlib.model.priors import Prior
from slimlib.model.terms import specs as ps


def _check(name: str, values: np.ndarray) -> None:
    p: Prior = getattr(priors, name)
    assert values.size == p.n_points, name
    assert (np.median(values), values.min(), values.max()) == pytest.approx(
        (p.median, p.low, p.high), abs=6e-4
    )
    assert np.std(values, ddof=1) == pytest.approx(p.sd, abs=0.01), name


def test_priors_are_the_measured_kernel_efficiencies():
    ks = kernel_set("mistral-7b", "h100")
    mem = kf.kernel_attention_roofline(
        ks, [1, 2, 4, 8, 16, 32, 64, 128, 256], [127, 255, 511, 1023, 2047, 4095, 8191]
    )
    _check("ATTENTION_BANDWIDTH", mem.loc[mem["active_context"] >= 65536, "bw_util"].to_numpy())
    bw, fl = [], []
    for kind, (n, k) in ks.shapes.items():
        for m in (1, 2, 4, 8, 16):
            bw.append(gemm_bytes(m, n, k) / (float(ks.gemm_ms(kind, np.array([m]))[0]) / 1e3) / ks.mem_bw)
        for m in (2048, 4096, 8192):
            fl.append(gemm_flops(m, n, k) / (float(ks.gemm_ms(kind, np.array([m]))[0]) / 1e3) / ks.peak_flops)
    _check("WEIGHT_READ", np.array(bw))
    _check("PREFILL_COMPUTE", np.array(fl))


def test_priors_belong_to_the_parameters_they_were_measured_for():
    assert ps.ETA_ATTN.prior is priors.ATTENTION_BANDWIDTH and ps.ETA_W.prior is priors.WEIGHT_READ
    assert ps.ETA_C.prior is priors.PREFILL_COMPUTE
    assert (
        ps.ETA_M.prior is None
    )  # the paper's eta_m (offset by B0) is not the attention's bandwidth efficiency
    with_prior = {m: {s.name for s in make_model(m).param_specs() if s.prior} for m in ("paper", "slim")}
    assert with_prior == {"paper": {"eta_c"}, "slim": {"eta_c", "eta_attn", "eta_w"}}
    assert PaperModel().param_specs()[2].name == "eta_m"
