"""Peers: the plain roofline, the comparison table, the committed predictions, and each peer adapter on two rows
(the adapters need the optional extra `peers`; scripts/test_peers.sh installs it and runs this file)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.experiments.transfer_study.peer_comparison import (
    PREDICTION_COLUMNS,
    calibration_split,
    datasets,
    load_peer_predictions,
    peer_roofline,
)


@pytest.fixture(scope="module")
def data():
    return datasets()


def test_calibration_split_takes_at_most_three_points_per_curve(data):
    for rows in data.values():
        cal, ev = calibration_split(rows)
        assert len(cal) + len(ev) == len(rows)
        per_curve = cal.groupby(["model", "gpu", "tensor_parallel", "input_len"]).size()
        assert per_curve.max() <= 3
        assert set(cal["source_line"]).isdisjoint(ev["source_line"])


def test_roofline_is_a_lower_bound_on_time(data):
    rows = data["llmib-mi300x"]
    p = peer_roofline(rows)
    assert np.isfinite(p["pred_e2e_s"]).all()
    # no measured batch beats the roofline of its own GPU
    assert (p["pred_e2e_s"].to_numpy() <= rows["e2e_s"].to_numpy()).all()
    # and the roofline's decode is bound by the weight read at B = 1: E2E grows about linearly with OL
    b1 = rows[(rows["batch_size"] == 1) & (rows["model"] == "llama-2-7b")].sort_values("input_len")
    e = peer_roofline(b1)["pred_e2e_s"].to_numpy()
    assert np.all(np.diff(e) > 0)


def test_committed_peer_predictions_name_tool_version_and_call():
    p = load_peer_predictions()
    assert list(p.columns) == list(PREDICTION_COLUMNS)
    assert len(p) > 0, (
        "data/peers/llmib-peer-predictions.csv is missing: regenerate with `slim peers --out ...`"
    )
    assert set(p["tool"]) >= {"genz", "llm-analysis", "aiconfigurator"}
    assert p["tool_version"].notna().all() and (p["call"].str.len() > 10).all()
    aic = p[p["tool"] == "aiconfigurator"]
    assert set(aic["gpu"]) == {"h100-sxm-64gb"} and aic["note"].str.contains("mismatch|80 GB").all()


def _two_rows(data, dataset, model):
    rows = calibration_split(data[dataset])[1]
    return rows[rows["model"] == model].head(2)


@pytest.mark.parametrize(
    "tool, dist, dataset, model",
    [
        ("genz", "GenZ", "llmib-mi300x", "llama-2-7b"),
        ("llm-analysis", "llm_analysis", "llmib-mi250", "llama-2-7b"),
        ("aiconfigurator", "aiconfigurator", "memgap-h100-offline", "llama-2-7b"),
    ],
)
def test_peer_adapter_on_two_rows(tool, dist, dataset, model, data):
    pytest.importorskip(
        dist, reason=f"{tool} not installed (optional extra `peers`; run scripts/test_peers.sh)"
    )
    from slimlib.experiments.transfer_study.peer_adapters import ADAPTERS

    rows = _two_rows(data, dataset, model)
    p = ADAPTERS[tool](dataset, rows)
    assert len(p) == 2 and list(p.columns) == list(PREDICTION_COLUMNS)
    assert np.isfinite(p["pred_e2e_s"]).all() and (p["pred_e2e_s"] > 0).all()
    committed = load_peer_predictions()
    keys = ["dataset", "tool", "model", "gpu", "tensor_parallel", "batch_size", "input_len", "output_len"]
    merged = p.merge(committed, on=keys, suffixes=("", "_committed"))
    assert len(merged) == 2
    np.testing.assert_allclose(merged["pred_e2e_s"], merged["pred_e2e_s_committed"], rtol=1e-6)
    assert (merged["call"] == merged["call_committed"]).all()
    assert isinstance(p, pd.DataFrame)
