"""Transfer scenarios on LLM-Inference-Bench (AMD MI300X and MI250, vLLM 0.6.1, static batches, IL = OL = L).

* ``context-transfer`` (its own Table II row, "context transfer IL = OL (LLM-Inference-Bench, MI300X/MI250)";
  not the paper's input-length row): per
  device, fit L <= 256 and validate L >= 512, all models of that device pooled into one fit.
* ``tp-transfer``: per device, fit the smallest tensor-parallel degree the device has (MI300X: 1 GPU; MI250:
  2 dies = one card) and validate the larger degrees of the same models.
* ``gpu-transfer``: fit every row of one device (MI250 card <-> one MI300X, the models both ran), re-target
  the parameter file with `slimlib.model.gpu_transfer.transfer_params`, predict the other device's rows.

A "device" is one MI300X GPU (``tensor_parallel`` 1) or one MI250 card (two dies, ``tensor_parallel`` 2), the
``Num of Hardware = 1`` unit of the benchmark. Splits depend on configuration columns only. Methods: the paper
model and the recommended model (``slim``, `slimlib.model.slim`), each reading ``tensor_parallel``
(`slimlib.model.parallel`). Ground truth: the measured total-token throughput and the batch latency (``Latency``).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd

from slimlib.advisor.capacity import batch_capacity
from slimlib.errors import SlimError
from slimlib.experiments.accuracy.scenarios import (
    DEVICE_LABEL,
    DEVICES,
    TRUTH_L,
    TRUTH_T,
    Fold,
    Scenario,
    context_scenario,
    device_rows,
    llmib_table,
    pre_knee_points,
)
from slimlib.experiments.outputs.plotting import method_style
from slimlib.metrics import mape
from slimlib.model import Estimator, load_params, make_model, method_label
from slimlib.model.gpu_transfer import transfer_params, untransferred


def tp_scenario(table: pd.DataFrame | None = None) -> Scenario:
    """Per device: fit the one-device tensor-parallel degree, validate the larger degrees (same models)."""
    t = llmib_table() if table is None else table
    folds = []
    for gpu, tp0 in DEVICES.items():
        g = t[t["gpu"] == gpu]
        tr = g[g["tensor_parallel"] == tp0]
        te = g[(g["tensor_parallel"] > tp0) & g["model"].isin(set(tr["model"]))]
        if len(tr) and len(te):
            folds.append(Fold(DEVICE_LABEL[gpu], tr.reset_index(drop=True), te.reset_index(drop=True)))
    return Scenario(
        "tp-transfer",
        "tensor-parallel transfer: per device, fit TP = one device (MI300X 1, MI250 2 dies), validate the larger "
        "TP degrees of the same models", TRUTH_T, TRUTH_L, folds,
    )  # fmt: skip


def gpu_transfer_scenario(table: pd.DataFrame | None = None) -> Scenario:
    """Fit all one-device rows of one GPU, validate the other's (models both ran), both directions."""
    t = llmib_table() if table is None else table
    a, b = device_rows(t, "mi250-gcd"), device_rows(t, "mi300x")
    common = sorted(set(a["model"]) & set(b["model"]))
    a, b = (
        a[a["model"].isin(common)].reset_index(drop=True),
        b[b["model"].isin(common)].reset_index(drop=True),
    )
    folds = [Fold("MI250 -> MI300X", a, b), Fold("MI300X -> MI250", b, a)]
    return Scenario(
        "gpu-transfer",
        f"GPU transfer: fit one device's rows ({', '.join(common)}), transfer the parameter file "
        "(slim transfer), validate the other device",
        TRUTH_T, TRUTH_L, folds,
    )  # fmt: skip


def transfer_scenarios(table: pd.DataFrame | None = None) -> list[Scenario]:
    t = llmib_table() if table is None else table
    return [context_scenario(t), tp_scenario(t), gpu_transfer_scenario(t)]


#: registry names of the compared methods; every model reads the tensor_parallel column (slimlib.model.parallel)
METHODS: tuple[str, ...] = ("paper", "slim")


