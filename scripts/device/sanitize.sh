#!/usr/bin/env bash
# compute-sanitizer's four tools (memcheck, racecheck, initcheck, synccheck) over a reduced
# selection of the CUDA tests, on a GPU machine where tileops is already built
# (scripts/device/gpu_run.sh builds it). Writes to OUTDIR:
#   sanitize_<tool>.log        the sanitizer's and pytest's output
#   sanitize_<tool>_junit.xml  which tests ran
#   sanitize.json              per tool: errors (from "ERROR SUMMARY: N errors"), tests run,
#                              wall time, exit code, selection and flags; "pass" overall
# Usage: scripts/device/sanitize.sh OUTDIR
# Knobs: COMPUTE_SANITIZER (path), SANITIZE_TOOLS ("memcheck racecheck initcheck synccheck"),
#   SANITIZE_<TOOL>_TIMEOUT (seconds), SANITIZE_<TOOL>_TESTS (pytest arguments),
#   SANITIZE_KERNEL_FILTER (default kns=tileops; empty checks every kernel).
#
# Choices, and why:
# - The selection is small for time (about 5 minutes in all on an H200): memcheck runs the
#   CUDA tests of matmul, conv2d, errors, edge cases and execution context without the
#   multi-GB ones; the slower racecheck, initcheck and synccheck run test_deterministic
#   (tests/op_cases.py: one call per op x dtype x kernel family, SIMT, WMMA, Hopper TMA+wgmma
#   and its padded copies, conv forward/dgrad/wgrad) with TILEOPS_SANITIZE=1 (no repeats).
# - memcheck, racecheck and synccheck instrument only tileops' kernels (--kernel-name
#   kns=tileops: every kernel lives in namespace tileops, so the substring is in its mangled
#   and demangled names alike: the GEMM families, split-K reduce, conv gathers, depthwise):
#   torch's own kernels run natively, which is faster and keeps their reports out of ours.
#   initcheck instruments every kernel, because it must see torch's kernels write the inputs
#   (randn, copies, the zero padding) to know that what tileops reads was initialised.
# - No --leak-check: torch's caching allocator keeps its segments until the process ends, so
#   every cached segment would be reported as a leak. Memory growth is checked by
#   tests/test_execution.py::test_no_allocation_growth_cuda instead.
# - initcheck: --track-unused-memory stays off (its default). It is not about reads of
#   uninitialised memory: it reports allocations that were never fully used, which the
#   caching allocator's segments, carved into blocks, always are.
# - --report-api-errors no (where this compute-sanitizer has it): tileops checks every CUDA
#   call it makes (C10_CUDA_CHECK, C10_CUDA_KERNEL_LAUNCH_CHECK) and a failure is an exception
#   that fails the test; the sanitizer would add the return codes torch and the driver expect
#   internally (queries of optional entry points, not-ready events), which are not errors.
# - Each tool runs under `timeout`; a tool that runs out of time is reported as timed out
#   with the errors seen so far, and the script goes on to the next.
set -uo pipefail
OUTDIR=${1:?usage: scripts/device/sanitize.sh OUTDIR}
cd "$(dirname "$0")/../.."
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TILEOPS_REQUIRE_CUDA=1 TILEOPS_SANITIZE=1

CS=${COMPUTE_SANITIZER:-}
if [ -z "$CS" ]; then
  for c in "$(command -v compute-sanitizer 2>/dev/null)" "${CUDA_HOME:-/nonexistent}/bin/compute-sanitizer" \
           /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer \
           /usr/local/cuda-*/bin/compute-sanitizer; do
    if [ -n "$c" ] && [ -x "$c" ]; then CS=$c; break; fi
  done
fi
fail_early() {  # reason: no sanitizer, or it cannot run here; the JSON says so
  echo "sanitize: $1"
  $PY - "$OUTDIR/sanitize.json" "$1" <<'EOF'
import json, sys
json.dump({"pass": False, "error": sys.argv[2], "tools": []}, open(sys.argv[1], "w"), indent=1)
EOF
  exit 1
}
[ -n "$CS" ] || fail_early "compute-sanitizer not found (set COMPUTE_SANITIZER=/path/to/compute-sanitizer)"
echo "== compute-sanitizer: $CS ($("$CS" --version 2>&1 | tail -1))"
HELP=$("$CS" --help 2>&1)
has() { grep -q -- "$1" <<< "$HELP"; }

