// Forward conv2d for few input channels (C not a multiple of 8, R*S*C <= 256; the ResNet stem's
// 7x7/2 3->64): one implicit-GEMM kernel on mma.sync, with no column buffer. Such a C gives neither
// TMA boxes nor 16-byte gathers, so the general path writes im2col columns to memory and reads them
// back (docs/kernels/conv-smallc.md). Here a block stages the input rows that an output row reads
// in shared memory (a ring: the next output row stages only its new rows), where each tap row's
// (s, c) columns are contiguous, and builds the A fragments straight from them: column
// k = (r, s, c) of output pixel q sits at staged element q * sw * C + koff[k]. Where C <= 4 at an
// even stride, the "quads" kernel pads staged pixels to 4 channels instead, for ldmatrix and
// (sm_90a) wgmma, and its weight gradient reads the same rows. Each step's measurements:
// docs/kernels/conv-smallc.md#measured-step-by-step. The same problem in fp32 (TF32 off) has a
// direct SIMT kernel of its own below (namespace f32).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <atomic>
#include <cstdint>

#include "common/epilogue.h"
#include "cuda/runtime/cuda_util.h"
#include "cuda/runtime/griddep.cuh"
#include "cuda/routing/entry.h"
#include "cuda/sm90/primitives.cuh"  // sm90::make_desc, tma_load_4d, wgmma_m64n64_rs
#include "cuda/sm90/host.cuh"  // hopper::tiled_map
#include "cuda/ptx/mma_sync.cuh"

namespace tileops::cuda {
namespace {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kMT = 2;                     // m16 tiles per warp: 32 output pixels
constexpr int kQT = kWarps * kMT * 16;     // output pixels of a row per block pass
constexpr int kNB = 64;                    // output channels per block (8 n8 tiles)
constexpr int kMaxK = 256;                 // R*S*C, rounded up to 16
constexpr int kMaxSmem = 96 * 1024;
constexpr int kStage = 12;  // staging loads a thread issues before it stores them
constexpr int kBlocksPerSm = 3;  // resident blocks at the 168 registers a thread this allows
// C tile rows (a pixel's kNB channels) 8 halves longer, so that the 4-byte stores of a warp's 8 rows
// x 4 channel pairs fall on 32 distinct banks
constexpr int kLdc = kNB + 8;

// The launch geometry: Kp = R*S*C rounded up to 16; B rows of ldb elements (Kp + 8: the ldmatrix
// rows of a phase fall on distinct banks); staged rows of `row_len` elements: the input pixels a
// chunk of kQT output pixels reads, times C.
struct SmallC {
  int C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw;
  int Kp, ldb, row_len, qchunks, RR;  // RR: rows of the ring, (R - 1) * dh + 1
  int64_t items;  // N * P * qchunks: (image, output row, chunk of kQT pixels)
  int64_t per;    // consecutive items per block
  bool pairs;     // two channels per 4-byte store (y channel-contiguous, 4-byte aligned)
  bool rows16;    // y's kNB channels of a pixel in 16-byte aligned vectors: the C tile through shared memory
  // B, bias, three column tables, the ring and kQT pixels' worth of zeros, then the C tile
  // (16-byte aligned)
  __host__ __device__ size_t c_tile() const {
    return (size_t(kNB) * ldb * 2 + kNB * 4 + size_t(Kp) * 12 + (size_t(RR) * row_len + size_t(kQT) * sw * C) * 2 + 15) /
           16 * 16;
  }
  size_t smem() const { return c_tile() + size_t(kWarps) * 16 * kLdc * 2; }
  // conv_smallc4_kernel: rowp staged pixels a ring row (4 channels each), raw rows of raw_len
  // elements; B, bias, the ring, the raw rows, then the C tile
  int rowp = 0, raw_len = 0;
  __host__ __device__ size_t quad_ring() const { return size_t(kNB) * ldb * 2 + kNB * 4; }
  __host__ __device__ size_t quad_raw() const { return quad_ring() + size_t(RR) * rowp * 8; }
  __host__ __device__ size_t quad_ctile() const { return quad_raw() + size_t(RR) * raw_len * 2; }
  size_t quad_smem() const { return quad_ctile() + size_t(kWarps) * 16 * kLdc * 2 + 1024; }  // + B's alignment
};

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

// The ring slot of input row h (h may be negative: padding rows are staged as zeros too).
__device__ __forceinline__ int ring_slot(int h, int RR) { return ((h % RR) + RR) % RR; }

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

// The quads' items (n, p, qc) in order, and the input rows an item stages into the ring:
// [lo, hb + RR), lo past the rows the block's previous item left there (same image and chunk: only
// qchunks == 1 keeps the columns).
struct QuadItem {
  int64_t n;
  int p, qc, hb, lo;
};
// x's rows for a block of NT threads: fetch (cp.async into raw; the caller commits) and spread (raw
// -> ring once they landed: pixel j of a new row as 4 channels, zeros past C and outside x).
template <int NT>
struct QuadRows {
  const ConvOperands& c;
  const SmallC& g;
  uint16_t* raw;   // [RR][raw_len] rows as in x
  uint16_t* ring;  // [RR][4 rowp] input rows, quads
  uint32_t mlo, mhi;  // the pixel's C channels of its two words

