"""Shared set-up of the test run: caches in a temporary folder of this run, and the expensive tables built once."""

from __future__ import annotations

import fcntl
import os

import pandas as pd
import pytest

from slimlib.data.fetch import CACHE_ENV


@pytest.fixture(scope="session", autouse=True)
def _cache_in_the_runs_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Fit and data caches under this run's temporary folder (shared by its xdist workers), never the checkout's
    ``build/``; a cache folder the caller set is kept."""
    if not os.environ.get(CACHE_ENV):
        os.environ[CACHE_ENV] = str(tmp_path_factory.getbasetemp().parent / "slim-cache")


@pytest.fixture(scope="session")
def composed(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """The kernel-composed curves (`composed_table`: every GPU, model, precision and TP), composed once per run: the
    first xdist worker to ask composes them into the run's table cache (`composed_table(cache_dir)`) while holding a
    lock, the others read that entry; a worker's later ``composed_table()`` calls return the same table."""
    from slimlib.experiments.accuracy.composed_curves import composed_table

    run = tmp_path_factory.getbasetemp()  # xdist: this worker's folder in the run's
    folder = (run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run) / "composed-table"
    folder.mkdir(exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return composed_table(folder)[0]
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


#: the tests of 10 s and more (notebook runs, the documentation's commands, whole-data builds, signal sweeps)
SLOW = (
    "test_aiconfigurator_notebook.py::",
    "test_readme_commands.py::test_readme_commands_run_as_written",
    "test_evaluation.py::test_notebook_06_runs_in_quick_mode",
    "test_interrupts.py::test_signals_at_random_moments",
    "test_notebooks_run.py::",
    "test_datasets_tables.py::test_rebuild_is_byte_identical_to_committed",
    "test_model_selection_notebooks.py::test_notebooks_13_and_14",
    "test_transfer_notebook.py::",
    "test_kit_integration.py::",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`SLOW` tests first (otherwise in collection order): xdist hands them out while the short ones can still fill
    the other worker, so no worker ends the run alone on a long test."""
    items.sort(key=lambda item: not any(s in item.nodeid for s in SLOW))
