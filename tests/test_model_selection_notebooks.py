"""Notebooks 13 (model selection) and 14 (intervals) in quick mode, and the runner starting 14 after 13: the
intervals reuse the selection's fold fits from its cache."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from slimlib.experiments.outputs.runner import AFTER, _run_wave
from slimlib.model.shipped_residuals import SHIPPED_PATH

ROOT = Path(__file__).resolve().parents[1]


def test_a_notebook_starts_after_the_ones_it_reads():
    assert AFTER["14_intervals.ipynb"] == ("13_model_selection.ipynb",)
    started, lock = [], threading.Lock()

    def execute(i: int) -> None:
        with lock:
            started.append(("start", i))
        time.sleep(0.05 if i == 0 else 0.01)
        with lock:
            started.append(("end", i))

    class Bar:
        def update(self, n: int) -> None:
            pass

    _run_wave([0, 1, 2], 3, execute, Bar(), {1: {0}})
    assert started.index(("end", 0)) < started.index(("start", 1))
    assert started.index(("start", 2)) < started.index(("end", 0))  # the others start at once


def test_notebooks_13_and_14_run_in_quick_mode_and_14_reads_13s_fits(tmp_path):
    pytest.importorskip("papermill")
    from reproduced import skip_if_reproduced

    from slimlib.experiments.outputs.runner import run_notebooks

    skip_if_reproduced("notebooks 13 and 14 in quick mode, 14 reading 13's cached fits")
    figures, cache = tmp_path / "figures", tmp_path / "cache"
    shipped = SHIPPED_PATH.read_bytes()
    records = run_notebooks(ROOT / "notebooks", build_dir=tmp_path / "build", figures_dir=figures,
                            only=["13", "14"], parameters={"quick": True, "cache_dir": str(cache)},
                            progress=False, jobs=2)  # fmt: skip
    assert [r["status"] for r in records] == ["ok", "ok"]
    for stem in ("extrap_cv", "extrap_paired", "extrap_cv_models", "extrap_coverage"):
        for ext in ("csv", "md", "tex"):
            assert (figures / f"{stem}.{ext}").is_file(), stem
    cv = pd.read_csv(figures / "extrap_cv.csv")
    assert set(cv["method"]) == {"paper", "slim"} and set(cv["dataset"]) == {"engine-cpu"}
    assert len(list(cache.glob("*.json"))) == cv.groupby("method")["n_folds"].sum().sum() // 1
    assert SHIPPED_PATH.read_bytes() == shipped  # quick mode leaves the shipped residual model alone
    executed = (tmp_path / "build" / "14_intervals.ipynb").read_text()
    assert "0 s of fits" in executed  # every fold read from the cache notebook 13 wrote
