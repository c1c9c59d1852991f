"""Issue 20: SIGINT and SIGTERM at any moment of a `slim` run (while it imports, reads, predicts or writes a large
output) leave the previous output intact, no temporary file behind, and one line on standard error."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from synthetic import TRUE_PARAMS

from slimlib.model import SlimModel

#: run as the `slim` program (the import-time handler is installed for that name only)
LAUNCH = "import sys; sys.argv[0] = 'slim'; from slimlib.cli.main import main; sys.exit(main())"
ROWS = 300_000
TRIALS = 8
#: the interpreter's own start (before `slimlib.cli` installs its handler) on a loaded 2-core machine, seconds
STARTUP_S = 0.5


def _inputs(tmp: Path) -> tuple[Path, Path]:
    params = tmp / "params.json"
    params.write_text(SlimModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb").to_json())
    rng = np.random.default_rng(0)
    grid = tmp / "grid.csv"
    pd.DataFrame(
        {
            "model": rng.choice(["opt-125m", "opt-1.3b"], ROWS),
            "batch_size": rng.integers(1, 64, ROWS),
            "input_len": rng.integers(16, 512, ROWS),
            "output_len": rng.integers(16, 512, ROWS),
        }
    ).to_csv(grid, index=False)
    return params, grid


def test_signals_at_random_moments_keep_the_previous_output(tmp_path):
    params, grid = _inputs(tmp_path)
    out = tmp_path / "pred.csv"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    argv = [sys.executable, "-c", LAUNCH, "predict", str(params), str(grid), "--out", str(out)]
    t0 = time.perf_counter()
    first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    full_s = time.perf_counter() - t0
    assert first.returncode == 0, first.stderr
    rng = random.Random(20)  # seeded moments and signals
    outcomes = []
    for trial in range(TRIALS):
        previous = f"previous output {trial}\n"
        out.write_text(previous)
        sig = rng.choice([signal.SIGINT, signal.SIGTERM])
        delay = rng.uniform(0.0, full_s * 1.1)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=300)
        leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
        assert not leftovers, f"trial {trial} ({sig.name} at {delay:.2f} s): left {leftovers}"
        if proc.returncode == -sig or (proc.returncode == 1 and "KeyboardInterrupt" in err):
            # the signal came while the interpreter itself was starting, before slimlib's first line ran (only
            # possible in the first moments): the default action ended it, and nothing had been opened
            assert delay < STARTUP_S, (
                f"trial {trial}: {sig.name} at {delay:.2f} s ended slim by default: {err}"
            )
            assert out.read_text() == previous
            outcomes.append("before start")
            continue
        assert "Traceback" not in err, f"trial {trial} ({sig.name} at {delay:.2f} s): {err}"
        if proc.returncode == 0:  # the signal came after the output was complete
            assert len(out.read_text().splitlines()) == ROWS + 1
            outcomes.append("finished")
            continue
        assert proc.returncode == 128 + sig, (trial, sig.name, delay, proc.returncode, err)
        assert out.read_text() == previous, f"trial {trial}: the previous output changed"
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and "interrupted" in lines[0], err
        outcomes.append("interrupted")
    assert outcomes.count("interrupted") >= TRIALS // 2, outcomes  # most signals hit a running command
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes))
