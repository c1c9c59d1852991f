"""Where the tests find the repository and the read-only raw mirrors (`../shared` beside the checkout)."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SLIM_SHARED_DIR", REPO.parent / "shared"))
RAW = SHARED / "data"
MEMGAP = RAW / "vllm-batching-memory-gap"
VIDUR = RAW / "vidur-profiling"


def needs(path: Path, what: str = "raw data mirror"):
    """Skip marker, with a visible reason, for tests that read `path` from ../shared."""
    return pytest.mark.skipif(not path.is_dir(), reason=f"{what} not found at {path} (set SLIM_SHARED_DIR)")
