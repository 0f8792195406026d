// Split-K's second pass, shared by the Hopper and SIMT families: the first pass writes each
// K chunk's partial tile to a workspace [batch][splits][M][N] (Acc: float, or double for fp64);
// this sums the splits in split order (so results are deterministic), then applies the
// epilogue: bias, residual, activation, cast. One thread per output element, coalesced along n.
#pragma once
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "../common/gemm_args.h"
#include "cuda_util.h"

namespace tileops {
namespace cuda {

template <typename T, typename Acc, Act A>
__global__ void splitk_reduce_kernel(const Acc* __restrict__ partial, int splits, int64_t M, int64_t N,
                                     int64_t batch, MatmulProblem<T> p, Epilogue<T> epi) {
  const int64_t total = batch * M * N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = i / (M * N), mn = i % (M * N), m = mn / N, n = mn % N;
    const Acc* src = partial + g * splits * M * N + mn;
    Acc v = Acc(0);
    for (int s = 0; s < splits; ++s) v += src[s * M * N];
    if (epi.bias != nullptr) v += static_cast<Acc>(epi.bias[p.bias_index(g, n)]);
    T* dst = p.c(p.row_c(g, m), n);
    *dst = epi.template finish<A>(v, dst);
  }
}

// The reduce of problem `a` (its output and epilogue) over `splits` partials on the current stream.
template <typename T, typename Acc>
void splitk_reduce(const Acc* partial, int splits, const GemmArgs& a) {
  const MatmulProblem<T> p(a.mm);
  const Epilogue<T> epi = epilogue_of<T>(a);
  const unsigned blocks = blocks_for(a.batch * a.M * a.N, 65535);
  with_act(a.act, [&](auto act) {
    splitk_reduce_kernel<T, Acc, decltype(act)::value>
        <<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(partial, splits, a.M, a.N, a.batch, p, epi);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace tileops
