"""A measured table and its manifest in one folder: written together with the table's sha256, read back only when
the table still matches it (the project's own benchmarks and campaigns: `slimlib.data.decode_gemm`,
`slimlib.data.engine_offline`)."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from slimlib.errors import DataError
from slimlib.io import atomic_folder

__all__ = ["MANIFEST_FILE", "read_manifest_table", "write_manifest_folder"]

MANIFEST_FILE = "manifest.json"


def write_manifest_folder(
    out: str | Path, table_file: str, table: pd.DataFrame, manifest: dict[str, Any]
) -> Path:
    """`table` as `table_file` and `manifest` (with the table's sha256 under ``files``) into folder `out`,
    together (`slimlib.io.atomic_folder`: an interrupt leaves the previous folder)."""
    buf = io.StringIO()
    table.to_csv(buf, index=False, float_format="%.6g", lineterminator="\n")
    text = buf.getvalue()
    manifest = {
        **manifest,
        "files": [{"file": table_file, "sha256": hashlib.sha256(text.encode()).hexdigest()}],
    }
    with atomic_folder(out, replaces=(table_file, MANIFEST_FILE)) as tmp:
        (tmp / table_file).write_text(text, encoding="utf-8")
        (tmp / MANIFEST_FILE).write_text(
            json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
    return Path(out)


def read_manifest_table(
    folder: str | Path, table_file: str, columns: Sequence[str], command: str
) -> pd.DataFrame:
    """`table_file` of `folder`, checked against its manifest's sha256 and for `columns`; DataError naming the
    file (`command` is what writes the folder, for the message when it is missing)."""
    folder = Path(folder)
    path, mpath = folder / table_file, folder / MANIFEST_FILE
    for p in (path, mpath):
        if not p.is_file():
            raise DataError(f"{p}: missing; run `{command} --out {folder}`")
    text = path.read_bytes()
    want = {f["file"]: f["sha256"] for f in json.loads(mpath.read_text(encoding="utf-8")).get("files", [])}
    if want.get(table_file) != hashlib.sha256(text).hexdigest():
        raise DataError(
            f"{path}: sha256 differs from {mpath.name}; the table was changed after it was measured"
        )
    df = pd.read_csv(io.BytesIO(text))
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing}")
    return df
