// Hopper family (sm_90a; fp16/bf16, and fp32 as TF32): TMA loads into 128B-swizzled shared memory,
// completing on mbarriers, a STAGES-deep ring; one producer warpgroup (one thread issues
// the copies) and two consumer warpgroups that each run wgmma on 64 rows of the 128-row
// tile. Each consumer keeps one wgmma group in flight and releases a stage as soon as the
// group reading it retires. The epilogue (shared functor) goes through shared memory: C by TMA
// stores where it can (Store::Tma), else 16-byte vectors along rows. That kernel runs one
// output tile per block; gemm_sm90_persistent_kernel (at the end of this file) walks many per
// block, so loads and epilogues of consecutive tiles overlap.
//
// A is K-major (row-major M x K) or, for the 16-bit types, MN-major (column-major, e.g. dY^T of
// a weight gradient). B is K-major (B^T row-major, e.g. a linear weight) or, for the 16-bit
// types, MN-major (row-major K x N). MN-major operands are read through wgmma's transpose bits. TMA zero-fills
// tile tails. A k tile is 128 bytes of every row (64 16-bit elements, 32 fp32 ones), so the
// swizzle, descriptors and stage sizes are the same for every element type.
//
// TF32: wgmma reads fp32 words and keeps their top 19 bits (truncation). To round to nearest
// as TF32 is defined (and as cuBLAS and the mma.sync rung do), the host hands the one-tile kernel
// operands already rounded (matmul.cu); the persistent kernels take B rounded and round A in
// registers (load_a_tf32: wgmma with A from registers), so A, the activations of a linear, is read
// in place. Rounding landed stages in shared memory instead was measured slower every way it was
// tried (docs/performance.md#tf32): the extra shared-memory reads and writes slow the wgmmas' own
// reads.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "../common/epilogue.h"
#include "../common/problems.h"
#include "cuda_util.h"  // static_for
#include "griddep.cuh"
#include "mbarrier.cuh"  // mbar_*
#include "mma_sync.cuh"  // smem_u32, round_tf32
#include "wgmma_ops.h"

