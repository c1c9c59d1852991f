#!/usr/bin/env bash
# Set up (virtualenv + install) and run the lint and the whole test suite. Extra arguments go to pytest.
source "$(dirname "$0")/_setup.sh"
# The profiling-kit tests need PyTorch: the CPU build of a pinned release (PyPI's default Linux wheel is the
# multi-GB CUDA build), installed once. SLIM_TEST_TORCH=0 skips this, and those tests then report themselves as skipped.
if [ "${SLIM_TEST_TORCH:-1}" = 1 ] && ! "$VPY" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch==2.13.0+cpu for the profiling-kit tests" >&2
  "$VPY" -m pip install -q -c "$CONSTRAINTS" "torch==2.13.0+cpu" --extra-index-url https://download.pytorch.org/whl/cpu \
    --retries 1 --timeout 15 2> >(grep -v -e "^WARNING: Location" -e "^WARNING: Retrying" >&2)
fi
# CI checks the generated Slurm scripts with shellcheck too (elsewhere that one test skips, saying so).
if [ "${CI:-}" = true ] && ! command -v shellcheck >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "setup: installing shellcheck (Debian package) for the generated-script checks" >&2
  { apt-get update -qq && apt-get install -y -qq shellcheck; } >"$SLIM_TMP/apt.log" 2>&1 || cat "$SLIM_TMP/apt.log" >&2
fi
echo "lint: ruff check + ruff format --check; types: mypy slimlib" >&2
ruff check .
ruff format --check .
mypy slimlib
# Two workers (pytest-xdist, the dev extra): the suite takes about half the time on a 2-core machine.
# SLIM_TEST_WORKERS=0 runs it in one process.
python -m pytest -n "${SLIM_TEST_WORKERS:-2}" "$@"
