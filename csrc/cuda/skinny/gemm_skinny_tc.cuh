// Skinny tensor-core family (M <= 16, fp16 / bf16, and fp32 as TF32; Hopper; matmul_skinny_tc):
// C = A B with at most 16 rows is a matrix-vector product bound by reading B once. Swapped roles: the MMA's 16-row side
// runs along N (C^T = B^T A^T), so B is the MMA's A operand and A's few rows fill its 8-wide
// side (one or two n8 tiles); no tile is mostly empty.
//
// A block owns BN = 16 * WARPS columns (one m16 tile per warp) and streams B and A through a ring
// of STAGES shared-memory stages of BK k (128 bytes: 64 16-bit values, 32 fp32). TMA: one producer
// warp fills each stage with tensor-map loads on a full / empty mbarrier pair, and the consumer
// warps never wait for each other in the main loop; else the consumers themselves fill the ring
// with 16-byte cp.async and meet at a block barrier every stage (the Hopper split-K and the SIMT
// skinny kernel held their loads in registers, which bounded the bytes in flight:
// docs/kernels/skinny.md#skinny-simt-kernel-matmul_skinny).
// Tiles are stored as TMA's 128-byte swizzle lays them out: 128-byte rows, chunk c of row r at
// c ^ (r % 8), so that the 8 row addresses of each ldmatrix fall in 8 different bank groups:
//   K-major B (a linear weight, N x K): rows n, chunks of k; ldmatrix gives B^T's fragments.
//   N-major B (row-major K x N): BN / (8 V) column blocks of 8 chunks of n, each BK rows k;
//   ldmatrix.trans gives them (TF32: 32-bit values, which ldmatrix.trans cannot transpose, are
//   read one word a lane).
//   A (M x K, k contiguous): rows m (zeros past M), chunks of k; ldmatrix gives the n8 fragments.
// TF32 rounds each fragment word to the nearest TF32 (round_tf32) before its MMA, as the other
// TF32 kernels round their operands.
// K is split over a cluster of up to 8 blocks along grid y; their fp32 partials meet through
// distributed shared memory and rank r sums its share of the tile in rank order (deterministic)
// and stores it through the epilogue: one launch, no workspace, no reduce kernel.
// Operands must be 16-byte readable (pointers, the non-unit strides); the host checks.
#pragma once
#include <cooperative_groups.h>

#include "common/epilogue.h"
#include "common/problems.h"
#include "cuda/runtime/launch_util.h"
#include "cuda/sm90/primitives.cuh"  // tma_load_tile
#include "cuda/ptx/mma_sync.cuh"
#include "cuda/ptx/mbarrier.cuh"

