"""Writing outputs without losing data: every file goes to a temporary file in the target's folder and is renamed
into place, so an interrupted write leaves the previous file intact and no partial file behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from slimlib.errors import DataError

__all__ = ["atomic_open", "check_output_path", "write_bytes", "write_csv", "write_text"]


def check_output_path(path: str | Path, *, inputs: tuple[str | Path, ...] = ()) -> Path:
    """`path` as a writable output: its folder exists and is writable, it is not a directory and not one of
    `inputs` (also through links). Raises DataError saying what to do."""
    p = Path(path)
    if p.is_dir():
        raise DataError(f"{p}: is a directory; give a file name for the output")
    parent = p.parent
    if not parent.is_dir():
        raise DataError(f"{p}: folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataError(f"{p}: folder {parent} is not writable; choose another output folder")
    for src in inputs:
        if p.exists() and Path(src).exists() and os.path.samefile(p, src):
            raise DataError(
                f"{p}: is also an input; choose another output file (inputs are never overwritten)"
            )
    return p


@contextlib.contextmanager
def atomic_open(
    path: str | Path, mode: str = "w", *, executable: bool = False, **kwargs: Any
) -> Iterator[IO[Any]]:
    """Open a temporary file beside `path` for writing; on success it replaces `path`, on error it is removed.

    Text mode defaults to UTF-8 with ``\\n`` line endings. The new file gets the permissions of a normal new file
    (``0o666`` less the umask), or of a new program (``0o777`` less the umask) when `executable`."""
    if mode not in ("w", "wb"):
        raise ValueError("atomic_open writes whole files: mode must be 'w' or 'wb'")
    target = Path(path)
    if mode == "w":
        kwargs.setdefault("encoding", "utf-8")
        kwargs.setdefault("newline", "\n")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, (0o777 if executable else 0o666) & ~umask)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path: str | Path, text: str, *, executable: bool = False) -> Path:
    """Write `text` to `path` atomically (UTF-8, ``\\n`` line endings; a program when `executable`)."""
    with atomic_open(path, "w", executable=executable) as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def write_csv(df: Any, path: str | Path, **kwargs: Any) -> Path:
    """`DataFrame.to_csv` to `path` atomically (no index, ``\\n`` line terminator unless given)."""
    kwargs.setdefault("index", False)
    kwargs.setdefault("lineterminator", "\n")
    with atomic_open(path, "w") as fh:
        df.to_csv(fh, **kwargs)
    return Path(path)
