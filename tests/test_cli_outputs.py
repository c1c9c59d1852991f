"""Files the `slim` command writes: atomic replacement, inputs never overwritten, bad output paths refused early."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid, synthesize

import slimlib.io
from slimlib.cli.main import main
from slimlib.model import PaperModel

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture()
def data_csv(tmp_path: Path) -> Path:
    truth = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    path = tmp_path / "runs.csv"
    synthesize(truth, grid()).to_csv(path, index=False)
    return path


@pytest.fixture()
def params_json(tmp_path: Path) -> Path:
    path = tmp_path / "params.json"
    PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb").to_json(path)
    return path


@pytest.fixture()
def grid_csv(tmp_path: Path, data_csv: Path) -> Path:
    path = tmp_path / "grid.csv"
    pd.read_csv(data_csv).drop(columns=["throughput_tok_s", "e2e_s"]).to_csv(path, index=False)
    return path


def _one_line_error(capsys: pytest.CaptureFixture[str], command: str, needle: str) -> None:
    err = capsys.readouterr().err
    assert err.startswith(f"slim {command}: error: "), err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def _interrupting_to_csv(monkeypatch: pytest.MonkeyPatch) -> None:
    """DataFrame.to_csv writes part of the table, then the user presses Ctrl-C."""

    def to_csv(self: pd.DataFrame, path_or_buf: object = None, **kwargs: object) -> None:
        assert hasattr(path_or_buf, "write"), (
            "the CLI must write through slimlib.io (a temporary file handle)"
        )
        path_or_buf.write("model,gpu,batch_size\nopt-125m,h100")  # type: ignore[union-attr]
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)


def _interrupting_arrow_csv(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Arrow CSV writer (`slim predict`'s) writes the first chunk of the table (one row each), then the user
    presses Ctrl-C while the second is formatted."""
    chunks = slimlib.io.row_chunks
    csv_bytes = slimlib.io._csv_bytes
    calls = []

    def interrupting(table: object, options: object) -> bytes:
        calls.append(table)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return csv_bytes(table, options)  # type: ignore[arg-type]

    monkeypatch.setattr(slimlib.io, "row_chunks", lambda df: chunks(df, 1))
    monkeypatch.setattr(slimlib.io, "_csv_bytes", interrupting)


def test_interrupted_predict_keeps_the_previous_output_and_leaves_no_partial_file(
    params_json, grid_csv, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "pred.csv"
    out.write_text("previous predictions\n")
    before = sorted(os.listdir(tmp_path))
    _interrupting_arrow_csv(monkeypatch)
    assert main(["predict", str(params_json), str(grid_csv), "--out", str(out)]) == 130
    assert out.read_text() == "previous predictions\n"
    assert sorted(os.listdir(tmp_path)) == before  # no temporary or partial file left
    assert "interrupted" in capsys.readouterr().err


def test_interrupted_advise_curve_keeps_the_previous_curve(params_json, tmp_path, monkeypatch):
    curve = tmp_path / "curve.csv"
    curve.write_text("old curve\n")
    before = sorted(os.listdir(tmp_path))
    _interrupting_to_csv(monkeypatch)
    argv = ["advise", str(params_json), "--model", "opt-1.3b", "--input-len", "512", "--output-len", "128"]
    assert main([*argv, "--curve", str(curve)]) == 130
    assert curve.read_text() == "old curve\n" and sorted(os.listdir(tmp_path)) == before


def test_interrupted_fit_keeps_the_previous_parameter_file(data_csv, tmp_path, monkeypatch):
    out = tmp_path / "p.json"
    out.write_text('{"old": true}\n')

    def fsync(fd: int) -> None:  # the whole JSON is in the temporary file; Ctrl-C before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(slimlib.io.os, "fsync", fsync)
    assert main(["fit", str(data_csv), "--out", str(out), "--variant", "paper", "--quiet"]) == 130
    assert json.loads(out.read_text()) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "runs.csv"]


def test_existing_output_is_replaced_whole(params_json, grid_csv, tmp_path):
    out = tmp_path / "pred.csv"
    out.write_text("x\n" * 10_000)  # longer than the new content: nothing of it may remain
    assert main(["predict", str(params_json), str(grid_csv), "--out", str(out)]) == 0
    pred = pd.read_csv(out)
    assert len(pred) == len(pd.read_csv(grid_csv)) and "pred_throughput_tok_s" in pred.columns


@pytest.mark.parametrize("which", ["data", "params"])
def test_predict_out_equal_to_an_input_is_refused(params_json, grid_csv, capsys, which):
    target = grid_csv if which == "data" else params_json
    before = target.read_bytes()
    assert main(["predict", str(params_json), str(grid_csv), "--out", str(target)]) == 2
    _one_line_error(capsys, "predict", "is also an input")
    assert target.read_bytes() == before


def test_fit_out_equal_to_the_measurements_is_refused(data_csv, tmp_path, capsys):
    before = data_csv.read_bytes()
    other = tmp_path / "link.csv"
    other.symlink_to(data_csv)
    for out in (data_csv, other):
        assert main(["fit", str(data_csv), "--out", str(out)]) == 2
        _one_line_error(capsys, "fit", "is also an input")
    assert data_csv.read_bytes() == before