namespace tileops {
namespace cuda {
namespace sm90 {

constexpr int BM = 128, THREADS = 384, ROW_BYTES = 128;  // ROW_BYTES: one k tile of a row
template <typename T>
constexpr int bk = ROW_BYTES / int(sizeof(T));  // k tile in elements
template <typename T>
constexpr bool kTf32 = std::is_same<T, float>::value;

template <int BN, int STAGES, typename T>
constexpr size_t smem_bytes() {
  static_assert(STAGES * (BM + BN) * ROW_BYTES >= 2 * 64 * (BN + 8) * sizeof(float) + 2 * BN * sizeof(float),
                "epilogue staging (fp32 with a residual) and bias tiles must fit in the stages");
  return size_t(STAGES) * (BM + BN) * ROW_BYTES + 2 * STAGES * sizeof(uint64_t) + 1024;  // + alignment slack
}

// Where the A tile comes from: TMA (None), or a channels_last conv input x: ConvFwd, rows =
// output pixels, k = (r, s, c) (A K-major); ConvWgrad, rows = (r, s, c), k = output pixels (A
// MN-major: the weight gradient's dW^T). Both gathered by the producer warpgroup's cp.async
// copies; the Im2col variants load the same tiles by TMA in im2col mode (one thread).
enum class Gather { None, ConvFwd, ConvWgrad, ConvFwdIm2col, ConvWgradIm2col };

// How the one-tile kernel writes C: element by element; 16-byte vectors along rows (rows and base
// 16-byte aligned: vec_stores); or 16-byte vectors down columns, for 16-bit C that is column-major
// with no residual or bias (cols_stores: a weight gradient's dW^T [R*S*C, K] that is a
// channels_last dw [K, R*S*C], written without a transposition after it). With split-K, Cols also
// writes the fp32 partials column-major, so the reduce runs on the transposed problem. Tma: C by
// TMA stores of the tile staged in TMA's 128-byte swizzle (rows and base 16-byte aligned, no
// residual, one row stride: the host made tm_c), as the persistent kernels store it; faster than
// thread stores where C's rows start mid-sector (docs/performance.md#epilogue).
enum class Store : int { Elements, Rows, Cols, Tma };

// Where the B tile comes from: TMA, or (TF32 only) the producer warpgroup's loads of unrounded B,
// K-major (B^T row-major) or MN-major (row-major K x N), rounded on the way (tf32_b_producer).
enum class BLoad { Tma, RegsK, RegsMN };

// TMA im2col conventions the documentation leaves open, in one place: the order of the map's
// pixel-box corners and of a load's offsets, and the upper corner's origin. Confirmed on an H200
// by test_conv_fwd_sm90_candidates_cuda (3x5 kernel, stride 2x1, padding 1x2: any other choice
// of the three reads other pixels).
constexpr bool kIm2colCornersWH = true;  // pixel-box corner arrays ordered {W, H} (else {H, W})
constexpr bool kIm2colOffsetsWH = true;  // the load's im2col offsets ordered {w, h} (else {h, w})
constexpr int kIm2colUpperLess = 0;      // upper corner = last origin - (extent - 1) - this (im2col_map)

// Thread blocks per SM the kernel is built for: two where two fit in shared memory (shallow
// rings), else one. Two blocks overlap one's pipeline fill and epilogue with the other's main
// loop, for short K (the implicit-GEMM conv's R*S*C, 1x1 convs). One block rebalances registers
// with setmaxnreg (the producer gives its share to the consumers), which needs the SM's whole
// register file; two blocks, and the conv producers, which gather with 128 threads, keep theirs.
template <int BN, int STAGES, typename T>
constexpr int blocks_per_sm() {
  return 2 * (smem_bytes<BN, STAGES, T>() + 1024) <= 228 * 1024 ? 2 : 1;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// A 3-D TMA tile load into this CTA's shared memory, completing on bar; cta_mask != 0: multicast
// into every CTA of the cluster in the mask, at dst's offset, completing on the barrier at bar's
// offset in each.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2,
                                         uint16_t cta_mask = 0) {
  if (cta_mask == 0) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
        "[%2];" ::"r"(smem_u32(dst)),
        "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
        "[%1, {%3, %4, %5}], [%2], %6;" ::"r"(smem_u32(dst)),
        "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "h"(cta_mask)
        : "memory");
  }
}
// A 4-D TMA tile load into this CTA's shared memory (shared-window address dst), completing on bar.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(dst),
      "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
// A 3-D TMA tile store of shared memory (laid out as map's box, its swizzle) to global memory at
// (c0, c1, c2); parts of the box outside the tensor are not written. Completes in a bulk group.
__device__ __forceinline__ void tma_store(const void* src, const CUtensorMap* map, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(map),
               "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Arrive on the barrier at bar's offset in CTA `cta` of the cluster. CTA scope (the default), not
// .release.cluster: the consumers that call it only read the stage (through wgmma, which
// wait_group retired), so nothing of theirs must become visible cluster-wide first. With
// .release.cluster on every k tile the cluster kernels ran slower than without clusters
// (docs/performance.md#tiles-waves-persistent-scheduling-and-clusters).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(bar)), "r"(cta));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// TMA im2col load of 4-D NHWC x: the pixels from (n, h, w) on, channel c on, shifted by the
// filter tap's offsets (ow, oh); zeros where a shifted pixel falls outside x.
__device__ __forceinline__ void tma_load_im2col(void* dst, const CUtensorMap* map, uint64_t* bar, int c, int w, int h,
                                                int n, uint16_t ow, uint16_t oh) {
  const uint16_t o0 = kIm2colOffsetsWH ? ow : oh, o1 = kIm2colOffsetsWH ? oh : ow;
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2], {%7, %8};" ::"r"(smem_u32(dst)),
      "l"(map), "r"(smem_u32(bar)), "r"(c), "r"(w), "r"(h), "r"(n), "h"(o0), "h"(o1)
      : "memory");
}
// Shared-memory matrix descriptor, 128-byte swizzle; offsets in bytes.
__device__ __forceinline__ uint64_t make_desc(const void* p, uint32_t lbo, uint32_t sbo) {
  return uint64_t((smem_u32(p) & 0x3FFFF) >> 4) | (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) |
         (uint64_t(1) << 62);
}
// One operand's tile of a stage, ROWS x BK, by TMA: K-major, one box (k, row0); MN-major, ROWS / W
// boxes (row0 + Wj, k) of W = 128 bytes of rows each (64 16-bit values), one 128-byte swizzle atom
// wide. cta_mask: see tma_load.
template <int ROWS, int BK, bool MN, typename T>
__device__ __forceinline__ void tma_load_tile(T* dst, const CUtensorMap* map, uint64_t* bar, int row0, int k, int g,
                                              uint16_t cta_mask = 0) {
  if constexpr (MN) {
    constexpr int W = ROW_BYTES / int(sizeof(T));
    for (int j = 0; j < ROWS / W; ++j) tma_load(dst + j * W * BK, map, bar, row0 + W * j, k, g, cta_mask);
  } else {
    tma_load(dst, map, bar, k, row0, g, cta_mask);
  }
}
// The wgmma descriptor of k step kk (32 bytes of k) of an operand tile: K-major, the step is
// KSTEP elements along each row; MN-major, 16 k-rows of 64 elements. Byte offsets in the 128B
// swizzle: K-major, groups of 8 rows 1 KiB apart (stride offset; the leading one is unused);
// MN-major, 64-element atoms 64 k-rows x 128 B = 8 KiB apart (leading offset) and groups of 8
// k-rows 1 KiB apart (stride offset). Checked on an H200 against the swapped and equal
// alternatives, which give wrong results.
template <bool MN, int KSTEP, typename T>
__device__ __forceinline__ uint64_t operand_desc(const T* tile, int kk) {
  return MN ? make_desc(tile + kk * 16 * 64, 8192, 1024) : make_desc(tile + kk * KSTEP, 16, 1024);
}
template <int BN, int TA, int TB, typename F>
__device__ __forceinline__ void wgmma(float (&d)[BN / 2], uint64_t da, uint64_t db, F* tag) {
  static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "scripts/gen_wgmma.py generates n64 to n256");
  if constexpr (BN == 256) wgmma_m64n256<TA, TB>(d, da, db, 1, tag);
  else if constexpr (BN == 192) wgmma_m64n192<TA, TB>(d, da, db, 1, tag);
  else if constexpr (BN == 128) wgmma_m64n128<TA, TB>(d, da, db, 1, tag);
  else wgmma_m64n64<TA, TB>(d, da, db, 1, tag);
}
// TF32 with A from registers (a: load_a_tf32's fragment), B K-major from shared memory.
template <int BN>
__device__ __forceinline__ void wgmma_rs(float (&d)[BN / 2], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (BN == 256) wgmma_m64n256_rs(d, a, db, 1);
  else if constexpr (BN == 192) wgmma_m64n192_rs(d, a, db, 1);
  else if constexpr (BN == 128) wgmma_m64n128_rs(d, a, db, 1);
  else wgmma_m64n64_rs(d, a, db, 1);
}
// Warp `warp`'s part of wgmma's TF32 A fragment for k step kk (8 k) of an m64 block of a K-major
// fp32 tile in the 128B swizzle (rows 128 bytes apart, 16-byte unit u of row r at u ^ (r % 8)),
// each word rounded to the nearest TF32 (cvt.rna, as copy_round_tf32 rounds B). The fragment is
// four 8 x 8 b16 matrices to ldmatrix: rows 0-7 and 8-15 of the warp's 16, at k 0-3 (unit 2 kk)
// and k 4-7 (unit 2 kk + 1); lanes 8i.. give matrix i's row addresses, and thread t receives
// row t / 4, word t % 4 of each, the order wgmma wants (row, k), (row + 8, k), (row, k + 4),
// (row + 8, k + 4). Eight rows of distinct units: no bank conflicts.
__device__ __forceinline__ void load_a_tf32(uint32_t (&a)[4], const float* block, int kk, int warp, int lane) {
  const int r = warp * 16 + ((lane >> 3) & 1) * 8 + (lane & 7), unit = 2 * kk + (lane >> 4);
  const uint32_t addr = smem_u32(block) + r * ROW_BYTES + ((unit ^ (lane & 7)) << 4);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(addr)
               : "memory");
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = round_tf32(__uint_as_float(a[i]));
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The conv producers (see gemm_sm90_kernel): each of the producer warpgroup's 128 threads
// gathers its share of stage kt's A tile with cp.async (zeros where a tap falls into padding or
// past the problem), thread 0 loads B by TMA. Each thread then hands its copies to the stage's
// full barrier (cp.async.mbarrier.arrive.noinc: one arrival once they land) and goes on to the
// next stage without waiting, so the whole ring can be in flight; the consumers fence the
// proxies after the wait (cp.async writes are generic-proxy, wgmma reads the async proxy).
// Waiting for each thread's own copies and fencing there instead held the ring to a few stages
// (docs/kernels/conv-sm90.md#how-a-arrives). Eight lanes share a 128-byte
// row: lane group t / 8 copies 16-byte chunk t % 8 of rows t / 8 + 16 i, so one warp instruction
// moves four whole lines (a thread per row moved 32 half sectors: twice the L2 traffic, eight
// times the requests). Chunk j of row r lands at chunk j ^ (r % 8), as TMA's 128B swizzle puts
// it, and r % 8 = (t / 8) % 8.
template <typename T, int BN, int STAGES, bool B_MN, typename GatherStage>
__device__ __forceinline__ void conv_producer(const CUtensorMap& tm_b, T* Bs, uint64_t* full, uint64_t* empty,
                                              int n0, int kt0, int ktiles, int t, GatherStage&& gather) {
  constexpr int BK = bk<T>;
  for (int kt = 0; kt < ktiles; ++kt) {
    const int st = kt % STAGES;
    if (kt >= STAGES) mbar_wait(&empty[st], ((kt / STAGES) - 1) & 1);
    if (t == 0) {
      mbar_expect_tx(&full[st], BN * BK * sizeof(T));
      tma_load_tile<BN, BK, B_MN>(Bs + st * BN * BK, &tm_b, &full[st], n0, (kt0 + kt) * BK, 0);
    }
    gather(kt, st);
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(&full[st])) : "memory");
  }
  asm volatile("cp.async.wait_all;" ::: "memory");  // nothing in flight when the thread exits
}

