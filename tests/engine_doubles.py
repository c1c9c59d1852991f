"""A stand-in for the CPU engine's interpreter, for the kernel micro-benchmark runners' tests."""

from __future__ import annotations

import json
import stat
import sys


def fake_engine(tmp_path, rows, rc=0):
    """An interpreter stand-in: prints a version for ``-c``, else `rows` as JSON lines, exits `rc`."""
    script = tmp_path / "fake-python"
    lines = "\n".join(json.dumps(r) for r in rows)
    script.write_text(f"#!{sys.executable}\nimport sys\nif sys.argv[1] == '-c':\n    print('0.0-test')\n"
                      f"else:\n    print('''{lines}''')\n    print('a log line', file=sys.stderr)\n    sys.exit({rc})\n",
                      encoding="utf-8")  # fmt: skip
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)
