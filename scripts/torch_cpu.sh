#!/usr/bin/env bash
# Install the CPU build of PyTorch pinned in requirements/constraints.txt into .venv (or $SLIM_VENV) for the
# profiling-kit tests, unless it imports already (PyPI's default Linux wheel is the multi-GB CUDA build).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${SLIM_VENV:-.venv}
VPY="$VENV/bin/python"
if ! "$VPY" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch==2.13.0+cpu for the profiling-kit tests" >&2
  "$VPY" -m pip install -q -c requirements/constraints.txt "torch==2.13.0+cpu" \
    --extra-index-url https://download.pytorch.org/whl/cpu --retries 1 --timeout 15 \
    2> >(grep -v -e "^WARNING: Location" -e "^WARNING: Retrying" >&2)
fi
