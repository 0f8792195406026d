// Global -> register -> shared staging of one operand tile, shared by every CUDA family.
//
// Each thread owns one tile row of A (one column of B) and a run of KRUN consecutive k
// inside the BK slice: the row state (pointer, decoded conv coordinates) is computed once
// per tile, and a thread walks contiguous k, which is contiguous memory for row-major A,
// channels_last conv inputs and B = weight^T. Elements past M/N/K read as zero.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/problems.h"

namespace tileops {
namespace cuda {

template <int ROWS, int BK, int THREADS>
struct TileMap {
  static constexpr int KRUN = ROWS * BK / THREADS;  // k elements per thread per slice
  static constexpr int PER_ROW = BK / KRUN;          // threads sharing one row
  static_assert(ROWS * BK % THREADS == 0 && BK % KRUN == 0, "tile does not split evenly");
  static_assert(THREADS / PER_ROW == ROWS, "one row per thread group");
};

// One operand tile: A (IS_A, rows = m) or B (rows = n). Holds KRUN prefetched values in
// registers between slices.
template <typename T, class P, bool IS_A, int ROWS, int BK, int THREADS>
struct OperandLoader {
  using Map = TileMap<ROWS, BK, THREADS>;
  std::conditional_t<IS_A, typename P::RowA, typename P::ColB> state;
  bool ok;
  int r, k_in;
  T v[Map::KRUN];

  __device__ void init(const P& p, int64_t g, int64_t row0, int64_t rows_total, int tid) {
    r = tid / Map::PER_ROW;
    k_in = (tid % Map::PER_ROW) * Map::KRUN;
    ok = row0 + r < rows_total;
    if (!ok) return;
    if constexpr (IS_A) state = p.row_a(g, row0 + r);
    else state = p.col_b(g, row0 + r);
  }
  __device__ void fetch(const P& p, int64_t k0, int64_t K) {
    if constexpr (std::is_same<P, MatmulProblem<T>>::value) {
      // A run of KRUN elements one k stride apart from one pointer: a stride add per element
      // instead of a 64-bit multiply and a 64-bit bounds test
      const int64_t k = k0 + k_in, s = IS_A ? p.sa[2] : p.sb[1];
      const int left = ok && k < K ? int(K - k < Map::KRUN ? K - k : Map::KRUN) : 0;
      const T* src = ok ? state + k * s : nullptr;
      // contiguous and 16-byte aligned (a K-major operand: row-major A, B = weight^T): the
      // whole run in 16-byte loads, a fraction of the element loads' instructions
      constexpr int VEC = 16 / int(sizeof(T));
      if constexpr (Map::KRUN % VEC == 0) {
        if (s == 1 && left == Map::KRUN && (reinterpret_cast<uintptr_t>(src) & 15) == 0) {
#pragma unroll
          for (int i = 0; i < Map::KRUN / VEC; ++i) {
            const uint4 w = reinterpret_cast<const uint4*>(src)[i];
            memcpy(&v[i * VEC], &w, 16);
          }
          return;
        }
      }
#pragma unroll
      for (int i = 0; i < Map::KRUN; ++i) v[i] = i < left ? src[i * s] : T(0.f);
      return;
    }
#pragma unroll
    for (int i = 0; i < Map::KRUN; ++i) {
      const int64_t k = k0 + k_in + i;
      if (!ok || k >= K) v[i] = T(0.f);
      else if constexpr (IS_A) v[i] = p.a(state, k);
      else v[i] = p.b(state, k);
    }
  }
};

// Both operand tiles of one (BM x BN) output tile; init() also fetches the first K slice, the
// one from k0 (a split-K chunk's first; K: where the chunk ends).
template <typename T, class P, int BM, int BN, int BK, int THREADS>
struct TileLoaders {
  OperandLoader<T, P, true, BM, BK, THREADS> a;
  OperandLoader<T, P, false, BN, BK, THREADS> b;
  __device__ void init(const P& p, int64_t g, int64_t m0, int64_t n0, int64_t M, int64_t N, int64_t K, int tid,
                       int64_t k0 = 0) {
    a.init(p, g, m0, M, tid);
    b.init(p, g, n0, N, tid);
    fetch(p, k0, K);
  }
  __device__ void fetch(const P& p, int64_t k0, int64_t K) {
    a.fetch(p, k0, K);
    b.fetch(p, k0, K);
  }
};

}  // namespace cuda
}  // namespace tileops
