#!/usr/bin/env bash
# The type check of scripts/test.sh (mypy slimlib), alone, in the project's environment: .ci/run runs it beside the
# reproduction, and scripts/test.sh then skips it (SLIM_TYPES_CHECKED=1).
source "$(dirname "$0")/_setup.sh"
mypy slimlib
