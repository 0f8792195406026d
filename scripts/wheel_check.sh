#!/usr/bin/env bash
# CI's wheel leg: build a tileops wheel once, from a clean copy of the tree, with .venv's torch
# (the CPU kernels only, so no second CUDA build: TILEOPS_CPU_ONLY=1), install it into a fresh
# virtualenv with no CUDA toolkit on PATH and no source tree on sys.path, then `import tileops`,
# the doctor, the import guard against another torch, and the CPU suite against the installed wheel.
#   needs .venv (scripts/setup.sh); extra arguments go to pytest; TILEOPS_WHEEL_KEEP=dir keeps the wheel
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_PY=$ROOT/.venv/bin/python
if [ ! -x "$BUILD_PY" ]; then
  echo "wheel_check: no .venv here; run scripts/setup.sh (or scripts/test.sh) first" >&2
  exit 1
fi
SECONDS=0
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tileops-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src" "$WORK/dist" "$WORK/run"

# 1. A clean copy: tracked and untracked-but-not-ignored files, so no _C.so, build/ or generated
#    header of the working tree gets in (and building there leaves this tree's build alone).
git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$WORK/src"
SHA=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

# 2. The wheel, against .venv's torch.
(cd "$WORK/src" && TILEOPS_CPU_ONLY=1 TILEOPS_GIT_SHA=$SHA MAX_JOBS=${MAX_JOBS:-$(nproc)} \
  "$BUILD_PY" -m pip wheel -q --no-build-isolation --no-deps -w "$WORK/dist" .)
WHEEL=$(ls "$WORK/dist"/tileops-*.whl)
echo "wheel_check: built $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB) in ${SECONDS}s"
if [ -n "${TILEOPS_WHEEL_KEEP:-}" ]; then mkdir -p "$TILEOPS_WHEEL_KEEP" && cp "$WHEEL" "$TILEOPS_WHEEL_KEEP/"; fi
"$BUILD_PY" - "$WHEEL" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert any(n.startswith("tileops/_C") and n.endswith(".so") for n in names), names
assert "tileops/_build_config.py" in names, names
assert not [n for n in names if n.endswith((".cpp", ".cu", ".h", ".cuh"))], "sources in the wheel"
meta = zipfile.ZipFile(sys.argv[1]).read([n for n in names if n.endswith("METADATA")][0]).decode()
print("wheel_check: requires", [l for l in meta.splitlines() if l.startswith("Requires-Dist: torch")])
EOF

# 3. A fresh virtualenv from the same interpreter, with the torch the wheel was built against.
BASE_PY=$("$BUILD_PY" -c "import sys; print(getattr(sys, '_base_executable', sys.executable))")
TORCH=$("$BUILD_PY" -c "import torch; print(torch.__version__.split('+')[0])")
"$BASE_PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q "$WHEEL" "torch==$TORCH" pytest numpy pyyaml
echo "wheel_check: installed into a fresh venv at ${SECONDS}s"

# 4. Everything below runs from an empty directory, with no toolkit on PATH and no PYTHONPATH.
run() { (cd "$WORK/run" && env -u PYTHONPATH -u CUDA_HOME -u CUDA_PATH PATH="$WORK/venv/bin:/usr/bin:/bin" "$@"); }
run sh -c '! command -v nvcc >/dev/null' || { echo "wheel_check: nvcc is still on PATH" >&2; exit 1; }
run python - "$WORK/venv" <<'EOF'
import os, sys
import tileops
assert os.path.realpath(tileops.__file__).startswith(os.path.realpath(sys.argv[1])), tileops.__file__
print("wheel_check: import tileops", tileops.__version__, "from", os.path.dirname(tileops.__file__))
print("wheel_check:", tileops.build_info())
EOF
run python -m tileops doctor || true  # 1 where a CUDA torch sees no GPU (CI): the report is the point
run python -m tileops doctor --json > "$WORK/doctor.json" || true
"$BUILD_PY" -c "import json, sys; r = json.load(open(sys.argv[1])); assert r['tileops_error'] is None, r['tileops_error']; \
print('wheel_check: doctor --json: tileops', r['tileops']['version'], '- problems:', len(r['problems']))" "$WORK/doctor.json"

# 5. The import guard: claim another torch in the installed build record; import must refuse with
#    the doctor's message (not an undefined symbol), and the doctor by path must say the same.
CFG=$(run python -c "import os, tileops; print(os.path.join(os.path.dirname(tileops.__file__), '_build_config.py'))")
cp "$CFG" "$WORK/cfg.bak"
sed -i "s/^TORCH_VERSION = .*/TORCH_VERSION = '1.13.1'/" "$CFG"
if run python -c "import tileops" 2> "$WORK/guard.txt"; then echo "wheel_check: import did not refuse" >&2; exit 1; fi
grep -q "was built against torch 1.13.1" "$WORK/guard.txt" || { cat "$WORK/guard.txt" >&2; exit 1; }
grep -v "^Traceback\|^  File\|^    " "$WORK/guard.txt" | sed 's/^/wheel_check: guard says: /'
run python "$(dirname "$CFG")/doctor.py" > "$WORK/doctor.txt" 2>&1 || true  # 1: it found the problem
grep -q "PROBLEM  tileops .* was built against torch 1.13.1" "$WORK/doctor.txt" || { cat "$WORK/doctor.txt" >&2; exit 1; }
cp "$WORK/cfg.bak" "$CFG"

# 6. The CPU suite against the installed wheel (tests/ on the path by pytest, python/ never).
run python -m pytest "$WORK/src/tests" -q -m "not cuda" -p no:cacheprovider "$@"
echo "wheel_check: OK in ${SECONDS}s"
