#!/usr/bin/env bash
# Batch-1 ResNet 3x3 forwards (bf16 channels_last) with conv_fwd_sm90 pinned to each of CANDIDATES
# (default: the heuristic, then the persistent and bn64x2-im2col candidates): per candidate, the
# kernels' times (profile_conv_kernels.py, beside cuDNN's) and bench_conv's GPU-time and per-call
# ratios, then one table. On a GPU machine with the extension in python/tileops.
# Usage: scripts/probe_conv_b1.sh OUTDIR
set -uo pipefail
O=${1:?usage: scripts/probe_conv_b1.sh OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$O"
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
CANDIDATES=${CANDIDATES:-"default pp128-c2-im2col coop128x192-c2-im2col bn64x2-im2col"}
for c in $CANDIDATES; do
  if [ "$c" = default ]; then unset TILEOPS_AUTOTUNE_PIN; else export TILEOPS_AUTOTUNE_PIN="conv_fwd_sm90=$c"; fi
  timeout 90 python3 scripts/profile_conv_kernels.py --batch 1 --filter "3x3" --out "$O/kb1_$c.json" > "$O/kb1_$c.log" 2>&1 \
    || echo "profile_conv_kernels with $c failed"
  timeout 90 python3 benchmarks/bench_conv.py --filter "^resnet 3x3.*bfloat16 channels_last b1 fwd$" --budget 8 \
    --out "$O/conv_b1_$c.json" > "$O/conv_b1_$c.log" 2>&1 || echo "bench_conv with $c failed"
done
unset TILEOPS_AUTOTUNE_PIN
CANDIDATES="$CANDIDATES" python3 - "$O" <<'PY'
import json, os, sys
o = sys.argv[1]
for c in os.environ["CANDIDATES"].split():
    try:
        k = json.load(open(os.path.join(o, "kb1_%s.json" % c)))
        b = json.load(open(os.path.join(o, "conv_b1_%s.json" % c)))
    except (OSError, ValueError) as e:
        print(c, "missing:", e)
        continue
    kern = {(r["layer"], r["who"]): r["total_us"] for r in k["rows"] if r["pass"] == "fwd"}
    for r in b["records"]:
        print("%-22s %-18s kernel us %5.2f (cuDNN %5.2f)  ratio %.2f  call_ratio %.2f" % (
            c, r["label"], kern.get((r["label"], "tileops"), float("nan")), kern.get((r["label"], "torch"), float("nan")),
            r["ratio"], r["call_ratio"]))
PY
