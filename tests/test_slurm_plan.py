"""`slim plan --scheduler slurm`: the job-array script, its task table, and a fake campaign run by a fake `sbatch`.

The stand-in server/client (tests/slurm_doubles.py) write recorded public results (tests/fixtures/slurm/): a test
double for orchestration, never a measurement.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import pandas as pd
import pytest
from slurm_doubles import RECORDED, env_with, install

from slimlib.advisor.plan import client_command, make_plan, server_command, write_plan
from slimlib.advisor.slurm_plan import SCRIPT_NAME
from slimlib.batchjobs import SlurmOptions, parse_status_line, read_env_file
from slimlib.cli.main import main
from slimlib.data.campaign_collect import TASKS_NAME, collect
from slimlib.data.ingest import ingest
from slimlib.errors import DataError

SHELLCHECK = shutil.which("shellcheck")


def _plan():
    """The 6 configurations the recorded fixtures cover (OPT-1.3B, IL 242, OL 130/520, B 8/32/128, 2000 prompts)."""
    return make_plan("opt-1.3b", "h100-sxm-64gb", [242], [130, 520], batch_sizes=[8, 32, 128], rounds=1,
                     min_prompts=2000)  # fmt: skip


def _recorded(b, ol):
    return json.loads((RECORDED / f"b{b}_ol{ol}.json").read_text())


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sbatch(plan_dir, env, *extra):
    return subprocess.run(["sbatch", *extra, SCRIPT_NAME], cwd=plan_dir, env=env, capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip


@pytest.mark.parametrize("legacy", [False, True])
def test_plan_client_command_gives_ingest_every_field(tmp_path, legacy):
    """Run the plan's own client command line (against the stand-in): ingest recovers B, lengths and e2e_s."""
    plan = _plan()
    row = plan.iloc[2]  # B=32, OL=130
    bin_dir = install(tmp_path)
    env = env_with(bin_dir)
    port = _free_port()
    hf, b = row["hf_id"], int(row["batch_size"])
    server = subprocess.Popen(["bash", "-c", f"exec {server_command(hf, b, 372, port)}"], env=env)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        if legacy:  # the legacy client runs from a vLLM checkout
            (tmp_path / "benchmarks").mkdir()
            shutil.copy(bin_dir / "vllm", tmp_path / "benchmarks" / "benchmark_serving.py")
        (tmp_path / "res").mkdir()  # as run_plan.sh does before its clients
        cmd = client_command(row, "res", port, legacy=legacy)
        assert f"--max-concurrency {b}" in cmd and "--percentile-metrics ttft,tpot,itl,e2el" in cmd
        subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, check=True, timeout=60)
    finally:
        server.terminate()
        server.wait(timeout=10)
    df = ingest(tmp_path / "res")  # nothing from the command line: the file says it all
    rec = _recorded(32, 130)
    got = df.iloc[0]
    assert got["source_file"] == row["file"] and got["batch_size"] == 32 and got["max_concurrency"] == 32
    assert (got["input_len"], got["output_len"], got["gpu"]) == (242, 130, "h100-sxm-64gb")
    assert got["throughput_tok_s"] == rec["total_token_throughput"]
    # the stand-in's closed loop of 32 clients: each request's E2E is their tokens over the throughput
    assert got["e2e_s"] == pytest.approx(32 * (242 + 130) / rec["total_token_throughput"])


