"""Writing outputs without losing data: every file goes to a temporary file in the target's folder and is renamed
into place, so an interrupted write leaves the previous file intact and no partial file behind."""

from __future__ import annotations

import concurrent.futures
import contextlib
import csv
import ctypes
import io
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from slimlib.errors import DataError, check_interrupted, set_deferring
from slimlib.schema import row_chunks

__all__ = [
    "OWNER_MARKER",
    "STDOUT",
    "atomic_folder",
    "atomic_open",
    "check_output_path",
    "check_owned",
    "is_stdout",
    "owner_marker",
    "write_bytes",
    "csv_bytes",
    "write_csv",
    "write_files",
    "write_text",
]


#: the output name that means standard output
STDOUT = "-"


#: signals held while a temporary output is created, committed or removed
_HELD = {signal.SIGINT, signal.SIGTERM}
_Held = tuple[set[int | signal.Signals], bool]


def _hold() -> _Held:
    """Hold SIGINT/SIGTERM around a step no interrupt may cut short: blocked in this thread, and recorded instead
    of raised by the `slim` handler when another thread (BLAS, Arrow) receives one, whose Python handler would
    still run in this thread (`slimlib.errors.set_deferring`). Returns what `_restore` puts back."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, _HELD), set_deferring(True)


def _restore(held: _Held) -> None:
    """Undo `_hold`: the signal mask and the deferral as they were."""
    signal.pthread_sigmask(signal.SIG_SETMASK, held[0])
    set_deferring(held[1])


def _new_mode(mode: int) -> int:
    """`mode` less the process's umask: the permissions a file or folder created with `mode` gets (temporary files
    are created private, then given these before they are renamed into place)."""
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def _cannot_write(target: Path, exc: OSError) -> DataError:
    return DataError(
        f"{target}: cannot write into folder {target.parent} ({exc.strerror or exc}); choose another output folder"
    )


def _cannot_replace(target: Path, exc: OSError) -> DataError:
    return DataError(f"{target}: cannot replace it ({exc.strerror or exc}); choose another output name")


def is_stdout(path: str | Path | None) -> bool:
    """True when `path` is ``-`` (standard output)."""
    return path is not None and str(path) == STDOUT


#: the file a `slim` command writes into an output folder it owns: its text names the command
OWNER_MARKER = ".slim-owner"


def owner_marker(command: str) -> str:
    """The text of `OWNER_MARKER` for `command` (e.g. ``slim plan``)."""
    return f"written by {command}\n"


def check_owned(
    path: str | Path, option: str, command: str, legacy: Callable[[Path], bool] | None = None
) -> None:
    """DataError unless the folder `path` is new, empty, or `command`'s own: its `OWNER_MARKER` names `command`, or
    (a folder from before the marker) `legacy` accepts it. A folder holding other files is never taken over."""
    p = Path(path)
    try:
        if not p.is_dir() or not any(p.iterdir()):
            return
    except OSError as exc:
        raise DataError(
            f"{option} {p}: cannot read the folder ({exc.strerror or exc}); choose another"
        ) from None
    marker = p / OWNER_MARKER
    try:
        if marker.is_file() and marker.read_text(encoding="utf-8") == owner_marker(command):
            return
    except (OSError, UnicodeDecodeError):
        pass
    if legacy is not None and legacy(p):
        return
    names = sorted(q.name for q in p.iterdir())
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    raise DataError(
        f"{option} {p}: holds files that `{command}` did not write ({shown}); give a new or empty folder"
    )


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
    try:
        resolved = p.resolve()
    except RuntimeError:
        raise DataError(f"{p}: a link that leads to itself; choose another output file") from None
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
    # moment either finds no temporary file or removes it below; they are held again around the commit, which
    # happens only if no interrupt was recorded (one swallowed by a finalizer still stops the write)
    old_mask = _hold()
    tmp: str | None = None
    try:
        check_interrupted()
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        except OSError as exc:
            raise _cannot_write(target, exc) from None
        _restore(old_mask)
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _new_mode(0o777 if executable else 0o666))
        _hold()
        check_interrupted()
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise _cannot_replace(target, exc) from None
        _restore(old_mask)
    except BaseException:
        _hold()  # a second signal must not skip the removal
        try:
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        finally:
            _restore(old_mask)
        raise


@contextlib.contextmanager
def atomic_folder(path: str | Path, *, replaces: tuple[str, ...] = ()) -> Iterator[Path]:
    """A temporary folder beside `path` to write a set of files into; on success they appear in `path` together.

    A new `path` is the temporary folder renamed into place. Over an existing folder, each new file replaces its
    old one and the names in `replaces` that the new set lacks are removed (files of an earlier set the new one
    does not have), all with SIGINT/SIGTERM held, so an interrupt leaves the old set or the new one, never a mix;
    other files of the folder are kept. On error or interrupt the temporary folder is removed. A folder that
    cannot be written into is a one-line DataError naming it."""
    target = Path(path)
    old_mask = _hold()
    tmp: Path | None = None
    try:
        check_interrupted()
        try:
            tmp = Path(
                tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.absolute().parent)
            )
        except OSError as exc:
            raise _cannot_write(target, exc) from None
        _restore(old_mask)
        yield tmp
        _hold()
        check_interrupted()
        if not target.exists():
            os.chmod(tmp, _new_mode(0o777))  # mkdtemp's folder is private
            os.rename(tmp, target)
        else:
            for name in replaces:
                if not (tmp / name).exists() and (target / name).is_file():
                    os.unlink(target / name)
            for item in sorted(tmp.iterdir()):
                if item.is_dir() and (target / item.name).is_dir():
                    continue  # a folder the set only needs to exist (e.g. logs/)
                os.replace(item, target / item.name)
            shutil.rmtree(tmp)
        tmp = None
        _restore(old_mask)
    except BaseException:
        _hold()
        try:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        finally:
            _restore(old_mask)
        raise


def write_text(path: str | Path, text: str, *, executable: bool = False) -> Path:
    """Write `text` to `path` atomically (UTF-8, ``\\n`` line endings; a program when `executable`)."""
    with atomic_open(path, "w", executable=executable) as fh:
        fh.write(text)
    return Path(path)


def replace_marked_block(path: str | Path, start: str, end: str, block: str) -> bool:
    """Replace the text between the lines `start` and `end` of the file `path` by `block` (atomically); True when
    the file changed. DataError when the markers are not there once each, in that order."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise DataError(f"{path}: needs one {start} line followed by one {end} line")
    head, rest = text.split(start, 1)
    new = f"{head}{start}\n{block}{end}{rest.split(end, 1)[1]}"
    if new == text:
        return False
    write_text(path, new)
    return True


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def write_files(files: dict[Path, bytes]) -> list[Path]:
    """Write each of `files` (path -> bytes) as one set: every file to a temporary file beside it, then all renamed
    into place with SIGINT/SIGTERM held, so an interrupt or an error while writing leaves every old file as it was
    (a rename the file system refuses midway would leave the ones before it new). Returns the paths."""
    if any(is_stdout(p) for p in files):
        raise DataError("a set of files cannot go to standard output (-); give file names")
    old_mask = _hold()
    tmps: dict[Path, str] = {}
    try:
        check_interrupted()
        for target, data in files.items():
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            except OSError as exc:
                raise _cannot_write(target, exc) from None
            tmps[target] = tmp
            _restore(old_mask)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, _new_mode(0o666))
            _hold()
            check_interrupted()
        for target, tmp in tmps.items():
            try:
                os.replace(tmp, target)
            except OSError as exc:
                raise _cannot_replace(target, exc) from None
        tmps = {}
        _restore(old_mask)
    except BaseException:
        _hold()
        try:
            for tmp in tmps.values():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        finally:
            _restore(old_mask)
        raise
    return list(files)


