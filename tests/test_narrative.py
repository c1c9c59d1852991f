"""Computed prose of the notebooks (slimlib.experiments.outputs.narrative), including notebook 02's closing summary, which
once lost everything but one sentence to an operator-precedence bug when no run preempted."""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.experiments.outputs import narrative as N


def _knees():
    rows = []
    for m, base in (("opt-1.3b", 11000.0), ("llama-2-7b", 5000.0)):
        for ol, f in ((130, 1.0), (520, 0.6)):
            rows.append({"model": m, "output_len": ol, "knee_batch": 64.0 if ol == 130 else 32.0,
                         "max_throughput_tok_s": base * f, "active_ctx_at_knee": 1000.0 * f})  # fmt: skip
    return pd.DataFrame(rows)


def _advisor(preempted: bool):
    return pd.DataFrame({"num_preemptions": [0, 3 if preempted else 0, np.nan],
                         "mean_running_batch": [10.0, 40.0, 12.0]})  # fmt: skip


def test_saturation_summary_keeps_every_sentence_without_preemptions():
    text = N.saturation_summary(_knees(), _advisor(False), [130, 520])
    assert "From OL = 130 to OL = 520 tokens the maximum throughput is lower for 2 of 2 models" in text
    assert "opt-1.3b 11.0 -> 6.6 k tok/s" in text
    assert "median knee over models is at B = 64 (OL=130), 32 (OL=520)" in text
    assert "Mean active context at the knee ranges 600-1000 tokens" in text
    assert text.endswith("None of the 3 online runs preempted requests.")


def test_saturation_summary_with_preemptions():
    text = N.saturation_summary(_knees(), _advisor(True), [130, 520])
    assert "lower for 2 of 2 models" in text and "Mean active context" in text
    assert "1 of 3 online runs preempted requests" in text and "stays at 40-40" in text


def test_knee_sentence_names_coincident_knees():
    summary = pd.DataFrame({"model": ["llama-2-13b", "llama-2-7b", "opt-1.3b", "x"],
                            "knee_batch": [96.0, 128.0, 64.0, 256.0], "kv_full_batch": [96.0, 256.0, np.nan, 128.0]})  # fmt: skip
    text = N.knee_vs_kv_sentence(summary)
    assert "before the KV cache fills for llama-2-7b" in text
    assert "knee and KV exhaustion coincide for llama-2-13b (B = 96)" in text
    assert "the KV cache fills before the knee for x" in text
    assert "opt-1.3b never fill(s) it" in text


def _long():
    rows = []
    for scen, (ref, abl) in {"a": (10.0, 5.0), "b": (10.0, 15.0), "c": (10.0, 10.2)}.items():
        rows.append({"scenario": scen, "method": "SLIM (paper)", "metric": "throughput", "mape_pct": ref,
                     "diff_vs_ref_pct": np.nan, "p_wilcoxon": np.nan})  # fmt: skip
        rows.append({"scenario": scen, "method": "SLIM (paper) no-kv-scan", "metric": "throughput", "mape_pct": abl,
                     "diff_vs_ref_pct": abl - ref, "p_wilcoxon": 0.3 if scen == "c" else 0.002})  # fmt: skip
    return pd.DataFrame(rows)


def test_ablation_report_lists_wins_losses_and_ties():
    text = N.ablation_report(
        _long(), ["SLIM (paper) no-kv-scan"]
    )  # labels; the reference defaults to the paper's
    assert "a 5.0% vs 10.0% (-5.0 points, p=0.002: removing the term wins)" in text
    assert "b 15.0% vs 10.0% (+5.0 points, p=0.002: removing the term loses)" in text
    assert "c 10.2% vs 10.0% (+0.2 points, p=0.300: no significant difference)" in text
    counts = N.comparison_counts(_long(), "throughput")
    assert "SLIM (paper) no-kv-scan lower in 1, higher in 1, not different in 1 of 3" in counts


def test_bound_report():
    p = pd.DataFrame(
        {"method": ["SLIM"] * 3, "parameter": ["eta_c", "eta_c", "B0"], "at_bound": [True, True, False]}
    )
    assert N.bound_report(p).startswith("2 of 3 fitted values sit at a bound (SLIM eta_c: 2)")
    assert N.bound_report(p.assign(at_bound=False)) == "None of the 3 fitted values sits at a bound."


def test_variant_comparison_says_whether_the_difference_is_significant():
    summary = pd.DataFrame(
        {"variant": ["faithful", "faithful", "project", "project"], "slo": ["tight", "loose", "tight", "loose"],
         "mean_quality_pct": [84.6, 75.0, 97.1, 93.8], "p_quality_vs_ref": [np.nan, np.nan, 0.157, 0.01]}
    )  # fmt: skip
    text = N.variant_comparison(summary)
    assert (
        "tight SLO: project 97.1% vs faithful 84.6% mean quality (p=0.157, not significant at 0.05)" in text
    )
    assert "loose SLO: project 93.8% vs faithful 75.0% mean quality (p=0.010, significant at 0.05)" in text
    assert N.variant_comparison(summary[summary["variant"] == "project"]).startswith("No variant")
    named = N.variant_comparison(
        summary, labels={"project": "SLIM-BCA (project)", "faithful": "SLIM-BCA (paper)"}
    )
    assert named.startswith(
        "Advisor variants against SLIM-BCA (paper): tight SLO: SLIM-BCA (project) 97.1% vs"
    )
