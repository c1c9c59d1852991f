"""The efficiency priors of few-point fits (`slimlib.model.priors`) are what the kernel data measure."""

from __future__ import annotations

import numpy as np
import pytest

from slimlib.experiments.kernel_timing import composition_figures as kf
from slimlib.experiments.kernel_timing.composition import gemm_bytes, gemm_flops, kernel_set
from slimlib.model.priors import PRIORS


def _check(name: str, values: np.ndarray) -> None:
    p = PRIORS[name]
    assert values.size == p.n_points, name
    assert (np.median(values), values.min(), values.max()) == pytest.approx(
        (p.median, p.low, p.high), abs=6e-4
    )
    assert np.std(values, ddof=1) == pytest.approx(p.sd, abs=0.01), name


def test_priors_are_the_measured_kernel_efficiencies():
    ks = kernel_set("mistral-7b", "h100")
    mem = kf.attention_roofline(
        ks, [1, 2, 4, 8, 16, 32, 64, 128, 256], [127, 255, 511, 1023, 2047, 4095, 8191]
    )
    _check("eta_m", mem.loc[mem["active_context"] >= 65536, "bw_util"].to_numpy())
    bw, fl = [], []
    for kind, (n, k) in ks.shapes.items():
        for m in (1, 2, 4, 8, 16):
            bw.append(gemm_bytes(m, n, k) / (float(ks.gemm_ms(kind, np.array([m]))[0]) / 1e3) / ks.mem_bw)
        for m in (2048, 4096, 8192):
            fl.append(gemm_flops(m, n, k) / (float(ks.gemm_ms(kind, np.array([m]))[0]) / 1e3) / ks.peak_flops)
    _check("eta_w", np.array(bw))
    _check("eta_c", np.array(fl))
