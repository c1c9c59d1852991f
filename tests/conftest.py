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


#: the slowest test modules (``--durations``), run first so that two workers end together; order only
SLOW_MODULES = (
    "test_interrupts.py",
    "test_reproduce.py",
    "test_kit_integration.py",
    "test_readme_commands.py",
    "test_vllm_commands.py",
    "test_datasets_tables.py",
    "test_engine_models.py",
    "test_attention_kernel.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the tests of `SLOW_MODULES` first, in that order, each module's tests in their own order."""
    rank = {name: i for i, name in enumerate(SLOW_MODULES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
