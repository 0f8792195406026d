// Skinny family (M <= 16; fp32 and fp64, matmul_skinny): a matrix-vector product in disguise,
// bound by reading B once, where a 128-row tile would compute 112 or more empty rows. A block of
// 8 warps owns BN columns of B and one K chunk (blockIdx.y; chunks are summed by splitk_reduce).
// Each lane owns a column vector and the block's warps take turns along k, so that together they
// stream whole runs of B; their partial sums meet in shared memory at the end. The chunk's rows of A are
// staged in shared memory, and all lanes of a warp read the same A values (a broadcast). B is
// read in 16-byte vectors (V elements) along whichever of N and K is contiguous:
//   N-major B (row-major K x N): a lane step is one row of V columns; a warp reads 32*V columns.
//   K-major B (a linear weight, N x K): a lane owns one column; a step is 2V consecutive k (one
//   32-byte sector).
// V = 1 where B's pointer or strides do not keep vectors aligned (any strides then). The first
// version read one element per thread and step and one shared A value per multiply-add, and was
// latency- and shared-memory-bound (docs/performance.md#skinny-matmuls).
// What bounds this one: the loads a lane has in flight live in its registers beside MT x VN
// accumulators; a cp.async or TMA ring in shared memory would lift that.
#pragma once
#include "common/epilogue.h"
#include "common/problems.h"
#include "common/skinny.h"
#include "cuda/runtime/launch_util.h"

namespace tileops {
namespace cuda {

template <bool KMAJOR, int V>
struct SkinnyShape {
  static constexpr int kWarps = 8, kThreads = 32 * kWarps;
  static constexpr int VN = KMAJOR ? 1 : V;      // columns per lane
  static constexpr int VK = KMAJOR ? 2 * V : 1;  // k per lane step
  static constexpr int E = VN * VK;              // elements of B per lane step
  static constexpr int BN = 32 * VN;             // columns per block
  static constexpr int ROUND = kWarps * VK;      // k per step of the whole block
};

// k per shared-memory stage of A: 16 KB of accumulator values, whole block steps.
template <typename Acc, int MT, int ROUND>
constexpr int skinny_stage() {
  return int(16384 / (MT * sizeof(Acc))) / ROUND * ROUND;
}

// dst = src[0, N) from shared memory in the widest aligned vectors N allows (src is aligned to
// N values' bytes, up to 16).
template <typename Acc, int N>
__device__ __forceinline__ void shared_row(const Acc* src, Acc (&dst)[N]) {
  constexpr int bytes = int(N * sizeof(Acc));
  constexpr int W = bytes % 16 == 0 ? int(16 / sizeof(Acc)) : bytes % 8 == 0 ? int(8 / sizeof(Acc)) : 1;
#pragma unroll
  for (int j = 0; j < N / W; ++j) {
    const Pack<Acc, W> q = reinterpret_cast<const Pack<Acc, W>*>(src)[j];
#pragma unroll
    for (int e = 0; e < W; ++e) dst[j * W + e] = q.v[e];
  }
}

template <typename T, int MT, bool KMAJOR, int V>
__global__ void __launch_bounds__(SkinnyShape<KMAJOR, V>::kThreads)
    gemm_skinny_kernel(MatmulProblem<T> p, int64_t M, int64_t N, int64_t K, int64_t kc, Epilogue<T> epi,
                       AccOf<T>* __restrict__ partial) {
  using Acc = AccOf<T>;
  using S = SkinnyShape<KMAJOR, V>;
  constexpr int KS = skinny_stage<Acc, MT, S::ROUND>();
  constexpr int U = KMAJOR ? 4 : 8;  // lane steps whose loads are in flight at once
  constexpr int R = MT < S::kThreads / S::BN ? MT : S::kThreads / S::BN;  // rows per reduction round
  __shared__ __align__(16) Acc As[MT * KS];  // N-major: [k][m] (a lane reads MT values); K-major: [m][k]
  __shared__ Acc red[S::kWarps * R * S::BN];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t g = blockIdx.z, nb = int64_t(blockIdx.x) * S::BN, n0 = nb + lane * S::VN;
  const int64_t kbeg = int64_t(blockIdx.y) * kc, kend = K < kbeg + kc ? K : kbeg + kc;
  // element e of a lane step at k: N-major column n0 + e of row k; K-major row k + e of column n0
  const T* bcol = p.B + g * p.sb[0] + (n0 < N ? n0 : 0) * p.sb[2];
  const int64_t se = KMAJOR ? p.sb[1] : p.sb[2];
  const int nvalid = n0 >= N ? 0 : KMAJOR ? 1 : int(N - n0 < V ? N - n0 : V);  // the lane's columns in N
  Acc acc[MT][S::VN];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int e = 0; e < S::VN; ++e) acc[m][e] = Acc(0);

