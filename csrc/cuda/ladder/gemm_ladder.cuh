// The kernel ladder's SIMT rungs besides 'register' (gemm_simt.cuh). Each takes every float
// dtype (fp64 accumulates in double, the others in fp32), reads its operands through the
// problem's index map (any strides) and ends in the shared epilogue, with the activation a
// template argument chosen once per thread:
//   naive         one thread per output, operands straight from global memory
//   tiled         32x32 shared-memory tiles, one output per thread
//   tiled_padded  the same with one extra column per shared-memory row ("+1 padding")
//   vectorized    the fast fp32 path: 128x128x16 block tiles, 8 warps of 32x64, 8x8 outputs
//                 per thread, 16-byte global loads into double-buffered k-major shared memory,
//                 16-byte shared-memory fragment loads, 16-byte output stores
// The tensor-core rungs are 'mma' (mma/gemm_tc.cuh) and 'wgmma' (sm90/).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "common/gemm_args.h"
#include "cuda/ladder/gemm_simt.cuh"

namespace tileops {
namespace cuda {

// ---------------------------------------------------------------------------------------
// naive: consecutive threads take consecutive columns, so row-major B and C are read and
// written in coalesced runs and a warp shares one row of A.

template <int BM_, int BN_>
struct NaiveConfig {
  static constexpr int BM = BM_, BN = BN_, THREADS = BM * BN;
};

template <typename T, class P, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    gemm_naive_kernel(P p, int64_t batch, int64_t M, int64_t N, int64_t K, Epilogue<T> epi) {
  using Acc = acc_t<T>;
  const int64_t m = int64_t(blockIdx.x) * Cfg::BM + threadIdx.x / Cfg::BN;
  const int64_t n = int64_t(blockIdx.y) * Cfg::BN + threadIdx.x % Cfg::BN;
  if (m >= M || n >= N) return;  // no barriers in this kernel
  for (int64_t g = blockIdx.z; g < batch; g += gridDim.z) {
    const auto ra = p.row_a(g, m);
    const auto cb = p.col_b(g, n);
    Acc acc = Acc(0);
    for (int64_t k = 0; k < K; ++k) acc += static_cast<Acc>(p.a(ra, k)) * static_cast<Acc>(p.b(cb, k));
    with_act(epi.act, [&](auto act) {
      epi.template store<decltype(act)::value>(p.c(p.row_c(g, m), n), acc, p.bias_index(g, n));
    });
  }
}

template <typename T, class P, int... V>
auto kernel_of(NaiveConfig<V...>*) {
  return &gemm_naive_kernel<T, P, NaiveConfig<V...>>;
}

// ---------------------------------------------------------------------------------------
// tiled / tiled_padded: TILE x TILE threads, one output each. Thread (ty, tx) stages A(m0+ty,
// k0+tx) and B(k0+ty, n0+tx), then reads As[ty][kk] (one address per warp: a broadcast) and
// Bs[kk][tx] (consecutive words). Neither access has bank conflicts, so PAD should not change
// the speed; the variant exists to measure exactly that.

template <int TILE_, int PAD_>
struct TiledConfig {
  static constexpr int TILE = TILE_, PAD = PAD_, BM = TILE, BN = TILE, THREADS = TILE * TILE;
};

template <typename T, class P, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS)
    gemm_tiled_kernel(P p, int64_t batch, int64_t M, int64_t N, int64_t K, Epilogue<T> epi) {
  using Acc = acc_t<T>;
  constexpr int TILE = Cfg::TILE;
  __shared__ Acc As[TILE][TILE + Cfg::PAD];  // [m][k]
  __shared__ Acc Bs[TILE][TILE + Cfg::PAD];  // [k][n]
  const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  const int64_t m = int64_t(blockIdx.x) * TILE + ty, n = int64_t(blockIdx.y) * TILE + tx;
  const bool m_ok = m < M, n_ok = n < N;
  for (int64_t g = blockIdx.z; g < batch; g += gridDim.z) {
    typename P::RowA ra{};
    typename P::ColB cb{};
    if (m_ok) ra = p.row_a(g, m);
    if (n_ok) cb = p.col_b(g, n);
    Acc acc = Acc(0);
    for (int64_t k0 = 0; k0 < K; k0 += TILE) {
      As[ty][tx] = m_ok && k0 + tx < K ? static_cast<Acc>(p.a(ra, k0 + tx)) : Acc(0);
      Bs[ty][tx] = n_ok && k0 + ty < K ? static_cast<Acc>(p.b(cb, k0 + ty)) : Acc(0);
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[kk][tx];
      __syncthreads();
    }
    if (m_ok && n_ok) {
      with_act(epi.act, [&](auto act) {
        epi.template store<decltype(act)::value>(p.c(p.row_c(g, m), n), acc, p.bias_index(g, n));
      });
    }
  }
}

template <typename T, class P, int... V>
auto kernel_of(TiledConfig<V...>*) {
  return &gemm_tiled_kernel<T, P, TiledConfig<V...>>;
}

// ---------------------------------------------------------------------------------------
// vectorized (gemm_vec_kernel is matmul only: it reads the strides of MatmulProblem directly;
// its parts below also make gemm_conv_vec.cuh's fp32 conv kernels).
//
// Block tile BM x BN x BK; WARPS_M x WARPS_N warps of (LY*TM) x (LX*TN); each thread owns
// TM x TN outputs as (TM/4) x (TN/4) sub-blocks of 4 x 4, the sub-blocks of a warp's lanes
// side by side, so a fragment is one 16-byte shared-memory load and a warp's loads cover
// contiguous words (no bank conflicts). Lanes l and l^1 share their A fragment and l and l^2
// their B fragment, which halves the shared-memory wavefronts of a 16-byte load (4 -> 2):
// FFMA issue, not shared-memory bandwidth, then bounds the inner loop.
//
// Shared memory holds both tiles k-major (As[k][m], Bs[k][n]), two buffers of each: while a
// tile is multiplied, the next one travels global -> registers; it is stored to the other
// buffer after the math, and one barrier per k tile separates the two.

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int TM_, int TN_, int MIN_BLOCKS_>
struct VecConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int TM = TM_, TN = TN_, MIN_BLOCKS = MIN_BLOCKS_;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr int LY = 4, LX = 8;  // a warp's lanes: LY x LX sub-block positions
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  static_assert(WM * WARPS_M == BM && WN * WARPS_N == BN, "warps must tile the block");
  static_assert(WM == LY * TM && WN == LX * TN && TM % 4 == 0 && TN % 4 == 0, "warp tile is (4 TM) x (8 TN)");
};

