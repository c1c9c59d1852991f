#!/usr/bin/env bash
# Install the `peers` extra (GenZ, llm-analysis, AIConfigurator) into its own virtualenv, .venv-peers, and run each
# peer adapter on a few rows (tests/test_peers.py). Separate from .venv: the peers pin their own dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
[ -x .venv-peers/bin/python ] || "$PY" -m venv .venv-peers
.venv-peers/bin/python -m pip install -q -e '.[peers,dev]' 2> >(grep -v "^WARNING: Location" >&2)
exec .venv-peers/bin/python -m pytest tests/test_peers.py -q -p no:cacheprovider "$@"