def _fit_predict(method: str, fold: Fold, scenario: str, n_starts: int) -> tuple[Estimator, pd.DataFrame]:
    model = make_model(method, n_starts=n_starts).fit(fold.train)
    if scenario == "gpu-transfer":
        doc = transfer_params(json.loads(model.to_json()), str(fold.test["gpu"].iloc[0]))
        model = load_params(json.dumps(untransferred(doc)))
    return model, model.predict(fold.test)


def run_transfer(
    scenarios: list[Scenario] | None = None, methods: list[str] | None = None, *, n_starts: int = 8
) -> pd.DataFrame:
    """Per-row predictions (test rows of every fold, every method) of the transfer scenarios; the warnings the fits
    raised are in ``attrs["warnings"]`` (scenario, method, fold, category, message)."""
    scen = transfer_scenarios() if scenarios is None else scenarios
    parts = []
    caught: list[dict[str, str]] = []
    for s in scen:
        for method in methods or list(METHODS):
            for fold in s.folds:
                with warnings.catch_warnings(
                    record=True
                ) as record:  # kept in attrs["warnings"], not silenced
                    warnings.simplefilter("always")
                    try:
                        _, pred = _fit_predict(method, fold, s.name, n_starts)
                    except SlimError as exc:  # reported, not hidden
                        pred = pd.DataFrame({"pred_throughput_tok_s": np.nan, "pred_e2e_s": np.nan},
                                            index=fold.test.index)  # fmt: skip
                        warnings.warn(f"not fitted: {exc}", stacklevel=2)
                caught += [{"scenario": s.name, "method": method, "fold": fold.label,
                            "category": w.category.__name__, "message": str(w.message)} for w in record]  # fmt: skip
                part = fold.test.copy()
                part.insert(0, "fold", fold.label)
                part.insert(0, "method", method)
                part.insert(0, "scenario", s.name)
                part["pred_throughput_tok_s"] = pred["pred_throughput_tok_s"].to_numpy()
                part["pred_e2e_s"] = pred["pred_e2e_s"].to_numpy()
                part["n_train"] = len(fold.train)
                parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out.attrs["warnings"] = pd.DataFrame(
        caught, columns=["scenario", "method", "fold", "category", "message"]
    )
    return out


def transfer_table(pred: pd.DataFrame, by: tuple[str, ...] = ("scenario", "fold")) -> pd.DataFrame:
    """Throughput and latency MAPE (%) and signed throughput bias (%) per scenario, fold and method."""
    rows = []
    for key, g in pred.groupby([*by, "method"], sort=False):
        t, p = g["throughput_tok_s"].to_numpy(), g["pred_throughput_tok_s"].to_numpy()
        ok = np.isfinite(p)
        rows.append({**dict(zip([*by, "method"], key, strict=True)),
                     "n_train": int(g.drop_duplicates("fold")["n_train"].sum()), "n_test": len(g),
                     "throughput_mape_pct": mape(t[ok], p[ok]) if ok.all() else np.nan,
                     "latency_mape_pct": mape(g["e2e_s"].to_numpy(), g["pred_e2e_s"].to_numpy())
                     if ok.all() else np.nan,
                     "bias_pct": float(100 * np.mean(p / t - 1)) if ok.all() else np.nan})  # fmt: skip
    return pd.DataFrame(rows)


def error_by(pred: pd.DataFrame, column: str, scenario: str = "context-transfer") -> pd.DataFrame:
    """Throughput MAPE (%) of one scenario by fold, method and `column` (e.g. input_len, to see what grows)."""
    p = pred[pred["scenario"] == scenario]
    g = p.assign(ape=100 * (p["pred_throughput_tok_s"] / p["throughput_tok_s"] - 1).abs())
    return g.pivot_table(index=["fold", "method"], columns=column, values="ape", aggfunc="mean", sort=False)


def context_residuals(pred: pd.DataFrame, method: str = "slim") -> pd.DataFrame:
    """Signed latency residual (measured - predicted) per decode step, ms, by device, model, batch and L: the
    time a method misses, which grows with context when the attention or KV-capacity terms are wrong."""
    p = pred[(pred["scenario"] == "context-transfer") & (pred["method"] == method)]
    miss = 1000 * (p["e2e_s"] - p["pred_e2e_s"]) / p["output_len"]
    return p.assign(missed_ms_per_step=miss).pivot_table(
        index=["fold", "model", "batch_size"], columns="input_len", values="missed_ms_per_step", sort=False
    )


