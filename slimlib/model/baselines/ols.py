"""Ordinary least squares for the baselines, through statsmodels (its results carry standard errors and intervals)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slimlib.model.features import FloatArray


@dataclass(frozen=True)
class OlsFit:
    """Coefficients in the units of the design's columns, their standard errors, 95% intervals and the RSS."""

    coef: FloatArray
    stderr: FloatArray
    ci95_low: FloatArray
    ci95_high: FloatArray
    rss: float


def fit_ols(x: FloatArray, y: FloatArray) -> OlsFit:
    """OLS of ``y ~ x`` (x carries its own intercept column). Columns are scaled by their largest magnitude before
    the fit for conditioning and the results scaled back; a rank-deficient design gets the minimum-norm solution
    (statsmodels' pseudo-inverse) with ``n - rank`` residual degrees of freedom."""
    peak = np.abs(x).max(axis=0)
    s = np.where(peak > 0, peak, 1.0)
    import statsmodels.api as sm  # imported where used: it takes ~1 s, which `slim --help` should not pay

    res = sm.OLS(y, x / s).fit()
    ci = np.asarray(res.conf_int(alpha=0.05), dtype=float)
    return OlsFit(
        coef=np.asarray(res.params, dtype=float) / s,
        stderr=np.asarray(res.bse, dtype=float) / s,
        ci95_low=ci[:, 0] / s,
        ci95_high=ci[:, 1] / s,
        rss=float(res.ssr),
    )
