"""`slim data ingest DIR...`: merging campaign folders and result folders, reporting missing/failed tasks, refusing
duplicates that disagree. The campaign is run once by the fake sbatch against stand-ins that write recorded public
results (tests/fixtures/slurm/; a test double for orchestration, never a measurement)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pandas as pd
import pytest
from slurm_doubles import env_with, install

from slimlib.advisor.plan import make_plan, write_plan
from slimlib.advisor.slurm_plan import SCRIPT_NAME
from slimlib.cli.main import main
from slimlib.data.campaign_collect import TASKS_NAME, collect
from slimlib.errors import DataError

FILE3 = "opt-1.3b_b32_il242_ol520.json"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A campaign folder whose six tasks all ran (results, status lines, logs)."""
    root = tmp_path_factory.mktemp("campaign")
    plan = make_plan("opt-1.3b", "h100-sxm-64gb", [242], [130, 520], batch_sizes=[8, 32, 128], rounds=1,
                     min_prompts=2000)  # fmt: skip
    write_plan(plan, root / "plan", scheduler="slurm")
    bin_dir = install(root)
    subprocess.run(["sbatch", SCRIPT_NAME], cwd=root / "plan", env=env_with(bin_dir), check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    assert len(list((root / "plan" / "results").glob("*.json"))) == 6
    return root / "plan"


@pytest.fixture
def camp(finished, tmp_path):
    dst = tmp_path / "plan"
    shutil.copytree(finished, dst)
    return dst


def test_complete_campaign_merges_every_task(camp):
    got = collect([camp])
    assert got.complete and len(got.table) == 6
    assert got.report[0].startswith(f"campaign {camp}: 6 task(s): 6 with a result, 0 failed, 0 missing")
    assert sorted(got.table["source_file"]) == sorted("results/" + f for f in pd.read_csv(
        camp / TASKS_NAME, sep="\t")["file"])  # fmt: skip
    assert got.table["settings_from"].str.contains("batch_size=sidecar").all()  # settings from the task table
    assert (got.table["max_concurrency"] == got.table["batch_size"]).all() and "e2e_s" in got.table


def test_missing_result_with_ok_status_and_never_run_task(camp):
    (camp / "results" / FILE3).unlink()
    (camp / "results" / "opt-1.3b_b8_il242_ol130.json").unlink()
    (camp / "status" / "task-0.status").unlink()
    (camp / "logs" / "task-0.log").unlink()
    got = collect([camp])
    assert sorted(m["task"] for m in got.missing) == [0, 3] and not got.failed and len(got.table) == 4
    text = got.report_text()
    assert "MISSING task 3 (opt-1.3b B=32 IL=242 OL=520): its status says ok but the result is gone" in text
    assert f"log: {camp / 'logs' / 'task-0.log'} (not written)" in text


def test_identical_duplicates_merge_and_disagreeing_ones_are_refused(camp, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(camp, copy)
    got = collect([camp, copy])
    assert len(got.table) == 6 and sum(ln.startswith("duplicate:") for ln in got.report) == 6
    assert got.table["source_file"].str.startswith(str(camp)).all()
    # the same configuration measured twice with different results
    other = json.loads((copy / "results" / "opt-1.3b_b8_il242_ol520.json").read_text())
    (copy / "results" / FILE3).write_text(json.dumps(other))
    with pytest.raises(DataError, match=r"same configuration .*batch_size=32.* disagree on throughput_tok_s"):
        collect([camp, copy])


def test_plain_result_folder_and_campaign_together(camp, tmp_path):
    plain = tmp_path / "extra"
    plain.mkdir()
    shutil.copy(camp / "results" / FILE3, plain / "run.json")
    got = collect([camp, plain])
    assert any(ln == f"folder {plain}: 1 result file(s)" for ln in got.report)
    assert len(got.table) == 6  # run.json repeats task 3 exactly: kept once
    with pytest.raises(DataError, match="--sidecar applies to one plain result folder"):
        collect([camp], sidecar=plain / "run.json")
    with pytest.raises(DataError, match="given twice"):
        collect([camp, camp])


def test_cli_refuses_incomplete_unless_allowed(camp, tmp_path, capsys):
    (camp / "results" / FILE3).unlink()
    (camp / "status" / "task-3.status").write_text(
        "task=3\tstatus=failed\tstage=client\trc=1\tname=x\tlog=logs/task-3.log\tnode=n1\tjob=7_3\tseconds=4\t"
        "reason=the client wrote no results/.task-3/x\n"
    )
    out = tmp_path / "runs.csv"
    assert main(["data", "ingest", str(camp), "--out", str(out)]) == 1 and not out.exists()
    err = capsys.readouterr().err
    assert (
        "FAILED  task 3 (opt-1.3b B=32 IL=242 OL=520): stage client, exit 1" in err
        and "--allow-incomplete" in err
    )
    assert main(["data", "ingest", str(camp), "--out", str(out), "--allow-incomplete"]) == 0
    assert len(pd.read_csv(out)) == 5 and "FAILED  task 3" in capsys.readouterr().err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".runs.csv")]  # atomic write left no temp


def test_bad_task_table_and_status_line(camp):
    (camp / "status" / "task-2.status").write_text("garbage\n")
    (camp / "results" / "opt-1.3b_b32_il242_ol130.json").unlink()
    with pytest.raises(DataError, match="task-2.status: not a task status line"):
        collect([camp])
    table = (camp / TASKS_NAME).read_text().replace("\n0\t", "\nzero\t")
    (camp / TASKS_NAME).write_text(table)
    with pytest.raises(DataError, match="field 'task' is 'zero'"):
        collect([camp])
