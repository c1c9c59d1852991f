#!/usr/bin/env bash
# Set up (virtualenv + install) and run the lint and the whole test suite. Extra arguments go to pytest.
source "$(dirname "$0")/_setup.sh"
echo "lint: ruff check + ruff format --check" >&2
ruff check .
ruff format --check .
python -m pytest "$@"