// How the vectorized kernel reads one operand, element (r, k) (r = m for A, n for B) at
// base + r*rs + k*ks. kc: a thread's 16-byte vector runs along k (else along r); vec: that
// direction has unit stride and every vector start is 16-byte aligned.
struct VecOperand {
  bool kc, vec;
};
struct VecLayout {
  VecOperand a, b;
  bool fast;   // both operands vec, and no vector straddles an edge: every block takes 16-byte loads only
  bool c_vec;  // C rows are contiguous and 4-element aligned: 4 outputs per store
};

// Host side: the layout of an operand of `rows` x K (batch stride bs) for elements of `bytes`.
inline VecOperand vec_operand(const void* base, int64_t bs, int64_t rs, int64_t ks, int64_t rows, int64_t K,
                              int64_t batch, int bytes) {
  const int64_t n = 16 / bytes;  // elements per 16-byte vector
  VecOperand o;
  o.kc = ks == 1 && (rs != 1 || K >= rows);  // vectors along k where k has unit stride, else along rows
  const int64_t along = o.kc ? ks : rs, across = o.kc ? rs : ks, extent_across = o.kc ? rows : K;
  o.vec = along == 1 && reinterpret_cast<uintptr_t>(base) % 16 == 0 && (across % n == 0 || extent_across == 1) &&
          (bs % n == 0 || batch == 1);
  return o;
}

