"""The dense-GEMM term against measured GEMM kernels of any vendor: NVIDIA's (AIConfigurator, ``aic-gemm``) and
AMD's (ROCm aiter, ``aiter-gemm``), the same protocol for both (beyond the paper; notebook 09).

The term (`slimlib.model.terms.rooflines`, ``DECODE_GEMMS``) times a GEMM of ``m`` tokens on an ``n x k`` weight as
``max(2 m n k / (eta_c F), n k b_w / (eta_w BW)) + floor``: ``F`` the registry's dense peak for the kernel's
precision, ``BW`` its memory bandwidth, ``b_w`` the bytes per weight. Two readings per (GPU, dtype):

* **at the priors**: ``eta_c`` and ``eta_w`` at the medians of their priors (measured on NVIDIA kernels), no floor,
  nothing fitted: the ratio predicted / measured per band of ``m``;
* **fitted asymptotes**: ``eta_w`` and the floor fitted on the weight-read rows (``m <= FIT_MAX_M``, least squares
  on relative errors), ``eta_c`` on the compute rows (``m >= COMPUTE_MIN_M``), and the rows between scored: the
  roofline's corner, where a decode batch sits, predicted from its two ends (MAPE with a bootstrap 95% interval),
  for the term's form (the floor plus the larger of the two times, ``max``) and for their sum (``sum``, the
  alternative of a rounded corner); ``eta_c`` is fitted on top of the floor (and of the weight read for ``sum``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.experiments.kernel_timing.moe_mla_check import fit_inverse_efficiency
from slimlib.experiments.outputs.plotting import gpu_color
from slimlib.experiments.outputs.uncertainty import N_BOOT, ape, bootstrap_mean_ci
from slimlib.model.terms import specs as ps
from slimlib.registry.gpus import get_gpu
from slimlib.registry.precision import kernel_peak, kernel_weight_bytes

#: tokens up to which a GEMM reads its weights (the memory floor and eta_w are fitted there)
FIT_MAX_M = 16
#: tokens from which a GEMM is compute-bound (eta_c is fitted there)
COMPUTE_MIN_M = 4096
#: bands of m the ratios at the priors are summarized over
BANDS = ((1, 16), (17, 128), (129, 1024), (1025, 4095), (4096, 2**40))
SUMMARY_COLUMNS = ["vendor", "gpu", "dtype", "band", "n", "ratio_median", "ratio_p10", "ratio_p90"]
#: how the two times combine: the term's larger of the two, or their sum
FORMS = ("max", "sum")
FIT_COLUMNS = ["vendor", "gpu", "dtype", "form", "n_fit", "n_scored", "eta_w", "floor_us", "eta_c", "mape_pct",
               "mape_lo_pct", "mape_hi_pct", "bias_pct"]  # fmt: skip


def gemm_points(gemm: pd.DataFrame, vendor: str) -> pd.DataFrame:
    """One row per measured GEMM (columns gpu, gemm_dtype, m, n, k, latency_ms) with the term's compute and
    weight-read seconds at efficiency 1 and its prediction at the priors (``prior_ms``, ``ratio``)."""
    need = ["gpu", "gemm_dtype", "m", "n", "k", "latency_ms"]
    missing = [c for c in need if c not in gemm.columns]
    if missing:
        raise DataError(f"GEMM table: no column {missing}; expected {need}")
    eta_c, eta_w = ps.ETA_C.prior.median, ps.ETA_W.prior.median
    parts = []
    for (gpu_name, dtype), g in gemm.groupby(["gpu", "gemm_dtype"], sort=True):
        hw = get_gpu(str(gpu_name))
        m, n, k = (g[c].to_numpy(dtype=float) for c in ("m", "n", "k"))
        compute = 2.0 * m * n * k / kernel_peak(hw, str(dtype))
        memory = n * k * kernel_weight_bytes(str(dtype)) / hw.mem_bw
        prior = np.maximum(compute / eta_c, memory / eta_w)
        parts.append(pd.DataFrame({
            "vendor": vendor, "gpu": hw.name, "dtype": str(dtype), "m": m, "n": n, "k": k,
            "latency_ms": g["latency_ms"].to_numpy(dtype=float), "compute_ms": 1e3 * compute,
            "memory_ms": 1e3 * memory, "prior_ms": 1e3 * prior,
        }))  # fmt: skip
    if not parts:
        raise DataError("GEMM table: no rows")
    pts = pd.concat(parts, ignore_index=True)
    pts["ratio"] = pts["prior_ms"] / pts["latency_ms"]
    return pts


def _band(m: np.ndarray) -> np.ndarray:
    out = np.empty(m.shape, dtype=object)
    for lo, hi in BANDS:
        out[(m >= lo) & (m <= hi)] = f"{lo}-{hi}" if hi < 2**40 else f">={lo}"
    return out


def prior_ratios(points: pd.DataFrame) -> pd.DataFrame:
    """Median and 10th / 90th percentiles of predicted / measured at the priors per (vendor, GPU, dtype, band)."""
    pts = points.assign(band=_band(points["m"].to_numpy()))
    rows = []
    for (vendor, gpu, dtype), g in pts.groupby(["vendor", "gpu", "dtype"], sort=True):
        for lo, hi in BANDS:
            b = g[(g["m"] >= lo) & (g["m"] <= hi)]
            if len(b):
                r = b["ratio"].to_numpy()
                rows.append({"vendor": vendor, "gpu": gpu, "dtype": dtype, "band": str(b["band"].iloc[0]),
                             "n": len(b), "ratio_median": float(np.median(r)),
                             "ratio_p10": float(np.quantile(r, 0.1)), "ratio_p90": float(np.quantile(r, 0.9))})  # fmt: skip
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def fitted_corner(points: pd.DataFrame, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per (vendor, GPU, dtype) with rows at both ends and each of `FORMS`: ``eta_w`` and the floor fitted on
    ``m <= FIT_MAX_M``, ``eta_c`` on ``m >= COMPUTE_MIN_M``, and the MAPE and bias of the rows between, on the
    (n, k) shapes measured at both ends (module docstring)."""
    rows = []
    for (vendor, gpu, dtype), g in points.groupby(["vendor", "gpu", "dtype"], sort=True):
        ends = (g["m"] <= FIT_MAX_M, g["m"] >= COMPUTE_MIN_M)
        low_shapes, high_shapes = (set(zip(g.loc[e, "n"], g.loc[e, "k"], strict=True)) for e in ends)
        both = low_shapes & high_shapes
        g = g[[s in both for s in zip(g["n"], g["k"], strict=True)]]
        low, high = g[g["m"] <= FIT_MAX_M], g[g["m"] >= COMPUTE_MIN_M]
        mid = g[(g["m"] > FIT_MAX_M) & (g["m"] < COMPUTE_MIN_M)]
        if len(low) < 2 or len(high) < 1 or len(mid) < 1:
            continue
        floor, scale_w = fit_inverse_efficiency(low["memory_ms"], low["latency_ms"], intercept=True)
        for form in FORMS:
            base = floor + (
                scale_w * high["memory_ms"] if form == "sum" else 0.0
            )  # the floor is in both forms
            _, scale_c = fit_inverse_efficiency(high["compute_ms"], high["latency_ms"], base)
            w, c = scale_w * mid["memory_ms"], scale_c * mid["compute_ms"]
            pred = floor + (w + c if form == "sum" else np.maximum(w, c))
            err = ape(mid["latency_ms"], pred)
            mean, lo, hi = bootstrap_mean_ci(
                err, n_boot=n_boot, label=f"gemm corner {vendor} {gpu} {dtype} {form}"
            )
            rows.append({"vendor": vendor, "gpu": gpu, "dtype": dtype, "form": form, "n_fit": len(low) + len(high),
                         "n_scored": len(mid), "eta_w": 1.0 / scale_w, "floor_us": 1e3 * floor,
                         "eta_c": 1.0 / scale_c, "mape_pct": mean, "mape_lo_pct": lo, "mape_hi_pct": hi,
                         "bias_pct": float(np.mean(100.0 * (pred / mid["latency_ms"] - 1.0)))})  # fmt: skip
    return pd.DataFrame(rows, columns=FIT_COLUMNS)


def plot_prior_ratio(
    ax, points: pd.DataFrame, gpu: str, dtype: str, label: str, linestyle: str = "-"
) -> None:
    """Median and 10th-90th percentile band of predicted / measured at the priors against m (binned by powers of
    two) for one GPU (in its colour, `gpu_color`) and dtype of `points`."""
    color = gpu_color(gpu)
    g = points[(points["gpu"] == gpu) & (points["dtype"] == dtype)]
    if g.empty:
        raise DataError(f"no GEMM points for {gpu} {dtype}")
    b = np.exp2(np.round(np.log2(g["m"].to_numpy())))
    q = g.assign(bin=b).groupby("bin")["ratio"].quantile([0.1, 0.5, 0.9]).unstack()
    ax.fill_between(q.index, q[0.1], q[0.9], color=color, alpha=0.15, linewidth=0)
    ax.plot(q.index, q[0.5], color=color, ls=linestyle, marker="o", markersize=2, linewidth=1, label=label)
    ax.set_xscale("log", base=2)
    ax.axhline(1.0, color="0.5", linewidth=0.5, linestyle=":")
