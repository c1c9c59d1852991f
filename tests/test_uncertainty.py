"""Bootstrap intervals and paired comparisons (slimlib.experiments.outputs.uncertainty), on synthetic errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.experiments.outputs import uncertainty as U
from slimlib.metrics import mape


def test_bootstrap_interval_is_deterministic_and_contains_the_point_estimate():
    rng = np.random.default_rng(1)
    for k in range(40):
        n = int(rng.integers(2, 40))
        v = rng.lognormal(1.0, 1.5, size=n)  # skewed, like percentage errors
        a = U.bootstrap_mean_ci(v, n_boot=500, seed=7, label=f"s{k}")
        b = U.bootstrap_mean_ci(v, n_boot=500, seed=7, label=f"s{k}")
        assert a == b
        point, lo, hi = a
        assert point == pytest.approx(v.mean())
        assert lo <= point <= hi
        assert lo >= v.min() and hi <= v.max()
    # a different seed or other values give another stream, a larger sample a narrower interval
    v = rng.normal(10, 2, 30)
    assert U.bootstrap_mean_ci(v, seed=1, label="a") != U.bootstrap_mean_ci(v, seed=2, label="a")
    w = v.copy()
    w[0] += 1e-9
    assert U.bootstrap_mean_ci(v, seed=1)[1:] != U.bootstrap_mean_ci(w, seed=1)[1:]
    wide = U.bootstrap_mean_ci(v[:8], seed=1)
    narrow = U.bootstrap_mean_ci(np.tile(v, 10), seed=1)
    assert narrow[2] - narrow[1] < wide[2] - wide[1]


def test_one_statistic_has_one_interval_whatever_its_label_or_table():
    """The stream is seeded from the data, not the label: the same errors give the same interval under any label,
    and the same cell computed by `mape_intervals` and by `group_intervals` (two files) agrees."""
    rng = np.random.default_rng(3)
    v = rng.lognormal(1.0, 1.0, 25)
    assert U.bootstrap_mean_ci(v, label="table02 / slim") == U.bootstrap_mean_ci(v, label="peers / SLIM")
    d = rng.normal(0.3, 1.0, 25)
    assert U.paired_comparison(d + 5, np.full(25, 5.0), label="a") == U.paired_comparison(
        d + 5, np.full(25, 5.0), label="b"
    )
    n = 20
    true = rng.uniform(50, 150, n)
    preds = pd.DataFrame(
        {"scenario": "s", "method": "m", "batch_size": np.arange(n), "throughput_tok_s": true,
         "pred_throughput_tok_s": true * rng.uniform(0.8, 1.2, n), "e2e_s": true, "pred_e2e_s": true}
    )  # fmt: skip
    long = U.mape_intervals(preds, reference="m", metrics=("throughput",), n_boot=400)
    grouped = U.group_intervals(preds.assign(fold="other label"), ["fold"], n_boot=400)
    cols = ["mape_pct", "ci_lo_pct", "ci_hi_pct"]
    assert long[cols].to_numpy().tolist() == grouped[cols].to_numpy().tolist()


def test_bootstrap_edge_cases():
    assert all(np.isnan(U.bootstrap_mean_ci([])))
    assert U.bootstrap_mean_ci([3.0]) == (3.0, 3.0, 3.0)
    with pytest.raises(DataError, match="level"):
        U.bootstrap_mean_ci([1.0, 2.0], level=1.5)


def test_paired_comparison_detects_a_planted_difference_and_not_a_null_one():
    rng = np.random.default_rng(42)
    base = np.abs(rng.normal(10, 4, 30))
    worse = base + 3 + rng.normal(0, 1, 30)  # planted: every row about 3 points worse
    res = U.paired_comparison(worse, base, n_boot=4000, seed=3)
    assert res["p_wilcoxon"] < 0.001 and res["p_bootstrap"] < 0.001
    assert res["diff_lo"] > 0 and res["mean_diff"] == pytest.approx(np.mean(worse - base))
    same = base + rng.normal(0, 1, 30)  # null: symmetric noise around zero difference
    null = U.paired_comparison(same, base, n_boot=4000, seed=3)
    assert null["p_wilcoxon"] > 0.05 and null["p_bootstrap"] > 0.05
    assert null["diff_lo"] < 0 < null["diff_hi"]
    assert U.paired_comparison(base, base)["p_wilcoxon"] == 1.0
    with pytest.raises(DataError, match="equally long"):
        U.paired_comparison(base, base[:-1])


def _predictions():
    rng = np.random.default_rng(0)
    rows = []
    for scen in ("same-curve", "transfer"):
        for b in (1, 2, 4, 8, 16, 32, 64, 128):
            truth = 100.0 * b / (1 + b / 32)
            for method, bias in (("SLIM", 0.10), ("Better", 0.01), ("NoLatency", 0.05)):
                pred = truth * (1 + bias * rng.choice([-1, 1]))
                rows.append({"scenario": scen, "method": method, "fold": "all", "curve": "c", "model": "m",
                             "input_len": 100.0, "output_len": 100.0, "batch_size": float(b),
                             "throughput_tok_s": truth, "pred_throughput_tok_s": pred, "e2e_s": b / 10.0,
                             "pred_e2e_s": np.nan if method == "NoLatency" else b / 10.0 * (1 + bias)})  # fmt: skip
    return pd.DataFrame(rows)


def test_mape_intervals_point_estimates_pairing_and_gaps():
    pred = _predictions()
    out = U.mape_intervals(pred, reference="SLIM", n_boot=500)
    assert len(out) == 2 * 3 * 2
    for r in out.itertuples():
        sel = pred[(pred["scenario"] == r.scenario) & (pred["method"] == r.method)]
        true_c, pred_c = U.METRIC_COLUMNS[r.metric]
        if sel[pred_c].isna().any():
            assert np.isnan(r.mape_pct) and np.isnan(r.p_wilcoxon)
            continue
        assert r.mape_pct == pytest.approx(mape(sel[true_c], sel[pred_c]))
        assert r.ci_lo_pct <= r.mape_pct <= r.ci_hi_pct
        if r.method == "SLIM":
            assert np.isnan(r.diff_vs_ref_pct) and np.isnan(r.p_wilcoxon)
    better = out[(out["method"] == "Better") & (out["metric"] == "throughput")]
    assert (better["diff_vs_ref_pct"] < 0).all() and (better["p_wilcoxon"] < 0.05).all()
    assert out.equals(U.mape_intervals(pred, reference="SLIM", n_boot=500))  # deterministic
    dup = pd.concat([pred, pred.iloc[[0]]], ignore_index=True)
    with pytest.raises(DataError, match="not unique"):
        U.mape_intervals(dup, reference="SLIM", n_boot=50)


def test_format_helpers():
    assert U.format_p(0.0004) == "<0.001" and U.format_p(0.0123) == "0.012" and U.format_p(np.nan) == ""
    assert U.format_interval(12.345, 9.81, 15.06) == "12.3 [9.8, 15.1]"


def test_no_latency_at_or_below_zero_enters_a_mape_uncounted():
    """A baseline predicting latency <= 0 on some rows: the MAPE cell counts those rows as non-physical failures,
    and each counted row's error is at least 100% inside the MAPE."""
    pred = _predictions()
    bad = (pred["method"] == "Better") & (pred["scenario"] == "transfer") & (pred["batch_size"] >= 32)
    pred.loc[bad, "pred_e2e_s"] = -pred.loc[bad, "e2e_s"]  # 3 rows cross zero
    pred.loc[bad & (pred["batch_size"] == 64), "pred_e2e_s"] = 0.0
    out = U.mape_intervals(pred, reference="SLIM", n_boot=200)
    for r in out.itertuples():
        sel = pred[(pred["scenario"] == r.scenario) & (pred["method"] == r.method)]
        col = U.METRIC_COLUMNS[r.metric][1]
        assert r.n_nonphysical == int((sel[col] <= 0).sum())  # every latency <= 0 is counted
    cell = out[
        (out["method"] == "Better") & (out["scenario"] == "transfer") & (out["metric"] == "latency")
    ].iloc[0]
    assert cell.n_nonphysical == 3
    errs = U.ape(pred.loc[bad, "e2e_s"], pred.loc[bad, "pred_e2e_s"])
    assert (errs >= 100).all() and cell.mape_pct > 3 * 100 / 8
    assert U.n_nonphysical([1.0, 0.0, -2.0, np.nan]) == 2


