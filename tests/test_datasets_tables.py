"""Committed tables: byte-identical rebuild, loader dtypes, fit-table helper, CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_paths import REPO, SHARED

import slimlib.data as ds
from slimlib.cli.main import main
from slimlib.data.build import build_all
from slimlib.errors import DataError, UnknownNameError

DATA_ROOT = SHARED / "data"
FIX = Path(__file__).parent / "fixtures" / "memgap" / "mirror"


@pytest.mark.skipif(
    not (DATA_ROOT / "vllm-batching-memory-gap").is_dir(), reason=f"raw mirror not found at {DATA_ROOT}"
)
def test_rebuild_is_byte_identical_to_committed(tmp_path: Path) -> None:
    assert main(["data", "build", "--raw", str(DATA_ROOT), "--out", str(tmp_path)]) == 0
    built = sorted(p.name for p in tmp_path.iterdir())
    committed = REPO / "data"
    assert built == sorted(p.name for p in committed.iterdir() if p.suffix in (".csv", ".md"))
    for name in built:
        assert (tmp_path / name).read_bytes() == (committed / name).read_bytes(), name


def test_load_committed_tables_with_schema_dtypes() -> None:
    on = ds.load("memgap-online")
    assert list(on.columns) == list(ds.SCHEMA["memgap-online"][1])
    assert str(on["batch_size"].dtype) == "Int64" and str(on["preempted"].dtype) == "boolean"
    assert str(on["throughput_tok_s"].dtype) == "float64" and str(on["model"].dtype) == "string"
    ex = ds.load("memgap-exclusions")
    assert set(ex["reason"]) >= {"port_bind_failure", "profiler_inflated_timing", "preemption"}


def test_load_unknown_name_lists_close_matches() -> None:
    with pytest.raises(UnknownNameError, match="memgap-online"):
        ds.load("memgap-onlin")


def test_load_fit_table_columns_and_filters() -> None:
    fit = ds.load_fit_table("background")
    assert list(fit.columns) == ["model", "gpu", "batch_size", "input_len", "output_len", "throughput_tok_s"]
    on = ds.load("memgap-online")
    bg = on[(on["family"] == "background") & ~on["preempted"].fillna(False)]
    assert len(fit) == len(bg) > 0
    off = ds.load_fit_table("all", source="offline")
    assert "e2e_s" in off.columns and len(off) == int(ds.load("memgap-offline")["timing_valid"].sum() - (
        ds.load("memgap-offline")["timing_valid"] & ds.load("memgap-offline")["preempted"]).sum())  # fmt: skip
    with pytest.raises(UnknownNameError):
        ds.load_fit_table("nope")


def test_slim_data_dir_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_all(FIX, tmp_path)
    monkeypatch.setenv("SLIM_DATA_DIR", str(tmp_path))
    assert len(ds.load("memgap-online")) == 1
    (tmp_path / "memgap-offline.csv").unlink()
    with pytest.raises(DataError, match="slim data build"):
        ds.load("memgap-offline")


def test_fixture_build_deterministic_and_manifest(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    build_all(FIX, a)
    build_all(FIX, b)
    for f in sorted(a.iterdir()):
        assert f.read_bytes() == (b / f.name).read_bytes(), f.name
    manifest = (a / "raw_manifest.csv").read_text().splitlines()
    assert manifest[0] == "path,bytes,sha256"
    assert all(line.startswith("mirror/") for line in manifest[1:])  # relative paths
    assert str(tmp_path) not in (a / "README.md").read_text()


def test_cli_build_bad_raw_dir_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "raw").mkdir()  # an empty raw root (the output may not lie inside an input folder)
    assert main(["data", "build", "--raw", str(tmp_path / "raw"), "--out", str(tmp_path / "o")]) == 2
    assert "no vllm-batching-memory-gap mirror" in capsys.readouterr().err
