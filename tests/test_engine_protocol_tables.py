"""A campaign folder in the measurement protocol's layout (repeats ``_r{r}``, protocol columns in the sidecar,
flagged copies in ``results/flagged/``) goes through the engine tables: every repeat a row with its protocol
columns, the medians over passing repeats, and the exclusions with their checks. The folder is assembled from
real committed result files (hand-labelled as repeats for the test)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from slimlib.data.catalog import coerce, data_dir
from slimlib.data.engine_runs import EXCLUSIONS_TABLE, RUNS_TABLE, build_engine_tables
from slimlib.errors import DataError
from slimlib.kit.vllm_runner import sha256_file

SOURCE = data_dir() / "engine-cpu-pre-protocol"  # the campaign before the protocol (2026-11)
#: real runs of one configuration family (opt-13b-s8, IL 128, OL 128), used as repeats 0-2 of B = 8
REPEATS = [
    "opt-13b-s8_b8_il128_ol128.json",
    "opt-13b-s8_b8_il128_ol128_r1.json",
    "opt-13b-s8_b16_il128_ol128.json",
]


def _protocol(r: int, **over) -> dict:
    row = {"repeat": r, "waves": 1, "started_utc": f"2026-12-01T10:0{r}:10Z", "wall_s": 3.0, "load1": 2.1,
           "cpu_user": 0.9, "cpu_system": 0.05, "cpu_steal": 0.0, "cpu_idle": 0.05, "outside_cpu": 0.02,
           "server_pid": 100 + r, "server_started_utc": f"2026-12-01T10:0{r}:00Z", "outside_load": "false"}  # fmt: skip
    return {**row, **over}


@pytest.fixture()
def camp(tmp_path):
    root = tmp_path / "camp"
    res = root / "results"
    (res / "flagged").mkdir(parents=True)
    side = pd.read_csv(SOURCE / "results" / "slim-runs.csv").set_index("file")
    rows, results = [], []
    for r, src in enumerate(REPEATS):
        name = f"opt-13b-s8_b8_il128_ol128_r{r}.json"
        doc = json.loads((SOURCE / "results" / src).read_text())
        doc["repeat"] = r
        (res / name).write_text(json.dumps(doc))
        over = {"outside_load": "true"} if r == 2 else {}
        rows.append({"file": name, **side.loc[REPEATS[0]].to_dict(), **_protocol(r, **over)})
        results.append({"file": name, "sha256": sha256_file(res / name)})
    shutil.copy(
        res / "opt-13b-s8_b8_il128_ol128_r2.json", res / "flagged" / "opt-13b-s8_b8_il128_ol128_r2.json"
    )
    pd.DataFrame(rows).to_csv(res / "slim-runs.csv", index=False)
    manifest = json.loads((SOURCE / "manifest.json").read_text())
    manifest["results"], manifest["plan_rows"] = results, len(results)
    for s in manifest["sessions"]:
        s["skipped"], s["failed"] = {}, {}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_protocol_columns_repeats_medians_and_exclusions(camp):
    tables = build_engine_tables(camp)
    runs = coerce(RUNS_TABLE, tables[RUNS_TABLE])
    assert list(runs["repeat"]) == [0, 1, 2] and (runs["waves"] == 1).all()
    assert str(runs["outside_load"].dtype) == "boolean" and list(runs["outside_load"]) == [False, False, True]
    assert list(runs["server_pid"]) == [100, 101, 102] and runs["cpu_user"].eq(0.9).all()
    assert list(runs["checks_failed"].fillna("")) == ["", "", "outside_load"]
    (med,) = tables["engine-cpu-medians"].to_dict("records")
    assert med["n_repeats"] == 2 and med["n_excluded"] == 1
    pair = runs["throughput_tok_s"].iloc[:2]
    assert med["throughput_tok_s"] == pytest.approx(pair.median())
    assert med["throughput_tok_s_max"] == pair.max() and med["throughput_tok_s_min"] == pair.min()
    ex = coerce(EXCLUSIONS_TABLE, tables[EXCLUSIONS_TABLE])
    assert list(zip(ex["file"], ex["status"], ex["check"], strict=True)) == [
        ("opt-13b-s8_b8_il128_ol128_r2.json", "excluded", "outside_load"),
        ("flagged/opt-13b-s8_b8_il128_ol128_r2.json", "flagged", "outside_load"),
    ]


def test_a_server_restarted_mid_run_is_excluded(camp):
    side = pd.read_csv(camp / "results" / "slim-runs.csv")
    side.loc[0, "server_started_utc"] = "2026-12-01T10:00:30Z"  # after the run's start at 10:00:10
    side.to_csv(camp / "results" / "slim-runs.csv", index=False)
    ex = build_engine_tables(camp)[EXCLUSIONS_TABLE]
    row = ex[ex["check"] == "server_restart"].iloc[0]
    assert row["file"] == "opt-13b-s8_b8_il128_ol128_r0.json" and "restarted mid-run" in row["reason"]


def test_a_bad_protocol_cell_names_the_sidecar_row(camp):
    side = pd.read_csv(camp / "results" / "slim-runs.csv")
    side["wall_s"] = side["wall_s"].astype(object)
    side.loc[1, "wall_s"] = "three"
    side.to_csv(camp / "results" / "slim-runs.csv", index=False)
    with pytest.raises(
        DataError, match=r"slim-runs.csv: row of opt-13b-s8_b8_il128_ol128_r1.json, field 'wall_s'"
    ):
        build_engine_tables(camp)


def test_two_sessions_pool_into_one_median_and_a_repeated_folder_name_is_refused(camp, tmp_path):
    other = tmp_path / "other" / "camp2"
    shutil.copytree(camp, other)
    tables = build_engine_tables(camp, other)
    runs = tables[RUNS_TABLE]
    assert list(runs["session"]) == ["camp"] * 3 + ["camp2"] * 3
    (med,) = tables["engine-cpu-medians"].to_dict("records")
    assert med["n_repeats"] == 4 and med["n_sessions"] == 2 and med["n_excluded"] == 2
    ex = tables[EXCLUSIONS_TABLE]
    assert sorted(set(ex["session"])) == ["camp", "camp2"]
    twin = tmp_path / "twin" / "camp"
    shutil.copytree(camp, twin)
    with pytest.raises(DataError, match="share a name; a session is named by its folder"):
        build_engine_tables(camp, twin)
