// Tensor-core family, the 'mma' rung (fp16, bf16, and fp32 as TF32 when allowed): WMMA
// fragments fed from shared memory, fp32 accumulation. WMMA lowers to the warp-level mma.sync
// instructions (HMMA in the SASS), so this is the ladder's mma.sync rung. Warps tile the
// block WARPS_M x WARPS_N, each warp owns (BM/WARPS_M) x (BN/WARPS_N) outputs as 16x16
// fragments. The epilogue goes through a 16x16 per-warp scratch so tails and any output
// strides are predicated.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "../common/epilogue.h"
#include "tile_loader.cuh"

namespace tileops {
namespace cuda {

// Storage type T -> WMMA element type and the k of one MMA.
template <typename T>
struct TcTraits;
template <>
struct TcTraits<c10::Half> {
  using Frag = __half;
  static constexpr int MMA_K = 16;
};
template <>
struct TcTraits<c10::BFloat16> {
  using Frag = __nv_bfloat16;
  static constexpr int MMA_K = 16;
};
template <>
struct TcTraits<float> {  // only reached with TF32 allowed
  using Frag = nvcuda::wmma::precision::tf32;
  static constexpr int MMA_K = 8;
};

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_>
struct TcConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int FM = BM / WARPS_M / 16, FN = BN / WARPS_N / 16;  // fragments per warp
};

template <typename T, class P, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    gemm_tc_kernel(P p, int64_t batch, int64_t M, int64_t N, int64_t K, Epilogue<T> epi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  namespace wmma = nvcuda::wmma;
  using Tr = TcTraits<T>;
  using Frag = typename Tr::Frag;
  // shared memory holds the storage type; WMMA reads it as its element type (same bits)
  using S = std::conditional_t<std::is_same<T, float>::value, float, Frag>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, MK = Tr::MMA_K;
  constexpr int APAD = 16 / sizeof(T), BPAD = 16 / sizeof(T);  // keep rows 16-byte aligned, shift banks
  constexpr int LDA = BK + APAD, LDB = BN + BPAD;
  __shared__ __align__(128) S As[BM * LDA];
  __shared__ __align__(128) S Bs[BK * LDB];
  __shared__ __align__(128) float scratch[Cfg::WARPS_M * Cfg::WARPS_N][16 * 16];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / Cfg::WARPS_N, wn = warp % Cfg::WARPS_N;
  const int64_t m0 = int64_t(blockIdx.x) * BM, n0 = int64_t(blockIdx.y) * BN;

  for (int64_t g = blockIdx.z; g < batch; g += gridDim.z) {
    TileLoaders<T, P, BM, BN, BK, Cfg::THREADS> ld;
    ld.init(p, g, m0, n0, M, N, K, tid);
    auto& la = ld.a;
    auto& lb = ld.b;

    wmma::fragment<wmma::accumulator, 16, 16, MK, float> acc[Cfg::FM][Cfg::FN];
#pragma unroll
    for (int i = 0; i < Cfg::FM; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::FN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

    for (int64_t k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
      for (int i = 0; i < decltype(ld.a)::Map::KRUN; ++i)
        As[la.r * LDA + la.k_in + i] = reinterpret_cast<const S&>(la.v[i]);
#pragma unroll
      for (int i = 0; i < decltype(ld.b)::Map::KRUN; ++i)
        Bs[(lb.k_in + i) * LDB + lb.r] = reinterpret_cast<const S&>(lb.v[i]);
      __syncthreads();
      if (k0 + BK < K) {  // next slice's global loads overlap this slice's MMAs
        ld.fetch(p, k0 + BK, K);
      }
#pragma unroll
      for (int kk = 0; kk < BK; kk += MK) {
        wmma::fragment<wmma::matrix_a, 16, 16, MK, Frag, wmma::row_major> fa[Cfg::FM];
        wmma::fragment<wmma::matrix_b, 16, 16, MK, Frag, wmma::row_major> fb[Cfg::FN];
#pragma unroll
        for (int i = 0; i < Cfg::FM; ++i) {
          wmma::load_matrix_sync(fa[i], As + (wm * Cfg::FM * 16 + i * 16) * LDA + kk, LDA);
          if constexpr (std::is_same<T, float>::value)
            for (int e = 0; e < fa[i].num_elements; ++e) fa[i].x[e] = wmma::__float_to_tf32(fa[i].x[e]);
        }
#pragma unroll
        for (int j = 0; j < Cfg::FN; ++j) {
          wmma::load_matrix_sync(fb[j], Bs + kk * LDB + wn * Cfg::FN * 16 + j * 16, LDB);
          if constexpr (std::is_same<T, float>::value)
            for (int e = 0; e < fb[j].num_elements; ++e) fb[j].x[e] = wmma::__float_to_tf32(fb[j].x[e]);
        }
#pragma unroll
        for (int i = 0; i < Cfg::FM; ++i)
#pragma unroll
          for (int j = 0; j < Cfg::FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
      __syncthreads();
    }

    // Epilogue: each lane writes 8 consecutive columns of one fragment row; the activation is
    // a template argument from here on.
    float* sc = scratch[warp];
    const int er = lane / 2, ec = (lane % 2) * 8;
    with_act(epi.act, [&](auto act) {
      constexpr Act A = decltype(act)::value;
#pragma unroll
      for (int i = 0; i < Cfg::FM; ++i) {
#pragma unroll
        for (int j = 0; j < Cfg::FN; ++j) {
          wmma::store_matrix_sync(sc, acc[i][j], 16, wmma::mem_row_major);
          __syncwarp();
          const int64_t m = m0 + wm * Cfg::FM * 16 + i * 16 + er;
          const int64_t nb = n0 + wn * Cfg::FN * 16 + j * 16 + ec;
          if (m < M) {
            const auto row = p.row_c(g, m);
#pragma unroll
            for (int e = 0; e < 8; ++e)
              if (nb + e < N) epi.template store<A>(p.c(row, nb + e), sc[er * 16 + ec + e], p.bias_index(g, nb + e));
          }
          __syncwarp();
        }
      }
    });
  }
#endif
}

// The kernel of a config (see launch.cuh).
template <typename T, class P, int... V>
auto kernel_of(TcConfig<V...>*) {
  return &gemm_tc_kernel<T, P, TcConfig<V...>>;
}

}  // namespace cuda
}  // namespace tileops
