"""Whether this checkout's notebooks were just run in full by a reproduction that left every output as committed.

`.ci/run` sets ``SLIM_REPRODUCED_TREE`` to the git tree it reproduced once `scripts/reproduce.sh` has run every
notebook in full and found each committed output unchanged. Where the checkout is still that tree, unmodified, the
notebook tests read the committed ``figures/`` instead of running the notebooks again (`notebook_outputs`), and
the ones whose checks only a fresh run can make say so and skip (`skip_if_reproduced`).
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from slimlib.experiments.outputs.runner import run_notebooks

ROOT = Path(__file__).resolve().parents[1]
ENV = "SLIM_REPRODUCED_TREE"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


@functools.cache
def reproduced_tree(root: Path = ROOT, want: str | None = None) -> str | None:
    """The tree named by `want` (default ``SLIM_REPRODUCED_TREE``) where the checkout `root` is that tree with
    nothing changed or added; None otherwise (no tree named, another tree, or a change since). Cached: read once
    per process."""
    want = (os.environ.get(ENV, "") if want is None else want).strip()
    if not want:
        return None
    try:
        same = _git(root, "rev-parse", "HEAD^{tree}").strip() == want
        clean = not _git(root, "status", "--porcelain", "--untracked-files=all").strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return want if same and clean else None


def _reason(tree: str) -> str:
    return (
        f"this tree ({tree[:12]}) was just reproduced in full with every committed output unchanged ({ENV})"
    )


def skip_if_reproduced(what: str) -> None:
    """Skip, naming `what` the test would have checked, where `reproduced_tree` holds."""
    tree = reproduced_tree()
    if tree:
        pytest.skip(f"{what}: {_reason(tree)}")


def run_quick(number: str, out: Path) -> Path:
    """Notebook `number` in quick mode through the runner `slim reproduce` uses, into `out`; its figures folder."""
    figures = out / "figures"
    run_notebooks(ROOT / "notebooks", build_dir=out / "build", figures_dir=figures, only=[number],
                  parameters={"quick": True}, progress=False)  # fmt: skip
    return figures


def notebook_outputs(tmp_path: Path) -> Callable[[str], Path]:
    """``run(number)`` -> the folder of notebook `number`'s outputs: the committed ``figures/`` where
    `reproduced_tree` holds, else `run_quick` into `tmp_path`."""
    return lambda number: ROOT / "figures" if reproduced_tree() else run_quick(number, tmp_path)
