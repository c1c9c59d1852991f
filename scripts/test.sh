#!/usr/bin/env bash
# Set up (virtualenv + install) and run the lint and the whole test suite. Extra arguments go to pytest.
source "$(dirname "$0")/_setup.sh"
# The profiling-kit tests need PyTorch's CPU build, installed once; SLIM_TEST_TORCH=0 skips this, and those tests
# then report themselves as skipped.
if [ "${SLIM_TEST_TORCH:-1}" = 1 ]; then SLIM_VENV="$VENV" bash scripts/torch_cpu.sh; fi
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
