#!/usr/bin/env bash
# Set up (virtualenv + install) and reproduce every figure and table: runs all notebooks through papermill.
# Extra arguments go to `slim reproduce` (e.g. --only 01 03, --quick).
source "$(dirname "$0")/_setup.sh"
slim reproduce "$@"
