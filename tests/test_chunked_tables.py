"""Large tables a chunk at a time (memory): `slim predict` checks, predicts and writes in chunks of
`CHUNK_ROWS` rows, and every result, message and warning is what the whole table gives. Chunks are made tiny here
(`row_chunks`'s default patched) so a small table spans many of them."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import slimlib.schema
from slimlib.cli.main import main
from slimlib.errors import DataError, UnknownNameError
from slimlib.io import returning_freed_memory, write_table
from slimlib.model import PaperModel
from slimlib.model.features import model_features
from slimlib.model.validity import PreemptionWarning, check_table
from slimlib.schema import blank_line_numbers, read_csv_table, row_chunks, validate_table

PARAMS = {"eta_c": 0.45, "t_fixed": 0.2, "eta_m": 0.6, "B0": 3.0, "alpha": 2e-5, "gamma": 5e-7}
GPU = "h100-sxm-80gb"


@pytest.fixture()
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """Every `row_chunks` call without a size cuts 3-row chunks."""
    monkeypatch.setattr(slimlib.schema.row_chunks, "__defaults__", (3,))
    return 3


def _grid(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "model": rng.choice(["opt-125m", "opt-1.3b", "llama-2-7b"], n),
            "batch_size": rng.choice([1, 4, 16, 64], n),
            "input_len": rng.choice([32, 128, 512], n),
            "output_len": rng.choice([16, 64, 256], n),
        }
    )


def test_row_chunks_cover_the_table_and_name_rows_by_their_file_line(tmp_path: Path):
    path = tmp_path / "grid.csv"
    text = _grid(10).to_csv(index=False, lineterminator="\n").splitlines()
    text.insert(3, "")  # a blank line after data row 2
    text[9] = text[9].replace(text[9].split(",")[1], "0", 1)  # row 9 of the file (8th data row): batch_size 0
    path.write_text("\n".join(text) + "\n")
    df = read_csv_table(path, require_target=False)
    parts = list(row_chunks(df, 4))
    assert [len(p) for p in parts] == [4, 4, 2]
    assert pd.concat(parts).equals(df)
    with pytest.raises(
        DataError, match=r"grid\.csv line 10: field 'batch_size' is 0"
    ):  # line 10: after the blank
        for part in parts:
            validate_table(part, require_target=False, require_gpu=False)
    with pytest.raises(DataError, match=r"grid\.csv line 10: field 'batch_size' is 0"):
        validate_table(df, require_target=False, require_gpu=False)


def test_chunked_csv_and_parquet_equal_the_whole_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    df = _grid(11).assign(note=["plain"] * 10 + ["needs, quotes"])  # only the last chunk needs quoting
    extend = PaperModel.with_params(PARAMS, gpu=GPU).predict
    whole = {}
    for kind in ("csv", "parquet"):
        write_table(df, tmp_path / f"whole.{kind}", extend=extend)
        whole[kind] = (tmp_path / f"whole.{kind}").read_bytes()
    monkeypatch.setattr(slimlib.schema.row_chunks, "__defaults__", (3,))
    for kind in ("csv", "parquet"):
        write_table(df, tmp_path / f"chunked.{kind}", extend=extend)
    assert (tmp_path / "chunked.csv").read_bytes() == whole["csv"]
    assert '"needs, quotes"' in whole["csv"].decode()
    expected = pd.concat([df, extend(df)], axis=1)
    assert pd.read_parquet(tmp_path / "chunked.parquet").equals(pd.read_parquet(tmp_path / "whole.parquet"))
    got = pd.read_parquet(tmp_path / "chunked.parquet")
    assert list(got.columns) == list(expected.columns)
    np.testing.assert_array_equal(got["pred_throughput_tok_s"], expected["pred_throughput_tok_s"])


def test_extend_must_return_one_numeric_row_per_row(tmp_path: Path):
    df = _grid(4)
    with pytest.raises(ValueError, match="not numeric"):
        write_table(df, tmp_path / "a.csv", extend=lambda part: pd.DataFrame({"x": ["a"] * len(part)}))
    with pytest.raises(ValueError, match="returned 1 rows"):
        write_table(df, tmp_path / "b.csv", extend=lambda part: pd.DataFrame({"x": [1.0]}))
    assert not list(tmp_path.iterdir())  # nothing written, no temporary file left


def test_one_preemption_warning_for_all_chunks(tiny_chunks: int):
    # llama-2-7b on one H100: 512 x 4096 tokens preempts; 5 such rows spread over several chunks
    df = pd.DataFrame(
        {
            "model": ["opt-125m", "llama-2-7b"] * 5,
            "batch_size": [1, 512] * 5,
            "input_len": [64, 2048] * 5,
            "output_len": [64, 2048] * 5,
        }
    )
    df.attrs["source"] = "grid.csv"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_table(df, GPU)
    messages = [str(w.message) for w in caught if issubclass(w.category, PreemptionWarning)]
    assert len(messages) == 1, messages
    assert messages[0].startswith("grid.csv line 3: batch_size 512") and "(5 row(s) like it)" in messages[0]


def test_features_of_a_table_are_those_of_each_row(tiny_chunks: int):
    df = _grid(30, seed=3).assign(
        kv_cache_dtype=[" FP8 ", "auto", None] * 10, quantization=[None, "fp8", "FP8 "] * 10
    )
    whole = model_features(df)
    for i in range(len(df)):
        one = model_features(df.iloc[[i]])
        for name, values in whole.items():
            np.testing.assert_array_equal(values[i], one[name][0], err_msg=f"{i} {name}")  # NaN: no GPU
    with pytest.raises(UnknownNameError, match="row 4: unknown model .no-such-model."):
        model_features(df.assign(model=["opt-125m"] * 4 + ["no-such-model"] * 26))


def test_blank_lines_and_encoding_found_across_read_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(slimlib.schema, "TEXT_BLOCK_BYTES", 5)  # blocks end inside lines and characters
    data = b"model,batch_size,input_len,output_len\n\nopt-125m,1,8,8\r\n\r\n\nopt-125m,2,8,8\n\n"
    path = tmp_path / "grid.csv"
    path.write_bytes(data)
    df = read_csv_table(path, require_target=False)
    assert df.attrs["blank_lines"] == blank_line_numbers(data) == [2, 4, 5, 7]
    bad = tmp_path / "bad.csv"
    bad.write_bytes(
        b"model,batch_size\nop\xc3\xa9t-125m,1\nopt\xff,2\n"
    )  # a valid 2-byte character, then a bad byte
    with pytest.raises(DataError, match=r"bad\.csv: not a readable CSV table \(not UTF-8 text at byte 33\)"):
        read_csv_table(bad)
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"\n  \n\n")
    with pytest.raises(DataError, match="the file is empty"):
        read_csv_table(empty)


def test_predict_over_many_chunks_names_the_bad_row_and_keeps_the_previous_output(
    tmp_path: Path, tiny_chunks: int, capsys: pytest.CaptureFixture[str]
):
    params = tmp_path / "params.json"
    PaperModel.with_params(PARAMS, gpu=GPU).to_json(params)
    grid = _grid(20)
    good, bad = tmp_path / "grid.csv", tmp_path / "bad.csv"
    grid.to_csv(good, index=False)
    grid.assign(input_len=[128] * 16 + [-5] + [128] * 3).to_csv(bad, index=False)
    out = tmp_path / "pred.csv"
    assert main(["predict", str(params), str(good), "--out", str(out)]) == 0
    written = out.read_bytes()
    expected = pd.concat([grid, PaperModel.with_params(PARAMS, gpu=GPU).predict(grid)], axis=1)
    pd.testing.assert_frame_equal(pd.read_csv(out), expected, check_dtype=False)
    capsys.readouterr()
    assert main(["predict", str(params), str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"slim predict: error: {bad} line 18: field 'input_len' is -5; it must be positive"
    ), err
    assert out.read_bytes() == written


def test_reading_returns_freed_memory_to_the_system():
    with returning_freed_memory():
        assert pa.default_memory_pool().backend_name == "system"


def test_predict_runs_its_check_on_the_validated_table_first():
    model = PaperModel.with_params(PARAMS, gpu=GPU)
    seen = []
    pred = model.predict(_grid(5), check=lambda data: seen.append(data["batch_size"].dtype))
    assert seen == [np.dtype(float)] and len(pred) == 5

    def refuse(data: pd.DataFrame) -> None:
        raise DataError("refused")

    with pytest.raises(DataError, match="refused"):
        model.predict(_grid(5), check=refuse)


def test_slim_predict_warns_once_for_preemption_over_all_chunks(tmp_path: Path, tiny_chunks: int):
    params = tmp_path / "params.json"
    PaperModel.with_params(PARAMS, gpu=GPU).to_json(params)
    rows = tmp_path / "grid.csv"
    pd.DataFrame(
        {
            "model": ["opt-125m", "llama-2-7b"] * 5,
            "batch_size": [1, 512] * 5,
            "input_len": [64, 2048] * 5,
            "output_len": [64, 2048] * 5,
        }
    ).to_csv(rows, index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["predict", str(params), str(rows), "--out", str(tmp_path / "pred.csv")]) == 0
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "grid.csv line 3: batch_size 512" in messages[0] and "(5 row(s) like it)" in messages[0]
    assert len(pd.read_csv(tmp_path / "pred.csv")) == 10
