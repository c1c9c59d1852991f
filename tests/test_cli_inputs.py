"""Bad values reach the user as one-line errors with plain numbers, before any work; `slim fit` reports progress."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid, synthesize
from tqdm import tqdm

from slimlib.cli import cmd_fit as fit_cli
from slimlib.cli.main import main
from slimlib.errors import DataError
from slimlib.model import PaperModel
from slimlib.model.base import PARAMS_FORMAT_VERSION
from slimlib.schema import validate_table

TRUTH = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")


@pytest.fixture()
def data_csv(tmp_path: Path) -> Path:
    path = tmp_path / "runs.csv"
    synthesize(TRUTH, grid()).to_csv(path, index=False)
    return path


@pytest.fixture()
def params_json(tmp_path: Path) -> Path:
    path = tmp_path / "params.json"
    TRUTH.to_json(path)
    return path


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "np.float64" not in err and "np.int64" not in err, err
    return err


def _exit_code(argv: list[str]) -> int:
    """Exit status of `slim argv`, whether argparse exits or the command returns."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_fit_rejects_a_fractional_batch_size(data_csv, tmp_path, capsys):
    df = pd.read_csv(data_csv).astype({"batch_size": float})
    df.loc[3, "batch_size"] = 6.5
    df.to_csv(data_csv, index=False)
    assert main(["fit", str(data_csv), "--out", str(tmp_path / "p.json"), "--quiet"]) == 2
    err = _error(capsys)
    assert f"{data_csv} line 5: field 'batch_size' is 6.5; it must be a whole number" in err
    assert not (tmp_path / "p.json").exists()


def test_predict_rejects_a_fractional_batch_size(params_json, tmp_path, capsys):
    table = grid().drop(columns=["gpu"]).assign(batch_size=lambda d: d["batch_size"].astype(float))
    table.loc[0, "batch_size"] = 6.5
    path = tmp_path / "grid.csv"
    table.to_csv(path, index=False)
    assert main(["predict", str(params_json), str(path)]) == 2
    assert "line 2: field 'batch_size' is 6.5; it must be a whole number" in _error(capsys)
    assert capsys.readouterr().out == ""


def test_whole_batch_sizes_written_as_floats_are_accepted(params_json, tmp_path, capsys):
    path = tmp_path / "grid.csv"
    grid().assign(batch_size=lambda d: d["batch_size"].astype(float)).to_csv(path, index=False)
    assert ",256.0," in path.read_text()
    assert main(["predict", str(params_json), str(path)]) == 0


def test_predict_missing_column_lists_the_prediction_columns(params_json, tmp_path, capsys):
    path = tmp_path / "grid.csv"
    grid().drop(columns=["output_len"]).to_csv(path, index=False)
    assert main(["predict", str(params_json), str(path)]) == 2
    err = _error(capsys)
    assert "lacks column(s) output_len" in err
    assert "model, batch_size, input_len, output_len" in err and "throughput_tok_s" not in err
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert main(["predict", str(params_json), str(empty)]) == 2
    err = _error(capsys)
    assert "is empty" in err and "throughput_tok_s" not in err


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--input-len", "0", "0 must be positive"),
        ("--output-len", "-3", "-3 must be positive"),
        ("--batch-sizes", "6.5", "6.5 is not a whole number"),
        ("--batch-sizes", "0", "0 must be a whole number >= 1"),
        ("--max-batch", "2.5", "2.5 is not a whole number"),
        ("--gpu-blocks", "nan", "nan is not a finite number"),
    ],
)
def test_advise_rejects_bad_numbers(params_json, capsys, option, value, needle):
    argv = ["advise", str(params_json), "--model", "opt-1.3b", "--input-len", "512", "--output-len", "128"]
    if option in argv:
        i = argv.index(option)
        argv[i + 1] = value
    else:
        argv += [option, value]
    assert _exit_code(argv) == 2
    err = _error(capsys)
    assert f"argument {option}: {needle}" in err
    assert capsys.readouterr().out == ""


