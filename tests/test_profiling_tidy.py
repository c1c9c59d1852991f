"""Tidy tables from a campaign folder: a small CPU campaign (needs torch) and an ncu counters folder (no torch)."""

import json
import shutil
from pathlib import Path

import pytest

from slimlib.errors import DataError
from slimlib.kit.counter_campaign import CPU_SPEC, Point, plan_campaign
from slimlib.kit.tidy import RUN_COLUMNS, build_profiling_tables, write_tables
from slimlib.registry.architectures import Architecture

FIX = Path(__file__).parent / "fixtures" / "profiling"
TINY = {
    "tiny-a": Architecture(name="tiny-a", hf_id="", n_layers=1, hidden_size=32, n_heads=4, n_kv_heads=2,
                           head_dim=8, ffn_size=48, ffn_kind="gated", vocab_size=64, n_params=10_000),
    "tiny-b": Architecture(name="tiny-b", hf_id="", n_layers=2, hidden_size=32, n_heads=4, n_kv_heads=4,
                           head_dim=8, ffn_size=64, ffn_kind="mlp", vocab_size=64, n_params=20_000),
}  # fmt: skip


def test_tables_from_a_cpu_campaign(tmp_path):
    pytest.importorskip("torch", reason="the profiling extra (torch) is not installed")
    from slimlib.kit.counter_campaign import run_campaign

    pts = [
        Point("curve", "tiny-a", 1, 4, 3),
        Point("curve", "tiny-a", 2, 4, 3),
        Point("kernels", "tiny-b", 2, 6, 4, "kernels"),
        Point("counters", "tiny-b", 2, 6, 4, "counters", "attention"),
    ]
    plan = plan_campaign(1e4, CPU_SPEC, pts, resolve=TINY.__getitem__)
    assert (plan["status"] == "planned").all()
    raw = tmp_path / "raw"
    m = run_campaign(plan, raw, device="cpu", resolve=TINY.__getitem__, command="test", log=lambda s: None)
    assert [p["status"] for p in m["points"]] == ["done", "done", "done", "skipped"]  # no ncu on the CPU
    assert "ncu" in m["points"][3]["ncu_argv"][0]
    manifest = json.loads((raw / "manifest.json").read_text())
    assert manifest["engine"] == "slimlib minimal PyTorch engine, not vLLM"
    assert manifest["status"] == "complete" and manifest["command"] == "test" and manifest["torch_version"]

    tables, used = build_profiling_tables(raw)
    assert set(tables) == {"kit-runs", "kit-kernels", "kit-counters"}
    assert {p.name for p in used} == {"manifest.json", "runs.csv", "kernels.csv"}
    runs = tables["kit-runs"]
    assert list(runs.columns) == RUN_COLUMNS and len(runs) == 3
    assert (runs["gpu"] == "cpu").all()
    tput = runs["batch_size"] * (runs["input_len"] + runs["output_len"]) / runs["e2e_s"]
    assert (runs["throughput_tok_s"] - tput).abs().max() < 1e-9 * tput.max()
    assert ((runs["prefill_s"] + runs["decode_s"] - runs["e2e_s"]).abs() < 1e-12).all()
    kv = 2 * 1 * runs["batch_size"] * (runs["input_len"] + runs["output_len"]) * 2 * 8 * 4 / 2**30  # GiB
    a = runs["model"] == "tiny-a"
    assert (runs.loc[a, "kv_cache_gib"] - kv[a]).abs().max() < 1e-15
    kern = tables["kit-kernels"]
    assert len(kern) == 4 and kern["share"].sum() == pytest.approx(1.0)
    assert kern.set_index("category").loc["attention", "share"] > 0
    assert (kern["profiled_steps"] == 4).all() and (kern["model"] == "tiny-b").all()
    assert tables["kit-counters"].empty

    # same raw folder -> byte-identical tables
    p1 = write_tables(tables, tmp_path / "t1")
    p2 = write_tables(build_profiling_tables(raw)[0], tmp_path / "t2")
    assert [p.read_bytes() for p in p1] == [p.read_bytes() for p in p2]


def test_counters_table_from_ncu_file(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(FIX / "ncu_details_handmade.csv", raw / "ncu_p.csv")
    point = {"point_id": "p", "kind": "counters", "status": "done", "file": "ncu_p.csv", "model": "mistral-7b",
             "batch_size": 64, "input_len": 512, "output_len": 256, "target": "attention"}  # fmt: skip
    (raw / "manifest.json").write_text(json.dumps({"gpu": "h200-sxm-141gb", "points": [point]}))
    tables, used = build_profiling_tables(raw)
    c = tables["kit-counters"]
    assert len(c) == 3 and list(c["launch"]) == [0, 1, 2]
    assert (c["target"] == "attention").all() and (c["gpu"] == "h200-sxm-141gb").all()
    assert c.loc[0, "dram_read_throughput"] == pytest.approx(3.32e12)
    assert tables["kit-runs"].empty and tables["kit-kernels"].empty
    assert [p.name for p in used] == ["manifest.json", "ncu_p.csv"]
    (raw / "ncu_p.csv").unlink()
    with pytest.raises(DataError, match="missing"):
        build_profiling_tables(raw)


def test_missing_or_bad_manifest(tmp_path):
    with pytest.raises(DataError, match="no manifest.json"):
        build_profiling_tables(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        build_profiling_tables(tmp_path)