def test_wilcoxon_is_exact_for_a_few_tied_differences():
    from scipy import stats

    from slimlib.experiments.outputs.uncertainty import WILCOXON_EXACT_MAX, wilcoxon_p

    # four equal gains among twelve ties at zero: 2 of the 16 sign patterns are as extreme (the normal
    # approximation said 0.046)
    assert wilcoxon_p([25.0] * 4 + [0.0] * 12) == 0.125
    assert stats.wilcoxon([25.0] * 4 + [0.0] * 12).pvalue < 0.05
    # without ties it is scipy's exact test; every sign pattern of tied ranks as scipy's permutation test counts them
    assert wilcoxon_p([1.0, 2, 3, 4, 5, 6]) == pytest.approx(stats.wilcoxon([1.0, 2, 3, 4, 5, 6]).pvalue)
    tied = [2.5, -2.5, 5.0, 5.0, 7.5, -5.0, 2.5]
    exact = stats.wilcoxon(tied, method=stats.PermutationMethod(n_resamples=np.inf)).pvalue
    assert wilcoxon_p(tied) == pytest.approx(exact)
    assert wilcoxon_p([0.0, 0.0]) == 1.0
    # beyond the exact range: scipy's default
    many = np.linspace(-1, 3, WILCOXON_EXACT_MAX + 5)
    assert wilcoxon_p(many) == pytest.approx(stats.wilcoxon(many).pvalue)


def test_resampled_means_are_the_one_call_draws_in_any_chunking(monkeypatch):
    """Chunked resampling bounds memory without changing a single mean: the generator's stream is the same."""
    for n, chunk in ((7, 10), (333, 1000), (1000, 4096)):
        v = np.random.default_rng(n).gamma(2.0, size=n)
        whole = v[np.random.default_rng(1).integers(0, n, size=(500, n))].mean(axis=1)
        monkeypatch.setattr(U, "RESAMPLE_CHUNK", chunk)
        assert np.array_equal(U.resampled_means(v, 500, np.random.default_rng(1)), whole)
