"""IMAI OOD-LR as adapted in the SLIM paper (spec: BASELINES.md of the shared folder): OLS of E2E latency (s) on
workload and model features with interactions,
``x = [1, B, IL, OL, D, L, H, B IL, B OL, IL OL, B IL OL, L D^2, L D^2 B OL, t_RLM]`` (H = attention heads; t_RLM the
roofline time of `llm_roofline_time`, fitted with its own coefficient); throughput by Eq. 6 from the predicted E2E.
Needs ``e2e_s`` in the training table. No prefill/decode split and no TTFT/TPOT (NaN): it regresses E2E only."""

from __future__ import annotations

from typing import Self

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.model import equations as eq
from slimlib.model.base import Arrays, Estimator, Progress
from slimlib.model.baselines.ols import fit_ols
from slimlib.model.features import Features, FloatArray, model_features, refuse_unread_layers, resolve_gpu
from slimlib.registry.gpus import GPU
from slimlib.schema import validate_table

IMAI_FEATURES = (
    "B", "IL", "OL", "D", "L", "H", "B*IL", "B*OL", "IL*OL", "B*IL*OL", "L*D^2", "L*D^2*B*OL", "t_RLM",
)  # fmt: skip
TERM_NAMES = ("intercept", *IMAI_FEATURES)


def llm_roofline_time(feats: Features, hw: GPU) -> FloatArray:
    """LLM roofline time ``t_RLM = max(F_pre/F_max, M_pre/BW) + sum_j max(F_j/F_max, M_j/BW)`` (BASELINES.md).

    ``M_pre = P b_w + 2 L D_kv b_kv B IL``; decode step j (0..OL-1) ``F_j = B L (4D^2 + 4 D D_kv + FFN) +
    4 B L D (IL + j)``, ``M_j = P b_w + 2 L D_kv b_kv B (IL + j)``. The sum over j is evaluated in closed form per
    row where both terms are linear in j (the max switches at most once)."""
    b, il, ol = feats["batch_size"], feats["input_len"], feats["output_len"]
    L, D, dkv = feats["n_layers"], feats["hidden_size"], feats["d_kv"]
    bkv, wbytes = feats["kv_bytes"], feats["weight_bytes_total"]
    f_pre = eq.prefill_flops(b, il, L, D, dkv, feats["ffn_size"], feats["n_ffn_matrices"])
    m_pre = wbytes + 2.0 * L * dkv * bkv * b * il
    t = np.maximum(f_pre / hw.peak_flops, m_pre / hw.mem_bw)
    dense = b * L * eq.dense_flops_per_token(D, dkv, feats["ffn_size"], feats["n_ffn_matrices"])
    # step j: compute c0 + c1 j, memory m0 + m1 j (seconds)
    c0, c1 = (dense + 4.0 * b * L * D * il) / hw.peak_flops, 4.0 * b * L * D / hw.peak_flops
    m0, m1 = (wbytes + 2.0 * L * dkv * bkv * b * il) / hw.mem_bw, 2.0 * L * dkv * bkv * b / hw.mem_bw

    def lin_sum(a0: FloatArray, a1: FloatArray, j0: FloatArray, j1: FloatArray) -> FloatArray:
        n = np.maximum(j1 - j0, 0.0)  # sum_{j=j0}^{j1-1} (a0 + a1 j)
        return np.asarray(n * a0 + a1 * (j0 + j1 - 1.0) * n / 2.0, dtype=float)

    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.where(m1 != c1, (c0 - m0) / (m1 - c1), np.inf)  # j where compute = memory
    js = np.where((cross > 0) & (cross < ol), np.ceil(cross), ol)  # no switch inside [0, OL): one term
    zero = np.zeros_like(js)
    mem_first = m0 >= c0  # memory-bound at j = 0: segment [0, js) uses that term, [js, OL) the other
    first = np.where(mem_first, lin_sum(m0, m1, zero, js), lin_sum(c0, c1, zero, js))
    second = np.where(mem_first, lin_sum(c0, c1, js, ol), lin_sum(m0, m1, js, ol))
    return np.asarray(t + first + second, dtype=float)


class ImaiOodLR(Estimator):
    """IMAI OOD-LR (see the module docstring)."""

    variant = "imai-ood-lr"

    def __init__(self, gpu: str | None = None) -> None:
        super().__init__(gpu)

    @staticmethod
    def _design(data: pd.DataFrame, hw: GPU) -> FloatArray:
        f = model_features(data)
        refuse_unread_layers(f, ImaiOodLR.variant)
        b, il, ol = f["batch_size"], f["input_len"], f["output_len"]
        L, D = f["n_layers"], f["hidden_size"]
        cols = [b, il, ol, D, L, f["n_heads"], b * il, b * ol, il * ol, b * il * ol, L * D**2, L * D**2 * b * ol,
                llm_roofline_time(f, hw)]  # fmt: skip
        return np.column_stack([np.ones_like(b), *cols])

    def fit(self, df: pd.DataFrame, *, progress: Progress | None = None) -> Self:
        data = validate_table(df)
        if "e2e_s" not in data.columns:
            raise DataError(
                "IMAI OOD-LR is fitted to E2E latency: the training table needs an 'e2e_s' column"
            )
        hw = resolve_gpu(data, self.gpu, fitting=True)
        res = fit_ols(self._design(data, hw), data["e2e_s"].to_numpy(dtype=float))
        self.gpu_ = hw.name
        self.params_ = {n: float(c) for n, c in zip(TERM_NAMES, res.coef, strict=True)}
        self.stderr_ = {n: float(s) for n, s in zip(TERM_NAMES, res.stderr, strict=True)}
        self.ci95_ = {
            n: (float(a), float(b)) for n, a, b in zip(TERM_NAMES, res.ci95_low, res.ci95_high, strict=True)
        }
        self.fit_info_ = {"n_rows": int(len(data)), "models": sorted(set(data["model"]))}
        if progress is not None:
            progress(1, 1)
        return self

    def _predict_rows(self, data: pd.DataFrame, hw: GPU, served: str = "all") -> Arrays:
        coef = np.array([self.params_[n] for n in TERM_NAMES])
        e2e = self._design(data, hw) @ coef
        b, il, ol = (data[c].to_numpy(dtype=float) for c in ("batch_size", "input_len", "output_len"))
        with np.errstate(divide="ignore", invalid="ignore"):
            thr = eq.throughput(b, il, ol, e2e)
        nan = np.full(len(data), np.nan)
        return thr, e2e, nan, nan

    def _state(self) -> dict[str, object]:
        return {"ci95": {k: list(v) for k, v in self.ci95_.items()}}

    def _set_state(self, state: dict[str, object], where: str) -> None:
        missing = [n for n in TERM_NAMES if n not in self.params_]
        if missing:
            raise DataError(f"{where}: field 'params' lacks {', '.join(missing)}")
        ci = state.get("ci95") or {}
        self.ci95_ = {k: (float(v[0]), float(v[1])) for k, v in dict(ci).items()}  # type: ignore[call-overload]
