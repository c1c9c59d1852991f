"""The `slim` command's one convention: a module per command group with `register_cli(subparsers)`, handlers
named `_cmd_<name>`, imports at module top, and help texts whose examples parse."""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from slimlib.cli import main as main_module
from slimlib.cli.main import build_parser

CLI_DIR = Path(main_module.__file__).parent
SUPPORT_MODULES = {"__init__", "main", "common"}
#: The only function-local imports allowed: optional heavy packages whose import is the feature check.
OPTIONAL_IMPORTS = {("cmd_profile", "torch")}


def _command_modules() -> list[str]:
    return sorted(p.stem for p in CLI_DIR.glob("*.py") if p.stem not in SUPPORT_MODULES)


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser, str | None]]:
    """Every (command path, parser, help line) below `parser`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), sub, helps.get(name)
                yield from _parsers(sub, (*path, name))


def _example_commands() -> Iterator[tuple[tuple[str, ...], list[str]]]:
    for path, sub, _ in _parsers(build_parser()):
        for line in (sub.epilog or "").splitlines():
            line = line.strip()
            if not line.startswith("slim "):
                continue
            line = re.split(r"\s+#\s", line)[0]  # trailing comment
            for command in re.split(r"\s*(?:&&|;|\|)\s*", line):
                command = command.split(" > ")[0]
                if command.startswith("slim "):
                    yield path, shlex.split(command)[1:]


def test_every_command_module_registers_and_main_imports_it():
    modules = _command_modules()
    assert {
        f"cmd_{n}" for n in ("fit", "data", "reproduce", "registry", "profile", "advise", "evaluate")
    } <= set(modules)
    imported = {m.__name__.rsplit(".", 1)[1] for m in main_module.COMMAND_MODULES}
    assert imported == set(modules), "add each cli module to COMMAND_MODULES in slimlib/cli/main.py"
    for module in main_module.COMMAND_MODULES:
        assert callable(module.register_cli), module.__name__
    source = (CLI_DIR / "main.py").read_text()
    assert "importlib" not in source  # explicit imports, no list of module-name strings


def test_every_command_has_help_an_epilog_with_examples_and_a_cmd_handler():
    for path, sub, help_line in _parsers(build_parser()):
        assert help_line, f"slim {' '.join(path)}: no help line in `slim --help`"
        assert sub.epilog and "examples:" in sub.epilog, f"slim {' '.join(path)}: no epilog with examples"
        has_children = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
        if not has_children:
            func = sub.get_default("func")
            assert func is not None and func.__name__ == f"_cmd_{path[-1].replace('-', '_')}", path


def test_imports_are_at_module_top():
    found = set()
    for path in CLI_DIR.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import):
                        found |= {(path.stem, alias.name) for alias in inner.names}
                    elif isinstance(inner, ast.ImportFrom):
                        found.add((path.stem, inner.module or ""))
    assert found == OPTIONAL_IMPORTS


def test_every_help_example_parses():
    parser = build_parser()
    examples = list(_example_commands())
    assert len(examples) >= 30
    for _, argv in examples:
        args = parser.parse_args(argv)  # exits (fails the test) on any unknown or malformed option
        assert callable(args.func)
    for path, sub, _ in _parsers(parser):  # each command's epilog shows the command itself
        if sub.get_default("func") is not None:
            own = [argv for where, argv in examples if where == path and argv[: len(path)] == list(path)]
            assert own, f"slim {' '.join(path)}: no example of itself"


@pytest.mark.parametrize("argv", [["--help"], ["fit", "--help"], ["data", "ingest", "--help"]])
def test_help_exits_zero(argv, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 0 and "usage: slim" in capsys.readouterr().out
