"""Baselines of the SLIM evaluation, adapted as in the paper (spec: ``BASELINES.md`` of the shared folder).

Both follow the `SlimModel` contract: ``fit(df) -> self``, ``predict(df) -> DataFrame`` with
``pred_throughput_tok_s, pred_e2e_s, pred_prefill_s, pred_decode_s`` (NaN where a baseline has no such part).
Regressions are ordinary least squares by `numpy.linalg.lstsq` on standardized features (deterministic).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.errors import DataError, FitError, NotFittedError
from slimlib.metrics import mape
from slimlib.model.base import PRED_COLUMNS, model_features, resolve_gpu
from slimlib.schema import validate_table


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares ``y ~ x`` on column-standardized x (intercept in column 0 kept as is); returns coefficients
    in original units, their standard errors, and the residual sum of squares as a 1-element array."""
    s = np.where(np.abs(x).max(axis=0) > 0, np.abs(x).max(axis=0), 1.0)
    xs = x / s
    coef, *_ = np.linalg.lstsq(xs, y, rcond=None)
    resid = y - xs @ coef
    rss = float(resid @ resid)
    dof = len(y) - np.linalg.matrix_rank(xs)
    cov = np.linalg.pinv(xs.T @ xs) * (rss / dof if dof > 0 else np.nan)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    return coef / s, se / s, np.array([rss])


