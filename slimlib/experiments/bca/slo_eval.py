"""SLIM-BCA under TTFT/TPOT/E2E SLOs, evaluated on measurements: does the advisor's pick meet the measured
constraints, and does it reach 90% of the measured best throughput per GPU, fitted on a few profiled runs?

Sources (`SOURCES`), each a table of measured curves, one row per run: ``source, model, gpu, tensor_parallel,
batch_size, input_len, output_len, throughput_tok_s, ttft_s, tpot_s, e2e_s, duration_s, preempted`` (NaN where
the source does not measure a quantity), a curve being one (source, model, GPU, IL, OL):

* ``engine-cpu``: the package's own vLLM CPU-engine campaign (`engine_curves`, medians over repeats); TTFT and
  TPOT are the client's means (``--max-concurrency B``: no client-side queue).
* ``memgap-online``: the public online runs (`advisor_eval.measured_curves`); TPOT is the client's mean, E2E the
  in-engine latency by Little's law; TTFT is left out (every prompt is sent at once: queueing dominates it).
* ``memgap-offline``: the public offline runs without a profiler (one batch of B requests, ``LLM.generate``):
  TTFT is the measured prefill step (it samples the first token), TPOT the decode time per decode step, so
  ``E2E = TTFT + (OL - 1) TPOT``; benchmark time is E2E.
* ``llmib``: the public LLM-inference-bench runs on registry GPUs, with their tensor-parallel variety; E2E only
  (the source has no TTFT/TPOT). Throughput per GPU = throughput / TP (replicas = node / TP).

SLO levels come from each curve's own range (`SLO_LEVELS`): a limit is the quantile of the curve's measured values
of that quantity over its runs (tight 0.25, loose 0.75), for every quantity the source measures (`SLO_QUANTITIES`).

Protocol: one fit per (model, GPU) on `calibration_points` of each curve (the first k runs of
`slimlib.advisor.plan.CALIBRATION_ORDER` present, cycling over the curve's TP degrees); the advisor searches the
curve's measured (TP, B) points with the fitted model (`slimlib.advisor.deploy.capped`: every limit, efficiency
floor, KV capacity), picks the TP of highest predicted throughput per GPU, and is scored against the full sweep:
``meets`` (the pick's measured latencies within the limits, measured efficiency above epsilon, not preempted) and
``reaches_90`` (meets and >= 90% of the measured best throughput per GPU among the measured-feasible runs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.advisor.deploy import capped
from slimlib.advisor.plan import CALIBRATION_ORDER
from slimlib.advisor.slo import LIMITS, Slo, serving_grid
from slimlib.data import load
from slimlib.experiments.accuracy.scenarios import ENGINE_TABLE, cpu_kv_blocks
from slimlib.experiments.bca.advisor_eval import measured_curves
from slimlib.experiments.outputs import uncertainty as U
from slimlib.model import DEFAULT_VARIANT, make_model
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.vllm_flags import CPU_SERVER_BATCHED_TOKENS

__all__ = [
    "SLO_LEVELS",
    "SLO_QUANTITIES",
    "SOURCES",
    "calibration_points",
    "engine_curves",
    "evaluate_slos",
    "evaluate_sources",
    "llmib_curves",
    "memgap_curves",
    "memgap_offline_curves",
    "slo_levels",
    "summarize",
]

#: SLO level -> quantile of a curve's own measured values at which each limit is set
SLO_LEVELS = {"tight": 0.25, "loose": 0.75}
#: source -> the measured quantities its SLOs limit (module docstring)
SLO_QUANTITIES = {
    "engine-cpu": ("ttft", "tpot"),
    "memgap-online": ("tpot",),
    "memgap-offline": ("ttft", "tpot"),
    "llmib": ("e2e",),
}
#: a curve: one (source, model, GPU, IL, OL); its candidates are its (tensor_parallel, batch_size) runs
CURVE = ["source", "model", "gpu", "input_len", "output_len"]
COLUMNS = [*CURVE, "tensor_parallel", "batch_size", "throughput_tok_s", "ttft_s", "tpot_s", "e2e_s", "duration_s",
           "preempted"]  # fmt: skip


def engine_curves() -> pd.DataFrame:
    """The CPU-engine campaign (`slimlib.experiments.accuracy.scenarios.ENGINE_TABLE`, the one name of the engine
    table) as curves: the median over repeats of each configuration, with the campaign's KV pool in blocks
    (`cpu_kv_blocks`) and chunked prefill, as the engine evaluation's rows have them."""
    runs = load(ENGINE_TABLE)
    keys = ["model", "gpu", "batch_size", "input_len", "output_len"]
    num = ["throughput_tok_s", "mean_ttft_ms", "mean_tpot_ms", "e2e_s", "duration_s"]
    med = runs.astype({c: float for c in num}).groupby(keys, sort=True)[num].median().reset_index()
    out = med.assign(
        source="engine-cpu",
        tensor_parallel=1,
        ttft_s=med["mean_ttft_ms"] / 1e3,
        tpot_s=med["mean_tpot_ms"] / 1e3,
        preempted=False,
        gpu_blocks=cpu_kv_blocks(med["model"]),
        chunked_prefill=True,
        max_num_batched_tokens=float(CPU_SERVER_BATCHED_TOKENS),
    )
    return _table(out, extra=("gpu_blocks", "chunked_prefill", "max_num_batched_tokens"))


