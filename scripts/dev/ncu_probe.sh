#!/usr/bin/env bash
# ncu over GEMM shapes, tileops and cuBLAS side by side (scripts/dev/profile_sm90.py), on a GPU machine
# whose runtime lets ncu read the counters (Firecracker kinds; not gVisor). Needs a built _C.so in
# python/tileops. Each shape "M N K dtype" gives OUTDIR/ncu_<tag>.txt (every kernel of the run:
# randn, copies, reduces and cuBLAS's kernels included); SOURCE=1 adds, for the first tileops
# Hopper kernel of each shape, the stall samples per SASS instruction (src_<tag>.csv). The .ncu-rep
# reports are deleted once printed: each holds the whole module (~120 MB), too big to bring back.
# KREGEX: which tileops kernel SOURCE profiles (default gemm_sm90; e.g. gemm_vec for fp32).
# Usage: scripts/dev/ncu_probe.sh OUTDIR "4096 4096 4096 tf32" ["1 4096 4096 bfloat16" ...]
set -uo pipefail
OUTDIR=${1:?usage: scripts/dev/ncu_probe.sh OUTDIR "M N K dtype" ...}
shift
cd "$(dirname "$0")/../.."
mkdir -p "$OUTDIR"
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
SECTIONS=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
  --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis)
for shape in "$@"; do
  tag=$(echo "$shape" | tr ' ' '_')
  # --clock-control none: the clocks the benchmarks run at
  timeout 300 ncu --clock-control none "${SECTIONS[@]}" -f -o "$OUTDIR/ncu_$tag" \
    python3 scripts/dev/profile_sm90.py $shape > "$OUTDIR/ncu_$tag.log" 2>&1 || echo "ncu failed on $shape"
  ncu --import "$OUTDIR/ncu_$tag.ncu-rep" > "$OUTDIR/ncu_$tag.txt" 2>&1
  rm -f "$OUTDIR/ncu_$tag.ncu-rep"  # ~120 MB each (the module is kept in it)
  if [ -n "${SOURCE:-}" ]; then  # the first tileops Hopper kernel's stall samples per SASS line
    timeout 120 ncu --clock-control none -k regex:${KREGEX:-gemm_sm90} --launch-count 1 --section SourceCounters \
      -f -o "$OUTDIR/src_$tag" python3 scripts/dev/profile_sm90.py $shape > /dev/null 2>&1
    ncu --import "$OUTDIR/src_$tag.ncu-rep" --page source --print-source sass --csv > "$OUTDIR/src_$tag.csv" 2>&1 || true
    rm -f "$OUTDIR/src_$tag.ncu-rep"
  fi
done
