"""The engine measurement protocol: the wave-count rule, interleaved repeats, resume of missing repeats,
the host-load arithmetic from /proc snapshots, the outside-load flag and its re-run bookkeeping (against the stand-in
vLLM of tests/engine_double.py), the two-family campaign grid and its dry run, and the GQA family's registry numbers."""

from __future__ import annotations

import json
import math
import sys

import pandas as pd
import pytest
from engine_double import SCRIPT

import slimlib.kit.vllm_runner as runner
from slimlib.advisor.commands import client_args, server_args
from slimlib.cli.main import main
from slimlib.experiments.engine_study.campaign_grid import (
    BATCHES,
    CAMPAIGN_MODELS,
    campaign_plan,
    merged_plan,
)
from slimlib.kit.host_load import (
    OUTSIDE_CPU_MAX_CORES,
    load_split,
    parse_pid_stat,
    parse_proc_stat,
    take_snapshot,
)
from slimlib.kit.model_folder import model_config
from slimlib.kit.vllm_runner import (
    MAX_WAVES,
    ArgvBuilders,
    EngineSpec,
    Protocol,
    measure_order,
    run_plan,
    wave_count,
)
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import architecture_from_config, get_architecture
from slimlib.registry.engine_models import ENGINE_MODELS, GQA_ENGINE_MODELS

ARGVS = ArgvBuilders(server_args, client_args)
SPEC = EngineSpec((sys.executable, str(SCRIPT)), {}, True, 4.0, True, "fake-vllm", None)
QUIET = Protocol(min_run_s=5.0, min_waves=3, rerun_flagged=False)


def _plan(models=("opt-1.3b-s8",), batches=(1, 4), repeats=2) -> pd.DataFrame:
    return campaign_plan(models=list(models), curves=((64, 32),), batches=batches, repeats=repeats,
                         long_curve=False)  # fmt: skip


@pytest.fixture
def env(tmp_path, monkeypatch):
    log = tmp_path / "fake.log"
    monkeypatch.setenv("FAKE_VLLM_LOG", str(log))
    for m in ("opt-1.3b-s8", "opt-6.7b-s8"):
        (tmp_path / "models" / m).mkdir(parents=True)
    return tmp_path, log


def _run(tmp, plan, protocol=QUIET, port=18451, **kw):
    said: list[str] = []
    m = run_plan(plan, tmp / "camp", SPEC, ARGVS, models_dir=tmp / "models", port=port, protocol=protocol,
                 say=said.append, **kw)  # fmt: skip
    return m, said


def _lines(log) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _result(tmp, f) -> dict:
    return json.loads((tmp / "camp" / "results" / f).read_text())


# ----------------------------------------------------------------------------------------------- wave count


def test_wave_count_rule():
    assert wave_count(5.0, 1.0, 3) == 5  # ceil(5 / 1)
    assert wave_count(5.0, 1.2, 3) == 5  # ceil(4.17)
    assert wave_count(5.0, 2.0, 3) == 3  # ceil(2.5) = 3 = min_waves
    assert wave_count(5.0, 10.0, 3) == 3  # one wave already longer than the target: min_waves
    assert wave_count(0.0, None, 2) == 2  # no target: min_waves, no estimate needed
    assert wave_count(5.0, 1e-9, 3) == MAX_WAVES
    with pytest.raises(ValueError, match="no positive wave-time estimate"):
        wave_count(5.0, None, 3)
    with pytest.raises(ValueError, match="min_waves"):
        wave_count(5.0, 1.0, 0)