namespace tileops {
namespace cuda {

constexpr int kSkinnyTcRowBytes = 128;  // a stage's k: one 128-byte row of each operand's tile

template <int WARPS, int STAGES, int ES = 2, bool TMA = false>  // ES: bytes of an element
struct SkinnyTcShape {
  static constexpr int kWarps = WARPS, kStages = STAGES;
  static constexpr int kThreads = 32 * WARPS + (TMA ? 32 : 0);  // TMA: + the producer warp
  static constexpr int BN = 16 * WARPS;  // columns of C per block
  static constexpr int BK = kSkinnyTcRowBytes / ES;  // k per stage
  static constexpr int V = 16 / ES;      // values per 16-byte chunk
  static constexpr int kMaxRows = 16;
  // bytes of a stage: B's BN x BK and A's (up to) 16 x BK
  static constexpr int kStageBytes = (BN + kMaxRows) * BK * ES;
  static constexpr int kRingBytes = STAGES * kStageBytes;
  static constexpr int kSmemBytes = kRingBytes + (TMA ? 2 * STAGES * 8 : 0);  // TMA: full and empty barriers
  static_assert(kRingBytes >= kMaxRows * BN * 4, "the ring holds the block's fp32 partial tile at the end");
  static_assert(kStageBytes % 1024 == 0 && BN * BK * ES % 1024 == 0, "TMA's 128-byte swizzle: 1 KiB aligned tiles");
};

// One thread's 16-byte copy of one chunk of every stage of an operand's tile: its global source
// at the next k tile, its shared address in stage 0, the bytes it holds inside the problem while
// the tile lies inside K (0: none, and src stays at the operand's start) and its first k in a tile.
template <typename T, int BK>
struct ChunkCopy {
  static constexpr int V = 16 / int(sizeof(T));  // values per chunk
  const T* src;
  uint32_t dst;
  int bytes, k;
  // base + at; `left`: the chunk's values inside the problem along its own direction
  __device__ __forceinline__ void init(const T* base, int64_t at, uint32_t shared, int left, int k_in_tile) {
    bytes = left <= 0 ? 0 : left >= V ? 16 : int(sizeof(T)) * left;
    src = base + (bytes ? at : 0);
    dst = shared;
    k = k_in_tile;
  }
  // the chunk is whole (a block's interior, a tile inside K)
  __device__ __forceinline__ void whole(uint32_t off, int64_t step) {
    cp_async16(dst + off, src);
    src += step;
  }
  // any tile: kleft is the problem's k left from the tile's start; along_k: the chunk's values run
  // along k (so the last tile may cut it), else it is in or out whole
  __device__ __forceinline__ void edge(uint32_t off, int kleft, bool along_k, const T* base, int64_t step) {
    int b = bytes;
    if (kleft < BK) {
      const int kin = kleft - k;
      b = kin <= 0 ? 0 : along_k && kin < V ? min(b, int(sizeof(T)) * kin) : b;
    }
    cp_async16(dst + off, b ? src : base, b);
    src += bytes ? step : 0;
  }
};

// Element offset of chunk c (V values) of row r in a tile of `chunks` chunks per row, swizzled.
template <int V>
__device__ __forceinline__ int swz(int r, int c, int chunks) {
  return (r * chunks + (c ^ (r & 7))) * V;
}
// ... of chunk c of k row r in an N-major B tile of BK rows: column block c / 8 (one TMA box)
template <int V, int BK>
__device__ __forceinline__ int swz_nm(int r, int c) {
  return (c / 8) * BK * 8 * V + swz<V>(r, c % 8, 8);
}

// tm_b, tm_a (TMA only): B's map, boxes of BK k by BN rows (K-major) or of 8 chunks of n by BK k
// rows (N-major); A's, boxes of BK k by MP rows. Both are 3-D (batch last); a broadcast operand
// (batch stride 0) is read at batch 0.
template <typename T, int MP, bool KMAJOR, int WARPS, int STAGES, bool TMA>
__global__ void __launch_bounds__(SkinnyTcShape<WARPS, STAGES, int(sizeof(T)), TMA>::kThreads)
    gemm_skinny_tc_kernel(MatmulProblem<T> p, int M, int N, int K, Epilogue<T> epi,
                          const __grid_constant__ CUtensorMap tm_b, const __grid_constant__ CUtensorMap tm_a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using S = SkinnyTcShape<WARPS, STAGES, int(sizeof(T)), TMA>;
  constexpr int BN = S::BN, BK = S::BK, V = S::V, NT = MP / 8;
  constexpr bool kTf32 = sizeof(T) == 4;
  extern __shared__ __align__(1024) unsigned char smem[];
  T* const ring = reinterpret_cast<T*>(smem);  // stage s: B tile, then A tile
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = blockIdx.z, n0 = blockIdx.x * BN;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int split = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int ktiles = (K + BK - 1) / BK, per = (ktiles + split - 1) / split;
  const int kt0 = rank * per, nt = max(0, min(per, ktiles - kt0));

  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  // One stage's MMAs for this warp's m16 tile of columns (consumer warps only).
  // ldmatrix rows: lane l addresses row l % 8 of matrix l / 8
  const int mi = lane / 8, mr = lane % 8;
  auto mma_stage = [&](int st) {
    const T* const bs = ring + st * (S::kStageBytes / int(sizeof(T)));
    const T* const as = bs + BN * BK;
    constexpr int KS = 32 / int(sizeof(T));  // k of one MMA: two chunks
#pragma unroll
    for (int s = 0; s < BK / KS; ++s) {
      // B^T's 16 x KS fragment: (n 0-7, first half of k), (n 8-15, first half), (n 0-7, second
      // half), (n 8-15, second half)
      uint32_t af[4];
      if constexpr (KMAJOR) {
        ldmatrix_x4(af, bs + swz<V>(16 * warp + mr + 8 * (mi & 1), 2 * s + (mi >> 1), 8));
      } else if constexpr (!kTf32) {
        ldmatrix_x4_trans(af, bs + swz_nm<V, BK>(KS * s + mr + 8 * (mi >> 1), 2 * warp + (mi & 1)));
      } else {  // lane l: n = l / 4 (+ 8), k = l % 4 (+ 4)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int k = KS * s + lane % 4 + 4 * (e >> 1), n = 16 * warp + lane / 4 + 8 * (e & 1);
          af[e] = __float_as_uint(static_cast<float>(bs[swz_nm<V, BK>(k, n / V) + n % V]));
        }
      }
      if constexpr (kTf32) {
#pragma unroll
        for (int e = 0; e < 4; ++e) af[e] = round_tf32(__uint_as_float(af[e]));
      }
      // A's fragments: rows 8j..8j+7 at either half of the k, matrix 2j + half of one ldmatrix (at
      // one n8 tile, lanes 16-31 repeat 0-15's addresses)
      uint32_t bf[NT][2];
      if constexpr (NT == 2) ldmatrix_x4(&bf[0][0], as + swz<V>(8 * (mi >> 1) + mr, 2 * s + (mi & 1), 8));
      else ldmatrix_x2(bf[0], as + swz<V>(mr, 2 * s + (mi & 1), 8));
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if constexpr (kTf32) bf[j][0] = round_tf32(__uint_as_float(bf[j][0])), bf[j][1] = round_tf32(__uint_as_float(bf[j][1]));
        mma_sync<T>(acc[j], af, bf[j]);
      }
    }
  };

