"""Pieces every `slim` command module shares: argument types, input/output checks, the outputs note.

The checks run before any work, so a wrong path or value is a one-line error, never a traceback after a long fit.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Iterable
from pathlib import Path

from slimlib.errors import DataError
from slimlib.io import check_output_path


def _number(text: str, kind: type) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    if kind is int and not value.is_integer():
        raise argparse.ArgumentTypeError(f"{text} is not a whole number")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (batch sizes, counts)."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be a whole number >= 1")
    return int(value)


def nonnegative_int(text: str) -> int:
    """argparse type: a whole number >= 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a whole number >= 0")
    return int(value)


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (token counts, seconds, GiB)."""
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be positive")
    return value


def nonnegative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be >= 0")
    return value


def slo_seconds(text: str) -> float:
    """argparse type: an E2E latency bound in seconds, > 0; "inf" or "none" means no bound."""
    if text.strip().lower() in ("inf", "none"):
        return math.inf
    return positive_float(text)


def input_file(path: str | Path, what: str) -> Path:
    """`path` as an existing, readable file; `what` names it in the error ("parameter file", "CSV table")."""
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: no such {what}")
    if p.is_dir():
        raise DataError(f"{p}: is a directory; give the path of a {what}")
    if not os.access(p, os.R_OK):
        raise DataError(f"{p}: the {what} is not readable (permission denied)")
    return p


def read_text_input(path: str | Path, what: str) -> str:
    """The UTF-8 text of an input file; unreadable or non-UTF-8 files are one-line DataErrors."""
    p = input_file(path, what)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{p}: the {what} is not UTF-8 text (byte {exc.start}); give the file `slim fit` wrote"
        ) from None
    except OSError as exc:
        raise DataError(f"{p}: cannot read the {what} ({exc.strerror})") from None


def output_file(path: str | Path, option: str, inputs: Iterable[str | Path] = ()) -> Path:
    """`path` checked as an output file (folder exists and is writable, not a directory, not an input)."""
    try:
        return check_output_path(path, inputs=tuple(inputs))
    except DataError as exc:
        raise DataError(f"{option} {exc}") from None


def output_folder(path: str | Path, option: str, inputs: Iterable[str | Path] = ()) -> Path:
    """`path` checked as an output folder: not a file, its parent exists, and it is none of `inputs`."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise DataError(f"{option} {p}: is a file; give a folder for the outputs")
    parent = p.resolve().parent
    if not parent.is_dir():
        raise DataError(f"{option} {p}: folder {parent} does not exist; create it first")
    for src in inputs:
        if p.exists() and Path(src).exists() and os.path.samefile(p, src):
            raise DataError(f"{option} {p}: is also an input folder; choose another output folder")
    return p
