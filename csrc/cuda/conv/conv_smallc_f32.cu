// Forward conv2d for few input channels in fp32 with TF32 off (R*S*C <= 256, any strides of x, w
// and y): a direct SIMT kernel, with no column buffer (namespace f32 below). The 16-bit forward of
// such problems, on tensor cores: conv_smallc_fwd.cu. docs/kernels/conv-smallc.md.

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "common/epilogue.h"
#include "cuda/runtime/launch_util.h"
#include "cuda/routing/candidates.h"
#include "cuda/ptx/mma_sync.cuh"  // cp_async_commit, cp_async_wait

namespace tileops::cuda {
namespace {

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

// What the checks computed: the tile geometry, the pixels a thread (8, or 4 where the blocks are
// still too few), the block's threads and the grid.
struct F32Plan {
  f32::Tile g;
  int px = 8;
  int threads = 0;
  dim3 grid;
};

// The fp32 kernel above: fp32 with TF32 off, groups 1, R*S*C <= 256, any strides. The forward table
// tries it after the implicit SIMT GEMM, which takes NCHW inputs of more channels. nullptr where it
// applies (p then holds its launch), else why not.
const char* smallc_f32_plan(const GemmArgs& a, F32Plan& p) {
  const ConvOperands& c = a.conv;
  if (a.dtype != c10::ScalarType::Float) return "not fp32";
  if (a.allow_tf32) return "TF32 allowed";
  if (c.groups != 1) return "groups != 1";
  if (c.N * c.P * c.Q == 0 || c.K == 0) return "an empty output or K == 0";
  if (c.R * c.S * c.C > f32::kMaxTaps) return "R*S*C > 256";
  // offsets within an image of x, within w's filter, and along every side are ints
  const int64_t big = int64_t(1) << 30;
  if ((c.C - 1) * c.xs[1] + (c.H - 1) * c.xs[2] + (c.W - 1) * c.xs[3] >= 2 * big ||
      (c.C - 1) * c.ws[1] + (c.R - 1) * c.ws[2] + (c.S - 1) * c.ws[3] >= 2 * big ||
      std::max({c.H + c.ph, c.W + c.pw, c.sh * c.P, c.sw * c.Q, c.K}) >= big)
    return "an offset past int range";
  f32::Tile& g = p.g;
  g.C = int(c.C), g.H = int(c.H), g.W = int(c.W), g.K = int(c.K), g.R = int(c.R), g.S = int(c.S);
  g.P = int(c.P), g.Q = int(c.Q), g.sh = int(c.sh), g.sw = int(c.sw), g.ph = int(c.ph), g.pw = int(c.pw);
  g.dh = int(c.dh), g.dw = int(c.dw);
  g.vec = c.ys[3] == 1 && c.ys[0] % 4 == 0 && c.ys[1] % 4 == 0 && c.ys[2] % 4 == 0 &&
          reinterpret_cast<uintptr_t>(c.y) % 16 == 0;
  g.tiles_q = int((c.Q + f32::kTQ - 1) / f32::kTQ);
  g.IW = int((f32::kTQ - 1) * c.sw + (c.S - 1) * c.dw + 1);
  g.L = (g.IW + g.sw - 1) / g.sw;
  g.L = (g.L + 3) / 4 * 4;  // phases 16-byte aligned (row_taps)
  const int sms = sm_count();
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
  if (g.smem() > size_t(f32::kMaxSmem)) return "shared memory over the limit";
  if (kblocks > 65535) return "K > 65535 * 64";
  if (tiles >= 2 * big) return "an image's tiles past int range";
  g.tiles_pq = int(tiles);
  g.tiles = c.N * tiles;
  // Still too few blocks (batch 1): 4 pixels a thread, half the serial math each
  p.px = g.tiles * kblocks < 2 * sms ? 4 : 8;
  // Resident blocks a SM: two at 256 threads by the launch bounds' 128 registers, more for smaller
  // tiles, as shared memory allows (228 KiB a SM, 1 KiB of it reserved per block).
  p.threads = g.TP * (f32::kTQ / p.px) * 8;
  const int per_sm = std::max<int>(1, std::min<int64_t>(65536 / (128 * p.threads), 228 * 1024 / (g.smem() + 1024)));
  p.grid = dim3(unsigned(std::min<int64_t>(g.tiles, std::max<int64_t>(1, per_sm * sms / kblocks))), unsigned(kblocks));
  return nullptr;
}

}  // namespace

const char* smallc_f32_why_not(const GemmArgs& a) {
  F32Plan p;
  return smallc_f32_plan(a, p);
}

void smallc_f32_run(const GemmArgs& a) {
  const ConvOperands& c = a.conv;
  F32Plan p;
  const char* why = smallc_f32_plan(a, p);
  TORCH_INTERNAL_ASSERT(why == nullptr, "smallc_f32_run: ", why);
  const f32::Tile& g = p.g;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const bool stem = c.S == 7 && c.sw == 2 && c.dw == 1;
  auto launch = [&](auto* kernel, std::atomic<uint64_t>& set_on) {
    allow_smem(kernel, size_t(f32::kMaxSmem), set_on);
    kernel<<<p.grid, p.threads, g.smem(), stream>>>(c, g, epilogue_of<float>(a));
  };
  with_act(a.act, [&](auto act) {
    constexpr Act AC = decltype(act)::value;
    namespace k = f32;
    if (stem && p.px == 8) launch(k::conv_smallc_f32_kernel<AC, 7, 2, 8>, k::smem_set_on<AC, 7, 8>);
    else if (stem) launch(k::conv_smallc_f32_kernel<AC, 7, 2, 4>, k::smem_set_on<AC, 7, 4>);
    else if (p.px == 8) launch(k::conv_smallc_f32_kernel<AC, 0, 0, 8>, k::smem_set_on<AC, 0, 8>);
    else launch(k::conv_smallc_f32_kernel<AC, 0, 0, 4>, k::smem_set_on<AC, 0, 4>);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace tileops::cuda