// An output pixel's image and first input row/column (32-bit: M and N*P*Q < 2^31, checked by
// the host; 64-bit division is a long call). Pixels past `count`: far outside, so zero-filled.
struct Pixel {
  uint32_t n;
  int h, w;
};
__device__ __forceinline__ Pixel pixel_of(const ConvOperands& cv, uint32_t m, int64_t count) {
  const uint32_t pq_n = uint32_t(cv.P * cv.Q), q_n = uint32_t(cv.Q);
  const uint32_t n = m / pq_n, pq = m - n * pq_n, p = pq / q_n;
  if (int64_t(m) >= count) return {0, INT_MIN / 2, 0};
  return {n, int(p * cv.sh - cv.ph), int((pq - p * q_n) * cv.sw - cv.pw)};
}
// The address of x[n, h, w, c] when (h, w) is inside the image, else nullptr.
template <typename T>
__device__ __forceinline__ const T* tap_src(const ConvOperands& cv, const T* x, uint32_t n, int h, int w, int64_t c) {
  if (h < 0 || h >= int(cv.H) || w < 0 || w >= int(cv.W)) return nullptr;
  return x + ((int64_t(n) * cv.H + h) * cv.W + w) * cv.C + c;
}

// A (r, s, c) index as filter tap and first channel: the forward's k tile (C % bk == 0, so it
// never straddles a tap; from a split's first k tile, then one k tile at a time with next), or
// the first row of a weight-gradient atom.
struct Tap {
  int r = 0, s = 0;
  int64_t c0 = 0;
  Tap() = default;
  __device__ Tap(const ConvOperands& cv, int64_t k) : r(int(k / (cv.C * cv.S))), s(int((k / cv.C) % cv.S)), c0(k % cv.C) {}
  __device__ void next(const ConvOperands& cv, int bk) {
    if ((c0 += bk) == cv.C) {
      c0 = 0;
      if (++s == cv.S) s = 0, ++r;
    }
  }
};

// One im2col load of pixels from px on at tap, channels tap.c0.. (the map sets how many pixels).
template <typename T>
__device__ __forceinline__ void tma_load_im2col_tap(T* dst, const CUtensorMap* map, uint64_t* bar,
                                                    const ConvOperands& cv, const Pixel& px, const Tap& tap) {
  tma_load_im2col(dst, map, bar, int(tap.c0), px.w, px.h, int(px.n), uint16_t(tap.s * cv.dw), uint16_t(tap.r * cv.dh));
}

// The Hopper TMA producer ring, run by one thread: for each k tile, wait for its stage to be
// free, announce the stage's bytes on its full barrier, then load(kt, stage) issues the copies.
// pos0: the ring position of k tile 0 (a persistent kernel's ring runs on across its tiles).
template <int STAGES, typename Load>
__device__ __forceinline__ void tma_producer(uint64_t* full, uint64_t* empty, int ktiles, uint32_t bytes,
                                             Load&& load, int pos0 = 0) {
  for (int kt = 0; kt < ktiles; ++kt) {
    const int pos = pos0 + kt, st = pos % STAGES;
    if (pos >= STAGES) mbar_wait(&empty[st], ((pos / STAGES) - 1) & 1);
    mbar_expect_tx(&full[st], bytes);
    load(kt, st);
  }
}

// ConvFwd: A row i of stage kt is output pixel m0 + i at tap (r, s), channels c0.. of k tile
// kt0 + kt; a thread's 8 rows stay the same over the k loop, the tap moves.
template <typename T, int BN, int STAGES>
__device__ __forceinline__ void conv_fwd_producer(const ConvOperands& cv, const CUtensorMap& tm_b, T* As, T* Bs,
                                                  uint64_t* full, uint64_t* empty, int64_t M, int m0, int n0,
                                                  int kt0, int ktiles, int t) {
  constexpr int BK = bk<T>, ROWS = BM / 16, VEC = 16 / int(sizeof(T));
  const int chunk = t % 8, row0 = t / 8;
  const T* x = static_cast<const T*>(cv.x) + chunk * VEC;
  Pixel px[ROWS];
#pragma unroll
  for (int i = 0; i < ROWS; ++i) px[i] = pixel_of(cv, uint32_t(m0 + row0 + 16 * i), M);
  const uint32_t dst0 = smem_u32(As) + row0 * ROW_BYTES + ((chunk ^ (row0 & 7)) << 4);
  Tap tap(cv, int64_t(kt0) * BK);  // this split's first k tile
  conv_producer<T, BN, STAGES, false>(tm_b, Bs, full, empty, n0, kt0, ktiles, t, [&](int, int st) {
    const int dh = tap.r * int(cv.dh), dw = tap.s * int(cv.dw);
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      const T* src = tap_src(cv, x, px[i].n, px[i].h + dh, px[i].w + dw, tap.c0);
      cp_async16(dst0 + (st * BM + i * 16) * ROW_BYTES, src ? src : x, src != nullptr ? 16 : 0);
    }
    tap.next(cv, BK);
  });
}

