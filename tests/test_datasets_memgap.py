"""Parsers of the memgap mirror: hand-made fixtures (every malformed case) and the real mirror when present."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from shared_paths import MEMGAP, needs

from slimlib.data.engine_metrics import parse_cache_config, summarize_engine_csv
from slimlib.data.launch_config import parse_launch_config
from slimlib.data.memgap import build_memgap_tables
from slimlib.data.nvsmi import summarize_dmon_csv, summarize_query_csv
from slimlib.data.run_logs import failure_reason, parse_offline_log
from slimlib.data.serving_json import parse_benchmark_json
from slimlib.errors import DataError

FIX = Path(__file__).parent / "fixtures" / "memgap" / "mirror"
BG = "benchmarks/definitive_results/background/opt-1.3b"
OFF = "benchmarks_simple/definitive_results/analysis/prefill_vs_decode/summary_table/opt-1.3b"
MIRROR = MEMGAP
needs_mirror = needs(MIRROR, "raw vLLM mirror")


@pytest.fixture
def mirror(tmp_path: Path) -> Path:
    dst = tmp_path / "vllm-batching-memory-gap"
    shutil.copytree(FIX, dst)
    return dst


def test_fixture_mirror_tables(mirror: Path) -> None:
    tables, files = build_memgap_tables(mirror)
    on = tables["memgap-online"]
    assert list(on["run_id"]) == [f"{BG}/_2_"]
    row = on.iloc[0]
    assert (row["batch_size"], row["input_len"], row["output_len"]) == (2, 100.0, 200.0)
    assert row["throughput_tok_s"] == 600.0 and row["duration_s"] == 2.0
    assert row["mean_running_batch"] == 1.5 and row["num_preemptions"] == 1 and row["preempted"]
    assert row["gpu_blocks"] == 1000 and row["job_id"] == "100"
    off = tables["memgap-offline"].iloc[0]
    assert (off["batch_size"], off["input_len"], off["output_len"]) == (2, 10, 20)
    assert off["e2e_s"] == 2.0 and off["throughput_tok_s"] == 2 * 30 / 2.0
    assert (off["n_prefill_steps"], off["n_decode_steps"], off["gpu_blocks"]) == (1, 2, 17976)
    assert off["profiler"] == "ncu" and not off["timing_valid"] and off["backend"] == "flash"
    ex = tables["memgap-exclusions"].set_index(["run_id", "reason"])
    assert ex.loc[(f"{BG}/_4_", "port_bind_failure"), "in_table"] == ""
    assert ex.loc[(f"{BG}/_2_", "preemption"), "in_table"] == "memgap-online"
    assert ex.loc[(f"{OFF}/_10_20_2", "profiler_inflated_timing"), "in_table"] == "memgap-offline"
    assert ex.loc[(f"{OFF}/_10_20_4", "preemption"), "in_table"] == ""
    tel = tables["memgap-telemetry"].iloc[0]
    assert tel["gpu_util_mean_pct"] == 70.0 and tel["power_mean_w"] == 250.0 and tel["busy_samples"] == 2
    assert mirror / BG / "config-1.txt" in files


def test_parsers_never_modify_raw_files(mirror: Path) -> None:
    before = {p: p.read_bytes() for p in mirror.rglob("*") if p.is_file()}
    build_memgap_tables(mirror)
    assert {p: p.read_bytes() for p in mirror.rglob("*") if p.is_file()} == before


def _json(mirror: Path) -> Path:
    return next((mirror / BG / "_2_").glob("openai-*.json"))


@pytest.mark.parametrize(
    "text, match",
    [
        ('{"duration": 2.0, "completed"', "invalid or truncated JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"duration": 2.0}', "missing field"),
    ],
)
def test_bad_json(mirror: Path, text: str, match: str) -> None:
    _json(mirror).write_text(text)
    with pytest.raises(DataError, match=match):
        build_memgap_tables(mirror)


def test_json_non_numeric_field(mirror: Path) -> None:
    raw = json.loads(_json(mirror).read_text())
    raw["total_token_throughput"] = "fast"
    _json(mirror).write_text(json.dumps(raw))
    with pytest.raises(DataError, match="total_token_throughput"):
        parse_benchmark_json(_json(mirror))


def test_json_num_prompts_disagrees_with_config(mirror: Path) -> None:
    raw = json.loads(_json(mirror).read_text())
    raw["num_prompts"] = 9
    _json(mirror).write_text(json.dumps(raw))
    with pytest.raises(DataError, match="num_prompts is 9 but the config sets 4"):
        build_memgap_tables(mirror)


def test_folder_disagrees_with_config(mirror: Path) -> None:
    (mirror / BG / "_2_").rename(mirror / BG / "_3_")
    with pytest.raises(DataError, match="folder and config disagree"):
        build_memgap_tables(mirror)


def test_model_folder_disagrees_with_config(mirror: Path) -> None:
    cfg = mirror / BG / "config-1.txt"
    cfg.write_text(cfg.read_text().replace("/models/opt/opt-1.3b", "/models/opt/opt-2.7b"))
    with pytest.raises(DataError, match="config runs --model 'opt-2.7b'"):
        build_memgap_tables(mirror)


def test_empty_folder_is_an_exclusion(mirror: Path) -> None:
    cfg = mirror / BG / "config-1.txt"
    cfg.write_text(cfg.read_text().replace("['2', '4']", "['2', '4', '8']"))
    (mirror / BG / "_8_").mkdir()
    ex = build_memgap_tables(mirror)[0]["memgap-exclusions"]
    hit = ex[ex["run_id"] == f"{BG}/_8_"]
    assert list(hit["reason"]) == ["missing_result"]


def test_missing_and_truncated_config(mirror: Path, tmp_path: Path) -> None:
    cfg = mirror / BG / "config-1.txt"
    text = cfg.read_text()
    cfg.write_text(text[: text.index("--test-server-args") + 25])
    with pytest.raises(DataError, match="config-1.txt"):
        build_memgap_tables(mirror)
    cfg.unlink()
    with pytest.raises(DataError, match="no config-"):
        build_memgap_tables(mirror)
    empty = tmp_path / "config-9.txt"
    empty.write_text("")
    with pytest.raises(DataError, match="empty file"):
        parse_launch_config(empty)


def test_engine_csv_malformed(mirror: Path) -> None:
    f = mirror / BG / "_2_" / "metrics_engine_server_0.csv"
    good = f.read_text()
    f.write_text(good.replace("0.5,2.0", "50,2.0"))
    with pytest.raises(DataError, match="unexpected unit"):
        summarize_engine_csv(f)
    f.write_text(good.replace("2.1,0.25,1.0,0.0,1.0", "2.1,0.25,1.0,0.0,x"))
    with pytest.raises(DataError, match="line 4, column 'num_preemptions_total'"):
        summarize_engine_csv(f)
    f.write_text(good.replace("3.1,0.0,0.0,0.0,1.0", "3.1,0.0,0.0,0.0,0.0"))
    with pytest.raises(DataError, match="decreases"):
        summarize_engine_csv(f)
    f.write_text(good.splitlines()[0].replace("num_requests_running", "running") + "\n1,0,0,0,0\n")
    with pytest.raises(DataError, match="missing column"):
        summarize_engine_csv(f)
    f.write_text("")
    with pytest.raises(DataError, match="empty file"):
        build_memgap_tables(mirror)


def test_nvsmi_unexpected_units(mirror: Path) -> None:
    q = mirror / BG / "_2_" / "metrics_gpu_device_nvidia_smi_0_server_0.csv"
    q.write_text(q.read_text().replace("3000 MiB", "3 GiB"))
    with pytest.raises(DataError, match="expected a value in MiB"):
        summarize_query_csv(q)
    d = mirror / BG / "_2_" / "metrics_gpu_device_nvidia_smi_dom_0_server_0.csv"
    d.write_text(d.read_text().replace("s,Idx,W", "s,Idx,mW"))
    with pytest.raises(DataError, match="unit 'mW'"):
        summarize_dmon_csv(d)


def test_cache_config_not_what_its_name_says(mirror: Path) -> None:
    c = mirror / BG / "_2_" / "cache_config_server_0.txt"
    c.write_text("vllm:num_requests_running 0.0\n")
    with pytest.raises(DataError, match="no 'vllm:cache_config_info'"):
        parse_cache_config(c)


def test_offline_log_header_disagrees(mirror: Path) -> None:
    log = mirror / OFF / "_10_20_2" / "log_200.out"
    log.write_text(log.read_text().replace("batch_size = 2", "batch_size = 3"))
    with pytest.raises(DataError, match="batch_size=3 but the folder is _10_20_2"):
        build_memgap_tables(mirror)
    log.write_text("garbage\n")
    with pytest.raises(DataError, match="not an offline profiler log"):
        parse_offline_log(log)


def test_failure_reasons() -> None:
    assert failure_reason("", "x", "OSError: [Errno 98] Address already in use")[0] == "port_bind_failure"
    assert failure_reason("", "*** JOB 1 ON n CANCELLED AT 2025 DUE TO TIME LIMIT ***")[0] == "timeout"
    assert failure_reason("", "*** JOB 1 ON n CANCELLED AT 2025 ***")[0] == "cancelled"
    assert failure_reason("", "Exception: Server did not start on time")[0] == "server_start_failure"
    assert failure_reason("", "Traceback\nRuntimeError: boom")[0] == "crash"
    assert failure_reason("", "")[0] == "incomplete"


# --- the real mirror ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_tables() -> dict[str, pd.DataFrame]:
    if not MIRROR.is_dir():
        pytest.skip(f"raw mirror not found at {MIRROR}")
    return build_memgap_tables(MIRROR)[0]


def _inventory_by_family() -> dict[str, set[str]]:
    """Run folders per family, computed here by walking the tree (independently of the parser)."""
    out: dict[str, set[str]] = {}
    for dirpath, dirnames, _files in os.walk(MIRROR):
        if dirnames:
            continue
        rel = Path(dirpath).relative_to(MIRROR).as_posix()
        if rel.startswith("benchmarks/definitive_results/"):
            fam = rel.split("/")[2]
        elif rel.startswith("benchmarks_simple/"):
            fam = "offline"
        else:
            continue
        out.setdefault(fam, set()).add(rel)
    return out


@needs_mirror
def test_every_run_folder_is_accounted_for(real_tables: dict[str, pd.DataFrame]) -> None:
    inv = _inventory_by_family()
    on, off, ex = (
        real_tables["memgap-online"],
        real_tables["memgap-offline"],
        real_tables["memgap-exclusions"],
    )
    for fam in ("background", "advisor", "replication"):
        rows = set(on.loc[on["family"] == fam, "run_id"])
        dropped = set(ex["run_id"]) & inv[fam]
        assert rows | dropped == inv[fam], fam
        # a folder without a row has an exclusion saying why
        assert inv[fam] - rows <= set(ex.loc[ex["in_table"] == "", "run_id"])
    assert set(off["run_id"]) | (set(ex["run_id"]) & inv["offline"]) == inv["offline"]
    assert on["run_id"].is_unique and off["run_id"].is_unique


@needs_mirror
def test_real_online_rows(real_tables: dict[str, pd.DataFrame]) -> None:
    on = real_tables["memgap-online"]
    adv = on[on["family"] == "advisor"]
    assert set(adv.loc[adv["model"].str.startswith("opt"), "input_len"]) == {242.0}
    assert set(adv.loc[adv["model"].str.startswith("llama"), "input_len"]) == {250.0}
    assert set(adv["output_len"]) == {130.0, 260.0, 390.0, 520.0}
    assert (on["gpu"] == "h100-sxm-64gb").all() and (on["batch_size"] == on["max_num_seqs"]).all()
    bg = on[on["family"] == "background"]
    assert (bg["mean_running_batch"] <= bg["max_num_seqs"] + 1e-9).all()
    assert ((bg["throughput_tok_s"] * bg["duration_s"]) / (bg["completed"] * (bg["input_len"] + bg["output_len"])))\
        .between(0.999, 1.001).all()  # fmt: skip
    assert (on.loc[on["preempted"].fillna(False), "num_preemptions"] > 0).all()


@needs_mirror
def test_real_offline_rows(real_tables: dict[str, pd.DataFrame]) -> None:
    off = real_tables["memgap-offline"]
    assert (off["e2e_s"] - (off["prefill_s"] + off["decode_s"])).abs().max() < 1e-12
    assert (off["timing_valid"] == (off["profiler"] != "ncu")).all()
    assert set(off.loc[off["family"].str.startswith("attention_kernel"), "profiler"]) == {"ncu"}
    assert (
        off.loc[~off["preempted"], "n_decode_steps"] == off.loc[~off["preempted"], "output_len"] - 1
    ).all()
    xf = off[off["family"].str.contains("xformers")]
    assert (xf["backend"] == "xformers").all()
