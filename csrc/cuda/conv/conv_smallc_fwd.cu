// Forward conv2d for few input channels (C not a multiple of 8, R*S*C <= 256; the ResNet stem's
// 7x7/2 3->64), 16-bit: one implicit-GEMM kernel on mma.sync, with no column buffer. Such a C gives
// neither TMA boxes nor 16-byte gathers, so the general path writes im2col columns to memory and
// reads them back (docs/kernels/conv-smallc.md). Here a block stages the input rows that an output
// row reads in shared memory (a ring: the next output row stages only its new rows), where each tap
// row's (s, c) columns are contiguous, and builds the A fragments straight from them: column
// k = (r, s, c) of output pixel q sits at staged element q * sw * C + koff[k]. Where C <= 4 at an
// even stride, the "quads" kernel pads staged pixels to 4 channels instead, for ldmatrix and
// (sm_90a) wgmma, and its weight gradient (conv_smallc_wgrad.cu) reads the same rows. Each step's
// measurements: docs/kernels/conv-smallc.md#measured-step-by-step. What these kernels share with
// the weight gradient: conv_smallc.cuh. The same problem in fp32 (TF32 off) has a direct SIMT
// kernel of its own (conv_smallc_f32.cu). This file also holds rows64, the Hopper forward of
// C = 64 at unit stride (conv_rows64_kernel, conv_fwd_rows64; docs/kernels/conv-sm90.md#rows64).

#include <atomic>
#include <cstdint>

#include "common/epilogue.h"
#include "cuda/conv/conv_smallc.cuh"
#include "cuda/runtime/launch_util.h"
#include "cuda/runtime/griddep.cuh"
#include "cuda/routing/candidates.h"
#include "cuda/routing/entry.h"
#include "cuda/sm90/primitives.cuh"  // sm90::make_desc, tma_load_4d, wgmma_m64n64_rs
#include "cuda/sm90/host.cuh"  // hopper::tiled_map
#include "cuda/ptx/mma_sync.cuh"

namespace tileops::cuda {
using namespace smallc;
namespace {

constexpr int kStage = 12;  // staging loads a thread issues before it stores them
constexpr int kBlocksPerSm = 3;  // resident blocks at the 168 registers a thread this allows

// Fills shared memory from `rows` x `cols` 2-byte elements: store(r, c, load(r, c)), with kStage
// global loads in flight per thread before any store (a loop of load-then-store waits out a
// global load's latency for every element). (r, c) advance by adding, not dividing: integer
// division was most of the kernel's instructions.
template <typename Load, typename Store>
__device__ __forceinline__ void copy_in(int rows, int cols, Load&& load, Store&& store) {
  int r = threadIdx.x / cols, c = threadIdx.x % cols;
  while (r < rows) {
    uint16_t v[kStage];
    int rs[kStage], cs[kStage];
#pragma unroll
    for (int u = 0; u < kStage; ++u) {
      rs[u] = r, cs[u] = c;
      v[u] = r < rows ? load(r, c) : uint16_t(0);
      for (c += kThreads; c >= cols; c -= cols) ++r;
    }
#pragma unroll
    for (int u = 0; u < kStage; ++u)
      if (rs[u] < rows) store(rs[u], cs[u], v[u]);
  }
}

// Two staged elements as one A register (low half: the lower column). A padding column past
// R*S*C reads the zeros after the ring (its B row is zero too, but a staged value could be an
// Inf or NaN of the input, and Inf * 0 is NaN).
__device__ __forceinline__ uint32_t a_pair(const uint16_t* px, int o0, int o1) {
  return uint32_t(px[o0]) | (uint32_t(px[o1]) << 16);
}

// The block's B: Bs[at(n, col(ch, r, s))] = w[k0c + n, ch, r, s], zeros elsewhere (columns no tap
// maps to, channels past K; kNB * ldb elements in all). at(n, k) = at(n % 8, k) + (n - n % 8) rs: a
// lane's columns are placed once for its warp's two values of n % 8. A lane holds the w offset and the column of taps e = lane + 32 i of a
// channel (R*S*C <= 256, in w's own (ch, r, s) order: contiguous loads for a contiguous w), and a
// warp loads 8 channels' taps, 64 loads in flight, before it stores them.
static_assert(kWarps == 4, "stage_weight: channel warp + 4u has n % 8 = warp + 4 (u % 2)");
template <typename Col, typename At>
__device__ __forceinline__ void stage_weight(uint16_t* Bs, const ConvOperands& c, const SmallC& g, int k0c, Col&& col,
                                             At&& at, int rs) {
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  for (int i = tid; i < kNB * g.ldb / 8; i += kThreads) reinterpret_cast<uint4*>(Bs)[i] = make_uint4(0, 0, 0, 0);
  const int RS = g.R * g.S, taps = RS * g.C;
  int src[kMaxK / 32], dst[2][kMaxK / 32];  // dst[p]: n % 8 = warp + 4p (channels warp + 4u)
#pragma unroll
  for (int i = 0; i < kMaxK / 32; ++i) {
    const int e = lane + 32 * i, ch = e / RS, r = e % RS / g.S, s = e % g.S;
    src[i] = e < taps ? int(ch * c.ws[1] + r * c.ws[2] + s * c.ws[3]) : -1;
    dst[0][i] = at(warp, col(ch, r, s)), dst[1][i] = at(warp + 4, col(ch, r, s));
  }
  __syncthreads();  // the zeros before the taps
  const uint16_t* w = static_cast<const uint16_t*>(c.w);
  for (int n0 = warp; n0 < kNB; n0 += 8 * kWarps) {
    uint16_t v[8][kMaxK / 32];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t k = k0c + n0 + u * kWarps;
#pragma unroll
      for (int i = 0; i < kMaxK / 32; ++i) v[u][i] = k < g.K && src[i] >= 0 ? w[k * c.ws[0] + src[i]] : uint16_t(0);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u)
#pragma unroll
      for (int i = 0; i < kMaxK / 32; ++i)
        if (src[i] >= 0) Bs[dst[u % 2][i] + (n0 - warp + u / 2 * 8) * rs] = v[u][i];
  }
}

// The accumulators start at the bias (bias[kNB] in shared memory): channel 8j + 2tig + e of each row.
template <int MT>
__device__ __forceinline__ void init_acc(float (&acc)[MT][8][4], const float* bias) {
  const int tig = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 b = *reinterpret_cast<const float2*>(bias + 8 * j + 2 * tig);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) acc[mt][j][0] = acc[mt][j][2] = b.x, acc[mt][j][1] = acc[mt][j][3] = b.y;
  }
}

