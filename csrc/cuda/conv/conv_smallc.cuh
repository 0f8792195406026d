// What the 16-bit small-C kernels share: conv_smallc_fwd.cu's forward (the general kernel and the
// quads) and conv_smallc_wgrad.cu's weight gradient of the quads' problems. The block shape, the
// launch geometry (SmallC), the ring of input rows and the quads' staging of x's rows into it
// (QuadRows), and the host checks both problems make (small_16bit, quad_why_not, quad_geometry).
// docs/kernels/conv-smallc.md.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/gemm_args.h"
#include "cuda/runtime/launch_util.h"  // device_properties
#include "cuda/ptx/mma_sync.cuh"  // cp_async16, smem_u32

namespace tileops::cuda::smallc {

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kMT = 2;                     // m16 tiles per warp: 32 output pixels
constexpr int kQT = kWarps * kMT * 16;     // output pixels of a row per block pass
constexpr int kNB = 64;                    // output channels per block (8 n8 tiles)
constexpr int kMaxK = 256;                 // R*S*C, rounded up to 16
constexpr int kMaxSmem = 96 * 1024;
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

// The ring slot of input row h (h may be negative: padding rows are staged as zeros too).
__device__ __forceinline__ int ring_slot(int h, int RR) { return ((h % RR) + RR) % RR; }

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

// The geometry both 16-bit small-C kernels share (a reason: an offset would not fit its int).
inline const char* small_geometry(const ConvOperands& c, SmallC& g) {
  g.C = int(c.C), g.H = int(c.H), g.W = int(c.W), g.K = int(c.K), g.R = int(c.R), g.S = int(c.S);
  g.P = int(c.P), g.Q = int(c.Q), g.sh = int(c.sh), g.sw = int(c.sw), g.ph = int(c.ph), g.pw = int(c.pw);
  g.dh = int(c.dh), g.dw = int(c.dw);
  // every staged offset and every in-row index is an int; rows themselves are addressed in 64 bits
  const int64_t span = (std::min<int64_t>(kQT, c.Q) - 1) * c.sw + (c.S - 1) * c.dw + 1;
  if (c.W * c.C >= (int64_t(1) << 30) || span * c.C >= (int64_t(1) << 24) || c.H + c.ph >= (int64_t(1) << 30) ||
      c.sh * c.P >= (int64_t(1) << 30) || c.sw * c.Q >= (int64_t(1) << 30) || c.K >= (int64_t(1) << 30) ||
      (c.C - 1) * c.ws[1] + (c.R - 1) * c.ws[2] + (c.S - 1) * c.ws[3] >= (int64_t(1) << 31))
    return "an offset past int range";
  g.Kp = int((c.R * c.S * c.C + 15) / 16 * 16);
  g.ldb = g.Kp + 8;
  g.row_len = int(span * c.C);
  g.qchunks = int((c.Q + kQT - 1) / kQT);
  g.items = c.N * c.P * g.qchunks;
  g.RR = int((c.R - 1) * c.dh + 1);
  return nullptr;
}

// Quads where C <= 4, w's stride even, its dilation 1, S <= 8, and x's rows 16-byte aligned and
// whole 16-byte chunks (cp.async reads no element past a row's end): nullptr, else the first of
// these that fails.
inline const char* quad_why_not(const ConvOperands& c) {
  if (c.C > 4) return "C > 4";
  if (c.sw % 2 != 0) return "odd stride along w";
  if (c.dw != 1) return "dilation along w != 1";
  if (c.S > 8) return "S > 8";
  if (c.xs[0] % 8 != 0 || c.xs[2] % 8 != 0 || c.W * c.C % 8 != 0 || reinterpret_cast<uintptr_t>(c.x) % 16 != 0)
    return "x's rows not whole 16-byte aligned chunks";
  return nullptr;
}

// Where quad_why_not(c) == nullptr: g becomes the quads' geometry, columns r KR + 4 s + ch with
// KR = 16 or 32 (returned).
inline int quad_geometry(const ConvOperands& c, SmallC& g) {
  const int kr = c.S <= 4 ? 16 : 32;
  g.Kp = int(c.R) * kr;
  g.ldb = (g.Kp + 63) / 64 * 64;  // the forward's B in atoms of 64 k (quad_b)
  g.rowp = int(((kQT - 1) * c.sw + kr / 4 + 1) / 2 * 2);  // the masked taps of the last pixel too
  g.raw_len = (g.rowp * g.C + 20 + 7) / 8 * 8;  // + the chunks' rounding at both ends, + spread's 3 words
  return kr;
}

// What both 16-bit small-C problems (forward and the quads' weight gradient) need: fp16/bf16,
// groups 1, C % 8 != 0, R*S*C <= kMaxK, each input row (w, c) contiguous, mma.sync bf16 (sm_80+),
// int offsets (small_geometry, which fills g). nullptr, else the first that fails.
inline const char* small_16bit(const GemmArgs& a, SmallC& g) {
  const ConvOperands& c = a.conv;
  if (a.dtype != c10::ScalarType::Half && a.dtype != c10::ScalarType::BFloat16) return "not fp16 or bf16";
  if (c.groups != 1) return "groups != 1";
  if (c.C % 8 == 0) return "C % 8 == 0";
  if (c.R * c.S * c.C > kMaxK) return "R*S*C > 256";
  if (c.N * c.P * c.Q == 0 || c.K == 0) return "an empty output or K == 0";
  if (c.xs[1] != 1 || c.xs[3] != c.C) return "x's rows (w, c) not contiguous";
  if (device_properties().major < 8) return "compute capability below 8.0";
  return small_geometry(c, g);
}

}  // namespace tileops::cuda::smallc
