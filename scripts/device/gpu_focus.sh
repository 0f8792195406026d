#!/usr/bin/env bash
# On a GPU machine, with a _C*.so built for it already in python/tileops (carried, or from
# scripts/device/gpu_run.sh): the steps a change needs rather than the whole suite, each capped in time,
# every log under OUTDIR, packed into OUTDIR.tgz at the end (the device tool returns few files).
#   STEPS   which steps, in order (default: tests linear depthwise cand_linear cand_dw skinny)
#     tests        test_splitk.py, then the tests of test_matmul, test_conv2d, test_autotune and
#                  test_residual that KEYS selects (keys: only those)
#     linear       bench_matmul's ViT-B rows (matmul and linear + bias + GELU, every dtype)
#     depthwise    bench_conv's depthwise rows
#     cand_linear  time_candidates: the persistent configs on the linear + ACT rows (ACT: gelu, or
#                  silu, relu, none), and on the plain matmul rows of ViT-B
#     cand_conv_act  time_candidates: the conv forward's persistent candidates at batch 32 with the
#                  ACT epilogue (default gelu) on both sides
#     cand_simt    time_candidates: matmul_simt's SIMT_CANDIDATES (default vec128,w256) on the large
#                  fp32 rows of bench_matmul that SIMT_FILTER selects (default: those w256 takes)
#     cand_dw      time_candidates: the depthwise forward's candidates (all) at batch 32 and 64
#     skinny       scripts/dev/probe_small_matmul.py --set skinny
#     rungs        test_matmul's rung tests: every algo rung, every dtype it takes, every layout case
#     mma          scripts/dev/probe_small_matmul.py --set mma --k-major-b: 'auto', 'mma', 'wgmma' beside cuBLAS
#     ladder       bench_matmul's ladder rows only
#     matmul_m1, matmul_m2, ...  one whole bench_matmul each, into OUTDIR/m1/matmul.json and so on
#                  (three back to back: scripts/device/median_runs.py OUTDIR)
#     ncu          scripts/dev/ncu_probe.sh on NCU_SHAPES ("M N K dtype;M N K dtype;...")
#     waves        time_candidates: the six persistent configs (128-row tiles, clusters of one and two)
#                  and the default on linear + bias shapes from under one wave to many (WAVE_SHAPES),
#                  bf16 and TF32: how their speeds depend on the waves a problem makes
#     waves_mn     the same on plain matmuls of those shapes (B row-major: MN-major), bf16
#     bench_tf32   bench_matmul's TF32 rows
#     edges, simt, tf32, few  scripts/dev/probe_edges.py --set edges / simt / tf32 / few: each matmul_sm90
#                  (bf16 near 1024; TF32; bf16 under half a wave) or matmul_simt (fp32) config pinned,
#                  GPU times beside cuBLAS
#                  (EDGE_CONFIGS, EDGE_DTYPE: other configs and dtype than the set's)
#     dgrad        time_candidates: the data gradients of the ResNet layers (conv_dgrad, strided ones
#                  pinned to phases and to col2im; conv_dgrad_sm90: the one-launch phases' tiles)
#                  at batch 1, 32 and 64
#     wgrad        time_candidates: the weight gradients' candidates (conv_wgrad_sm90), batch 32, 64
#     kernels      scripts/dev/profile_conv_kernels.py: each ResNet conv pass's kernels, tileops and
#                  cuDNN, at batch 32
#     conv, models, matmul, conv_family   the whole bench_conv / bench_models (ViT-S/16, ResNet-50) /
#                  bench_matmul / bench_conv_family (several minutes each: one a call)
#     models_grouped, models_family, models_llama   bench_models' other rows: ResNeXt-50 and
#                  RegNetY-400MF; r3d_18 and Whisper-tiny's encoder; the Llama-style decoder
#     grouped      the grouped-conv tests (test_conv2d, test_routing: groups, resnext, regnet) and
#                  bench_conv's grouped rows (docs/kernels/grouped.md)
#     suite        the whole CUDA suite (-m cuda, TILEOPS_REQUIRE_CUDA) as SHARDS (default 4) pytest
#                  processes at once on the one GPU (tests/conftest.py: TILEOPS_SHARD), each with its
#                  junit_suite<i>.xml and summary_suite<i>.json
#     suite_portable  the same with TILEOPS_PORTABLE=1 (every op routed as before Hopper)
#     matmul_portable, conv_portable, models_portable   bench_matmul / bench_conv / bench_models
#                  (ViT-S/16, ResNet-50) with --portable
#     suite_a, suite_b  the CUDA suite (-m cuda, TILEOPS_REQUIRE_CUDA) in two halves by file, each
#                  under one call's 10 minutes (the whole ran past 420 s at 73% on an H100):
#                  junit_suite_a.xml / _b.xml and their summaries (junit_summary.py)
#     issue60      benchmarks/results/h100/issue60/r60b.py: the skinny TMA grad_weight beside the
#                  data gradient, torch's and tileops' GEMMs, alone (10 tries each; ISSUE60_ENV
#                  "VAR=value ..." runs it once more under those settings)
#     host         scripts/dev/profile_host.py --parts: a conv's host cost per call, two streams and one
#     vit          scripts/dev/probe_vit_gemms.py: ViT-S's linear GEMMs, VIT_CANDIDATES pinned as well
#     exec         tests/test_execution.py whole (streams, graph capture, allocation growth)
#     pdl          bench_matmul's small, skinny, odd and batched rows with dependent launches off
#                  (TILEOPS_PDL=0) and on, one after the other on the same GPU
#     mm_kernels   scripts/dev/profile_matmul_kernels.py: each kernel of a TF32 and an fp32 matmul, tileops
#                  and cuBLAS, on the large shapes (where TF32's rounding copy of B goes)
#     tf32_round   scripts/dev/probe_tf32_rounding.py: whether torch and tileops round or truncate each TF32
#                  operand, per layout
#     bias         scripts/dev/probe_bias.py: a linear's bias and weight layout, tileops and torch, GPU us
#     pdl_conv     bench_conv's ResNet forward+backward rows at batch 1 (fp32, TF32, bf16), the same
#                  way: whether an early trigger costs the backward its two streams' overlap (NOTES 72)
# The extension is usually built on the CPU machine and carried (scripts/device/build_for_device.sh).
# Usage: scripts/device/gpu_focus.sh OUTDIR
set -uo pipefail
OUTDIR=${1:?usage: scripts/device/gpu_focus.sh OUTDIR}
cd "$(dirname "$0")/../.."
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TILEOPS_REQUIRE_CUDA=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUTDIR/gpu.txt" 2>&1
$PY -c "import tileops, json; print(json.dumps(tileops.build_info()))" > "$OUTDIR/build_info.json" || exit 1
# the tests step: test_splitk whole, and the named tests of the others (KEYS: a pytest -k expression)
KEYS=${KEYS:-"fast_activation or linear_epilogue or family or depthwise or fast_path or smallc or skinny or persistent"}
# ViT-B's linears at batch 8 to 128, ViT-S's (384 wide) at 32 and 128, LLM and square ones
WAVE_DEFAULT=1568x3072x768,1568x768x3072,1568x2304x768,3136x3072x768,3136x768x3072,6272x1536x384,\
6272x384x1536,6272x1152x384,6272x3072x768,6272x768x3072,12608x3072x768,12608x768x3072,25216x3072x768,\
25216x768x3072,25216x2304x768,25088x1536x384,25088x384x1536,2048x2048x2048,4096x4096x4096,4096x11008x4096,\
4096x4096x11008,8192x8192x8192
# the waves steps' configs: WAVE_CANDIDATES, else the six 128-row persistent ones, clusters of one and two
WAVE_SET=${WAVE_CANDIDATES:-pp128,coop128x192,coop128x256,pp128-c2,coop128x192-c2,coop128x256-c2}
EDGE_TAG=${EDGE_DTYPE:+_$EDGE_DTYPE}  # probe_edges' files name the dtype where EDGE_DTYPE overrides the set's
rc=0
step() {  # step NAME SECONDS CMD...: CMD's output to OUTDIR/NAME.log, its last lines here
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUTDIR/$name.log" 2>&1 || { echo "$name: exit $?"; rc=1; }
  echo "== $name ($(( $(date +%s) - t0 )) s)"
  tail -4 "$OUTDIR/$name.log"
}
for s in ${STEPS:-tests linear depthwise cand_linear cand_dw skinny}; do
  case $s in
    tests|keys) [ $s = tests ] && step t_splitk 150 $PY -m pytest -q -p no:cacheprovider tests/test_splitk.py
      step t_keys 420 $PY -m pytest -q -p no:cacheprovider --junitxml="$OUTDIR/junit.xml" tests/test_matmul.py \
        tests/test_conv2d.py tests/test_autotune.py tests/test_residual.py -k "$KEYS" ;;
    linear) step linear 240 $PY benchmarks/bench_matmul.py --filter "ViT-B" --out "$OUTDIR/matmul_vit.json" ;;
    depthwise) step depthwise 240 $PY benchmarks/bench_conv.py --filter depthwise --out "$OUTDIR/conv_dw.json" ;;
    cand_linear) step cand_linear_${ACT:-gelu} 240 $PY scripts/dev/time_candidates.py --family matmul_sm90 \
      --filter "linear|ViT" --act "${ACT:-gelu}" --candidates pp128-c2,coop128x256-c2,coop128x192-c2 \
      --out "$OUTDIR/cand_linear_${ACT:-gelu}.json" ;;
    cand_conv_act) step cand_conv_${ACT:-gelu} 300 $PY scripts/dev/time_candidates.py --family conv_fwd_sm90 \
      --act "${ACT:-gelu}" --batch 32 --candidates pp128-c2-im2col,coop128x256-c2-im2col,coop128x192-c2-im2col \
      --out "$OUTDIR/cand_conv_${ACT:-gelu}.json" ;;
    cand_simt) step cand_simt 300 $PY scripts/dev/time_candidates.py --family matmul_simt --dtype float32 \
      --candidates "${SIMT_CANDIDATES:-vec128,w256}" --out "$OUTDIR/cand_simt.json" \
      --filter "${SIMT_FILTER:-^(square 2048|square 4096|ViT-B MLP fc1|ViT-B QKV|LLM down|odd 4095)}" ;;
    cand_dw) for b in 32 64; do step cand_dw_b$b 120 $PY scripts/dev/time_candidates.py --family conv_depthwise \
      --batch $b --out "$OUTDIR/cand_dw_b$b.json"; done ;;
    host) step host_streams1 120 $PY scripts/dev/profile_host.py --parts --out "$OUTDIR"
      TILEOPS_STREAMS=0 step host_streams0 120 $PY scripts/dev/profile_host.py --parts --out "$OUTDIR" ;;
    vit) step vit 240 $PY scripts/dev/probe_vit_gemms.py "$OUTDIR/vit_gemms.json" --candidates "${VIT_CANDIDATES:-}" ;;
    exec) step t_exec 300 $PY -m pytest -q -p no:cacheprovider tests/test_execution.py ;;
    pdl) for v in 0 1; do TILEOPS_PDL=$v step pdl$v 150 $PY benchmarks/bench_matmul.py \
      --filter "^matmul (square 1024|skinny|odd 127|odd 1000|batched)" --out "$OUTDIR/matmul_pdl$v.json"; done ;;
    pdl_conv) for v in 0 1; do TILEOPS_PDL=$v step pdl_conv$v 150 $PY benchmarks/bench_conv.py --tf32 \
      --filter "^resnet .* (float32|tf32|bfloat16) .* b1 fwd.bwd" --out "$OUTDIR/conv_pdl$v.json"; done ;;
    dgrad) for b in 1 32 64; do
        step dgrad_b$b 90 $PY scripts/dev/time_candidates.py --family conv_dgrad --candidates phases,col2im \
          --batch $b --out "$OUTDIR/cand_dgrad_b$b.json"
        step dgrad_sm90_b$b 90 $PY scripts/dev/time_candidates.py --family conv_dgrad_sm90 --filter "/2" \
          --candidates bn64x2,bn128 --batch $b --out "$OUTDIR/cand_dgrad_sm90_b$b.json"
      done ;;
    wgrad) for b in 32 64; do step wgrad_b$b 120 $PY scripts/dev/time_candidates.py --family conv_wgrad_sm90 \
      --candidates bn64,bn128,bn64-im2col,bn128-im2col --batch $b --out "$OUTDIR/cand_wgrad_b$b.json"; done ;;
    kernels) step kernels 240 $PY scripts/dev/profile_conv_kernels.py --batch 32 --out "$OUTDIR/conv_kernels_b32.json" ;;
    mm_kernels) for d in tf32 float32; do step mm_kernels_$d 180 $PY scripts/dev/profile_matmul_kernels.py --dtype $d \
      --out "$OUTDIR/mm_kernels_$d.json"; done ;;
    tf32_round) step tf32_round 120 $PY scripts/dev/probe_tf32_rounding.py --out "$OUTDIR/tf32_rounding.json" ;;
    bench_tf32) step bench_tf32 240 $PY benchmarks/bench_matmul.py --filter "tf32" --out "$OUTDIR/matmul_tf32.json" ;;
    edges|simt|tf32|few) step "probe_$s$EDGE_TAG" 240 $PY scripts/dev/probe_edges.py "$OUTDIR/$s$EDGE_TAG.json" \
      --set $s ${EDGE_CONFIGS:+--configs $EDGE_CONFIGS} ${EDGE_DTYPE:+--dtype $EDGE_DTYPE} ;;
    bias) step bias 300 $PY scripts/dev/probe_bias.py "$OUTDIR/bias.json" ;;
    ncu) IFS=';' read -ra shapes <<< "${NCU_SHAPES:?ncu: set NCU_SHAPES}"
      step ncu 500 bash scripts/dev/ncu_probe.sh "$OUTDIR/ncu" "${shapes[@]}" ;;
    waves) for d in bfloat16 tf32; do step waves_$d 300 $PY scripts/dev/time_candidates.py --family matmul_sm90 \
      --dtype $d --act none --out "$OUTDIR/waves_$d.json" --linear-shapes "${WAVE_SHAPES:-$WAVE_DEFAULT}" \
      --candidates $WAVE_SET; done ;;
    waves_mn) step waves_mn 300 $PY scripts/dev/time_candidates.py --family matmul_sm90 --dtype bfloat16 \
      --out "$OUTDIR/waves_mn.json" --matmul-shapes "${WAVE_SHAPES:-$WAVE_DEFAULT}" \
      --candidates $WAVE_SET ;;
    rungs) step t_rungs 300 $PY -m pytest -q -p no:cacheprovider --junitxml="$OUTDIR/junit_rungs.xml" \
      tests/test_matmul.py -k "rungs" ;;
    mma) step mma_probe 120 $PY scripts/dev/probe_small_matmul.py "$OUTDIR/mma_probe.json" --set mma --k-major-b \
      --budget 0.15 ;;
    ladder) step ladder 120 $PY benchmarks/bench_matmul.py --filter "^ladder" --out "$OUTDIR/ladder.json" ;;
    matmul_m*) mkdir -p "$OUTDIR/${s#matmul_}"
      step "bench_$s" 280 $PY benchmarks/bench_matmul.py --out "$OUTDIR/${s#matmul_}/matmul.json" ;;
    skinny) step skinny 180 $PY scripts/dev/probe_small_matmul.py "$OUTDIR/skinny_probe.json" --set skinny ;;
    conv|matmul|conv_family) step "bench_$s" 560 $PY "benchmarks/bench_$s.py" --out "$OUTDIR/$s.json" ;;
    grouped) step t_grouped 400 $PY -m pytest -q -p no:cacheprovider --junitxml="$OUTDIR/junit_grouped.xml" \
        tests/test_conv2d.py tests/test_routing.py -k "group or resnext or regnet"
      step bench_grouped 400 $PY benchmarks/bench_conv.py --filter grouped --out "$OUTDIR/conv_grouped.json" ;;
    models) step bench_models 560 $PY benchmarks/bench_models.py --models vit_s16,resnet50 --out "$OUTDIR/models.json" ;;
    models_grouped|models_family|models_llama)
      m=$(case $s in models_grouped) echo resnext50_32x4d,regnet_y_400mf ;; models_family) echo r3d_18,whisper_tiny_encoder ;;
          *) echo llama_8x1024 ;; esac)
      step "bench_$s" 560 $PY benchmarks/bench_models.py --models "$m" --out "$OUTDIR/$s.json" ;;
    suite|suite_portable) n=${SHARDS:-4}  # n pytest processes on the one GPU at once (TILEOPS_SHARD)
      p=$([ $s = suite_portable ] && echo 1 || echo 0)
      for i in $(seq 0 $((n - 1))); do
        TILEOPS_PORTABLE=$p TILEOPS_SHARD=$i/$n step "t_$s$i" 560 $PY -m pytest -q -p no:cacheprovider -m cuda \
          --durations=10 --junitxml="$OUTDIR/junit_$s$i.xml" tests &
      done
      wait
      for i in $(seq 0 $((n - 1))); do
        $PY scripts/device/junit_summary.py "$OUTDIR/junit_$s$i.xml" "$OUTDIR/summary_$s$i.json" || rc=1
      done ;;
    matmul_portable|conv_portable|models_portable)  # the bench with TILEOPS_PORTABLE=1 (--portable)
      extra=$([ $s = models_portable ] && echo "--models vit_s16,resnet50")
      step "bench_$s" 560 $PY "benchmarks/bench_${s%_portable}.py" --portable $extra --out "$OUTDIR/$s.json" ;;
    suite_a|suite_b) if [ $s = suite_a ]; then files=$(ls tests/test_[a-h]*.py); else files=$(ls tests/test_[i-z]*.py); fi
      step "t_$s" 560 $PY -m pytest -q -p no:cacheprovider -m cuda --durations=20 --junitxml="$OUTDIR/junit_$s.xml" $files
      $PY scripts/device/junit_summary.py "$OUTDIR/junit_$s.xml" "$OUTDIR/summary_$s.json" || rc=1 ;;
    issue60) OUT="$OUTDIR" step issue60 120 $PY benchmarks/results/h100/issue60/r60b.py main 10 alone,dgrad,mm_tileops,mm_torch
      if [ -n "${ISSUE60_ENV:-}" ]; then
        OUT="$OUTDIR" step issue60_env 90 env $ISSUE60_ENV $PY benchmarks/results/h100/issue60/r60b.py env 10 dgrad
      fi ;;
    *) echo "unknown step $s"; rc=1 ;;
  esac
done
tar czf "$OUTDIR.tgz" -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")" && rm -rf "$OUTDIR"
exit $rc
