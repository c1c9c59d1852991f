"""`scripts/bench_cli.py` runs in CI on a small size, so it cannot rot (its figures are not checked against the
targets here: speed is measured by the script, not by a timed test)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_cli_prints_every_figure():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_cli.py"), "--rows", "2000", "--repeats", "1"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"^slim --help: \d+\.\d+ s \(target <= 0.4 s\)$", out, re.M), out
    for kind in ("csv -> csv", "parquet -> parquet"):
        line = next(ln for ln in out.splitlines() if ln.startswith(f"slim predict {kind}: "))
        assert re.search(
            r"[\d,]+ rows/s end to end .* peak RSS \d+ MiB, -?\d+ MiB above start-up = -?\d+\.\d+x", line
        )
    assert re.search(
        r"^slim fit on 2,000 rows \([\d,]+ distinct configurations\): \d+\.\d+ s end to end", out, re.M
    )