def test_array_script_header_and_task_table(tmp_path):
    paths = write_plan(_plan(), tmp_path, scheduler="slurm",
                       slurm=SlurmOptions(partition="gpu", account="proj1", time="00:30:00", max_parallel=4))  # fmt: skip
    script = (tmp_path / SCRIPT_NAME).read_text()
    assert [p.name for p in paths] == [
        "plan.csv",
        SCRIPT_NAME,
        TASKS_NAME,
        "slurm.env",
        "README.txt",
        ".slim-owner",
    ]
    for line in ("#SBATCH --array=0-5%4", "#SBATCH --gres=gpu:1", "#SBATCH --time=00:30:00",
                 "#SBATCH --partition=gpu", "#SBATCH --account=proj1", "#SBATCH --output=logs/task-%a.log"):  # fmt: skip
        assert line + "\n" in script
    assert (tmp_path / SCRIPT_NAME).stat().st_mode & 0o111 and (tmp_path / "logs").is_dir()
    tasks = pd.read_csv(tmp_path / TASKS_NAME, sep="\t")
    assert tasks["task"].tolist() == list(range(6))
    assert (tasks["result"] == "results/" + tasks["file"]).all()
    assert (
        tasks[["batch_size", "output_len"]].to_numpy() == _plan()[["batch_size", "output_len"]].to_numpy()
    ).all()
    assert [p.name for p in tmp_path.glob(".*")] == [
        ".slim-owner"
    ]  # the ownership marker; no temporary file left


def test_tensor_parallel_asks_for_more_gpus(tmp_path):
    plan = make_plan("llama-2-13b", "h100-sxm-64gb", [512], [128, 512], n_batch=3, tensor_parallel=2)
    one = make_plan("llama-2-13b", "h100-sxm-64gb", [512], [128, 512], n_batch=3)
    assert (plan["tensor_parallel"] == 2).all() and len(plan) == len(one)
    write_plan(plan, tmp_path, scheduler="slurm")
    script = (tmp_path / SCRIPT_NAME).read_text()
    assert "#SBATCH --gres=gpu:2\n" in script and '--tensor-parallel-size "${TP}"' in script
    write_plan(plan, tmp_path / "local")
    assert "--tensor-parallel-size 2" in (tmp_path / "local" / "run_plan.sh").read_text()
    with pytest.raises(DataError, match="tensor-parallel"):
        make_plan("opt-1.3b", "h100-sxm-64gb", [242], [130, 520], tensor_parallel=0)


def test_env_file_fills_sbatch_lines_and_is_sourced(tmp_path):
    env = tmp_path / "site.env"
    env.write_text("# site\nSLIM_PARTITION=gpu-a100\nexport SLIM_ACCOUNT='proj 7'\nSLIM_TIME=45\n"
                   "SLIM_SETUP='module load cuda'\n")  # fmt: skip
    assert read_env_file(env)["SLIM_SETUP"] == "module load cuda"
    with pytest.raises(DataError, match="SBATCH value"):  # 'proj 7' has a space
        write_plan(_plan(), tmp_path / "p", scheduler="slurm", env_file=env)
    env.write_text("SLIM_PARTITION=gpu-a100\nSLIM_ACCOUNT=proj7\nSLIM_TIME=45\n")
    write_plan(_plan(), tmp_path / "p", scheduler="slurm", env_file=env, slurm=SlurmOptions(time="10:00"))
    script = (tmp_path / "p" / SCRIPT_NAME).read_text()
    assert "#SBATCH --partition=gpu-a100\n" in script and "#SBATCH --account=proj7\n" in script
    assert "#SBATCH --time=10:00\n" in script  # the option wins over the file
    assert (tmp_path / "p" / "slurm.env").read_text() == env.read_text()
    env.write_text("SLIM_PARTITION gpu\n")
    with pytest.raises(DataError, match="line 1"):
        write_plan(_plan(), tmp_path / "q", scheduler="slurm", env_file=env)
    with pytest.raises(DataError, match="time limit"):
        write_plan(_plan(), tmp_path / "q", scheduler="slurm", slurm=SlurmOptions(time="two hours"))


@pytest.mark.parametrize("legacy", [False, True])
def test_generated_scripts_pass_bash_n(tmp_path, legacy):
    write_plan(_plan(), tmp_path / "s", scheduler="slurm", legacy=legacy)
    write_plan(_plan(), tmp_path / "l", legacy=legacy)
    for script in (tmp_path / "s" / SCRIPT_NAME, tmp_path / "l" / "run_plan.sh"):
        subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.skipif(SHELLCHECK is None, reason="shellcheck is not installed (apt-get install -y shellcheck)")
