#!/usr/bin/env bash
# Install the `peers` extra (GenZ, llm-analysis, AIConfigurator) into its own virtualenv, .venv-peers, and run each
# peer adapter on a few rows (tests/test_peers.py). Separate from .venv: the peers pin their own dependencies.
# About 3.5 min on a cold pip cache (1.4 GB of packages), seconds when .venv-peers exists. `--install-only` as the
# first argument installs and stops (CI installs beside the reproduction and tests later).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
SLIM_TMP=$(mktemp -d "${TMPDIR:-/tmp}/slim-peers.XXXXXX")
trap 'rm -rf "$SLIM_TMP"' EXIT
export MPLCONFIGDIR="$SLIM_TMP/mpl" MPLBACKEND=Agg PIP_DISABLE_PIP_VERSION_CHECK=1
if [ "${CI:-}" = true ]; then export PIP_CACHE_DIR="$SLIM_TMP/pip"; fi
[ -x .venv-peers/bin/python ] || "$PY" -m venv .venv-peers
echo "setup: installing the peers extra into .venv-peers" >&2
.venv-peers/bin/python -m pip install -q -e '.[peers,dev]' > "$SLIM_TMP/pip.log" 2>&1 || { cat "$SLIM_TMP/pip.log" >&2; exit 1; }
if [ "${1:-}" = --install-only ]; then exit 0; fi
.venv-peers/bin/python -m pytest tests/test_peers.py -q -p no:cacheprovider "$@"
