"""Physical checks of ingested runs (slimlib.data.physical_checks): each check fails a crafted row and passes the
real committed runs; failing runs leave `slim data ingest`'s table with their reason and a count per check."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from slimlib.data.campaign_collect import collect
from slimlib.data.catalog import data_dir
from slimlib.data.ingest import checked, ingest
from slimlib.data.physical_checks import CHECKS, LATENCY_SUM_REL_TOL, check_runs, count_lines
from slimlib.errors import DataError

NAN = float("nan")

RESULTS = data_dir() / "engine-cpu-pre-protocol" / "results"  # the campaign before the protocol (2026-11)
GOOD = "opt-13b-s8_b8_il128_ol256.json"  # a real committed run
ZERO_TPOT = "opt-1.3b-s8_b2_il128_ol32.json"  # a real committed run whose tokens arrived in one chunk


@pytest.fixture(scope="module")
def real() -> pd.DataFrame:
    return ingest(RESULTS)


@pytest.fixture()
def good(real) -> pd.DataFrame:
    return real[real["source_file"] == GOOD].reset_index(drop=True).copy()


def _checks(df: pd.DataFrame) -> set[str]:
    return set(check_runs(df).exclusions["check"])


def test_a_real_committed_run_passes_every_check(good):
    got = check_runs(good)
    assert got.exclusions.empty
    # the campaign before the protocol records no outside load nor server identity: counted as not evaluated
    assert got.unchecked == {"outside_load": 1, "server_restart": 1}


def test_the_committed_campaign_loses_only_its_single_chunk_runs(real):
    got = check_runs(real)
    assert set(got.exclusions["check"]) == {"tpot_weight_read", "token_bunching"}
    # runs whose tokens arrived in bunches keep their throughput: only their per-token timings are dropped
    bunched = real[real["source_file"].isin(got.untimed())]
    assert len(bunched) and (bunched["p50_itl_ms"] < 0.01 * bunched["mean_itl_ms"]).all()
    kept, _ = checked(real)
    timed_out = kept[kept["source_file"].isin(got.untimed())]
    assert len(timed_out) == len(bunched) and timed_out["mean_ttft_ms"].isna().all()
    assert timed_out["throughput_tok_s"].notna().all()
    assert sorted(got.failing()) == sorted(
        [
            "opt-1.3b-s8_b2_il128_ol32.json",
            "opt-1.3b-s8_b4_il128_ol256.json",
            "opt-1.3b-s8_b4_il128_ol32.json",
        ]
    )
    row = got.exclusions[got.exclusions["source_file"] == ZERO_TPOT].iloc[0]
    assert "mean TPOT 0.003298 ms < 0.27 ms" in row["reason"]


@pytest.mark.parametrize(
    "check, edit",
    [
        ("completed", {"completed": 7}),
        ("failed", {"failed": 1}),
        ("tokens", {"total_output_tokens": 8 * 256 - 1}),
        ("tokens", {"total_input_tokens": int(8 * 128 * 0.97)}),
        ("latency_sum", {"mean_e2el_ms": "x1.05"}),
        (
            "tpot_weight_read",
            {"mean_tpot_ms": 0.5, "mean_e2el_ms": "identity"},
        ),  # 59.9 MB at 30.6 GB/s: 1.96 ms
        # a run that timed no latency: its latencies would not fit in the span of so fast a run
        (
            "throughput_roofline",
            {"throughput_tok_s": 9000.0, "mean_ttft_ms": NAN, "mean_tpot_ms": NAN, "mean_e2el_ms": NAN},
        ),  # bound: 417 GFLOP/s / 49.2 MFLOP = 8484 tok/s
        ("latency_order", {"throughput_tok_s": "x2"}),  # the 8 requests' E2E twice the run's span
        ("outside_load", {"outside_load": "true", "outside_cpu": 0.8}),
        (
            "server_restart",
            {"started_utc": "2026-12-01T10:00:00Z", "server_started_utc": "2026-12-01T10:00:05Z"},
        ),
    ],
)
def test_each_check_fails_its_crafted_row_and_only_it(good, check, edit):
    row = good.copy()
    for col, value in edit.items():
        if value == "identity":  # E2E = TTFT + (OL - 1) TPOT, so only the TPOT bound is at stake
            value = row["mean_ttft_ms"] + (row["output_len"] - 1) * row["mean_tpot_ms"]
        elif isinstance(value, str) and value.startswith("x"):
            value = float(row[col].iloc[0]) * float(value[1:])
        row[col] = value
    assert _checks(row) == {check}


def test_outside_load_names_the_stolen_cpu_time_where_that_flagged_it(good):
    got = check_runs(good.assign(outside_load="true", outside_cpu=0.0, cpu_steal=0.12))
    (reason,) = got.exclusions.loc[got.exclusions["check"] == "outside_load", "reason"]
    assert "0.00 cores used by other processes, 12% of CPU time stolen by the hypervisor" in reason


def test_latency_identity_within_its_tolerance_passes(good):
    row = good.copy()
    row["mean_e2el_ms"] = row["mean_e2el_ms"] * (1 + LATENCY_SUM_REL_TOL / 2)
    assert _checks(row) == set()
    row["mean_e2el_ms"] = good["mean_e2el_ms"] * (1 + 2 * LATENCY_SUM_REL_TOL)
    assert _checks(row) == {"latency_sum"}


def test_a_server_started_before_the_run_and_quiet_host_pass(good):
    row = good.assign(outside_load="false", outside_cpu=0.05, started_utc="2026-12-01T10:00:05Z",
                      server_started_utc="2026-12-01T09:58:00Z", server_pid=4242)  # fmt: skip
    got = check_runs(row)
    assert got.exclusions.empty and not got.unchecked


def test_tensor_parallel_splits_the_weight_read_bound(good):
    row = good.assign(mean_tpot_ms=1.5)  # below one device's 1.96 ms, above half of it
    row["mean_e2el_ms"] = row["mean_ttft_ms"] + (row["output_len"] - 1) * 1.5
    assert _checks(row) == {"tpot_weight_read"}
    assert _checks(row.assign(tensor_parallel=2)) == set()


def test_unknown_model_skips_the_roofline_checks_without_excluding(good):
    row = good.assign(model="my-private-model", mean_tpot_ms=1e-6)
    row["mean_e2el_ms"] = row["mean_ttft_ms"] + (row["output_len"] - 1) * 1e-6
    got = check_runs(row)
    assert got.exclusions.empty
    assert got.unchecked["tpot_weight_read"] == 1 and got.unchecked["throughput_roofline"] == 1


def test_a_protocol_field_that_is_not_a_boolean_names_the_file(good):
    with pytest.raises(DataError, match=f"{GOOD}: field 'outside_load' is 'maybe', expected true or false"):
        check_runs(good.assign(outside_load="maybe"))
    with pytest.raises(DataError, match=f"{GOOD}: field 'started_utc' is 'noon'"):
        check_runs(good.assign(started_utc="noon", server_started_utc="2026-12-01T10:00:00Z"))


def test_count_lines_name_every_check(real):
    lines = count_lines(check_runs(real), len(real))
    assert lines[0].startswith("physical checks: 3 of 224 run(s) excluded (")
    assert all(f"{c} " in lines[0] + lines[1] for c in CHECKS) and "tpot_weight_read 3" in lines[0]
    assert lines[1].strip().startswith(f"{len(check_runs(real).untimed())} more kept without their per-token")


def _folder(tmp_path, edits: dict[str, dict]) -> object:
    """A result folder with the good run, the zero-TPOT run and hand-edited copies of the good run."""
    folder = tmp_path / "runs"
    folder.mkdir()
    side = pd.read_csv(RESULTS / "slim-runs.csv")
    names = [GOOD, ZERO_TPOT]
    for name in names:
        shutil.copy(RESULTS / name, folder / name)
    for new, edit in edits.items():
        doc = json.loads((RESULTS / GOOD).read_text())
        doc.update(edit)
        (folder / new).write_text(json.dumps(doc))
        names.append(new)
        side = pd.concat([side, side[side["file"] == GOOD].assign(file=new)])
    side[side["file"].isin(names)].to_csv(folder / "slim-runs.csv", index=False)
    return folder


def test_slim_data_ingest_leaves_failing_runs_out_with_reasons_and_counts(tmp_path):
    doc = json.loads((RESULTS / GOOD).read_text())
    folder = _folder(tmp_path, {"late.json": {"mean_e2el_ms": doc["mean_e2el_ms"] * 1.2}})
    got = collect([folder])
    assert list(got.table["source_file"]) == [GOOD]
    text = got.report_text()
    assert f"EXCLUDED {ZERO_TPOT}: tpot_weight_read: mean TPOT" in text
    assert "EXCLUDED late.json: latency_sum: TTFT + (OL-1) x TPOT" in text
    assert "physical checks: 2 of 3 run(s) excluded (completed 0, failed 0, tokens 0, latency_sum 1, " in text
    assert set(got.excluded["source_file"]) == {ZERO_TPOT, "late.json"}
    assert "2 excluded by the physical checks" in got.report[-1]


def test_protocol_columns_of_the_sidecar_reach_the_table_and_the_checks(tmp_path):
    folder = _folder(tmp_path, {})
    side = pd.read_csv(folder / "slim-runs.csv")
    side["repeat"] = [0, 1]
    side["outside_load"] = (side["file"] == GOOD).map({True: "true", False: "false"})
    side.to_csv(folder / "slim-runs.csv", index=False)
    df = ingest(folder)
    assert {"repeat", "outside_load"} <= set(df.columns)
    ok, got = checked(df)
    assert ok.empty and set(got.exclusions["check"]) == {"tpot_weight_read", "outside_load"}


def test_a_truncated_result_is_one_line_naming_the_file(tmp_path):
    folder = _folder(tmp_path, {})
    text = (folder / GOOD).read_text()
    (folder / GOOD).write_text(text[: len(text) // 2])
    with pytest.raises(DataError, match=f"{GOOD}: invalid or truncated JSON"):
        collect([folder])


def test_short_prompts_may_differ_by_one_token_per_request(good):
    # 8 requests of IL = 64: 1% is 5 tokens, the seam allowance one token per request (8); the same run time, so
    # the throughput counts the shorter prompts
    out = float(good["total_output_tokens"].iloc[0])
    rate = float(good["throughput_tok_s"].iloc[0]) / (float(good["total_input_tokens"].iloc[0]) + out)

    def short(tokens: int) -> pd.DataFrame:
        return good.assign(input_len=64.0, total_input_tokens=tokens, throughput_tok_s=rate * (tokens + out))

    assert _checks(short(8 * 64 + 8)) == set()
    assert _checks(short(8 * 64 + 9)) == {"tokens"}


def test_repeats_of_one_configuration_become_their_median(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    side = pd.read_csv(RESULTS / "slim-runs.csv").set_index("file")
    a, b = (
        "opt-13b-s8_b8_il128_ol128.json",
        "opt-13b-s8_b8_il128_ol128_r1.json",
    )  # two real passes of one config
    for name in (a, b):
        shutil.copy(RESULTS / name, folder / name)
    rows = [
        {"file": a, **side.loc[a].to_dict(), "repeat": 0},
        {"file": b, **side.loc[b].to_dict(), "repeat": 1},
    ]
    pd.DataFrame(rows).to_csv(folder / "slim-runs.csv", index=False)
    got = collect([folder])
    (row,) = got.table.to_dict("records")
    both = ingest(folder).set_index("source_file")
    assert row["throughput_tok_s"] == pytest.approx(both["throughput_tok_s"].median())
    assert row["e2e_s"] == pytest.approx(both["e2e_s"].median()) and row["source_file"] == f"{a};{b}"
    assert any(line.startswith("repeats: 2 runs of model=opt-13b-s8") for line in got.report)


def test_ingest_keeps_a_bunched_run_and_labels_it_untimed_not_excluded(tmp_path):
    other = "opt-13b-s8_b4_il128_ol256.json"  # another real run, its tokens made to arrive in one chunk
    folder = _folder(tmp_path, {})
    doc = json.loads((RESULTS / other).read_text())
    gap = doc["mean_itl_ms"] * 1e-3
    doc.update({"median_itl_ms": gap, "p50_itl_ms": gap})
    (folder / other).write_text(json.dumps(doc))
    side = pd.read_csv(RESULTS / "slim-runs.csv")
    pd.concat([pd.read_csv(folder / "slim-runs.csv"), side[side["file"] == other]]).to_csv(
        folder / "slim-runs.csv", index=False
    )
    got = collect([folder])
    assert sorted(got.table["source_file"]) == sorted([GOOD, other])
    assert got.table.loc[got.table["source_file"] == other, "mean_ttft_ms"].isna().all()
    text = got.report_text()
    assert f"UNTIMED {other}: token_bunching: median token gap" in text
    assert f"EXCLUDED {other}" not in text and f"EXCLUDED {ZERO_TPOT}: tpot_weight_read" in text


def test_a_run_failing_a_timing_check_and_another_is_labelled_excluded(tmp_path):
    folder = _folder(tmp_path, {})
    doc = json.loads((folder / ZERO_TPOT).read_text())
    gap = doc["mean_itl_ms"] * 1e-3  # its tokens bunched too: it is still left out, for its TPOT
    doc.update({"median_itl_ms": gap, "p50_itl_ms": gap})
    (folder / ZERO_TPOT).write_text(json.dumps(doc))
    got = collect([folder])
    text = got.report_text()
    assert list(got.table["source_file"]) == [GOOD]
    assert (
        f"EXCLUDED {ZERO_TPOT}: token_bunching" in text and f"EXCLUDED {ZERO_TPOT}: tpot_weight_read" in text
    )
    assert "UNTIMED" not in text
