#!/usr/bin/env bash
# Set up tileops from nothing on a Linux machine: a virtualenv in .venv with pinned torch and
# the test tools, then tileops built against that torch and installed in editable mode.
#   TORCH_CUDA_ARCH_LIST  which GPUs to build for (default: this machine's GPU, else 9.0)
#   TILEOPS_PYTHON        the interpreter to make the venv from (default: python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${TILEOPS_PYTHON:-python3}
TORCH_PIN="torch==2.11.0"  # PyPI's CUDA 13.0 build: its CUDA major must match nvcc's

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# ruff pinned: its import-sorting rules change between releases and CI lints with it.
# scikit-learn (its bundled digits data) and matplotlib (curves): examples/train.py and its test
.venv/bin/python -m pip install -q "$TORCH_PIN" setuptools wheel ninja pytest numpy pyyaml "ruff==0.17.6" scikit-learn matplotlib

if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  # build for the GPU that is here (Hopper: sm_90a); without one, for sm_90a, so all CUDA code compiles
  TORCH_CUDA_ARCH_LIST=$(.venv/bin/python -c "import torch; c = torch.cuda.get_device_capability() if torch.cuda.is_available() else (9, 0); print('%d.%d' % c + ('a' if c == (9, 0) else ''))")
  export TORCH_CUDA_ARCH_LIST
fi
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
.venv/bin/python -m pip install -v --no-build-isolation -e . 2>&1 | grep -E "tileops build|error|Error" || true
.venv/bin/python -c "import tileops; print('tileops', tileops.__version__, tileops.build_info())"
