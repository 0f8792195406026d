// Tensor-core family, the 'mma' rung (fp16, bf16, and fp32 as TF32): mma.sync fed by ldmatrix from
// shared memory, fp32 accumulation, on any GPU from sm_80. It reads its operands through the
// problem's index map (tile_loader.cuh), so it takes every layout, stride and size, and every
// problem kind. 'auto' runs it off Hopper, and on Hopper for the small matmuls whose operands the
// wgmma path would first copy (routing/matmul.cu's kTcSmallWork*; routing/launch_rungs.cuh picks the tile).
//
// A block's BM x BN tile is split among WARPS_M x WARPS_N warps, each owning (BM / WARPS_M) x
// (BN / WARPS_N) outputs as m16n8 fragments. Both operand tiles are staged K-contiguous ([m][k]
// and [n][k]), 64 bytes of k per row and tile (32 fp16/bf16 or 16 fp32 values, 2 mma k steps),
// rows 80 bytes apart so that ldmatrix's 8 row addresses fall in 8 different 16-byte bank groups.
// Two buffers: the loads of k tile t+1 are in flight (in registers) while tile t is multiplied,
// and one barrier a tile suffices. Split-K (splits > 1): z also runs over K chunks of kc, and the
// block writes its fp32 partial tile to part[g][split][M][N] for splitk_reduce.
// BT (16-bit matmuls whose B rows run along n with 16-byte aligned rows, as torch.matmul's B): B is
// staged as it lies, [k][n], in 16-byte vectors of 8 columns instead of element by element, and
// ldmatrix.trans turns its 8x8 blocks into the same fragments.
// gemm_tc_async_kernel is the pipelined form for 16-bit matmuls whose operands are all read in
// aligned 16-byte vectors (A along k, B along k or, BT, along n) where the 128 x 128 tiles fill the
// SMs: cp.async copies straight into a ring of STAGES k tiles in shared memory, STAGES - 1 tiles in
// flight while one is multiplied, instead of one tile in registers. Same fragments and epilogue.
#pragma once
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <type_traits>

#include "common/epilogue.h"
#include "cuda/runtime/griddep.cuh"
#include "cuda/ptx/mma_sync.cuh"
#include "cuda/ladder/tile_loader.cuh"

namespace tileops {
namespace cuda {

template <int BM_, int BN_, int WARPS_M_, int WARPS_N_>
struct TcConfig {
  static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int FM = BM / WARPS_M / 16, FN = BN / WARPS_N / 8;  // m16 and n8 fragments per warp
  static constexpr int KBYTES = 64, ROW_BYTES = KBYTES + 16;             // see the top of the file
  static_assert(FM >= 1 && FN % 2 == 0, "B fragments are loaded two n8 blocks at a time");
};

// B for BT: a BK x BN tile of a row-major 16-bit B as [k][n] rows of BN values and 16 bytes more
// (ROW: ldmatrix.trans's 8 row addresses then fall in 8 different 16-byte bank groups), NV vectors
// of 8 columns a thread. The launcher checks that every vector starts 16-byte aligned (B's base,
// row and batch strides); columns past N and rows past K read as zero.
template <typename T, int BN, int BK, int THREADS>
struct NMajorLoader {
  static constexpr int VPR = BN / 8, NV = BK * VPR / THREADS, ROW = BN * int(sizeof(T)) + 16;
  static_assert(sizeof(T) == 2 && BK * VPR % THREADS == 0, "16-bit B, whole vectors a thread");
  uint4 v[NV];
  template <class P>
  __device__ void fetch(const P& p, int64_t g, int64_t n0, int64_t N, int64_t k0, int64_t K, int tid) {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int idx = tid + i * THREADS, nc = (idx % VPR) * 8;
      const int64_t k = k0 + idx / VPR, n = n0 + nc;
      v[i] = make_uint4(0, 0, 0, 0);
      if (k >= K || n >= N) continue;
      const T* src = p.B + g * p.sb[0] + k * p.sb[1] + n;
      if (n + 8 <= N) {
        v[i] = *reinterpret_cast<const uint4*>(src);
      } else {  // the last columns of a ragged N
        T e[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) e[j] = n + j < N ? src[j] : T(0.f);
        memcpy(&v[i], e, 16);
      }
    }
  }
  __device__ void store(char* bs, int tid) const {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int idx = tid + i * THREADS;
      *reinterpret_cast<uint4*>(bs + (idx / VPR) * ROW + (idx % VPR) * 16) = v[i];
    }
  }
};