def memgap_curves() -> pd.DataFrame:
    """The public online advisor family (`advisor_eval.measured_curves`): TPOT and in-engine E2E, with the engine
    settings (logged blocks, block size, chunked prefill) the predictions read."""
    cur = measured_curves(load("memgap-online"))
    out = cur.assign(
        source="memgap-online",
        tensor_parallel=1,
        ttft_s=np.nan,
        tpot_s=cur["mean_tpot_ms"].astype(float) / 1e3,
        e2e_s=cur["measured_e2e_s"].astype(float),
    )
    return _table(out, extra=("gpu_blocks", "block_size", "chunked_prefill", "max_num_batched_tokens"))


def memgap_offline_curves() -> pd.DataFrame:
    """The public offline runs without a profiler and with valid timing (module docstring), logged blocks kept."""
    runs = load("memgap-offline")
    runs = runs[(runs["profiler"] == "none") & runs["timing_valid"].fillna(False).astype(bool)]
    tpot = runs["decode_s"].astype(float) / runs["n_decode_steps"].astype(float)
    out = runs.assign(source="memgap-offline", tensor_parallel=1, ttft_s=runs["prefill_s"].astype(float),
                      tpot_s=tpot, duration_s=runs["e2e_s"].astype(float),
                      preempted=runs["preempted"].fillna(False).astype(bool), chunked_prefill=False)  # fmt: skip
    return _table(out, extra=("gpu_blocks", "chunked_prefill"))


def llmib_curves() -> pd.DataFrame:
    """The public LLM-inference-bench runs on registry GPUs with registry models (E2E, TP variety)."""
    runs = load("llmib-runs")
    runs = runs[runs["gpu_in_registry"].fillna(False).astype(bool)]
    return _table(
        runs.assign(source="llmib", ttft_s=np.nan, tpot_s=np.nan, duration_s=np.nan, preempted=False,
                    chunked_prefill=False),  # as `llmib_table`: whole prompts per step
        extra=("chunked_prefill",),
    )  # fmt: skip


def _table(df: pd.DataFrame, extra=()) -> pd.DataFrame:
    out = df[[*COLUMNS, *extra]].copy()
    out = out.astype({"model": str, "gpu": str, "tensor_parallel": int, "batch_size": int, "input_len": float,
                      "output_len": float, "preempted": bool})  # fmt: skip
    return out.sort_values([*CURVE, "tensor_parallel", "batch_size"], kind="mergesort").reset_index(drop=True)


