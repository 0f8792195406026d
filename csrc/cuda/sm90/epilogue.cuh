// The Hopper family's epilogue (see kernels.cuh): staging layouts of the output tile, the
// bias tile, stage_fragment / store_fragment from the wgmma accumulators, and the stores to C
// (store_staged by rows, store_columns for a column-major C).
#pragma once
#include "cuda/sm90/primitives.cuh"

namespace tileops {
namespace cuda {
namespace sm90 {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The epilogue's two halves, shared by the kernels below, over a staging layout L: L::at(r, c)
// is the element offset of output (r, c) of the staged block.
// PaddedStaging: rows CP elements apart, CP padded so the fragment writes hit 32 distinct banks.
template <int CP>
struct PaddedStaging {
  static constexpr bool kPairs = true;  // a fragment's column pair is adjacent: one store
  static __device__ __forceinline__ int at(int r, int c) { return r * CP + c; }
};
// SwizzledStaging (ES-byte outputs): the block as column chunks of [ROWS][CW], CW = 128 / ES
// elements (one 128-byte row), each row's 16-byte units permuted by row % 8: the 128-byte swizzle
// a TMA store reads (chunk bases 1024-byte aligned), and, as the padding does, no more bank
// conflicts for the fragment writes than their bytes make necessary.
template <int ROWS, int ES>
struct SwizzledStaging {
  static constexpr int CW = ROW_BYTES / ES, VEC = 16 / ES;
  static constexpr bool kPairs = true;
  static __device__ __forceinline__ int at(int r, int c) {
    return (c / CW) * (ROWS * CW) + r * CW + ((((c % CW) / VEC) ^ (r % 8)) * VEC) + c % VEC;
  }
};
// One thread hands a staged ROWS x COLS block (SwizzledStaging) to TMA: a box store per 128-byte
// column chunk, to C from column n0, row m0 of batch entry g on (the map clips the tails), in one
// bulk group; the caller waits for its reads of shared memory before reusing or leaving it.
template <int ROWS, int COLS, typename T>
__device__ __forceinline__ void tma_store_staged(const T* stage, const CUtensorMap* map, int n0, int m0, int g) {
  constexpr int CW = SwizzledStaging<ROWS, int(sizeof(T))>::CW;  // columns per chunk (the map's box)
#pragma unroll
  for (int j = 0; j < COLS / CW; ++j) tma_store(stage + j * ROWS * CW, map, n0 + CW * j, m0, g);
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// ColumnStaging (16-bit C stored down its columns, Store::Cols): column c's rows contiguous, columns
// RP elements apart (RP = rows + 8: columns 16-byte aligned; a warp's fragment writes land on 16
// distinct words, two lanes a word, and a quarter warp's 16-byte reads on 128 contiguous bytes).
template <int RP>
struct ColumnStaging {
  static constexpr bool kPairs = false;  // a fragment's column pair is RP apart: two stores
  static __device__ __forceinline__ int at(int r, int c) { return c * RP + r; }
};


// Two adjacent outputs, stored as one; pack_pair converts a 16-bit pair in one instruction
// (cvt.rn.{bf16,f16}x2.f32, round to nearest as one conversion each would) instead of two and a pack.
template <typename S>
struct alignas(2 * sizeof(S)) Pair {
  S e[2];
};
template <typename S>
__device__ __forceinline__ Pair<S> pack_pair(float a, float b) {
  if constexpr (std::is_same<S, c10::BFloat16>::value || std::is_same<S, c10::Half>::value) {
    using V2 = std::conditional_t<std::is_same<S, c10::BFloat16>::value, __nv_bfloat162, __half2>;
    V2 v;
    if constexpr (std::is_same<S, c10::BFloat16>::value) v = __floats2bfloat162_rn(a, b);
    else v = __floats2half2_rn(a, b);
    return *reinterpret_cast<const Pair<S>*>(&v);
  } else {
    return Pair<S>{{static_cast<S>(a), static_cast<S>(b)}};
  }
}

// The tile's bias in shared memory, as float, in the accumulators' order: lane quad q = lane % 4
// holds columns 8j + 2q (+1) of every n8 block j, so each quad's values of blocks 2x and 2x + 1
// lie in one 16-byte chunk, chunk (x ^ q) of quad q's row: one LDS.128 per four columns (at one
// 4-byte LDS per output the bias's loads bounded the epilogue on the shared-memory pipe:
// docs/performance.md#epilogue), and the XOR puts the four quads' chunks in distinct banks.
template <int BN>
struct BiasLayout {
  static_assert(BN % 64 == 0, "BN / 16 chunks a quad, a multiple of 4 (x ^ q stays in the row)");
  static constexpr int CHUNKS = BN / 16;  // 16-byte chunks a quad
  static __device__ __forceinline__ int slot(int c) {  // column c's float
    const int q = c % 8 / 2, x = c / 16;
    return (q * CHUNKS + (x ^ q)) * 4 + c / 8 % 2 * 2 + c % 2;
  }
  // quad q's bias of n8 blocks 2x and 2x + 1: {8j + 2q, 8j + 2q + 1} for j = 2x, then j = 2x + 1
  static __device__ __forceinline__ float4 quad(const float* bias_s, int x, int q) {
    return *reinterpret_cast<const float4*>(bias_s + (q * CHUNKS + (x ^ q)) * 4);
  }
};

// stage_fragment: warpgroup thread t's part of an m64 x BN wgmma accumulator d into staging rows
// row0..row0+63, plus the tile's bias from shared memory (BiasLayout); RAW: as fp32, for a store
// loop that adds a residual before activating; else activated and cast to T. Fragment layout of
// m64nN: warp w holds rows 16w + lane/4 (+8), n8 block j columns 8j + 2 (lane % 4) (+1). Columns
// past N are computed, never stored.
template <Act A, int BN, class L, bool RAW, typename S, typename T>
__device__ __forceinline__ void stage_fragment(const float (&d)[BN / 2], S* stage, int row0, const float* bias_s,
                                               bool has_bias, const Epilogue<T>& epi, int t) {
  const int warp = t / 32, lane = t % 32;
  // the bias as a compile-time choice: tested inside the loop it split the loop into blocks of
  // four outputs, whose MUFU latencies did not overlap (docs/performance.md#epilogue)
  with_bias(has_bias, [&](auto hb) {
    constexpr bool HB = decltype(hb)::value;
#pragma unroll
    for (int x = 0; x < BN / 16; ++x) {  // n8 blocks 2x and 2x + 1, whose bias is one 16-byte read
      float4 b = {};
      if constexpr (HB) b = BiasLayout<BN>::quad(bias_s, x, lane % 4);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        const int j = 2 * x + jj, c = j * 8 + (lane % 4) * 2;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = row0 + warp * 16 + lane / 4 + half * 8;
          float v[2] = {d[j * 4 + half * 2], d[j * 4 + half * 2 + 1]};
          if constexpr (HB) v[0] += jj == 0 ? b.x : b.z, v[1] += jj == 0 ? b.y : b.w;
          if constexpr (RAW) {
            static_assert(L::kPairs, "fp32 staging (a residual's) is by rows");
            *reinterpret_cast<float2*>(stage + L::at(r, c)) = make_float2(v[0], v[1]);
          } else if constexpr (!L::kPairs) {
            stage[L::at(r, c)] = epi.template finish<A>(v[0]);
            stage[L::at(r, c + 1)] = epi.template finish<A>(v[1]);
          } else {  // the pair as one store (half the shared-memory store instructions)
            *reinterpret_cast<Pair<S>*>(stage + L::at(r, c)) =
                pack_pair<S>(epi.template activated<A>(v[0]), epi.template activated<A>(v[1]));
          }
        }
      }
    }
  });
}

// BiasTile: a tile's bias, BN values from column n0 on, as a warpgroup's 128 threads hold it.
// load() reads it into registers when the tile starts, so that the global loads' latency hides
// behind the main loop rather than stalling the epilogue; stage() writes it to shared memory as
// float (zeros past N, BiasLayout's order) for stage_fragment / store_fragment. I: the caller's
// index type.
template <int BN, typename T>
struct BiasTile {
  static constexpr int PER = (BN + 127) / 128;  // values a thread holds
  T v[PER];
  template <typename I>
  __device__ __forceinline__ void load(const Epilogue<T>& epi, const MatmulProblem<T>& p, int g, I n0, int64_t N,
                                       int t) {
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      const int c = t + 128 * e;
      v[e] = c < BN && n0 + c < N ? epi.bias[p.bias_index(g, n0 + c)] : T(0.f);
    }
  }
  __device__ __forceinline__ void stage(float* bias_s, int t) const {
#pragma unroll
    for (int e = 0; e < PER; ++e)
      if (t + 128 * e < BN) bias_s[BiasLayout<BN>::slot(t + 128 * e)] = static_cast<float>(v[e]);
  }
};

// store_fragment (fp32 outputs, T = float): as stage_fragment, but straight to C from row m0 and
// column n0 on, activated: a quad's float2 stores cover a 32-byte sector of a row, as many bytes
// as a staged store's would, without staging's barriers and shared memory. pairs: C's rows and
// base 16-byte aligned; float2 stores without checks where the tile spans BN columns of C, else
// element stores.
template <Act A, int BN, typename T>
__device__ __forceinline__ void store_fragment(const float (&d)[BN / 2], const MatmulProblem<T>& p, int g, int64_t m0,
                                               int64_t n0, int64_t M, int64_t N, const float* bias_s, bool has_bias,
                                               const Epilogue<T>& epi, bool pairs, int t) {
  static_assert(std::is_same<T, float>::value, "store_fragment: fp32 outputs");
  const int warp = t / 32, lane = t % 32;
  const bool whole = pairs && n0 + BN <= N;
  with_bias(has_bias, [&](auto hb) {  // a compile-time choice, as in stage_fragment
    auto value = [&](int j, int half, int e) {
      float v = d[j * 4 + half * 2 + e];
      if constexpr (decltype(hb)::value) {
        const float4 b = BiasLayout<BN>::quad(bias_s, j / 2, lane % 4);
        v += j % 2 == 0 ? (e == 0 ? b.x : b.y) : (e == 0 ? b.z : b.w);
      }
      return epi.template finish<A>(v);
    };
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t m = m0 + warp * 16 + lane / 4 + half * 8;
      if (m >= M) continue;
      const auto row = p.row_c(g, m);
      if (whole) {
        float* out = p.c(row, n0) + (lane % 4) * 2;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
          *reinterpret_cast<float2*>(out + j * 8) = make_float2(value(j, half, 0), value(j, half, 1));
      } else {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int64_t n = n0 + j * 8 + (lane % 4) * 2 + e;
            if (n < N) *p.c(row, n) = value(j, half, e);
          }
      }
    }
  });
}

