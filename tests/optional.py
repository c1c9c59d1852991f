"""Skip markers for tests that need an optional library, checked without importing it, so that collecting the
suite does not pay for heavy imports (papermill and nbformat about 1.4 s, torch about 1.1 s per process)."""

from __future__ import annotations

import importlib.util

import pytest


def requires(module: str, reason: str | None = None) -> pytest.MarkDecorator:
    """A ``skipif`` marker for tests that need `module` (installed, not imported here)."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=reason or f"{module} is not installed"
    )