inline VecLayout vec_layout(const GemmArgs& a, int bytes) {
  const auto& o = a.mm;
  VecLayout l;
  l.a = vec_operand(o.a, o.sa[0], o.sa[1], o.sa[2], a.M, a.K, a.batch, bytes);
  l.b = vec_operand(o.b, o.sb[0], o.sb[2], o.sb[1], a.N, a.K, a.batch, bytes);
  // a vector lies wholly inside the operand or wholly past its edge (K along k, rows across)
  const int64_t n = 16 / bytes;
  auto whole = [&](const VecOperand& v, int64_t rows) { return (v.kc ? a.K : rows) % n == 0; };
  l.fast = l.a.vec && l.b.vec && whole(l.a, a.M) && whole(l.b, a.N);
  const int align = bytes * 4 < 16 ? bytes * 4 : 16;
  l.c_vec = o.sc[2] == 1 && reinterpret_cast<uintptr_t>(o.c) % align == 0 && (o.sc[1] % 4 == 0 || a.M == 1) &&
            (o.sc[0] % 4 == 0 || a.batch == 1);
  return l;
}

// A 16-byte vector in flight is held as four 32-bit words whatever T is (8 halves take 4
// registers, not 8); Words<T>::get reads element e of it as the accumulator type.
template <typename T>
struct Words {  // c10::Half, c10::BFloat16
  static __device__ __forceinline__ float get(const uint32_t (&w)[4], int e) {
    return static_cast<float>(T(uint16_t(e % 2 ? w[e / 2] >> 16 : w[e / 2] & 0xFFFFu), T::from_bits()));
  }
};
template <>
struct Words<float> {
  static __device__ __forceinline__ float get(const uint32_t (&w)[4], int e) { return __uint_as_float(w[e]); }
};
template <>
struct Words<double> {
  static __device__ __forceinline__ double get(const uint32_t (&w)[4], int e) {
    return __hiloint2double(int(w[2 * e + 1]), int(w[2 * e]));
  }
};

// 16-byte shared-memory stores and loads of accumulator-typed runs.
template <int N>
__device__ __forceinline__ void sts_vec(float* s, const float (&t)[N]) {
#pragma unroll
  for (int c = 0; c < N; c += 4) *reinterpret_cast<float4*>(s + c) = make_float4(t[c], t[c + 1], t[c + 2], t[c + 3]);
}
template <int N>
__device__ __forceinline__ void sts_vec(double* s, const double (&t)[N]) {
#pragma unroll
  for (int c = 0; c < N; c += 2) *reinterpret_cast<double2*>(s + c) = make_double2(t[c], t[c + 1]);
}
__device__ __forceinline__ void lds4(const float* s, float* r) {
  const float4 t = *reinterpret_cast<const float4*>(s);
  r[0] = t.x, r[1] = t.y, r[2] = t.z, r[3] = t.w;
}
__device__ __forceinline__ void lds4(const double* s, double* r) {
  const double2 t0 = *reinterpret_cast<const double2*>(s), t1 = *reinterpret_cast<const double2*>(s + 2);
  r[0] = t0.x, r[1] = t0.y, r[2] = t1.x, r[3] = t1.y;
}

// Four consecutive outputs in one store (16 bytes; 8 for 16-bit types, two 16-byte for fp64).
template <typename T>
__device__ __forceinline__ void store4(T* dst, const T (&v)[4]) {
  if constexpr (sizeof(T) == 2) {
    uint2 u;
    u.x = uint32_t(v[0].x) | (uint32_t(v[1].x) << 16);
    u.y = uint32_t(v[2].x) | (uint32_t(v[3].x) << 16);
    *reinterpret_cast<uint2*>(dst) = u;
  } else if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    reinterpret_cast<double2*>(dst)[0] = make_double2(v[0], v[1]);
    reinterpret_cast<double2*>(dst)[1] = make_double2(v[2], v[3]);
  }
}