SOURCES = {
    "engine-cpu": engine_curves,
    "memgap-online": memgap_curves,
    "memgap-offline": memgap_offline_curves,
    "llmib": llmib_curves,
}


def calibration_points(curves: pd.DataFrame, k: int, order=CALIBRATION_ORDER) -> pd.DataFrame:
    """The runs profiled for the fit: per curve, the i-th point (i < `k`) is the i-th batch size of `order`
    present at the curve's TP degree number ``i mod n_TP`` (ascending), skipping preempted runs and points absent
    from the sweep."""
    picked = []
    for _, curve in curves.groupby(CURVE, sort=True):
        ok = curve[~curve["preempted"]]
        tps = sorted(ok["tensor_parallel"].unique())
        have = set(zip(ok["tensor_parallel"], ok["batch_size"], strict=True))
        chosen: list[tuple[int, int]] = []
        for b in order:
            if len(chosen) == k:
                break
            tp = tps[len(chosen) % len(tps)]
            for t in [tp, *tps]:  # that TP, else any TP that ran this batch size
                if (t, b) in have and (t, b) not in chosen:
                    chosen.append((t, b))
                    break
        picked.append(
            ok[[(t, b) in chosen for t, b in zip(ok["tensor_parallel"], ok["batch_size"], strict=True)]]
        )
    return pd.concat(picked).sort_index()


def slo_levels(curves: pd.DataFrame, levels=None) -> pd.DataFrame:
    """One row per (curve, level) with the limits ``ttft_s, tpot_s, e2e_s`` (inf where not limited): the level's
    quantile of the curve's measured values of each quantity its source limits (`SLO_QUANTITIES`)."""
    levels = levels or SLO_LEVELS
    rows = []
    for key, curve in curves.groupby(CURVE, sort=True):
        quantities = SLO_QUANTITIES[key[0]]
        for name, q in levels.items():
            row = dict(zip(CURVE, key, strict=True)) | {"slo": name, "slo_quantile": q}
            for quantity in LIMITS:
                v = curve[f"{quantity}_s"].to_numpy(dtype=float)
                row[f"{quantity}_s"] = float(np.nanquantile(v, q)) if quantity in quantities else np.inf
            rows.append(row)
    return pd.DataFrame(rows)


def fit_groups(calibration: pd.DataFrame, variant: str | None = None, n_starts: int = 8) -> dict:
    """One fit per (source, model, GPU) on its calibration runs (all its curves together)."""
    cols = ["model", "gpu", "batch_size", "input_len", "output_len", "tensor_parallel", "throughput_tok_s"]
    fits = {}
    for key, rows in calibration.groupby(["source", "model", "gpu"], sort=True):
        data = rows[cols].reset_index(drop=True).astype({"batch_size": float})
        fits[key] = make_model(variant or DEFAULT_VARIANT, n_starts=n_starts).fit(data)
    return fits


def _measured_efficiency(curve: pd.DataFrame) -> np.ndarray:
    """T(B) / (B T(1)) per run with T(1) measured at the same TP (T(B_min) / B_min where B = 1 is absent)."""
    first = curve.groupby("tensor_parallel")[["batch_size", "throughput_tok_s"]].transform("first")
    t1 = first["throughput_tok_s"].to_numpy(float) / first["batch_size"].to_numpy(float)
    return curve["throughput_tok_s"].to_numpy(float) / (curve["batch_size"].to_numpy(float) * t1)


