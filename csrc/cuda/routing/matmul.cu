// Matmul on CUDA: the Hopper (wgmma + TMA) family where the GPU, build and operand layout
// allow it, else the generic families in launch_rungs.cuh.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "autotune/cuda_timing.h"
#include "cuda/skinny/gemm_skinny.cuh"  // kSkinnyMaxM
#include "cuda/runtime/griddep.cuh"
#include "cuda/routing/launch_rungs.cuh"
#include "cuda/ptx/mma_sync.cuh"  // round_tf32
#include "cuda/sm90/host.cuh"

namespace tileops::cuda {

// Why the Hopper family cannot run on this build, GPU and dtype, or nullptr when it can.
const char* sm90_unavailable(const GemmArgs& a) {
#ifndef TILEOPS_HAVE_SM90A
  return "tileops was built without the sm_90a target (TORCH_CUDA_ARCH_LIST must include 9.0a)";
#endif
  const bool tf32 = a.dtype == at::kFloat && (a.allow_tf32 || a.algo == Algo::Wgmma);
  if (a.dtype != at::kHalf && a.dtype != at::kBFloat16 && !tf32)
    return "it takes float16, bfloat16 and float32 (as TF32) only";
  const auto* prop = at::cuda::getCurrentDeviceProperties();
  if (prop->major != 9 || prop->minor != 0) return "it needs a compute capability 9.0 GPU (H100/H200)";
  if (a.K == 0) return "K is zero";
  if (a.batch > 65535 || a.M >= (int64_t(1) << 31) || a.N >= (int64_t(1) << 31) || a.K >= (int64_t(1) << 31))
    return "the problem is too large for one launch";
  return nullptr;
}

// Multiply-adds up to which 'auto' runs an fp16/bf16 matmul that TMA cannot read in place, or a
// TF32 one (whose B the Hopper path copies to round it but where K <= 512), on the 'mma' rung: there
// the copies cost more than the Hopper kernel gains (docs/kernels/mma.md#when-routing-takes-it).
// Skinny rows (M <= 16) keep the Hopper split-K: 64-row tiles would be almost empty.
constexpr double kTcSmallWork16 = double(int64_t(1) << 25), kTcSmallWorkTf32 = double(int64_t(1) << 27);

void gemm_cuda_matmul(const GemmArgs& a) {
  TORCH_INTERNAL_ASSERT(a.mm.rq == 0, "tileops: grouped output rows reach only the Hopper implicit conv kernels");
  // M <= 16: bound by reading B, where a 64- or 128-row tile would be mostly empty
  if (matmul_skinny_tc(a) || matmul_skinny(a)) return;
  const bool want = a.algo == Algo::Wgmma || (a.algo == Algo::Auto && tensor_core_dtype(a));
  const char* why = want ? sm90_unavailable(a) : "not requested";
  if (want && why == nullptr) {
    const hopper::TmaLayout l = hopper::sm90_layout(a);
    const bool tf32 = a.dtype == at::kFloat;
    const bool small = a.algo == Algo::Auto && a.M > kSkinnyMaxM && (!l.ok() || tf32) &&
                       double(a.batch) * a.M * a.N * a.K <= (tf32 ? kTcSmallWorkTf32 : kTcSmallWork16);
    if (!small) {
      if (a.dtype == at::kBFloat16) hopper::run_sm90_any_layout<c10::BFloat16>(a, l);
      else if (a.dtype == at::kHalf) hopper::run_sm90_any_layout<c10::Half>(a, l);
      else hopper::run_sm90_any_layout<float>(a, l);
      return;
    }
  }
  TORCH_CHECK(a.algo != Algo::Wgmma, "tileops.matmul: algo='wgmma' cannot run this problem: ", why);
  launch_matmul(a);
}

}  // namespace tileops::cuda