// The Im2col producers (thread 0 alone): TMA's im2col traversal walks output pixels in the
// implicit GEMM's (n, p, q) order from a first pixel on (past the last image it reads zeros), and
// one load fills PIXELS rows of 64 channels at one tap; B by TMA as in the plain GEMM.
// ConvFwdIm2col: each k tile is one load of the tile's 128 pixels at tap (r, s), channels c0...;
// B's k tiles from column b_k0 on (a data-gradient phase's taps in a weight of all phases).
// B_FLIP: B is MN-major, a stride-1 data gradient's forward weight w read in place, its taps
// flipped: tm_b maps w (channels_last) as [taps][K][C] (C innermost), and k tile (r, s, c0) of
// this conv is w's tap R*S - 1 - (r*S + s), rows (w's output channels) c0.., columns n0...
template <typename T, int BN, int STAGES, bool B_FLIP = false>
__device__ __forceinline__ void conv_im2col_producer(const ConvOperands& cv, const CUtensorMap& tm_a,
                                                     const CUtensorMap& tm_b, T* As, T* Bs, uint64_t* full,
                                                     uint64_t* empty, int m0, int n0, int kt0, int ktiles,
                                                     int b_k0) {
  constexpr int BK = bk<T>;
  const Pixel px = pixel_of(cv, uint32_t(m0), INT64_MAX);
  Tap tap(cv, int64_t(kt0) * BK);
  tma_producer<STAGES>(full, empty, ktiles, (BM + BN) * BK * sizeof(T), [&](int kt, int st) {
    tma_load_im2col_tap(As + st * BM * BK, &tm_a, &full[st], cv, px, tap);
    if constexpr (B_FLIP) {
      const int flipped = int(cv.R * cv.S) - 1 - (tap.r * int(cv.S) + tap.s);
      tma_load_tile<BN, BK, true>(Bs + st * BN * BK, &tm_b, &full[st], n0, int(tap.c0), flipped);
    } else {
      tma_load_tile<BN, BK, false>(Bs + st * BN * BK, &tm_b, &full[st], n0, b_k0 + (kt0 + kt) * BK, 0);
    }
    tap.next(cv, BK);
  });
}

// ConvWgradIm2col: ConvWgrad's MN-major atoms, each one load of the k tile's 64 pixels at the
// atom's tap and channels (an atom's k-rows are pixels, its 128-byte rows 64 channels: the
// layout of a 64-pixel im2col box). An atom past the last (r, s, c) row loads atom 0's pixels
// again: its rows are never stored.
template <typename T, int BN, int STAGES>
__device__ __forceinline__ void conv_wgrad_im2col_producer(const ConvOperands& cv, const CUtensorMap& tm_a,
                                                           const CUtensorMap& tm_b, T* As, T* Bs, uint64_t* full,
                                                           uint64_t* empty, int64_t M, int m0, int n0, int kt0,
                                                           int ktiles) {
  constexpr int BK = bk<T>, ATOMS = BM / 64;
  static_assert(BK == 64 && ATOMS == 2, "an atom's k-rows are a k tile; two atoms per stage");
  const Tap tap[ATOMS] = {Tap(cv, m0), Tap(cv, m0 + 64 < M ? m0 + 64 : m0)};  // (r, s, c0) of an atom's rows
  tma_producer<STAGES>(full, empty, ktiles, (BM + BN) * BK * sizeof(T), [&](int kt, int st) {
    const int k = (kt0 + kt) * BK;
    const Pixel px = pixel_of(cv, uint32_t(k), INT64_MAX);
#pragma unroll
    for (int j = 0; j < ATOMS; ++j) tma_load_im2col_tap(As + (st * ATOMS + j) * 64 * BK, &tm_a, &full[st], cv, px, tap[j]);
    tma_load_tile<BN, BK, true>(Bs + st * BN * BK, &tm_b, &full[st], n0, k, 0);
  });
}

// ConvWgrad (dW^T = cols(x)^T . dY): A is MN-major, two 64-row atoms per stage; atom j holds
// rows m0 + 64 j.. = one tap (r, s) and 64 channels (C % 64 == 0), and its k-row kr is output
// pixel (kt0 + kt) * BK + kr (of npq). The taps stay the same over the k loop, the pixels move.
template <typename T, int BN, int STAGES>
__device__ __forceinline__ void conv_wgrad_producer(const ConvOperands& cv, const CUtensorMap& tm_b, T* As, T* Bs,
                                                    uint64_t* full, uint64_t* empty, int64_t M, int64_t npq, int m0,
                                                    int n0, int kt0, int ktiles, int t) {
  constexpr int BK = bk<T>, ATOMS = BM / 64, KROWS = BK / 16, VEC = 16 / int(sizeof(T));
  static_assert(BK == 64, "an atom's k-rows are a k tile");
  const int chunk = t % 8, krow0 = t / 8;
  const T* x = static_cast<const T*>(cv.x) + chunk * VEC;
  int dh[ATOMS], dw[ATOMS];
  int64_t c[ATOMS];
  bool live[ATOMS];
#pragma unroll
  for (int j = 0; j < ATOMS; ++j) {
    const int64_t i = m0 + 64 * j;  // (r, s, c) of the atom's first row
    live[j] = i < M;
    c[j] = i % cv.C;
    dw[j] = int((i / cv.C) % cv.S * cv.dw);
    dh[j] = int(i / (cv.C * cv.S) * cv.dh);
  }
  const uint32_t dst0 = smem_u32(As) + krow0 * ROW_BYTES + ((chunk ^ (krow0 & 7)) << 4);
  conv_producer<T, BN, STAGES, true>(tm_b, Bs, full, empty, n0, kt0, ktiles, t, [&](int kt, int st) {
#pragma unroll
    for (int i = 0; i < KROWS; ++i) {
      const Pixel px = pixel_of(cv, uint32_t((kt0 + kt) * BK + krow0 + 16 * i), npq);
#pragma unroll
      for (int j = 0; j < ATOMS; ++j) {
        const T* src = live[j] ? tap_src(cv, x, px.n, px.h + dh[j], px.w + dw[j], c[j]) : nullptr;
        cp_async16(dst0 + ((st * ATOMS + j) * 64 + i * 16) * ROW_BYTES, src ? src : x, src != nullptr ? 16 : 0);
      }
    }
  });
}