  for (int64_t k0 = kbeg; k0 < kend; k0 += KS) {
    const int kn = kend - k0 < KS ? int(kend - k0) : KS;
    const int kfill = (kn + S::VK - 1) / S::VK * S::VK;  // what the steps read: zeros past M and the chunk
    for (int i = threadIdx.x; i < MT * kfill; i += S::kThreads) {
      const int m = KMAJOR ? i / kfill : i % MT, kk = KMAJOR ? i % kfill : i / MT;
      As[KMAJOR ? m * KS + kk : kk * MT + m] = m < M && kk < kn ? static_cast<Acc>(p.a(p.row_a(g, m), k0 + kk)) : Acc(0);
    }
    __syncthreads();
    for (int kk0 = warp * S::VK; kk0 < kn; kk0 += U * S::ROUND) {
      T b[U][S::E];
#pragma unroll
      for (int u = 0; u < U; ++u) {  // all U steps' loads first: they are in flight together
        const int kk = kk0 + u * S::ROUND;
        const T* src = bcol + (k0 + kk) * p.sb[1];
        const int valid = kk >= kn ? 0 : KMAJOR ? (nvalid == 0 ? 0 : kn - kk < S::E ? kn - kk : S::E) : nvalid;
        if (V > 1 && valid == S::E) {
#pragma unroll
          for (int j = 0; j < S::E / V; ++j) {
            const Pack<T, V> q = reinterpret_cast<const Pack<T, V>*>(src)[j];
#pragma unroll
            for (int e = 0; e < V; ++e) b[u][j * V + e] = q.v[e];
          }
        } else {
#pragma unroll
          for (int e = 0; e < S::E; ++e) b[u][e] = e < valid ? src[e * se] : T(0.f);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int kk = kk0 + u * S::ROUND;
        if (kk >= kn) break;
        if constexpr (KMAJOR) {
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            Acc a[S::E];
            shared_row(As + m * KS + kk, a);
#pragma unroll
            for (int e = 0; e < S::E; ++e) acc[m][0] += a[e] * static_cast<Acc>(b[u][e]);
          }
        } else {
          Acc a[MT];
          shared_row(As + kk * MT, a);
#pragma unroll
          for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int e = 0; e < V; ++e) acc[m][e] += a[m] * static_cast<Acc>(b[u][e]);
        }
      }
    }
    __syncthreads();  // the stage is refilled
  }

  // The warps' sums of each (row, column) meet in shared memory, R rows at a time; thread
  // (r, c) adds the 8 in warp order (deterministic) and stores the result.
  const int r = threadIdx.x / S::BN, c = threadIdx.x % S::BN;
#pragma unroll
  for (int m0 = 0; m0 < MT; m0 += R) {
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int e = 0; e < S::VN; ++e) red[(warp * R + i) * S::BN + lane * S::VN + e] = acc[m0 + i][e];
    __syncthreads();
    const int64_t m = m0 + r, n = nb + c;
    if (r < R && m < M && n < N) {
      Acc v = Acc(0);
#pragma unroll
      for (int w = 0; w < S::kWarps; ++w) v += red[(w * R + r) * S::BN + c];
      if (partial != nullptr) {  // layout [batch][splits][M][N], as splitk_reduce reads it
        partial[((g * gridDim.y + blockIdx.y) * M + m) * N + n] = v;
      } else {
        with_act(epi.act, [&](auto act) {
          epi.template store<decltype(act)::value>(p.c(p.row_c(g, m), n), v, p.bias_index(g, n));
        });
      }
    }
    __syncthreads();  // red is rewritten
  }
}

}  // namespace cuda
}  // namespace tileops
