"""SLIM-BCA evaluated against fully profiled measured curves (paper Sec. VII-B, notebook 07): recommendation
quality, profiling effort saved and KV-cache memory saved."""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.advisor.capacity import BINDING_LABELS, advise_many, check_epsilon
from slimlib.advisor.plan import CALIBRATION_ORDER
from slimlib.errors import DataError
from slimlib.experiments.accuracy.scenarios import in_engine_latency_s, online_runs
from slimlib.experiments.outputs import table_format as T
from slimlib.experiments.outputs import uncertainty as U
from slimlib.model import DEFAULT_VARIANT, make_model
from slimlib.model.memory import GIB
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture

#: The two SLIM-BCA variants evaluated side by side: "faithful" is Eq. 13 as the paper defines it (the paper's model,
#: Eqs. 3-12, with the SLO and efficiency constraints only); "project" is this package's default (the recommended model ``slim``
#: plus a KV-memory constraint that is not in Eq. 13: B_cap's full-length KV cache must fit the default pool).
ADVISOR_VARIANTS = {
    "faithful": {"model": "paper", "respect_memory": False,
                 "label": "SLIM-BCA faithful (paper model, Eq. 13, no memory constraint)"},
    "project": {"model": "slim", "respect_memory": True,
                "label": "SLIM-BCA project variant (recommended model + KV-memory constraint)"},
}  # fmt: skip

#: Order in which batch sizes join a curve's calibration set (first k present and not preempted are used): the
#: SLO reference 32 and a low point first, then points spreading over the pre-knee and knee region.
CURVE_KEYS = ["model", "output_len"]


def measured_curves(online: pd.DataFrame, family: str = "advisor") -> pd.DataFrame:
    """Measured serving curves of one online family, one row per (model, OL, max_num_seqs) run.

    Adds ``measured_e2e_s`` (mean time a request spends in service, by Little's law: mean running requests /
    request throughput; the benchmark sends every prompt at once, so TTFT is dominated by queueing and is not used),
    ``efficiency`` = T(B) / (B T(1)) with T(1) measured (or T(B_min)/B_min where the curve lacks B = 1, flagged in
    ``t1_from_batch``), and ``kv_default_gib`` = logged GPU blocks x block size x KV bytes per token (GiB).
    """
    df = online_runs(online, family).sort_values([*CURVE_KEYS, "batch_size"], kind="mergesort")
    df = df.reset_index(drop=True)
    df["measured_e2e_s"] = in_engine_latency_s(df)
    first = df.groupby(CURVE_KEYS, sort=True)[["batch_size", "throughput_tok_s"]].transform("first")
    df["t1_from_batch"] = first["batch_size"].astype(int)
    t1 = first["throughput_tok_s"] / first["batch_size"].astype(float)
    df["efficiency"] = df["throughput_tok_s"] / (df["batch_size"].astype(float) * t1)
    per_tok = df["model"].map(lambda m: serving_config(get_architecture(m)).kv_bytes_per_token).astype(float)
    df["kv_default_gib"] = df["gpu_blocks"].astype(float) * df["block_size"].astype(float) * per_tok / GIB
    df["preempted"] = df["preempted"].fillna(False).astype(bool)
    return df


def calibration_subset(curves: pd.DataFrame, k: int, order=CALIBRATION_ORDER) -> pd.DataFrame:
    """The first `k` batch sizes of `order` present (and not preempted) on each curve: the runs SLIM-BCA profiles."""
    rank = {b: i for i, b in enumerate(order)}
    pool = curves[~curves["preempted"] & curves["batch_size"].isin(list(order))].copy()
    pool["_rank"] = pool["batch_size"].map(rank)
    pool = pool.sort_values([*CURVE_KEYS, "_rank"], kind="mergesort")
    picked = pool.groupby(CURVE_KEYS, sort=True).head(k).drop(columns="_rank")
    return picked.sort_values([*CURVE_KEYS, "batch_size"], kind="mergesort")


