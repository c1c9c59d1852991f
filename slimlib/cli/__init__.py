"""The `slim` command line (see `slimlib.cli.main`).

Started as the `slim` program, an interrupt (SIGINT, SIGTERM) while the command modules are still being imported
exits at once with a one-line message and no traceback (nothing has been written yet); `main` then installs the
handlers that leave outputs intact, and after its work ignores them (the process is exiting; nothing is left to
protect).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import FrameType


def exit_while_starting(signum: int, frame: FrameType | None) -> None:
    print("slim: interrupted while starting; nothing was written", file=sys.stderr)
    raise SystemExit(128 + signum)


if Path(sys.argv[0]).name == "slim":  # the console script, not a library import
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, exit_while_starting)