# ---------------------------------------------------------------------------------------------------------------
# Figures: parity of the transfer scenarios; the MI300X knee with SLIM-BCA's recommendation
# ---------------------------------------------------------------------------------------------------------------
def plot_parity(pred: pd.DataFrame, axes, methods: list[str] | None = None) -> None:
    """Measured vs predicted throughput of the test rows, one axis per scenario, one marker colour per method."""

    names = list(dict.fromkeys(pred["scenario"]))
    methods = methods or list(dict.fromkeys(pred["method"]))
    for ax, s in zip(np.ravel(axes), names, strict=False):
        p = pred[pred["scenario"] == s]
        both = np.concatenate(
            [p["throughput_tok_s"].to_numpy(float), p["pred_throughput_tok_s"].to_numpy(float)]
        )
        both = both[np.isfinite(both) & (both > 0)]
        lo, hi = both.min() / 1.3, both.max() * 1.3  # every point inside, the same range on both axes
        for m in methods:
            q = p[p["method"] == m]
            ax.loglog(q["throughput_tok_s"], q["pred_throughput_tok_s"], "o", ms=1.8, alpha=0.7,
                      color=method_style(m)[0], label=method_label(m))  # fmt: skip
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.6)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal", adjustable="box")
        ax.set_title(s, fontsize="small")
        ax.set_xlabel("measured throughput (tok/s)")
    np.ravel(axes)[0].set_ylabel("predicted throughput (tok/s)")
    np.ravel(axes)[0].legend(fontsize="x-small", markerscale=2)


