"""The cross-validation's fold cache and its worker processes: a rerun reads what is unchanged, never an entry it
cannot trust, and any number of workers gives the serial loop's numbers."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from slimlib.experiments.accuracy import extrapolation as X
from slimlib.experiments.accuracy import fit_cache as C
from slimlib.experiments.accuracy.extrapolation import run_extrapolation_cv
from slimlib.experiments.accuracy.extrapolation_folds import build_axis_folds
from slimlib.experiments.workers import fork_map


@pytest.fixture(scope="module")
def small_axes():
    """Two cells of the measured engine campaign: few folds, quick fits."""
    return [a for a in build_axis_folds(datasets=["engine-cpu"]) if a.axis in ("input", "output")]


def test_fork_map_gives_the_serial_loops_values_in_order():
    task = lambda i: {"i": i, "sq": [i * i, float(i) / 3]}  # noqa: E731
    serial = fork_map(task, 23, jobs=1)
    assert fork_map(task, 23, jobs=2) == serial == [json.loads(json.dumps(task(i))) for i in range(23)]
    assert fork_map(task, 0, jobs=2) == []


def test_workers_give_the_serial_predictions(small_axes):
    one = run_extrapolation_cv(["paper", "slim"], axes=small_axes, n_starts=0, jobs=1)
    two = run_extrapolation_cv(["paper", "slim"], axes=small_axes, n_starts=0, jobs=2)
    pd.testing.assert_frame_equal(one.predictions, two.predictions)
    pd.testing.assert_frame_equal(one.warnings, two.warnings)


def test_a_rerun_reads_the_cache_and_recomputes_what_it_cannot_trust(small_axes, tmp_path, monkeypatch):
    first = run_extrapolation_cv(["slim"], axes=small_axes, n_starts=0, jobs=1, cache_dir=tmp_path)
    entries = sorted(tmp_path.glob("*.json"))
    assert len(entries) == sum(len(a.folds) for a in small_axes)
    calls = []
    real = X._fold_result

    def counted(*args, **kwargs):
        calls.append(args[2].label)
        return real(*args, **kwargs)

    monkeypatch.setattr(X, "_fold_result", counted)
    again = run_extrapolation_cv(["slim"], axes=small_axes, n_starts=0, jobs=1, cache_dir=tmp_path)
    assert calls == []  # nothing changed: every fold read
    pd.testing.assert_frame_equal(first.predictions, again.predictions)
    # a truncated entry, one of another format and one holding another key are recomputed, and rewritten
    entries[0].write_text(entries[0].read_text()[:50])
    doc = json.loads(entries[1].read_text())
    entries[1].write_text(json.dumps({**doc, "format": C.CACHE_FORMAT + 1}))
    doc = json.loads(entries[2].read_text())
    entries[2].write_text(json.dumps({**doc, "key": "0" * 64}))
    third = run_extrapolation_cv(["slim"], axes=small_axes, n_starts=0, jobs=1, cache_dir=tmp_path)
    assert len(calls) == 3
    pd.testing.assert_frame_equal(first.predictions, third.predictions)
    assert all(C.read_entry(tmp_path, e.stem) is not None for e in entries)
    # other settings are other entries
    run_extrapolation_cv(["slim"], axes=small_axes, n_starts=1, jobs=1, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 2 * len(entries)


def test_the_key_changes_with_the_inputs_and_the_code(small_axes, monkeypatch):
    fold = small_axes[0].folds[0]
    key = C.entry_key("slim", {"n_starts": 0}, fold.train, fold.test)
    assert key == C.entry_key("slim", {"n_starts": 0}, fold.train, fold.test)
    changed = fold.train.assign(throughput_tok_s=fold.train["throughput_tok_s"] * (1 + 1e-12))
    assert C.entry_key("slim", {"n_starts": 0}, changed, fold.test) != key
    assert C.entry_key("paper", {"n_starts": 0}, fold.train, fold.test) != key
    with monkeypatch.context() as m:
        m.setenv("OPENBLAS_CORETYPE", "another-core-type")
        assert C.entry_key("slim", {"n_starts": 0}, fold.train, fold.test) != key
    monkeypatch.setattr(C, "code_fingerprint", lambda: "another version")
    assert C.entry_key("slim", {"n_starts": 0}, fold.train, fold.test) != key


def test_slim_jobs_must_be_a_number(monkeypatch):
    from slimlib.errors import DataError
    from slimlib.experiments.workers import default_jobs

    monkeypatch.setenv("SLIM_JOBS", "3")
    assert default_jobs() == 3
    monkeypatch.setenv("SLIM_JOBS", "many")
    with pytest.raises(DataError, match="SLIM_JOBS = 'many'"):
        default_jobs()


# -- the cached tables the folds are built from ------------------------------------------------------------------


def _small_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": pd.array(["a", "b", "c"], dtype="str"),
            "batch_size": [1.0, 2.5, float("nan")],
            "static_batch": [True, False, True],
            "tensor_parallel": [1, 2, 4],
        }
    )


def test_a_table_entry_reads_back_exactly_and_only_when_it_can_be_trusted(tmp_path):
    table, key = _small_table(), C.table_key("test table")
    C.write_table_entry(tmp_path, key, table, {"left out": 3})
    got = C.read_table_entry(tmp_path, key)
    assert got is not None
    pd.testing.assert_frame_equal(got[0], table, check_exact=True)
    assert got[1] == {"left out": 3}
    assert C.read_table_entry(tmp_path, "0" * 64) is None  # no such entry
    parquet, meta = tmp_path / f"{key}.parquet", tmp_path / f"{key}.json"
    good = parquet.read_bytes()
    parquet.write_bytes(good[: len(good) // 2])  # truncated
    assert C.read_table_entry(tmp_path, key) is None
    other = pd.concat([table, table], ignore_index=True)
    C.write_table_entry(tmp_path, "1" * 64, other, {})
    # a valid table, not the one vouched for
    parquet.write_bytes((tmp_path / f"{'1' * 64}.parquet").read_bytes())
    assert C.read_table_entry(tmp_path, key) is None
    parquet.write_bytes(good)
    doc = json.loads(meta.read_text())
    meta.write_text(json.dumps({**doc, "key": "2" * 64}))
    assert C.read_table_entry(tmp_path, key) is None
    meta.write_text(json.dumps({**doc, "format": C.CACHE_FORMAT + 1}))
    assert C.read_table_entry(tmp_path, key) is None
    meta.unlink()
    assert C.read_table_entry(tmp_path, key) is None


def test_the_table_key_changes_with_the_data_and_the_name(tmp_path, monkeypatch):
    (tmp_path / "t.csv").write_text("a\n1\n")
    monkeypatch.setenv("SLIM_DATA_DIR", str(tmp_path))
    key = C.table_key("composed curves")
    assert C.table_key("composed curves") == key
    assert C.table_key("other") != key
    (tmp_path / "t.csv").write_text("a\n2\n")
    assert C.table_key("composed curves") != key


def test_the_composed_table_is_composed_once_then_read_from_the_cache(tmp_path, monkeypatch):
    from slimlib.experiments.accuracy import composed_curves as CC

    made = []

    def compose():
        made.append(1)
        return _small_table(), {"outside a measured kernel grid": 7}

    monkeypatch.setattr(CC, "_composed_table", compose)
    monkeypatch.setattr(CC, "_MEMO", [])
    first = CC.composed_table(tmp_path)
    monkeypatch.setattr(CC, "_MEMO", [])  # another process
    second = CC.composed_table(tmp_path)
    assert len(made) == 1
    pd.testing.assert_frame_equal(first[0], second[0], check_exact=True)
    assert first[1] == second[1] == {"outside a measured kernel grid": 7}
    for f in tmp_path.glob("*.parquet"):
        f.write_bytes(b"PAR1")
    monkeypatch.setattr(CC, "_MEMO", [])
    CC.composed_table(tmp_path)
    assert len(made) == 2  # an entry that cannot be trusted is composed again
