"""The `slim` command. Each command group is one module of this package with a `register_cli(subparsers)`,
listed with its commands in `slimlib.cli.table.COMMANDS`; only the named command's module is imported."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
import warnings
from collections.abc import Sequence
from types import FrameType, ModuleType

from slimlib import __version__
from slimlib.cli import exit_while_starting
from slimlib.cli.table import COMMANDS, OUTPUTS_NOTE
from slimlib.errors import SlimError


def command_module(name: str) -> ModuleType:
    """The module of `slimlib.cli` named `name` in the command table (imported on first use)."""
    return importlib.import_module(f"slimlib.cli.{name}")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `slim` parser. With `argv`, only the module of the command `argv` names is imported, and every other
    command is listed by its help line alone (so `slim --help` imports no command module); without, every command
    module registers its commands (tests, documentation)."""
    parser = argparse.ArgumentParser(
        prog="slim",
        description="SLIM: predict LLM serving throughput/latency saturation and advise a batch-size cap.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `slim COMMAND --help` for the options and examples of each command.\n\n" + OUTPUTS_NOTE,
    )
    parser.add_argument("--version", action="version", version=f"slim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    if argv is None:
        wanted = {module for _, module, _ in COMMANDS}
    else:  # the top level has flags only, so the first other word is the command
        named = next((word for word in argv if not word.startswith("-")), None)
        wanted = {module for command, module, _ in COMMANDS if command == named}
    for command, module, help_line in COMMANDS:
        if module in wanted:
            command_module(module).register_cli(sub)  # adds all of the module's commands
            wanted.discard(module)
        elif command not in sub.choices:
            sub.add_parser(command, help=help_line)
    return parser


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM received while a command runs (raised by `main`'s handler, so outputs being written
    through `slimlib.io` remove their temporary file and keep the previous file)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _one_line_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    return f"slim: warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    """Entry point: run one subcommand. A SlimError becomes a one-line message and exit status 2; SIGINT (Ctrl-C)
    and SIGTERM exit with 128 + the signal number and one line, leaving every output being written through
    `slimlib.io` with its previous content and no temporary file. The handlers are restored on return."""
    on_main_thread = (
        threading.current_thread() is threading.main_thread()
    )  # handlers belong to the main thread
    signals = (signal.SIGINT, signal.SIGTERM) if on_main_thread else ()
    previous = {s: signal.signal(s, _raise_interrupted) for s in signals}
    command = "slim"
    formatwarning = warnings.formatwarning
    warnings.formatwarning = _one_line_warning  # a warning is one line, as an error is
    try:
        words = sys.argv[1:] if argv is None else argv
        args = build_parser(words).parse_args(words)
        command = f"slim {args.command}"
        rc = args.func(args)
    except SlimError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        name = signal.Signals(signum).name
        print(
            f"{command}: interrupted ({name}); outputs not finished keep their previous content",
            file=sys.stderr,
        )
        return 128 + int(signum)
    except BrokenPipeError:  # e.g. `slim models | head`
        return 0
    finally:
        warnings.formatwarning = formatwarning
        for s, handler in previous.items():  # the `slim` program is exiting: a late signal changes nothing
            signal.signal(s, signal.SIG_IGN if handler is exit_while_starting else handler)
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