def knee_advice(
    table: pd.DataFrame | None = None,
    *,
    gpu: str = "mi300x",
    length: int = 1024,
    method: str = "slim",
    epsilon: float = 0.3,
    slo_factor: float = 4.0,
    reference_batch: int = 16,
    n_starts: int = 8,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SLIM-BCA (Eq. 13) on the one-device curves of `gpu` at IL = OL = `length`, against the measured curves.

    One fit of `method` on 3 pre-knee points of each model's curve (`slimlib.experiments.accuracy.scenarios.pre_knee_points`,
    pooled as in the paper's same-curve scenario); per model, predict the measured batch sizes (1..256), and apply Eq. 13 with SLO = `slo_factor` x the
    measured E2E at `reference_batch` and the efficiency floor `epsilon`; ``b_true`` is Eq. 13 on the measured
    curve, ``best_measured_throughput_tok_s`` the measured throughput there (the same constrained best, never the
    unconstrained maximum), ``b_cap_is_1`` flags a recommendation of B = 1; ``b_cap_measured_t1`` is Eq. 13 on the predictions with the measured single-request throughput T(1) in
    the efficiency constraint (one extra measurement at B = 1). Returns (advice: one row per model, curves: measured and predicted throughput per model and B)."""

    t = llmib_table() if table is None else table
    d = device_rows(t, gpu)
    d = d[d["input_len"] == length]
    cand = np.sort(d["batch_size"].unique()).astype(float)
    groups = {}
    for model, g in d.groupby("model", sort=True):
        g = g.sort_values("batch_size").reset_index(drop=True)
        if len(g) >= 4 and reference_batch in set(g["batch_size"]) and 1 in set(g["batch_size"]):
            groups[model] = g
    train = pd.concat(
        [
            g.iloc[pre_knee_points(g["batch_size"].to_numpy(), g["throughput_tok_s"].to_numpy())]
            for g in groups.values()
        ]
    )
    m = make_model(method, n_starts=n_starts)
    m.fit(train.reset_index(drop=True))  # its warnings reach the caller
    rows, curves = [], []
    for model, g in groups.items():
        own = train[train["model"] == model]
        grid = pd.DataFrame({"model": model, "gpu": gpu, "tensor_parallel": float(DEVICES[gpu]),
                             "batch_size": cand, "input_len": float(length), "output_len": float(length)})  # fmt: skip
        p = m.predict(grid)
        slo = slo_factor * float(g.loc[g["batch_size"] == reference_batch, "e2e_s"].iloc[0])
        i_pred, _, _ = batch_capacity(cand, p["pred_throughput_tok_s"].to_numpy(), p["pred_e2e_s"].to_numpy(), slo,
                                      epsilon)  # fmt: skip
        i_true, _, _ = batch_capacity(g["batch_size"].to_numpy(), g["throughput_tok_s"].to_numpy(),
                                      g["e2e_s"].to_numpy(), slo, epsilon)  # fmt: skip
        t1 = float(g.loc[g["batch_size"] == 1, "throughput_tok_s"].iloc[0])
        i_t1, _, _ = batch_capacity(cand, p["pred_throughput_tok_s"].to_numpy(), p["pred_e2e_s"].to_numpy(), slo,
                                    epsilon, throughput_b1=t1)  # fmt: skip
        b_cap = float(cand[i_pred[0]]) if i_pred[0] >= 0 else np.nan
        b_true = float(g["batch_size"].iloc[i_true[0]]) if i_true[0] >= 0 else np.nan
        near = g.iloc[(g["batch_size"] - b_cap).abs().argmin()] if np.isfinite(b_cap) else None
        best = (float(g.loc[g["batch_size"] == b_true, "throughput_tok_s"].iloc[0]) if np.isfinite(b_true)
                else np.nan)  # fmt: skip
        rows.append({"model": model, "length": length, "slo_s": slo, "n_calibration": len(own),
                     "calibration_batches": ",".join(str(int(b)) for b in own["batch_size"]),
                     "b_cap": b_cap, "b_cap_measured_t1": float(cand[i_t1[0]]) if i_t1[0] >= 0 else np.nan,
                     "b_true": b_true, "b_cap_is_1": bool(b_cap == 1), "method": method,
                     "measured_throughput_at_b_cap_tok_s": float(near["throughput_tok_s"]) if near is not None
                     else np.nan,
                     "measured_e2e_at_b_cap_s": float(near["e2e_s"]) if near is not None else np.nan,
                     "best_measured_throughput_tok_s": best})  # fmt: skip
        curves.append(g.assign(kind="measured")[["model", "batch_size", "throughput_tok_s", "e2e_s", "kind"]])
        curves.append(pd.DataFrame({"model": model, "batch_size": cand, "throughput_tok_s": p["pred_throughput_tok_s"],
                                    "e2e_s": p["pred_e2e_s"], "kind": "predicted"}))  # fmt: skip
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def plot_knee(advice: pd.DataFrame, curves: pd.DataFrame, axes) -> None:
    """Measured (points) and predicted (line, named by the SLIM variant of ``advice['method']``) throughput vs B
    per model, with B_cap (solid) and B_true (dashed); a B_cap of 1 is flagged in the panel title. One legend
    below the panels, so that none covers data."""

    for ax, (_, a) in zip(np.ravel(axes), advice.iterrows(), strict=False):
        c = curves[curves["model"] == a["model"]]
        meas, pred = c[c["kind"] == "measured"], c[c["kind"] == "predicted"]
        ax.plot(
            pred["batch_size"],
            pred["throughput_tok_s"] / 1e3,
            "-",
            lw=0.9,
            color=method_style(str(a.get("method", "slim")))[0],
            label=method_label(str(a.get("method", "slim"))),
        )
        ax.plot(meas["batch_size"], meas["throughput_tok_s"] / 1e3, "o", ms=3, color="k", label="measured")
        if np.isfinite(a["b_cap"]):
            ax.axvline(a["b_cap"], color="#777777", lw=1.2, label="B_cap (SLIM-BCA)")  # not a method colour
        if np.isfinite(a["b_true"]):
            ax.axvline(a["b_true"], color="#BBBBBB", lw=1.2, ls="--", label="B_true (measured best)")
        ax.set_xscale("log", base=2)
        flag = "\nflag: B_cap = 1" if bool(a.get("b_cap_is_1", False)) else "\n"
        ax.set_title(str(a["model"]) + flag, fontsize=6)
        ax.set_xlabel("batch size B")
    np.ravel(axes)[0].set_ylabel("throughput (k tok/s)")
    first = np.ravel(axes)[0]
    first.figure.legend(*first.get_legend_handles_labels(), fontsize="x-small", loc="outside lower center",
                        ncol=4, frameon=False)  # fmt: skip