  if constexpr (TMA) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    uint64_t* const full = reinterpret_cast<uint64_t*>(smem + S::kRingBytes);  // TMA's bytes landed
    uint64_t* const empty = full + STAGES;                                      // every consumer warp read it
    if (tid == 0) {
      for (int st = 0; st < STAGES; ++st) mbar_init(&full[st], 1), mbar_init(&empty[st], WARPS);
      mbar_init_fence();
    }
    __syncthreads();
    if (warp == WARPS) {  // the producer warp: one lane issues every load
      if (lane == 0) {
        const int gb = p.sb[0] == 0 ? 0 : g, ga = p.sa[0] == 0 ? 0 : g;
        constexpr uint32_t kTx = (BN + MP) * BK * sizeof(T);  // the boxes' bytes, zero-filled parts included
        for (int t = 0; t < nt; ++t) {
          const int st = t % STAGES, k = (kt0 + t) * BK;
          if (t >= STAGES) mbar_wait(&empty[st], (t / STAGES - 1) & 1);
          mbar_expect_tx(&full[st], kTx);
          T* const bs = ring + st * (S::kStageBytes / int(sizeof(T)));
          sm90::tma_load_tile<BN, BK, !KMAJOR>(bs, &tm_b, &full[st], n0, k, gb);  // N-major: swz_nm's blocks
          sm90::tma_load_tile<MP, BK, false>(bs + BN * BK, &tm_a, &full[st], 0, k, ga);
        }
      }
    } else {
      for (int t = 0; t < nt; ++t) {
        const int st = t % STAGES;
        mbar_wait(&full[st], (t / STAGES) & 1);
        mma_stage(st);
        // The stage's ldmatrix reads (generic proxy) are ordered before the producer's next TMA
        // write into it (async proxy) only by a proxy fence: the arrive alone is no such order, and
        // ptxas issued it while the last k step's ldmatrix were still in flight, so a TMA write could
        // land first (issue 60: wrong weight gradients beside memory-heavy kernels;
        // docs/kernels/skinny.md#the-rings-release).
        fence_proxy_async_smem();
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[st]);
      }
    }
    __syncthreads();  // every stage read: the ring is free