  __device__ QuadRows(const ConvOperands& c_, const SmallC& g_, uint16_t* raw_, uint16_t* ring_)
      : c(c_), g(g_), raw(raw_), ring(ring_) {
    mlo = g.C > 1 ? 0xffffffffu : 0xffffu, mhi = g.C > 3 ? 0xffffffffu : g.C > 2 ? 0xffffu : 0u;
  }
  __device__ QuadItem at(int64_t i) const {
    QuadItem it;
    it.qc = int(i % g.qchunks), it.p = int((i / g.qchunks) % g.P), it.n = i / g.qchunks / g.P;
    it.hb = it.p * g.sh - g.ph, it.lo = it.hb;
    return it;
  }
  __device__ QuadItem next(const QuadItem& it) const {
    QuadItem nx = it;
    if (++nx.qc == g.qchunks) {
      nx.qc = 0;
      if (++nx.p == g.P) nx.p = 0, ++nx.n;
    }
    nx.hb = nx.p * g.sh - g.ph;
    const bool keep = g.qchunks == 1 && nx.n == it.n && nx.hb > it.hb;
    nx.lo = keep ? max(nx.hb, it.hb + g.RR) : nx.hb;
    return nx;
  }
  // x's elements [e0, e0 + 8 chunks) of each of the item's new rows in bounds, into raw row h - lo
  __device__ int2 raw_span(const QuadItem& it) const {
    const int64_t w_lo = int64_t(it.qc) * kQT * g.sw - g.pw;
    const int64_t lo = max(w_lo * g.C, int64_t(0)) / 8 * 8;
    const int64_t hi = (min((w_lo + g.rowp) * g.C, int64_t(g.W) * g.C) + 7) / 8 * 8;
    return make_int2(int(lo), int(max(hi - lo, int64_t(0)) / 8));
  }
  __device__ void fetch(const QuadItem& it) const {
    const int2 span = raw_span(it);
    const int e0 = span.x, chunks = span.y, rows = it.hb + g.RR - it.lo;
    const uint16_t* xn = static_cast<const uint16_t*>(c.x) + it.n * c.xs[0] + e0;
    for (int r = 0; r < rows; ++r) {
      const int h = it.lo + r;
      if (h >= 0 && h < g.H)
        for (int j = threadIdx.x; j < chunks; j += NT)
          cp_async16(smem_u32(raw + r * g.raw_len + 8 * j), xn + int64_t(h) * c.xs[2] + 8 * j);
    }
  }
  // (a pixel's C elements lie in 3 consecutive 4-byte words of raw: funnel shifts and masks, no
  // branches; the words past its C are the next pixel's or stale, masked either way)
  __device__ void spread(const QuadItem& it) const {
    const int e0 = raw_span(it).x, w_lo = it.qc * kQT * g.sw - g.pw;
    for (int h = it.lo, slot = ring_slot(h, g.RR); h < it.hb + g.RR; ++h, slot = slot + 1 == g.RR ? 0 : slot + 1) {
      const bool in_h = h >= 0 && h < g.H;
      const uint32_t* src = reinterpret_cast<const uint32_t*>(raw + (h - it.lo) * g.raw_len);
      uint2* dst = reinterpret_cast<uint2*>(ring + slot * 4 * g.rowp);
      for (int j = threadIdx.x; j < g.rowp; j += NT) {
        const int wc = w_lo + j;
        const bool in = in_h && wc >= 0 && wc < g.W;
        const int a = in ? wc * g.C - e0 : 0;  // the pixel's first element in the raw row
        const uint32_t* p = src + (a >> 1);
        const uint32_t w0 = p[0], w1 = p[1], w2 = p[2];
        const uint32_t lo = __funnelshift_r(w0, w1, 16 * (a & 1)) & mlo, hi = __funnelshift_r(w1, w2, 16 * (a & 1)) & mhi;
        dst[j] = in ? make_uint2(lo, hi) : make_uint2(0u, 0u);
      }
    }
  }
};

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
template <typename T, Act A, int KR>
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
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // B's stores, before wgmma reads them
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
#else
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
#endif
    store_item<T, A>(acc, c, g, epi, ctile, cur.n, cur.p, cur.qc * kQT, k0c, rows16, threadIdx.x / 32);
  }
}