def test_waves_from_a_probe_then_from_the_previous_repeat(env):
    """Repeat 0: a one-wave probe (kept out of results/) sizes k; repeat 1: the repeat-0 result's duration / waves.
    The stand-in's made-up duration is 0.5 + 0.01 n (IL + OL) / B seconds."""
    tmp, log = env
    plan = _plan(batches=(4,))
    m, _ = _run(tmp, plan)
    r0, r1 = plan["file"]
    probe = 0.5 + 0.01 * 96  # one wave of 4 requests of 64 + 32 tokens
    k0 = math.ceil(5.0 / probe)
    assert k0 == 4 and _result(tmp, r0)["num_prompts"] == 4 * k0 and _result(tmp, r0)["waves"] == str(k0)
    wave = (0.5 + 0.01 * 4 * k0 * 96 / 4) / k0  # repeat 0's duration / its waves
    k1 = math.ceil(5.0 / wave)
    assert k1 == 5 and _result(tmp, r1)["num_prompts"] == 4 * k1
    probes = sorted(p.name for p in (tmp / "camp" / "logs" / "probe").iterdir())
    assert probes == [r0]  # no probe for repeat 1
    lines = [ln for ln in _lines(log) if not ln.startswith("serve")]
    # the probe warms its shape with a wave of B requests; the server's warm-up comes once per start
    assert lines == ["warmup 4", f"bench {r0}", f"bench {r0}", "warmup 1", f"bench {r1}"]
    side = pd.read_csv(tmp / "camp" / "results" / "slim-runs.csv").set_index("file")
    assert side.loc[r0, "waves"] == k0 and side.loc[r1, "waves"] == k1
    assert (
        m["protocol"]["min_run_s"] == 5.0 and m["protocol"]["min_waves"] == 3 and "wave_rule" in m["protocol"]
    )


# ----------------------------------------------------------------------------------------------- order, resume


def test_repeats_are_interleaved_one_server_and_one_warmup_per_repeat_and_model(env):
    tmp, log = env
    plan = _plan(models=("opt-1.3b-s8", "opt-6.7b-s8"), repeats=3)
    order = [(rep, model) for rep, model, _ in measure_order(plan.sample(frac=1, random_state=0))]
    assert order == [(r, m) for r in range(3) for m in ("opt-1.3b-s8", "opt-6.7b-s8")] or order == [
        (r, m) for r in range(3) for m in ("opt-6.7b-s8", "opt-1.3b-s8")
    ]
    m, _ = _run(tmp, plan, Protocol(min_run_s=0, min_waves=2, rerun_flagged=False))
    lines = _lines(log)
    benches = [ln.split()[1] for ln in lines if ln.startswith("bench")]
    reps = [int(f.rsplit("_r", 1)[1].split(".")[0]) for f in benches]
    assert reps == sorted(reps) and len(benches) == len(
        plan
    )  # all of repeat r before r + 1; no probes at 0 s
    assert sum(ln.startswith("serve") for ln in lines) == 6  # 3 repeats x 2 models
    warm = [i for i, ln in enumerate(lines) if ln.startswith("warmup")]
    assert len(warm) == 6 and all(
        lines[i - 1].startswith("serve") for i in warm
    )  # once, right after each start
    assert [s["pass"] for s in m["sessions"][-1]["server_starts"]] == ["r0", "r0", "r1", "r1", "r2", "r2"]
    assert all(_result(tmp, f)["num_prompts"] == 2 * _result(tmp, f)["max_concurrency"] for f in plan["file"])


def test_resume_measures_only_the_missing_repeats(env):
    tmp, log = env
    plan = _plan(repeats=3)
    _run(tmp, plan[plan["repeat"] == 0])
    first = [ln for ln in _lines(log) if ln.startswith("bench")]
    assert len(first) == 4  # two probes, two runs
    (tmp / "camp" / "results" / plan["file"].iloc[0]).unlink()  # a lost repeat-0 result
    m, _ = _run(tmp, plan)
    again = [ln.split()[1] for ln in _lines(log) if ln.startswith("bench")][len(first) :]
    missing = [plan["file"].iloc[0], *plan.loc[plan["repeat"] > 0, "file"]]
    assert again[0] == plan["file"].iloc[0]  # its probe (no earlier repeat to size it from), then the rest
    assert again[1:] == missing and m["sessions"][-1]["measured"] == missing
    before = len(_lines(log))
    m, _ = _run(tmp, plan)
    assert len(_lines(log)) == before and m["sessions"][-1]["measured"] == []  # complete: no server started


# ----------------------------------------------------------------------------------------------- /proc arithmetic


def _pid_stat(
    pid: int, comm: str, pgrp: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0
) -> str:
    return (f"{pid} ({comm}) S 1 {pgrp} {pgrp} 0 -1 4194560 10 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0 "
            "100 1000 50\n")  # fmt: skip