// Global -> registers -> shared staging of one operand tile (ROWS x BK) for the vectorized
// kernel where VecLayout::fast: LOADS 16-byte vectors per thread. kc: vector i covers row r, k ..
// k+VEC-1 (a warp reads whole 32-byte sectors of consecutive rows) and is stored transposed;
// else rows r .. r+VEC-1 at one k (a warp reads 512 consecutive bytes) and is stored as is.
// Edges without per-element predicates: rows past the operand read its last row (kc) or last
// vector (they feed outputs that are never stored), and vectors past K, in the last k tile only,
// are zeros. Before, a K that was not a multiple of BK, or any edge block, took element loads,
// and the slow edge blocks set the time (docs/performance.md#simt-fp32).
template <typename T, typename Acc, int ROWS, int BK, int THREADS>
struct VecLoader {
  static constexpr int VEC = 16 / int(sizeof(T));
  static constexpr int LOADS = ROWS * BK / (VEC * THREADS);
  static_assert(LOADS >= 1 && LOADS * VEC * THREADS == ROWS * BK && BK % VEC == 0 && ROWS % VEC == 0,
                "a tile must split into whole 16-byte vectors, the same number per thread");
  const T* ptr[LOADS];  // vector i in the current k tile
  uint32_t w[LOADS][4];
  int soff[LOADS];  // its place in a shared buffer [BK][ld]

  // vector i's place in the tile: row r, k offset k
  static __device__ __forceinline__ int row_of(bool kc, int idx) {
    return kc ? idx / (BK / VEC) : idx % (ROWS / VEC) * VEC;
  }
  static __device__ __forceinline__ int k_of(bool kc, int idx) {
    return kc ? idx % (BK / VEC) * VEC : idx / (ROWS / VEC);
  }

  // rows: the operand's row count (rows % VEC == 0 where vectors run along rows)
  __device__ __forceinline__ void init(const T* base, int64_t rs, int64_t ks, bool kc, int64_t row0, int64_t rows,
                                       int ld, int tid) {
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      const int idx = tid + i * THREADS;
      const int r = row_of(kc, idx), k = k_of(kc, idx);
      soff[i] = k * ld + r;
      const int64_t row = row0 + r < rows ? row0 + r : kc ? rows - 1 : rows - VEC;
      ptr[i] = base + row * rs + int64_t(k) * ks;
    }
  }
  __device__ __forceinline__ void load() {
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      const uint4 t = __ldg(reinterpret_cast<const uint4*>(ptr[i]));
      w[i][0] = t.x, w[i][1] = t.y, w[i][2] = t.z, w[i][3] = t.w;
    }
  }
  // A ragged last k tile: klim of its BK k are inside K (K % VEC == 0 where kc)
  __device__ __forceinline__ void load_tail(bool kc, int klim, int tid) {
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      uint4 t = make_uint4(0, 0, 0, 0);
      if (k_of(kc, tid + i * THREADS) < klim) t = __ldg(reinterpret_cast<const uint4*>(ptr[i]));
      w[i][0] = t.x, w[i][1] = t.y, w[i][2] = t.z, w[i][3] = t.w;
    }
  }
  __device__ __forceinline__ void advance(int64_t ks) {
#pragma unroll
    for (int i = 0; i < LOADS; ++i) ptr[i] += BK * ks;
  }
  __device__ __forceinline__ void store(bool kc, Acc* s, int ld) const {
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      if (kc) {  // transposed into k-major: VEC scalar stores, one per k
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[soff[i] + e * ld] = static_cast<Acc>(Words<T>::get(w[i], e));
      } else {
        Acc t[VEC];
#pragma unroll
        for (int e = 0; e < VEC; ++e) t[e] = static_cast<Acc>(Words<T>::get(w[i], e));
        sts_vec(s + soff[i], t);
      }
    }
  }
};

