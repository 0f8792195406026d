// Skinny family (M <= 16, fp32 and fp64): a matrix-vector product in disguise, bound by reading
// B once, where a 128-row tile would compute 127 empty rows. A block owns a few columns of B
// and one K chunk (blockIdx.y; chunks are summed by splitk_reduce); the chunk's rows of A sit
// in shared memory, and B is read along whichever of N and K is contiguous:
//   N-major B (row-major K x N): each thread owns a column; a warp's loads are 32 consecutive n.
//   K-major B (a linear weight, N x K): each warp owns a column; lanes split k, then a shuffle sum.
#pragma once
#include "../common/epilogue.h"
#include "../common/problems.h"
#include "cuda_util.h"

namespace tileops {
namespace cuda {

constexpr int kSkinnyThreads = 256, kSkinnyKs = 128;  // threads per block; k per shared-memory stage
constexpr int kSkinnyMaxM = 16;

// Columns of B one block covers in each mode.
template <bool KMAJOR>
constexpr int skinny_cols() { return KMAJOR ? kSkinnyThreads / 32 : kSkinnyThreads; }

template <typename T, int MT, bool KMAJOR>
__global__ void __launch_bounds__(kSkinnyThreads)
    gemm_skinny_kernel(MatmulProblem<T> p, int64_t M, int64_t N, int64_t K, int64_t kc, Epilogue<T> epi,
                       AccOf<T>* __restrict__ partial) {
  using Acc = AccOf<T>;
  __shared__ Acc As[MT][kSkinnyKs];  // k fastest: lanes reading consecutive k hit distinct banks
  const int tid = threadIdx.x, lane = tid % 32;
  const int64_t g = blockIdx.z;
  const int64_t n = int64_t(blockIdx.x) * skinny_cols<KMAJOR>() + (KMAJOR ? tid / 32 : tid);
  const int64_t kbeg = int64_t(blockIdx.y) * kc, kend = K < kbeg + kc ? K : kbeg + kc;
  const auto col = p.col_b(g, n < N ? n : 0);
  Acc acc[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) acc[m] = Acc(0);

  for (int64_t k0 = kbeg; k0 < kend; k0 += kSkinnyKs) {
    const int kn = kend - k0 < kSkinnyKs ? int(kend - k0) : kSkinnyKs;
    for (int i = tid; i < MT * kSkinnyKs; i += kSkinnyThreads) {  // A's rows, read along k
      const int m = i / kSkinnyKs, kk = i % kSkinnyKs;
      As[m][kk] = m < M && kk < kn ? static_cast<Acc>(p.a(p.row_a(g, m), k0 + kk)) : Acc(0);
    }
    __syncthreads();
    if (n < N) {
      constexpr int step = KMAJOR ? 32 : 1;
#pragma unroll 4
      for (int kk = KMAJOR ? lane : 0; kk < kn; kk += step) {
        const Acc b = static_cast<Acc>(p.b(col, k0 + kk));
#pragma unroll
        for (int m = 0; m < MT; ++m) acc[m] += As[m][kk] * b;
      }
    }
    __syncthreads();  // the stage is refilled
  }
  if constexpr (KMAJOR) {  // the warp's lanes hold partial sums over k: lane 0 gets the total
#pragma unroll
    for (int m = 0; m < MT; ++m)
      for (int o = 16; o > 0; o /= 2) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
    if (lane != 0) return;
  }
  if (n >= N) return;
  if (partial != nullptr) {  // layout [batch][splits][M][N], as splitk_reduce reads it
    Acc* dst = partial + ((g * gridDim.y + blockIdx.y) * M) * N + n;
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if (m < M) dst[m * N] = acc[m];
    return;
  }
  with_act(epi.act, [&](auto act) {
#pragma unroll
    for (int m = 0; m < MT; ++m)
      if (m < M) epi.template store<decltype(act)::value>(p.c(p.row_c(g, m), n), acc[m], p.bias_index(g, n));
  });
}

}  // namespace cuda
}  // namespace tileops