def evaluate_slos(curves: pd.DataFrame, fits: dict, slos: pd.DataFrame, epsilon: float = 0.3) -> pd.DataFrame:
    """Per (curve, SLO level): the advisor's pick (``pick_tp``, ``pick_b``, ``binding``), the measured best
    (``best_tp``, ``best_b``, ``best_per_gpu_tok_s``), the pick's measured throughput per GPU, ``meets``,
    ``reaches_90`` and ``quality_pct`` (pick / best x 100 when it meets, else 0), module docstring."""
    out = []
    for key, curve in curves.groupby(CURVE, sort=True):
        curve = curve.sort_values(["tensor_parallel", "batch_size"], kind="mergesort")
        model = fits[key[:3]]
        tps = sorted(curve["tensor_parallel"].unique())
        b = np.array(sorted(set(curve["batch_size"]) | {1}), dtype=float)
        present = np.array([[((curve["tensor_parallel"] == t) & (curve["batch_size"] == x)).any() for x in b]
                            for t in tps])  # fmt: skip
        base = pd.DataFrame(
            {"model": key[1], "input_len": key[3], "output_len": key[4], "tensor_parallel": tps}
        )
        for col in ("gpu_blocks", "block_size", "chunked_prefill", "max_num_batched_tokens"):
            if col in curve.columns:
                base[col] = (
                    curve[col].iloc[0] if col != "gpu_blocks" else float(np.floor(curve[col].median()))
                )
        arch = get_architecture(key[1])
        ctx = key[3] + key[4]
        max_b = []
        for t in tps:
            cfg = serving_config(arch, key[2], tensor_parallel=t, gpu_blocks=base.get("gpu_blocks", [None])[0],
                                 block_size=base.get("block_size", [None])[0])  # fmt: skip
            max_b.append(cfg.num_gpu_blocks / float(cfg.request_blocks(ctx)))
        fits_mem = present & (b[None, :] <= np.array(max_b)[:, None])
        meas_eff = _measured_efficiency(curve)
        per_gpu = curve["throughput_tok_s"].to_numpy(float) / curve["tensor_parallel"].to_numpy(float)
        g = serving_grid(model, base, b)
        t1 = g["throughput"][:, 0]
        for _, s in slos[(slos[CURVE] == pd.Series(key, index=CURVE)).all(axis=1)].iterrows():
            slo = Slo(ttft_s=s["ttft_s"], tpot_s=s["tpot_s"], e2e_s=s["e2e_s"])
            ok_meas = (meas_eff > epsilon) & ~curve["preempted"].to_numpy()
            for q, lim in slo.limits().items():
                ok_meas &= curve[f"{q}_s"].to_numpy(float) <= lim
            j, binding, _ = capped(b, g, slo, epsilon, fits_mem, t1)
            pred_per_gpu = np.where(j >= 0, g["throughput"][np.arange(len(tps)), np.maximum(j, 0)], -np.inf)
            pred_per_gpu = pred_per_gpu / np.array(tps, dtype=float)
            row = dict(zip(CURVE, key, strict=True)) | {"slo": s["slo"], "epsilon": epsilon,
                   **{f"{q}_limit_s": s[f"{q}_s"] for q in LIMITS}}  # fmt: skip
            if (j >= 0).any():
                i = int(np.argmax(pred_per_gpu))
                pick = (tps[i], int(b[j[i]]))
                at = (curve["tensor_parallel"] == pick[0]).to_numpy() & (
                    curve["batch_size"] == pick[1]
                ).to_numpy()
                row |= {"pick_tp": pick[0], "pick_b": pick[1], "binding": binding[i],
                        "pred_per_gpu_tok_s": float(pred_per_gpu[i]),
                        "pick_per_gpu_tok_s": float(per_gpu[at][0]), "meets": bool(ok_meas[at][0])}  # fmt: skip
            else:
                row |= {"pick_tp": 0, "pick_b": 0, "binding": binding[0], "pred_per_gpu_tok_s": np.nan,
                        "pick_per_gpu_tok_s": np.nan, "meets": False}  # fmt: skip
            if ok_meas.any():
                k = int(np.argmax(np.where(ok_meas, per_gpu, -np.inf)))
                row |= {"best_tp": int(curve["tensor_parallel"].iloc[k]), "best_b": int(curve["batch_size"].iloc[k]),
                        "best_per_gpu_tok_s": float(per_gpu[k])}  # fmt: skip
            else:
                row |= {"best_tp": 0, "best_b": 0, "best_per_gpu_tok_s": np.nan}
            ratio = row["pick_per_gpu_tok_s"] / row["best_per_gpu_tok_s"] * 100
            row["quality_pct"] = (
                ratio if row["meets"] else (0.0 if np.isfinite(row["best_per_gpu_tok_s"]) else np.nan)
            )
            row["reaches_90"] = bool(row["meets"] and ratio >= 90.0)
            out.append(row)
    return pd.DataFrame(out)


