"""Print every audited bad input of `tests/test_bad_inputs.py` with the one line `slim` answers it with, as a
Markdown table (the list a reliability note gives).

    python scripts/bad_inputs_report.py > bad-inputs.md
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_bad_inputs import CASES  # noqa: E402

from slimlib.cli.main import main  # noqa: E402


def answer(case) -> tuple[object, str]:
    """The exit status and the first error line of `case`, run in a fresh temporary folder."""
    err = io.StringIO()
    with (
        tempfile.TemporaryDirectory() as d,
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.TextIOWrapper(io.BytesIO())),
    ):
        try:
            rc: object = main(case.argv(Path(d)))
        except SystemExit as exc:
            rc = exc.code
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip() and "warning:" not in ln]
    return rc, lines[0].replace(d, "TMP") if lines else "(no message)"


def main_report() -> None:
    print("| case | exit | message |")
    print("|---|---|---|")
    for case in CASES:
        rc, line = answer(case)
        print(f"| {case.name} | {rc} | `{line.replace('|', '/')}` |", flush=True)


if __name__ == "__main__":
    main_report()
