// SIMT family, the 'register' rung (fp64, and fp32 convolutions when TF32 is off):
// shared-memory tiles with 2-D register blocking, operands read through any problem's index
// map. Each thread computes TM x TN outputs spread across the tile (stride BM/TM, BN/TN) so a
// warp's shared-memory reads and global stores are consecutive.
#pragma once
#include <type_traits>

#include "common/epilogue.h"
#include "cuda/ladder/tile_loader.cuh"

namespace tileops {
namespace cuda {

// Accumulator type of the SIMT kernels: double for fp64, float for everything else.
template <typename T>
using acc_t = std::conditional_t<std::is_same<T, double>::value, double, float>;

template <int BM_, int BN_, int BK_, int TM_, int TN_>
struct SimtConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, TM = TM_, TN = TN_;
  static constexpr int THREADS = (BM / TM) * (BN / TN);
};

template <typename T, class P, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    gemm_simt_kernel(P p, int64_t batch, int64_t M, int64_t N, int64_t K, Epilogue<T> epi) {
  using Acc = acc_t<T>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int PAD = 1;  // odd row pitch: the loaders' column writes spread over banks
  __shared__ Acc As[BK][BM + PAD];
  __shared__ Acc Bs[BK][BN + PAD];

  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int64_t m0 = int64_t(blockIdx.x) * BM, n0 = int64_t(blockIdx.y) * BN;

  for (int64_t g = blockIdx.z; g < batch; g += gridDim.z) {
    TileLoaders<T, P, BM, BN, BK, Cfg::THREADS> ld;
    ld.init(p, g, m0, n0, M, N, K, tid);
    auto& la = ld.a;
    auto& lb = ld.b;

    Acc acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = Acc(0);

    for (int64_t k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
      for (int i = 0; i < decltype(ld.a)::Map::KRUN; ++i) As[la.k_in + i][la.r] = static_cast<Acc>(la.v[i]);
#pragma unroll
      for (int i = 0; i < decltype(ld.b)::Map::KRUN; ++i) Bs[lb.k_in + i][lb.r] = static_cast<Acc>(lb.v[i]);
      __syncthreads();
      if (k0 + BK < K) {  // next slice's global loads overlap this slice's math
        ld.fetch(p, k0 + BK, K);
      }
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
        Acc av[TM], bv[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) av[i] = As[kk][ty + i * (BM / TM)];
#pragma unroll
        for (int j = 0; j < TN; ++j) bv[j] = Bs[kk][tx + j * (BN / TN)];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
      }
      __syncthreads();
    }

    with_act_of<P>(epi.act, [&](auto act) {  // the activation is a template argument from here on
      constexpr Act A = decltype(act)::value;
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const int64_t m = m0 + ty + i * (BM / TM);
        if (m >= M) continue;
        const auto row = p.row_c(g, m);
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const int64_t n = n0 + tx + j * (BN / TN);
          if (n < N) epi.template store<A>(p.c(row, n), acc[i][j], p.bias_index(g, n));
        }
      }
    });
  }
}

// The kernel of a config (the launcher in routing/launch_rungs.cuh calls this for every family).
template <typename T, class P, int... V>
auto kernel_of(SimtConfig<V...>*) {
  return &gemm_simt_kernel<T, P, SimtConfig<V...>>;
}

}  // namespace cuda
}  // namespace tileops
