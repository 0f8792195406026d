// The Hopper family's building blocks (see kernels.cuh for the family): tile and stage
// constants, the Gather / Store / BLoad kinds, TMA loads (tiled, multicast, 4-D, im2col),
// wgmma shared-memory descriptors and the TF32 A fragment read from registers.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "common/epilogue.h"
#include "common/problems.h"
#include "cuda/runtime/launch_util.h"  // static_for
#include "cuda/runtime/griddep.cuh"
#include "cuda/ptx/mbarrier.cuh"  // mbar_*
#include "cuda/ptx/mma_sync.cuh"  // smem_u32, round_tf32
#include "cuda/ptx/wgmma.cuh"

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

}  // namespace sm90
}  // namespace cuda
}  // namespace tileops
