#!/usr/bin/env bash
# On a machine with 2 GPUs, tileops already built (scripts/device/gpu_run.sh builds it): the DDP
# gradient check (scripts/device/ddp_check.py under torchrun, NCCL) and the `multigpu` tests.
#   OUTDIR/ddp.json, ddp.log                       rank 0's report, both ranks' output
#   OUTDIR/multigpu.log, multigpu_junit.xml        pytest -m multigpu (none may skip)
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends): it can take a shared host's GPUs
# down. Every step runs under a timeout, so a hung collective ends the script instead of the lease.
# Usage: scripts/device/ddp_run.sh OUTDIR   (DDP_TIMEOUT, PYTEST_TIMEOUT: seconds, defaults 300 / 600;
#        DDP_CPU_DRY_RUN=1: the DDP check on 2 CPU processes with gloo, no GPU, no pytest)
set -uo pipefail
OUTDIR=${1:?usage: scripts/device/ddp_run.sh OUTDIR}
cd "$(dirname "$0")/../.."
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export TORCH_NCCL_ASYNC_ERROR_HANDLING=${TORCH_NCCL_ASYNC_ERROR_HANDLING:-1}

DRY=${DDP_CPU_DRY_RUN:-0}
NGPU=$(timeout 120 $PY -c "import torch; print(torch.cuda.device_count())") || NGPU=0
echo "== ddp_run: $NGPU GPU(s) visible; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
if [ "$NGPU" -lt 2 ] && [ "$DRY" != 1 ]; then
  echo "ddp_run: needs 2 GPUs, found $NGPU" | tee "$OUTDIR/ddp.log"
  exit 1
fi
timeout 120 $PY -c "import tileops; print('tileops', tileops.build_info())" || { echo "ddp_run: import tileops failed (build it first)"; exit 1; }

rc=0
echo "== DDP gradient check (torchrun, 2 processes, timeout ${DDP_TIMEOUT:-300}s)"
rm -f "$OUTDIR/ddp.json"
timeout -k 20 "${DDP_TIMEOUT:-300}" $PY -m torch.distributed.run --standalone --nproc_per_node 2 \
  scripts/device/ddp_check.py --out "$OUTDIR/ddp.json" $( [ "$DRY" = 1 ] && echo --device cpu ) 2>&1 | tee "$OUTDIR/ddp.log"
ddp_rc=${PIPESTATUS[0]}
[ "$ddp_rc" = 124 ] && echo "ddp_run: DDP check TIMED OUT" | tee -a "$OUTDIR/ddp.log"
[ -f "$OUTDIR/ddp.json" ] || echo "ddp_run: no ddp.json written" | tee -a "$OUTDIR/ddp.log"
[ "$ddp_rc" = 0 ] || rc=1

if [ "$DRY" = 1 ]; then echo "== ddp_run (CPU dry run): DDP check rc=$ddp_rc"; exit $rc; fi

echo "== pytest -m multigpu (timeout ${PYTEST_TIMEOUT:-600}s)"
TILEOPS_REQUIRE_CUDA=1 timeout -k 20 "${PYTEST_TIMEOUT:-600}" $PY -m pytest tests -m multigpu -v -p no:cacheprovider \
  --junitxml="$OUTDIR/multigpu_junit.xml" 2>&1 | tee "$OUTDIR/multigpu.log" | grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed"
py_rc=${PIPESTATUS[0]}
[ "$py_rc" = 124 ] && echo "ddp_run: multigpu tests TIMED OUT" | tee -a "$OUTDIR/multigpu.log"
[ "$py_rc" = 0 ] || rc=1

echo "== ddp_run: DDP check rc=$ddp_rc, multigpu tests rc=$py_rc -> $( [ $rc = 0 ] && echo PASS || echo FAIL )"
exit $rc
