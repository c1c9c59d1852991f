"""Uncertainty of every reported error: seeded bootstrap intervals of a MAPE (resampling test configurations) and
paired comparisons of two methods on the same test rows (paired bootstrap and Wilcoxon signed-rank test).

MAPE = mean of the absolute percentage errors (APE) of the test rows (`slimlib.metrics`), so its bootstrap
interval resamples rows with replacement and takes the 2.5th and 97.5th percentiles of the resampled means. Each
interval uses its own random stream, seeded from `seed` and a hash of the values it resamples (`rng_for`), so the
same data gives the same interval in every table and file, whatever it is called there, and no interval depends
on which other intervals were computed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from slimlib.errors import DataError

#: Default number of bootstrap resamples and the default seed.
N_BOOT = 10_000
SEED = 20_240_613
#: Columns that identify one test configuration (row) of `EvaluationResult.predictions` within a scenario.
ROW_KEYS = ("fold", "curve", "model", "input_len", "output_len", "batch_size")
#: metric -> (measured column, predicted column) of the predictions table.
METRIC_COLUMNS = {
    "throughput": ("throughput_tok_s", "pred_throughput_tok_s"),
    "latency": ("e2e_s", "pred_e2e_s"),
}


def rng_for(seed: int, values, stream: str = "") -> np.random.Generator:
    """A random generator seeded from `seed`, a SHA-256 hash of `values` (as little-endian float64, -0.0 as 0.0)
    and the name of the `stream` (one per kind of resampling: an interval, a null distribution): the same data
    gives the same stream, whatever label its statistic carries."""
    v = np.ascontiguousarray(np.asarray(values, dtype="<f8") + 0.0)
    digest = hashlib.sha256(v.tobytes() + b"|" + str(stream).encode("utf-8")).digest()
    return np.random.default_rng([int(seed), *np.frombuffer(digest[:16], dtype="<u4").tolist()])


def ape(true, pred) -> np.ndarray:
    """Absolute percentage errors |pred - true| / |true| x 100 of each row; a zero or missing truth is an error."""
    t = np.asarray(true, dtype=float)
    p = np.asarray(pred, dtype=float)
    if t.shape != p.shape:
        raise DataError(f"ape: {t.size} measured values but {p.size} predictions")
    bad = ~np.isfinite(t) | (t == 0)
    if bad.any():
        raise DataError(f"ape: measured value missing or zero in row(s) {np.flatnonzero(bad)[:5].tolist()}")
    return np.abs(p - t) / np.abs(t) * 100.0


#: resampled values drawn at once by `resampled_means` (bounds its memory; the draws are the same in any chunking)
RESAMPLE_CHUNK = 2**21


def resample_indices(rng: np.random.Generator, n: int, size: tuple[int, ...]) -> np.ndarray:
    """``rng.integers(0, n, size=size)``, the same draws and generator state, as 32-bit integers where `n` allows:
    numpy draws every bound below 2**32 from its 32-bit stream whatever the dtype, and the narrower indices are
    drawn and gathered (``np.take``) several times faster."""
    return rng.integers(0, n, size=size, dtype=np.int32 if n < 2**31 else np.int64)


def resampled_means(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `n_boot` resamples with replacement of `values`, drawn from `rng` in chunks of rows (the generator's
    stream is the same as one ``integers(size=(n_boot, n))`` call, so the means are too, with bounded memory)."""
    n = values.size
    rows = max(1, RESAMPLE_CHUNK // n)
    out = np.empty(n_boot)
    for start in range(0, n_boot, rows):
        k = min(rows, n_boot - start)
        out[start : start + k] = np.take(values, resample_indices(rng, n, (k, n))).mean(axis=1)
    return out


def bootstrap_mean_ci(
    values, *, n_boot: int = N_BOOT, level: float = 0.95, seed: int = SEED, label: str = ""
) -> tuple[float, float, float]:
    """(mean, low, high): the mean of `values` and its percentile bootstrap interval at `level`.

    Rows are resampled with replacement `n_boot` times, from a stream seeded by `seed` and the values themselves
    (`rng_for`); `label` names the statistic in error messages only. The interval is widened to contain the mean
    where the percentiles would miss it (possible only for tiny, very skewed samples). NaN triple for no values."""
    v = np.asarray(values, dtype=float)
    where = f"bootstrap_mean_ci ({label})" if label else "bootstrap_mean_ci"
    if v.ndim != 1:
        raise DataError(f"{where}: values must be one-dimensional")
    if not (0 < level < 1):
        raise DataError(f"{where}: level must be in (0, 1), got {level!r}")
    if v.size == 0 or not np.isfinite(v).all():
        return (float("nan"),) * 3
    point = float(v.mean())
    if v.size == 1:
        return point, point, point
    means = resampled_means(v, int(n_boot), rng_for(seed, v, "interval"))
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return point, float(min(lo, point)), float(max(hi, point))


def paired_comparison(
    errors_a, errors_b, *, n_boot: int = N_BOOT, level: float = 0.95, seed: int = SEED, label: str = ""
) -> dict:
    """Compare two methods' absolute errors on the same rows: mean difference a - b with its paired bootstrap
    interval, the paired-bootstrap p-value (resampling the centred differences, two-sided) and the Wilcoxon
    signed-rank p-value (`wilcoxon_p`). The streams are seeded from the differences (`rng_for`); `label` names the
    comparison in error messages."""

    a = np.asarray(errors_a, dtype=float)
    b = np.asarray(errors_b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        where = f"paired_comparison ({label})" if label else "paired_comparison"
        raise DataError(f"{where}: need two equally long 1-D arrays, got {a.shape} and {b.shape}")
    nan = float("nan")
    if a.size == 0 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return {"n": int(a.size), "mean_diff": nan, "diff_lo": nan, "diff_hi": nan, "p_bootstrap": nan,
                "p_wilcoxon": nan}  # fmt: skip
    d = a - b
    mean, lo, hi = bootstrap_mean_ci(d, n_boot=n_boot, level=level, seed=seed, label=label)
    if d.size > 1 and np.any(d != d[0]):
        null = resampled_means(d - d.mean(), int(n_boot), rng_for(seed, d, "paired null"))
        p_boot = float((np.sum(np.abs(null) >= abs(d.mean())) + 1) / (n_boot + 1))
    else:
        p_boot = 1.0 if mean == 0 else nan
    return {"n": int(d.size), "mean_diff": mean, "diff_lo": lo, "diff_hi": hi, "p_bootstrap": p_boot,
            "p_wilcoxon": wilcoxon_p(d)}  # fmt: skip


#: at most this many non-zero differences: the Wilcoxon test's exact null (every sign of their ranks)
WILCOXON_EXACT_MAX = 12


def wilcoxon_p(d) -> float:
    """Two-sided Wilcoxon signed-rank p-value of the paired differences `d`, zeros discarded (1.0 when every
    difference is zero): exact, over every sign of the non-zero differences' ranks (ties averaged), where at most
    `WILCOXON_EXACT_MAX` differ from zero; else scipy's default (exact without ties up to 50 pairs, else the normal
    approximation). The normal approximation of a few tied pairs is far too small (four equal differences: 0.046
    against the exact 0.125)."""
    from scipy.stats import rankdata, wilcoxon

    d = np.asarray(d, dtype=float)
    nz = d[d != 0]
    if nz.size == 0:
        return 1.0
    if nz.size > WILCOXON_EXACT_MAX:
        return float(wilcoxon(d).pvalue)
    ranks = rankdata(np.abs(nz))
    plus = (np.arange(2**nz.size)[:, None] >> np.arange(nz.size)) & 1  # every sign pattern
    w = plus @ ranks  # the positive-rank sum of each
    centre = ranks.sum() / 2.0
    observed = abs(ranks[nz > 0].sum() - centre)
    return float(np.mean(np.abs(w - centre) >= observed - 1e-9 * max(1.0, observed)))


def _paired_rows(sel: pd.DataFrame, ref: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """`sel` joined to the reference method's rows of the same test configurations (columns suffixed _ref)."""
    if sel[list(keys)].duplicated().any() or ref[list(keys)].duplicated().any():
        raise DataError(f"paired comparison: test rows are not unique on {list(keys)}; cannot pair methods")
    return sel.merge(ref, on=list(keys), how="inner", suffixes=("", "_ref"), validate="one_to_one")


def n_nonphysical(pred) -> int:
    """How many finite predictions are <= 0 (a throughput or latency that cannot be): each is a failure of the
    method, counted beside the MAPE it enters (its absolute percentage error is at least 100%)."""
    p = np.asarray(pred, dtype=float)
    return int(np.sum(np.isfinite(p) & (p <= 0)))


def mape_intervals(
    predictions: pd.DataFrame,
    *,
    reference: str = "paper",
    metrics: Sequence[str] = ("throughput", "latency"),
    n_boot: int = N_BOOT,
    level: float = 0.95,
    seed: int = SEED,
) -> pd.DataFrame:
    """MAPE with bootstrap interval for every scenario x method x metric of `predictions`
    (`EvaluationResult.predictions`), and the paired comparison of each method with `reference` on the same rows.

    Columns: ``scenario, method, metric, n_test, n_nonphysical, mape_pct, ci_lo_pct, ci_hi_pct, diff_vs_ref_pct,
    diff_lo_pct, diff_hi_pct, p_bootstrap, p_wilcoxon`` (`n_nonphysical`: predictions <= 0 in the cell; differences are method minus reference, in MAPE points;
    NaN for the reference itself and where a method predicts no such quantity)."""
    missing = [c for c in ("scenario", "method") if c not in predictions.columns]
    if missing:
        raise DataError(f"mape_intervals: predictions lack column(s) {missing}")
    keys = [k for k in ROW_KEYS if k in predictions.columns]
    rows = []
    for scen in dict.fromkeys(predictions["scenario"]):
        part = predictions[predictions["scenario"] == scen]
        ref = part[part["method"] == reference]
        for method in dict.fromkeys(part["method"]):
            sel = part[part["method"] == method]
            for metric in metrics:
                true_c, pred_c = METRIC_COLUMNS[metric]
                label = f"{scen} / {method} / {metric}"
                pred = sel[pred_c].to_numpy(dtype=float)
                row = {"scenario": scen, "method": method, "metric": metric, "n_test": int(len(sel)),
                       "n_nonphysical": n_nonphysical(pred)}  # fmt: skip
                if np.isfinite(pred).all():
                    errs = ape(sel[true_c], pred)
                    m, lo, hi = bootstrap_mean_ci(errs, n_boot=n_boot, level=level, seed=seed, label=label)
                else:
                    m = lo = hi = float("nan")
                row.update(mape_pct=m, ci_lo_pct=lo, ci_hi_pct=hi)
                cmp = {"mean_diff": np.nan, "diff_lo": np.nan, "diff_hi": np.nan, "p_bootstrap": np.nan,
                       "p_wilcoxon": np.nan}  # fmt: skip
                if method != reference and len(ref) and np.isfinite(m):
                    merged = _paired_rows(sel, ref, keys)
                    if len(merged) != len(sel):
                        raise DataError(
                            f"{label}: {len(sel) - len(merged)} test row(s) have no {reference} row"
                        )
                    ref_pred = merged[pred_c + "_ref"].to_numpy(dtype=float)
                    if np.isfinite(ref_pred).all():
                        cmp = paired_comparison(
                            ape(merged[true_c], merged[pred_c]), ape(merged[true_c + "_ref"], ref_pred),
                            n_boot=n_boot, level=level, seed=seed, label="paired " + label,
                        )  # fmt: skip
                row.update(diff_vs_ref_pct=cmp["mean_diff"], diff_lo_pct=cmp["diff_lo"],
                           diff_hi_pct=cmp["diff_hi"], p_bootstrap=cmp["p_bootstrap"],
                           p_wilcoxon=cmp["p_wilcoxon"])  # fmt: skip
                rows.append(row)
    return pd.DataFrame(rows)


def group_intervals(
    predictions: pd.DataFrame,
    by: Sequence[str],
    *,
    metric: str = "throughput",
    n_boot: int = N_BOOT,
    level: float = 0.95,
    seed: int = SEED,
) -> pd.DataFrame:
    """MAPE with its bootstrap interval for every group `by` of `predictions` (e.g. scenario, fold, method, or
    fold, method, input_len): columns `by` + ``n, n_nonphysical, mape_pct, ci_lo_pct, ci_hi_pct``. A group with a
    missing prediction gets NaN (the method predicts no such quantity there); each stream is seeded from the
    group's errors (`rng_for`)."""
    true_c, pred_c = METRIC_COLUMNS[metric]
    missing = [c for c in [*by, true_c, pred_c] if c not in predictions.columns]
    if missing:
        raise DataError(f"group_intervals: predictions lack column(s) {missing}")
    rows = []
    for key, g in predictions.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        pred = g[pred_c].to_numpy(dtype=float)
        row = {**dict(zip(by, key, strict=True)), "n": int(len(g)), "n_nonphysical": n_nonphysical(pred)}
        if np.isfinite(pred).all():
            label = " / ".join(map(str, key)) + f" / {metric}"
            m, lo, hi = bootstrap_mean_ci(
                ape(g[true_c], pred), n_boot=n_boot, level=level, seed=seed, label=label
            )
        else:
            m = lo = hi = float("nan")
        rows.append({**row, "mape_pct": m, "ci_lo_pct": lo, "ci_hi_pct": hi})
    return pd.DataFrame(rows)


def format_p(value: object, na: str = "") -> str:
    """A p-value as every table and text prints it: three decimals, ``<0.001`` below that (never ``0.000``); `na`
    when missing (None, NaN, not a number); a text cell is kept as it is."""
    if isinstance(value, str):
        return value
    if not isinstance(value, (float, int, np.floating, np.integer)) or not np.isfinite(value):
        return na
    return "<0.001" if value < 0.001 else f"{float(value):.3f}"


def format_interval(point: float, lo: float, hi: float, decimals: int = 1) -> str:
    """``12.3 [9.8, 15.1]``: a point estimate and its interval at fixed decimals."""
    return f"{point:.{decimals}f} [{lo:.{decimals}f}, {hi:.{decimals}f}]"
