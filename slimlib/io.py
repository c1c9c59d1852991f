"""Writing outputs without losing data: every file goes to a temporary file in the target's folder and is renamed
into place, so an interrupted write leaves the previous file intact and no partial file behind."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import csv
import io
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from slimlib.errors import DataError

__all__ = [
    "STDOUT",
    "atomic_open",
    "check_output_path",
    "is_stdout",
    "write_bytes",
    "write_csv",
    "write_text",
]


#: the output name that means standard output
STDOUT = "-"


def is_stdout(path: str | Path | None) -> bool:
    """True when `path` is ``-`` (standard output)."""
    return path is not None and str(path) == STDOUT


def check_output_path(path: str | Path, *, inputs: tuple[str | Path, ...] = ()) -> Path:
    """`path` as a writable output: its folder exists and is writable, it is not a directory, not a device, FIFO
    or socket (only a regular file is replaced), and it is neither one of `inputs` nor inside an input folder
    (compared by resolved path, so links and ``..`` do not hide it). ``-`` (standard output) passes unchanged.
    Raises DataError saying what to do."""
    p = Path(path)
    if is_stdout(p):
        return p
    if p.is_dir():
        raise DataError(f"{p}: is a directory; give a file name for the output")
    if p.exists() and not p.is_file():
        raise DataError(
            f"{p}: is not a regular file (a device, FIFO or socket); only regular files are replaced: give a "
            "file name, or - for standard output"
        )
    parent = p.parent
    if not parent.is_dir():
        raise DataError(f"{p}: folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataError(f"{p}: folder {parent} is not writable; choose another output folder")
    resolved = p.resolve()
    for src in inputs:
        if is_stdout(src) or not Path(src).exists():
            continue
        s = Path(src).resolve()
        if resolved == s or (p.exists() and os.path.samefile(p, src)):
            raise DataError(
                f"{p}: is also an input; choose another output file (inputs are never overwritten)"
            )
        if s.is_dir() and resolved.is_relative_to(s):
            raise DataError(
                f"{p}: lies inside the input folder {src}; write the output outside it (inputs are never "
                "overwritten)"
            )
    return p


@contextlib.contextmanager
def atomic_open(
    path: str | Path, mode: str = "w", *, executable: bool = False, **kwargs: Any
) -> Iterator[IO[Any]]:
    """Open a temporary file beside `path` for writing; on success it replaces `path`, on error or on SIGINT /
    SIGTERM (raised as exceptions by the `slim` command's handlers) it is removed. ``-`` writes to standard output.

    Text mode defaults to UTF-8 with ``\\n`` line endings. The new file gets the permissions of a normal new file
    (``0o666`` less the umask), or of a new program (``0o777`` less the umask) when `executable`."""
    if mode not in ("w", "wb"):
        raise ValueError("atomic_open writes whole files: mode must be 'w' or 'wb'")
    target = Path(path)
    if mode == "w":
        kwargs.setdefault("encoding", "utf-8")
        kwargs.setdefault("newline", "\n")
    if is_stdout(target):  # `-`: standard output, nothing to replace
        stream = sys.stdout if mode == "w" else sys.stdout.buffer
        yield stream
        stream.flush()
        return
    if target.exists() and not target.is_file():  # never rename over a device, FIFO or socket
        check_output_path(target)
    # signals are held while the temporary file is created and registered for removal, so an interrupt at any
    # moment either finds no temporary file or removes it below
    held = {signal.SIGINT, signal.SIGTERM}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, (0o777 if executable else 0o666) & ~umask)
        os.replace(tmp, target)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_BLOCK, held)  # a second signal must not skip the removal
        try:
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
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


def write_table(df: Any, path: str | Path) -> Path:
    """Write a DataFrame with Arrow, atomically: Parquet when `path` ends in ``.parquet`` or ``.pq``, else CSV
    (header, no index, ``\\n`` line ends); ``-`` writes CSV to standard output. Much faster than `write_csv` on
    large tables (the `slim predict` output); floats are written in their shortest round-trip form."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    parquet = Path(str(path)).suffix.lower() in (".parquet", ".pq") and not is_stdout(path)
    with atomic_open(path, "wb") as fh:
        if parquet:
            pq.write_table(table, fh)
            return Path(path)
        # as pandas writes CSV: a field is quoted only when it holds a comma, quote or line break
        header = io.StringIO()
        csv.writer(header, lineterminator="\n").writerow(table.column_names)
        fh.write(header.getvalue().encode("utf-8"))
        structural = any(
            pc.any(pc.match_substring_regex(pc.unique(col).cast(pa.large_string()), '[,"\r\n]')).as_py()
            for col in table.columns
            if not (
                pa.types.is_integer(col.type)
                or pa.types.is_floating(col.type)
                or pa.types.is_boolean(col.type)
            )
        )
        options = pacsv.WriteOptions(include_header=False, quoting_style="needed" if structural else "none")
        _write_csv_chunks(table, fh, options)
    return Path(path)


#: rows formatted per chunk by `write_table` (two chunks are formatted at a time, in threads: Arrow releases the GIL)
CSV_CHUNK_ROWS = 131_072


def _write_csv_chunks(table: pa.Table, fh: IO[bytes], options: pacsv.WriteOptions) -> None:
    """Format `table` as CSV in chunks on two threads and write them in order (at most two chunks in memory)."""

    def render(start: int) -> bytes:
        sink = pa.BufferOutputStream()
        pacsv.write_csv(table.slice(start, CSV_CHUNK_ROWS), sink, write_options=options)
        return sink.getvalue().to_pybytes()

    starts = list(range(0, table.num_rows, CSV_CHUNK_ROWS))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        pending: collections.deque[concurrent.futures.Future[bytes]] = collections.deque()
        for start in starts:
            pending.append(pool.submit(render, start))
            if len(pending) >= 2:
                fh.write(pending.popleft().result())
        while pending:
            fh.write(pending.popleft().result())