// TF32's B through the producer warpgroup's registers (BLoad::RegsK, RegsMN): B is read where it
// lies, unrounded, each word rounded to the nearest TF32 (cvt.rna) on its way into the K-major
// 128B-swizzled stage the consumers' wgmmas read; thread 0 loads A by TMA as in the plain GEMM.
// Where K <= 512 this replaces copy_round_tf32's rounded K-major copy of B before the GEMM (its
// fixed cost; launch_sm90_config says where). B's words (n, k) land at n * 32 + ((k / 4) ^ (n % 8)) * 4 + k % 4 (16-byte unit
// k / 4 of row n, TMA's 128B swizzle). RegsMN (B row-major K x N, n contiguous): lane l of warp w
// loads k row (l % 16) + 16 (w % 2), 16 bytes at column chunk 2 j + l / 16 of the warp pair's half
// of the tile, so a warp reads 16 rows x 32 contiguous bytes (whole sectors) and each of its four
// word stores hits 32 distinct banks (lanes 16-31's n is lanes 0-15's + 4: their units differ in
// bit 2). RegsK (B^T row-major, k contiguous): 8 lanes a row, chunk l % 8 of rows t / 8 + 16 j, one
// 16-byte store each at its swizzled unit. Load j's words sit a fixed distance from load 0's, in
// B and in the stage, so a stage costs its loads, roundings and stores and little else: the
// producer issues every instruction of its stage (a first form with a bounds check per load was
// bound by its own issue: docs/performance.md#tf32). Stages past K or N (each block's last, the
// last column block's) take a checked path: words outside B read as zero (A is zero-filled past K
// by TMA, but 0 * NaN would not be 0). DEPTH stages of loads are in flight per thread (the next
// ones are issued before this one is stored). Each warp's lane 0 waits for the stage to be free
// and, once the warp's stores are issued (__syncwarp), arrives on its full barrier (1 + 4
// arrivals: thread 0's expect_tx for A, then one a warp); the consumers fence the proxies after
// their wait, as for the conv gathers (a fence here is a MEMBAR.ALL.CTA, which would wait for
// the loads of the stages ahead too).
template <int BN, int STAGES, int DEPTH, BLoad BL>
__device__ __forceinline__ void tf32_b_producer(const CUtensorMap& tm_a, float* As, float* Bs, uint64_t* full,
                                                uint64_t* empty, const float* b, int64_t s_k, int64_t s_n,
                                                int64_t N, int64_t K, int m0, int n0, int ga, int kt0, int ktiles,
                                                int t) {
  constexpr int BK = bk<float>, LOADS = BN / 16;  // 16-byte loads a thread per stage
  constexpr bool MN = BL == BLoad::RegsMN;
  static_assert(BL != BLoad::Tma && LOADS * 16 * 128 == BN * BK * 4, "128 threads share a stage's B tile");
  // load j of this thread: (k, n + NSTEP j) of the tile; its words' stage offsets are load 0's +
  // NSTEP * BK (MN: NSTEP rows of n, n % 8 unchanged; K: 16 rows)
  constexpr int NSTEP = MN ? 8 : 16, WORDS = MN ? 4 : 1;
  const int w = t / 32, l = t % 32;
  const int k = MN ? (l % 16) + 16 * (w % 2) : 4 * (l % 8);
  const int n = MN ? 4 * ((w / 2) * (BN / 8) + l / 16) : t / 8;
  int so[WORDS];  // stage offsets of load 0's words (MN: one per column; K: the 16-byte unit)
#pragma unroll
  for (int e = 0; e < WORDS; ++e) so[e] = (n + e) * BK + ((k / 4) ^ ((n + e) % 8)) * 4 + (MN ? k % 4 : 0);
  const float* src0 = b + (int64_t(kt0) * BK + k) * s_k + (n0 + n) * s_n;
  const int64_t jstep = NSTEP * s_n;  // MN: s_n = 1, so 8 words
  const bool cols_inside = n0 + BN <= N;
  float4 v[DEPTH][LOADS];
  auto fetch = [&](auto u, int kt) {
    float4(&x)[LOADS] = v[decltype(u)::value];
    const float* src = src0 + int64_t(kt) * BK * s_k;
    const int64_t k0 = int64_t(kt0 + kt) * BK;
    if (cols_inside && k0 + BK <= K) {
#pragma unroll
      for (int j = 0; j < LOADS; ++j) x[j] = *reinterpret_cast<const float4*>(src + j * jstep);
    } else {  // words inside B along the load's 4: n.. (MN) or k.. (K)
#pragma unroll
      for (int j = 0; j < LOADS; ++j) {
        const int64_t kk = k0 + k, nn = n0 + n + NSTEP * j, step = MN ? s_n : s_k;
        const int64_t inside = MN ? (kk < K ? N - nn : 0) : (nn < N ? K - kk : 0);
        const float* p = src + j * jstep;
        x[j] = make_float4(inside > 0 ? p[0] : 0.f, inside > 1 ? p[step] : 0.f, inside > 2 ? p[2 * step] : 0.f,
                           inside > 3 ? p[3 * step] : 0.f);
      }
    }
  };
  auto put = [&](auto u, int kt) {
    const int st = kt % STAGES;
    if (kt >= STAGES) {  // one lane a warp waits for the stage to be free
      if (l == 0) mbar_wait(&empty[st], ((kt / STAGES) - 1) & 1);
      __syncwarp();
    }
    if (t == 0) {
      mbar_expect_tx(&full[st], BM * BK * sizeof(float));
      tma_load(As + st * BM * BK, &tm_a, &full[st], (kt0 + kt) * BK, m0, ga);
    }
    uint32_t* dst = reinterpret_cast<uint32_t*>(Bs + st * BN * BK);
    const float4(&x)[LOADS] = v[decltype(u)::value];
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
      const uint32_t r[4] = {round_tf32(x[j].x), round_tf32(x[j].y), round_tf32(x[j].z), round_tf32(x[j].w)};
      if constexpr (MN) {
#pragma unroll
        for (int e = 0; e < 4; ++e) dst[so[e] + j * NSTEP * BK] = r[e];
      } else {
        *reinterpret_cast<uint4*>(dst + so[0] + j * NSTEP * BK) = make_uint4(r[0], r[1], r[2], r[3]);
      }
    }
    __syncwarp();  // the warp's stores, ordered before its lane 0's arrival (a release)
    if (l == 0) mbar_arrive(&full[st]);
  };
  // set kt % DEPTH holds k tile kt; k tile kt + DEPTH - 1's loads go out before kt's stores
  auto step = [&](auto u, int kt) {
    constexpr int U = decltype(u)::value;
    if (kt + DEPTH - 1 < ktiles) fetch(std::integral_constant<int, (U + DEPTH - 1) % DEPTH>{}, kt + DEPTH - 1);
    put(u, kt);
  };
  static_for<DEPTH - 1>([&](auto u) {
    constexpr int U = decltype(u)::value;
    if (U < ktiles) fetch(u, U);
  });
  for (int kt = 0; kt < ktiles; kt += DEPTH) {
    static_for<DEPTH>([&](auto u) {
      constexpr int U = decltype(u)::value;
      if (kt + U < ktiles) step(u, kt + U);
    });
  }
}
#endif

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

// Split-K: blockIdx.z = g * splits + split; each split runs k tiles [split * kt_per_split,
// +kt_per_split) and writes its fp32 partial tile to partial[blockIdx.z] (M x N, dense); a
// second kernel (splitk_reduce) sums the splits in a fixed order, so results are deterministic.
// (Summing them in the last split to arrive, in-kernel, measured slower; so did summing a
// cluster's splits over distributed shared memory:
// docs/kernels/splitk.md#tried-and-lost-summing-inside-the-gemm. The reduce is launched as this
// kernel's programmatic dependent instead, which hides most of its launch.)
struct SplitK {
  int splits = 1, kt_per_split = 0;
  float* partial = nullptr;  // nullptr: no split, the epilogue writes C
};