def summarize(
    results: pd.DataFrame,
    curves: pd.DataFrame,
    calibration: pd.DataFrame,
    n_boot: int = U.N_BOOT,
    seed: int = U.SEED,
) -> pd.DataFrame:
    """Per (source, SLO level): curves scored (those with a measured-feasible run), the share whose pick meets the
    measured constraints and the share reaching >= 90% of the measured best, each with a bootstrap 95% interval
    over curves, the mean quality, and the profiling runs (and benchmark seconds where measured) saved against the
    full sweep."""
    rows = []
    for (source, slo), part in results.groupby(["source", "slo"], sort=True):
        scored = part[np.isfinite(part["best_per_gpu_tok_s"].to_numpy(float))]
        label = f"slo-eval {source} / {slo}"
        meets = U.bootstrap_mean_ci(scored["meets"].astype(float) * 100, n_boot=n_boot, seed=seed,
                                    label="meets " + label)  # fmt: skip
        reach = U.bootstrap_mean_ci(scored["reaches_90"].astype(float) * 100, n_boot=n_boot, seed=seed,
                                    label="reach " + label)  # fmt: skip
        full = curves[curves["source"] == source]
        cal = calibration[calibration["source"] == source]
        dur_full = float(full["duration_s"].sum()) if full["duration_s"].notna().all() else np.nan
        dur_cal = float(cal["duration_s"].sum()) if cal["duration_s"].notna().all() else np.nan
        rows.append(
            {
                "source": source,
                "slo": slo,
                "limits": "+".join(LIMITS[q] for q in SLO_QUANTITIES[source]),
                "curves": int(len(part)),
                "scored": int(len(scored)),
                "meets_pct": meets[0],
                "meets_ci_lo_pct": meets[1],
                "meets_ci_hi_pct": meets[2],
                "reaches_90_pct": reach[0],
                "reaches_90_ci_lo_pct": reach[1],
                "reaches_90_ci_hi_pct": reach[2],
                "mean_quality_pct": float(scored["quality_pct"].mean()),
                "runs_calibration": int(len(cal)),
                "runs_full": int(len(full)),
                "runs_saved_pct": (1 - len(cal) / len(full)) * 100,
                "gpu_s_saved_pct": (1 - dur_cal / dur_full) * 100 if np.isfinite(dur_full) else np.nan,
            }
        )
    return pd.DataFrame(rows)


def evaluate_sources(
    k: int = 3,
    epsilon: float = 0.3,
    *,
    sources=tuple(SOURCES),
    n_starts: int = 8,
    n_boot: int = U.N_BOOT,
    seed: int = U.SEED,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`evaluate_slos` and `summarize` for each source of `sources` (k calibration runs per curve), stacked:
    ``(results, summary)``."""
    results, summaries = [], []
    for name in sources:
        curves = SOURCES[name]()
        cal = calibration_points(curves, k)
        res = evaluate_slos(curves, fit_groups(cal, n_starts=n_starts), slo_levels(curves), epsilon)
        results.append(res)
        summaries.append(summarize(res, curves, cal, n_boot=n_boot, seed=seed))
    return pd.concat(results, ignore_index=True), pd.concat(summaries, ignore_index=True)
