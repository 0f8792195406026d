#!/usr/bin/env bash
# Runs scripts/probe_tma_im2col.cu on this GPU and writes the im2col convention that matched every
# case into csrc/cuda/gemm_sm90.cuh (kIm2colCornersWH, kIm2colOffsetsWH, kIm2colUpperLess), so a
# build that follows uses it. Prints the probe's lines; exits 1 when no convention matched all.
# Usage: scripts/probe_and_apply.sh LOGFILE
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${1:?usage: scripts/probe_and_apply.sh LOGFILE}
nvcc -std=c++17 -arch=sm_90a -o /tmp/probe_im2col scripts/probe_tma_im2col.cu -lcuda > "$LOG" 2>&1 &&
  timeout 60 /tmp/probe_im2col >> "$LOG" 2>&1 || { cat "$LOG"; exit 1; }
cat "$LOG"
win=$(grep -E "cases match" "$LOG" | grep -E ": ([0-9]+) of \1 cases" | grep -vE ": 0 of")
[ "$(echo "$win" | grep -c .)" = 1 ] || { echo "probe: no single convention matched every case"; exit 1; }
c=false; o=false; u=0
echo "$win" | grep -q "corners {W, H}" && c=true
echo "$win" | grep -q "offsets {w, h}" && o=true
echo "$win" | grep -q "(upper - 1)" && u=1
H=csrc/cuda/gemm_sm90.cuh
sed -i -E "s/(constexpr bool kIm2colCornersWH = )(true|false);/\1$c;/; s/(constexpr bool kIm2colOffsetsWH = )(true|false);/\1$o;/; s/(constexpr int kIm2colUpperLess = )[0-9]+;/\1$u;/" $H
echo "applied: $(grep -E 'kIm2col(CornersWH|OffsetsWH|UpperLess) =' $H | sed -E 's/ *\/\/.*//' | tr '\n' ' ')"
