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
