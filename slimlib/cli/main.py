"""The `slim` command. Each area registers its subcommands through a `register_cli(subparsers)` function."""

from __future__ import annotations

import argparse
import importlib
import sys

from slimlib.errors import SlimError

# Modules providing `register_cli(subparsers)`; each adds its subcommands with their own --help and examples.
_REGISTRARS = [
    "slimlib.cli.fit",
    "slimlib.cli.data",
    "slimlib.cli.reproduce",
    "slimlib.cli.registry",
    "slimlib.cli.profile",
    "slimlib.cli.advise",
    "slimlib.cli.evaluate",
    "slimlib.cli.transfer",
    "slimlib.cli.peers",
]


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slim",
        description="SLIM: predict LLM serving throughput/latency saturation and advise a batch-size cap.",
        formatter_class=_Formatter,
        epilog="Run `slim COMMAND --help` for the options and examples of each command.",
    )
    parser.add_argument("--version", action="version", version=f"slim {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _REGISTRARS:
        importlib.import_module(name).register_cli(sub)
    return parser


def _version() -> str:
    from slimlib import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    """Entry point: run one subcommand; a SlimError becomes a one-line message and exit status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except SlimError as exc:
        print(f"slim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `slim models | head`
        return 0
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
