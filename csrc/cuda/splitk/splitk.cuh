// Split-K's second pass, shared by the Hopper, ladder and skinny families: the first pass writes
// each K chunk's partial tile to a workspace [batch][splits][M][N] (Acc: float, double for fp64,
// or T); this sums the splits in split order (so results are deterministic), then applies the
// epilogue: bias, residual, activation, cast.
#pragma once
#include <algorithm>
#include <type_traits>

#include "common/gemm_args.h"
#include "cuda/runtime/launch_util.h"
#include "cuda/runtime/griddep.cuh"

namespace tileops {
namespace cuda {

// The split-K rule of the SIMT families (matmul_ladder.cu's simt_splitk, conv_lowered.cu's implicit
// fp32 kernels) and the 'mma' rung (routing/launch_rungs.cuh): how many K chunks a problem of `tiles` output
// tiles and reduction length K runs in. Where the tiles fill at most half the SMs: about two blocks
// per SM, each chunk at least min_k long (enough to hide a tile's prologue and epilogue; SIMT's
// 128, where 256 left small problems unsplit: docs/kernels/splitk.md#who-splits-and-how-much), at
// most 64 chunks; else 1.
constexpr int64_t kMinSplitK = 128;
inline int64_t splitk_count(int64_t tiles, int64_t K, int64_t min_k = kMinSplitK) {
  const int64_t sms = sm_count();
  if (tiles <= 0 || 2 * tiles > sms) return 1;
  return std::max<int64_t>(1, std::min<int64_t>({2 * sms / tiles, K / min_k, 64}));
}

// The split of a kernel that takes K chunks over grid z (the implicit fp32 conv kernels, the
// 'mma' rung): splitk_count's chunks, each a whole number kper of k tiles of bk (as few as that
// count needs, no chunk empty), and where splits > 1 the fp32 workspace of their partial tiles,
// [batch][splits][M][N] as splitk_reduce reads it. allowed: false keeps one chunk.
struct SplitPlan {
  int64_t kper, splits;
  Workspace work;
};
inline SplitPlan plan_split(int64_t tiles, int64_t K, int64_t bk, int64_t batch, int64_t M, int64_t N,
                            int64_t min_k = kMinSplitK, bool allowed = true) {
  const int64_t ktiles = (K + bk - 1) / bk, want = allowed ? splitk_count(tiles, K, min_k) : 1;
  SplitPlan s;
  s.kper = (ktiles + want - 1) / want;
  s.splits = ktiles == 0 ? 1 : (ktiles + s.kper - 1) / s.kper;
  if (s.splits > 1) s.work = float_workspace(batch * s.splits * M * N);
  return s;
}

// Each thread sums V consecutive outputs of one row (V = one 16-byte vector of partials where N
// allows it) with index type I (with_index: 32-bit where the workspace fits): the scalar,
// 64-bit-indexed form spent more on its divisions than on memory
// (docs/kernels/splitk.md#the-second-pass-splitk_reduce-csrccudasplitkcuh). LANES threads sum one
// output vector: lane l the splits l, l + LANES, ... in order, then the lanes' sums combine by
// shuffles in a fixed order (results stay deterministic). LANES = 8 for long reductions: with one
// thread per output (LANES = 1) each thread waited on one split's load at a time, and a conv weight
// gradient split 64 ways has few outputs, so few threads.
template <typename T, typename Acc, Act A, int V, int LANES, typename I>
__global__ void splitk_reduce_kernel(const Acc* __restrict__ partial, int splits, I M, I N, I batch,
                                     MatmulProblem<T> p, Epilogue<T> epi) {
  static_assert(LANES == 1 || LANES == 8, "a team of lanes is 1 or 8 threads of one warp");
  griddep_wait();  // launched as a dependent of the GEMM that writes the partials (splitk_reduce)
  const I NV = N / V, total = batch * M * NV * LANES, MN = M * N;
  const int lane = int(threadIdx.x % LANES);
  // whole teams iterate together: total and the grid's stride are multiples of LANES
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * I(blockDim.x)) {
    const I o = i / LANES, g = o / (M * NV), mv = o % (M * NV), m = mv / NV, n0 = (mv % NV) * V;
    const Acc* src = partial + g * splits * MN + m * N + n0;
    Pack<Acc, V> sum{};
#pragma unroll 4
    for (int s = lane; s < splits; s += LANES) {
      const Pack<Acc, V> q = *reinterpret_cast<const Pack<Acc, V>*>(src + I(s) * MN);
#pragma unroll
      for (int e = 0; e < V; ++e) sum.v[e] += q.v[e];
    }
    if constexpr (LANES > 1) {
      const unsigned team = 0xffu << (threadIdx.x % 32 & ~(LANES - 1));
#pragma unroll
      for (int d = 1; d < LANES; d *= 2)
#pragma unroll
        for (int e = 0; e < V; ++e) sum.v[e] += __shfl_xor_sync(team, sum.v[e], d);
      if (lane != 0) continue;
    }
    const auto row = p.row_c(g, m);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      Acc v = sum.v[e];
      if (epi.bias != nullptr) v += static_cast<Acc>(epi.bias[p.bias_index(g, n0 + e)]);
      T* dst = p.c(row, n0 + e);
      *dst = epi.template finish<A>(v, dst);
    }
  }
}

