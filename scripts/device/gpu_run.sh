#!/usr/bin/env bash
# On a GPU machine where torch is installed and nothing can be downloaded: build tileops against
# that torch for this GPU, run the whole suite with CUDA tests required (none may skip), and
# time every op against torch. Everything lands in OUTDIR:
#   build.log, junit.xml, pytest.log, summary.json, doctor.json, demo.log, fuzz.json (+ fuzz.log),
#   and per benchmark <name>.json (+ .png) and bench_<name>.log (ops, matmul, conv, models, overhead)
# Environment: SKIP_BUILD, SKIP_BENCH, BENCHES, BENCH_QUICK, BENCH_TIMEOUT, DEADLINE, SANITIZE,
# PYTEST_TIMEOUT, FUZZ_CASES, TAR_OUT (each explained where it is used below)
# Usage: scripts/device/gpu_run.sh OUTDIR [pytest args...]  (they follow `tests`: -k, --ignore=FILE and the
# like narrow the suite; naming a file there does not: the whole suite still runs)
set -uo pipefail
OUTDIR=${1:?usage: scripts/device/gpu_run.sh OUTDIR [pytest args]}
shift
cd "$(dirname "$0")/../.."
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
CAP=$($PY -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())") || { echo "no GPU visible"; exit 1; }
[ "$CAP" = "9.0" ] && CAP=9.0a  # Hopper: the arch-specific target (wgmma, setmaxnreg)
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-$CAP} MAX_JOBS=${MAX_JOBS:-16} FORCE_CUDA=1
# Link with the system g++: a toolchain that links libstdc++ statically into _C.so gives the
# process two libstdc++ copies, and the first error message formatted through std::ostream
# crashes (seen on the lent H200 image, whose CXX is a separate gcc in /opt/gcc).
if [ -x /usr/bin/g++ ]; then
  export CC=/usr/bin/gcc CXX=/usr/bin/g++ LDSHARED="/usr/bin/g++ -shared" LDCXXSHARED="/usr/bin/g++ -shared"
fi
echo "compilers: CC=${CC:-} CXX=${CXX:-} ($(${CXX:-g++} --version | head -1))"
# SKIP_BUILD=1: use the _C*.so already in python/tileops (one carried from an earlier call that
# built the same sources on this kind of machine), saving the build's minutes
if [ -n "${SKIP_BUILD:-}" ] && ls python/tileops/_C*.so > /dev/null 2>&1; then
  echo "build skipped (SKIP_BUILD): $(ls python/tileops/_C*.so)" | tee "$OUTDIR/build.log"
else
  ( time $PY setup.py build_ext --inplace ) > "$OUTDIR/build.log" 2>&1 || { tail -40 "$OUTDIR/build.log"; exit 1; }
  grep "tileops build" "$OUTDIR/build.log"
fi
if [ -z "${SKIP_BUILD:-}" ] && command -v cuobjdump > /dev/null; then  # registers / spills per kernel, HGMMA
  for o in build/temp*/csrc/cuda/*/*.o; do
    echo "== $o: $(cuobjdump --dump-sass "$o" | grep -c HGMMA) HGMMA"
    cuobjdump --dump-resource-usage "$o" | grep -E "REG:" | sed -E 's/.*(REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+).*/\1/' | sort | uniq -c
  done >> "$OUTDIR/build.log" 2>&1
fi
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if ldd python/tileops/_C*.so | grep -q "libstdc++"; then echo "libstdc++: shared (good)"; else
  echo "WARNING: _C.so does not link libstdc++ dynamically"; fi
$PY -m tileops doctor --json > "$OUTDIR/doctor.json"
timeout 120 $PY -m tileops demo > "$OUTDIR/demo.log" 2>&1 || { echo "demo failed"; tail -5 "$OUTDIR/demo.log"; rc_demo=1; }
TILEOPS_REQUIRE_CUDA=1 timeout "${PYTEST_TIMEOUT:-3600}" $PY -m pytest tests -q -p no:cacheprovider --junitxml="$OUTDIR/junit.xml" "$@" > "$OUTDIR/pytest.log" 2>&1
rc=$?
[ -n "${rc_demo:-}" ] && rc=1
tail -5 "$OUTDIR/pytest.log"
$PY scripts/device/junit_summary.py "$OUTDIR/junit.xml" "$OUTDIR/summary.json" || rc=1
# the seeded differential fuzz (tests/fuzz.py): FUZZ_CASES cases (default 20,000; 0 skips it),
# counts per op and dtype in fuzz.json, each failure with its replay command
if [ "${FUZZ_CASES:-20000}" != 0 ]; then
  timeout 900 $PY -W ignore tests/fuzz.py --device cuda --cases "${FUZZ_CASES:-20000}" --out "$OUTDIR/fuzz.json" \
    > "$OUTDIR/fuzz.log" 2>&1 || { echo "fuzz failed"; rc=1; }
  grep -A14 "^fuzz seed" "$OUTDIR/fuzz.log"
fi
if [ -n "${SANITIZE:-}" ]; then  # compute-sanitizer's four tools over a reduced CUDA suite
  bash scripts/device/sanitize.sh "$OUTDIR" || rc=1
fi
# BENCHES: which benchmarks (default all); BENCH_QUICK=1: their --quick subsets; each is capped
# at BENCH_TIMEOUT seconds so one slow benchmark cannot take the others' results with it, and
# at DEADLINE (epoch seconds) where set, for a lease that ends at a known time
if [ -z "${SKIP_BENCH:-}" ]; then
  Q=${BENCH_QUICK:+--quick}
  for b in ${BENCHES:-ops matmul conv models overhead}; do
    case $b in ops|matmul) args=() ;; *) args=($Q) ;; esac
    [ -f "benchmarks/bench_$b.py" ] || { echo "no benchmarks/bench_$b.py"; rc=1; continue; }
    limit=${BENCH_TIMEOUT:-400}
    if [ -n "${DEADLINE:-}" ]; then  # DEADLINE: epoch seconds by which every benchmark must be done
      left=$(( DEADLINE - $(date +%s) ))
      [ "$left" -lt 30 ] && { echo "bench_$b skipped: ${left}s left before DEADLINE"; continue; }
      [ "$left" -lt "$limit" ] && limit=$left
    fi
    timeout "$limit" $PY "benchmarks/bench_$b.py" --out "$OUTDIR/$b.json" "${args[@]}" \
      > "$OUTDIR/bench_$b.log" 2>&1 || { echo "bench_$b failed"; tail -5 "$OUTDIR/bench_$b.log"; rc=1; }
    tail -3 "$OUTDIR/bench_$b.log"
  done
fi
# TAR_OUT=1: leave one OUTDIR.tgz instead of the folder (a transfer that caps the file count)
if [ -n "${TAR_OUT:-}" ]; then
  tar czf "$OUTDIR.tgz" -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")" && rm -rf "$OUTDIR"
fi
exit $rc
