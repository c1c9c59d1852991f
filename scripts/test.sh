#!/usr/bin/env bash
# Set up (virtualenv + install) and run the lint and the whole test suite. Extra arguments go to pytest.
source "$(dirname "$0")/_setup.sh"
# The profiling-kit tests need PyTorch; a pinned release (a CPU build on the project's machines) is installed once.
# SLIM_TEST_TORCH=0 skips this, and those tests then report themselves as skipped.
if [ "${SLIM_TEST_TORCH:-1}" = 1 ] && ! "$VPY" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch==2.13.0 for the profiling-kit tests" >&2
  "$VPY" -m pip install -q "torch==2.13.0" 2> >(grep -v "^WARNING: Location" >&2)
fi
echo "lint: ruff check + ruff format --check" >&2
ruff check .
ruff format --check .
python -m pytest "$@"
