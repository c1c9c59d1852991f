"""The `slim` command. Each command group is one module of this package with a `register_cli(subparsers)`."""

from __future__ import annotations

import argparse
import sys

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


def main(argv: list[str] | None = None) -> int:
    """Entry point: run one subcommand. A SlimError becomes a one-line message and exit status 2; Ctrl-C exits
    with status 130 (an output being written through slimlib.io keeps its previous content)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except SlimError as exc:
        print(f"slim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"slim {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `slim models | head`
        return 0
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
