"""A config.json of a test's own, written where the test says."""

from __future__ import annotations

import json
from pathlib import Path


def write_config(folder: Path, data: dict, name: str = "config.json") -> Path:
    """`data` as JSON in `folder`/`name`; the path."""
    p = folder / name
    p.write_text(json.dumps(data))
    return p