#: `DataFrame.to_csv`'s settings for the package's CSV outputs (`write_csv`, `csv_bytes`), unless given
CSV_DEFAULTS = {"index": False, "lineterminator": "\n"}


def csv_bytes(df: Any, **kwargs: Any) -> bytes:
    """What `write_csv` writes for `df`, as bytes."""
    return str(df.to_csv(**{**CSV_DEFAULTS, **kwargs})).encode("utf-8")


def write_csv(df: Any, path: str | Path, **kwargs: Any) -> Path:
    """`DataFrame.to_csv` to `path` atomically (`CSV_DEFAULTS`: no index, ``\\n`` line terminator, unless given)."""
    with atomic_open(path, "w") as fh:
        df.to_csv(fh, **{**CSV_DEFAULTS, **kwargs})
    return Path(path)


@contextlib.contextmanager
def returning_freed_memory() -> Iterator[None]:
    """Within the block, freed memory goes straight back to the operating system, so reading a large table peaks
    near the table's own size: Arrow allocates from the C library instead of its mimalloc pool (which keeps freed
    pages), and glibc's mmap threshold is held at 64 KiB (it otherwise rises after the first large free and keeps
    later blocks of that size in the heap). After the block the threshold is 32 MiB, glibc's own ceiling, so the
    chunked work that follows reuses heap blocks rather than mapping fresh pages for every array. Process-wide: for
    the `slim` commands that read large tables (`scripts/bench_cli.py` measures the effect)."""
    pa.set_memory_pool(pa.system_memory_pool())
    mallopt = None  # glibc's; other C libraries keep their own policy
    if sys.platform.startswith("linux"):
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, 64 * 1024)
    try:
        yield
    finally:
        if mallopt is not None:
            mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024)


