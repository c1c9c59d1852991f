"""GPU kit -> data layer -> notebook 08: `slim data build --kit`, kit tables' loaders, and the notebook on them.

A tiny CPU campaign gives real (CPU) timings and kernel shares; Nsight Compute counters cannot come from a CPU, so
the hand-made ncu fixture stands in for them here, in a temporary folder only (never in data/).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from shared_paths import REPO

import slimlib.data as ds
from slimlib.cli.main import main
from slimlib.data.build import build_all
from slimlib.errors import DataUnavailableError, UnknownNameError
from slimlib.registry.architectures import Architecture

MIRROR_FIX = Path(__file__).parent / "fixtures" / "memgap" / "mirror"
NCU_FIX = Path(__file__).parent / "fixtures" / "profiling" / "ncu_details_handmade.csv"
KIT_TABLES = ["kit-campaigns", "kit-counters", "kit-kernels", "kit-runs"]
TINY = {
    "tiny-gqa": Architecture(name="tiny-gqa", hf_id="", n_layers=2, hidden_size=32, n_heads=4, n_kv_heads=2,
                             head_dim=8, ffn_size=64, ffn_kind="gated", vocab_size=64, n_params=20_000),
}  # fmt: skip
COUNTER_POINTS = [(16, 512, 256, "attention"), (64, 512, 256, "attention"), (64, 1024, 256, "attention"),
                  (16, 512, 256, "step"), (64, 512, 256, "step")]  # fmt: skip


@pytest.fixture(scope="module")
def kit_dirs(tmp_path_factory) -> list[Path]:
    """A tiny CPU campaign (input-length sweep + two kernel profiles) and a hand-made ncu folder."""
    pytest.importorskip("torch", reason="the profiling extra (torch) is not installed")
    from slimlib.kit.counter_campaign import CPU_SPEC, Point, plan_campaign, run_campaign

    root = tmp_path_factory.mktemp("kit")
    pts = [Point("input-length-transfer", "tiny-gqa", 2, il, 4) for il in (4, 8, 16)]
    pts += [Point("kernel-figures", "tiny-gqa", b, 16, 8, "kernels") for b in (1, 4)]
    plan = plan_campaign(1e4, CPU_SPEC, pts, resolve=TINY.__getitem__)
    cpu = root / "cpu-tiny"
    run_campaign(
        plan, cpu, device="cpu", resolve=TINY.__getitem__, command="pytest tiny campaign", log=lambda s: None
    )
    ncu = root / "handmade-ncu"
    ncu.mkdir()
    shutil.copy(NCU_FIX, ncu / "ncu_handmade.csv")
    points = [{"point_id": f"mistral-7b_b{b}_il{il}_ol{ol}_counters-{t}", "kind": "counters", "status": "done",
               "file": "ncu_handmade.csv", "model": "mistral-7b", "batch_size": b, "input_len": il,
               "output_len": ol, "target": t} for b, il, ol, t in COUNTER_POINTS]  # fmt: skip
    manifest = {"engine": "hand-made ncu fixture, not a measurement", "gpu": "h200-sxm-141gb", "device": "cuda",
                "gpu_name": "H200", "command": "tests/test_kit_integration.py", "status": "complete",
                "points": points}  # fmt: skip
    (ncu / "manifest.json").write_text(json.dumps(manifest))
    return [cpu, ncu]


@pytest.fixture(scope="module")
def kit_data(kit_dirs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data")
    assert (
        main(["data", "build", "--raw", str(MIRROR_FIX), "--out", str(out), "--kit", *map(str, kit_dirs)])
        == 0
    )
    return out


def test_build_without_kit_unchanged_by_kit_support(tmp_path: Path, kit_data: Path) -> None:
    plain = tmp_path / "plain"
    build_all(MIRROR_FIX, plain)
    assert not any(p.name.startswith("kit-") for p in plain.iterdir())
    for f in sorted(plain.glob("memgap-*.csv")):  # the mirror's tables do not depend on --kit
        assert f.read_bytes() == (kit_data / f.name).read_bytes(), f.name
    # the full build against the committed data/: tests/test_datasets_tables.py (one full build per test run)


def test_build_with_kit_tables_manifest_readme(kit_data: Path, kit_dirs, tmp_path: Path) -> None:
    for name in KIT_TABLES:
        assert ds.available(name, kit_data), name
        df = ds.load(name, kit_data)
        assert list(df.columns) == list(ds.SCHEMA[name][1])
    runs = ds.load("kit-runs", kit_data)
    assert len(runs) == 5 and set(runs["campaign"]) == {"cpu-tiny"} and (runs["device"] == "cpu").all()
    assert str(runs["batch_size"].dtype) == "Int64" and str(runs["cuda_graphs"].dtype) == "boolean"
    tput = runs["batch_size"] * (runs["input_len"] + runs["output_len"]) / runs["e2e_s"]
    assert ((runs["throughput_tok_s"] - tput).abs() <= 1e-8 * tput).all()
    kern = ds.load("kit-kernels", kit_data)
    assert len(kern) == 8 and kern.groupby("batch_size")["share"].sum().round(9).eq(1).all()
    counters = ds.load("kit-counters", kit_data)
    assert len(counters) == 3 * len(COUNTER_POINTS) and set(counters["campaign"]) == {"handmade-ncu"}
    camp = ds.load("kit-campaigns", kit_data).set_index("campaign")
    assert camp.loc["cpu-tiny", "n_done"] == 5 and camp.loc["cpu-tiny", "command"] == "pytest tiny campaign"
    assert camp.loc["cpu-tiny", "torch_version"] and camp.loc["handmade-ncu", "gpu"] == "h200-sxm-141gb"

    manifest = ds.load("raw-manifest", kit_data).set_index("path")
    assert manifest.index.is_unique
    kit_rows = manifest[manifest.index.str.startswith(("cpu-tiny/", "handmade-ncu/"))]
    assert sorted(kit_rows.index) == ["cpu-tiny/kernels.csv", "cpu-tiny/manifest.json", "cpu-tiny/runs.csv",
                                      "handmade-ncu/manifest.json", "handmade-ncu/ncu_handmade.csv"]  # fmt: skip
    ncu_file = kit_dirs[1] / "ncu_handmade.csv"
    assert (
        manifest.loc["handmade-ncu/ncu_handmade.csv", "sha256"]
        == hashlib.sha256(ncu_file.read_bytes()).hexdigest()
    )

    readme = (kit_data / "README.md").read_text()
    assert (
        "not vLLM" in readme and "pytest tiny campaign" in readme and "## GPU characterization kit" in readme
    )
    assert str(kit_dirs[0].parent) not in readme  # no absolute paths

    again = tmp_path / "again"
    build_all(MIRROR_FIX, again, kit=list(reversed(kit_dirs)))  # order of --kit folders does not matter
    for f in sorted(kit_data.iterdir()):
        assert f.read_bytes() == (again / f.name).read_bytes(), f.name


def test_kit_fit_table_for_the_input_length_switch(kit_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLIM_DATA_DIR", str(kit_data))
    assert ds.available("kit-runs")
    fit = ds.load_fit_table("input-length-transfer", source="kit")
    assert list(fit.columns) == ["model", "gpu", "batch_size", "input_len", "output_len", "throughput_tok_s",
                                 "e2e_s"]  # fmt: skip
    assert sorted(fit["input_len"]) == [4.0, 8.0, 16.0] and str(fit["batch_size"].dtype) == "float64"
    assert len(ds.load_fit_table("all", source="kit")) == 5
    with pytest.raises(UnknownNameError, match="input-length-transfer"):
        ds.load_fit_table("input-length", source="kit")


def test_missing_kit_tables_say_how_to_produce_them(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    build_all(MIRROR_FIX, tmp_path)
    assert ds.available("memgap-online", tmp_path)
    for name in KIT_TABLES:
        assert not ds.available(name, tmp_path)
    with pytest.raises(DataUnavailableError, match=r"slim profile campaign.*slim data build .*--kit"):
        ds.load("kit-runs", tmp_path)
    with pytest.raises(UnknownNameError, match="kit-runs"):
        ds.available("kit-run")
    assert main(["data", "build", "--raw", str(MIRROR_FIX), "--out", str(tmp_path / "o"),
                 "--kit", str(tmp_path / "nope")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "no manifest.json" in err and len(err.strip().splitlines()) == 1


def _run_08(data: Path, out: Path) -> Path:
    pytest.importorskip("papermill")
    from slimlib.experiments.outputs.runner import run_notebooks

    figures = out / "figures"
    run_notebooks(REPO / "notebooks", build_dir=out / "build", figures_dir=figures, only=["08"],
                  parameters={"quick": True, "kit_data_dir": str(data)}, progress=False)  # fmt: skip
    return figures


def test_notebook_08_without_kit_data_writes_nothing_and_says_so(tmp_path: Path) -> None:
    data = tmp_path / "data"
    build_all(MIRROR_FIX, data)
    figures = _run_08(data, tmp_path)
    assert list(figures.iterdir()) == []
    executed = (tmp_path / "build" / "08_kernel_counters.ipynb").read_text()
    assert "No GPU-kit measurements have been collected yet" in executed and "slim data build" in executed


def test_notebook_08_on_kit_tables(kit_data: Path, tmp_path: Path) -> None:
    figures = _run_08(kit_data, tmp_path)
    stems = ["fig04_kit_decode_counters", "fig05_kit_kernel_shares", "fig06_kit_attention_roofline",
             "fig07_kit_cache_hit_rates", "fig08_kit_stalls_occupancy"]  # fmt: skip
    tables = ["fig04_kit_decode_counters", "fig05_kit_kernel_shares", "table01_kit_attention_roofline",
              "fig07_fig08_kit_attention_memory"]  # fmt: skip
    for name in [f"{s}.{e}" for s in stems for e in ("pdf", "png")] + [f"{t}.csv" for t in tables]:
        assert (figures / name).is_file() and (figures / name).stat().st_size > 0, name
    executed = (tmp_path / "build" / "08_kernel_counters.ipynb").read_text()
    assert "CPU, minimal PyTorch engine" in executed  # figures say what measured them
