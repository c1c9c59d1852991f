"""The `slim` command. Each command group is one module of this package with a `register_cli(subparsers)`."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import warnings
from types import FrameType

from slimlib import __version__
from slimlib.cli import (
    cmd_advise,
    cmd_bench,
    cmd_data,
    cmd_evaluate,
    cmd_fit,
    cmd_peers,
    cmd_profile,
    cmd_registry,
    cmd_reproduce,
    cmd_transfer,
    exit_while_starting,
)
from slimlib.cli.common import OUTPUTS_NOTE
from slimlib.errors import SlimError

#: The command modules, in the order their commands appear in `slim --help`.
COMMAND_MODULES = (
    cmd_fit,
    cmd_advise,
    cmd_transfer,
    cmd_registry,
    cmd_data,
    cmd_evaluate,
    cmd_peers,
    cmd_reproduce,
    cmd_profile,
    cmd_bench,
)


def build_parser() -> argparse.ArgumentParser:
    """The `slim` parser with every command module's subcommands."""
    parser = argparse.ArgumentParser(
        prog="slim",
        description="SLIM: predict LLM serving throughput/latency saturation and advise a batch-size cap.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `slim COMMAND --help` for the options and examples of each command.\n\n" + OUTPUTS_NOTE,
    )
    parser.add_argument("--version", action="version", version=f"slim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMAND_MODULES:
        module.register_cli(sub)
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
        parser = build_parser()
        args = parser.parse_args(argv)
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
