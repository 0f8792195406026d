// Device pieces shared by the depthwise kernels (depthwise_fwd.cu, depthwise_strip.cu,
// depthwise_grad.cu): the walk of the generic kernels, the vector loads and the vector epilogue,
// and the output tile of the tile, strip and row-ring kernels. Index math is 32-bit inside a row of
// the output (or input) and 64-bit only in pointer offsets.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/epilogue.h"
#include "common/problems.h"

namespace tileops::cuda::depthwise {

// Threads walk a 4-D tensor (n, ch, i, j) in memory order: grid.y over "outer" rows, x over
// the row. Channels_last rows are (n, i) with (j, ch) inside; NCHW rows are (n, ch) with (i, j).
struct Walk {
  int CH, I, J;
  bool cl;
  TILEOPS_HD int64_t outer() const { return cl ? int64_t(I) : int64_t(CH); }  // per image
  TILEOPS_HD int inner() const { return cl ? J * CH : I * J; }
};
__device__ __forceinline__ void decode(const Walk& wk, int64_t row, int e, int64_t& n, int& ch, int& i, int& j) {
  if (wk.cl) {
    n = row / wk.I, i = int(row % wk.I), ch = e % wk.CH, j = e / wk.CH;
  } else {
    n = row / wk.CH, ch = int(row % wk.CH), i = e / wk.J, j = e % wk.J;
  }
}

inline dim3 walk_grid(const Walk& wk, int64_t N) {
  const int64_t rows = N * wk.outer();
  return dim3(unsigned((wk.inner() + 255) / 256), unsigned(std::min<int64_t>(rows, 65535)));
}

// The tile, strip and row-ring kernels: each thread computes kTQ neighbouring outputs of a row
// (docs/kernels/depthwise.md#the-tile-kernels). Blocks of 128 threads: at ~100 registers a
// thread, 256-thread blocks left 16 warps per SM, 128 leave 20.
constexpr int kTQ = 4, kTileThreads = 128;
constexpr int kStripV = 4;  // channels a thread of the strip and row-ring kernels

// A vector of V elements of T (8 or 16 bytes) as the integer vector a load or store moves.
// Pack<T, V> (cuda_util.h) is the same bytes, but the strip kernel built with it ran 3-8% more
// instructions (conversions moved through extra registers).
template <typename T, int V>
using VecOf = std::conditional_t<V * sizeof(T) == 16, uint4, uint2>;

// The vector epilogue of V channels whose bias is already in acc, at dst: + residual (one vector
// at the output's offset; vec_layout_why_not: aligned), activation, one vector store.
template <typename T, Act A, int V>
__device__ __forceinline__ void store_act(const Epilogue<T>& epi, T* dst, const float (&acc)[V]) {
  using Vec = VecOf<T, V>;
  float v[V];
#pragma unroll
  for (int e = 0; e < V; ++e) v[e] = acc[e];
  if (epi.residual != nullptr) {
    const Vec rv = *reinterpret_cast<const Vec*>(epi.residual + (dst - epi.out_base));
    const T* re = reinterpret_cast<const T*>(&rv);
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] += static_cast<float>(re[e]);
  }
  Vec out;
  T* oe = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int e = 0; e < V; ++e) oe[e] = epi.template finish<A>(v[e]);
  *reinterpret_cast<Vec*>(dst) = out;
}
// The same from channel ch0 on, the bias (when given) added first.
template <typename T, Act A, int V>
__device__ __forceinline__ void store_vec(const Epilogue<T>& epi, T* dst, float (&acc)[V], int ch0) {
  if (epi.bias != nullptr) {
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] += static_cast<float>(epi.bias[ch0 + e]);
  }
  store_act<T, A, V>(epi, dst, acc);
}

// The V values of a vector of T as floats.
template <typename T, int V, typename Vec>
__device__ __forceinline__ void to_floats(const Vec& v, float (&f)[V]) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < V; ++i) f[i] = static_cast<float>(e[i]);
}

// A vector at p, or zeros where `in` is false. The kernels issue all of a step's loads through
// this before converting any of them, so they are in flight together.
template <typename Vec, typename T>
__device__ __forceinline__ Vec load_vec(const T* p, bool in) {
  return in ? *reinterpret_cast<const Vec*>(p) : Vec{};
}

}  // namespace tileops::cuda::depthwise