// One k tile (KBYTES of k) of a warp's FM x FN fragments: A from as ([m][k] rows of ROW_BYTES), B
// from bs ([n][k] rows of ROW_BYTES, or with BT [k][n] rows of BROW bytes).
template <typename T, class Cfg, bool BT, int BROW>
__device__ __forceinline__ void tc_warp_tile(const char* as, const char* bs, float (&acc)[Cfg::FM][Cfg::FN][4],
                                             int wm0, int wn0, int lane) {
  constexpr int RB = Cfg::ROW_BYTES, KSTEPS = Cfg::KBYTES / 32;
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) {
    // ldmatrix lanes 8j..8j+7 address matrix j: A's are (rows 0-7 | 8-15) x (k bytes 0-15 | 16-31)
    // in that order (a0..a3), B's (k bytes 0-15 | 16-31) x (n 0-7 | 8-15), b[j][0..1] then b[j+1];
    // with BT the same four B blocks, each stored [k][n] and transposed by ldmatrix.trans.
    uint32_t a[Cfg::FM][4], b[Cfg::FN][2];
#pragma unroll
    for (int i = 0; i < Cfg::FM; ++i)
      ldmatrix_x4(a[i], as + (wm0 + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * RB + ks * 32 + (lane >> 4) * 16);
#pragma unroll
    for (int j = 0; j < Cfg::FN; j += 2) {
      if constexpr (BT)
        ldmatrix_x4_trans(&b[j][0], bs + (ks * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * BROW +
                                        (wn0 + j * 8 + (lane >> 4) * 8) * int(sizeof(T)));
      else
        ldmatrix_x4(&b[j][0], bs + (wn0 + j * 8 + (lane & 7) + (lane >> 4) * 8) * RB + ks * 32 + ((lane >> 3) & 1) * 16);
    }
#pragma unroll
    for (int i = 0; i < Cfg::FM; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::FN; ++j) mma_sync<T>(acc[i][j], a[i], b[j]);
  }
}

// A warp's outputs, its fragments starting at (wm, wn): thread (g4, t4) = (lane / 4, lane % 4) holds
// rows g4 and g4 + 8 of each fragment, at columns 2 t4 and 2 t4 + 1; put(row_of(m), n, value) for
// each of them inside M x N.
template <class Cfg, class RowOf, class Put>
__device__ __forceinline__ void tc_each_output(const float (&acc)[Cfg::FM][Cfg::FN][4], int64_t wm, int64_t wn,
                                               int lane, int64_t M, int64_t N, RowOf&& row_of, Put&& put) {
  const int g4 = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int i = 0; i < Cfg::FM; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t m = wm + i * 16 + g4 + 8 * h;
      if (m >= M) continue;
      const auto row = row_of(m);
#pragma unroll
      for (int j = 0; j < Cfg::FN; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t n = wn + j * 8 + 2 * t4 + e;
          if (n < N) put(row, n, acc[i][j][2 * h + e]);
        }
    }
}

// The shared epilogue onto C (bias, residual, activation, cast) for a warp's outputs.
template <typename T, class Cfg, class P>
__device__ __forceinline__ void tc_store(const P& p, const Epilogue<T>& epi, int64_t g,
                                         const float (&acc)[Cfg::FM][Cfg::FN][4], int64_t wm, int64_t wn, int lane,
                                         int64_t M, int64_t N) {
  with_act_of<P>(epi.act, [&](auto act) {
    tc_each_output<Cfg>(acc, wm, wn, lane, M, N, [&](int64_t m) { return p.row_c(g, m); },
                        [&](const auto& row, int64_t n, float v) {
                          epi.template store<decltype(act)::value>(p.c(row, n), v, p.bias_index(g, n));
                        });
  });
}

struct NoLoader {  // BT's loader where there is none
  static constexpr int ROW = 0;
};