// The weight gradient of the quads' problems (16-bit, mma.sync): dW[k][col] = sum over output
// pixels of dY[pixel][k] . X[pixel][col], col = r KR + 4 s + ch: the forward's staged rows read
// transposed (ldmatrix .trans, pixels along the reduction), so no column buffer is written (the
// general path's im2col writes N P Q x Kp elements, half its time at the stem). A block of
// 8 warps walks items as the forward does, x's rows and the item's dY tile (kQT pixels x kNB
// channels, zeros past the row) arriving by cp.async during the previous item. Warp w owns column
// tiles w and w + 8 (R KR <= 256) x all kNB channels; each block writes its sums once, to its slice
// of a float workspace, which wgrad_reduce_kernel sums in block order (deterministic) into dW.
constexpr int kWgWarps = 8, kWgThreads = kWgWarps * 32;
constexpr int kLdy = kNB + 8;  // dY tile rows: the 8 rows an ldmatrix reads fall on distinct banks
template <typename T, int KR>
__global__ void __launch_bounds__(kWgThreads, 2) conv_wgrad_smallc4_kernel(ConvOperands c, SmallC g, float* part) {
  extern __shared__ __align__(16) unsigned char wg_smem[];
  uint16_t* ring = reinterpret_cast<uint16_t*>(wg_smem);  // [RR][4 rowp]
  uint16_t* raw = ring + g.RR * 4 * g.rowp;               // [RR][raw_len]
  uint16_t* dyt = raw + g.RR * g.raw_len;                 // [2][kQT][kLdy]
  const QuadRows<kWgThreads> rows(c, g, raw, ring);
  const uint16_t* dy = static_cast<const uint16_t*>(c.y);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, gid = lane / 4, tig = lane % 4;
  const int k0c = blockIdx.y * kNB, tiles = g.R * KR / 16;

  // the item's dY rows: kQT pixels x kNB channels in 16-byte chunks (K % 8 == 0), zeros past the
  // row's last pixel and past K
  auto fetch_dy = [&](const QuadItem& it, uint16_t* dst) {
    const int q0 = it.qc * kQT;
    const uint16_t* src = dy + it.n * c.ys[0] + int64_t(it.p) * c.ys[2] + k0c;
    for (int i = tid; i < kQT * kNB / 8; i += kWgThreads) {
      const int q = i / (kNB / 8), v = i % (kNB / 8);
      const bool in = q0 + q < g.Q && k0c + 8 * v < g.K;
      cp_async16(smem_u32(dst + q * kLdy + 8 * v), in ? src + int64_t(q0 + q) * c.ys[3] + 8 * v : dy, in ? 16 : 0);
    }
  };

  // A (.trans): matrix i = lane / 8 holds pixels + 8 (i / 2), columns + 8 (i % 2) of a 16 x 16 step;
  // B (.trans): pixels + 8 (i % 2), channels + 8 (i / 2)
  const int a_px = lane % 8 + 8 * (lane / 16), a_col = 8 * (lane / 8 % 2);
  const int b_px = lane % 8 + 8 * (lane / 8 % 2), b_ch = 8 * (lane / 16);
  float acc[2][8][4] = {};
  const int64_t first = int64_t(blockIdx.x) * g.per, last = min(first + g.per, g.items);
  QuadItem it = rows.at(first);
  int buf = 0;
  if (first < last) rows.fetch(it), fetch_dy(it, dyt);
  cp_async_commit();
  for (int64_t item = first; item < last; ++item) {
    cp_async_wait<0>();
    __syncthreads();  // this item's rows and dY tile landed; the previous item's reads are done
    rows.spread(it);
    __syncthreads();
    const QuadItem cur = it;
    const uint16_t* dcur = dyt + buf * kQT * kLdy;
    if (item + 1 < last) it = rows.next(cur), rows.fetch(it), fetch_dy(it, dyt + (buf ^ 1) * kQT * kLdy);
    cp_async_commit();
    buf ^= 1;

    const int nq = min(kQT, g.Q - cur.qc * kQT), hb_slot = ring_slot(cur.hb, g.RR);
    const uint16_t* arow[2];  // each column tile's ring row
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const int mt = min(warp + kWgWarps * t, tiles - 1), r = mt / (KR / 16);
      const int slot = hb_slot + r * g.dh;  // < 2 RR
      arow[t] = ring + (slot >= g.RR ? slot - g.RR : slot) * 4 * g.rowp + (mt % (KR / 16)) * 16 + a_col;
    }
    for (int j0 = 0; j0 < nq; j0 += 16) {
      uint32_t b[4][4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) ldmatrix_x4_trans(b[jj], dcur + (j0 + b_px) * kLdy + 16 * jj + b_ch);
      // pixels past the row read real x values (times zero dY: Inf * 0 is NaN), so A drops them
      const int p0 = j0 + 2 * tig, p1 = p0 + 8;
      const uint32_t m0 = (p0 < nq ? 0xffffu : 0u) | (p0 + 1 < nq ? 0xffff0000u : 0u);
      const uint32_t m1 = (p1 < nq ? 0xffffu : 0u) | (p1 + 1 < nq ? 0xffff0000u : 0u);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        if (warp + kWgWarps * t >= tiles) continue;
        uint32_t a[4];
        ldmatrix_x4_trans(a, arow[t] + 4 * g.sw * (j0 + a_px));
        a[0] &= m0, a[1] &= m0, a[2] &= m1, a[3] &= m1;
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          mma_sync<T>(acc[t][2 * jj], a, b[jj]);
          mma_sync<T>(acc[t][2 * jj + 1], a, b[jj] + 2);
        }
      }
    }
  }
  // this block's sums: part[blockIdx.x][k][col], every column of its channels written
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const int mt = warp + kWgWarps * t;
    if (mt >= tiles) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = k0c + 8 * j + 2 * tig + e % 2, col = mt * 16 + gid + 8 * (e / 2);
        if (k < g.K) part[(int64_t(blockIdx.x) * g.K + k) * g.Kp + col] = acc[t][j][e];
      }
  }
}

// dW[k, ch, r, s] = the blocks' sums of column r KR + 4 s + ch, in block order, cast to T.
template <typename T>
__global__ void wgrad_reduce_kernel(const float* part, int blocks, ConvOperands c, SmallC g, int KR) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(g.K) * g.C * g.R * g.S) return;
  const int s = int(i % g.S), r = int(i / g.S % g.R), ch = int(i / (g.S * g.R) % g.C);
  const int64_t k = i / (int64_t(g.S) * g.R * g.C);
  const float* src = part + k * g.Kp + r * KR + 4 * s + ch;
  float sum = 0.f;