def slo_table(curves: pd.DataFrame, reference_batch: int = 32, factors=None) -> pd.DataFrame:
    """SLOs per curve: ``factor x`` the measured E2E of the reference configuration (same model and OL, B =
    `reference_batch`), default factors tight = 2 and loose = 4 (the paper's choice of multiples)."""
    factors = factors or {"tight": 2.0, "loose": 4.0}
    ref = curves[curves["batch_size"] == reference_batch].set_index(CURVE_KEYS)["measured_e2e_s"]
    keys = curves[CURVE_KEYS].drop_duplicates().set_index(CURVE_KEYS).index
    lacking = [k for k in keys if k not in ref.index]
    if lacking:
        raise DataError(f"curve(s) {lacking} have no run at the reference batch size {reference_batch}")
    rows = [
        {"model": m, "output_len": o, "slo": name, "slo_factor": f, "reference_e2e_s": ref.loc[(m, o)],
         "slo_s": f * ref.loc[(m, o)]}
        for (m, o) in keys
        for name, f in factors.items()
    ]  # fmt: skip
    return pd.DataFrame(rows)


def fit_per_model(calibration: pd.DataFrame, variant: str | None = None, n_starts: int = 8) -> dict:
    """One SLIM fit per model on its calibration rows (all its output lengths together)."""

    cols = ["model", "gpu", "batch_size", "input_len", "output_len", "throughput_tok_s"]
    fits = {}
    for name, rows in calibration.groupby("model", sort=True):
        data = (
            rows[cols]
            .reset_index(drop=True)
            .astype({"batch_size": float, "input_len": float, "output_len": float})
        )
        fits[name] = make_model(variant or DEFAULT_VARIANT, n_starts=n_starts).fit(data)
    return fits


def measured_feasible(curve: pd.DataFrame, slo_s: float, epsilon: float) -> pd.Series:
    """Eq. 13's two constraints, measured, which every advisor variant is scored against (one ground truth for
    all): measured E2E <= SLO and measured efficiency > epsilon. Preemption is not one of them (Eq. 13 does not
    model it): it is reported beside the score (``preempted``), never scored."""
    return (curve["measured_e2e_s"] <= slo_s) & (curve["efficiency"] > epsilon)


#: Why a pick scores quality 0: each of Eq. 13's measured constraints at B_cap that it breaks (`measured_feasible`).
ZERO_REASONS = {
    "slo_violation": "SLO violated",
    "efficiency_below_epsilon": "efficiency below epsilon",
}


def zero_quality_reason(row) -> str:
    """Eq. 13's measured constraints a recommendation breaks at B_cap, joined by "; " (`ZERO_REASONS`: SLO
    violated, efficiency below epsilon), i.e. why it scores quality 0; "none" when it meets them all, "no B_cap"
    when the advisor recommends nothing."""
    if not row.get("b_cap", 0) > 0:
        return "no B_cap"
    broken = [text for col, text in ZERO_REASONS.items() if _flag(row.get(col))]
    return "; ".join(broken) or "none"


def _flag(value) -> bool:
    """A measured yes/no flag, False where missing (None or NaN)."""
    return value is not None and bool(pd.notna(value)) and bool(value)