// The epilogue of one item (image n, output row p, pixels [q0, q0 + kWarps MT 16)) of a block's kNB channels
// from k0c: accumulator (mt, j, 2h + e) is pixel row gid + 8h of tile mt, channel 8j + 2tig + e, its
// bias added (init_acc). rows16: the C tile through shared memory (ctile, a warp's rows of it).
// warp: the warp's place among the item's kWarps.
template <typename T, Act A, int MT>
__device__ __forceinline__ void store_item(const float (&acc)[MT][8][4], const ConvOperands& c, const SmallC& g,
                                           const Epilogue<T>& epi, uint16_t* ctile, int64_t n,
                                           int p, int q0, int k0c, bool rows16, int warp) {
  const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
  const int nq = min(kWarps * MT * 16, g.Q - q0);
  T* y = static_cast<T*>(c.y);
  T* yrow = y + n * c.ys[0] + int64_t(p) * c.ys[2];
  if (rows16) {
    // Each m16 tile of the warp (16 pixels x kNB channels) through shared memory (4-byte stores on
    // distinct banks), then to y as 16-byte vectors, 8 lanes a pixel: 8 stores a thread instead of 32
    // of 4 bytes.
    uint16_t* cw = ctile + warp * 16 * kLdc;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int pl = gid + 8 * h, ql = warp * (MT * 16) + mt * 16 + pl;
        const T* yq = yrow + int64_t(q0 + min(ql, nq - 1)) * c.ys[3];  // the residual's place
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int k = 8 * j + 2 * tig;
          const T o0 = epi.template finish<A>(acc[mt][j][2 * h], yq + k0c + k);
          const T o1 = epi.template finish<A>(acc[mt][j][2 * h + 1], yq + k0c + k + 1);
          *reinterpret_cast<uint32_t*>(cw + pl * kLdc + k) = uint32_t(o0.x) | (uint32_t(o1.x) << 16);
        }
      }
      __syncwarp();
#pragma unroll
      for (int i = 0; i < 16 * kNB / 8 / 32; ++i) {
        const int id = lane + 32 * i, pl = id / (kNB / 8), v = id % (kNB / 8);
        const int ql = warp * (MT * 16) + mt * 16 + pl;
        if (ql < nq)
          *reinterpret_cast<uint4*>(yrow + int64_t(q0 + ql) * c.ys[3] + k0c + 8 * v) =
              *reinterpret_cast<const uint4*>(cw + pl * kLdc + 8 * v);
      }
      __syncwarp();  // the C tile is read before it is written again
    }
  } else {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int ql = warp * (MT * 16) + mt * 16 + gid + 8 * h;
        if (ql >= nq) continue;
        T* yq = yrow + int64_t(q0 + ql) * c.ys[3];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int k = k0c + 8 * j + 2 * tig;
          float v[2] = {acc[mt][j][2 * h], acc[mt][j][2 * h + 1]};
          T o[2] = {T(0), T(0)};
#pragma unroll
          for (int e = 0; e < 2; ++e)  // none past the last channel (K odd or not a multiple of kNB)
            if (k + e < g.K) o[e] = epi.template finish<A>(v[e], yq + (k + e) * c.ys[1]);
          if (g.pairs && k + 1 < g.K) {  // c10::Half and c10::BFloat16 keep their bits in .x
            *reinterpret_cast<uint32_t*>(yq + k) = uint32_t(o[0].x) | (uint32_t(o[1].x) << 16);
          } else {
            for (int e = 0; e < 2; ++e)
              if (k + e < g.K) yq[(k + e) * c.ys[1]] = o[e];
          }
        }
      }
  }
}