// Gather::ConvFwd (implicit-GEMM conv2d forward): A is not read by TMA but gathered from a
// channels_last input (conv.x, C % bk<T> == 0, so one k tile is bk channels of one (r, s) tap)
// in the 128B-swizzled layout TMA would have produced; B (weight rows, K-major) by TMA.
// Gather::ConvWgrad (implicit-GEMM weight gradient, dW^T[RSC, K] = cols(x)^T . dY, K = N*P*Q):
// A gathered from x as MN-major atoms (C % 64 == 0), B = dY rows by TMA, MN-major.
// The Im2col variants: the same A tiles by TMA im2col loads (tm_a an im2col map of x).
//
// A_MN_MAJOR (16-bit types): A is given transposed (column-major M x K, e.g. dY^T of a weight
// gradient) and read as MN-major tiles, as B_MN_MAJOR reads B: two 64-row atoms per stage.
//
// p supplies C's index map (row_c, c, bias_index); batch_a / batch_b: 1 when broadcast.
//
// gemm_sm90_tile is one block's output tile: z stands for blockIdx.z (batch entry and split), b_k0
// is B's first column (conv_im2col_producer); tm_c: C's map where store is Store::Tma.
// gemm_sm90_kernel and gemm_sm90_phases_kernel launch it.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <typename T, int BN, bool B_MN_MAJOR, int STAGES, Gather G, bool A_MN_MAJOR, BLoad BL = BLoad::Tma>
__device__ __forceinline__ void gemm_sm90_tile(const CUtensorMap& tm_a, const CUtensorMap& tm_b,
                                               const CUtensorMap* tm_c, const MatmulProblem<T>& p, int64_t M,
                                               int64_t N, int64_t K, const Epilogue<T>& epi, int batch_a,
                                               int batch_b, Store store, const SplitK& sk, const ConvOperands& conv,
                                               int z, int b_k0) {
  static_assert(!(B_MN_MAJOR && kTf32<T>), "wgmma .tf32 reads K-major B only");
  // CONV: A comes from a conv input; GATHER: by the producer warpgroup's cp.async copies
  constexpr bool CONV = G != Gather::None, GATHER = G == Gather::ConvFwd || G == Gather::ConvWgrad;
  // B_REGS: the producer's 128 threads load B (tf32_b_producer), and keep their registers
  constexpr bool B_REGS = BL != BLoad::Tma;
  constexpr bool REBALANCE = !GATHER && !B_REGS && blocks_per_sm<BN, STAGES, T>() == 1;
  static_assert(!B_REGS || (kTf32<T> && G == Gather::None && !B_MN_MAJOR), "B through registers: TF32 GEMMs");
  static_assert(!(CONV && kTf32<T>), "the conv gather copies x as it is; TF32 needs rounded operands");
  static_assert(!(A_MN_MAJOR && kTf32<T>), "MN-major A: 16-bit types only");
  static_assert((G != Gather::ConvWgrad && G != Gather::ConvWgradIm2col) || (A_MN_MAJOR && B_MN_MAJOR),
                "the weight-gradient gather fills MN-major A atoms and reads dY as MN-major B");
  static_assert(!((G == Gather::ConvFwd || G == Gather::ConvFwdIm2col) && A_MN_MAJOR) &&
                    !(G == Gather::ConvFwd && B_MN_MAJOR),
                "the forward gather fills K-major A; MN-major B (a flipped weight) only with im2col loads");
  using F = std::conditional_t<std::is_same<T, c10::BFloat16>::value, __nv_bfloat16,
                               std::conditional_t<kTf32<T>, float, __half>>;
  constexpr int BK = bk<T>, KSTEP = 32 / int(sizeof(T));  // one wgmma consumes 32 bytes of each row
  extern __shared__ uint8_t smem_raw[];
  // 128B-swizzled tiles must start on 1024-byte boundaries; offsetting the __shared__ array
  // (not casting an integer) keeps its accesses shared-memory loads and stores
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  T* As = reinterpret_cast<T*>(smem);
  T* Bs = As + STAGES * BM * BK;
  uint64_t* full = reinterpret_cast<uint64_t*>(Bs + STAGES * BN * BK);
  uint64_t* empty = full + STAGES;

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, g = z / sk.splits;
  const int ktiles_all = int((K + BK - 1) / BK);
  const int kt0 = sk.partial ? (z % sk.splits) * sk.kt_per_split : 0;
  const int ktiles = sk.partial ? min(sk.kt_per_split, ktiles_all - kt0) : ktiles_all;  // >= 1 by construction
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], GATHER ? 1 + 128 : B_REGS ? 1 + 4 : 1);  // + one per gathering thread / loading warp
      mbar_init(&empty[s], 2);  // one arrival per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {  // producer
    if constexpr (G == Gather::ConvFwd) {
      conv_fwd_producer<T, BN, STAGES>(conv, tm_b, As, Bs, full, empty, M, m0, n0, kt0, ktiles, t);
    } else if constexpr (G == Gather::ConvWgrad) {
      conv_wgrad_producer<T, BN, STAGES>(conv, tm_b, As, Bs, full, empty, M, K, m0, n0, kt0, ktiles, t);
    } else if constexpr (B_REGS) {
      // k tiles in flight per thread: 64 registers of them with one block per SM, 32 with two
      constexpr int FIT = (blocks_per_sm<BN, STAGES, T>() == 1 ? 64 : 32) / (BN / 4), DEPTH = FIT > 1 ? FIT : 1;
      const int gb = batch_b > 1 ? g : 0;
      tf32_b_producer<BN, STAGES, DEPTH, BL>(tm_a, As, Bs, full, empty, p.B + gb * p.sb[0], p.sb[1], p.sb[2], N, K, m0,
                                             n0, batch_a > 1 ? g : 0, kt0, ktiles, t);
    } else {  // TMA alone, one thread
      if constexpr (REBALANCE) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
      if (t == 0) {
        if constexpr (G == Gather::ConvFwdIm2col) {
          conv_im2col_producer<T, BN, STAGES, B_MN_MAJOR>(conv, tm_a, tm_b, As, Bs, full, empty, m0, n0, kt0, ktiles,
                                                          b_k0);
        } else if constexpr (G == Gather::ConvWgradIm2col) {
          conv_wgrad_im2col_producer<T, BN, STAGES>(conv, tm_a, tm_b, As, Bs, full, empty, M, m0, n0, kt0, ktiles);
        } else {
          const int ga = batch_a > 1 ? g : 0, gb = batch_b > 1 ? g : 0;
          tma_producer<STAGES>(full, empty, ktiles, (BM + BN) * BK * sizeof(T), [&](int kt, int s) {
            const int k = (kt0 + kt) * BK;
            tma_load_tile<BM, BK, A_MN_MAJOR>(As + s * BM * BK, &tm_a, &full[s], m0, k, ga);
            tma_load_tile<BN, BK, B_MN_MAJOR>(Bs + s * BN * BK, &tm_b, &full[s], n0, k, gb);
          });
        }
      }
    }
  } else {  // consumers: warpgroup 1 -> rows 0..63, warpgroup 2 -> rows 64..127
    if constexpr (REBALANCE) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
    const bool has_bias = epi.bias != nullptr && !sk.partial;
    BiasTile<BN, T> bias;
    if (has_bias) bias.load(epi, p, g, n0, N, t);
    const T* a_half = As + (wg - 1) * 64 * BK;
    if constexpr (kTf32<T>) {
      // TF32: A's fragments rounded in registers (load_a_tf32), so the host need not copy a rounded
      // A first; in two register sets, as the persistent kernels hold them: k tile kt + 1's are
      // loaded into one while the wgmmas of kt read the other, once the group that read it retired.
      // Two blocks per SM (bn64x2) leave a thread too few registers for two sets (ptxas C7512:
      // wgmma serialized): one set, refilled once kt's group retired (wait_group 0).
      constexpr int SETS = blocks_per_sm<BN, STAGES, T>() == 1 ? 2 : 1;
      uint32_t af[SETS][BK / KSTEP][4];
      auto acquire = [&](auto u, int kt) {
        const int s = kt % STAGES;
        mbar_wait(&full[s], (kt / STAGES) & 1);
        if constexpr (B_REGS) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // see tf32_b_producer
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; ++kk)
          load_a_tf32(af[decltype(u)::value][kk], a_half + s * BM * BK, kk, t / 32, t % 32);
      };
      auto step = [&](auto u, int kt) {
        constexpr int U = decltype(u)::value;
        const int s = kt % STAGES;
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; ++kk)
          wgmma_rs<BN>(d, af[U][kk], operand_desc<false, KSTEP>(Bs + s * BN * BK, kk));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        if constexpr (SETS == 1) {  // kt's group retired: its stage and the one set are free
          asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
          if (t == 0) mbar_arrive(&empty[s]);
        } else {  // kt - 1's group retired
          asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
          if (kt > 0 && t == 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
        }
        if (kt + 1 < ktiles) acquire(std::integral_constant<int, (U + 1) % SETS>{}, kt + 1);
      };
      acquire(std::integral_constant<int, 0>{}, 0);
      for (int kt = 0; kt < ktiles; kt += 2) {  // in pairs: each k tile's register set is a constant
        step(std::integral_constant<int, 0>{}, kt);
        if (kt + 1 < ktiles) step(std::integral_constant<int, 1 % SETS>{}, kt + 1);
      }
    } else {
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(&full[s], (kt / STAGES) & 1);
        if constexpr (GATHER) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // see conv_producer
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; ++kk) {
          // MN-major A: each consumer's 64 rows are one atom
          const uint64_t da = operand_desc<A_MN_MAJOR, KSTEP>(a_half + s * BM * BK, kk);
          const uint64_t db = operand_desc<B_MN_MAJOR, KSTEP>(Bs + s * BN * BK, kk);
          wgmma<BN, A_MN_MAJOR ? 1 : 0, B_MN_MAJOR ? 1 : 0>(d, da, db, static_cast<F*>(nullptr));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // the previous stage's group retired
        if (kt > 0 && t == 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
      }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    const int warp = t / 32, lane = t % 32;
    // accumulator layout of m64nN: warp w holds rows 16w + lane/4 (+8), n8 block j holds
    // columns 8j + 2*(lane%4) (+1)
    if (sk.partial) {  // split-K: raw fp32 partials; each quad of lanes writes one 32-byte sector
      float* out = sk.partial + int64_t(z) * M * N;
      const bool cols = store == Store::Cols;  // column-major (N x M): 8 lanes' rows fill a sector
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t m = m0 + (wg - 1) * 64 + warp * 16 + lane / 4 + half * 8;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int64_t n = n0 + j * 8 + (lane % 4) * 2;
          const float v0 = d[j * 4 + half * 2], v1 = d[j * 4 + half * 2 + 1];
          if (cols) {
            if (n < N) out[n * M + m] = v0;
            if (n + 1 < N) out[(n + 1) * M + m] = v1;
          } else if (n + 1 < N && N % 2 == 0) {
            *reinterpret_cast<float2*>(out + m * N + n) = make_float2(v0, v1);
          } else {
            if (n < N) out[m * N + n] = v0;
            if (n + 1 < N) out[m * N + n + 1] = v1;
          }
        }
      }
      return;
    }

    // Epilogue. Both consumers must be done with the stages before they become staging space.
    // Without a residual the staged values are final (activated, cast to T); with one they are
    // the fp32 pre-activation (+ bias), and the store loop adds the residual, read 16 bytes at a
    // time at the output's offset, before the activation: one rounding, as torch's reference.
    asm volatile("bar.sync 1, 256;" ::: "memory");
    if constexpr (sizeof(T) == 2) {
      if (store == Store::Cols) {  // no residual, no bias (cols_stores)
        constexpr int RP = 64 + 8;
        T* cstage = As + (wg - 1) * BN * RP;
        with_act(epi.act, [&](auto act) {
          stage_fragment<decltype(act)::value, BN, ColumnStaging<RP>, false>(d, cstage, 0, nullptr, false, epi, t);
        });
        asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
        store_columns<64, BN, RP>(cstage, p, g, m0 + (wg - 1) * 64, n0, M, N, t);
        return;
      }
    }
    const bool vec_store = store == Store::Rows;
    constexpr int CP = BN + 8;  // padded pitch: the fragment writes below hit 32 distinct banks
    const bool has_res = epi.residual != nullptr;
    T* stage = As + (wg - 1) * 64 * CP;
    float* fstage = reinterpret_cast<float*>(As) + (wg - 1) * 64 * CP;
    float* bias_s = reinterpret_cast<float*>(As) + 2 * 64 * CP + (wg - 1) * BN;  // past either staging
    if (has_bias) {
      bias.stage(bias_s, t);
      asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
    }
    if (store == Store::Tma) {  // no residual (the host's condition); the stages' bytes are free
      using Staging = SwizzledStaging<64, int(sizeof(T))>;
      T* sstage = As + (wg - 1) * 64 * BN;  // 1 KiB aligned: BN * 64 * sizeof(T) bytes a warpgroup
      with_act(epi.act, [&](auto act) {
        stage_fragment<decltype(act)::value, BN, Staging, false>(d, sstage, 0, bias_s, has_bias, epi, t);
      });
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // staged writes, visible to TMA
      asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
      if (t == 0) {
        tma_store_staged<64, BN>(sstage, tm_c, n0, m0 + (wg - 1) * 64, g);
        // the block's shared memory must outlive the stores' reads of it
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      }
      return;
    }
    if (has_res) {
      stage_fragment<Act::None, BN, PaddedStaging<CP>, true>(d, fstage, 0, bias_s, has_bias, epi, t);
    } else {
      with_act(epi.act, [&](auto act) {
        stage_fragment<decltype(act)::value, BN, PaddedStaging<CP>, false>(d, stage, 0, bias_s, has_bias, epi, t);
      });
    }
    asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");  // this warpgroup's staging is written
    constexpr int VEC = 16 / int(sizeof(T));  // elements per 16-byte store
    const bool interior = vec_store && m0 + BM <= M && n0 + BN <= N;
    if (!has_res) {
      store_staged<64, BN, PaddedStaging<CP>>(stage, p, g, m0 + (wg - 1) * 64, n0, M, N, vec_store, interior, t);
      return;
    }
    with_act(epi.act, [&](auto act) {  // residual: vec_store also means the residual is 16-byte aligned
      constexpr Act A = decltype(act)::value;
#pragma unroll 2
      for (int i = t; i < 64 * (BN / VEC); i += 128) {
        const int r = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
        const int64_t m = m0 + (wg - 1) * 64 + r, n = n0 + c;
        if (m >= M) continue;
        const auto row = p.row_c(g, m);
        const float* src = fstage + r * CP + c;
        if (interior || (vec_store && n + VEC <= N)) {
          T* dst = p.c(row, n);
          const uint4 rv = *reinterpret_cast<const uint4*>(epi.residual + (dst - epi.out_base));
          float f[VEC];
#pragma unroll
          for (int q = 0; q < VEC / 4; ++q)
            *reinterpret_cast<float4*>(f + 4 * q) = *reinterpret_cast<const float4*>(src + 4 * q);
          const T* re = reinterpret_cast<const T*>(&rv);
          uint4 ov;
          T* oe = reinterpret_cast<T*>(&ov);
#pragma unroll
          for (int e = 0; e < VEC; ++e) oe[e] = epi.template finish<A>(f[e] + static_cast<float>(re[e]));
          *reinterpret_cast<uint4*>(dst) = ov;
        } else {
          for (int e = 0; e < VEC && n + e < N; ++e) {
            T* dst = p.c(row, n + e);
            *dst = epi.template finish<A>(src[e], dst);
          }
        }
      }
    });
  }
}
#endif