template <typename T, class P, class Cfg, bool BT>
__global__ void __launch_bounds__(Cfg::THREADS)
    gemm_tc_kernel(P p, int64_t batch, int64_t M, int64_t N, int64_t K, Epilogue<T> epi, int splits, int64_t kc,
                   float* __restrict__ part) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BM = Cfg::BM, BN = Cfg::BN, RB = Cfg::ROW_BYTES, BK = Cfg::KBYTES / int(sizeof(T));
  if (part != nullptr) griddep_launch_dependents();  // the split's reduce (a dependent) sets up meanwhile
  using Loaders = TileLoaders<T, P, BM, BN, BK, Cfg::THREADS>;
  using Map = TileMap<BM, BK, Cfg::THREADS>;  // both operands' (TileMap: one row per thread group)
  static_assert(BM == BN && (Map::KRUN * sizeof(T) == 32 || Map::KRUN * sizeof(T) == 16),
                "a thread stages one or two 16-byte vectors per operand");
  using BtLoader = std::conditional_t<BT, NMajorLoader<T, BN, BK, Cfg::THREADS>, NoLoader>;
  static_assert(!BT || sizeof(T) == 2, "BT: ldmatrix.trans moves 16-bit values");
  __shared__ __align__(16) char As[2][BM * RB];
  __shared__ __align__(16) char Bs[2][BT ? BK * BtLoader::ROW : BN * RB];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm0 = (warp / Cfg::WARPS_N) * Cfg::FM * 16, wn0 = (warp % Cfg::WARPS_N) * Cfg::FN * 8;
  const int64_t m0 = int64_t(blockIdx.x) * BM, n0 = int64_t(blockIdx.y) * BN;

  for (int64_t z = blockIdx.z; z < batch * splits; z += gridDim.z) {
    const int64_t g = z / splits, split = z % splits;
    const int64_t k_begin = split * kc, k_end = splits == 1 || K < k_begin + kc ? K : k_begin + kc;
    Loaders ld;  // with BT, only its A part
    BtLoader bt;
    auto fetch = [&](int64_t k0) {
      if constexpr (BT) {
        ld.a.fetch(p, k0, k_end);
        bt.fetch(p, g, n0, N, k0, k_end, tid);
      } else {
        ld.fetch(p, k0, k_end);
      }
    };
    ld.a.init(p, g, m0, M, tid);
    if constexpr (!BT) ld.b.init(p, g, n0, N, tid);
    fetch(k_begin);  // the chunk's first k tile in registers
    auto stage = [&](int buf) {  // the registers' k tile into buffer buf
      constexpr int W = Map::KRUN * int(sizeof(T)) / 4;
      uint32_t w[W];
      pack_words(ld.a.v, w);
      auto* da = reinterpret_cast<uint4*>(As[buf] + ld.a.r * RB + ld.a.k_in * int(sizeof(T)));
#pragma unroll
      for (int i = 0; i < W / 4; ++i) da[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
      if constexpr (BT) {
        bt.store(Bs[buf], tid);
      } else {
        pack_words(ld.b.v, w);
        auto* db = reinterpret_cast<uint4*>(Bs[buf] + ld.b.r * RB + ld.b.k_in * int(sizeof(T)));
#pragma unroll
        for (int i = 0; i < W / 4; ++i) db[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
      }
    };

    float acc[Cfg::FM][Cfg::FN][4] = {};
    stage(0);
    __syncthreads();
    int buf = 0;
    for (int64_t k0 = k_begin; k0 < k_end; k0 += BK, buf ^= 1) {
      const bool more = k0 + BK < k_end;
      if (more) fetch(k0 + BK);  // in flight during this tile's multiplies
      tc_warp_tile<T, Cfg, BT, BtLoader::ROW>(As[buf], Bs[buf], acc, wm0, wn0, lane);
      if (more) stage(buf ^ 1);  // buf ^ 1 was last read before the previous barrier
      __syncthreads();
    }

    if (splits > 1) {
      float* dst = part + z * M * N;
      tc_each_output<Cfg>(acc, m0 + wm0, n0 + wn0, lane, M, N, [&](int64_t m) { return dst + m * N; },
                          [](float* row, int64_t n, float v) { row[n] = v; });
      continue;
    }
    tc_store<T, Cfg>(p, epi, g, acc, m0 + wm0, n0 + wn0, lane, M, N);
  }
#endif
}

// Shared-memory layout of one stage of gemm_tc_async_kernel's ring: the A tile, then the B tile.
template <class Cfg, bool BT>
struct TcAsyncStage {
  static constexpr int A_BYTES = Cfg::BM * Cfg::ROW_BYTES;
  static constexpr int B_ROW = BT ? Cfg::BN * 2 + 16 : Cfg::ROW_BYTES;  // BT: NMajorLoader's rows
  static constexpr int B_BYTES = BT ? Cfg::KBYTES / 2 * B_ROW : Cfg::BN * Cfg::ROW_BYTES;
  static constexpr int BYTES = A_BYTES + B_BYTES;
};

template <typename T, class Cfg, bool BT, int STAGES>
__global__ void __launch_bounds__(Cfg::THREADS)
    gemm_tc_async_kernel(MatmulProblem<T> p, int64_t batch, int64_t M, int64_t N, int64_t K, Epilogue<T> epi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  static_assert(sizeof(T) == 2 && STAGES >= 2, "16-bit operands");
  using S = TcAsyncStage<Cfg, BT>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, RB = Cfg::ROW_BYTES, BK = Cfg::KBYTES / 2, THREADS = Cfg::THREADS;
  constexpr int KV = Cfg::KBYTES / 16;                               // 16-byte vectors in a k row of a tile
  constexpr int A_V = BM * KV / THREADS, B_V = BN * KV / THREADS;  // vectors a thread copies (BT: as many)
  static_assert(BM * KV % THREADS == 0 && BN * KV % THREADS == 0 && BK * (BN / 8) == BN * KV, "whole vectors");
  extern __shared__ __align__(16) char smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm0 = (warp / Cfg::WARPS_N) * Cfg::FM * 16, wn0 = (warp % Cfg::WARPS_N) * Cfg::FN * 8;
  const int64_t m0 = int64_t(blockIdx.x) * BM, n0 = int64_t(blockIdx.y) * BN, ktiles = (K + BK - 1) / BK;
  const uint32_t ring = smem_u32(smem);
  // the first `bytes` of a 16-byte vector (0: none; src then only needs to be a valid address)
  auto bytes_left = [](int64_t left) { return left <= 0 ? 0 : left >= 8 ? 16 : int(left) * 2; };

  for (int64_t g = blockIdx.z; g < batch; g += gridDim.z) {
    const T* A = p.A + g * p.sa[0];
    const T* B = p.B + g * p.sb[0];
    auto load = [&](int64_t kt) {  // k tile kt into its stage, zeros past M, N and K
      const int64_t k0 = kt * BK;
      const uint32_t sa = ring + int(kt % STAGES) * S::BYTES, sb = sa + S::A_BYTES;
#pragma unroll
      for (int i = 0; i < A_V; ++i) {
        const int c = tid + i * THREADS, r = c / KV, kv = c % KV;
        const int64_t m = m0 + r, k = k0 + kv * 8;
        const int n_bytes = m < M ? bytes_left(K - k) : 0;
        cp_async16(sa + r * RB + kv * 16, n_bytes ? A + m * p.sa[1] + k : p.A, n_bytes);
      }
#pragma unroll
      for (int i = 0; i < B_V; ++i) {
        const int c = tid + i * THREADS;
        if constexpr (BT) {  // [k][n]: a row of BN / 8 vectors along n
          const int r = c / (BN / 8), nv = c % (BN / 8);
          const int64_t k = k0 + r, n = n0 + nv * 8;
          const int n_bytes = k < K ? bytes_left(N - n) : 0;
          cp_async16(sb + r * S::B_ROW + nv * 16, n_bytes ? B + k * p.sb[1] + n : p.B, n_bytes);
        } else {
          const int r = c / KV, kv = c % KV;
          const int64_t n = n0 + r, k = k0 + kv * 8;
          const int n_bytes = n < N ? bytes_left(K - k) : 0;
          cp_async16(sb + r * RB + kv * 16, n_bytes ? B + n * p.sb[2] + k : p.B, n_bytes);
        }
      }
    };

    float acc[Cfg::FM][Cfg::FN][4] = {};
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {  // one commit group a tile, empty past the last
      if (s < ktiles) load(s);
      cp_async_commit();
    }
    for (int64_t kt = 0; kt < ktiles; ++kt) {
      cp_async_wait<STAGES - 2>();  // this thread's copies of tile kt have landed
      __syncthreads();              // everyone's; and every warp is done with tile kt - 1, whose stage is next
      if (kt + STAGES - 1 < ktiles) load(kt + STAGES - 1);
      cp_async_commit();
      const char* st = smem + int(kt % STAGES) * S::BYTES;
      tc_warp_tile<T, Cfg, BT, S::B_ROW>(st, st + S::A_BYTES, acc, wm0, wn0, lane);
    }
    cp_async_wait<0>();
    __syncthreads();  // the next batch entry's first copies reuse the stages
    tc_store<T, Cfg>(p, epi, g, acc, m0 + wm0, n0 + wn0, lane, M, N);
  }
#endif
}

}  // namespace cuda
}  // namespace tileops
