"""SLIM-BCA evaluation (notebook 07): both advisor variants scored against one measured best, and a pick that
breaks a measured constraint is a miss, never a quality above 100%."""

from __future__ import annotations

import numpy as np
import pytest

from slimlib.experiments.bca import advisor_eval as AE


@pytest.fixture(scope="module")
def rec():
    from slimlib.data import load

    cur = AE.measured_curves(load("memgap-online"))
    cur = cur[cur["model"].isin(["opt-1.3b", "llama-2-7b"])]
    cal = AE.calibration_subset(cur, 3)
    slos = AE.slo_table(cur)
    return cur, AE.recommendations_by_variant(cur, cal, slos, epsilon=0.3, n_starts=1)


def test_both_variants_share_one_ground_truth(rec):
    _, r = rec
    keys = ["model", "output_len", "slo"]
    f = r[r["variant"] == "faithful"].set_index(keys).sort_index()
    p = r[r["variant"] == "project"].set_index(keys).sort_index()
    assert f.index.equals(p.index) and len(f) == 16
    assert (f["b_true"] == p["b_true"]).all()
    np.testing.assert_array_equal(
        f["true_throughput_tok_s"].to_numpy(), p["true_throughput_tok_s"].to_numpy()
    )


def test_quality_never_rewards_a_pick_that_breaks_the_measured_constraints(rec):
    cur, r = rec
    assert (r["quality_pct"].dropna() <= 100.0 + 1e-9).all()
    for row in r.itertuples():
        at = cur[(cur["model"] == row.model) & (cur["output_len"] == row.output_len)
                 & (cur["batch_size"] == row.b_cap)].iloc[0]  # fmt: skip
        ok = at["measured_e2e_s"] <= row.slo_s and at["efficiency"] > row.epsilon  # Eq. 13's two constraints
        assert row.feasible == ok
        if not ok:
            assert row.quality_pct == 0.0
        else:
            assert row.quality_pct == pytest.approx(row.throughput_ratio_pct)
    summary = AE.summary_with_uncertainty(r, n_boot=200)
    assert (summary["mean_quality_pct"] <= 100.0 + 1e-9).all()


def test_each_miss_names_the_measured_constraints_it_breaks(rec):
    cur, r = rec
    for row in r.itertuples():
        at = cur[(cur["model"] == row.model) & (cur["output_len"] == row.output_len)
                 & (cur["batch_size"] == row.b_cap)].iloc[0]  # fmt: skip
        assert row.preempted == bool(at["preempted"])
        assert row.efficiency_below_epsilon == (at["efficiency"] <= row.epsilon)
        expected = [text for flag, text in ((row.slo_violation, "SLO violated"),
                                            (row.efficiency_below_epsilon, "efficiency below epsilon")) if flag]  # fmt: skip
        assert row.quality_zero_reason == ("; ".join(expected) or "none")
        assert (row.quality_zero_reason == "none") == row.feasible
    assert AE.zero_quality_reason({"b_cap": 0}) == "no B_cap"
    nan_flag = {"b_cap": 8, "slo_violation": float("nan"), "preempted": True}
    assert AE.zero_quality_reason(nan_flag) == "none"  # preemption is reported, not scored


def test_recommendation_table_keeps_the_old_columns_and_adds_the_reasons(rec):
    _, r = rec
    table = AE.recommendation_table(r)
    old = ["variant", "model", "output_len", "slo", "slo_s", "b_cap", "binding", "b_true", "pred_throughput_tok_s",
           "measured_throughput_tok_s", "true_throughput_tok_s", "quality_pct", "measured_e2e_s", "slo_violation",
           "measured_efficiency"]  # fmt: skip
    assert set(old) <= set(table.columns)
    assert {"epsilon", "preempted", "efficiency_below_epsilon", "quality_zero_reason"} <= set(table.columns)
    assert list(table.columns) == AE.RECOMMENDATION_COLUMNS and len(table) == len(r)
    assert set(AE.RECOMMENDATION_COLS) <= set(table.columns)
    zero = table[table["quality_pct"] == 0.0]
    assert (zero["quality_zero_reason"] != "none").all()  # every 0 says why


def test_a_preempting_pick_is_reported_not_scored():
    """llama-2-13b, OL = 130, loose SLO: the faithful pick meets the SLO and the efficiency floor (35% > 30%) at
    B_cap, whose run preempted requests (memgap-online): Eq. 13 does not model preemption, so the pick is scored by
    its two constraints and the preemption is reported beside."""
    from slimlib.data import load

    cur = AE.measured_curves(load("memgap-online"))
    cur = cur[cur["model"] == "llama-2-13b"]  # one fit per model, on all its output lengths
    fits = AE.fit_per_model(AE.calibration_subset(cur, 3), variant="paper", n_starts=1)
    one = cur[cur["output_len"] == 130]
    slos = AE.slo_table(one)
    r = AE.evaluate_recommendations(one, fits, slos[slos["slo"] == "loose"], 0.3, respect_memory=False)
    r = r.iloc[0]
    if not r["preempted"]:
        pytest.skip(f"the faithful pick is B = {r['b_cap']}, which did not preempt")
    assert not r["slo_violation"] and not r["efficiency_below_epsilon"] and r["feasible"]
    assert r["quality_pct"] == pytest.approx(r["throughput_ratio_pct"]) and r["quality_zero_reason"] == "none"
    summary = AE.summary_with_uncertainty(r.to_frame().T.assign(variant="faithful"), n_boot=50)
    assert int(summary["preempting_picks"].iloc[0]) == 1 and int(summary["misses"].iloc[0]) == 0