#: Columns of the `bca_recommendations` table (notebook 07), in order: the pick, its score and why a pick scores 0,
#: then each measured constraint at B_cap (SLO, efficiency floor epsilon) and whether the run preempted. Names as in
#: `evaluate_recommendations`.
RECOMMENDATION_COLUMNS = [
    "variant", "model", "output_len", "slo", "slo_s", "epsilon", "b_cap", "binding", "b_true",
    "pred_throughput_tok_s", "measured_throughput_tok_s", "true_throughput_tok_s", "quality_pct",
    "quality_zero_reason", "measured_e2e_s", "slo_violation", "measured_efficiency", "efficiency_below_epsilon",
    "preempted",
]  # fmt: skip
#: Display of the columns `RECOMMENDATION_COLUMNS` adds (for `save_table(columns=...)`).
RECOMMENDATION_COLS = {
    "epsilon": T.Col(header="Efficiency floor epsilon (%)", decimals=0, percent=True),
    "quality_zero_reason": T.Col(header="Why quality is 0 (measured at B_cap)"),
    "efficiency_below_epsilon": T.Col(header="Efficiency <= epsilon"),
    "preempted": T.Col(header="Preempted at B_cap"),
}
#: Note of the `bca_recommendations` table explaining the reason column.
ZERO_REASON_NOTE = (
    "Why quality is 0: Eq. 13's measured constraints B_cap breaks (SLO violated: in-engine latency above the SLO; "
    "efficiency below epsilon: measured T(B) / (B T(1)) <= epsilon); none: the pick meets both. Preempted: the "
    "run at B_cap preempted requests, which Eq. 13 does not model (reported, not scored)."
)


def recommendation_table(rec: pd.DataFrame) -> pd.DataFrame:
    """The `bca_recommendations` table: `RECOMMENDATION_COLUMNS` of `evaluate_recommendations` output (or of
    `recommendations_by_variant`, which adds ``variant``), sorted by variant, model, output length and SLO."""
    keys = ["variant", "model", "output_len", "slo"]
    missing = [c for c in [*keys, "b_cap"] if c not in rec.columns]
    if missing:
        raise DataError(f"recommendation_table needs columns {missing} (recommendations_by_variant)")
    # the measured-at-B_cap columns stay empty where no variant made a pick
    table = rec.reindex(columns=RECOMMENDATION_COLUMNS)
    return table.sort_values(keys, kind="mergesort").reset_index(drop=True)