#pragma unroll 8
  for (int b = 0; b < blocks; ++b) sum += src[int64_t(b) * g.K * g.Kp];
  static_cast<T*>(c.w)[k * c.ws[0] + ch * c.ws[1] + r * c.ws[2] + s * c.ws[3]] = static_cast<T>(sum);
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
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // cp.async wrote B, wgmma reads it
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
    wg_sync();  // every warp's ldmatrix reads of the rows are done: the next item's rows may land
    if (item + step < g.items) fetch(item + step);
    store_item<T, A>(acc, c, sg, epi, ctile, n, 0, m0, k0c, rows16, wwarp);
  }
#endif
}
template <typename T, Act AC, int MT>
std::atomic<uint64_t> rows64_set_on{0};

// Devices on which each kernel's dynamic shared-memory limit is set (allow_smem).
template <typename T, Act AC, int KR = 0>
std::atomic<uint64_t> smem_set_on{0};
template <typename T, int KR>
std::atomic<uint64_t> wg_smem_set_on{0};

// fp32 with TF32 off: no tensor cores to feed, and the implicit SIMT GEMM (gemm_conv_vec.cuh) pads
// C to chunks of 16 channels, so this problem went through im2col (a 513 MB column buffer at the
// b64 stem) and a SIMT GEMM
// (docs/kernels/conv-smallc.md#the-fp32-direct-kernel-conv_smallc_f32_kernel). Here a block
// computes tiles of TP x kTQ output pixels of one image and kNB output channels straight from
// shared memory, which holds the weight as rows [tap][channel] (staged once: blocks stay resident
// and walk tiles) and, in two buffers, the input pixels a tile reads, every channel (the next
// tile's staged by cp.async during this one's math). A thread holds PX consecutive pixels of a tile
// row times kKX channels: per tap, PX scalar and two 16-byte shared loads feed 8 PX FMAs (PX = 8; 4
// where even 4-row tiles leave SMs idle, so that twice the threads share a tile). Staged columns
// are split by phase (column mod sw), so a thread's pixels read consecutive words at any stride:
// pixel ql + i at tap s reads phase (s dw) mod sw, word ql + i + (s dw) / sw.
namespace f32 {
constexpr int kTQ = 16, kKX = 8, kNB = 64;  // a thread: PX (8 or 4) pixels x kKX channels
// Weight rows kNB + 4 apart: a thread's channels are two runs of 4, 32 apart, so each 16-byte load
// of a warp covers the 32 banks once; the 4 extra words spread the staging's stores along taps.
constexpr int kLDW = kNB + 4;
constexpr int kMaxThreads = 16 * 16, kMaxSmem = 100 * 1024;  // TP = 16 rows; two blocks a SM
constexpr int kMaxTaps = 256;                                 // R*S*C

struct Tile {
  int C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw;
  int TP, tiles_q, tiles_pq;  // output rows per tile; tiles across Q, per image
  int IH, IW, L;              // staged rows and columns per channel; words per phase: ceil(IW / sw), to 4
  int64_t tiles;              // N * tiles_pq
  bool vec;                   // y's pixels contiguous and 16-byte aligned in groups of 4: float4 stores
  __host__ __device__ int taps() const { return R * S * C; }
  __host__ __device__ int tile_len() const { return C * IH * sw * L; }
  // weight rows, two input buffers, then int tables: soff [S], woff [taps], cdst [IW]
  size_t smem() const { return 4 * (size_t(taps()) * kLDW + 2 * size_t(tile_len()) + S + taps() + IW); }
};

// 4 bytes global -> shared, asynchronously; zeros where !in (src is then not read).
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool in) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(uint32_t(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(in ? 4 : 0)
               : "memory");
}

// acc[i][j] += xv[i] * (the tap's weight of channel j: wp[j] for j < 4, wp[28 + j] after)
template <int PX>
__device__ __forceinline__ void tap_fma(float (&acc)[PX][kKX], const float* xv, const float* wp) {
  const float4 w0 = *reinterpret_cast<const float4*>(wp), w1 = *reinterpret_cast<const float4*>(wp + 32);
  const float wv[kKX] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
  for (int i = 0; i < PX; ++i)
#pragma unroll
    for (int j = 0; j < kKX; ++j) acc[i][j] = fmaf(xv[i], wv[j], acc[i][j]);
}

// The taps s = 0..S-1 of one staged row for a stride SW and dilation 1 known at compile time (the
// stem's 7 and 2): tap s reads words s / SW + [0, PX) of phase s % SW, so the taps of one phase
// share a window of PX + ceil(S / SW) - 1 words, loaded once as 16-byte vectors (row and L are
// multiples of 4 words). 21 words for the stem's 7 taps instead of 56.
template <int S, int SW, int PX>
__device__ __forceinline__ void row_taps(float (&acc)[PX][kKX], const float* row, int L, const float* wp) {
  constexpr int kWin = (PX + (S + SW - 1) / SW - 1 + 3) / 4 * 4;
#pragma unroll
  for (int ph = 0; ph < SW; ++ph) {
    float win[kWin];
#pragma unroll
    for (int v = 0; v < kWin; v += 4) {
      const float4 t = *reinterpret_cast<const float4*>(row + ph * L + v);
      win[v] = t.x, win[v + 1] = t.y, win[v + 2] = t.z, win[v + 3] = t.w;
    }
#pragma unroll
    for (int s = ph; s < S; s += SW) tap_fma<PX>(acc, win + s / SW, wp + s * kLDW);
  }
}