// y[n, k, p, q] = act(bias[k] + residual + sum_{r,s,c} x[n, c, p*sh - ph + r*dh, q*sw - pw + s*dw] * w[k, c, r, s])
// Block: kNB output channels (blockIdx.y), a run of g.per consecutive items (n, p, chunk of kQT pixels).
// Warp w: pixels [32w, 32w + 32) of the chunk, all kNB channels (2 x 8 m16n8 accumulators).
template <typename T, Act A>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) conv_smallc_kernel(ConvOperands c, SmallC g, Epilogue<T> epi) {
  extern __shared__ __align__(16) unsigned char smallc_smem[];
  uint16_t* Bs = reinterpret_cast<uint16_t*>(smallc_smem);  // [kNB][ldb]: w[k0c + n] at column k
  float* bias = reinterpret_cast<float*>(Bs + kNB * g.ldb);   // [kNB]: the block's bias, zeros if none
  int* koff = reinterpret_cast<int*>(bias + kNB);             // [Kp]: staged offset of column k this item
  int* kr = koff + g.Kp;                                      // [Kp]: r of column k; -1: padding
  int* krest = kr + g.Kp;                                     // [Kp]: (s, c) offset in a staged row
  uint16_t* tile = reinterpret_cast<uint16_t*>(krest + g.Kp); // [RR][row_len] ring of input rows, then zeros
  uint16_t* ctile = reinterpret_cast<uint16_t*>(smallc_smem + g.c_tile());  // [kWarps][16][kLdc]: rows16's C tile
  const uint16_t* x = static_cast<const uint16_t*>(c.x);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, gid = lane / 4, tig = lane % 4;
  const int k0c = blockIdx.y * kNB, zero = g.RR * g.row_len;  // zero: the padding columns' offset
  const bool rows16 = g.rows16 && k0c + kNB <= g.K;  // a whole block of channels

  // Prologue: each column's r and (s, c) offsets, the bias, the zeros, then B (k = (r, s, c), zero
  // past R*S*C and K).
  for (int k = tid; k < g.Kp; k += kThreads) {
    const int SC = g.S * g.C, r = k / SC, s = (k % SC) / g.C, ch = k % g.C, in = k < g.R * SC;
    kr[k] = in ? r : -1;
    krest[k] = s * g.dw * g.C + ch;
  }
  for (int i = tid; i < kNB; i += kThreads)
    bias[i] = epi.bias != nullptr && k0c + i < g.K ? static_cast<float>(epi.bias[k0c + i]) : 0.f;
  for (int i = tid; i < kQT * g.sw * g.C; i += kThreads) tile[zero + i] = 0;
  stage_weight(
      Bs, c, g, k0c, [&](int ch, int r, int s) { return (r * g.S + s) * g.C + ch; },
      [&](int n, int k) { return n * g.ldb + k; }, g.ldb);

  // The block's items are consecutive, so the next output row of the same image and chunk reads
  // the rows of this one shifted by sh: the tile is a ring of RR = (R-1)*dh + 1 input rows (input
  // row h in slot h mod RR) and only the rows not yet there are staged.
  const int64_t row_end = int64_t(g.W) * g.C;
  const int64_t first = int64_t(blockIdx.x) * g.per, last = min(first + g.per, g.items);
  int qc = int(first % g.qchunks), p = int((first / g.qchunks) % g.P);  // the item (n, p, qc)
  int64_t n = first / g.qchunks / g.P;
  bool have = false;  // the ring holds the previous item's rows
  int prev_hb = 0;
  for (int64_t item = first; item < last; ++item) {
    const int q0 = qc * kQT, hb = p * g.sh - g.ph;   // input rows [hb, hb + RR)
    const int64_t w_lo = int64_t(q0) * g.sw - g.pw;  // the first staged input column
    const int h_lo = have && hb > prev_hb ? max(hb, prev_hb + g.RR) : hb, h_hi = hb + g.RR;
    __syncthreads();  // the previous item's reads of the tile and koff are done
    const int hb_slot = ring_slot(hb, g.RR);
    for (int k = tid; k < g.Kp; k += kThreads) {
      const int slot = hb_slot + kr[k] * g.dh;  // < 2 RR
      koff[k] = kr[k] < 0 ? zero : (slot >= g.RR ? slot - g.RR : slot) * g.row_len + krest[k];
    }
    const int lo_slot = ring_slot(h_lo, g.RR);
    copy_in(  // input rows [h_lo, h_hi), zero outside the image
        h_hi - h_lo, g.row_len,
        [&](int r, int j) {
          const int h = h_lo + r;
          const int64_t e = w_lo * g.C + j;  // element within the input row: (w, c), c stride 1
          return h >= 0 && h < g.H && e >= 0 && e < row_end ? x[n * c.xs[0] + int64_t(h) * c.xs[2] + e] : uint16_t(0);
        },
        [&](int r, int j, uint16_t v) {
          const int slot = lo_slot + r;
          tile[(slot >= g.RR ? slot - g.RR : slot) * g.row_len + j] = v;
        });
    __syncthreads();

    // The staged pixel of each of this thread's A rows (gid and gid + 8 of each m16 tile); rows
    // past the chunk's last pixel read pixel 0 and are not stored.
    const int nq = min(kQT, g.Q - q0);
    int pix[kMT][2];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int ql = warp * (kMT * 16) + mt * 16 + gid + 8 * h;
        pix[mt][h] = ql < nq ? ql * g.sw * g.C : 0;
      }
    float acc[kMT][8][4];
    init_acc(acc, bias);
#pragma unroll 2
    for (int k0 = 0; k0 < g.Kp; k0 += 16) {
      const int2 lo = *reinterpret_cast<const int2*>(koff + k0 + 2 * tig);
      const int2 hi = *reinterpret_cast<const int2*>(koff + k0 + 8 + 2 * tig);
      uint32_t a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        const uint16_t* r0 = tile + pix[mt][0];
        const uint16_t* r1 = tile + pix[mt][1];
        a[mt][0] = a_pair(r0, lo.x, lo.y);
        a[mt][1] = a_pair(r1, lo.x, lo.y);
        a[mt][2] = a_pair(r0, hi.x, hi.y);
        a[mt][3] = a_pair(r1, hi.x, hi.y);
      }
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {  // n8 tiles 2jj and 2jj + 1, k halves: matrices 0..3
        const int m = lane / 8, row = (2 * jj + m / 2) * 8 + lane % 8;
        uint32_t b[4];
        ldmatrix_x4(b, Bs + row * g.ldb + k0 + 8 * (m % 2));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          mma_sync<T>(acc[mt][2 * jj], a[mt], b);
          mma_sync<T>(acc[mt][2 * jj + 1], a[mt], b + 2);
        }
      }
    }

    store_item<T, A>(acc, c, g, epi, ctile, n, p, q0, k0c, rows16, threadIdx.x / 32);
    prev_hb = hb;
    have = g.qchunks == 1;  // with several chunks the next item stages other columns
    if (++qc == g.qchunks) {
      qc = 0;
      if (++p == g.P) p = 0, ++n, have = false;
    }
  }
}

