// The Hopper family's persistent kernels (see kernels.cuh for the family): the tile
// scheduler (grouped tile order, PersistShape, TileOrigin) and gemm_sm90_persistent_kernel.
#pragma once
#include "cuda/sm90/kernels.cuh"

namespace tileops {
namespace cuda {
namespace sm90 {

// The persistent kernels (16-bit types and TF32, K-major A, no residual, no split-K): one block per SM
// walking output tiles blockIdx.x, + gridDim.x, ... in grouped order (GROUP_M tile rows at a
// time, so the tiles in flight share A rows and B columns in L2); the producer fills one ring in
// tile order, running on into the next tile while the consumers finish this one. A tile is TM x
// BN; each consumer warpgroup holds WROWS x BN of accumulators (WROWS / 64 m64 wgmmas). 16-bit
// outputs: it stages its epilogue in its own buffer, not in the ring, in TMA's 128-byte swizzle,
// the whole WROWS x BN block in one pass: where C's rows are 16-byte aligned one thread hands the
// staged block to TMA stores and the warpgroup goes on to its next tile (the stores drain while
// it computes), else its threads store it. TF32 (fp32 outputs): no staging (store_fragment).
// - Ping-pong (COOP false, 128 x 128, WROWS 128): each warpgroup owns whole tiles, the two
//   taking turns (the block's tiles 0, 2, 4... to warpgroup 1, the odd ones to 2), so one's main
//   loop runs while the other does its epilogue: the pipeline fill and the epilogue that cost
//   the one-tile kernel much of a short-K tile (ViT's K = 768) are hidden
//   (docs/performance.md#tiles-waves-persistent-scheduling-and-clusters).
// - Cooperative (COOP true, WROWS = TM / 2): both warpgroups work on every tile; the epilogue is
//   not hidden, but a k tile moves 48 KiB for twice the math of ping-pong's 32 KiB, which matters
//   where L2 bandwidth, not the epilogue, bounds the main loop. 256 x 128 (two m64n128 a
//   warpgroup), 128 x 256 (one m64n256: B is read from shared memory once per k step, not twice)
//   or 128 x 192 (one m64n192: finer column tiles, for outputs whose 256-wide tiles leave a
//   partial last wave, e.g. ViT-B's N = 768: 591 tiles of 128 x 256 on 132 SMs, 788 of 128 x 192).
// CL = 2: clusters of two blocks on vertically adjacent tiles (same columns): each loads its own
// A tile and one half of the shared B tile, multicast into both, so B crosses L2 once for two
// SMs. A stage may then be refilled only when the consumers of both blocks are done with it:
// each consumer releases a stage on both blocks' empty barriers, and a producer waits for its
// last stages' release before its block exits (the peer still arrives on its barriers).
// TF32 (T = float): B rounded by the host; A_RS: A read in place, rounded in registers
// (load_a_tf32) and multiplied from there, else a rounded copy read from shared memory. Its fp32
// outputs go from the accumulators straight to C (store_fragment), and the staging's shared
// memory goes to the ring: with 3 stages TMA's latency outran the consumers, and a 4th stage
// bought by staging fp32 outputs in passes sped up long K but slowed short K. 16-bit outputs keep the
// whole-tile staging: passes of 64 columns for a 4th stage at 128 x 256 cost more than they gave
// (docs/performance.md#tf32 and docs/performance.md#hopper-main-loop).
constexpr int GROUP_M = 8;
constexpr size_t kSmemPerBlock = 227 * 1024;  // sm_90's dynamic shared memory limit for one block
// ES: the output's element size (2, or 4 for TF32).
template <int TM, int BN, bool COOP, int ES>
struct PersistShape {
  static constexpr int WROWS = COOP ? TM / 2 : TM;
  static constexpr bool STAGED = ES == 2;  // TF32: no staging (store_fragment)
  static constexpr int SCOLS = STAGED ? BN : 0;  // staged columns a row
  static constexpr size_t STAGE = size_t(TM + BN) * ROW_BYTES;
  // two staging buffers of WROWS x SCOLS outputs (SwizzledStaging), two fp32 bias tiles, 1 KiB
  // alignment slack, 64 bytes for the turn barriers
  static constexpr size_t FIXED = 2 * size_t(WROWS) * SCOLS * ES + 2 * BN * sizeof(float) + 1024 + 64;
  // stages (each with its full and empty barriers) that fit beside them: at most 4 (TF32, whose
  // stages hold half the k: 6)
  static constexpr size_t FIT = (kSmemPerBlock - FIXED) / (STAGE + 2 * sizeof(uint64_t)), CAP = ES == 4 ? 6 : 4;
  static constexpr int STAGES = int(FIT < CAP ? FIT : CAP);
  static constexpr size_t SMEM = STAGES * STAGE + FIXED + 2 * STAGES * sizeof(uint64_t);
  static_assert(WROWS % 64 == 0 && TM % BM == 0 && STAGES >= 3, "persistent tile shape");
};

// Output tile i (of batch * mt * nt, tiles bm x bn) as (g, m0, n0), grouped: GROUP_M tile rows,
// column by column.
struct TileOrigin {
  int g;
  int64_t m0, n0;
};
__device__ __forceinline__ TileOrigin persist_tile(int i, int mt, int nt, int bm, int bn) {
  const int g = i / (mt * nt), r = i - g * mt * nt;
  const int first = r / (GROUP_M * nt) * GROUP_M, rows = min(GROUP_M, mt - first), in = r - first * nt;
  return {g, int64_t(first + in % rows) * bm, int64_t(in / rows) * bn};
}

// G = ConvFwdIm2col: the conv forward's implicit GEMM, A loaded by TMA im2col loads of tm_a (a map
// of x with BM-pixel boxes, as the one-tile kernel's), each of a tile's BM-row boxes one load per k
// tile; B (the weight rows) and C as in the plain GEMM.
template <typename T, bool B_MN_MAJOR, int TM, int BN, bool COOP, int CL, Gather G = Gather::None, bool A_RS = false>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_persistent_kernel(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
                                const __grid_constant__ CUtensorMap tm_c, MatmulProblem<T> p, int64_t M, int64_t N,
                                int64_t K, Epilogue<T> epi, int batch, int batch_a, int batch_b, bool vec_store,
                                ConvOperands conv) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  griddep_wait();  // a dependent launch (launch_sm90_persistent)
  using Shape = PersistShape<TM, BN, COOP, int(sizeof(T))>;
  static_assert(!A_RS || kTf32<T>, "A from registers: TF32 only");
  constexpr bool IM2COL = G == Gather::ConvFwdIm2col;
  static_assert(G == Gather::None || (IM2COL && !B_MN_MAJOR && !kTf32<T>),
                "the persistent conv forward: 16-bit, K-major weight rows");
  static_assert(!(B_MN_MAJOR && kTf32<T>), "wgmma .tf32 reads K-major B only");
  using F = std::conditional_t<std::is_same<T, c10::BFloat16>::value, __nv_bfloat16,
                               std::conditional_t<kTf32<T>, float, __half>>;
  constexpr int STAGES = Shape::STAGES, WROWS = Shape::WROWS, SCOLS = Shape::SCOLS, BK = bk<T>,
                KSTEP = 32 / int(sizeof(T));
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);  // see gemm_sm90_kernel
  T* As = reinterpret_cast<T*>(smem);
  T* Bs = As + STAGES * TM * BK;
  T* staging = Bs + STAGES * BN * BK;  // [2][WROWS * SCOLS] (Staging), one per consumer, 1 KiB aligned; TF32: none
  float* bias_tiles = reinterpret_cast<float*>(staging + 2 * WROWS * SCOLS);  // [2][BN]
  uint64_t* full = reinterpret_cast<uint64_t*>(bias_tiles + 2 * BN);
  uint64_t* empty = full + STAGES;
  // Ping-pong's turn[w]: the other warpgroup finished issuing a tile's main loop, so warpgroup w
  // may start its next. Besides keeping the tensor cores to one main loop at a time, this keeps
  // each consumer's full-barrier waits within one phase of the barrier (a consumer running a
  // whole tile ahead would wait on a parity two phases early and pass at once).
  uint64_t* turn = empty + STAGES;

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  static_assert(CL == 1 || CL == 2, "clusters of one or two blocks");
  // Tiles of CL * TM rows: one per cluster, TM rows per block (rank).
  const int rank = CL == 1 ? 0 : int(cluster_ctarank()), cluster = blockIdx.x / CL, clusters = gridDim.x / CL;
  const int mt = int((M + CL * TM - 1) / (CL * TM)), nt = int((N + BN - 1) / BN), tiles = batch * mt * nt;
  const int ktiles = int((K + BK - 1) / BK);
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], CL * (COOP ? 2 : 1));  // the consumer warpgroups that read the stage
    }
    if (!COOP)
      for (int w = 0; w < 2; ++w) mbar_init(&turn[w], 128);
    mbar_init_fence();
  }
  if constexpr (CL > 1) cluster_sync();  // the peer's barriers exist before any multicast
  else __syncthreads();

  if (wg == 0) {  // producer: one thread, every tile of this block in order
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (t != 0) return;
    int pos = 0;  // ring position of the next k tile
    for (int i = cluster; i < tiles; i += clusters, pos += ktiles) {
      const TileOrigin o = persist_tile(i, mt, nt, CL * TM, BN);
      const int ga = batch_a > 1 ? o.g : 0, gb = batch_b > 1 ? o.g : 0, m0 = int(o.m0) + rank * TM;
      Pixel px[TM / BM];  // IM2COL: each A box's first output pixel (pixels past the last image read zeros)
      Tap tap;            // IM2COL: the k tile's filter tap and first channel
      if constexpr (IM2COL) {
#pragma unroll
        for (int h = 0; h < TM / BM; ++h) px[h] = pixel_of(conv, uint32_t(m0 + h * BM), INT64_MAX);
        tap = Tap(conv, 0);
      }
      tma_producer<STAGES>(full, empty, ktiles, (TM + BN) * BK * sizeof(T), [&](int kt, int s) {
#pragma unroll
        for (int h = 0; h < TM / BM; ++h) {  // A in boxes of BM rows (the map's box)
          if constexpr (IM2COL) tma_load_im2col_tap(As + (s * TM + h * BM) * BK, &tm_a, &full[s], conv, px[h], tap);
          else tma_load_tile<BM, BK, false>(As + (s * TM + h * BM) * BK, &tm_a, &full[s], m0 + h * BM, kt * BK, ga);
        }
        if constexpr (IM2COL) tap.next(conv, BK);
        // B: CL = 1, the whole tile in one part; else this rank's share of its parts, multicast
        // into every block (K-major: CL parts of BN / CL rows; MN-major: the 64-row atoms)
        constexpr int PARTS = CL == 1 ? 1 : B_MN_MAJOR ? BN / 64 : CL, PROWS = BN / PARTS;
        for (int j = rank * PARTS / CL; j < (rank + 1) * PARTS / CL; ++j)
          tma_load_tile<PROWS, BK, B_MN_MAJOR>(Bs + (s * BN + j * PROWS) * BK, &tm_b, &full[s], int(o.n0) + j * PROWS,
                                               kt * BK, gb, CL == 1 ? 0 : (1 << CL) - 1);
      }, pos);
    }
    if constexpr (CL > 1) {  // the tail: every stage released by both blocks before this one exits
      for (int q = pos; q < pos + STAGES; ++q)
        if (q >= STAGES) mbar_wait(&empty[q % STAGES], ((q / STAGES) - 1) & 1);
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int w = wg - 1;
  float* bias_s = bias_tiles + w * BN;
  const bool has_bias = epi.bias != nullptr;
  const bool c_by_tma = Shape::STAGED && vec_store;  // C's rows 16-byte aligned: the host made tm_c, TMA stores C
  const int bar = 2 + w;  // this warpgroup's named barrier (0 is __syncthreads, 1 the other kernel's)
  const int row0 = COOP ? w * WROWS : 0;  // this warpgroup's first row in the tile
  // j: the block's tile count. Ping-pong: this warpgroup takes every other tile, from its own.
  constexpr int STEP = COOP ? 1 : 2;
  const int first = COOP ? 0 : w;
  // a stage read: released on the empty barrier of every block that the stage's loads wrote to
  auto release = [&](int s) {
    if (t != 0) return;
    if constexpr (CL == 1) mbar_arrive(&empty[s]);
    else for (int c = 0; c < CL; ++c) c == rank ? mbar_arrive(&empty[s]) : mbar_arrive_cluster(&empty[s], uint32_t(c));
  };
  for (int j = first, i = cluster + first * clusters; i < tiles; j += STEP, i += STEP * clusters) {
    TileOrigin o = persist_tile(i, mt, nt, CL * TM, BN);
    o.m0 += rank * TM;
    BiasTile<BN, T> bias;
    if (has_bias) bias.load(epi, p, o.g, o.n0, N, t);
    constexpr int H = WROWS / 64;  // m64 wgmmas per k step
    float d[H][BN / 2];
#pragma unroll
    for (int h = 0; h < H; ++h)
#pragma unroll
      for (int e = 0; e < BN / 2; ++e) d[h][e] = 0.f;
    const int pos0 = j * ktiles;
    if (!COOP && j > 0) mbar_wait(&turn[w], ((j - 1) / 2) & 1);  // the other's tile j - 1 is issued
    // A_RS: a k tile's A fragments, rounded, in one of two register sets (U = kt % 2); the next
    // tile's go into the other set while this tile's wgmmas run, once the group that read that set
    // has retired. ptxas serializes every wgmma of the kernel (C7513) where a wgmma's input
    // registers may be written while it is in flight, as one set would be. Two m64 rows (H = 2)
    // have no registers for a second set (2 x 32 beside 128 accumulators spill): one set, and the
    // group retires before the next tile's fragments are loaded (the tensor pipe drains).
    constexpr int SETS = A_RS && H == 1 ? 2 : 1;
    uint32_t af[SETS][A_RS ? BK / KSTEP : 1][H][4];
    // waits for ring position pos to land; A_RS: loads its fragments into set U
    auto acquire = [&](auto u, int pos) {
      const int s = pos % STAGES;
      mbar_wait(&full[s], (pos / STAGES) & 1);
      if constexpr (A_RS) {
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; ++kk)
#pragma unroll
          for (int h = 0; h < H; ++h)
            load_a_tf32(af[decltype(u)::value][kk][h], As + (s * TM + row0 + h * 64) * BK, kk, t / 32, t % 32);
      }
    };
    auto step = [&](auto u, int kt) {  // k tile kt (acquired) issued; the next one acquired
      constexpr int U = decltype(u)::value;
      const int pos = pos0 + kt, s = pos % STAGES;
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < BK / KSTEP; ++kk) {
        const uint64_t db = operand_desc<B_MN_MAJOR, KSTEP>(Bs + s * BN * BK, kk);
#pragma unroll
        for (int h = 0; h < H; ++h) {
          if constexpr (A_RS) wgmma_rs<BN>(d[h], af[U][kk][h], db);
          else wgmma<BN, 0, B_MN_MAJOR ? 1 : 0>(
              d[h], operand_desc<false, KSTEP>(As + (s * TM + row0 + h * 64) * BK, kk), db, static_cast<F*>(nullptr));
        }
      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      if constexpr (A_RS && SETS == 1) asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      else asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // the previous k tile's group retired
      if (kt > 0) release((pos - 1) % STAGES);
      if (kt + 1 < ktiles) acquire(std::integral_constant<int, (U + 1) % SETS>{}, pos + 1);
    };
    // k tiles in pairs, so each one's register set is a constant (set kt % SETS)
    using U0 = std::integral_constant<int, 0>;
    using U1 = std::integral_constant<int, 1 % SETS>;
    acquire(U0{}, pos0);
    for (int kt = 0; kt < ktiles; kt += 2) {
      step(U0{}, kt);
      if (kt + 1 < ktiles) step(U1{}, kt + 1);
    }
    if (!COOP) mbar_arrive(&turn[1 - w]);
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    release((pos0 + ktiles - 1) % STAGES);

    // Epilogue. First the bias tile (and, 16-bit, the staging) must be free: all threads are done
    // reading the last tile's bias and storing from the staging, and the last TMA store has read
    // the staging (its issuing thread waits for that).
    const int64_t m0 = o.m0 + row0;
    if (c_by_tma && t == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    if (Shape::STAGED || has_bias) asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
    if (has_bias) {
      bias.stage(bias_s, t);
      asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
    }
    if constexpr (!Shape::STAGED) {  // TF32: float2 stores where C's rows are 16-byte aligned
      with_act(epi.act, [&](auto act) {
#pragma unroll
        for (int h = 0; h < H; ++h)
          store_fragment<decltype(act)::value, BN>(d[h], p, o.g, m0 + h * 64, o.n0, M, N, bias_s, has_bias, epi,
                                                   vec_store, t);
      });
    } else {
      using Staging = SwizzledStaging<WROWS, int(sizeof(T))>;
      T* stage = staging + w * WROWS * SCOLS;
      with_act(epi.act, [&](auto act) {
#pragma unroll
        for (int h = 0; h < H; ++h)
          stage_fragment<decltype(act)::value, BN, Staging, false>(d[h], stage, h * 64, bias_s, has_bias, epi, t);
      });
      if (c_by_tma) fence_proxy_async_smem();  // staged writes, visible to TMA
      asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
      if (c_by_tma) {  // one thread hands the staged block to TMA (tails clipped) and moves on
        if (t == 0) tma_store_staged<WROWS, SCOLS>(stage, &tm_c, int(o.n0), int(m0), o.g);
      } else {  // C's rows not 16-byte aligned: element stores
        store_staged<WROWS, SCOLS, Staging>(stage, p, o.g, m0, o.n0, M, N, false, false, t);
      }
    }
  }
  // the block's shared memory must outlive the TMA stores' reads of it
  if (c_by_tma && t == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#else
  __trap();  // built without sm_90a: the host never launches this
#endif
}

}  // namespace sm90
}  // namespace cuda
}  // namespace tileops