COMMON=(--error-exitcode 99)
has "--print-limit" && COMMON+=(--print-limit 100)
has "--report-api-errors" && COMMON+=(--report-api-errors no)
FILTER=${SANITIZE_KERNEL_FILTER-kns=tileops}
KFLAGS=()
if [ -n "$FILTER" ] && has "--kernel-name"; then KFLAGS=(--kernel-name "$FILTER"); fi

# Can it run a CUDA program here at all, with these flags? (on some virtualised GPUs it
# cannot: "Device not supported"; an option this version lacks fails here too, not per tool)
timeout -k 10 180 "$CS" --tool memcheck "${COMMON[@]}" ${KFLAGS[@]+"${KFLAGS[@]}"} $PY -c \
  "import torch, tileops; a = torch.randn(64, 64, device='cuda'); tileops.matmul(a, a); torch.cuda.synchronize(); print('probe ok')" \
  > "$OUTDIR/sanitize_probe.log" 2>&1
probe_rc=$?
if [ $probe_rc != 0 ] || ! grep -q "probe ok" "$OUTDIR/sanitize_probe.log"; then
  tail -20 "$OUTDIR/sanitize_probe.log"
  fail_early "compute-sanitizer could not run a small CUDA program (rc=$probe_rc); see sanitize_probe.log"
fi

# Which of tileops' kernels the filter leaves out (host stubs in _C.so carry the kernels'
# mangled names): a kernel added later under another name would be missed silently otherwise.
: > "$OUTDIR/sanitize_kernels.txt"
if [[ "$FILTER" == kns=* ]] && command -v nm > /dev/null; then
  sub=${FILTER#kns=}
  nm python/tileops/_C*.so | grep -o "__device_stub__[A-Za-z0-9_]*" | sed -E 's/^__device_stub__/_/; s/E[0-9]+__(tmp|handle)$//' | sort -u > "$OUTDIR/sanitize_kernels.txt"
  n_all=$(wc -l < "$OUTDIR/sanitize_kernels.txt")
  missed=$(grep -v -- "$sub" "$OUTDIR/sanitize_kernels.txt" || true)
  echo "== kernel filter $FILTER: $(( n_all - $(grep -c . <<< "$missed") )) of $n_all tileops kernels match"
  if [ -n "$missed" ]; then
    echo "WARNING: not checked by memcheck/racecheck/synccheck (set SANITIZE_KERNEL_FILTER= to check every kernel):"
    cut -c1-120 <<< "$missed"
  fi
fi

# memcheck leaves out the multi-GB tests, the 10,000-call loop and, in the big parametrized
# files, float64 and float16 (same kernels and index code as float32 and bfloat16; the
# op_cases tests keep one of each)
EXCLUDE="not huge and not wide and not large and not resnet and not square_1024 and not allocation_growth and not graphed_training and not cuda-float64 and not cuda-float16"
# pytest arguments as shell words (quotes allowed; SANITIZE_<TOOL>_TESTS overrides the same way)
BROAD="tests/test_execution.py tests/test_edge_cases.py tests/test_errors.py tests/test_matmul.py tests/test_conv2d.py -m 'cuda and not multigpu' -k '$EXCLUDE'"
SMALL="tests/test_execution.py -m 'cuda and not multigpu' -k deterministic"

: > "$OUTDIR/sanitize_runs.tsv"
for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
  T=$(echo "$tool" | tr a-z A-Z)
  case $tool in
    memcheck) default_timeout=180; sel=$BROAD ;;
    racecheck) default_timeout=90; sel=$SMALL ;;
    *) default_timeout=75; sel=$SMALL ;;
  esac
  tvar=SANITIZE_${T}_TIMEOUT; svar=SANITIZE_${T}_TESTS
  limit=${!tvar:-$default_timeout}
  sel=${!svar:-$sel}
  eval "args=($sel)"
  flags=(--tool "$tool" "${COMMON[@]}")
  [ "$tool" != initcheck ] && flags+=(${KFLAGS[@]+"${KFLAGS[@]}"})
  log="$OUTDIR/sanitize_$tool.log"
  echo "== $tool (timeout ${limit}s): ${flags[*]} -- pytest ${args[*]}"
  rm -f "$OUTDIR/sanitize_${tool}_junit.xml"
  start=$(date +%s)
  timeout -k 20 "$limit" "$CS" "${flags[@]}" $PY -m pytest "${args[@]}" -v -p no:cacheprovider \
    --junitxml="$OUTDIR/sanitize_${tool}_junit.xml" > "$log" 2>&1
  rc=$?
  wall=$(( $(date +%s) - start ))
  echo "   rc=$rc in ${wall}s: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -2 | tr '\n' ' ')$(grep -E "^=+ .*(passed|failed).* in " "$log" | tail -1)"
  printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$rc" "$wall" "${flags[*]}" "$sel" >> "$OUTDIR/sanitize_runs.tsv"