// Channels padded to 4 ("quads": C <= 4, an even stride along w, dilation 1 there, S <= 8, x's rows
// 16-byte aligned). A staged pixel is then 8 bytes and pixel q's window of a filter row, S taps x 4
// channels, starts at element 4 sw q: every 16-byte ldmatrix row is aligned, so an A fragment is one
// ldmatrix_x4 instead of 8 two-byte loads (most of the general kernel's loop). A filter row is KR
// columns of K (16 or 32: 4 or 8 taps), the taps past S masked to zero in A (the staged values there
// are real pixels, and Inf * 0 is NaN) and in B. x's rows arrive by 16-byte cp.async into a raw buffer
// while the previous item computes (the general kernel waits out its loads), and are spread to quads
// in shared memory once they land. On sm_90a the products are wgmma with A from registers (the same
// fragments) and B by descriptor, m64n64 per m16 tile of the 4 warps: twice mma.sync's rate.
// B: k = r KR + 4 s + ch, in atoms of 64 k x kNB rows of 128 bytes, 128-byte swizzled (wgmma's
// K-major layout; ldmatrix reads it without bank conflicts too).
__device__ __forceinline__ int quad_b(int n, int k) {
  return (k >> 6) * (kNB * 64) + n * 64 + ((((k & 63) >> 3) ^ (n & 7)) << 3) + (k & 7);
}
// WG: the products by wgmma where the build has sm_90a code (false: mma.sync there too, as before
// Hopper; TILEOPS_PORTABLE=1 launches it so).
template <typename T, Act A, int KR, bool WG>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) conv_smallc4_kernel(ConvOperands c, SmallC g, Epilogue<T> epi) {
  extern __shared__ __align__(16) unsigned char smallc_raw_smem[];
  unsigned char* smallc_smem = smallc_raw_smem + ((1024 - (smem_u32(smallc_raw_smem) & 1023)) & 1023);
  uint16_t* Bs = reinterpret_cast<uint16_t*>(smallc_smem);                // quad_b(n, k); kNB * ldb elements
  float* bias = reinterpret_cast<float*>(Bs + kNB * g.ldb);                 // [kNB]
  uint16_t* ring = reinterpret_cast<uint16_t*>(smallc_smem + g.quad_ring());  // [RR][4 rowp] input rows, quads
  uint16_t* raw = reinterpret_cast<uint16_t*>(smallc_smem + g.quad_raw());    // [RR][raw_len] rows as in x
  uint16_t* ctile = reinterpret_cast<uint16_t*>(smallc_smem + g.quad_ctile());
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, tig = lane % 4;
  const int k0c = blockIdx.y * kNB;
  const bool rows16 = g.rows16 && k0c + kNB <= g.K;

  const QuadRows<kThreads> rows(c, g, raw, ring);

  const int64_t first = int64_t(blockIdx.x) * g.per, last = min(first + g.per, g.items);
  QuadItem it = rows.at(first);
  rows.fetch(it);  // in flight while B is staged
  cp_async_commit();
  for (int i = tid; i < kNB; i += kThreads)
    bias[i] = epi.bias != nullptr && k0c + i < g.K ? static_cast<float>(epi.bias[k0c + i]) : 0.f;
  stage_weight(Bs, c, g, k0c, [](int ch, int r, int s) { return r * KR + 4 * s + ch; }, quad_b, 64);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (WG) fence_proxy_async_smem();  // B's stores, before wgmma reads them
#endif

  // A rows: lanes 8i..8i+7 address matrix i (pixels +8 for odd i, columns +8 for i >= 2); the taps of
  // the last k16 step past S read as zeros (a0, a1: column 2 tig of the step; a2, a3: 8 + 2 tig).
  int aoff[kMT];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
    aoff[mt] = (warp * (kMT * 16) + mt * 16 + lane % 8 + 8 * (lane / 8 % 2)) * 4 * g.sw + 8 * (lane / 16);
  constexpr int kSteps = KR / 16;
  const bool mask_lo = (KR - 16 + 2 * tig) / 4 >= g.S, mask_hi = (KR - 8 + 2 * tig) / 4 >= g.S;

  for (int64_t item = first; item < last; ++item) {
    cp_async_wait<0>();
    __syncthreads();  // this item's rows are in raw; the previous item's reads of the ring are done
    rows.spread(it);
    __syncthreads();
    const QuadItem cur = it;
    if (item + 1 < last) it = rows.next(cur), rows.fetch(it), cp_async_commit();  // raw is free: the next item's rows

    float acc[kMT][8][4];
    init_acc(acc, bias);
    const int hb_slot = ring_slot(cur.hb, g.RR);
    // filter row r's A fragments: kSteps k16 steps x kMT m16 tiles
    auto load_a = [&](int r, uint32_t (&a)[kSteps][kMT][4]) {
      const int slot = hb_slot + r * g.dh;  // < 2 RR
      const uint16_t* row = ring + (slot >= g.RR ? slot - g.RR : slot) * 4 * g.rowp;
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          ldmatrix_x4(a[kk][mt], row + aoff[mt] + 16 * kk);
          if (kk == kSteps - 1) {
            if (mask_lo) a[kk][mt][0] = a[kk][mt][1] = 0;
            if (mask_hi) a[kk][mt][2] = a[kk][mt][3] = 0;
          }
        }
    };
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (WG) {
      // Row r's wgmma group reads one register set while row r + 1's fragments load into the other
      // (once row r - 1's group, the last reader of that set, has retired).
      using Tag = std::conditional_t<std::is_same<T, c10::Half>::value, __half, __nv_bfloat16>;
      const uint64_t desc0 = sm90::make_desc(Bs, 16, 1024);
      auto mma_row = [&](int r, const uint32_t (&a)[kSteps][kMT][4], uint32_t (&next)[kSteps][kMT][4]) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  #pragma unroll
        for (int kk = 0; kk < kSteps; ++kk) {
          const int k = r * KR + 16 * kk;  // a descriptor's address field counts 16 bytes
          const uint64_t db = desc0 + uint64_t(((k >> 6) * (kNB * 128) + (k & 63) * 2) >> 4);
  #pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            sm90::wgmma_m64n64_rs(reinterpret_cast<float(&)[32]>(acc[mt]), a[kk][mt], db, 1, static_cast<Tag*>(nullptr));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        if (r + 1 < g.R) {
          asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
          load_a(r + 1, next);
        }
      };
      uint32_t a0[kSteps][kMT][4], a1[kSteps][kMT][4];
      load_a(0, a0);
      for (int r = 0; r < g.R; r += 2) {
        mma_row(r, a0, a1);
        if (r + 1 < g.R) mma_row(r + 1, a1, a0);
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    } else
#endif
    for (int r = 0; r < g.R; ++r) {
      uint32_t a[kSteps][kMT][4];
      load_a(r, a);
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {  // n8 tiles 2jj and 2jj + 1, k halves: matrices 0..3
          const int m = lane / 8;
          uint32_t b[4];
          ldmatrix_x4(b, Bs + quad_b((2 * jj + m / 2) * 8 + lane % 8, r * KR + 16 * kk + 8 * (m % 2)));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            mma_sync<T>(acc[mt][2 * jj], a[kk][mt], b);
            mma_sync<T>(acc[mt][2 * jj + 1], a[kk][mt], b + 2);
          }
        }
    }
    store_item<T, A>(acc, c, g, epi, ctile, cur.n, cur.p, cur.qc * kQT, k0c, rows16, threadIdx.x / 32);
  }
}

