"""Notebook 10 (transfer scenarios) executes end to end in quick mode and writes its figures and tables."""

from __future__ import annotations

import pandas as pd
from optional import requires
from reproduced import notebook_outputs

pytestmark = requires("papermill")

EXPECTED = [
    "transfer_mi250_evidence.csv",
    "transfer_context_mape.csv",
    "transfer_context_by_length.md",
    "transfer_context_residuals.csv",
    "transfer_tp_mape.csv",
    "transfer_gpu_mape.csv",
    "transfer_parity.pdf",
    "transfer_parity.png",
    "transfer_mi300x_knee.png",
    "transfer_mi300x_knee.csv",
    "peers_mape.csv",
    "peers_mape.png",
]


def test_notebook_10_runs_and_writes_its_outputs(tmp_path):
    figures = notebook_outputs(tmp_path)("10")
    for name in EXPECTED:
        assert (figures / name).is_file() and (figures / name).stat().st_size > 0, name
    ctx = pd.read_csv(figures / "transfer_context_mape.csv")
    assert set(ctx["fold"]) == {"MI300X", "MI250"}
    assert set(ctx["method"]) == {"paper", "slim"}
    assert ctx["throughput_mape_pct"].notna().all()
    # every MAPE cell has an interval that contains it, and peers are compared on identical rows
    for name in ("transfer_context_mape", "transfer_tp_mape", "transfer_gpu_mape"):
        t = pd.read_csv(figures / f"{name}.csv")
        for metric in ("throughput", "latency"):
            ok = t[f"{metric}_mape_pct"].notna()
            assert ok.any(), name
            lo, hi, m = (
                t.loc[ok, f"{metric}_ci_lo_pct"],
                t.loc[ok, f"{metric}_ci_hi_pct"],
                t.loc[ok, f"{metric}_mape_pct"],
            )
            assert ((lo <= m + 1e-9) & (m <= hi + 1e-9)).all(), (name, metric)
    by_len = (figures / "transfer_context_by_length.md").read_text()
    assert by_len.count(" [") >= 9  # "MAPE [lo, hi]" cells
    peers = pd.read_csv(figures / "peers_mape.csv")
    assert "slim" in set(peers["method"]) and not peers["method"].str.startswith("SLIM (").any()
    for _, d in peers.groupby("dataset"):
        assert d["n_common"].nunique() == 1 and (d["n_common"] <= d["n_rows"]).all()
        assert (d["ci_lo_pct"] <= d["throughput_mape_pct"] + 1e-9).all()
    knee = pd.read_csv(figures / "transfer_mi300x_knee.csv")
    assert (knee["b_cap_is_1"] == (knee["b_cap"] == 1)).all() and set(knee["method"]) == {"slim"}