def evaluate_recommendations(
    curves: pd.DataFrame, fits: dict, slos: pd.DataFrame, epsilon: float = 0.3, respect_memory: bool = True
) -> pd.DataFrame:
    """Recommended B_cap (searched over each curve's measured batch sizes) vs the measured best configuration.

    `fits` maps model name to a fitted model; `slos` comes from `slo_table`; `respect_memory` is the advisor's
    own KV-memory constraint. Ground truth per curve and SLO, the same for every variant (`measured_feasible`):
    the measured configuration of highest throughput within Eq. 13's constraints, measured E2E <= SLO and measured
    efficiency > epsilon. Quality: ``quality_pct`` = measured throughput at B_cap / ground-truth throughput x 100
    when B_cap meets those same measured constraints (``feasible``), else 0: a recommendation that violates the SLO
    or misses the efficiency floor is a miss, never a score above 100% (``throughput_ratio_pct`` keeps the plain
    ratio); a run that preempted is reported (``preempted``), not scored, as Eq. 13 does not model preemption. At B_cap the measured outcome of each constraint is kept (``slo_violation``,
    ``efficiency_below_epsilon``, ``preempted``) and ``quality_zero_reason`` names the ones a miss breaks
    (`zero_quality_reason`: "none" for a pick that meets them all, "no B_cap" without a pick). ``kv_saved_gib`` =
    logged default KV allocation minus the blocks B_cap needs; ``binding`` names what stops B_cap (`slimlib.advisor.capacity.BINDING_LABELS`: latency SLO, efficiency floor, KV capacity,
    max-num-seqs = the largest measured batch, or a throughput peak).
    """
    check_epsilon(epsilon)
    out = []
    for (name, ol), curve in curves.groupby(CURVE_KEYS, sort=True):
        model = fits[name]
        b = curve["batch_size"].to_numpy(dtype=float)
        il = float(curve["input_len"].iloc[0])
        # the engine settings of the curve travel with the workload: the model caps B where predict does
        wl = pd.DataFrame({"model": [name], "input_len": [il], "output_len": [float(ol)],
                           "gpu_blocks": [float(np.floor(curve["gpu_blocks"].median()))],
                           "block_size": [float(curve["block_size"].iloc[0])],
                           "chunked_prefill": [bool(curve["chunked_prefill"].iloc[0])],
                           "max_num_batched_tokens": [float(curve["max_num_batched_tokens"].iloc[0])
                                                      if "max_num_batched_tokens" in curve else np.nan]})  # fmt: skip
        config = serving_config(get_architecture(name), block_size=curve["block_size"].iloc[0])
        kv_default = float(curve["kv_default_gib"].median()) * GIB
        for _, s in slos[(slos["model"] == name) & (slos["output_len"] == ol)].iterrows():
            adv = advise_many(
                model, wl, s["slo_s"], epsilon, batch_sizes=b,
                respect_memory=respect_memory, block_size=int(curve["block_size"].iloc[0]),
            ).iloc[0]  # fmt: skip
            meas_ok = measured_feasible(curve, s["slo_s"], epsilon)
            row = {"model": name, "output_len": ol, "input_len": il, "slo": s["slo"], "slo_s": s["slo_s"],
                   "epsilon": epsilon, "b_cap": int(adv["b_cap"]), "binding": BINDING_LABELS[adv["binding"]],
                   "pred_throughput_tok_s": adv["pred_throughput_tok_s"]}  # fmt: skip
            if meas_ok.any():
                best = (
                    curve[meas_ok]
                    .sort_values(["throughput_tok_s", "batch_size"], ascending=[False, True])
                    .iloc[0]
                )
                row.update(
                    b_true=int(best["batch_size"]), true_throughput_tok_s=float(best["throughput_tok_s"])
                )
            else:
                row.update(b_true=0, true_throughput_tok_s=np.nan)
            if adv["b_cap"] > 0:
                at = curve[curve["batch_size"] == adv["b_cap"]].iloc[0]
                needed = float(config.request_kv_bytes(il + ol)) * adv["b_cap"]
                row.update(
                    measured_throughput_tok_s=float(at["throughput_tok_s"]),
                    measured_e2e_s=float(at["measured_e2e_s"]),
                    measured_efficiency=float(at["efficiency"]),
                    slo_violation=bool(at["measured_e2e_s"] > s["slo_s"]),
                    slo_excess_pct=max(0.0, (at["measured_e2e_s"] / s["slo_s"] - 1) * 100),
                    efficiency_below_epsilon=bool(at["efficiency"] <= epsilon),
                    preempted=bool(at["preempted"]),
                    kv_needed_gib=needed / GIB,
                    kv_default_gib=kv_default / GIB,
                    kv_saved_gib=(kv_default - needed) / GIB,
                    feasible=bool(meas_ok[curve["batch_size"] == adv["b_cap"]].iloc[0]),
                )
            ratio = row.get("measured_throughput_tok_s", np.nan) / row["true_throughput_tok_s"] * 100
            row["throughput_ratio_pct"] = ratio
            row["quality_pct"] = (
                ratio if row.get("feasible", False) else (0.0 if np.isfinite(ratio) else np.nan)
            )
            row["quality_zero_reason"] = zero_quality_reason(row)
            out.append(row)
    return pd.DataFrame(out)


def profiling_effort(curves: pd.DataFrame, calibration: pd.DataFrame) -> dict:
    """Runs and GPU-seconds (benchmark durations) of the calibration set vs the full sweep of the same curves."""
    full_s = float(curves["duration_s"].sum())
    cal_s = float(calibration["duration_s"].sum())
    return {
        "runs_calibration": int(len(calibration)),
        "runs_full": int(len(curves)),
        "gpu_s_calibration": cal_s,
        "gpu_s_full": full_s,
        "gpu_s_saved_pct": (1 - cal_s / full_s) * 100,
    }