// The vectorized kernels' shared parts (gemm_vec_kernel here, conv_vec_kernel in
// gemm_conv_vec.cuh): shared memory, a thread's place in the tile, the double-buffered main loop
// and the epilogue. Only how a k tile reaches registers and where an output row lies differ.
template <class Cfg, typename Acc>
struct VecSmem {
  // Rows padded by 16 bytes: they stay 16-byte aligned for the fragment loads, and the
  // transposing stores (one word per k, a warp's lanes on consecutive rows) spread over the
  // banks: conflict-free with 2 vectors per tile row, two-way with 4 (fp32, BK 16), where
  // they are still a small part of the shared-memory traffic.
  static constexpr int LDA = Cfg::BM + 16 / int(sizeof(Acc)), LDB = Cfg::BN + 16 / int(sizeof(Acc));
  Acc As[2][Cfg::BK * LDA];
  Acc Bs[2][Cfg::BK * LDB];
};

// The first row (a_off) and column (b_off) of a thread's 4x4 sub-blocks in the block tile.
template <class Cfg>
struct VecPlace {
  int a_off, b_off;
  __device__ __forceinline__ explicit VecPlace(int tid) {
    const int warp = tid / 32, lane = tid % 32;
    const int lx = (lane & 1) | ((lane >> 1) & 6);         // lane bits 0, 2, 3
    const int ly = ((lane >> 1) & 1) | ((lane >> 3) & 2);  // lane bits 1, 4
    a_off = (warp % Cfg::WARPS_M) * Cfg::WM + ly * 4;
    b_off = (warp / Cfg::WARPS_M) * Cfg::WN + lx * 4;
  }
};

// The pipeline over `ktiles` k tiles, for any loader: fetch(kt) brings k tile kt into registers,
// store(buf) puts them into shared buffer buf; acc += the tiles' products.
template <class Cfg, typename Acc, typename Fetch, typename Store>
__device__ __forceinline__ void vec_mainloop(const VecSmem<Cfg, Acc>& sm, const VecPlace<Cfg>& at, int64_t ktiles,
                                             Acc (&acc)[Cfg::TM][Cfg::TN], Fetch&& fetch, Store&& store) {
  constexpr int BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN, LY = Cfg::LY, LX = Cfg::LX;
  constexpr int LDA = VecSmem<Cfg, Acc>::LDA, LDB = VecSmem<Cfg, Acc>::LDB;
  if (ktiles > 0) {
    fetch(int64_t(0));
    store(0);
    __syncthreads();
  }
  for (int64_t kt = 0; kt < ktiles; ++kt) {
    const int cur = int(kt & 1);
    const bool more = kt + 1 < ktiles;
    if (more) fetch(kt + 1);  // the next tile's global loads fly during this tile's math
    const Acc* as = sm.As[cur] + at.a_off;
    const Acc* bs = sm.Bs[cur] + at.b_off;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      Acc af[TM], bf[TN];
#pragma unroll
      for (int i = 0; i < TM / 4; ++i) lds4(as + kk * LDA + i * (LY * 4), af + 4 * i);
#pragma unroll
      for (int j = 0; j < TN / 4; ++j) lds4(bs + kk * LDB + j * (LX * 4), bf + 4 * j);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += af[i] * bf[j];
    }
    if (more) store(cur ^ 1);  // the other buffer was last read before the previous barrier
    __syncthreads();           // this tile's reads and the next tile's stores are done
  }
}

