"""The `slim` command's one convention: a module per command group with `register_cli(subparsers)`, handlers
named `_cmd_<name>`, imports at module top, and help texts whose examples parse."""

from __future__ import annotations

import argparse
import ast
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from slimlib.cli import main as main_module
from slimlib.cli.main import build_parser
from slimlib.cli.table import COMMANDS

CLI_DIR = Path(main_module.__file__).parent
SUPPORT_MODULES = {"__init__", "main", "common", "table"}
#: The only function-local imports allowed: optional heavy packages whose import is the feature check.
OPTIONAL_IMPORTS = {
    ("cmd_profile", "torch"),
    ("cmd_advise", "slimlib.experiments.bca.advisor_figures"),
    ("cmd_advise", "slimlib.experiments.outputs.plotting"),
}


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


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


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


def test_the_command_table_lists_every_module_with_the_commands_it_registers():
    modules = _command_modules()
    assert {
        f"cmd_{n}" for n in ("fit", "data", "reproduce", "registry", "profile", "advise", "evaluate")
    } <= set(modules)
    assert {module for _, module, _ in COMMANDS} == set(modules), (
        "add each cli module to slimlib/cli/table.py"
    )
    for module in modules:
        sub = argparse.ArgumentParser().add_subparsers()
        main_module.command_module(module).register_cli(sub)
        table = [(command, help_line) for command, owner, help_line in COMMANDS if owner == module]
        registered = [(a.dest, a.help) for a in sub._choices_actions]
        assert registered == table, f"{module}: commands and help lines differ from slimlib/cli/table.py"


def test_a_named_command_imports_only_its_module_and_help_lists_all_commands():
    full = build_parser()
    assert build_parser(["--help"]).format_help() == full.format_help()
    for command, module, _ in COMMANDS:
        parser = build_parser(["-h", command, "--flag"])
        choices = _subcommands(parser)
        assert list(choices) == [c for c, _, _ in COMMANDS]
        for other, owner, _ in COMMANDS:  # the module's own commands are whole, the others are listed only
            whole = owner == module
            assert (
                choices[other].get_default("func") is not None or bool(_subcommands(choices[other]))
            ) == whole
        assert choices[command].format_help() == _subcommands(full)[command].format_help()


def test_slim_help_imports_no_command_module_nor_numerical_library():
    code = (
        "import sys\n"
        "from slimlib.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as exc:\n    assert exc.code == 0\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'pandas', 'numpy', 'pyarrow', 'scipy',"
        " 'matplotlib', 'statsmodels'} or m.startswith('slimlib.cli.cmd_'))\n"
        "print('IMPORTED', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "usage: slim" in out and "IMPORTED []" in out, out[-500:]


@pytest.mark.parametrize("command", ["fit", "predict", "advise"])
def test_the_users_commands_import_no_experiment_nor_plotting(command):
    """`slim fit`, `predict` and `advise` import what they use: no `slimlib.experiments` module, no matplotlib
    (measured by `python -X importtime`, which lists every module a command's import loads)."""
    code = f"from slimlib.cli.main import build_parser; build_parser([{command!r}])"
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    )
    loaded = {
        line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")
    }
    heavy = sorted(
        m for m in loaded if m.startswith("slimlib.experiments") or m.split(".")[0] == "matplotlib"
    )
    assert not heavy and "slimlib.model" in loaded, heavy[:10]


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