def test_advise_explicit_batch_sizes(params_json, tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    argv = ["advise", str(params_json), "--model", "opt-1.3b", "--input-len", "512", "--output-len", "128"]
    assert main([*argv, "--batch-sizes", "64", "8", "16", "8", "--curve", str(curve)]) == 0
    assert pd.read_csv(curve)["batch_size"].tolist() == [8, 16, 64]
    assert "B_cap = " in capsys.readouterr().out
    assert _exit_code([*argv, "--batch-sizes", "8", "--max-batch", "64"]) == 2  # one or the other
    assert "not allowed with argument" in _error(capsys)


def test_plan_rejects_fractional_batch_sizes(tmp_path, capsys):
    argv = ["plan", "--model", "opt-1.3b", "--gpu", "h100-sxm-80gb", "--out", str(tmp_path / "plan")]
    assert _exit_code([*argv, "--batch-sizes", "8", "6.5", "32"]) == 2
    assert "argument --batch-sizes: 6.5 is not a whole number" in _error(capsys)
    assert not (tmp_path / "plan").exists()


def test_messages_print_plain_numbers_not_numpy_reprs():
    df = pd.DataFrame(
        {"model": ["opt-1.3b"] * 2, "gpu": ["h100"] * 2, "batch_size": [1, 2], "input_len": [8, 8],
         "output_len": [8, 8], "throughput_tok_s": [1.0, np.nan]},
        index=pd.Index(np.array([10, 11], dtype=np.int64)),
    )  # fmt: skip
    with pytest.raises(DataError) as info:
        validate_table(df)
    assert (
        str(info.value)
        == "row 11: field 'throughput_tok_s' is missing or not finite (empty or nan); measure it or remove the row"
    )
    with pytest.raises(DataError, match=r"row 10: field 'input_len' is 'abc', not a number"):
        validate_table(df.assign(input_len=["abc", 8]))


def test_fit_reports_its_stages_on_stderr(data_csv, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["fit", str(data_csv), "--out", str(out), "--variant", "paper", "--starts", "2"]) == 0
    captured = capsys.readouterr()
    # physical-validity warnings of the table (a preempting row) come first, one line each
    lines = [ln for ln in captured.err.splitlines() if not ln.startswith("slim: warning: ")]
    assert lines[0].startswith(f"read {len(grid())} rows from 1 file(s) in ")
    assert lines[1] == "fitting 'paper' from 3 starting points ..."
    # off a terminal (captured here) the starts are periodic log lines, not a bar
    assert [ln.split(" done")[0] for ln in lines[2:5]] == ["  start 1/3", "  start 2/3", "  start 3/3"]
    assert lines[5].startswith("fitted in ") and lines[5].endswith(" s")
    assert "read " not in captured.out  # progress never mixes with the results on stdout
    assert main(["fit", str(data_csv), "--out", str(out), "--variant", "paper", "--quiet"]) == 0
    assert not [
        ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(("read ", "fitting", "fitted"))
    ]


def test_fit_unknown_variant_and_negative_starts_are_refused(data_csv, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert _exit_code(["fit", str(data_csv), "--out", str(out), "--variant", "papr"]) == 2
    assert "invalid choice: 'papr'" in _error(capsys)
    assert _exit_code(["fit", str(data_csv), "--out", str(out), "--starts", "-1"]) == 2
    assert "must be a whole number >= 0" in _error(capsys)
    assert not out.exists()


def test_fit_progress_bar_follows_the_starting_points(data_csv, tmp_path, monkeypatch):
    """The model's `progress(done, total)` hook drives the bar (shown on a terminal; tqdm hides it otherwise)."""
    bars: list[tqdm] = []

    class Recorder(tqdm):  # type: ignore[type-arg]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **{**kwargs, "disable": False, "file": io.StringIO()})
            bars.append(self)

    monkeypatch.setattr(fit_cli, "tqdm", Recorder)
    out = tmp_path / "p.json"
    assert main(["fit", str(data_csv), "--out", str(out), "--variant", "paper", "--starts", "4"]) == 0
    assert len(bars) == 1 and bars[0].total == 5 and bars[0].n == 5


def test_predict_refuses_a_parameter_file_of_a_newer_format(params_json, tmp_path, capsys):
    d = json.loads(params_json.read_text())
    newer = PARAMS_FORMAT_VERSION + 1
    d["format_version"] = newer
    params_json.write_text(json.dumps(d))
    grid_csv = tmp_path / "grid.csv"
    grid().to_csv(grid_csv, index=False)
    assert main(["predict", str(params_json), str(grid_csv)]) == 2
    err = _error(capsys)
    assert "newer" in err and f"version {newer}" in err and f"to {PARAMS_FORMAT_VERSION}" in err
    assert len(err.strip().splitlines()) == 1 and capsys.readouterr().out == ""


def test_conflicting_repeats_are_named_by_row_even_with_a_repeated_index():
    base = grid().iloc[:3].assign(throughput_tok_s=[10.0, 20.0, 30.0])
    df = pd.concat([base, base.iloc[[0]].assign(throughput_tok_s=11.0)])  # index 0, 1, 2, 0
    with pytest.raises(DataError, match=r"different measurements in row 0 and row 0 "):
        validate_table(df)
    df.attrs["source"] = "runs.csv"
    with pytest.raises(DataError, match=r"runs.csv line 2 and runs.csv line 5 \(throughput_tok_s 10 vs 11\)"):
        validate_table(df)


def test_repeats_merge_only_within_one_configuration_and_a_lost_latency_is_a_conflict():
    from slimlib.schema import aggregate_repeats

    base = grid().iloc[:2].assign(throughput_tok_s=[10.0, 20.0])
    # the same lengths and batch under two clients (or two precisions) are two configurations: none merged
    two = pd.concat([base.assign(client="concurrency"), base.assign(client="static")], ignore_index=True)
    assert aggregate_repeats(validate_table(two))[1] == 0
    fp8 = pd.concat([base, base.assign(quantization="fp8")], ignore_index=True)
    assert aggregate_repeats(validate_table(fp8))[1] == 0
    # a repeat that has a TTFT and one that has none would lose it when merged: refused, naming both rows
    ttft = pd.concat([base.assign(mean_ttft_ms=[5.0, 6.0]), base.iloc[[0]]], ignore_index=True)
    with pytest.raises(DataError, match=r"row 0 and row 2 \(mean_ttft_ms 5 vs nan\)"):
        validate_table(ttft)
    same = pd.concat([base, base.iloc[[0]]], ignore_index=True)
    assert aggregate_repeats(validate_table(same))[1] == 1