// 64 input channels at unit stride and dilation (ResNet's first stage, 3x3 64@56), 16-bit on
// sm_90a: the Hopper implicit GEMM loads each k tile of A by TMA im2col, every input pixel once per
// tap (9 times for 3x3) and the weight once per 128-pixel tile, and is bound by those L2 reads
// (docs/kernels/conv-sm90.md#rows64). Here (conv_fwd_sm90's rows64; its default for such layers)
// a resident block keeps the whole weight slice (kNB x R S 64, <= 72 KiB) in shared
// memory, and each of its two warpgroups walks items of QT = 64 MT consecutive output pixels of one image
// (which may span output rows: the image's pixels as one run, store_item's q), loading the input
// rows its item reads, whole (Q + S - 1 pixels of 128 bytes from w = -pw, zeros outside x), by one
// 4-D TMA tile load a row, 128-byte swizzled (chunk ^ pixel % 8: the 8 rows of an ldmatrix fall on
// distinct banks).
// A fragments come from those rows by ldmatrix at each tap's shift and feed wgmma m64n64 with A
// from registers (the quads' scheme: a tap's fragments load while the previous tap's group runs).
// The two warpgroups drift apart, so one's loads and epilogue overlap the other's products (one
// warpgroup a block, or two with the rows by cp.async, were slower than bn64x2-im2col: same doc).
// MT: m64 tiles an item (2; 1 where two-tile items would leave most SMs idle, as at batch 1: there
// every block's one busy warpgroup is bound by its products, and halving them halves its time).
struct Rows64 {
  int R, S, P, Q, W, H, ph, pw, K;
  int slot;        // bytes a staged row takes (1024-aligned: the swizzle's phase is pixel % 8)
  int mr;          // staged rows an item may read
  int per_image;   // items of an image
  int64_t items;
  __host__ __device__ size_t bias_at() const { return size_t(kNB) * R * S * 128; }
  __host__ __device__ size_t rows_at() const { return bias_at() + 1024; }
  __host__ __device__ size_t ctile_at() const { return rows_at() + 2 * size_t(mr) * slot; }
  size_t smem() const { return ctile_at() + 2 * size_t(kWarps) * 16 * kLdc * 2 + 1024; }
};
template <typename T, Act A, int MT>
__global__ void __launch_bounds__(2 * kThreads, 1) conv_rows64_kernel(const __grid_constant__ CUtensorMap xmap,
                                                                       ConvOperands c, Rows64 g, SmallC sg,
                                                                       Epilogue<T> epi, const T* __restrict__ b,
                                                                       int64_t ldb) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  griddep_wait();  // a dependent launch (conv_fwd_rows64): a data gradient's weight transposition is done
  extern __shared__ __align__(16) unsigned char rows64_raw_smem[];
  unsigned char* sm = rows64_raw_smem + ((1024 - (smem_u32(rows64_raw_smem) & 1023)) & 1023);
  uint16_t* Bs = reinterpret_cast<uint16_t*>(sm);  // quad_b(n, k), k = (r S + s) 64 + ch
  float* bias = reinterpret_cast<float*>(sm + g.bias_at());
  uint64_t* full = reinterpret_cast<uint64_t*>(sm + g.bias_at() + 512);  // a warpgroup's rows landed
  const int tid = threadIdx.x, lane = tid % 32, wg = tid / kThreads, wtid = tid % kThreads, wwarp = wtid / 32;
  const uint32_t stage = smem_u32(sm + g.rows_at()) + uint32_t(wg * g.mr * g.slot);  // this warpgroup's rows
  uint16_t* ctile = reinterpret_cast<uint16_t*>(sm + g.ctile_at()) + wg * kWarps * 16 * kLdc;
  const int k0c = blockIdx.y * kNB, taps = g.R * g.S, PQ = g.P * g.Q;
  const bool rows16 = sg.rows16 && k0c + kNB <= g.K;
  auto wg_sync = [&] { asm volatile("bar.sync %0, %1;" ::"r"(1 + wg), "n"(kThreads) : "memory"); };

  constexpr int QT = kWarps * MT * 16;  // an item's pixels
  // item i: image i / per_image, pixels [m0, m0 + QT) of its P Q; its first staged row
  auto first_row = [&](int64_t i, int& n, int& m0) {
    n = int(i / g.per_image), m0 = int(i % g.per_image) * QT;
    return m0 / g.Q - g.ph;
  };
  // the item's rows h0.. by TMA (x's 4-D map: a box of 64 channels x Q + S - 1 pixels from w = -pw,
  // zeros outside x, 128-byte swizzled as ldmatrix reads them), issued by the warpgroup's thread 0
  const uint32_t row_bytes = uint32_t(g.Q + g.S - 1) * 128;
  auto fetch = [&](int64_t i) {
    if (wtid != 0) return;
    int n, m0;
    const int h0 = first_row(i, n, m0);
    mbar_expect_tx(&full[wg], uint32_t(g.mr) * row_bytes);
    for (int j = 0; j < g.mr; ++j) sm90::tma_load_4d(stage + uint32_t(j * g.slot), &xmap, &full[wg], 0, -g.pw, h0 + j, n);
  };

  const int64_t step = 2 * int64_t(gridDim.x);
  int64_t item = blockIdx.x + int64_t(wg) * gridDim.x;
  // each warpgroup's first rows are requested before the weight is loaded, and land meanwhile
  if (wtid == 0) {
    mbar_init(&full[wg], 1);
    mbar_init_fence();
    if (item < g.items) fetch(item);
  }
  // the weight slice (16-byte copies into the swizzled atoms) and the bias, by the whole block
  for (int e = tid; e < kNB * taps * 8; e += 2 * kThreads) {
    const int n = e / (taps * 8), v = e - n * (taps * 8);
    const bool in = k0c + n < g.K;
    cp_async16(smem_u32(Bs + quad_b(n, 8 * v)), in ? b + int64_t(k0c + n) * ldb + 8 * v : b, in ? 16 : 0);
  }
  for (int i = tid; i < kNB; i += 2 * kThreads)
    bias[i] = epi.bias != nullptr && k0c + i < g.K ? static_cast<float>(epi.bias[k0c + i]) : 0.f;
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();  // the weight, the bias, the barriers
  fence_proxy_async_smem();  // cp.async wrote B, wgmma reads it
  uint32_t parity = 0;

  using Tag = std::conditional_t<std::is_same<T, c10::Half>::value, __half, __nv_bfloat16>;
  const uint64_t desc0 = sm90::make_desc(Bs, 16, 1024);
  for (; item < g.items; item += step, parity ^= 1) {
    mbar_wait(&full[wg], parity);  // the item's rows landed
    int n, m0;
    const int h0 = first_row(item, n, m0);
    // lane's ldmatrix row: pixel m of tile mt, its staged row and column at tap (0, 0); matrices
    // 2, 3 take the k step's second 8 channels (chunk + 1)
    uint32_t arow[MT];
    int acol[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int m = min(m0 + wwarp * (MT * 16) + mt * 16 + lane % 8 + 8 * (lane / 8 % 2), PQ - 1);
      acol[mt] = m % g.Q;
      arow[mt] = stage + uint32_t((m / g.Q - g.ph - h0) * g.slot);
    }
    auto load_a = [&](int t, uint32_t (&a)[4][MT][4]) {
      const int r = t / g.S, s = t - r * g.S;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int px = acol[mt] + s;
        const uint32_t row = arow[mt] + uint32_t(r * g.slot + px * 128);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) ldmatrix_x4(a[kk][mt], row + uint32_t(((2 * kk + lane / 16) ^ (px & 7)) << 4));
      }
    };
    float acc[MT][8][4];
    init_acc(acc, bias);
    auto mma_tap = [&](int t, const uint32_t (&a)[4][MT][4], uint32_t (&next)[4][MT][4]) {
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int k = t * 64 + 16 * kk;  // a descriptor's address field counts 16 bytes
        const uint64_t db = desc0 + uint64_t(((k >> 6) * (kNB * 128) + (k & 63) * 2) >> 4);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          sm90::wgmma_m64n64_rs(reinterpret_cast<float(&)[32]>(acc[mt]), a[kk][mt], db, 1, static_cast<Tag*>(nullptr));
      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      if (t + 1 < taps) {
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        load_a(t + 1, next);
      }
    };
    uint32_t a0[4][MT][4], a1[4][MT][4];
    load_a(0, a0);
    for (int t = 0; t < taps; t += 2) {
      mma_tap(t, a0, a1);
      if (t + 1 < taps) mma_tap(t + 1, a1, a0);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    // the rows' ldmatrix reads (generic proxy) before the next item's TMA (async proxy) into them:
    // docs/kernels/skinny.md#the-rings-release
    fence_proxy_async_smem();
    wg_sync();  // every warp's ldmatrix reads of the rows are done: the next item's rows may land
    if (item + step < g.items) fetch(item + step);
    store_item<T, A>(acc, c, sg, epi, ctile, n, 0, m0, k0c, rows16, wwarp);
  }