@pytest.mark.parametrize("which", ["plan", "plan-legacy", "kit"])
def test_generated_array_scripts_pass_shellcheck(tmp_path, which):
    if which == "kit":
        from slimlib.kit.kit_slurm import write_kit_array

        write_kit_array(_kit_plan(), tmp_path, device="cuda", gpu="h100-sxm-80gb", task_budget_s=300.0,
                        options=SlurmOptions(account="proj"))  # fmt: skip
    else:
        write_plan(_plan(), tmp_path, scheduler="slurm", legacy=which == "plan-legacy",
                   slurm=SlurmOptions(partition="gpu"))  # fmt: skip
    proc = subprocess.run([SHELLCHECK, str(tmp_path / SCRIPT_NAME)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_fake_campaign_fails_resumes_and_fits(tmp_path, capsys):
    """sbatch runs the array; a failed task leaves a status line and is reported; resubmitting skips the rest."""
    bin_dir = install(tmp_path)
    plan_dir = tmp_path / "plan"
    rc = main(["plan", "--model", "opt-1.3b", "--gpu", "h100-sxm-64gb", "--input-len", "242", "--output-len", "130",
               "520", "--batch-sizes", "8", "32", "128", "--rounds", "1", "--min-prompts", "2000", "--scheduler",
               "slurm", "--out", str(plan_dir)])  # fmt: skip
    assert rc == 0 and "sbatch slurm_array.sh" in capsys.readouterr().out
    broken = "opt-1.3b_b32_il242_ol520.json"
    calls = tmp_path / "calls.jsonl"
    out = _sbatch(plan_dir, env_with(bin_dir, FAKE_CLIENT_FAIL=broken, FAKE_VLLM_LOG=str(calls)))
    assert out.stdout.startswith("Submitted batch job")
    results = sorted(p.name for p in (plan_dir / "results").iterdir())
    assert len(results) == 5 and broken not in results
    status = {int(p.stem.split("-")[1]): parse_status_line(p.read_text(), str(p))
              for p in (plan_dir / "status").glob("task-*.status")}  # fmt: skip
    assert sorted(status) == list(range(6))
    assert [t for t, s in status.items() if s["status"] == "failed"] == [3]
    assert status[3]["stage"] == "client" and status[3]["rc"] != "0" and status[3]["log"] == "logs/task-3.log"
    assert "injected failure" in (plan_dir / "logs" / "task-3.log").read_text()
    served = [json.loads(ln) for ln in calls.read_text().splitlines() if '"serve"' in ln]
    assert len(served) == 6 and len({c["port"] for c in served}) >= 1
    assert all(c["prefix_caching"] is False for c in served)  # every server told not to cache prefixes
    assert all(c["budget"] == 2048 for c in served)  # vLLM's own default for a 64 GiB H100, given explicitly
    # ingest reports the failure (with the log) and refuses to write a table with fewer points
    got = collect([plan_dir])
    assert not got.complete and [f["task"] for f in got.failed] == ["3"] and len(got.table) == 5
    assert str(plan_dir / "logs" / "task-3.log") in got.report_text()
    assert "(last line: 'fake client: connection reset by peer (injected failure)')" in got.report_text()
    rc = main(["data", "ingest", str(plan_dir), "--out", str(tmp_path / "runs.csv")])
    err = capsys.readouterr().err
    assert rc == 1 and "FAILED  task 3" in err and not (tmp_path / "runs.csv").exists()
    # resubmit: only task 3 runs again
    calls.unlink()
    _sbatch(plan_dir, env_with(bin_dir, FAKE_VLLM_LOG=str(calls)))
    again = [json.loads(ln) for ln in calls.read_text().splitlines()]
    assert [c["cmd"] for c in again] == ["serve", "bench"] and again[1]["file"] == broken
    assert "exists; skipped" in (plan_dir / "logs" / "task-0.log").read_text()
    assert parse_status_line((plan_dir / "status" / "task-3.status").read_text(), "s")["status"] == "ok"
    rc = main(["data", "ingest", str(plan_dir), "--out", str(tmp_path / "runs.csv")])
    assert rc == 0
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 6 and runs["e2e_s"].notna().all()
    # the results' metadata say how the servers scheduled: V1's chunked prefill at the budget they were given
    assert (runs["max_num_batched_tokens"] == 2048).all() and runs["chunked_prefill"].all()
    assert (runs["max_num_seqs"] == runs["batch_size"]).all()  # the server's cap, replayed as it ran
    for r in runs.itertuples():
        assert r.throughput_tok_s == _recorded(r.batch_size, int(r.output_len))["total_token_throughput"]
    rc = main(["fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "params.json")])
    assert rc == 0 and json.loads((tmp_path / "params.json").read_text())


def test_array_range_and_server_failure(tmp_path):
    bin_dir = install(tmp_path)
    write_plan(_plan(), tmp_path / "p", scheduler="slurm")
    _sbatch(tmp_path / "p", env_with(bin_dir, FAKE_SERVER_FAIL_B="128"), "--array=3-4")
    assert sorted(p.name for p in (tmp_path / "p" / "results").iterdir()) == ["opt-1.3b_b32_il242_ol520.json"]
    st = parse_status_line((tmp_path / "p" / "status" / "task-4.status").read_text(), "s")
    assert (st["status"], st["stage"]) == ("failed", "server")
    assert "exited before it was ready" in st["reason"]
    got = collect([tmp_path / "p"])
    assert sorted(m["task"] for m in got.missing) == [0, 1, 2, 5] and len(got.failed) == 1
    assert "MISSING task 0" in got.report_text() and "(not written)" in got.report_text()


def test_server_timeout_is_a_failed_status(tmp_path):
    bin_dir = install(tmp_path)
    (bin_dir / "vllm").write_text("#!/usr/bin/env bash\nexec sleep 30\n")  # never answers /health
    write_plan(_plan(), tmp_path / "p", scheduler="slurm")
    _sbatch(tmp_path / "p", env_with(bin_dir, SLIM_SERVER_TIMEOUT_S="1"), "--array=0")
    st = parse_status_line((tmp_path / "p" / "status" / "task-0.status").read_text(), "s")
    assert st["stage"] == "server" and "not ready after 1 s" in st["reason"]


# ------------------------------------------------------------------------------------------- kit campaign split


def _kit_plan(budget_s=3600.0):
    from slimlib.kit.counter_campaign import device_spec, plan_campaign

    return plan_campaign(budget_s, device_spec("h100", "cuda"))


def test_kit_split_keeps_priority_and_per_task_budget():
    from slimlib.kit.kit_slurm import split_tasks

    plan = _kit_plan()
    budget = 0.9 * float(
        plan.loc[plan["status"] == "planned", "est_s"].max()
    )  # the costliest point is over it
    split = split_tasks(plan, budget)
    planned = split[split["task"].notna()]
    assert planned["est_s"].groupby(planned["task"]).sum().max() <= budget
    assert planned["task"].is_monotonic_increasing and planned["priority"].is_monotonic_increasing
    assert planned["task"].min() == 0 and planned["task"].nunique() == planned["task"].max() + 1
    assert planned["task"].nunique() > 1
    over = split[split["status"] == "over-task-budget"]
    assert (over["est_s"] > budget).all() and len(over) >= 1
    was_planned = set(plan.loc[plan["status"] == "planned", "point_id"])
    assert was_planned == set(planned["point_id"]) | set(over["point_id"])
    with pytest.raises(DataError, match="per-task budget"):
        split_tasks(plan, 0)


def test_kit_array_runs_resumes_and_reports(tmp_path):
    """The kit array under the fake sbatch, with a stand-in for `python -m slimlib.kit.kit_slurm run-task` (the real one
    measures on a GPU); then run_task itself with a stand-in runner: its slice, skip when complete, set aside."""
    from slimlib.kit.kit_slurm import SCRIPT_NAME as KIT_SCRIPT
    from slimlib.kit.kit_slurm import report, run_task, write_kit_array

    kit = tmp_path / "kit-raw"
    text = write_kit_array(_kit_plan(), kit, device="cuda", gpu="h100-sxm-80gb", task_budget_s=300.0)
    assert "array task(s) of at most 300 s" in text
    script = (kit / KIT_SCRIPT).read_text()
    n = len(pd.read_csv(kit / "kit_tasks.tsv", sep="\t"))
    assert f"#SBATCH --array=0-{n - 1}%{min(8, n)}\n" in script and "#SBATCH --time=00:15:00\n" in script
    subprocess.run(["bash", "-n", str(kit / KIT_SCRIPT)], check=True)  # shellcheck: the test above
    bin_dir = install(tmp_path)
    fake_py = bin_dir / "fake-kit-python"  # writes a complete manifest, fails for task $FAKE_FAIL_TASK
    fake_py.write_text('#!/usr/bin/env bash\nset -e\n[ "$5" != "${FAKE_FAIL_TASK:-}" ] || { echo "CUDA error (injected)" >&2; exit 7; }\n'
                       'd="$(basename "$PWD")-task-$(printf %03d "$5")"\nmkdir -p "$d"\n'
                       'echo \'{"points": [{"status": "done"}], "status": "complete"}\' > "$d/manifest.json"\n'
                       'echo "$5" >> ran.txt\n')  # fmt: skip
    fake_py.chmod(0o755)
    env = env_with(bin_dir, SLIM_PYTHON=str(fake_py))
    subprocess.run(["sbatch", KIT_SCRIPT], cwd=kit, env=dict(env, FAKE_FAIL_TASK="1"), check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    lines = report(kit)
    assert lines[1].startswith("task 1: FAILED at campaign (exit 7)") and "logs/task-1.log" in lines[1]
    assert sum("complete" in ln for ln in lines) == n - 1
    (kit / "ran.txt").unlink()
    subprocess.run(["sbatch", KIT_SCRIPT], cwd=kit, env=env, check=True, capture_output=True, timeout=120)
    assert (kit / "ran.txt").read_text().split() == ["1"]  # the others were complete: skipped
    assert all("complete" in ln for ln in report(kit))
    shutil.rmtree(kit / "kit-raw-task-001")
    # run_task: its own slice only, skipped when complete, an incomplete folder set aside
    seen = {}

    def runner(plan, folder, **kw):
        seen["ids"], seen["budget"] = list(plan["point_id"]), kw["budget_s"]
        folder.mkdir(parents=True)
        manifest = {"status": "complete", "points": []}
        (folder / "manifest.json").write_text(json.dumps(manifest))
        return manifest

    split = pd.read_csv(kit / "kit_plan.csv")
    mine = split.loc[(split["task"] == 1) & (split["status"] == "planned"), "point_id"].tolist()
    assert run_task(kit, 1, runner=runner, log=lambda m: None)["status"] == "complete"
    assert seen == {"ids": mine, "budget": 300.0}
    seen.clear()
    run_task(kit, 1, runner=runner, log=lambda m: None)
    assert seen == {}  # complete: skipped
    folder = kit / "kit-raw-task-001"
    (folder / "manifest.json").write_text(json.dumps({"status": "running", "points": []}))
    run_task(kit, 1, runner=runner, log=lambda m: None)
    assert seen["ids"] == mine and (kit / "kit-raw-task-001.incomplete" / "manifest.json").is_file()
