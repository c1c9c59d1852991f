"""Sentences of the notebooks' prose, computed from the run's tables (so every number and claim in the text comes
from the data of that run, and the wording can be tested)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from slimlib.model import method_label


def _names(items: list[str]) -> str:
    return ", ".join(items) if items else "no model"


def knee_vs_kv_sentence(summary: pd.DataFrame) -> str:
    """Where each model's knee lies relative to its first KV-full cap (`summary`: model, knee_batch,
    kv_full_batch): before it, at the same cap, after it, or the KV cache never fills within the sweep."""
    groups: dict[str, list[str]] = {"before": [], "same": [], "after": [], "never": [], "no knee": []}
    for r in summary.itertuples():
        if np.isnan(r.knee_batch):
            groups["no knee"].append(r.model)
        elif np.isnan(r.kv_full_batch):
            groups["never"].append(r.model)
        elif r.knee_batch < r.kv_full_batch:
            groups["before"].append(r.model)
        elif r.knee_batch == r.kv_full_batch:
            groups["same"].append(f"{r.model} (B = {r.knee_batch:.0f})")
        else:
            groups["after"].append(r.model)
    parts = [f"The knee comes before the KV cache fills for {_names(groups['before'])}"]
    if groups["same"]:
        parts.append(f"knee and KV exhaustion coincide for {_names(groups['same'])}")
    if groups["after"]:
        parts.append(f"the KV cache fills before the knee for {_names(groups['after'])}")
    if groups["never"]:
        parts.append(f"{_names(groups['never'])} never fill(s) it within the sweep")
    if groups["no knee"]:
        parts.append(f"{_names(groups['no knee'])} show(s) no knee within the sweep")
    return "; ".join(parts) + "."


def saturation_summary(knees: pd.DataFrame, advisor: pd.DataFrame, output_lens: list) -> str:
    """Closing text of notebook 02: maximum throughput from the shortest to the longest output length per model,
    median knee per output length, active context at the knee, and (a separate sentence, whatever the rest
    says) how many online runs preempted requests."""
    lo, hi = output_lens[0], output_lens[-1]
    drops, lower = [], 0
    for m, g in knees.groupby("model", sort=True):
        k = g.set_index("output_len")["max_throughput_tok_s"]
        if lo in k.index and hi in k.index:
            drops.append(f"{m} {k.loc[lo] / 1e3:.1f} -> {k.loc[hi] / 1e3:.1f} k tok/s")
            lower += int(k.loc[hi] < k.loc[lo])
    median_knee = knees.groupby("output_len", sort=True)["knee_batch"].median()
    text = (
        f"From OL = {lo:.0f} to OL = {hi:.0f} tokens the maximum throughput is lower for {lower} of {len(drops)} "
        f"models ({'; '.join(drops)}). The median knee over models is at B = "
        + ", ".join(f"{median_knee[ol]:.0f} (OL={ol:.0f})" for ol in output_lens if ol in median_knee.index)
        + f". Mean active context at the knee ranges {knees['active_ctx_at_knee'].min():.0f}-"
        f"{knees['active_ctx_at_knee'].max():.0f} tokens across models and output lengths."
    )
    full = advisor[advisor["num_preemptions"].fillna(0) > 0]
    if len(full):
        text += (
            f" {len(full)} of {len(advisor)} online runs preempted requests because the KV cache was full; their "
            f"mean running batch stays at {full['mean_running_batch'].min():.0f}-"
            f"{full['mean_running_batch'].max():.0f} whatever the cap."
        )
    else:
        text += f" None of the {len(advisor)} online runs preempted requests."
    return text


def _p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def comparison_counts(
    long: pd.DataFrame, metric: str, reference: str = method_label("paper"), alpha: float = 0.05
) -> str:
    """For each method, in how many scenarios its MAPE is significantly lower / higher than `reference`'s (paired
    Wilcoxon p < `alpha`) or not significantly different; `long` as written to table02_mape.csv."""
    t = long[(long["metric"] == metric) & long["mape_pct"].notna()]
    parts = []
    for m in dict.fromkeys(t["method"]):
        if m == reference:
            continue
        s = t[(t["method"] == m) & t["p_wilcoxon"].notna()]
        if not len(s):
            continue
        sig = s["p_wilcoxon"] < alpha
        better = int((sig & (s["diff_vs_ref_pct"] < 0)).sum())
        worse = int((sig & (s["diff_vs_ref_pct"] > 0)).sum())
        parts.append(
            f"{m} lower in {better}, higher in {worse}, not different in {len(s) - better - worse} of {len(s)}"
        )
    return f"{metric} MAPE against {reference} (Wilcoxon p < {alpha}): " + "; ".join(parts) + "."


def ablation_report(
    long: pd.DataFrame, ablations, reference: str = method_label("paper"), alpha: float = 0.05
) -> str:
    """Every ablation in every scenario and metric with data: its MAPE, the reference's, the difference and the
    Wilcoxon p-value, and whether removing the term wins, loses or makes no significant difference."""
    lines = []
    for abl in ablations:
        for metric in ("throughput", "latency"):
            t = long[(long["metric"] == metric) & long["mape_pct"].notna()]
            ref = t[t["method"] == reference].set_index("scenario")["mape_pct"]
            items = []
            for r in t[t["method"] == abl].itertuples():
                if r.scenario not in ref.index or not np.isfinite(r.p_wilcoxon):
                    continue
                verdict = "no significant difference"
                if r.p_wilcoxon < alpha:
                    verdict = "removing the term wins" if r.diff_vs_ref_pct < 0 else "removing the term loses"
                items.append(
                    f"{r.scenario} {r.mape_pct:.1f}% vs {ref[r.scenario]:.1f}% ({r.diff_vs_ref_pct:+.1f} points, "
                    f"{_p(r.p_wilcoxon)}: {verdict})"
                )
            if items:
                lines.append(f"- **{abl}**, {metric}: " + "; ".join(items) + ".")
    return "\n".join(lines)


def variant_comparison(
    summary: pd.DataFrame,
    reference: str = "faithful",
    alpha: float = 0.05,
    labels: Mapping[str, str] | None = None,
) -> str:
    """Per SLO, each SLIM-BCA variant's mean recommendation quality against the `reference` variant's, with the
    Wilcoxon p-value and whether the difference is significant at `alpha` (`summary`: bca_summary.csv's columns
    variant, slo, mean_quality_pct, p_quality_vs_ref); `labels` maps variant names to their display names."""
    name: dict[str, str] = dict(labels or {})
    ref_name = name.get(reference, reference)
    parts = []
    for slo, g in summary.groupby("slo", sort=False):
        ref = g[g["variant"] == reference]
        if ref.empty:
            continue
        ref_quality = float(ref["mean_quality_pct"].iloc[0])
        for r in g[g["variant"] != reference].itertuples():
            p = float(r.p_quality_vs_ref)
            if not np.isfinite(p):
                continue
            verdict = "significant" if p < alpha else "not significant"
            variant = str(r.variant)
            parts.append(
                f"{slo} SLO: {name.get(variant, variant)} {float(r.mean_quality_pct):.1f}% vs {ref_name} "
                f"{ref_quality:.1f}% mean quality ({_p(p)}, {verdict} at {alpha})"
            )
    if not parts:
        return f"No variant has a paired comparison with {ref_name}."
    return f"Advisor variants against {ref_name}: " + "; ".join(parts) + "."


def bound_report(params: pd.DataFrame) -> str:
    """How many fitted values sit at a bound, per method and parameter (`params`: method, parameter, at_bound)."""
    n = int(params["at_bound"].sum())
    if n == 0:
        return f"None of the {len(params)} fitted values sits at a bound."
    counts = params[params["at_bound"]].groupby(["method", "parameter"], sort=True).size()
    listed = "; ".join(f"{key[0]} {key[1]}: {c}" for key, c in counts.items())
    return (
        f"{n} of {len(params)} fitted values sit at a bound ({listed}). Their standard errors and intervals are "
        "not meaningful: treat those parameters as not identified by the training data."
    )
