"""Parser of the mirror's `config-*.txt` files: the launcher command line that produced sibling run folders.

A config holds default arguments (dicts) and test arguments (dicts of value lists); the launcher made one run folder
per combination of test values, named ``_<server values joined by _>_`` followed by ``_<benchmark values>`` for online
runs, and ``_<test values joined by _>`` for offline runs.
"""

from __future__ import annotations

import ast
import itertools
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from slimlib.errors import DataError

_DICT_OPTIONS = (
    "--default-server-args",
    "--default-benchmark-args",
    "--test-server-args",
    "--test-benchmark-args",
    "--default-args",
    "--test-args",
    "--default-env-vars",
)
_VALUE_OPTIONS = ("--results-path", "--user", "--queue", "--max-duration")
_FLAG_OPTIONS = ("--with-nsight", "--with-nsight-compute")


@dataclass(frozen=True)
class LaunchConfig:
    """One parsed `config-*.txt`: `kind` is "online" (server + benchmark args) or "offline" (profiler args)."""

    path: Path
    kind: str
    results_path: str
    default_args: dict = field(default_factory=dict)  # server args (online) or profiler args (offline)
    benchmark_args: dict = field(default_factory=dict)  # online only
    test_args: dict = field(default_factory=dict)  # server test args (online) or test args (offline)
    test_benchmark_args: dict = field(default_factory=dict)
    env_vars: dict = field(default_factory=dict)
    profiler: str = "none"  # "none", "nsys" (Nsight Systems) or "ncu" (Nsight Compute)

    def run_names(self) -> list[str]:
        """Folder names of the runs this command line launched, in launch order."""
        names = []
        server_lists = [[str(v) for v in vals] for vals in self.test_args.values()]
        bench_lists = [[str(v) for v in vals] for vals in self.test_benchmark_args.values()]
        for combo in itertools.product(*server_lists):
            for bcombo in itertools.product(*bench_lists):
                if self.kind == "offline":
                    names.append("_" + "_".join(combo))
                else:
                    name = "_" + "_".join(combo) + "_"
                    if bcombo:
                        name += "_" + "_".join(bcombo)
                    names.append(name)
        return names

    def run_settings(self, run_name: str) -> dict:
        """All arguments of the run `run_name`: defaults overridden by that run's test values."""
        server_keys = list(self.test_args)
        bench_keys = list(self.test_benchmark_args)
        server_lists = [[str(v) for v in self.test_args[k]] for k in server_keys]
        bench_lists = [[str(v) for v in self.test_benchmark_args[k]] for k in bench_keys]
        for combo in itertools.product(*server_lists):
            for bcombo in itertools.product(*bench_lists):
                args = {**self.default_args, **self.benchmark_args}
                args.update(dict(zip(server_keys, combo, strict=True)))
                args.update(dict(zip(bench_keys, bcombo, strict=True)))
                if self.kind == "offline":
                    name = "_" + "_".join(combo)
                else:
                    name = "_" + "_".join(combo) + "_" + ("_" + "_".join(bcombo) if bcombo else "")
                if name == run_name:
                    return {k: str(v) for k, v in args.items()}
        raise DataError(f"{self.path}: this command line launched no run named {run_name!r}")


def _literal_dict(path: Path, option: str, text: str) -> dict:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise DataError(
            f"{path}: the value of {option} is not a Python dict literal: {text[:80]!r}"
        ) from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: the value of {option} is a {type(value).__name__}, expected a dict")
    return value


def parse_launch_config(path: str | Path) -> LaunchConfig:
    """Parse one `config-*.txt` launcher command line; DataError names the file and the bad option."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise DataError(f"{p}: not UTF-8 text; expected a launcher command line") from None
    if not text:
        raise DataError(f"{p}: empty file; expected the launcher command line of the sibling run folders")
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise DataError(
            f"{p}: cannot split the command line ({exc}); the file is truncated or not a config"
        ) from None
    if not any(t.endswith("launcher.py") for t in tokens):
        raise DataError(f"{p}: no 'launcher.py' in the command line; not a launcher config")
    values: dict = {}
    flags: set[str] = set()
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _DICT_OPTIONS or tok in _VALUE_OPTIONS:
            if i + 1 >= len(tokens):
                raise DataError(f"{p}: option {tok} has no value; the command line is truncated")
            raw = tokens[i + 1]
            values[tok] = _literal_dict(p, tok, raw) if tok in _DICT_OPTIONS else raw
            i += 2
            continue
        if tok in _FLAG_OPTIONS:
            flags.add(tok)
        i += 1
    if "--results-path" not in values:
        raise DataError(f"{p}: no --results-path in the command line")
    online = "--default-server-args" in values
    needed: tuple[str, ...] = (
        ("--default-server-args", "--default-benchmark-args", "--test-server-args")
        if online
        else ("--default-args", "--test-args")
    )
    missing = [o for o in needed if o not in values]
    if missing:
        raise DataError(f"{p}: missing option(s) {', '.join(missing)} in the launcher command line")
    test = values["--test-server-args"] if online else values["--test-args"]
    test_bench = values.get("--test-benchmark-args", {}) if online else {}
    for opt, d in (("test args", test), ("test benchmark args", test_bench)):
        for key, vals in d.items():
            if not isinstance(vals, list) or not vals:
                raise DataError(f"{p}: {opt} {key!r} is {vals!r}, expected a non-empty list of values")
    profiler = "ncu" if "--with-nsight-compute" in flags else ("nsys" if "--with-nsight" in flags else "none")
    return LaunchConfig(
        path=p,
        kind="online" if online else "offline",
        results_path=str(values["--results-path"]),
        default_args=dict(values["--default-server-args"] if online else values["--default-args"]),
        benchmark_args=dict(values.get("--default-benchmark-args", {})),
        test_args=dict(test),
        test_benchmark_args=dict(test_bench),
        env_vars=dict(values.get("--default-env-vars", {})),
        profiler=profiler,
    )
