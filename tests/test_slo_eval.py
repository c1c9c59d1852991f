"""SLIM-BCA under TTFT/TPOT/E2E SLOs scored on measurements (experiments/bca/slo_eval): SLO levels from the data,
calibration points, exact picks on model-generated curves, misses scored 0, and the real sources end to end."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS

from slimlib.experiments.bca import slo_eval as S
from slimlib.model import PaperModel

GPU = "h100-sxm-80gb"


def _model():
    return PaperModel.with_params(TRUE_PARAMS, gpu=GPU)


def _curves(model, tps=(1, 2), bs=(1, 4, 8, 16, 32, 64, 128)) -> pd.DataFrame:
    """A llmib-like curve generated from `model` (test data only): E2E limits, two TP degrees."""
    grid = pd.DataFrame(
        [(tp, b) for tp in tps for b in bs], columns=["tensor_parallel", "batch_size"]
    ).assign(model="llama-2-7b", gpu=GPU, input_len=512.0, output_len=256.0)
    pred = model.predict(grid.assign(batch_size=grid["batch_size"].astype(float)))
    return grid.assign(
        source="llmib",
        throughput_tok_s=pred["pred_throughput_tok_s"].to_numpy(),
        e2e_s=pred["pred_e2e_s"].to_numpy(),
        ttft_s=np.nan,
        tpot_s=np.nan,
        duration_s=np.nan,
        preempted=False,
    )[S.COLUMNS]


def test_exact_model_picks_the_measured_best_and_a_broken_pick_scores_zero():
    m = _model()
    cur = _curves(m)
    slos = S.slo_levels(cur)
    assert list(slos["slo"]) == ["tight", "loose"] and np.isinf(slos["ttft_s"]).all()
    assert slos["e2e_s"].iloc[0] == pytest.approx(np.quantile(cur["e2e_s"], 0.25))
    key = ("llmib", "llama-2-7b", GPU)
    res = S.evaluate_slos(cur, {key: m}, slos, epsilon=0.3)
    assert res["meets"].all() and res["reaches_90"].all()
    np.testing.assert_allclose(res["quality_pct"], 100.0)
    assert (res["pick_tp"] == res["best_tp"]).all() and (res["pick_b"] == res["best_b"]).all()
    # the pick's measured latency over the limit: a miss, quality 0, and the best moves elsewhere
    r0 = res.iloc[0]
    at = (cur["tensor_parallel"] == r0["pick_tp"]) & (cur["batch_size"] == r0["pick_b"])
    broken = cur.copy()
    broken.loc[at, "e2e_s"] = r0["e2e_limit_s"] * 1.5
    res2 = S.evaluate_slos(broken, {key: m}, slos.iloc[:1], epsilon=0.3).iloc[0]
    assert not res2["meets"] and res2["quality_pct"] == 0.0 and not res2["reaches_90"]
    assert (res2["best_tp"], res2["best_b"]) != (r0["pick_tp"], r0["pick_b"])


def test_calibration_points_cycle_over_tp_and_skip_absent_or_preempted_runs():
    cur = _curves(_model(), tps=(1, 2, 4))
    cal = S.calibration_points(cur, 3)
    assert list(zip(cal["tensor_parallel"], cal["batch_size"], strict=True)) == [(1, 32), (2, 8), (4, 128)]
    cur.loc[(cur["tensor_parallel"] == 1) & (cur["batch_size"] == 32), "preempted"] = True
    cal = S.calibration_points(cur, 2)
    assert (1, 32) not in set(zip(cal["tensor_parallel"], cal["batch_size"], strict=True)) and len(cal) == 2


def test_engine_source_end_to_end():
    cur = S.engine_curves()
    assert cur["ttft_s"].notna().all() and cur["tpot_s"].notna().all()
    assert cur.groupby(S.CURVE).ngroups == 20  # 5 models x 4 (IL, OL) curves
    res, summary = S.evaluate_sources(3, sources=("engine-cpu",), n_starts=1, n_boot=200)
    assert len(res) == 40 and set(summary["slo"]) == {"tight", "loose"}
    assert (summary["runs_calibration"] == 60).all() and (summary["runs_full"] == 115).all()
    for r in summary.itertuples():
        assert 0 <= r.meets_ci_lo_pct <= r.meets_pct <= r.meets_ci_hi_pct <= 100
        assert r.reaches_90_pct <= r.meets_pct
    scored = res[np.isfinite(res["best_per_gpu_tok_s"])]
    assert (scored["quality_pct"] <= 100 + 1e-9).all()
