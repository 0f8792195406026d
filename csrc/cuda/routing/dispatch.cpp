// CUDA entry: the caller holds a device guard; empty problems launch nothing.
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/ScalarType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <vector>

#include "autotune/policy.h"
#include "cuda/routing/entry.h"
#include "cuda/runtime/streams.h"

namespace tileops {

// Grids put output-column tiles on gridDim.y (at most 65535 tiles of >= 64 columns), so
// wider matmuls run as column slices.
constexpr int64_t kMaxN = int64_t(65535) * 64;

void gemm_cuda(const GemmArgs& a) {
  if (a.batch == 0 || a.M == 0 || a.N == 0) return;
  if (a.kind == Kind::Matmul && a.N > kMaxN) {
    const int64_t es = int64_t(c10::elementSize(a.dtype));
    for (int64_t n0 = 0; n0 < a.N; n0 += kMaxN) {
      GemmArgs s = a;
      s.N = std::min(kMaxN, a.N - n0);
      s.mm.b = static_cast<const char*>(a.mm.b) + n0 * a.mm.sb[2] * es;
      s.mm.c = static_cast<char*>(a.mm.c) + n0 * a.mm.sc[2] * es;
      if (a.bias) s.bias = static_cast<const char*>(a.bias) + n0 * es;
      gemm_cuda(s);
    }
    return;
  }
  switch (a.kind) {
    case Kind::Matmul: cuda::gemm_cuda_matmul(a); break;
    case Kind::ConvFwd: cuda::gemm_cuda_conv_fwd(a); break;
    case Kind::ConvDgrad: cuda::gemm_cuda_conv_dgrad(a); break;
    case Kind::ConvWgrad: cuda::gemm_cuda_conv_wgrad(a); break;
  }
}

void gemm_cuda_concurrent(const std::vector<GemmArgs>& problems) {
  std::vector<std::function<void()>> fns;
  for (const GemmArgs& p : problems) fns.push_back([&p] { gemm_cuda(p); });
  cuda::concurrently(fns);
}

}  // namespace tileops
