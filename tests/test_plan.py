"""`slim plan`: configurations, vLLM commands, and the sidecar that `slim data ingest` reads."""

from __future__ import annotations

import shlex

import pandas as pd
import pytest

from slimlib.advisor.plan import SIDECAR_COLUMNS, make_plan, write_plan
from slimlib.cli.main import main
from slimlib.data.ingest import SIDECAR_NAMES
from slimlib.errors import DataError
from slimlib.registry.vllm_flags import NO_PREFIX_CACHING


def test_plan_spans_batch_sizes_and_lengths():
    plan = make_plan("opt-1.3b", "h100-sxm-80gb", [242], [130, 520], n_batch=3, rounds=20, min_prompts=200)
    assert sorted(plan["batch_size"].unique()) == [8, 32, 128]
    assert len(plan) == 6 and set(plan["output_len"]) == {130, 520}
    assert (plan["num_prompts"] == plan["batch_size"].map(lambda b: max(200, 20 * b))).all()
    assert plan["file"].is_unique


def test_plan_respects_memory_and_rejects_bad_input():
    # llama-2-13b on 64 GB at 4096 tokens (3.1 GiB of KV each): about 10 requests fit, so 32 and 128 are skipped
    plan = make_plan("llama-2-13b", "h100-sxm-64gb", [2048], [1024, 2048], n_batch=3)
    assert sorted(plan["batch_size"].unique()) == [2, 4, 8]
    with pytest.raises(DataError, match="exceed"):
        make_plan("llama-2-13b", "h100-sxm-64gb", [2048], [2000], batch_sizes=[8, 1024])
    with pytest.raises(DataError, match="the plan has 2 runs, fewer than the 6 a calibration needs"):
        make_plan("opt-1.3b", "h100-sxm-80gb", [128], [128], n_batch=2)
    one_pair = make_plan(
        "opt-1.3b", "h100-sxm-80gb", [128], [128]
    )  # one length pair: six batch sizes by default
    assert len(one_pair) == 6 and one_pair["batch_size"].is_unique
    with pytest.raises(
        DataError, match="holds 10 requests of 4096 tokens, so only 4 batch sizes of the calibration"
    ):
        make_plan("llama-2-13b", "h100-sxm-64gb", [2048], [2048], batch_sizes=None)
    with pytest.raises(DataError, match="context"):
        make_plan("opt-1.3b", "h100-sxm-80gb", [2000], [500])


def test_write_plan_commands_and_sidecar_lines(tmp_path):
    plan = make_plan("opt-2.7b", "h100-sxm-64gb", [242], [130, 520], batch_sizes=[8, 32, 128])
    paths = write_plan(plan, tmp_path, result_dir="res")
    script = (tmp_path / "run_plan.sh").read_text()
    assert script.count("vllm serve facebook/opt-2.7b") == 3
    assert "--max-num-seqs 128" in script
    # every server prefills every prompt it is timed on: the client's random prompts repeat across a server's runs
    servers = [ln for ln in script.splitlines() if ln.startswith("vllm serve")]
    assert len(servers) == 3 and all(NO_PREFIX_CACHING in shlex.split(ln.rstrip(" &")) for ln in servers)
    clients = [ln for ln in script.splitlines() if ln.startswith("vllm bench serve")]
    assert len(clients) == 6
    args = shlex.split(clients[0].split(" && ")[0])
    for flag in ("--ignore-eos", "--save-result"):
        assert flag in args
    assert args[args.index("--dataset-name") + 1] == "random"
    assert args[args.index("--request-rate") + 1] == "inf"
    assert args[args.index("--result-dir") + 1] == "res"
    # what ingest needs: the concurrency cap = B, the e2el percentiles, a *.json result name, B and GPU metadata
    b = int(args[args.index("--max-concurrency") + 1])
    assert f"max_num_seqs={b}" in args and "gpu=h100-sxm-64gb" in args
    assert "e2el" in args[args.index("--percentile-metrics") + 1].split(",")
    assert args[args.index("--result-filename") + 1].endswith(".json")
    # each finished run appends a sidecar line naming its result file and settings
    assert "res/slim-runs.csv" in script and "slim-runs.csv" in SIDECAR_NAMES
    header = ",".join(SIDECAR_COLUMNS)
    assert f"echo {header} >" in script
    line = clients[0].split(">> ")[0].split("&& echo ")[1].strip()
    file, b, il, ol, model, gpu = line.split(",")
    row = plan[plan["file"] == file].iloc[0]
    assert (int(b), int(il), int(ol), model, gpu) == (row.batch_size, row.input_len, row.output_len,
                                                      "opt-2.7b", "h100-sxm-64gb")  # fmt: skip
    assert pd.read_csv(paths[0]).equals(plan)


def test_sidecar_lines_are_read_by_ingest(tmp_path):
    """The sidecar the plan script writes is the format `slim data ingest` reads (settings by file name)."""
    from slimlib.data.ingest import _sidecar_table

    plan = make_plan("opt-2.7b", "h100-sxm-64gb", [242], [130, 520], batch_sizes=[8, 32, 128])
    lines = [",".join(SIDECAR_COLUMNS)] + [
        ",".join(str(r[c]) for c in SIDECAR_COLUMNS) for _, r in plan.iterrows()
    ]
    (tmp_path / "slim-runs.csv").write_text("\n".join(lines) + "\n")
    table = _sidecar_table(tmp_path, None, set(plan["file"]))
    first = plan.iloc[0]
    got = table[first["file"]]
    assert float(got["batch_size"]) == first["batch_size"] and str(got["model"]) == "opt-2.7b"


def test_cli_plan(tmp_path, capsys):
    rc = main(["plan", "--model", "llama-2-7b", "--gpu", "h100-sxm-64gb", "--input-len", "250",
               "--output-len", "130", "520", "--out", str(tmp_path / "p"), "--legacy-client"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "6 runs for llama-2-7b" in out
    legacy = (tmp_path / "p" / "run_plan.sh").read_text()
    assert "python benchmarks/benchmark_serving.py --backend vllm" in legacy
    # a legacy vLLM has no such flag (and caches no prefix by default): the server line must not carry it
    assert "vllm serve" in legacy and NO_PREFIX_CACHING not in legacy
    rc = main(["plan", "--model", "llama-2-7b", "--gpu", "h100-sxm-64gb", "--output-len", "5000", "--out",
               str(tmp_path / "q")])  # fmt: skip
    assert rc == 2 and "context" in capsys.readouterr().err
