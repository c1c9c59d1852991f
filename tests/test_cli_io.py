"""slimlib.io, the one way the package writes files: temporary file beside the target, renamed into place."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.io import atomic_open, check_output_path, write_bytes, write_csv, write_text


def test_writes_replace_the_target_whole(tmp_path: Path):
    target = tmp_path / "out.txt"
    target.write_text("old content that is longer than the new one\n")
    write_text(target, "new\n")
    assert target.read_bytes() == b"new\n"
    write_bytes(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    write_csv(pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}), target)
    assert target.read_bytes() == b"a,b\n1,x\n2,y\n"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_an_error_midway_keeps_the_old_file_and_removes_the_temporary_one(tmp_path: Path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    for exc in (RuntimeError("disk full"), KeyboardInterrupt()):
        with pytest.raises(type(exc)), atomic_open(target) as fh:
            fh.write("partial")
            raise exc
        assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["out.txt"]


def test_a_new_file_gets_normal_permissions(tmp_path: Path):
    umask = os.umask(0o022)
    try:
        write_text(tmp_path / "new.txt", "x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o644  # not mkstemp's 0o600


def test_only_whole_file_modes():
    with pytest.raises(ValueError, match="mode"), atomic_open("x.txt", "a"):
        pass


def test_check_output_path(tmp_path: Path):
    data = tmp_path / "runs.csv"
    data.write_text("a\n")
    link = tmp_path / "link.csv"
    link.symlink_to(data)
    assert check_output_path(tmp_path / "new.json", inputs=(data,)) == tmp_path / "new.json"
    for path, needle in [
        (data, "is also an input"),
        (link, "is also an input"),
        (tmp_path, "is a directory"),
        (tmp_path / "no" / "x.json", "does not exist"),
    ]:
        with pytest.raises(DataError, match=needle):
            check_output_path(path, inputs=(data,))


def test_a_set_of_files_is_written_whole_or_not_at_all(tmp_path: Path, monkeypatch):
    """`write_files`: every file new, or (interrupted before the renames) every file as it was, no temporary left."""
    import slimlib.io as io_module
    from slimlib.io import csv_bytes, write_files

    a, b = tmp_path / "front.csv", tmp_path / "front.png"
    a.write_text("old csv\n")
    b.write_bytes(b"old png")
    real = io_module.check_interrupted
    calls = []

    def interrupted_after_the_first_file() -> None:
        calls.append(1)
        if len(calls) == 2:  # the first file's temporary is written: a signal arrives
            raise KeyboardInterrupt
        real()

    monkeypatch.setattr(io_module, "check_interrupted", interrupted_after_the_first_file)
    with pytest.raises(KeyboardInterrupt):
        write_files({a: b"new csv\n", b: b"new png"})
    assert a.read_text() == "old csv\n" and b.read_bytes() == b"old png"
    assert sorted(os.listdir(tmp_path)) == ["front.csv", "front.png"]
    monkeypatch.setattr(io_module, "check_interrupted", real)
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    write_files({a: csv_bytes(frame), b: b"new png"})
    assert a.read_bytes() == b"a,b\n1,x\n2,y\n" and b.read_bytes() == b"new png"
    assert sorted(os.listdir(tmp_path)) == ["front.csv", "front.png"]