done

$PY - "$OUTDIR" "$CS" "$FILTER" <<'EOF'
import json, os, re, subprocess, sys
import xml.etree.ElementTree as ET

outdir, cs, kfilter = sys.argv[1], sys.argv[2], sys.argv[3]
tools, ok = [], True
for line in open(os.path.join(outdir, "sanitize_runs.tsv")):
    tool, rc, wall, flags, sel = line.rstrip("\n").split("\t")
    rc, log = int(rc), os.path.join(outdir, "sanitize_%s.log" % tool)
    text = open(log, errors="replace").read()
    summary = re.findall(r"ERROR SUMMARY: (\d+) error", text) or re.findall(
        r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", text)
    # without a summary (timed out / killed): count the error reports printed so far
    seen = len(re.findall(r"^========= (?:Invalid|Uninitialized|Race|Error|Barrier|Program hit|Malformed|Out-of-range)",
                          text, re.M))
    tests = {"run": 0, "passed": 0, "failed": 0, "skipped": 0}
    junit = os.path.join(outdir, "sanitize_%s_junit.xml" % tool)
    if os.path.exists(junit):
        for case in ET.parse(junit).getroot().iter("testcase"):
            tests["run"] += 1
            state = ("failed" if case.find("failure") is not None or case.find("error") is not None
                     else "skipped" if case.find("skipped") is not None else "passed")
            tests[state] += 1
    else:  # pytest -v progress lines
        for state, word in (("passed", "PASSED"), ("failed", "FAILED"), ("skipped", "SKIPPED")):
            tests[state] = len(re.findall(r"::\S+ %s" % word, text))
        tests["run"] = tests["passed"] + tests["failed"] + tests["skipped"]
    errors = int(summary[-1]) if summary else seen
    timed_out = rc in (124, 137)
    entry = {"tool": tool, "errors": errors, "error_summary_found": bool(summary), "tests": tests,
             "wall_s": int(wall), "rc": rc, "timed_out": timed_out, "flags": flags, "selection": sel,
             "log": os.path.basename(log)}
    if "Device not supported" in text:
        entry["note"] = "compute-sanitizer: Device not supported"
    entry["pass"] = rc == 0 and errors == 0 and bool(summary) and tests["passed"] > 0 and tests["failed"] == 0
    ok &= entry["pass"]
    tools.append(entry)
try:
    version = subprocess.run([cs, "--version"], capture_output=True, text=True, timeout=60).stdout.strip().splitlines()[-1]
except Exception as e:  # noqa: BLE001 - informational only
    version = "unknown (%s)" % e
try:
    import torch
    gpu = torch.cuda.get_device_name(0)
except Exception:  # noqa: BLE001
    gpu = "unknown"
kernels = [k for k in open(os.path.join(outdir, "sanitize_kernels.txt")).read().split() if k]
sub = kfilter[4:] if kfilter.startswith("kns=") else None
report = {"compute_sanitizer": cs, "version": version, "gpu": gpu,
          "kernel_filter": kfilter or None, "kernel_filter_applies_to": "memcheck, racecheck, synccheck",
          "tileops_kernels": len(kernels) or None,
          "tileops_kernels_not_matched": [k for k in kernels if sub and sub not in k] if kernels else None,
          "tools": tools, "pass": ok and bool(tools)}
json.dump(report, open(os.path.join(outdir, "sanitize.json"), "w"), indent=1)
for t in tools:
    print("%-10s errors=%-4s tests=%-5d failed=%-3d %4ds rc=%-3d %s" % (
        t["tool"], t["errors"], t["tests"]["run"], t["tests"]["failed"], t["wall_s"], t["rc"],
        "PASS" if t["pass"] else ("TIMED OUT" if t["timed_out"] else "FAIL")))
print("sanitize:", "PASS" if report["pass"] else "FAIL", "->", os.path.join(outdir, "sanitize.json"))
sys.exit(0 if report["pass"] else 1)
EOF