// y[n, k, p, q] = act(bias[k] + residual + sum_{ch,r,s} x[n, ch, p*sh - ph + r*dh, q*sw - pw + s*dw] * w[k, ch, r, s])
// S, SW > 0: the kernel size along w and the stride there, dilation 1 (row_taps); 0: any (g's).
// Block: channels [64 blockIdx.y, + 64), tiles t = blockIdx.x + i gridDim.x, t = (n, tile row,
// tile column); TP (kTQ / PX) 8 threads. Thread: pixel group pg = tid / 8 (tile row pg / (kTQ / PX),
// columns (pg % (kTQ / PX)) PX + [0, PX)), channels cg * 4 + [0, 4) and 32 + cg * 4 + [0, 4), cg = tid % 8.
template <Act A, int S, int SW, int PX>
__global__ void __launch_bounds__(kMaxThreads, 2) conv_smallc_f32_kernel(ConvOperands c, Tile g, Epilogue<float> epi) {
  extern __shared__ __align__(16) float f32_smem[];
  const int taps = g.taps(), lines = g.C * g.IH, line_len = g.sw * g.L;
  float* wts = f32_smem;                                         // [taps][kLDW]
  float* bufs = wts + taps * kLDW;                               // 2 x [C * IH lines][sw phases][L words]
  int* soff = reinterpret_cast<int*>(bufs + 2 * g.tile_len());   // tap column s: phase * L + word
  int* woff = soff + g.S;                                        // tap j = (ch, r, s): its offset in w
  int* cdst = woff + taps;                                       // staged column: its place in a line
  const float* x = static_cast<const float*>(c.x);
  const float* w = static_cast<const float*>(c.w);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  const int k0 = blockIdx.y * kNB;

  for (int s = tid; s < g.S; s += blockDim.x) soff[s] = s * g.dw % g.sw * g.L + s * g.dw / g.sw;
  for (int j = tid; j < taps; j += blockDim.x) {
    const int s = j % g.S, r = j / g.S % g.R, ch = j / (g.S * g.R);
    woff[j] = int(ch * c.ws[1] + r * c.ws[2] + s * c.ws[3]);
  }
  for (int j = tid; j < g.IW; j += blockDim.x) cdst[j] = j % g.sw * g.L + j / g.sw;
  __syncthreads();
  // the weight (zeros past K); a warp per channel, lanes along taps
  for (int i = warp; i < kNB; i += warps) {
    const bool in = k0 + i < g.K;
    const float* wi = w + (in ? int64_t(k0 + i) * c.ws[0] : 0);
    for (int j = lane; j < taps; j += 32) cp_async4(wts + j * kLDW + i, wi + woff[j], in);
  }
  // tile t's input pixels into buf (zeros outside x); a warp per line (channel, row), lanes along it
  auto stage = [&](int64_t t, float* buf) {
    const int64_t n = t / g.tiles_pq;
    const int tt = int(t % g.tiles_pq), p0 = tt / g.tiles_q * g.TP, q0 = tt % g.tiles_q * kTQ;
    for (int l = warp; l < lines; l += warps) {
      const int h = p0 * g.sh - g.ph + l % g.IH;
      const bool hin = h >= 0 && h < g.H;
      const float* xr = x + (hin ? n * c.xs[0] + (l / g.IH) * c.xs[1] + int64_t(h) * c.xs[2] : 0);
      for (int j = lane; j < g.IW; j += 32) {
        const int col = q0 * g.sw - g.pw + j;
        const bool in = hin && col >= 0 && col < g.W;
        cp_async4(buf + l * line_len + cdst[j], xr + (in ? int64_t(col) * c.xs[3] : 0), in);
      }
    }
  };

  const int cg = tid % 8, pg = tid / 8, pl = pg / (kTQ / PX), ql = pg % (kTQ / PX) * PX;
  int64_t t = blockIdx.x;
  if (t < g.tiles) stage(t, bufs);
  cp_async_commit();  // group: the weight and the first tile
  for (int b = 0; t < g.tiles; t += gridDim.x, b ^= 1) {
    if (t + gridDim.x < g.tiles) stage(t + gridDim.x, bufs + (b ^ 1) * g.tile_len());
    cp_async_commit();
    cp_async_wait<1>();  // all but the group just committed: this tile (and the weight) are in
    __syncthreads();
    const float* tile = bufs + b * g.tile_len();
    float acc[PX][kKX] = {};
    for (int cr = 0; cr < g.C * g.R; ++cr) {
      const int ch = cr / g.R, r = cr % g.R;
      const float* row = tile + (ch * g.IH + pl * g.sh + r * g.dh) * line_len + ql;
      const float* wp = wts + cr * g.S * kLDW + cg * 4;
      if constexpr (S > 0) {
        row_taps<S, SW, PX>(acc, row, g.L, wp);
      } else {
#pragma unroll 2
        for (int s = 0; s < g.S; ++s) {
          const float* in = row + soff[s];
          float xv[PX];
#pragma unroll
          for (int i = 0; i < PX; ++i) xv[i] = in[i];
          tap_fma<PX>(acc, xv, wp + s * kLDW);
        }
      }
    }

    const int64_t n = t / g.tiles_pq;
    const int tt = int(t % g.tiles_pq), p = tt / g.tiles_q * g.TP + pl, qb = tt % g.tiles_q * kTQ + ql;
    if (p < g.P) {
      float* yp = static_cast<float*>(c.y) + n * c.ys[0] + int64_t(p) * c.ys[2];
      const bool vec = g.vec && qb + PX <= g.Q;
#pragma unroll
      for (int j = 0; j < kKX; ++j) {
        const int k = k0 + j / 4 * 32 + cg * 4 + j % 4;
        if (k >= g.K) continue;
        const float bias = epi.bias != nullptr ? epi.bias[k] : 0.f;
        float* yk = yp + int64_t(k) * c.ys[1];
        float o[PX];
#pragma unroll
        for (int i = 0; i < PX; ++i)
          o[i] = qb + i < g.Q ? epi.template finish<A>(acc[i][j] + bias, yk + int64_t(qb + i) * c.ys[3]) : 0.f;
        if (vec) {
#pragma unroll
          for (int i = 0; i < PX; i += 4)
            *reinterpret_cast<float4*>(yk + qb + i) = make_float4(o[i], o[i + 1], o[i + 2], o[i + 3]);
        } else {
#pragma unroll
          for (int i = 0; i < PX; ++i)
            if (qb + i < g.Q) yk[int64_t(qb + i) * c.ys[3]] = o[i];
        }
      }
    }
    __syncthreads();  // every thread is done with this buffer before the next iteration stages into it
  }
}