// store_staged: ROWS x BN staged outputs (layout L) to C from (m0, n0) on, by a warpgroup's 128
// threads: 16-byte stores along rows where vec_store (rows and base 16-byte aligned), element
// stores at the edges; interior: the whole block lies inside C (no checks).
template <int ROWS, int BN, class L, typename T>
__device__ __forceinline__ void store_staged(const T* stage, const MatmulProblem<T>& p, int g, int64_t m0, int64_t n0,
                                             int64_t M, int64_t N, bool vec_store, bool interior, int t) {
  constexpr int VEC = 16 / int(sizeof(T));  // elements per 16-byte store
#pragma unroll 4
  for (int i = t; i < ROWS * (BN / VEC); i += 128) {
    const int r = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
    const int64_t m = m0 + r, n = n0 + c;
    if (interior || (vec_store && m < M && n + VEC <= N)) {
      *reinterpret_cast<uint4*>(p.c(p.row_c(g, m), n)) = *reinterpret_cast<const uint4*>(stage + L::at(r, c));
    } else if (m < M) {
      const auto row = p.row_c(g, m);
      for (int e = 0; e < VEC && n + e < N; ++e) *p.c(row, n + e) = stage[L::at(r, c) + e];
    }
  }
}

// store_columns (Store::Cols): ROWS x BN outputs staged by columns (ColumnStaging<RP>) to a
// column-major C (rows one element apart) from (m0, n0) on, 16 bytes of a column a thread: eight
// threads write one column's 128 contiguous bytes.
template <int ROWS, int BN, int RP, typename T>
__device__ __forceinline__ void store_columns(const T* stage, const MatmulProblem<T>& p, int g, int64_t m0, int64_t n0,
                                              int64_t M, int64_t N, int t) {
  static_assert(sizeof(T) == 2 && ROWS % 8 == 0 && RP % 8 == 0, "16-byte columns of 16-bit outputs");
  constexpr int VEC = 8, CH = ROWS / VEC;  // elements per store; stores per column
#pragma unroll 4
  for (int i = t; i < BN * CH; i += 128) {
    const int c = i / CH, r = (i % CH) * VEC;
    const int64_t m = m0 + r, n = n0 + c;
    if (m >= M || n >= N) continue;
    T* dst = p.c(p.row_c(g, m), n);
    const T* src = stage + c * RP + r;
    if (m + VEC <= M) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    else
      for (int e = 0; e < M - m; ++e) dst[e] = src[e];
  }
}
#endif

}  // namespace sm90
}  // namespace cuda
}  // namespace tileops
