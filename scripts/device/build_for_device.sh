#!/usr/bin/env bash
# Build tileops on this machine (no GPU needed) for the lent GPU machine, so its device minutes go
# to tests and timings rather than to the build: Python 3.12 and torch 2.11.0 (CUDA 13.0) as there,
# sm_90a only; the extension stripped and xz-compressed into .carry/_C.so.xz (the device tool
# carries at most 64 MiB with the tree, 38 of them tracked files; with nvcc's default fatbin
# compression the carry had grown to 29 MiB, which no longer fit). On the device, `run` with carry [".carry"] and a command that starts with
#   python3 -c "import lzma, shutil; shutil.copyfileobj(lzma.open('.carry/_C.so.xz'),
#     open('python/tileops/_C.cpython-312-x86_64-linux-gnu.so', 'wb'))" &&
# then scripts/device/gpu_focus.sh (or SKIP_BUILD=1 scripts/device/gpu_run.sh). A first build takes ~25 min on 2
# cores; later ones rebuild what changed (build/ is kept).
#   DEVICE_PYTHON  a Python 3.12 interpreter (default: python3.12, else pyenv's 3.12)
#   DEVICE_VENV    the virtualenv to build in (default .venv-device)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${DEVICE_PYTHON:-}
if [ -z "$PY" ]; then
  for p in python3.12 ~/.pyenv/versions/3.12*/bin/python3.12; do
    if "$p" -V > /dev/null 2>&1; then PY=$p; break; fi
  done
fi
[ -n "$PY" ] || { echo "no Python 3.12 found: set DEVICE_PYTHON"; exit 1; }
VENV=${DEVICE_VENV:-.venv-device}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q torch==2.11.0 setuptools wheel ninja numpy
# --compress-mode=size: the fatbins at nvcc's strongest compression (half the default's size, and
# xz cannot shrink either much further), or the carry no longer fits beside the tracked files
TORCH_CUDA_ARCH_LIST=9.0a FORCE_CUDA=1 NVCC_FLAGS="--compress-mode=size ${NVCC_FLAGS:-}" MAX_JOBS=${MAX_JOBS:-$(nproc)} PATH="$PWD/$VENV/bin:$PATH" \
  "$VENV/bin/python" setup.py build_ext --inplace > build_for_device.log 2>&1 || { tail -30 build_for_device.log; exit 1; }
grep "tileops build" build_for_device.log
mkdir -p .carry
strip --strip-debug -o .carry/_C.so python/tileops/_C.cpython-312-x86_64-linux-gnu.so
rm -f .carry/_C.so.gz .carry/_C.so.xz
xz -9 -T0 .carry/_C.so
ls -la .carry/_C.so.xz