def _proc(root, cpu: tuple[int, ...], procs: list[tuple]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    vals = " ".join(str(v) for v in cpu)
    (root / "stat").write_text(f"cpu  {vals} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2\n")
    for pid, comm, pgrp, *ticks in procs:
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(_pid_stat(pid, comm, pgrp, *ticks))
    (root / "self").mkdir(exist_ok=True)


def test_parsers_read_the_fields_by_position():
    assert parse_pid_stat(_pid_stat(7, "VLLM::Engine Core (x)", 5, 11, 13, 17, 19)) == (5, 60)
    t = parse_proc_stat("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 0 0 0 0 0 0 0 0\n")
    assert (t.user, t.nice, t.system, t.idle, t.iowait, t.irq, t.softirq, t.steal) == (1, 2, 3, 4, 5, 6, 7, 8)
    assert t.busy == 1 + 2 + 3 + 6 + 7 and t.total == 36


def test_outside_cpu_from_two_proc_snapshots(tmp_path):
    """2 s on 2 cores (400 ticks at 100 Hz): 340 busy ticks, of which the server's group (pids 100, 101) used 280 and
    the client's group (pid 300) 20; pid 200 is another process group: 40 busy ticks = 0.2 cores outside."""
    before, after = tmp_path / "a", tmp_path / "b"
    _proc(before, (1000, 0, 200, 5000, 0, 0, 0, 0),
          [(100, "vllm serve", 100, 50, 10), (101, "EngineCore", 100, 500, 20), (300, "bench", 300, 5, 5),
           (200, "other job", 200, 100, 0)])  # fmt: skip
    _proc(after, (1300, 0, 240, 5050, 0, 0, 0, 10),
          [(100, "vllm serve", 100, 100, 20), (101, "EngineCore", 100, 700, 40), (300, "bench", 300, 20, 10),
           (200, "other job", 200, 140, 0)])  # fmt: skip
    s0, s1 = take_snapshot({100, 300}, 10.0, before), take_snapshot({100, 300}, 12.0, after)
    assert s0 is not None and s1 is not None and s1.tree_ticks - s0.tree_ticks == 280 + 20
    d = load_split(s0, s1, hz=100)
    assert (
        d["cpu_user"] == 0.75
        and d["cpu_system"] == 0.1
        and d["cpu_steal"] == 0.025
        and d["cpu_idle"] == 0.125
    )
    assert (
        d["outside_cpu"] == pytest.approx(0.2)
        and d["outside_cpu"] > OUTSIDE_CPU_MAX_CORES
        and d["outside_load"]
    )
    # a per-run client that ended in between: its 0.4 CPU-seconds (rusage) are the run's, not outside
    d = load_split(s0, s1, hz=100, extra_cpu_s=0.4)
    assert d["outside_cpu"] == pytest.approx(0.0) and d["outside_load"] is False
    # watching the other group too: nothing outside; steal alone flags a run above 5%
    s0, s1 = take_snapshot({100, 200, 300}, 10.0, before), take_snapshot({100, 200, 300}, 12.0, after)
    assert load_split(s0, s1, hz=100)["outside_cpu"] == pytest.approx(0.0)
    _proc(after, (1300, 0, 240, 5050, 0, 0, 0, 30), [])
    d = load_split(
        take_snapshot(set(), 10.0, before), take_snapshot(set(), 12.0, after), hz=100, extra_cpu_s=3.4
    )
    assert (
        d["outside_cpu"] == 0.0 and d["cpu_steal"] == pytest.approx(30 / 420, abs=1e-4) and d["outside_load"]
    )


def test_without_proc_every_field_is_nan(tmp_path, env, monkeypatch):
    assert take_snapshot({1}, 0.0, tmp_path / "no-proc") is None
    assert all(math.isnan(v) for v in load_split(None, None).values())
    tmp, _ = env
    monkeypatch.setattr(runner, "take_snapshot", lambda pgids, t: None)
    m, said = _run(tmp, _plan(repeats=1), Protocol(min_run_s=0, min_waves=1))
    assert sum("no /proc on this host" in s for s in said) == 1  # said once
    side = pd.read_csv(tmp / "camp" / "results" / "slim-runs.csv")
    assert side[["wall_s", "cpu_user", "outside_cpu", "outside_load"]].isna().all().all() and len(side) == 2
    assert m["sessions"][-1]["reruns"] == {}  # an unknown load is not a flag


# ----------------------------------------------------------------------------------------------- flag, re-run


def _flags(monkeypatch, pattern):
    """Make `load_split` flag the n-th measured run when pattern(n) (n = 0, 1, ...)."""
    calls = []

    def fake(before, after, hz=None, extra_cpu_s=0.0):
        n = len(calls)
        calls.append(n)
        bad = pattern(n)
        return {"cpu_user": 0.5, "cpu_system": 0.1, "cpu_steal": 0.0, "cpu_idle": 0.4,
                "outside_cpu": 0.9 if bad else 0.01, "outside_load": bad}  # fmt: skip

    monkeypatch.setattr(runner, "load_split", fake)
    return calls


def test_a_flagged_run_is_kept_in_flagged_and_rerun_once_at_the_end_of_its_repeat(env, monkeypatch):
    tmp, log = env
    plan = _plan(models=("opt-1.3b-s8", "opt-6.7b-s8"), batches=(1, 4), repeats=2)
    _flags(monkeypatch, lambda n: n == 0)  # the very first run was under outside load
    proto = Protocol(min_run_s=0, min_waves=1)
    m, said = _run(tmp, plan, proto)
    first = plan["file"].iloc[0]
    res, flagged = tmp / "camp" / "results", tmp / "camp" / "results" / "flagged"
    assert (flagged / first).is_file() and (res / first).is_file()  # both kept
    assert json.loads((flagged / first).read_text())["model_id"].endswith("opt-1.3b-s8")
    passes = [s["pass"] for s in m["sessions"][-1]["server_starts"]]
    assert passes == [
        "r0",
        "r0",
        "r0-rerun",
        "r1",
        "r1",
    ]  # re-run after the repeat's last model, before repeat 1
    benches = [ln.split()[1] for ln in _lines(log) if ln.startswith("bench")]
    assert benches.count(first) == 2 and benches.index(first, 1) == 4  # after all four runs of repeat 0
    side = pd.read_csv(res / "slim-runs.csv").set_index("file")
    assert not side["outside_load"].any() and len(side) == len(plan)  # the final flag of every result
    fside = pd.read_csv(flagged / "slim-runs.csv").set_index("file")
    assert (
        list(fside.index) == [first]
        and bool(fside.loc[first, "outside_load"])
        and fside.loc[first, "outside_cpu"] == 0.9
    )
    assert (fside.loc[first, "model"], fside.loc[first, "batch_size"], fside.loc[first, "repeat"]) == (
        "opt-1.3b-s8",
        1,
        0,
    )
    assert m["sessions"][-1]["reruns"] == {first: f"flagged/{first}"}
    assert [f["file"] for f in m["flagged"]] == [f"flagged/{first}"] and len(m["flagged"][0]["sha256"]) == 64
    assert any(f"kept as flagged/{first}, re-running it" in s for s in said)


def test_a_run_flagged_again_keeps_its_flag_and_is_not_rerun_twice(env, monkeypatch):
    tmp, log = env
    plan = _plan(batches=(1,), repeats=1)
    _flags(monkeypatch, lambda n: True)  # every run under outside load
    proto = Protocol(min_run_s=0, min_waves=1)
    _run(tmp, plan, proto)
    (f,) = plan["file"]
    assert sum(ln.startswith("bench") for ln in _lines(log)) == 2  # the run and its one re-run
    side = pd.read_csv(tmp / "camp" / "results" / "slim-runs.csv").set_index("file")
    assert bool(side.loc[f, "outside_load"])  # the final flag is recorded
    before = len(_lines(log))
    m, _ = _run(tmp, plan, proto)  # rerunning the command: complete, the flagged copy says it was re-run
    assert len(_lines(log)) == before and m["sessions"][-1]["reruns"] == {}


# ----------------------------------------------------------------------------------------------- grid, CLI


def test_campaign_grid_two_families_interleaved_repeats():
    plan = campaign_plan()
    assert "opt-2.7b-s8" not in set(plan["model"]) and list(plan["model"].unique()) == list(CAMPAIGN_MODELS)
    assert set(CAMPAIGN_MODELS) == (set(ENGINE_MODELS) - {"opt-2.7b-s8"}) | set(GQA_ENGINE_MODELS)
    per_model = 3 * len(BATCHES) + 5  # three full curves, the long prompt over B <= 16
    assert len(plan) == 3 * 6 * per_model and plan["file"].is_unique
    assert list(plan["repeat"]) == sorted(plan["repeat"])  # repeat-major
    for r in range(3):
        assert plan.loc[plan["repeat"] == r, "file"].str.endswith(f"_r{r}.json").all()
    r0 = plan[plan["repeat"] == 0]
    for m in CAMPAIGN_MODELS:
        g = r0[r0["model"] == m]
        long_il = 2048 if m in GQA_ENGINE_MODELS else 1024
        assert set(zip(g["input_len"], g["output_len"], strict=True)) == {(128, 64), (128, 256), (512, 64),
                                                                          (long_il, 64)}  # fmt: skip
        assert sorted(g.loc[g["input_len"] == long_il, "batch_size"]) == [1, 2, 4, 8, 16]
    assert (plan["num_prompts"] == plan["batch_size"]).all()  # one wave planned; the runner sets k B


def test_a_later_models_option_adds_to_the_campaign_folders_plan():
    opt = campaign_plan(models=["opt-1.3b-s8"], repeats=2)
    both = merged_plan(opt, campaign_plan(models=["qwen3s-h512", "opt-1.3b-s8"], repeats=3))
    assert set(both["file"]) == set(opt["file"]) | set(
        campaign_plan(models=["qwen3s-h512", "opt-1.3b-s8"])["file"]
    )
    assert both["file"].is_unique and list(both["repeat"]) == sorted(both["repeat"])
    assert list(measure_order(both))[0][:2] == (0, "opt-1.3b-s8")


def test_dry_run_prints_plan_size_and_estimate(tmp_path, capsys):
    args = ["bench", "campaign", "--out", str(tmp_path / "c"), "--engine-python", "python", "--dry-run"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "plan: 468 runs = 156 configurations x 3 repeats, 6 models, 18 server starts" in out
    assert "estimate: " in out and "wave times of qwen3s-h1024:" in out
    assert not (tmp_path / "c").exists()  # nothing measured or written
    assert main([*args, "--models", "opt-1.3b-s8", "--repeats", "1"]) == 0
    assert (
        "plan: 26 runs = 26 configurations x 1 repeats, 1 models, 1 server starts" in capsys.readouterr().out
    )
    assert main([*args, "--models", "opt-1.3b-s8", "--repeats", "1", "--max-batch", "16"]) == 0
    assert "plan: 20 runs = 20 configurations x 1 repeats" in capsys.readouterr().out  # 3 x 5 + 5


# ----------------------------------------------------------------------------------------------- GQA family


@pytest.mark.parametrize(
    "name,d,heads", [("qwen3s-h512", 512, 4), ("qwen3s-h768", 768, 6), ("qwen3s-h1024", 1024, 8)]
)
def test_gqa_family_registry_numbers(name, d, heads):
    a = get_architecture(name)
    assert (a.hidden_size, a.n_heads, a.n_kv_heads, a.head_dim, a.n_layers) == (d, heads, 2, 128, 6)
    assert (a.ffn_kind, a.ffn_size, a.vocab_size, a.max_position, a.family) == (
        "gated",
        3 * d,
        18992,
        4096,
        "qwen3",
    )
    assert (
        serving_config(a).kv_bytes_per_token == 6 * 2 * 2 * 128 * 2
    )  # layers x (K, V) x KV heads x d_h x bf16
    attn = d * heads * 128 * 2 + d * 2 * 128 * 2  # q, o; k, v
    per_layer = attn + 3 * d * 3 * d + 2 * d + 2 * 128  # SwiGLU, two RMSNorms, q/k norms of width d_h
    assert a.n_params == 2 * 18992 * d + 6 * per_layer + d  # untied embedding and head, final norm


def test_gqa_model_folder_config_is_qwen3_and_reads_back_as_the_registry_entry(tmp_path):
    c = model_config("qwen3s-h768")
    assert c["architectures"] == ["Qwen3ForCausalLM"] and c["model_type"] == "qwen3"
    assert (c["head_dim"], c["num_key_value_heads"], c["tie_word_embeddings"], c["rope_theta"]) == (
        128,
        2,
        False,
        1e6,
    )
    (tmp_path / "config.json").write_text(json.dumps(c))
    assert (
        architecture_from_config(tmp_path / "config.json").identity
        == get_architecture("qwen3s-h768").identity
    )
