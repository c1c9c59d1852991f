"""A cache of the cross-validation's fold results, keyed by a hash of their inputs and the code that computed them.

An entry is one JSON file ``<key>.json`` (`write_entry`, atomic) holding the key and the fold's result. The key
(`entry_key`) hashes the fold's training and test tables, the candidate, the protocol's settings, the numerics the
kernels run at, the numpy and scipy versions and `code_fingerprint` (every Python file of ``slimlib``), so any change
to either recomputes the fold. An entry that does not parse, was written by another format, holds another key or
lacks a field is recomputed, never trusted (`read_entry` returns None).

A table the folds are built from (the kernel-composed curves) is cached beside them: ``<key>.parquet`` with
``<key>.json`` holding the key, the parquet file's sha256 and the table's side counts (`write_table_entry`, the JSON
last). Its key (`table_key`) hashes the table's name, every file of the data folder, the numerics, the library
versions and `code_fingerprint`; an entry whose JSON or parquet file is missing, truncated or of another key is
recomputed (`read_table_entry` returns None).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy

from slimlib.data.catalog import data_dir
from slimlib.io import write_bytes, write_text

#: version of an entry's stored form
CACHE_FORMAT = 1
#: environment variables that change the kernels' numerics (`slimlib.experiments.outputs.numerics`)
NUMERICS_VARIABLES = ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES")
#: the fields of an entry's result
RESULT_FIELDS = ("part", "failure", "warnings")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 over the path and bytes of every ``.py`` file of the installed ``slimlib``."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _table_digest(df: pd.DataFrame) -> str:
    return hashlib.sha256(df.to_csv(index=False, float_format="%.17g").encode()).hexdigest()


def entry_key(candidate: str, settings: dict[str, Any], train: pd.DataFrame, test: pd.DataFrame) -> str:
    """The hash naming a fold's entry (module docstring); `candidate` describes the candidate in full (a registered
    name, or the term names and options of a term list)."""
    doc = {
        "format": CACHE_FORMAT,
        "candidate": candidate,
        "settings": settings,
        "train": _table_digest(train),
        "test": _table_digest(test),
        **_computed_by(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _computed_by() -> dict[str, Any]:
    """What a cached result was computed with, in its key: the numerics, the library versions and the code."""
    import pyarrow

    return {
        "numerics": {k: os.environ.get(k, "") for k in NUMERICS_VARIABLES},
        "versions": {"numpy": np.__version__, "scipy": scipy.__version__, "pandas": pd.__version__,
                     "pyarrow": pyarrow.__version__},
        "code": code_fingerprint(),
    }  # fmt: skip


def read_entry(folder: Path, key: str) -> dict[str, Any] | None:
    """The result stored under `key` in `folder`, or None where there is none or it cannot be trusted."""
    path = folder / f"{key}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT or doc.get("key") != key:
        return None
    result = doc.get("result")
    if not isinstance(result, dict) or any(k not in result for k in RESULT_FIELDS):
        return None
    return result


def write_entry(folder: Path, key: str, result: dict[str, Any]) -> None:
    """Store `result` under `key` in `folder` (created where missing), atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    write_text(folder / f"{key}.json", json.dumps({"format": CACHE_FORMAT, "key": key, "result": result}))


def cache_folder(folder: str | Path = "") -> Path:
    """The fit cache's folder: `folder` where given, else ``SLIM_CACHE_DIR``, else ``build/cache`` of the checkout
    that holds this ``slimlib`` (beside `slim reproduce`'s executed notebooks), else ``~/.cache/slimlib``."""
    if str(folder):
        return Path(folder)
    env = os.environ.get("SLIM_CACHE_DIR", "").strip()
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").is_file() and (checkout / "notebooks").is_dir():
        return checkout / "build" / "cache"
    return Path.home() / ".cache" / "slimlib"


def data_fingerprint() -> str:
    """sha256 over the relative path and bytes of every file of the data folder (`slimlib.data.catalog.data_dir`)."""
    root = data_dir()
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def table_key(name: str) -> str:
    """The hash naming a cached table (module docstring)."""
    doc = {"format": CACHE_FORMAT, "table": name, "data": data_fingerprint(), **_computed_by()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def read_table_entry(folder: Path, key: str) -> tuple[pd.DataFrame, dict[str, Any]] | None:
    """The table and side values stored under `key` in `folder`, or None where there are none or they cannot be
    trusted."""
    try:
        doc = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
        data = (folder / f"{key}.parquet").read_bytes()
    except (OSError, ValueError):
        return None
    if (
        not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT or doc.get("key") != key
        or doc.get("sha256") != hashlib.sha256(data).hexdigest() or not isinstance(doc.get("side"), dict)
    ):  # fmt: skip
        return None
    import io

    import pyarrow

    try:
        table = pd.read_parquet(io.BytesIO(data))
    except (OSError, ValueError, pyarrow.ArrowException):
        return None
    return table, doc["side"]


def write_table_entry(folder: Path, key: str, table: pd.DataFrame, side: dict[str, Any]) -> None:
    """Store `table` (parquet) and the JSON-ready `side` under `key` in `folder` (created where missing), each file
    atomically, the JSON that vouches for the table last."""
    import io

    folder.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    table.to_parquet(buf, index=False)
    data = buf.getvalue()
    write_bytes(folder / f"{key}.parquet", data)
    doc = {"format": CACHE_FORMAT, "key": key, "sha256": hashlib.sha256(data).hexdigest(), "side": side}
    write_text(folder / f"{key}.json", json.dumps(doc))