def quality_vs_effort(
    curves: pd.DataFrame,
    slos: pd.DataFrame,
    ks=(2, 3, 4, 5, 6),
    epsilon: float = 0.3,
    n_starts: int = 8,
    variant: str = "project",
    n_boot: int = U.N_BOOT,
    seed: int = U.SEED,
) -> pd.DataFrame:
    """For k calibration points per curve: profiling effort and recommendation quality of one advisor `variant`
    (a key of `ADVISOR_VARIANTS`), one row per (k, SLO).

    Columns: ``k, slo, runs_calibration, gpu_s_calibration, gpu_s_saved_pct, mean_quality_pct`` with its
    bootstrap 95% interval over curves (``quality_ci_lo_pct``, ``quality_ci_hi_pct``), ``min_quality_pct,
    exact_pct`` (B_cap equals the measured best), ``slo_violations``, ``efficiency_misses`` (measured efficiency at
    B_cap not above epsilon: such a pick scores quality 0, see `evaluate_recommendations`).
    """
    rows = []
    for k in ks:
        cal = calibration_subset(curves, k)
        spec = ADVISOR_VARIANTS[variant]
        fits = fit_per_model(cal, variant=spec["model"], n_starts=n_starts)
        ev = evaluate_recommendations(curves, fits, slos, epsilon, respect_memory=spec["respect_memory"])
        effort = profiling_effort(curves, cal)
        for name, part in ev.groupby("slo", sort=True):
            qm, qlo, qhi = U.bootstrap_mean_ci(part["quality_pct"].dropna(), n_boot=n_boot, seed=seed,
                                               label=f"effort {variant} k={k} / {name}")  # fmt: skip
            rows.append(
                {
                    "variant": variant,
                    "k": int(k),
                    "slo": name,
                    "runs_calibration": effort["runs_calibration"],
                    "runs_full": effort["runs_full"],
                    "gpu_s_calibration": effort["gpu_s_calibration"],
                    "gpu_s_full": effort["gpu_s_full"],
                    "gpu_s_saved_pct": effort["gpu_s_saved_pct"],
                    "mean_quality_pct": qm,
                    "quality_ci_lo_pct": qlo,
                    "quality_ci_hi_pct": qhi,
                    "min_quality_pct": float(part["quality_pct"].min()),
                    "exact_pct": float((part["b_cap"] == part["b_true"]).mean() * 100),
                    "slo_violations": int(part["slo_violation"].fillna(False).sum()),
                    "efficiency_misses": int((part["measured_efficiency"] <= epsilon).sum()),
                }
            )
    return pd.DataFrame(rows)


def summarize_recommendations(rec: pd.DataFrame, epsilon: float | None = None) -> pd.DataFrame:
    """Per SLO: curves, mean and worst quality (%), exact matches (%), SLO violations, efficiency misses."""
    rows = []
    for name, part in rec.groupby("slo", sort=True):
        eps = part["epsilon"] if epsilon is None else epsilon
        rows.append(
            {
                "slo": name,
                "curves": int(len(part)),
                "mean_quality_pct": float(part["quality_pct"].mean()),
                "min_quality_pct": float(part["quality_pct"].min()),
                "exact_pct": float((part["b_cap"] == part["b_true"]).mean() * 100),
                "slo_violations": int(part["slo_violation"].fillna(False).sum()),
                "efficiency_misses": int((part["measured_efficiency"] <= eps).sum()),
            }
        )
    return pd.DataFrame(rows).set_index("slo")


def recommendations_by_variant(
    curves: pd.DataFrame,
    calibration: pd.DataFrame,
    slos: pd.DataFrame,
    epsilon: float = 0.3,
    n_starts: int = 8,
    variants=tuple(ADVISOR_VARIANTS),
) -> pd.DataFrame:
    """`evaluate_recommendations` for each advisor variant of `ADVISOR_VARIANTS` (fitted on the same calibration
    rows), stacked with a ``variant`` column first."""
    parts = []
    for v in variants:
        spec = ADVISOR_VARIANTS[v]
        fits = fit_per_model(calibration, variant=spec["model"], n_starts=n_starts)
        rec = evaluate_recommendations(curves, fits, slos, epsilon, respect_memory=spec["respect_memory"])
        rec.insert(0, "variant", v)
        parts.append(rec)
    return pd.concat(parts, ignore_index=True)