#endif
}
template <typename T, Act AC, int MT>
std::atomic<uint64_t> rows64_set_on{0};

// Devices on which each kernel's dynamic shared-memory limit is set (allow_smem).
template <typename T, Act AC, int KR = 0, bool WG = false>
std::atomic<uint64_t> smem_set_on{0};

// What the forward's checks computed: the geometry (the quads' where kr > 0), the shared memory a
// block takes and the grid.
struct FwdPlan {
  SmallC g;
  int kr = 0;  // the quads' KR (16 or 32); 0: conv_smallc_kernel
  size_t smem = 0;
  dim3 grid;
};

// Where the fused 16-bit forward runs problem a (nullptr; p then holds its launch), else why not.
const char* smallc_fwd_plan(const GemmArgs& a, FwdPlan& p) {
  const ConvOperands& c = a.conv;
  SmallC& g = p.g;
  if (const char* why = small_16bit(a, g)) return why;
  const cudaDeviceProp* dev = &device_properties();
  g.pairs = c.ys[1] == 1 && reinterpret_cast<uintptr_t>(c.y) % 4 == 0 && c.ys[0] % 2 == 0 && c.ys[2] % 2 == 0 &&
            c.ys[3] % 2 == 0;
  g.rows16 = c.ys[1] == 1 && reinterpret_cast<uintptr_t>(c.y) % 16 == 0 && c.ys[0] % 8 == 0 && c.ys[2] % 8 == 0 &&
             c.ys[3] % 8 == 0;
  SmallC q = g;
  const int kr = quad_why_not(c) == nullptr ? quad_geometry(c, q) : 0;
  const bool quad = kr > 0 && q.quad_smem() <= size_t(kMaxSmem);
  if (quad) g = q;
  p.kr = quad ? kr : 0;
  p.smem = quad ? g.quad_smem() : g.smem();
  if (p.smem > size_t(kMaxSmem)) return "shared memory over the limit";
  const int sms = dev->multiProcessorCount;
  const int64_t kblocks = (c.K + kNB - 1) / kNB;
  if (kblocks > 65535) return "K > 65535 * 64";
  // One wave of resident blocks, each walking a few rows: the weights are staged once per block,
  // and the rows split evenly.
  const int64_t want = std::max<int64_t>(1, kBlocksPerSm * sms / kblocks);
  g.per = (g.items + want - 1) / want;
  p.grid = dim3(unsigned((g.items + g.per - 1) / g.per), unsigned(kblocks));
  return nullptr;
}

}  // namespace

