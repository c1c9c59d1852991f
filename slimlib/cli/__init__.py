"""The `slim` command line (see `slimlib.cli.main`).

Started as the `slim` program, an interrupt (SIGINT, SIGTERM) while the command modules are still being imported
exits at once with a one-line message and no traceback (nothing has been written yet); `main` then installs the
handlers that leave outputs intact, and after its work ignores them (the process is exiting; nothing is left to
protect). An interrupted program exits without the interpreter's finalization (`exit_interrupted`).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType


def exit_while_starting(signum: int, frame: FrameType | None) -> None:
    print("slim: interrupted while starting; nothing was written", file=sys.stderr)
    raise SystemExit(128 + signum)


#: started as the `slim` program (the console script), not imported as a library
AS_PROGRAM = Path(sys.argv[0]).name == "slim"


def exit_interrupted(rc: int) -> None:
    """End the interrupted `slim` program with `rc` at once: its outputs are settled and its line printed, and the
    interpreter's finalization is skipped: after a signal early in a run (while extensions are still being imported)
    it aborted the process once in CI (``Fatal Python error: ... finalizing``, exit -6) instead of exiting with
    `rc`."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(rc)


if AS_PROGRAM:
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, exit_while_starting)