def test_bad_output_paths_fail_before_fitting(data_csv, tmp_path, monkeypatch, capsys):
    def no_fit(self, df):  # pragma: no cover - reaching it is the failure
        raise AssertionError("the output path must be checked before fitting")

    monkeypatch.setattr(PaperModel, "fit", no_fit)
    assert (
        main(["fit", str(data_csv), "--variant", "paper", "--out", str(tmp_path / "missing" / "p.json")]) == 2
    )
    _one_line_error(capsys, "fit", "folder")
    assert main(["fit", str(data_csv), "--variant", "paper", "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, "fit", "is a directory")


def _deny_access(monkeypatch: pytest.MonkeyPatch, denied: Path) -> None:
    """`os.access` says no for `denied` (permission bits do not stop root, who runs some CI jobs)."""
    real = os.access

    def access(path: object, mode: int, **kwargs: object) -> bool:
        return False if Path(str(path)) == denied else real(path, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)


def test_unwritable_output_folder_is_a_one_line_error(params_json, grid_csv, tmp_path, monkeypatch, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    _deny_access(monkeypatch, locked)
    assert main(["predict", str(params_json), str(grid_csv), "--out", str(locked / "p.csv")]) == 2
    _one_line_error(capsys, "predict", "not writable")
    assert not any(locked.iterdir())


def test_advise_curve_into_a_missing_folder_fails_before_advising(params_json, tmp_path, capsys):
    argv = ["advise", str(params_json), "--model", "opt-1.3b", "--input-len", "512", "--output-len", "128"]
    assert main([*argv, "--curve", str(tmp_path / "nodir" / "curve.csv")]) == 2
    _one_line_error(capsys, "advise", "does not exist")
    assert capsys.readouterr().out == ""  # nothing advised


@pytest.mark.parametrize("command", ["predict", "advise"])
def test_unreadable_or_non_utf8_params_file_is_a_one_line_error(
    grid_csv, tmp_path, monkeypatch, capsys, command
):
    tail = (
        [str(grid_csv)]
        if command == "predict"
        else ["--model", "opt-1.3b", "--input-len", "5", "--output-len", "5"]
    )
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{\x00")
    assert main([command, str(binary), *tail]) == 2
    _one_line_error(capsys, command, "not UTF-8")
    assert main([command, str(tmp_path), *tail]) == 2
    _one_line_error(capsys, command, "is a directory")
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    _deny_access(monkeypatch, secret)
    assert main([command, str(secret), *tail]) == 2
    _one_line_error(capsys, command, "not readable")


def test_ingest_out_is_written_atomically(tmp_path, monkeypatch, capsys):
    runs = FIXTURES / "ingest" / "runs"
    out = tmp_path / "runs.csv"
    assert main(["data", "ingest", str(runs), "--gpu", "h100-sxm-80gb", "--out", str(out)]) == 0
    first = out.read_bytes()
    assert len(pd.read_csv(out)) == 3
    _interrupting_to_csv(monkeypatch)
    assert main(["data", "ingest", str(runs), "--gpu", "h100-sxm-80gb", "--out", str(out)]) == 130
    assert out.read_bytes() == first and sorted(os.listdir(tmp_path)) == ["runs.csv"]


def test_help_documents_output_replacement(capsys):
    for cmd in (["fit"], ["predict"], ["advise"], ["plan"], ["evaluate"], ["data", "ingest"], []):
        with pytest.raises(SystemExit):
            main([*cmd, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert "replaced atomically" in out and "an input file is never overwritten" in out, cmd


@pytest.mark.parametrize(
    ("argv", "work"),
    [
        (["evaluate", "--out", "{missing}/mape.csv"], "slimlib.cli.cmd_evaluate.evaluate"),
        (["evaluate", "--out", "{tmp}"], "slimlib.cli.cmd_evaluate.evaluate"),
        (
            ["data", "ingest", str(FIXTURES / "ingest" / "runs"), "--out", "{missing}/r.csv"],
            "slimlib.cli.cmd_data.collect",
        ),
        (
            ["plan", "--model", "opt-1.3b", "--gpu", "h100-sxm-80gb", "--out", "{file}"],
            "slimlib.cli.cmd_advise.make_plan",
        ),
        (["profile", "tidy", "{tmp}", "--out", "{file}"], "slimlib.cli.cmd_profile.build_profiling_tables"),
        (
            ["profile", "tidy", "{tmp}", "--out", "{missing}/sub/tables"],
            "slimlib.cli.cmd_profile.build_profiling_tables",
        ),
    ],
)
def test_output_paths_are_checked_before_any_work(tmp_path, monkeypatch, capsys, argv, work):
    def no_work(*args: object, **kwargs: object) -> None:  # pragma: no cover - reaching it is the failure
        raise AssertionError("the output path must be checked first")

    monkeypatch.setattr(work, no_work)
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("x")
    fill = {"missing": str(tmp_path / "missing"), "tmp": str(tmp_path), "file": str(a_file)}
    assert main([arg.format(**fill) for arg in argv]) == 2
    _one_line_error(capsys, argv[0], "--out")
