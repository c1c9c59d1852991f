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
from typing import NoReturn

from slimlib import __version__
from slimlib.cli import AS_PROGRAM, exit_interrupted, exit_while_starting
from slimlib.cli.table import COMMANDS, OUTPUTS_NOTE
from slimlib.errors import (
    Interrupted,
    SlimError,
    check_interrupted,
    clear_interrupt,
    interrupt_received,
    interrupts_deferred,
    note_interrupt,
)


def command_module(name: str) -> ModuleType:
    """The module of `slimlib.cli` named `name` in the command table (imported on first use)."""
    return importlib.import_module(f"slimlib.cli.{name}")


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (as every `slim` error is), pointing at ``--help``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `slim` parser. With `argv`, only the module of the command `argv` names is imported, and every other
    command is listed by its help line alone (so `slim --help` imports no command module); without, every command
    module registers its commands (tests, documentation)."""
    parser = OneLineParser(
        prog="slim",
        description="SLIM: predict LLM serving throughput/latency saturation and advise a batch-size cap.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `slim COMMAND --help` for the options and examples of each command.\n\n" + OUTPUTS_NOTE,
    )
    parser.add_argument("--version", action="version", version=f"slim {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the Python traceback of an unexpected error (for a bug report)",
    )
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


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    """The handler: record the signal (so no output is committed after it: `slimlib.errors.check_interrupted`), then
    raise `Interrupted` to stop the work at once, unless an output is being committed (`interrupts_deferred`: the
    commit finishes, and the next `check_interrupted` raises)."""
    note_interrupt(signum)
    if not interrupts_deferred():
        raise Interrupted(signum)


def _quiet_interrupted(hook: object) -> object:
    """A `sys.unraisablehook` that drops an `Interrupted` raised where it cannot propagate (a finalizer's
    ``__del__``, a Cython function that cannot raise): the signal is recorded, and the command stops at its next
    check instead of printing ``Exception ignored in ...``."""

    def unraisable(info: object) -> None:
        if isinstance(getattr(info, "exc_value", None), Interrupted):
            return
        hook(info)  # type: ignore[operator]

    return unraisable


def _quiet_interrupted_traceback(hook: object) -> object:
    """A `sys.excepthook` that prints nothing for `Interrupted`: Cython prints an exception it cannot propagate
    through it (e.g. inside scipy's Sobol initialisation) before it reports it as unraisable."""

    def excepthook(kind: type[BaseException], value: BaseException, tb: object) -> None:
        if isinstance(value, Interrupted):
            return
        hook(kind, value, tb)  # type: ignore[operator]

    return excepthook


def _one_line_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    return f"slim: warning: {message}\n"


def _once_per_message(show):  # noqa: ANN001, ANN202
    """`warnings.showwarning` that shows each distinct (category, message) once per command."""
    seen: set[tuple[type[Warning], str]] = set()

    def showwarning(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001, ANN202
        key = (category, str(message))
        if key not in seen:
            seen.add(key)
            show(message, category, filename, lineno, file, line)

    return showwarning


def main(argv: list[str] | None = None) -> int:
    """Entry point: run one subcommand (`run`); as the `slim` program, an interrupted command exits at once
    (`slimlib.cli.exit_interrupted`)."""
    rc = run(argv)
    if AS_PROGRAM and argv is None and rc >= 128:  # only `_interrupted` returns 128 + a signal
        exit_interrupted(rc)
    return rc


def run(argv: list[str] | None = None) -> int:
    """Run one subcommand. A SlimError becomes a one-line message and exit status 2, any other exception one line
    that points at ``slim --debug`` (which shows its traceback) and exit status 1; SIGINT (Ctrl-C)
    and SIGTERM exit with 128 + the signal number and one line, leaving every output being written through
    `slimlib.io` with its previous content and no temporary file. A signal whose exception was swallowed (inside a
    finalizer) or turned into another error (an import cut short) ends the command the same way: the handler
    records it, and no output is committed after it. The handlers are restored on return."""
    on_main_thread = (
        threading.current_thread() is threading.main_thread()
    )  # handlers belong to the main thread
    signals = (signal.SIGINT, signal.SIGTERM) if on_main_thread else ()
    clear_interrupt()
    previous = {s: signal.signal(s, _raise_interrupted) for s in signals}
    unraisablehook, excepthook = sys.unraisablehook, sys.excepthook
    sys.unraisablehook = _quiet_interrupted(unraisablehook)  # type: ignore[assignment]
    sys.excepthook = _quiet_interrupted_traceback(excepthook)  # type: ignore[assignment]
    command = "slim"
    debug = False
    formatwarning, showwarning = warnings.formatwarning, warnings.showwarning
    warnings.formatwarning = _one_line_warning  # a warning is one line, as an error is
    warnings.showwarning = _once_per_message(showwarning)
    try:
        words = sys.argv[1:] if argv is None else argv
        debug = (
            "--debug" in words[: next((i for i, w in enumerate(words) if not w.startswith("-")), len(words))]
        )
        args = build_parser(words).parse_args(words)
        command, debug = f"slim {args.command}", bool(args.debug)
        rc = args.func(args)
        check_interrupted()  # a signal whose exception a finalizer swallowed still ends the command as one
    except KeyboardInterrupt as exc:
        return _interrupted(command, exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    except SlimError as exc:
        if interrupt_received() is not None:
            return _interrupted(command, interrupt_received())
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `slim models | head`
        return 0
    except Exception as exc:
        signum = interrupt_received()
        if signum is not None:  # e.g. an import cut short by the signal fails with another error
            return _interrupted(command, signum)
        if debug:
            raise
        text = " ".join(str(exc).split())
        print(
            f"{command}: unexpected error ({type(exc).__name__}: {text[:200]}); this is a bug in slim: rerun as "
            "`slim --debug ...` for the traceback and report it",
            file=sys.stderr,
        )
        return 1
    finally:
        clear_interrupt()  # reported (or none): later library calls in this process commit their outputs again
        sys.unraisablehook, sys.excepthook = unraisablehook, excepthook
        warnings.formatwarning, warnings.showwarning = formatwarning, showwarning
        for s, handler in previous.items():  # the `slim` program is exiting: a late signal changes nothing
            signal.signal(s, signal.SIG_IGN if handler is exit_while_starting else handler)
    return int(rc or 0)


def _interrupted(command: str, signum: int | None) -> int:
    """The one line and exit status (128 + the signal number) of an interrupted command."""
    sig = signal.Signals(signum if signum is not None else signal.SIGINT)
    if threading.current_thread() is threading.main_thread():  # a second signal must not cut the line short
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
    print(
        f"{command}: interrupted ({sig.name}); outputs not finished keep their previous content",
        file=sys.stderr,
    )
    return 128 + int(sig)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
