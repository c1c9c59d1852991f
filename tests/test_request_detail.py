"""Per-request detail of closed-loop runs (`slimlib.data.request_detail`) and the scheduler rule it is evidence for."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from slimlib.data.request_detail import WAVE_COLUMNS, wave_table, waves_of_result
from slimlib.errors import DataError
from slimlib.model.schedule import replay

COMMITTED = Path(__file__).resolve().parents[1] / "data" / "engine-cpu-amx-arrivals"


def _result(path: Path, starts, ttfts, b, **extra) -> Path:
    doc = {"max_concurrency": b, "completed": len(starts), "failed": 0, "start_times": starts, "ttfts": ttfts}
    path.write_text(json.dumps({**doc, **extra}), encoding="utf-8")
    return path


def test_a_wave_with_a_leader(tmp_path):
    # wave 0: request 0 sent first, its token at 100 ms; the others sent 2 ms later, tokens at 400 ms
    starts = [0.0, 0.002, 0.002, 0.002, 1.0, 1.0005, 1.0005, 1.0005]
    ttfts = [0.1, 0.398, 0.398, 0.398, 0.1, 0.1, 0.1, 0.1]
    w = waves_of_result(_result(tmp_path / "r.json", starts, ttfts, 4))
    assert list(w["wave"]) == [0, 1]
    first, second = w.iloc[0], w.iloc[1]
    assert first["spread_ms"] == pytest.approx(2.0) and first["leader_ttft_ms"] == pytest.approx(100.0)
    assert first["others_after_leader_ms"] == pytest.approx(300.0) and first["with_leader"] == 1
    assert first["others_ttft_ms"] == pytest.approx(398.0)
    # wave 1: every first token within the same millisecond: no leader step
    assert second["with_leader"] == 4 and second["others_after_leader_ms"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "doc, words",
    [
        ({"ttfts": None}, "'ttfts' is missing"),
        ({"start_times": [0.0, 0.1, 0.2]}, "one value per request"),
        ({"ttfts": [0.1, float("nan"), 0.1, 0.1]}, "not a finite time"),
        ({"failed": 1}, "1 failed requests"),
        ({"completed": 3, "start_times": [0, 0, 0], "ttfts": [0.1] * 3}, "the waves are not whole"),
        ({"max_concurrency": 0}, "'max_concurrency' .* and 'completed'"),
        ({"max_concurrency": True}, "must be whole numbers"),
        ({"max_concurrency": None}, "not a closed-loop run"),
        ({"ttfts": [0.1, "x", 0.1, 0.1]}, "not a finite time"),
    ],
)
def test_results_the_waves_cannot_be_read_from_are_refused(tmp_path, doc, words):
    base = {"max_concurrency": 2, "completed": 4, "failed": 0, "start_times": [0.0] * 4, "ttfts": [0.1] * 4}
    base.update(doc)
    path = tmp_path / "r.json"
    path.write_text(json.dumps({k: v for k, v in base.items() if v is not None}), encoding="utf-8")
    with pytest.raises(DataError, match=words) as e:
        waves_of_result(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("text, words", [("[]", "not an object"), ("{", "not a readable result JSON")])
def test_a_file_that_is_no_result_object_is_refused(tmp_path, text, words):
    path = tmp_path / "r.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=words):
        waves_of_result(path)


def test_wave_table_names_a_planned_run_without_result(tmp_path):
    (tmp_path / "results").mkdir()
    pd.DataFrame(
        [{"model": "m", "batch_size": 2, "input_len": 8, "output_len": 4, "repeat": 0, "file": "a.json"}]
    ).to_csv(tmp_path / "plan.csv", index=False)
    with pytest.raises(DataError, match=r"a\.json: planned run has no result"):
        wave_table(tmp_path)
    pd.read_csv(tmp_path / "plan.csv").drop(columns="repeat").to_csv(tmp_path / "bad.csv", index=False)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad.csv").rename(tmp_path / "bad" / "plan.csv")
    with pytest.raises(DataError, match="no column repeat"):
        wave_table(tmp_path / "bad")
    _result(tmp_path / "results" / "a.json", [0.0, 0.001], [0.05, 0.09], 2)
    t = wave_table(tmp_path)
    assert list(t.columns) == list(WAVE_COLUMNS) and t["model"].tolist() == ["m"]


def test_the_committed_table_is_what_the_committed_results_give():
    committed = pd.read_csv(COMMITTED / "waves.csv")
    pd.testing.assert_frame_equal(wave_table(COMMITTED), committed, check_dtype=False)


def test_the_measured_waves_start_with_a_leader_as_the_replay_does():
    # waves after the first whose requests all arrived within the leader's step: the leader's first token comes
    # first, and mostly alone (the engine started its step before the others arrived)
    t = pd.read_csv(COMMITTED / "waves.csv")
    within = t[(t["wave"] > 0) & (t["spread_ms"] < t["leader_ttft_ms"])]
    assert len(within) >= 30
    assert (within["others_after_leader_ms"] > 0).mean() >= 0.9
    assert (within["with_leader"] == 1).mean() >= 2 / 3
    # the replay: per wave of 8, a leader that prefills its 128 tokens alone, and 7 that wait through that step
    w = replay("concurrency", 8, 128, 64, 2048, 8, True)
    leader = w.ttft[:, 2] == 128
    assert w.weight[leader].sum() * 7 == w.weight[~leader].sum() > 0
    assert (w.wait[~leader] == [0, 0, 128]).all() and (w.ttft[~leader, 2] == 7 * 128).all()