const char* smallc_fwd_why_not(const GemmArgs& a) {
  FwdPlan p;
  return smallc_fwd_plan(a, p);
}

void smallc_fwd_run(const GemmArgs& a) {
  const ConvOperands& c = a.conv;
  FwdPlan p;
  const char* why = smallc_fwd_plan(a, p);
  TORCH_INTERNAL_ASSERT(why == nullptr, "smallc_fwd_run: ", why);
  const SmallC& g = p.g;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, c10::Half>::value || std::is_same<T, c10::BFloat16>::value) {
      with_act(a.act, [&](auto act) {
        constexpr Act AC = decltype(act)::value;
        auto launch = [&](auto* kernel, std::atomic<uint64_t>& set_on) {
          // the limit at the most any problem takes, once per device (not a driver call per launch)
          allow_smem(kernel, size_t(kMaxSmem), set_on);
          kernel<<<p.grid, kThreads, p.smem, stream>>>(c, g, epilogue_of<T>(a));
        };
        const bool wg = !routing::portable_only();  // wgmma where built for sm_90a, unless as before Hopper
        if (p.kr == 0) launch(conv_smallc_kernel<T, AC>, smem_set_on<T, AC>);
        else if (p.kr == 16 && wg) launch(conv_smallc4_kernel<T, AC, 16, true>, smem_set_on<T, AC, 16, true>);
        else if (p.kr == 16) launch(conv_smallc4_kernel<T, AC, 16, false>, smem_set_on<T, AC, 16, false>);
        else if (wg) launch(conv_smallc4_kernel<T, AC, 32, true>, smem_set_on<T, AC, 32, true>);
        else launch(conv_smallc4_kernel<T, AC, 32, false>, smem_set_on<T, AC, 32, false>);
      });
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// conv_rows64_kernel where it applies: fp16/bf16 on an sm_90a build and GPU, C == 64, groups 1,
// unit strides and dilations, R S <= 9, x channels_last dense (16-byte pixels), y channel-contiguous
// in 16-byte vectors, the weight rows (a.mm.b, K x R S 64 in (r, s, c) order, row stride a.mm.sb[2])
// 16-byte aligned. One resident block per SM (up to ~180 KiB of shared memory) and output-channel
// block; false where it does not apply.
bool conv_fwd_rows64(const GemmArgs& a) {
#if defined(TILEOPS_HAVE_SM90A)
  const ConvOperands& c = a.conv;
  if ((a.dtype != c10::ScalarType::Half && a.dtype != c10::ScalarType::BFloat16) || c.groups != 1 || c.C != 64 || c.R * c.S > 9) return false;
  if (c.sh != 1 || c.sw != 1 || c.dh != 1 || c.dw != 1 || c.N * c.P * c.Q == 0 || c.K == 0) return false;
  const cudaDeviceProp* dev = &device_properties();
  if (routing::portable_only() || dev->major != 9 || dev->minor != 0) return false;
  if (!nhwc_dense(c.xs, c.C, c.H, c.W) || !nhwc_dense(c.ys, c.K, c.P, c.Q) ||
      reinterpret_cast<uintptr_t>(c.x) % 16 != 0 || reinterpret_cast<uintptr_t>(c.y) % 16 != 0 || c.K % 8 != 0 ||
      reinterpret_cast<uintptr_t>(a.mm.b) % 16 != 0 || a.mm.sb[2] % 8 != 0 ||
      reinterpret_cast<uintptr_t>(a.residual) % 16 != 0 || c.P * c.Q >= (int64_t(1) << 30))
    return false;
  Rows64 g{int(c.R), int(c.S), int(c.P), int(c.Q), int(c.W), int(c.H), int(c.ph), int(c.pw), int(c.K), 0, 0, 0, 0};
  g.slot = int((int64_t(c.Q + c.S - 1) * 128 + 1023) / 1024 * 1024);
  const int64_t kblocks = c.K / kNB + (c.K % kNB != 0);
  // one-tile items where two-tile ones would not give each SM one (batch 1: 25 items at 56 x 56)
  const int mt = c.N * ((c.P * c.Q + kQT - 1) / kQT) * kblocks < dev->multiProcessorCount ? 1 : 2;
  const int qt = kWarps * mt * 16;
  g.mr = int((qt - 1 + c.Q - 1) / c.Q + 1 + c.R - 1);
  g.per_image = int((c.P * c.Q + qt - 1) / qt);
  g.items = c.N * g.per_image;
  const size_t smem = g.smem();
  if (smem > dev->sharedMemPerBlockOptin) return false;
  if (c.Q + c.S - 1 > 256) return false;  // a TMA box side
  const uint64_t dims[4] = {uint64_t(c.C), uint64_t(c.W), uint64_t(c.H), uint64_t(c.N)};
  const uint64_t strides[3] = {uint64_t(c.xs[3]) * 2, uint64_t(c.xs[2]) * 2, uint64_t(c.xs[0]) * 2};
  const uint32_t box[4] = {64, uint32_t(c.Q + c.S - 1), 1, 1};
  const CUtensorMap xmap = hopper::tiled_map(c.x, a.dtype, 4, dims, strides, box);
  SmallC sg{};
  sg.Q = int(c.P * c.Q), sg.K = int(c.K), sg.pairs = true, sg.rows16 = true;
  const dim3 grid(unsigned(std::min<int64_t>(g.items, std::max<int64_t>(1, dev->multiProcessorCount / kblocks))),
                  unsigned(kblocks));
  with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, c10::Half>::value || std::is_same<T, c10::BFloat16>::value) {
      using Kernel = decltype(&conv_rows64_kernel<T, Act::None, 2>);
      Kernel kernel = nullptr;
      with_act(a.act, [&](auto act) {
        auto pick = [&](auto m) {
          constexpr Act AC = decltype(act)::value;
          constexpr int MT = decltype(m)::value;
          kernel = conv_rows64_kernel<T, AC, MT>;
          allow_smem(kernel, dev->sharedMemPerBlockOptin, rows64_set_on<T, AC, MT>);
        };
        if (mt == 1) pick(std::integral_constant<int, 1>{});
        else pick(std::integral_constant<int, 2>{});
      });
      DependentLaunch launch(grid, dim3(2 * kThreads), smem);  // after a data gradient's transposition
      launch(kernel, xmap, c, g, sg, epilogue_of<T>(a), static_cast<const T*>(a.mm.b), a.mm.sb[2]);
    }
  });
  return true;
#else
  (void)a;
  return false;
#endif
}

}  // namespace tileops::cuda
