#!/usr/bin/env bash
# The one prepared command for a lent GPU machine (run from the repository root):
#   installs slimlib with the profiling extra, checks the GPU with nvidia-smi, runs the budgeted measurement
#   campaign (`slim profile campaign`; its Nsight Compute points run when ncu is found), builds the tidy tables,
#   and leaves at most a handful of files in $OUT (kit.tar.gz holds everything).
# usage:  OUT=/path/to/out scripts/device_campaign.sh [BUDGET_S]      (default budget 420 s, OUT=./kit-out)
# What it measures is slimlib's minimal PyTorch engine with random weights, not vLLM.
set -euo pipefail

BUDGET_S="${1:-${BUDGET_S:-420}}"
OUT="${OUT:-$PWD/kit-out}"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d)"
mkdir -p "$OUT"
exec > >(tee "$OUT/device_campaign.log") 2>&1

echo "== GPU"
if ! command -v nvidia-smi >/dev/null; then
  echo "nvidia-smi not found: this script needs an NVIDIA GPU machine" >&2
  exit 3
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.memory --format=csv

echo "== install"
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  # torch with CUDA is already there (machines without network): install slimlib alone, keep that torch
  "$PY" -m pip install -q --no-build-isolation --no-deps -e . || "$PY" -m pip install -q --no-deps -e .
  "$PY" -m pip install -q --retries 0 --timeout 10 -e . >/dev/null 2>&1 || true  # light deps, if reachable
else
  "$PY" -m pip install -q -e ".[profiling]"
fi
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"

echo "== ncu"
if ! command -v ncu >/dev/null; then
  for d in /usr/local/cuda/bin /opt/nvidia/nsight-compute/*/ /usr/local/cuda-*/bin; do
    if [ -x "$d/ncu" ]; then export PATH="$d:$PATH"; break; fi
  done
fi
if command -v ncu >/dev/null; then ncu --version | tail -1; else echo "ncu not found: counter points will be skipped"; fi

echo "== campaign (budget ${BUDGET_S} s)"
"$PY" -m slimlib.cli.main profile campaign --budget-s "$BUDGET_S" --out "$WORK/kit-raw" || echo "campaign exit $?"

echo "== tidy"
"$PY" -m slimlib.cli.main profile tidy "$WORK/kit-raw" --out "$WORK/kit-tidy" || echo "tidy exit $?"

tar -czf "$OUT/kit.tar.gz" -C "$WORK" kit-raw $( [ -d "$WORK/kit-tidy" ] && echo kit-tidy )
cp "$WORK/kit-raw/manifest.json" "$OUT/" 2>/dev/null || true
cp "$WORK/kit-tidy/kit-runs.csv" "$OUT/" 2>/dev/null || true
ls -la "$OUT"