template <Act AC, int S, int PX>
std::atomic<uint64_t> smem_set_on{0};
}  // namespace f32

}  // namespace

// The geometry both 16-bit small-C kernels share (false: an offset would not fit its int).
bool small_geometry(const ConvOperands& c, SmallC& g) {
  g.C = int(c.C), g.H = int(c.H), g.W = int(c.W), g.K = int(c.K), g.R = int(c.R), g.S = int(c.S);
  g.P = int(c.P), g.Q = int(c.Q), g.sh = int(c.sh), g.sw = int(c.sw), g.ph = int(c.ph), g.pw = int(c.pw);
  g.dh = int(c.dh), g.dw = int(c.dw);
  // every staged offset and every in-row index is an int; rows themselves are addressed in 64 bits
  const int64_t span = (std::min<int64_t>(kQT, c.Q) - 1) * c.sw + (c.S - 1) * c.dw + 1;
  if (c.W * c.C >= (int64_t(1) << 30) || span * c.C >= (int64_t(1) << 24) || c.H + c.ph >= (int64_t(1) << 30) ||
      c.sh * c.P >= (int64_t(1) << 30) || c.sw * c.Q >= (int64_t(1) << 30) || c.K >= (int64_t(1) << 30) ||
      (c.C - 1) * c.ws[1] + (c.R - 1) * c.ws[2] + (c.S - 1) * c.ws[3] >= (int64_t(1) << 31))
    return false;
  g.Kp = int((c.R * c.S * c.C + 15) / 16 * 16);
  g.ldb = g.Kp + 8;
  g.row_len = int(span * c.C);
  g.qchunks = int((c.Q + kQT - 1) / kQT);
  g.items = c.N * c.P * g.qchunks;
  g.RR = int((c.R - 1) * c.dh + 1);
  return true;
}

// Quads where C <= 4, w's stride even, its dilation 1, S <= 8, and x's rows 16-byte aligned and
// whole 16-byte chunks (cp.async reads no element past a row's end): g becomes their geometry,
// columns r KR + 4 s + ch with KR = 16 or 32 (returned; 0: not quads).
int quad_geometry(const ConvOperands& c, SmallC& g) {
  if (c.C > 4 || c.sw % 2 != 0 || c.dw != 1 || c.S > 8 || c.xs[0] % 8 != 0 || c.xs[2] % 8 != 0 ||
      c.W * c.C % 8 != 0 || reinterpret_cast<uintptr_t>(c.x) % 16 != 0)
    return 0;
  const int kr = c.S <= 4 ? 16 : 32;
  g.Kp = int(c.R) * kr;
  g.ldb = (g.Kp + 63) / 64 * 64;  // the forward's B in atoms of 64 k (quad_b)
  g.rowp = int(((kQT - 1) * c.sw + kr / 4 + 1) / 2 * 2);  // the masked taps of the last pixel too
  g.raw_len = (g.rowp * g.C + 20 + 7) / 8 * 8;  // + the chunks' rounding at both ends, + spread's 3 words
  return kr;
}

// What both 16-bit small-C problems (forward and the quads' weight gradient) need: fp16/bf16,
// groups 1, C % 8 != 0, R*S*C <= kMaxK, each input row (w, c) contiguous, mma.sync bf16 (sm_80+),
// int offsets (small_geometry, which fills g).
bool small_16bit(const GemmArgs& a, SmallC& g) {
  const ConvOperands& c = a.conv;
  if ((a.dtype != at::kHalf && a.dtype != at::kBFloat16) || c.groups != 1 || c.C % 8 == 0) return false;
  if (c.R * c.S * c.C > kMaxK || c.N * c.P * c.Q == 0 || c.K == 0) return false;
  if (c.xs[1] != 1 || c.xs[3] != c.C) return false;
  if (at::cuda::getCurrentDeviceProperties()->major < 8) return false;
  return small_geometry(c, g);
}