// The epilogue in tile-relative 32-bit indices (nothing 64-bit per output stays live across the
// main loop): row(mi) is the pointer of tile row mi's first column (mi < m_lim), columns are cs
// apart, bias_at(nj) the bias index of tile column nj; c_vec: 4 outputs per store where cs == 1
// and rows are 4-element aligned. M_VEC: instead, each 4 rows of a sub-block are 4 consecutive
// 16-byte aligned elements (an NCHW conv output's pixels; m_lim % 4 == 0), stored as one vector
// per column: a warp's store then fills whole sectors, where one element per row filled a quarter
// (docs/kernels/conv-lowered.md#forward-conv_fwd_lowered-in-order-and-why).
// The activation is a template argument from here on.
template <typename T, class Cfg, bool M_VEC = false, typename Acc, typename Row, typename BiasAt>
__device__ __forceinline__ void vec_epilogue(const Acc (&acc)[Cfg::TM][Cfg::TN], const Epilogue<T>& epi,
                                             const VecPlace<Cfg>& at, int m_lim, int n_lim, Row&& row_of,
                                             int64_t cs, bool c_vec, BiasAt&& bias_at) {
  constexpr int TM = Cfg::TM, TN = Cfg::TN, LY = Cfg::LY, LX = Cfg::LX;
  with_act(epi.act, [&](auto act) {
    constexpr Act A = decltype(act)::value;
    Acc bias[TN];
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int nj = at.b_off + (j / 4) * (LX * 4) + j % 4;
      bias[j] = epi.bias != nullptr && nj < n_lim ? static_cast<Acc>(epi.bias[bias_at(nj)]) : Acc(0);
    }
    if constexpr (M_VEC) {
#pragma unroll
      for (int ib = 0; ib < TM / 4; ++ib) {
        const int mi = at.a_off + ib * (LY * 4);
        if (mi >= m_lim) continue;
        T* const row = row_of(mi);
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          const int nj = at.b_off + (j / 4) * (LX * 4) + j % 4;
          if (nj >= n_lim) continue;
          T out[4];
#pragma unroll
          for (int e = 0; e < 4; ++e)
            out[e] = epi.template finish<A>(acc[4 * ib + e][j] + bias[j], row + e + nj * cs);
          store4(row + nj * cs, out);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const int mi = at.a_off + (i / 4) * (LY * 4) + i % 4;
        if (mi >= m_lim) continue;
        T* const row = row_of(mi);
#pragma unroll
        for (int jb = 0; jb < TN / 4; ++jb) {
          const int nj = at.b_off + jb * (LX * 4);
          T out[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {  // columns past n_lim: computed, never stored, no residual read
            const Acc v = acc[i][4 * jb + e] + bias[4 * jb + e];
            out[e] = nj + e < n_lim ? epi.template finish<A>(v, row + (nj + e) * cs) : epi.template finish<A>(v);
          }
          if (c_vec && nj + 4 <= n_lim) {
            store4(row + nj, out);
          } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (nj + e < n_lim) row[(nj + e) * cs] = out[e];
          }
        }
      }
    }
  });
}