// The reduce of problem `a` (its output and epilogue) over `splits` partials on the current stream.
template <typename T, typename Acc>
void splitk_reduce(const Acc* partial, int splits, const GemmArgs& a) {
  const MatmulProblem<T> p(a.mm);
  const Epilogue<T> epi = epilogue_of<T>(a);
  constexpr int VEC = int(16 / sizeof(Acc));  // Acc: float or double
  const bool vec = a.N % VEC == 0 && reinterpret_cast<uintptr_t>(partial) % 16 == 0;
  const int lanes = splits >= 16 ? 8 : 1;
  const unsigned blocks = blocks_for(a.batch * a.M * a.N / (vec ? VEC : 1) * lanes, 65535);
  with_act(a.act, [&](auto act) {
    // the largest index formed (times 8: the thread index of a team's lane)
    with_index(a.batch * std::max<int64_t>(splits, 8) * a.M * a.N, [&](auto itag) {
      using I = decltype(itag);
      auto go = [&](auto v, auto l) {
        // set up while the GEMM before it still runs (its blocks waiting at griddep_wait), which
        // saves a batch-1 conv most of a launch gap
        DependentLaunch launch(dim3(blocks), dim3(256), 0);
        launch(splitk_reduce_kernel<T, Acc, decltype(act)::value, decltype(v)::value, decltype(l)::value, I>, partial,
               splits, I(a.M), I(a.N), I(a.batch), p, epi);
      };
      auto with_lanes = [&](auto v) {
        if (lanes == 8) go(v, std::integral_constant<int, 8>{});
        else go(v, std::integral_constant<int, 1>{});
      };
      if (vec) with_lanes(std::integral_constant<int, VEC>{});
      else with_lanes(std::integral_constant<int, 1>{});
    });
  });  // (the launch checks its own error)
}

// The (T, Acc) pairs the families reduce: splitk.cu instantiates each once (32 kernels a pair), and
// every other translation unit calls that one instead of compiling its own copy.
#define TILEOPS_SPLITK_TYPES(X) X(c10::BFloat16, float) X(c10::Half, float) X(float, float) X(double, double)
#define TILEOPS_SPLITK_EXTERN(T, Acc) extern template void splitk_reduce<T, Acc>(const Acc*, int, const GemmArgs&);
TILEOPS_SPLITK_TYPES(TILEOPS_SPLITK_EXTERN)
#undef TILEOPS_SPLITK_EXTERN

}  // namespace cuda
}  // namespace tileops