template <typename T, int BN, bool B_MN_MAJOR, int STAGES, Gather G = Gather::None, bool A_MN_MAJOR = false,
          BLoad BL = BLoad::Tma>
__global__ void __launch_bounds__(THREADS, (blocks_per_sm<BN, STAGES, T>()))
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
                     const __grid_constant__ CUtensorMap tm_c, MatmulProblem<T> p, int64_t M, int64_t N, int64_t K,
                     Epilogue<T> epi, int batch_a, int batch_b, Store store, SplitK sk, ConvOperands conv) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  griddep_wait();  // a dependent launch (launch_sm90): the kernel before it (a transposition) is done
  // and a split's reduce, launched as this grid's dependent, may be scheduled now: its blocks wait
  // for this grid's end at griddep_wait with their launch done (a dependent grid starts only once
  // every block of this one has started, so it never takes an SM this grid still needs)
  if (sk.partial) griddep_launch_dependents();
  gemm_sm90_tile<T, BN, B_MN_MAJOR, STAGES, G, A_MN_MAJOR, BL>(tm_a, tm_b, &tm_c, p, M, N, K, epi, batch_a, batch_b,
                                                               store, sk, conv, int(blockIdx.z), 0);
#else
  __trap();  // built without sm_90a: the host never launches this
#endif
}