def _require(df: pd.DataFrame, cols: tuple[str, ...], who: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(
            f"{who} needs column(s) {', '.join(missing)} in its training table (mean TTFT and mean ITL per "
            "configuration, ms); this ground truth lacks them, so the baseline cannot be fitted on it"
        )
    bad = ~np.isfinite(df[list(cols)].to_numpy(dtype=float)).all(axis=1)
    if bad.any():
        raise DataError(
            f"{who}: {int(bad.sum())} training rows have no finite {' / '.join(cols)}; drop them first"
        )


class _Baseline:
    variant = ""

    def _check_fitted(self) -> None:
        if not hasattr(self, "params_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted: call fit(df)")

    def score(self, df: pd.DataFrame) -> float:
        pred = self.predict(df)["pred_throughput_tok_s"]
        return mape(df["throughput_tok_s"].to_numpy(dtype=float), pred.to_numpy())

    def summary(self) -> pd.DataFrame:
        """Coefficient, standard error per regression term."""
        self._check_fitted()
        return pd.DataFrame(
            {"estimate": pd.Series(self.params_), "stderr": pd.Series(self.stderr_)}
        ).rename_axis("parameter")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({'fitted' if hasattr(self, 'params_') else 'not fitted'})"


# ---------------------------------------------------------------------------------------------------------------
# LLMVisor-Agg
# ---------------------------------------------------------------------------------------------------------------
class LLMVisorAgg(_Baseline):
    """LLMVisor adapted to aggregate token counts (the SLIM paper's "LLMVisor-Agg").

    * Prefill (fitted to mean TTFT, s): ``TTFT = beta_P,s + a1_P,s B IL + a3_P,s B IL^2 + a4_P,s B``, two segments
      split at a breakpoint ``tau_P`` on ``B IL``.
    * Decode (fitted to mean ITL, s): ``ITL = beta_D,s + b_D,s B + a2_D,s B c_mean`` with
      ``c_mean = C(IL, OL) / OL = IL + (OL + 1) / 2`` (Eq. 12), two segments split at ``tau_D`` on ``B``.
    * Breakpoints by grid search over the midpoints between distinct training values, minimizing the squared error
      (each segment needs at least as many rows as coefficients; otherwise one segment).
    * ``E2E = TTFT + (OL - 1) ITL``; throughput ``= B (IL + OL) / E2E``; prefill = TTFT, decode = (OL - 1) ITL.
    It has no model-size features: trained on several models it fits their mixture, and it cannot transfer across
    model sizes by construction.
    """

    variant = "llmvisor-agg"

    def fit(self, df: pd.DataFrame) -> LLMVisorAgg:
        data = validate_table(df)
        _require(data, ("mean_ttft_ms", "mean_itl_ms"), "LLMVisor-Agg")
        b, il, ol = (data[c].to_numpy(dtype=float) for c in ("batch_size", "input_len", "output_len"))
        ttft = data["mean_ttft_ms"].to_numpy(dtype=float) / 1000.0
        itl = data["mean_itl_ms"].to_numpy(dtype=float) / 1000.0
        self.prefill_ = self._fit_piecewise(self._xp(b, il), ttft, b * il, "P")
        self.decode_ = self._fit_piecewise(self._xd(b, il, ol), itl, b, "D")
        self.params_, self.stderr_ = {}, {}
        for part in (self.prefill_, self.decode_):
            self.params_.update(part["params"])
            self.stderr_.update(part["stderr"])
        self.fit_info_ = {"n_rows": len(data), "models": sorted(set(data["model"]))}
        return self

    @staticmethod
    def _xp(b, il):
        return np.column_stack([np.ones_like(b), b * il, b * il**2, b])

    @staticmethod
    def _xd(b, il, ol):
        return np.column_stack([np.ones_like(b), b, b * (il + (ol + 1.0) / 2.0)])

    @staticmethod
    def _fit_piecewise(x, y, split_on, phase):
        names = {"P": ("beta", "a1", "a3", "a4"), "D": ("beta", "b", "a2")}[phase]
        k = x.shape[1]
        values = np.unique(split_on)
        candidates = [np.inf] + list((values[:-1] + values[1:]) / 2.0)
        best = None
        for tau in candidates:
            lo = split_on <= tau
            if np.isfinite(tau) and (lo.sum() < k or (~lo).sum() < k):
                continue
            fits, rss = [], 0.0
            for mask in (lo, ~lo) if np.isfinite(tau) else (lo,):
                coef, se, r = _ols(x[mask], y[mask])
                fits.append((coef, se))
                rss += float(r[0])
            if best is None or rss < best[0] - 1e-18:
                best = (rss, tau, fits)
        if best is None:
            raise FitError(
                f"LLMVisor-Agg: {len(y)} rows cannot fit the {phase} regression ({k} coefficients)"
            )
        _, tau, fits = best
        params = {f"tau_{phase}": float(tau)}
        stderr = {f"tau_{phase}": np.nan}
        for seg, (coef, se) in enumerate(fits):
            for n, c, s in zip(names, coef, se, strict=True):
                params[f"{n}_{phase}{seg}"] = float(c)
                stderr[f"{n}_{phase}{seg}"] = float(s)
        return {"tau": tau, "coefs": [c for c, _ in fits], "params": params, "stderr": stderr}

    @staticmethod
    def _eval_piecewise(part, x, split_on):
        coefs = part["coefs"]
        out = x @ coefs[0]
        if len(coefs) > 1:
            out = np.where(split_on <= part["tau"], out, x @ coefs[1])
        return out

    def predict(self, df: pd.DataFrame) -> pd.DataFrame:
        self._check_fitted()
        b, il, ol = (
            pd.to_numeric(df[c]).to_numpy(dtype=float) for c in ("batch_size", "input_len", "output_len")
        )
        ttft = self._eval_piecewise(self.prefill_, self._xp(b, il), b * il)
        itl = self._eval_piecewise(self.decode_, self._xd(b, il, ol), b)
        dec = (ol - 1.0) * itl
        e2e = ttft + dec
        with np.errstate(divide="ignore", invalid="ignore"):
            thr = b * (il + ol) / e2e
        return pd.DataFrame(dict(zip(PRED_COLUMNS, (thr, e2e, ttft, dec), strict=True)), index=df.index)


# ---------------------------------------------------------------------------------------------------------------
# IMAI OOD-LR
# ---------------------------------------------------------------------------------------------------------------
IMAI_FEATURES = (
    "B", "IL", "OL", "D", "L", "H", "B*IL", "B*OL", "IL*OL", "B*IL*OL", "L*D^2", "L*D^2*B*OL", "t_RLM",
)  # fmt: skip


def roofline_time(feats: dict[str, np.ndarray], hw) -> np.ndarray:
    """LLM roofline time ``t_RLM = max(F_pre/F_max, M_pre/BW) + sum_j max(F_j/F_max, M_j/BW)`` (BASELINES.md).

    ``M_pre = P b_w + 2 L D_kv b_kv B IL``; decode step j (0..OL-1) ``F_j = B L (4D^2 + 4 D D_kv + FFN) +
    4 B L D (IL + j)``, ``M_j = P b_w + 2 L D_kv b_kv B (IL + j)``. The sum over j is evaluated in closed form
    per row where both terms are linear in j (the max switches at most once)."""
    b, il, ol = feats["batch_size"], feats["input_len"], feats["output_len"]
    L, D, dkv, dff = feats["n_layers"], feats["hidden_size"], feats["d_kv"], feats["ffn_size"]
    nff, bkv = feats["n_ffn_matrices"], feats["kv_bytes"]
    wbytes = feats["weight_bytes_total"]
    from slimlib.model import equations as eq

    f_pre = eq.prefill_flops(b, il, L, D, dkv, dff, nff)
    m_pre = wbytes + 2.0 * L * dkv * bkv * b * il
    t = np.maximum(f_pre / hw.peak_flops, m_pre / hw.mem_bw)
    dense = b * L * (4.0 * D**2 + 4.0 * D * dkv + 2.0 * nff * D * dff)
    # step j: compute c0 + c1 j, memory m0 + m1 j (seconds)
    c0, c1 = (dense + 4.0 * b * L * D * il) / hw.peak_flops, 4.0 * b * L * D / hw.peak_flops
    m0, m1 = (wbytes + 2.0 * L * dkv * bkv * b * il) / hw.mem_bw, 2.0 * L * dkv * bkv * b / hw.mem_bw

    def lin_sum(a0, a1, j0, j1):  # sum_{j=j0}^{j1-1} (a0 + a1 j)
        n = np.maximum(j1 - j0, 0.0)
        return n * a0 + a1 * (j0 + j1 - 1.0) * n / 2.0

    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.where(m1 != c1, (c0 - m0) / (m1 - c1), np.inf)  # j where compute = memory
    js = np.where((cross > 0) & (cross < ol), np.ceil(cross), ol)  # no switch inside [0, OL): one term
    mem_first = m0 >= c0  # memory-bound at j = 0
    # segment [0, js) uses the term larger at j=0, [js, OL) the other
    first = np.where(mem_first, lin_sum(m0, m1, 0.0, js), lin_sum(c0, c1, 0.0, js))
    second = np.where(mem_first, lin_sum(c0, c1, js, ol), lin_sum(m0, m1, js, ol))
    return t + first + second


class ImaiOodLR(_Baseline):
    """IMAI OOD-LR as adapted in the SLIM paper: OLS of E2E latency (s) on workload and model features with
    interactions, ``x = [1, B, IL, OL, D, L, H, B IL, B OL, IL OL, B IL OL, L D^2, L D^2 B OL, t_RLM]`` (H = attention
    heads; t_RLM the roofline time of `roofline_time`, fitted with its own coefficient); throughput
    ``= B (IL + OL) / predicted E2E``. Needs ``e2e_s`` in the training table. No prefill/decode split (NaN)."""

    variant = "imai-ood-lr"

    def __init__(self, gpu: str | None = None):
        self.gpu = gpu

    def _design(self, data: pd.DataFrame, hw) -> np.ndarray:
        from slimlib.registry.architectures import get_architecture

        f = model_features(data)
        heads = np.array([get_architecture(m).n_heads for m in data["model"]], dtype=float)
        b, il, ol = f["batch_size"], f["input_len"], f["output_len"]
        L, D = f["n_layers"], f["hidden_size"]
        cols = [b, il, ol, D, L, heads, b * il, b * ol, il * ol, b * il * ol, L * D**2, L * D**2 * b * ol,
                roofline_time(f, hw)]  # fmt: skip
        return np.column_stack([np.ones_like(b), *cols])

    def fit(self, df: pd.DataFrame) -> ImaiOodLR:
        data = validate_table(df)
        if "e2e_s" not in data.columns:
            raise DataError(
                "IMAI OOD-LR is fitted to E2E latency: the training table needs an 'e2e_s' column"
            )
        hw = resolve_gpu(data, self.gpu)
        x = self._design(data, hw)
        coef, se, _ = _ols(x, data["e2e_s"].to_numpy(dtype=float))
        names = ("intercept", *IMAI_FEATURES)
        self.gpu_ = hw.name
        self.coef_ = coef
        self.params_ = {n: float(c) for n, c in zip(names, coef, strict=True)}
        self.stderr_ = {n: float(s) for n, s in zip(names, se, strict=True)}
        self.fit_info_ = {"n_rows": len(data), "models": sorted(set(data["model"]))}
        return self

    def predict(self, df: pd.DataFrame) -> pd.DataFrame:
        self._check_fitted()
        data = validate_table(df, require_target=False)
        hw = resolve_gpu(data, self.gpu_)
        e2e = self._design(data, hw) @ self.coef_
        b, il, ol = (data[c].to_numpy(dtype=float) for c in ("batch_size", "input_len", "output_len"))
        with np.errstate(divide="ignore", invalid="ignore"):
            thr = b * (il + ol) / e2e
        nan = np.full(len(df), np.nan)
        return pd.DataFrame(dict(zip(PRED_COLUMNS, (thr, e2e, nan, nan), strict=True)), index=df.index)


BASELINES = {"llmvisor-agg": LLMVisorAgg, "imai-ood-lr": ImaiOodLR}
