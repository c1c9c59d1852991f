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
        ok = at["measured_e2e_s"] <= row.slo_s and at["efficiency"] > row.epsilon and not at["preempted"]
        assert row.feasible == ok
        if not ok:
            assert row.quality_pct == 0.0
        else:
            assert row.quality_pct == pytest.approx(row.throughput_ratio_pct)
    summary = AE.summary_with_uncertainty(r, n_boot=200)
    assert (summary["mean_quality_pct"] <= 100.0 + 1e-9).all()
