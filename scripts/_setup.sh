# Sourced by scripts/test.sh and scripts/reproduce.sh: create .venv (or $SLIM_VENV) and install slimlib into it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "SLIM needs Python 3.11 or newer (set PYTHON=...)")'
# Caches and tool state go to a temporary folder, never into the checkout or ../shared; it is removed on exit.
SLIM_TMP=$(mktemp -d "${TMPDIR:-/tmp}/slim.XXXXXX")
trap 'rm -rf "$SLIM_TMP"' EXIT
export MPLCONFIGDIR="$SLIM_TMP/mpl" MPLBACKEND=Agg
export IPYTHONDIR="$SLIM_TMP/ipython" JUPYTER_RUNTIME_DIR="$SLIM_TMP/jupyter-runtime"
# under CI the pip cache and the cross-validation's fit cache live in the temporary folder (a run from scratch)
if [ "${CI:-}" = true ]; then export PIP_CACHE_DIR="$SLIM_TMP/pip" SLIM_CACHE_DIR="$SLIM_TMP/cache"; fi
VENV=${SLIM_VENV:-.venv}
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1
# Exact versions of the environment that made figures/ (pyproject.toml keeps ranges for library users).
CONSTRAINTS="$PWD/requirements/constraints.txt"
# Install (editable) unless this venv already holds an install made from the same pyproject.toml and constraints.
STAMP="$VENV/.slim-installed"
WANT=$("$VPY" -c 'import hashlib; print(hashlib.sha256(open("pyproject.toml", "rb").read() + open("requirements/constraints.txt", "rb").read()).hexdigest())')
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ] || ! "$VPY" -c "import slimlib" 2>/dev/null; then
  echo "setup: installing slimlib and its dependencies into $VENV" >&2
  "$VPY" -m pip install -q -c "$CONSTRAINTS" -e ".[dev,notebooks,engine]" > "$SLIM_TMP/pip.log" 2>&1 || { cat "$SLIM_TMP/pip.log" >&2; exit 1; }
  echo "$WANT" > "$STAMP"
fi
# Jupyter and plain papermill run the notebooks at the numerics level `slim reproduce` sets: the environment's
# python3 kernel spec carries it (slimlib.experiments.outputs.numerics.install_kernel)
grep -qs OPENBLAS_CORETYPE "$VENV/share/jupyter/kernels/python3/kernel.json" \
  || "$VPY" -m slimlib.experiments.outputs.numerics > /dev/null
export PATH="$VENV/bin:$PATH"