bool conv_fwd_smallc(const GemmArgs& a) {
  const ConvOperands& c = a.conv;
  SmallC g;
  if (!small_16bit(a, g)) return false;
  const cudaDeviceProp* dev = at::cuda::getCurrentDeviceProperties();
  g.pairs = c.ys[1] == 1 && reinterpret_cast<uintptr_t>(c.y) % 4 == 0 && c.ys[0] % 2 == 0 && c.ys[2] % 2 == 0 &&
            c.ys[3] % 2 == 0;
  g.rows16 = c.ys[1] == 1 && reinterpret_cast<uintptr_t>(c.y) % 16 == 0 && c.ys[0] % 8 == 0 && c.ys[2] % 8 == 0 &&
             c.ys[3] % 8 == 0;
  SmallC q = g;
  const int kr = quad_geometry(c, q);
  const bool quad = kr > 0 && q.quad_smem() <= size_t(kMaxSmem);
  if (quad) g = q;
  const size_t smem = quad ? g.quad_smem() : g.smem();
  if (smem > size_t(kMaxSmem)) return false;
  const int sms = dev->multiProcessorCount;
  const int64_t kblocks = (c.K + kNB - 1) / kNB;
  if (kblocks > 65535) return false;
  // One wave of resident blocks, each walking a few rows: the weights are staged once per block,
  // and the rows split evenly.
  const int64_t want = std::max<int64_t>(1, kBlocksPerSm * sms / kblocks);
  g.per = (g.items + want - 1) / want;
  const dim3 grid(unsigned((g.items + g.per - 1) / g.per), unsigned(kblocks));
  const auto stream = at::cuda::getCurrentCUDAStream();
  with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, c10::Half>::value || std::is_same<T, c10::BFloat16>::value) {
      with_act(a.act, [&](auto act) {
        constexpr Act AC = decltype(act)::value;
        auto launch = [&](auto* kernel, std::atomic<uint64_t>& set_on) {
          // the limit at the most any problem takes, once per device (not a driver call per launch)
          allow_smem(kernel, size_t(kMaxSmem), set_on);
          kernel<<<grid, kThreads, smem, stream>>>(c, g, epilogue_of<T>(a));
        };
        if (!quad) launch(conv_smallc_kernel<T, AC>, smem_set_on<T, AC>);
        else if (kr == 16) launch(conv_smallc4_kernel<T, AC, 16>, smem_set_on<T, AC, 16>);
        else launch(conv_smallc4_kernel<T, AC, 32>, smem_set_on<T, AC, 32>);
      });
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

// conv_rows64_kernel where it applies: fp16/bf16 on an sm_90a build and GPU, C == 64, groups 1,
// unit strides and dilations, R S <= 9, x channels_last dense (16-byte pixels), y channel-contiguous
// in 16-byte vectors, the weight rows (a.mm.b, K x R S 64 in (r, s, c) order, row stride a.mm.sb[2])
// 16-byte aligned. One resident block per SM (up to ~180 KiB of shared memory) and output-channel
// block; false where it does not apply.
bool conv_fwd_rows64(const GemmArgs& a) {
#if defined(TILEOPS_HAVE_SM90A)
  const ConvOperands& c = a.conv;
  if ((a.dtype != at::kHalf && a.dtype != at::kBFloat16) || c.groups != 1 || c.C != 64 || c.R * c.S > 9) return false;
  if (c.sh != 1 || c.sw != 1 || c.dh != 1 || c.dw != 1 || c.N * c.P * c.Q == 0 || c.K == 0) return false;
  const cudaDeviceProp* dev = at::cuda::getCurrentDeviceProperties();
  if (dev->major != 9 || dev->minor != 0) return false;
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

// The fp32 kernel above: fp32 with TF32 off, groups 1, R*S*C <= 256, any strides. conv_fwd_lowered
// tries it after the implicit SIMT GEMM, which takes NCHW inputs of more channels.
bool conv_fwd_smallc_f32(const GemmArgs& a) {
  const ConvOperands& c = a.conv;
  if (a.dtype != at::kFloat || a.allow_tf32 || c.groups != 1 || c.N * c.P * c.Q == 0 || c.K == 0) return false;
  if (c.R * c.S * c.C > f32::kMaxTaps) return false;
  // offsets within an image of x, within w's filter, and along every side are ints
  const int64_t big = int64_t(1) << 30;
  if ((c.C - 1) * c.xs[1] + (c.H - 1) * c.xs[2] + (c.W - 1) * c.xs[3] >= 2 * big ||
      (c.C - 1) * c.ws[1] + (c.R - 1) * c.ws[2] + (c.S - 1) * c.ws[3] >= 2 * big ||
      std::max({c.H + c.ph, c.W + c.pw, c.sh * c.P, c.sw * c.Q, c.K}) >= big)
    return false;
  f32::Tile g;
  g.C = int(c.C), g.H = int(c.H), g.W = int(c.W), g.K = int(c.K), g.R = int(c.R), g.S = int(c.S);
  g.P = int(c.P), g.Q = int(c.Q), g.sh = int(c.sh), g.sw = int(c.sw), g.ph = int(c.ph), g.pw = int(c.pw);
  g.dh = int(c.dh), g.dw = int(c.dw);
  g.vec = c.ys[3] == 1 && c.ys[0] % 4 == 0 && c.ys[1] % 4 == 0 && c.ys[2] % 4 == 0 &&
          reinterpret_cast<uintptr_t>(c.y) % 16 == 0;
  g.tiles_q = int((c.Q + f32::kTQ - 1) / f32::kTQ);
  g.IW = int((f32::kTQ - 1) * c.sw + (c.S - 1) * c.dw + 1);
  g.L = (g.IW + g.sw - 1) / g.sw;
  g.L = (g.L + 3) / 4 * 4;  // phases 16-byte aligned (row_taps)
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t kblocks = (c.K + f32::kNB - 1) / f32::kNB;
  // The tallest tile (16, 8 or 4 rows) that fits and still gives two blocks a SM.
  int64_t tiles = 0;  // per image
  auto shape = [&](int tp) {
    g.TP = tp;
    g.IH = int((tp - 1) * c.sh + (c.R - 1) * c.dh + 1);
    tiles = (c.P + tp - 1) / tp * g.tiles_q;
    return g.smem() > size_t(f32::kMaxSmem) || c.N * tiles * kblocks < 2 * sms;
  };
  for (int tp = 16; shape(tp) && tp > 4;) tp /= 2;
  if (g.smem() > size_t(f32::kMaxSmem) || kblocks > 65535 || tiles >= 2 * big) return false;
  g.tiles_pq = int(tiles);
  g.tiles = c.N * tiles;
  // Still too few blocks (batch 1): 4 pixels a thread, half the serial math each
  const int px = g.tiles * kblocks < 2 * sms ? 4 : 8;
  // Resident blocks a SM: two at 256 threads by the launch bounds' 128 registers, more for smaller
  // tiles, as shared memory allows (228 KiB a SM, 1 KiB of it reserved per block).
  const int threads = g.TP * (f32::kTQ / px) * 8;
  const int per_sm = std::max<int>(1, std::min<int64_t>(65536 / (128 * threads), 228 * 1024 / (g.smem() + 1024)));
  const dim3 grid(unsigned(std::min<int64_t>(g.tiles, std::max<int64_t>(1, per_sm * sms / kblocks))), unsigned(kblocks));
  const auto stream = at::cuda::getCurrentCUDAStream();
  const bool stem = c.S == 7 && c.sw == 2 && c.dw == 1;
  auto launch = [&](auto* kernel, std::atomic<uint64_t>& set_on) {
    allow_smem(kernel, size_t(f32::kMaxSmem), set_on);
    kernel<<<grid, threads, g.smem(), stream>>>(c, g, epilogue_of<float>(a));
  };
  with_act(a.act, [&](auto act) {
    constexpr Act AC = decltype(act)::value;
    namespace k = f32;
    if (stem && px == 8) launch(k::conv_smallc_f32_kernel<AC, 7, 2, 8>, k::smem_set_on<AC, 7, 8>);
    else if (stem) launch(k::conv_smallc_f32_kernel<AC, 7, 2, 4>, k::smem_set_on<AC, 7, 4>);
    else if (px == 8) launch(k::conv_smallc_f32_kernel<AC, 0, 0, 8>, k::smem_set_on<AC, 0, 8>);
    else launch(k::conv_smallc_f32_kernel<AC, 0, 0, 4>, k::smem_set_on<AC, 0, 4>);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}


// The quads' weight gradient (conv_wgrad_smallc4_kernel): fp16/bf16, groups 1, the forward's quad
// conditions on x (channels_last as conv_wgrad_lowered's gather_ready left it), dY channel-contiguous
// in 16-byte chunks (K % 8 == 0), R KR <= 256. conv_wgrad_lowered tries it before its im2col.
bool conv_wgrad_smallc(const GemmArgs& a) {
  const ConvOperands& c = a.conv;
  if (c.K % 8 != 0 || c.ys[1] != 1 || c.ys[0] % 8 != 0 || c.ys[2] % 8 != 0 || c.ys[3] % 8 != 0 ||
      reinterpret_cast<uintptr_t>(c.y) % 16 != 0)
    return false;
  SmallC g;
  if (!small_16bit(a, g)) return false;
  const cudaDeviceProp* dev = at::cuda::getCurrentDeviceProperties();
  const int kr = quad_geometry(c, g);
  if (kr == 0 || g.Kp > 16 * 2 * kWgWarps) return false;  // two column tiles a warp
  const size_t smem = (size_t(g.RR) * 4 * g.rowp + size_t(g.RR) * g.raw_len + 2 * size_t(kQT) * kLdy) * 2;
  if (smem > size_t(kMaxSmem)) return false;
  const int64_t kblocks = (c.K + kNB - 1) / kNB;
  if (kblocks > 65535) return false;
  const int64_t want = std::max<int64_t>(1, 2 * dev->multiProcessorCount / kblocks);  // 2 blocks a SM
  g.per = (g.items + want - 1) / want;
  const int blocks = int((g.items + g.per - 1) / g.per);
  const at::Tensor part = at::empty({int64_t(blocks) * c.K * g.Kp}, cuda_options(at::kFloat));
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t outs = c.K * c.C * c.R * c.S;
  with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, c10::Half>::value || std::is_same<T, c10::BFloat16>::value) {
      auto launch = [&](auto* kernel, std::atomic<uint64_t>& set_on) {
        allow_smem(kernel, size_t(kMaxSmem), set_on);
        kernel<<<dim3(unsigned(blocks), unsigned(kblocks)), kWgThreads, smem, stream>>>(c, g, part.data_ptr<float>());
      };
      if (kr == 16) launch(conv_wgrad_smallc4_kernel<T, 16>, wg_smem_set_on<T, 16>);
      else launch(conv_wgrad_smallc4_kernel<T, 32>, wg_smem_set_on<T, 32>);
      wgrad_reduce_kernel<T><<<blocks_for(outs, int64_t(1) << 30), 256, 0, stream>>>(part.const_data_ptr<float>(), blocks, c, g, kr);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

}  // namespace tileops::cuda