// A strided data gradient's phases (kinds.h), each a forward conv of dy into a strided view of
// dx, in one launch: blockIdx.z is the phase, blockIdx.x its row tile (the grid is as wide as the
// tallest phase; the others' blocks past their rows return at once). Each phase's A by its own
// im2col map (its padding and output size differ); B is one flipped weight [C, taps, K] whose
// taps stand phase after phase, so a phase's B is its columns from b_k0 on. The phases come
// heaviest first (most taps): blocks start in blockIdx order, so the short ones fill the tail.
constexpr int kMaxPhases = 4;
template <typename T>
struct DgradPhaseArgs {
  CUtensorMap a;        // im2col map of dy as this phase's forward reads it
  ConvOperands conv;    // the phase's forward conv
  MatmulProblem<T> p;   // where its output rows go (a strided view of dx)
  int64_t M = 0, K = 0;
  int b_k0 = 0;
};
template <typename T>
struct DgradPhases {
  DgradPhaseArgs<T> at[kMaxPhases];
};
// A phase of K = 0 (no tap reaches it) is zeros: the blockIdx.y == 0 block of each row tile
// stores them, every column, without the ring (a GEMM tile's barriers, staging and syncs per
// 16 KB of zeros measured slower than filling dx before the launch).
template <typename T, int BN, int STAGES>
__global__ void __launch_bounds__(THREADS, (blocks_per_sm<BN, STAGES, T>()))
    gemm_sm90_phases_kernel(const __grid_constant__ DgradPhases<T> phases, const __grid_constant__ CUtensorMap tm_b,
                            int64_t N, Epilogue<T> epi, bool vec_store) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(sizeof(T) == 2, "16-bit types: zeros are stored as bits");
  griddep_wait();  // a dependent launch (launch_phases) after the weight's flipped copy
  const DgradPhaseArgs<T>& f = phases.at[blockIdx.z];
  const int m0 = blockIdx.x * BM;
  if (m0 >= f.M) return;  // before any barrier: the whole block leaves
  if (f.K == 0) {
    if (blockIdx.y > 0) return;
    constexpr int VEC = 8;  // elements per 16-byte store
    const int chunks = int((N + VEC - 1) / VEC), rows = int(f.M - m0 < BM ? f.M - m0 : BM);
    for (int i = threadIdx.x; i < rows * chunks; i += THREADS) {
      const int r = i / chunks, n = (i % chunks) * VEC;
      T* row = f.p.row_c(0, m0 + r);
      if (vec_store && n + VEC <= N) {
        *reinterpret_cast<uint4*>(f.p.c(row, n)) = make_uint4(0, 0, 0, 0);
      } else {
        for (int e = 0; e < VEC && n + e < N; ++e) *reinterpret_cast<uint16_t*>(f.p.c(row, n + e)) = 0;
      }
    }
    return;
  }
  gemm_sm90_tile<T, BN, false, STAGES, Gather::ConvFwdIm2col, false>(f.a, tm_b, nullptr, f.p, f.M, N, f.K, epi, 1,
                                                                     1, vec_store ? Store::Rows : Store::Elements,
                                                                     SplitK{}, f.conv, 0, f.b_k0);
#else
  __trap();  // built without sm_90a: the host never launches this
#endif
}


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
      if (c_by_tma) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // staged writes, visible to TMA
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
