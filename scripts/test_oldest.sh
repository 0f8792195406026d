#!/usr/bin/env bash
# The oldest supported stack: Python 3.9 with torch 2.7.1 (environment.yml's pins), tileops
# installed non-editable with `pip install --no-build-isolation .` (CPU kernels: this torch is
# CUDA 12, the machine's nvcc 13), then the test suite against the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
PY39=${TILEOPS_PY39:-}
if [ -z "$PY39" ]; then  # a pyenv shim may exist without a usable interpreter: try each candidate
  for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.9*/bin/python python3.9; do
    if "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 9)' 2>/dev/null; then PY39=$cand; break; fi
  done
fi
if [ -z "$PY39" ]; then
  echo "test_oldest: no Python 3.9 interpreter found (set TILEOPS_PY39); this leg did not run"
  exit 0
fi
VENV=$(realpath -m "${TILEOPS_OLDEST_VENV:-.venv-oldest}")  # absolute: the tests run from tests/
[ -x "$VENV/bin/python" ] || "$PY39" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "torch==2.7.1" setuptools wheel ninja pytest numpy pyyaml
TILEOPS_CPU_ONLY=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} "$VENV/bin/python" -m pip install -q --no-build-isolation .
cd tests  # import tileops from site-packages, not from the source tree
"$VENV/bin/python" -c "import tileops, torch; print('oldest stack:', tileops.build_info(), 'torch', torch.__version__)"
"$VENV/bin/python" -m pytest . -q -p no:cacheprovider "$@"