#endif
  } else {
    const T* const Bg = p.B + int64_t(g) * p.sb[0];
    const T* const Ag = p.A + int64_t(g) * p.sa[0];
    // A thread's copies, the same chunks of every stage: chunk i of B's tile is row i / BCH, chunk
    // i % BCH; of A's, row i / 8, chunk i % 8 (8 chunks a row; rows past MP: none).
    constexpr int BCH = KMAJOR ? BK / V : BN / V;  // chunks per row of B's tile, as it lies in memory
    constexpr int ACH = MP * 8;                   // chunks of A's tile
    constexpr int BPT = BN * BK / V / S::kThreads, APT = (ACH + S::kThreads - 1) / S::kThreads;
    static_assert(BPT * S::kThreads == BN * BK / V && BK / V == 8, "whole chunks per thread, 8 a 128-byte row");
    const int64_t bstep = BK * p.sb[1];  // elements from one k tile to the next
    const bool interior = n0 + BN <= N;  // the block's columns all inside N
    ChunkCopy<T, BK> bc[BPT], ac[APT];
#pragma unroll
    for (int j = 0; j < BPT; ++j) {
      const int i = tid + j * S::kThreads, r = i / BCH, c = i % BCH;
      const int n = KMAJOR ? n0 + r : n0 + V * c, k = KMAJOR ? V * c : r;
      bc[j].init(Bg, int64_t(n) * p.sb[2] + int64_t(kt0 * BK + k) * p.sb[1],
                 smem_u32(ring + (KMAJOR ? swz<V>(r, c, 8) : swz_nm<V, BK>(r, c))), KMAJOR ? (n < N ? V : 0) : N - n, k);
    }
#pragma unroll
    for (int j = 0; j < APT; ++j) {
      const int i = tid + j * S::kThreads, m = i / 8, c = i % 8;
      ac[j].init(Ag, int64_t(m) * p.sa[1] + kt0 * BK + V * c, smem_u32(ring + BN * BK + swz<V>(m, c, 8)),
                 i < ACH && m < M ? V : 0, V * c);
    }
    // Stage st <- the next k tile (kt): zeros past K and past the edges of B and A.
    auto load = [&](int st, int kt) {
      const uint32_t off = st * S::kStageBytes;
      const int kleft = K - kt * BK;  // k of the problem left from the tile's start
      if (interior && kleft >= BK) {  // most tiles: every chunk of B whole
#pragma unroll
        for (int j = 0; j < BPT; ++j) bc[j].whole(off, bstep);
      } else {
#pragma unroll
        for (int j = 0; j < BPT; ++j) bc[j].edge(off, kleft, KMAJOR, Bg, bstep);
      }
#pragma unroll
      for (int j = 0; j < APT; ++j) {
        if (APT * S::kThreads > ACH && tid + j * S::kThreads >= ACH) break;
        ac[j].edge(off, kleft, true, Ag, BK);
      }
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < nt) load(s, kt0 + s);  // tiles are copied in order: the pointers step by one tile
      cp_async_commit();
    }
    for (int t = 0; t < nt; ++t) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // stage t landed for every thread; stage t - 1 is free to refill
      if (t + STAGES - 1 < nt) load((t + STAGES - 1) % STAGES, kt0 + t + STAGES - 1);
      cp_async_commit();
      mma_stage(t % STAGES);
    }
    cp_async_wait<0>();
    __syncthreads();  // the ring is free
  }

  // acc[j]: C^T rows (columns of C) n = lane / 4 (+ 8 for e >= 2), C rows m = 8j + 2 (lane % 4) + e % 2
  float* const part = reinterpret_cast<float*>(smem);
  if (warp < WARPS) {  // not the producer
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        part[(8 * j + 2 * (lane % 4) + (e & 1)) * BN + 16 * warp + lane / 4 + 8 * (e >> 1)] = acc[j][e];
  }
  cluster.sync();  // every rank's partial is written (cluster-wide release / acquire)
  for (int i = rank * S::kThreads + tid; i < M * BN; i += split * S::kThreads) {
    const int m = i / BN, n = n0 + i % BN;
    float v = 0.f;
    for (int q = 0; q < split; ++q) v += cluster.map_shared_rank(part, q)[i];
    if (n < N)
      with_act(epi.act, [&](auto act) {
        epi.template store<decltype(act)::value>(p.c(p.row_c(g, m), n), v, p.bias_index(g, n));
      });
  }
  cluster.sync();  // no block leaves while another reads its shared memory
#elif defined(__CUDA_ARCH__)
  __trap();  // built for sm_90 only; the host takes this family on compute capability 9.0 only
#endif
}

}  // namespace cuda
}  // namespace tileops
