// Depthwise conv2d forward (groups == C, each group one input channel): a direct kernel. As a
// GEMM each group is a (NPQ x RS) . (RS x K/C) sliver, far too thin for tiles; directly, each
// thread computes one output from R*S taps read through the caches, then the shared epilogue.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "../common/epilogue.h"
#include "kinds.h"

namespace tileops::cuda {
namespace {

// Threads walk the output in its memory order (channels innermost for channels_last), so
// neighbouring threads read neighbouring inputs and write neighbouring outputs.
template <typename T, typename Acc, bool CHANNELS_LAST, Act A>
__global__ void depthwise_fwd_kernel(ConvOperands c, Epilogue<T> epi) {
  const T* x = static_cast<const T*>(c.x);
  const T* w = static_cast<const T*>(c.w);
  T* y = static_cast<T*>(c.y);
  const int64_t total = c.N * c.K * c.P * c.Q, mult = c.Kg;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t n, k, p, q;
    if (CHANNELS_LAST) {
      k = i % c.K, q = (i / c.K) % c.Q, p = (i / (c.K * c.Q)) % c.P, n = i / (c.K * c.Q * c.P);
    } else {
      q = i % c.Q, p = (i / c.Q) % c.P, k = (i / (c.Q * c.P)) % c.K, n = i / (c.Q * c.P * c.K);
    }
    const T* xc = x + n * c.xs[0] + (k / mult) * c.xs[1];
    const T* wk = w + k * c.ws[0];
    Acc acc = 0;
    for (int64_t r = 0; r < c.R; ++r) {
      const int64_t h = p * c.sh - c.ph + r * c.dh;
      if (h < 0 || h >= c.H) continue;
      for (int64_t s = 0; s < c.S; ++s) {
        const int64_t ww = q * c.sw - c.pw + s * c.dw;
        if (ww < 0 || ww >= c.W) continue;
        acc += static_cast<Acc>(xc[h * c.xs[2] + ww * c.xs[3]]) * static_cast<Acc>(wk[r * c.ws[2] + s * c.ws[3]]);
      }
    }
    y[n * c.ys[0] + k * c.ys[1] + p * c.ys[2] + q * c.ys[3]] = epi.template apply<A>(acc, k);
  }
}

template <typename T, typename Acc>
void launch(const GemmArgs& a) {
  const auto& c = a.conv;
  const bool cl = c.ys[1] == 1 && c.K > 1;
  const int64_t total = c.N * c.K * c.P * c.Q;
  const unsigned blocks = unsigned(std::min<int64_t>((total + 255) / 256, 1 << 20));
  const Epilogue<T> epi{static_cast<const T*>(a.bias), a.act};
  const auto stream = at::cuda::getCurrentCUDAStream();
  with_act(a.act, [&](auto act) {
    constexpr Act A = decltype(act)::value;
    if (cl) depthwise_fwd_kernel<T, Acc, true, A><<<blocks, 256, 0, stream>>>(c, epi);
    else depthwise_fwd_kernel<T, Acc, false, A><<<blocks, 256, 0, stream>>>(c, epi);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

bool conv_fwd_depthwise(const GemmArgs& a) {
  if (a.conv.groups != a.conv.C || a.conv.Cg != 1 || a.conv.groups == 1) return false;
  switch (a.dtype) {
    case at::kDouble: launch<double, double>(a); break;
    case at::kFloat: launch<float, float>(a); break;
    case at::kHalf: launch<c10::Half, float>(a); break;
    case at::kBFloat16: launch<c10::BFloat16, float>(a); break;
    default: return false;
  }
  return true;
}

}  // namespace tileops::cuda