def summary_with_uncertainty(
    rec: pd.DataFrame, reference: str = "faithful", n_boot: int = 10_000, seed: int = 20_240_613
) -> pd.DataFrame:
    """Per variant and SLO: mean recommendation quality and the MAPE of the advisor's predicted throughput at
    B_cap against the measured one, each with a bootstrap 95% interval over curves, and Wilcoxon p-values of the
    paired comparison with the `reference` variant on the same curves; plus counts of SLO violations and
    efficiency misses; ``misses`` counts picks that break one of Eq. 13's measured constraints (scored 0), and
    ``preempting_picks`` the picks whose run preempted (reported, not scored). Curves without a recommendation or ground truth are left out of the
    means (``n``)."""

    keys = ["model", "output_len", "slo"]
    ref = rec[rec["variant"] == reference].set_index(keys)
    rows = []
    for (variant, slo), part in rec.groupby(["variant", "slo"], sort=False):
        part = part.set_index(keys)
        q = part["quality_pct"].astype(float)
        ok = part["b_cap"] > 0
        ape = pd.Series(np.nan, index=part.index)
        ape[ok] = U.ape(part.loc[ok, "measured_throughput_tok_s"], part.loc[ok, "pred_throughput_tok_s"])
        label = f"{variant} / {slo}"
        qm, qlo, qhi = U.bootstrap_mean_ci(q.dropna(), n_boot=n_boot, seed=seed, label="quality " + label)
        mm, mlo, mhi = U.bootstrap_mean_ci(ape.dropna(), n_boot=n_boot, seed=seed, label="mape " + label)
        row = {"variant": variant, "slo": slo, "curves": int(len(part)), "n_quality": int(q.notna().sum()),
               "mean_quality_pct": qm, "quality_ci_lo_pct": qlo, "quality_ci_hi_pct": qhi,
               "min_quality_pct": float(q.min()), "exact_pct": float((part["b_cap"] == part["b_true"]).mean() * 100),
               "pred_mape_pct": mm, "pred_mape_ci_lo_pct": mlo, "pred_mape_ci_hi_pct": mhi,
               "slo_violations": int(part["slo_violation"].fillna(False).astype(bool).sum()),
               "efficiency_misses": int((part["measured_efficiency"] <= part["epsilon"]).sum()),
               "preempting_picks": int(((part["b_cap"] > 0) & part["preempted"].fillna(False).astype(bool)).sum()),
               "misses": int((part["b_cap"] > 0).sum() - part["feasible"].fillna(False).astype(bool).sum()),
               "p_quality_vs_ref": np.nan, "p_mape_vs_ref": np.nan}  # fmt: skip
        if variant != reference:
            r = ref[ref.index.get_level_values("slo") == slo]
            both = q.dropna().index.intersection(r["quality_pct"].dropna().index)
            if len(both):
                row["p_quality_vs_ref"] = U.paired_comparison(
                    q.loc[both].to_numpy(float), r.loc[both, "quality_pct"].to_numpy(float), n_boot=n_boot,
                    seed=seed, label="paired quality " + label,
                )["p_wilcoxon"]  # fmt: skip
            r_ok = r[r["b_cap"] > 0]
            r_ape = pd.Series(
                U.ape(r_ok["measured_throughput_tok_s"], r_ok["pred_throughput_tok_s"]), r_ok.index
            )
            both = ape.dropna().index.intersection(r_ape.index)
            if len(both):
                row["p_mape_vs_ref"] = U.paired_comparison(
                    ape.loc[both].to_numpy(float), r_ape.loc[both].to_numpy(float), n_boot=n_boot, seed=seed,
                    label="paired mape " + label,
                )["p_wilcoxon"]  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)