// RAGGED: K % BK != 0 with lay.fast, whose last k tile takes predicated loads; a kernel of its
// own, so that the steady-state loop of the others stays free of the branch (in one kernel it
// slowed the large squares: docs/performance.md#simt-fp32). launch_vectorized picks it whenever
// lay.fast and K % BK != 0.
// k_last > 0: the last batch entry's K is k_last (< K), split-K's remainder chunk in the same
// launch as the others (RAGGED where k_last % BK != 0).
template <typename T, class P, class Cfg, bool RAGGED = false>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
    gemm_vec_kernel(P p, int64_t /*batch: gridDim.z*/, int64_t M, int64_t N, int64_t K_all, Epilogue<T> epi,
                    VecLayout lay, int64_t k_last) {
  using Acc = acc_t<T>;
  using Smem = VecSmem<Cfg, Acc>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, LDA = Smem::LDA, LDB = Smem::LDB;
  __shared__ __align__(16) Smem sm;
  // No griddep_launch_dependents here (nor in the fp32 conv and skinny SIMT kernels): a split's
  // reduce launched at this kernel's start holds SM slots while it waits, which a conv backward's
  // other stream needed (docs/performance.md#streams-and-dependent-launches). Its reduce still
  // starts at this kernel's exit.

  const int tid = threadIdx.x;
  const VecPlace<Cfg> at(tid);
  const int64_t m0 = int64_t(blockIdx.x) * BM, n0 = int64_t(blockIdx.y) * BN;
  const int64_t K = k_last > 0 && blockIdx.z == gridDim.z - 1 ? k_last : K_all;
  const int64_t ktiles = (K + BK - 1) / BK;

  // One batch entry per block (launch_vectorized splits batches past the grid's z limit):
  // a loop over the batch here would let the compiler hoist per-thread state of the loaders
  // and the epilogue out of it, to stay live (spilled) across the main loop.
  const int64_t g = blockIdx.z;
  Acc acc[Cfg::TM][Cfg::TN];
#pragma unroll
  for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = Acc(0);

  if (lay.fast) {
    // A: rows m, row stride sa[1], k stride sa[2]; B: rows n, row stride sb[2], k stride sb[1]
    VecLoader<T, Acc, BM, BK, Cfg::THREADS> la;
    VecLoader<T, Acc, BN, BK, Cfg::THREADS> lb;
    la.init(p.A + g * p.sa[0], p.sa[1], p.sa[2], lay.a.kc, m0, M, LDA, tid);
    lb.init(p.B + g * p.sb[0], p.sb[2], p.sb[1], lay.b.kc, n0, N, LDB, tid);
    vec_mainloop(
        sm, at, ktiles, acc,
        [&](int64_t kt) {
          if (kt > 0) {
            la.advance(p.sa[2]);
            lb.advance(p.sb[1]);
          }
          if (!RAGGED || kt < K / BK) {
            la.load();
            lb.load();
          } else {
            la.load_tail(lay.a.kc, int(K - kt * BK), tid);
            lb.load_tail(lay.b.kc, int(K - kt * BK), tid);
          }
        },
        [&](int buf) {
          la.store(lay.a.kc, sm.As[buf], LDA);
          lb.store(lay.b.kc, sm.Bs[buf], LDB);
        });
  } else {  // edge blocks and other layouts: element loads through the index map
    TileLoaders<T, P, BM, BN, BK, Cfg::THREADS> ld;
    ld.init(p, g, m0, n0, M, N, K, tid);  // fetches k tile 0
    vec_mainloop(
        sm, at, ktiles, acc,
        [&](int64_t kt) {
          if (kt > 0) ld.fetch(p, kt * BK, K);
        },
        [&](int buf) {  // rows of a thread's run are k: the transposing stores of the kc case
#pragma unroll
          for (int i = 0; i < decltype(ld.a)::Map::KRUN; ++i)
            sm.As[buf][(ld.a.k_in + i) * LDA + ld.a.r] = static_cast<Acc>(ld.a.v[i]);
#pragma unroll
          for (int i = 0; i < decltype(ld.b)::Map::KRUN; ++i)
            sm.Bs[buf][(ld.b.k_in + i) * LDB + ld.b.r] = static_cast<Acc>(ld.b.v[i]);
        });
  }

  const int m_lim = int(M - m0 < BM ? M - m0 : BM), n_lim = int(N - n0 < BN ? N - n0 : BN);
  T* const c0 = p.C + g * p.sc[0] + m0 * p.sc[1] + n0 * p.sc[2];
  vec_epilogue<T, Cfg>(
      acc, epi, at, m_lim, n_lim, [&](int mi) { return c0 + mi * p.sc[1]; }, p.sc[2], lay.c_vec,
      [&](int nj) { return p.bias_index(g, n0 + nj); });
}

template <typename T, class P, int... V>
auto kernel_of(VecConfig<V...>*) {
  return &gemm_vec_kernel<T, P, VecConfig<V...>>;
}

}  // namespace cuda
}  // namespace tileops
