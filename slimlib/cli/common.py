"""Pieces every `slim` command module shares: argument types, input/output checks, the outputs note.

The checks run before any work, so a wrong path or value is a one-line error, never a traceback after a long fit.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

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


#: the largest batch size the advisor's candidates may reach (each candidate is one row of its grid)
MAX_CANDIDATE_BATCH = 2**20


def batch_size(text: str) -> int:
    """argparse type: a batch size, a whole number in 1..`MAX_CANDIDATE_BATCH`."""
    value = positive_int(text)
    if value > MAX_CANDIDATE_BATCH:
        raise argparse.ArgumentTypeError(f"{text} must be a whole number in 1..{MAX_CANDIDATE_BATCH}")
    return value


def nonnegative_int(text: str) -> int:
    """argparse type: a whole number >= 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be a whole number >= 0")
    return int(value)


def port_number(text: str) -> int:
    """argparse type: a TCP port, 1..65535."""
    value = _number(text, int)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (1..65535)")
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


def unit_fraction(text: str) -> float:
    """argparse type: a fraction in (0, 1] (--gpu-memory-utilization); NaN is out of range too."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:  # false for NaN
        raise argparse.ArgumentTypeError(f"{text} must be in (0, 1]")
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


def check_program(text: str, option: str) -> str:
    """`text` as a program to run (a path to an executable file, or a name on the PATH); DataError naming `option`
    when it is missing, a folder or not executable."""
    if os.sep in text or (os.altsep and os.altsep in text):
        p = Path(text)
        if not p.exists():
            raise DataError(f"{option} {text}: no such file; give the path of the program")
        if p.is_dir() or not os.access(p, os.X_OK):
            raise DataError(f"{option} {text}: is not an executable program")
        return text
    if shutil.which(text) is None:
        raise DataError(f"{option} {text}: no such program on the PATH; give its path")
    return text


def output_folder(
    path: str | Path,
    option: str,
    inputs: Iterable[str | Path] = (),
    configs: Iterable[str | Path] = (),
    *,
    parents: bool = False,
) -> Path:
    """`path` checked as an output folder: not a file, its parent exists (with `parents`: its nearest existing
    ancestor, the command creating the folders between), it and its parent are writable where the system says so,
    it is none of `inputs` nor inside an input folder, and not the folder holding one of the model `configs`
    (`model_inputs`: a config folder is an input)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise DataError(f"{option} {p}: is a file; give a folder for the outputs")
    parent = p.resolve().parent
    if parents:
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
    if not parent.is_dir():
        raise DataError(f"{option} {p}: folder {parent} does not exist; create it first")
    for where in (p, parent) if p.exists() else (parent,):
        if not os.access(where, os.W_OK | os.X_OK):
            raise DataError(f"{option} {p}: folder {where} is not writable; choose another output folder")
    resolved = p.resolve()
    configs = list(configs)
    for src in [*inputs, *configs]:
        s = Path(src)
        if not s.exists():
            continue
        s = s.resolve()
        if resolved == s or (s.is_dir() and resolved.is_relative_to(s)):
            raise DataError(f"{option} {p}: is also an input folder; choose another output folder")
    for src in configs:
        if Path(src).is_file() and resolved == Path(src).resolve().parent:
            raise DataError(
                f"{option} {p}: holds the input {src}; choose another output folder (inputs are never overwritten)"
            )
    return p


def preload(*modules: str) -> None:
    """Import `modules` now, before the command's work starts: the library imports some where it uses them (start-up
    time of `slim --help`), and an interrupt inside an import half done would end in another error."""
    for name in modules:
        importlib.import_module(name)


def _path_like(text: str) -> bool:
    p = Path(text)
    return text.endswith(("/", os.sep)) or text.startswith((".", "/", "~")) or p.exists() or p.is_symlink()


def model_argument(text: str, option: str = "--model") -> str:
    """`text` of a --model option: a path (ends with /, starts with . / ~, or exists) must be a config.json or a
    folder holding one (a one-line DataError saying so); anything else is a registry name or Hugging Face id."""
    p = Path(text).expanduser()
    if not _path_like(text) or p.is_file():
        return text
    if p.is_dir():
        config = p / "config.json"
        if config.is_file():
            return text
        there = (
            "its config.json is a folder" if config.is_dir()
            else "its config.json is a link that leads to itself or nowhere" if config.is_symlink()
            else "no config.json in that folder"
        )  # fmt: skip
        raise DataError(
            f"{option} {text}: {there}; give a config.json, the folder holding one, or a registry name (`slim models`)"
        )
    what = (
        "a link that leads to itself or nowhere" if p.is_symlink()
        else "not a regular file" if p.exists()
        else "no such file or folder"
    )  # fmt: skip
    raise DataError(
        f"{option} {text}: no config.json there ({what}); give a config.json, the folder holding one, or a registry "
        "name (`slim models`)"
    )


def model_inputs(models: Iterable[object]) -> list[Path]:
    """The inputs that model names stand for: each existing config file, and each folder named (a config folder),
    so no output overwrites them or is written inside such a folder. Registry names and Hugging Face ids name none."""
    found = []
    for value in pd.unique(
        pd.Series(list(models) if not isinstance(models, pd.Series) else models, dtype=object)
    ):
        p = Path(str(value))
        try:
            here = p.is_file() or p.is_dir()
        except OSError:  # a name no file system takes (too long): not a path
            here = False
        if here:
            found.append(p)
    return found