_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def write_table(df: Any, path: str | Path, *, extend: Callable[[Any], Any] | None = None) -> Path:
    """Write a DataFrame with Arrow, atomically: Parquet when `path` ends in ``.parquet`` or ``.pq``, else CSV
    (header, no index, ``\\n`` line ends); ``-`` writes CSV to standard output. Much faster than `write_csv` on
    large tables (the `slim predict` output); floats are written in their shortest round-trip form.

    The rows go out in chunks of `CHUNK_ROWS`. With `extend`, each chunk is followed on its right by the numeric
    columns `extend(chunk)` returns for it (`slim predict`: the predictions), so the extended table is never whole
    in memory. CSV chunks are formatted on a second thread (Arrow releases the GIL) while the next is computed."""
    parquet = Path(str(path)).suffix.lower() in (".parquet", ".pq") and not is_stdout(path)
    # as pandas writes CSV: a field is quoted only when it holds a comma, quote or line break (`extend` adds numbers)
    structural = not parquet and any(  # on the distinct values (a million rows hold a handful of names)
        df[c].drop_duplicates().astype(str).str.contains('[,"\r\n]', regex=True).any()
        for c in df.columns
        if not (pd.api.types.is_numeric_dtype(df[c]) or pd.api.types.is_bool_dtype(df[c]))
    )
    options = pacsv.WriteOptions(include_header=False, quoting_style="needed" if structural else "none")
    schema: pa.Schema | None = None
    with atomic_open(path, "wb") as fh, concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        writer: pq.ParquetWriter | None = None
        pending: concurrent.futures.Future[bytes] | None = None
        try:
            for part in row_chunks(df):
                table = _arrow_chunk(part, extend, schema)
                if schema is None:
                    schema = table.schema
                    if parquet:
                        writer = pq.ParquetWriter(fh, schema)
                    else:
                        header = io.StringIO()
                        csv.writer(header, lineterminator="\n").writerow(schema.names)
                        fh.write(header.getvalue().encode("utf-8"))
                if writer is not None:
                    writer.write_table(table)
                    continue
                if pending is not None:
                    fh.write(pending.result())
                pending = pool.submit(_csv_bytes, table, options)
            if pending is not None:
                fh.write(pending.result())
        finally:
            if writer is not None:
                writer.close()
    return Path(path)


def _arrow_chunk(part: Any, extend: Callable[[Any], Any] | None, schema: pa.Schema | None) -> pa.Table:
    """One chunk of `write_table` as Arrow, with `extend`'s columns appended, in the first chunk's schema."""
    table = pa.Table.from_pandas(part, preserve_index=False, nthreads=1)  # a chunk: no thread pool per call
    if extend is not None:
        extra = extend(part)
        if len(extra) != len(part):
            raise ValueError(f"extend returned {len(extra)} rows for a chunk of {len(part)}")
        for name in extra.columns:
            column = extra[name].to_numpy()
            if not (np.issubdtype(column.dtype, np.number) or column.dtype == bool):
                raise ValueError(f"extend's column {name!r} is not numeric ({column.dtype})")
            table = table.append_column(str(name), pa.array(column))
    return table if schema is None else table.cast(schema)


def _csv_bytes(table: pa.Table, options: pacsv.WriteOptions) -> bytes:
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, write_options=options)
    return sink.getvalue().to_pybytes()
