"""Shared set-up of the test run: caches in a temporary folder of this run, and the expensive tables built once."""

from __future__ import annotations

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
def composed() -> pd.DataFrame:
    """The kernel-composed curves (`composed_table`: every GPU, model, precision and TP), built once per worker."""
    from slimlib.experiments.accuracy.composed_curves import composed_table

    return composed_table()[0]
