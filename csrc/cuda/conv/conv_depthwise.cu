// Depthwise conv2d (groups == C: each group reads one input channel and writes K/C outputs):
// direct kernels for forward, grad_input and grad_weight. As GEMMs each group is a sliver
// (NPQ x RS . RS x K/C) far too thin for tiles. Index math is 32-bit inside a row of the
// output (or input) and 64-bit only in pointer offsets.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <numeric>

#include "common/epilogue.h"
#include "autotune/cuda_timing.h"
#include "cuda/runtime/cuda_util.h"
#include "cuda/conv/dgrad_phases.h"
#include "cuda/routing/entry.h"
#include "cuda/ptx/mbarrier.cuh"

namespace tileops::cuda {
namespace {

// Threads walk a 4-D tensor (n, ch, i, j) in memory order: grid.y over "outer" rows, x over
// the row. Channels_last rows are (n, i) with (j, ch) inside; NCHW rows are (n, ch) with (i, j).
struct Walk {
  int CH, I, J;
  bool cl;
  TILEOPS_HD int64_t outer() const { return cl ? int64_t(I) : int64_t(CH); }  // per image
  TILEOPS_HD int inner() const { return cl ? J * CH : I * J; }
};
__device__ __forceinline__ void decode(const Walk& wk, int64_t row, int e, int64_t& n, int& ch, int& i, int& j) {
  if (wk.cl) {
    n = row / wk.I, i = int(row % wk.I), ch = e % wk.CH, j = e / wk.CH;
  } else {
    n = row / wk.CH, ch = int(row % wk.CH), i = e / wk.J, j = e % wk.J;
  }
}

dim3 walk_grid(const Walk& wk, int64_t N) {
  const int64_t rows = N * wk.outer();
  return dim3(unsigned((wk.inner() + 255) / 256), unsigned(std::min<int64_t>(rows, 65535)));
}

// y[n, k, p, q] = act(bias[k] + residual[n, k, p, q] + sum_rs x[n, k / mult, h(p, r), w(q, s)] * w[k, 0, r, s])
template <typename T, typename Acc, Act A>
__global__ void dw_fwd_kernel(ConvOperands c, Walk wk, Epilogue<T> epi) {
  const T* x = static_cast<const T*>(c.x);
  const T* wt = static_cast<const T*>(c.w);
  T* y = static_cast<T*>(c.y);
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= wk.inner()) return;
  for (int64_t row = blockIdx.y; row < c.N * wk.outer(); row += gridDim.y) {
    int64_t n;
    int k, p, q;
    decode(wk, row, e, n, k, p, q);
    const T* xc = x + n * c.xs[0] + (k / int(c.Kg)) * c.xs[1];
    const T* wk_ = wt + k * c.ws[0];
    Acc acc = 0;
    for (int r = 0; r < c.R; ++r) {
      const int h = p * int(c.sh) - int(c.ph) + r * int(c.dh);
      if (h < 0 || h >= c.H) continue;
      for (int s = 0; s < c.S; ++s) {
        const int w = q * int(c.sw) - int(c.pw) + s * int(c.dw);
        if (w < 0 || w >= c.W) continue;
        acc += static_cast<Acc>(xc[h * c.xs[2] + w * c.xs[3]]) * static_cast<Acc>(wk_[r * c.ws[2] + s * c.ws[3]]);
      }
    }
    epi.template store<A>(y + n * c.ys[0] + k * c.ys[1] + p * c.ys[2] + q * c.ys[3], acc, k);
  }
}

// dx[n, ch, h, w] = sum over outputs k of channel ch and taps (r, s) that read (h, w)
template <typename T, typename Acc>
__global__ void dw_dgrad_kernel(ConvOperands c, Walk wk) {
  T* dx = static_cast<T*>(c.x);
  const T* wt = static_cast<const T*>(c.w);
  const T* dy = static_cast<const T*>(c.y);
  const int e = blockIdx.x * blockDim.x + threadIdx.x, sh = int(c.sh), sw = int(c.sw);
  if (e >= wk.inner()) return;
  for (int64_t row = blockIdx.y; row < c.N * wk.outer(); row += gridDim.y) {
    int64_t n;
    int ch, h, w;
    decode(wk, row, e, n, ch, h, w);
    Acc acc = 0;
    for (int r = 0; r < c.R; ++r) {
      const int hp = h + int(c.ph) - r * int(c.dh);
      if (hp < 0 || hp % sh != 0 || hp / sh >= c.P) continue;
      for (int s = 0; s < c.S; ++s) {
        const int wq = w + int(c.pw) - s * int(c.dw);
        if (wq < 0 || wq % sw != 0 || wq / sw >= c.Q) continue;
        const T* src = dy + n * c.ys[0] + (hp / sh) * c.ys[2] + (wq / sw) * c.ys[3];
        for (int j = 0; j < c.Kg; ++j) {
          const int k = ch * int(c.Kg) + j;
          acc += static_cast<Acc>(src[k * c.ys[1]]) * static_cast<Acc>(wt[k * c.ws[0] + r * c.ws[2] + s * c.ws[3]]);
        }
      }
    }
    dx[n * c.xs[0] + ch * c.xs[1] + h * c.xs[2] + w * c.xs[3]] = static_cast<T>(acc);
  }
}

// Partial grad_weight of 32 output channels, one tap (blockIdx.z) and one slice of the output
// rows (n, p) (blockIdx.x); channels_last x and dy, so the 32 lanes read 32 neighbouring
// channels. 8 groups of lanes take every 8th q; they reduce through shared memory in a fixed order.
template <typename T, typename Acc>
__global__ void dw_wgrad_kernel(ConvOperands c, int64_t rows_per_split, Acc* partial) {
  const T* x = static_cast<const T*>(c.x);
  const T* dy = static_cast<const T*>(c.y);
  const int lane = threadIdx.x % 32, qg = threadIdx.x / 32;
  const int k = blockIdx.y * 32 + lane, r = blockIdx.z / c.S, s = blockIdx.z % c.S;
  const int64_t rows = c.N * c.P, begin = blockIdx.x * rows_per_split, end = min(rows, begin + rows_per_split);
  Acc acc = 0;
  if (k < c.K) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / c.P;
      const int p = int(row % c.P), h = p * int(c.sh) - int(c.ph) + r * int(c.dh);
      if (h < 0 || h >= c.H) continue;
      const T* dyr = dy + n * c.ys[0] + k * c.ys[1] + p * c.ys[2];
      const T* xr = x + n * c.xs[0] + (k / int(c.Kg)) * c.xs[1] + h * c.xs[2];
      for (int q = qg; q < c.Q; q += 8) {
        const int w = q * int(c.sw) - int(c.pw) + s * int(c.dw);
        if (w >= 0 && w < c.W) acc += static_cast<Acc>(dyr[q * c.ys[3]]) * static_cast<Acc>(xr[w * c.xs[3]]);
      }
    }
  }
  __shared__ Acc red[8][32];
  red[qg][lane] = acc;
  __syncthreads();
  if (qg == 0 && k < c.K) {
    for (int i = 1; i < 8; ++i) acc += red[i][lane];
    partial[(int64_t(blockIdx.x) * c.K + k) * c.R * c.S + blockIdx.z] = acc;
  }
}

// dw[k, 0, r, s] = the sum over splits of partial[split, k, r, s], cast to T and written through
// dw's strides (c.ws): one launch where a sum and a copy took two and an allocation. A warp per
// weight: lanes take every 32nd split, then a fixed shuffle tree (deterministic); a thread per
// weight walked ~180 splits one dependent load at a time (docs/kernels/depthwise.md#weight-gradient).
template <typename T, typename Acc>
__global__ void dw_wgrad_finish_kernel(const Acc* __restrict__ partial, int64_t splits, ConvOperands c) {
  const int64_t rs = c.R * c.S, krs = c.K * rs;
  const int lane = threadIdx.x % 32;
  for (int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; i < krs;
       i += int64_t(gridDim.x) * blockDim.x / 32) {
    Acc sum = 0;
    for (int64_t sp = lane; sp < splits; sp += 32) sum += partial[sp * krs + i];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const int64_t k = i / rs, t = i % rs;
    if (lane == 0) static_cast<T*>(c.w)[k * c.ws[0] + t / c.S * c.ws[2] + t % c.S * c.ws[3]] = static_cast<T>(sum);
  }
}

// A vector of V elements of T (8 or 16 bytes) as the integer vector a load or store moves.
// Pack<T, V> (cuda_util.h) is the same bytes, but the strip kernel built with it ran 3-8% more
// instructions (conversions moved through extra registers).
template <typename T, int V>
using VecOf = std::conditional_t<V * sizeof(T) == 16, uint4, uint2>;

// The vector epilogue of V channels whose bias is already in acc, at dst: + residual (one vector
// at the output's offset; vec_ok: aligned), activation, one vector store.
template <typename T, Act A, int V>
__device__ __forceinline__ void store_act(const Epilogue<T>& epi, T* dst, const float (&acc)[V]) {
  using Vec = VecOf<T, V>;
  float v[V];
#pragma unroll
  for (int e = 0; e < V; ++e) v[e] = acc[e];
  if (epi.residual != nullptr) {
    const Vec rv = *reinterpret_cast<const Vec*>(epi.residual + (dst - epi.out_base));
    const T* re = reinterpret_cast<const T*>(&rv);
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] += static_cast<float>(re[e]);
  }
  Vec out;
  T* oe = reinterpret_cast<T*>(&out);
#pragma unroll
  for (int e = 0; e < V; ++e) oe[e] = epi.template finish<A>(v[e]);
  *reinterpret_cast<Vec*>(dst) = out;
}
// The same from channel ch0 on, the bias (when given) added first.
template <typename T, Act A, int V>
__device__ __forceinline__ void store_vec(const Epilogue<T>& epi, T* dst, float (&acc)[V], int ch0) {
  if (epi.bias != nullptr) {
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] += static_cast<float>(epi.bias[ch0 + e]);
  }
  store_act<T, A, V>(epi, dst, acc);
}

// The V values of a vector of T as floats.
template <typename T, int V, typename Vec>
__device__ __forceinline__ void to_floats(const Vec& v, float (&f)[V]) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < V; ++i) f[i] = static_cast<float>(e[i]);
}

// A vector at p, or zeros where `in` is false. The kernels below issue all of a step's loads
// through this before converting any of them, so they are in flight together.
template <typename Vec, typename T>
__device__ __forceinline__ Vec load_vec(const T* p, bool in) {
  return in ? *reinterpret_cast<const Vec*>(p) : Vec{};
}

// A vector of 8 or 16 bytes from shared memory at (shared-window) address addr, or zeros where
// `in` is false. volatile: kept after the mbarrier wait that says the bytes have landed.
template <typename Vec>
__device__ __forceinline__ Vec lds_vec(uint32_t addr, bool in) {
  Vec v{};
  if (!in) return v;
  if constexpr (sizeof(Vec) == 8) {
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  } else {
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  }
  return v;
}

// Partial grad_weight of channels_last dense x and dy, one output per channel, a kernel KS
// columns wide: a thread holds the KS taps of kernel row blockIdx.z for V channels and walks the
// output pixels of its block's slice of rows (n, p), every G-th column, with 16-byte loads of dy
// and x. The block then sums its G column groups in a fixed order through shared memory
// (deterministic). It replaced dw_wgrad_kernel (a tap per block, a channel per lane), which was
// slower (docs/kernels/depthwise.md#weight-gradient).
template <typename T, int KS>
__global__ void __launch_bounds__(256) dw_wgrad_vec_kernel(ConvOperands c, int rows_per_split, float* partial) {
  constexpr int V = 16 / sizeof(T);
  __shared__ float red[256][V + 1];  // +1: the column reads below hit different banks
  const int C = int(c.C), H = int(c.H), W = int(c.W), P = int(c.P), Q = int(c.Q), CV = C / V, r = blockIdx.z;
  const int cvb = min(CV, 32), groups = blockDim.x / cvb;  // channel vectors per block, column groups
  const int cvl = threadIdx.x % cvb, g = threadIdx.x / cvb, cv = blockIdx.y * cvb + cvl;
  const bool active = g < groups && cv < CV;
  const T* x = static_cast<const T*>(c.x) + cv * V;
  const T* dy = static_cast<const T*>(c.y) + cv * V;
  float acc[KS][V] = {};
  const int begin = blockIdx.x * rows_per_split, end = min(int(c.N) * P, begin + rows_per_split);
  for (int row = begin; active && row < end; ++row) {
    const int n = row / P, p = row % P, h = p * int(c.sh) - int(c.ph) + r * int(c.dh);
    if (h < 0 || h >= H) continue;
    const T* xr = x + (int64_t(n) * H + h) * W * C;
    const T* dyr = dy + int64_t(row) * Q * C;
    for (int q = g; q < Q; q += groups) {
      const uint4 dv = load_vec<uint4>(dyr + q * C, true);
      uint4 xv[KS];
#pragma unroll
      for (int s = 0; s < KS; ++s) {
        const int w = q * int(c.sw) - int(c.pw) + s * int(c.dw);
        xv[s] = load_vec<uint4>(xr + w * C, w >= 0 && w < W);
      }
      float d[V];
      to_floats<T>(dv, d);
#pragma unroll
      for (int s = 0; s < KS; ++s) {
        float xf[V];
        to_floats<T>(xv[s], xf);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[s][e] += d[e] * xf[e];
      }
    }
  }
  for (int s = 0; s < KS; ++s) {
#pragma unroll
    for (int e = 0; e < V; ++e) red[threadIdx.x][e] = acc[s][e];
    __syncthreads();
    if (threadIdx.x < cvb * V && blockIdx.y * cvb + int(threadIdx.x) / V < CV) {
      const int l = threadIdx.x / V, e = threadIdx.x % V;
      float sum = 0.f;
      for (int i = 0; i < groups; ++i) sum += red[i * cvb + l][e];
      const int k = (blockIdx.y * cvb + l) * V + e;
      partial[((int64_t(blockIdx.x) * C + k) * c.R + r) * KS + s] = sum;
    }
    __syncthreads();
  }
}

// The block's copy of the weight laid out [R, KS, C] in (dynamic) shared memory, flipped along
// R and S where asked (the data gradient as a forward); R * KS * C elements.
template <typename T, int KS>
__device__ const T* stage_weight(const ConvOperands& c, bool flip) {
  extern __shared__ __align__(16) unsigned char dw_smem[];
  T* staged = reinterpret_cast<T*>(dw_smem);
  const T* w = static_cast<const T*>(c.w);
  const int C = int(c.C), R = int(c.R);
  for (int j = threadIdx.x; j < R * KS * C; j += blockDim.x) {
    const int ch = j % C, rs = j / C, r = rs / KS, s = rs % KS;
    staged[j] = w[ch * c.ws[0] + (flip ? R - 1 - r : r) * c.ws[2] + (flip ? KS - 1 - s : s) * c.ws[3]];
  }
  __syncthreads();
  return staged;
}

// The common case at its common sizes: channels_last, one output per channel, a kernel KS
// columns wide at column stride SW, no column dilation. Each thread computes kTQ neighbouring
// outputs of one row for V channels: per kernel row it loads and converts each of the
// (kTQ - 1) * SW + KS input columns those outputs read once, and the row's weights once, and adds
// each column into every output that reads it, where dw_fwd_vec_kernel (one output per thread)
// loaded and converted every column KS times and the weights per output
// (docs/kernels/depthwise.md#the-tile-kernels). w_rsc: the weight laid out [R, S, C], or null:
// the block stages it from c.w (flipped along R and S where `flip`).
// Blocks of 128 threads: at ~100 registers a thread, 256-thread blocks left 16 warps per SM, 128
// leave 20.
constexpr int kTQ = 4, kTileThreads = 128;
constexpr int kStripV = 4;  // channels a thread of the strip and row-ring kernels
template <typename T, int KS, int SW>
__global__ void __launch_bounds__(kTileThreads)
    dw_fwd_tile_kernel(ConvOperands c, const T* __restrict__ w_rsc, bool flip, Epilogue<T> epi) {
  constexpr int V = 16 / sizeof(T), NW = (kTQ - 1) * SW + KS;
  const int C = int(c.C), H = int(c.H), W = int(c.W), P = int(c.P), Q = int(c.Q), CV = C / V, R = int(c.R);
  if (w_rsc == nullptr) w_rsc = stage_weight<T, KS>(c, flip);
  const int tiles = (Q + kTQ - 1) / kTQ, i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= int(c.N) * P * tiles * CV) return;  // the caller keeps this below 2^31
  const int cv = i % CV, t = i / CV, q0 = t % tiles * kTQ, np = t / tiles, p = np % P;
  const T* xn = static_cast<const T*>(c.x) + int64_t(np / P) * H * W * C + cv * V;
  const int w0 = q0 * SW - int(c.pw);
  float acc[kTQ][V] = {};
  for (int r = 0; r < R; ++r) {
    const int h = p * int(c.sh) - int(c.ph) + r * int(c.dh);
    if (h < 0 || h >= H) continue;
    const T* xr = xn + int64_t(h) * W * C;
    uint4 wv[KS], xv[NW];
#pragma unroll
    for (int s = 0; s < KS; ++s) wv[s] = load_vec<uint4>(w_rsc + (r * KS + s) * C + cv * V, true);
#pragma unroll
    for (int j = 0; j < NW; ++j) xv[j] = load_vec<uint4>(xr + (w0 + j) * C, w0 + j >= 0 && w0 + j < W);
    float wf[KS][V];
#pragma unroll
    for (int s = 0; s < KS; ++s) to_floats<T>(wv[s], wf[s]);
#pragma unroll
    for (int j = 0; j < NW; ++j) {
      float xf[V];
      to_floats<T>(xv[j], xf);
#pragma unroll
      for (int o = 0; o < kTQ; ++o) {
        const int s = j - o * SW;  // the tap of output o that reads column j, if any
        if (s >= 0 && s < KS) {
#pragma unroll
          for (int e = 0; e < V; ++e) acc[o][e] += xf[e] * wf[s][e];
        }
      }
    }
  }
  T* y = static_cast<T*>(c.y) + (int64_t(np) * Q + q0) * C + cv * V;
  with_act(epi.act, [&](auto act) {  // once per thread, so not a template parameter (fewer kernels)
#pragma unroll
    for (int o = 0; o < kTQ; ++o)
      if (q0 + o < Q) store_vec<T, decltype(act)::value>(epi, y + o * C, acc[o], cv * V);
  });
}

// A thread's KS x KS taps of channels ch0.. (V of them) as floats, read from c.w itself (flipped
// along R and S where asked: the data gradient as a forward).
template <typename T, int KS, int V>
__device__ __forceinline__ void thread_weights(const ConvOperands& c, int ch0, bool flip, float (&wf)[KS][KS][V]) {
  const T* w = static_cast<const T*>(c.w) + int64_t(ch0) * c.ws[0];
#pragma unroll
  for (int r = 0; r < KS; ++r)
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int e = 0; e < V; ++e)
        wf[r][s][e] = static_cast<float>(w[e * c.ws[0] + (flip ? KS - 1 - r : r) * c.ws[2] + (flip ? KS - 1 - s : s) * c.ws[3]]);
}

// 3x3 (KS x KS) at unit stride and dilation, channels_last, one output per channel: each thread
// computes TP x kTQ outputs (rows p0.., columns q0..) for V = 4 channels, walking the TP + KS - 1
// input rows they read top to bottom, each row loaded once (its loads issued while the row above
// is summed) and added into every output row that reads it: 1.5 x (TP + 2) / TP loads of x per
// output where dw_fwd_tile_kernel makes 4.5 (its rows are re-read for each output row), and the
// weight read into registers once per thread. The loop is unrolled whole, so an output row's
// accumulators live only for the KS input rows that feed it. Strips of one row (small batches,
// latency-bound: a thread's chain of loads is the kernel's time) load all their rows at once; a
// thread's first rows are asked for before its weights, which it reads from c.w itself (staging
// them in shared memory put a load, a store and a barrier before the first x load).
template <typename T, int KS, int TP, Act A>
__global__ void __launch_bounds__(kTileThreads) dw_fwd_strip_kernel(ConvOperands c, bool flip, Epilogue<T> epi) {
  constexpr int V = 4, NW = kTQ + KS - 1, NR = TP + KS - 1;
  constexpr int D = TP == 1 ? NR : 2;  // input rows in flight
  using Vec = VecOf<T, V>;
  const int C = int(c.C), H = int(c.H), W = int(c.W), P = int(c.P), Q = int(c.Q), CV = C / V;
  const int qt = (Q + kTQ - 1) / kTQ, pt = (P + TP - 1) / TP, items = int(c.N) * pt * qt * CV;  // < 2^31
  // Items i, i + stride, ...: one where the grid covers them all, else (a grid of resident
  // blocks) several. The host makes the stride a multiple of CV, so cv and the weights held stay.
  const int stride = gridDim.x * blockDim.x, cv = (blockIdx.x * blockDim.x + threadIdx.x) % CV;
  int q0 = 0, p0 = 0, w0 = 0, h0 = 0;
  const T* xn = nullptr;
  T* y = nullptr;
  Vec xv[D][NW];
  auto load_row = [&](Vec(&dst)[NW], int h) {
    const bool hin = h >= 0 && h < H;
    const T* xr = xn + int64_t(hin ? h : 0) * W * C;
#pragma unroll
    for (int j = 0; j < NW; ++j) dst[j] = load_vec<Vec>(xr + (w0 + j) * C, hin && w0 + j >= 0 && w0 + j < W);
  };
  auto start = [&](int i) {  // item i's place, and its first D - 1 input rows asked for
    const int t = i / CV, t2 = t / qt, n = t2 / pt;
    q0 = t % qt * kTQ, p0 = t2 % pt * TP;
    xn = static_cast<const T*>(c.x) + int64_t(n) * H * W * C + cv * V;
    y = static_cast<T*>(c.y) + (int64_t(n) * P + p0) * Q * C + int64_t(q0) * C + cv * V;
    w0 = q0 - int(c.pw), h0 = p0 - int(c.ph);
#pragma unroll
    for (int r = 0; r < D - 1; ++r) load_row(xv[r], h0 + r);
  };
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < items) start(i);
  float wf[KS][KS][V];
  thread_weights<T>(c, cv * V, flip, wf);
  for (; i < items; i += stride) {
    if (y == nullptr) start(i);
    float acc[TP][kTQ][V] = {};
#pragma unroll
    for (int r = 0; r < NR; ++r) {  // input row h0 + r
      if (r + D - 1 < NR) load_row(xv[(r + D - 1) % D], h0 + r + D - 1);
#pragma unroll
      for (int j = 0; j < NW; ++j) {
        float xf[V];
        to_floats<T>(xv[r % D][j], xf);
#pragma unroll
        for (int o = 0; o < TP; ++o) {
          const int kr = r - o;  // the kernel row output row o applies to input row r
          if (kr < 0 || kr >= KS) continue;
#pragma unroll
          for (int oq = 0; oq < kTQ; ++oq) {
            const int s = j - oq;  // the tap of output column oq that reads column j
            if (s < 0 || s >= KS) continue;
#pragma unroll
            for (int e = 0; e < V; ++e) acc[o][oq][e] += xf[e] * wf[kr][s][e];
          }
        }
      }
      if (r >= KS - 1 && p0 + r - (KS - 1) < P) {  // output row r - (KS - 1) is complete
        const int o = r - (KS - 1);
#pragma unroll
        for (int oq = 0; oq < kTQ; ++oq)
          if (q0 + oq < Q) store_vec<T, A, V>(epi, y + (int64_t(o) * Q + oq) * C, acc[o][oq], cv * V);
      }
    }
    y = nullptr;  // the next item starts afresh
  }
}

// The 3x3 stride-1 layers of large batches (memory-bound) on a ring of whole input rows: a
// channels_last row of x (W x C elements) is one contiguous run, so one producer thread brings it
// into shared memory with one bulk copy (cp.async.bulk, completing on the slot's `full` barrier):
// bytes in flight without registers, where the strip kernels' loads in flight were bounded by
// their registers. Each block walks items of `th` output rows of one image (items blockIdx.x,
// + gridDim.x, ...) whose th + 2 input rows stream through the ring, the stream running on across
// items. Consumer thread t computes kTQ columns x 4 channels of every output row of the item
// (units: a row's column tiles x channel vectors, one a thread), walking the input rows top to
// bottom as the strips do: each row read from the ring once, added into the three output rows it
// feeds, the finished one stored. Its warp then frees the slot (`empty`, one arrival a consumer
// warp) for the producer (the last warp's lane 0). Rows outside the image are never loaded (the
// producer arrives on their `full` barrier so the phases stay in step) and read as zeros. One
// output row a thread and a block-wide sync a row (the first form) took three times the
// instructions an output, slower than the resident strips
// (docs/kernels/depthwise.md#family-conv_depthwise-the-33-stride-1-forward-and-data-gradient).
struct RowsPlan {
  int th, ring, items, row_bytes;
};
constexpr int kRowsUnits = 384, kRowsBarBytes = 256;  // the most consumer threads; the barriers' bytes (ring <= 16)
template <typename T, Act A>
__global__ void __launch_bounds__(kRowsUnits + 32) dw_fwd_rows_kernel(ConvOperands c, bool flip, Epilogue<T> epi,
                                                                       RowsPlan pl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int KS = 3, V = kStripV, NW = kTQ + KS - 1;
  using Vec = VecOf<T, V>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + 16;
  const unsigned char* ring = smem + kRowsBarBytes;
  const int C = int(c.C), H = int(c.H), W = int(c.W), P = int(c.P), Q = int(c.Q), CV = C / V;
  const int units = (Q + kTQ - 1) / kTQ * CV, pb = (P + pl.th - 1) / pl.th, span = pl.th + KS - 1;
  const int t = threadIdx.x, warps = blockDim.x / 32 - 1;  // consumer warps
  if (t == 0) {
    for (int i = 0; i < pl.ring; ++i) mbar_init(&full[i], 1), mbar_init(&empty[i], warps);
    mbar_init_fence();
  }
  __syncthreads();
  if (t / 32 == warps) {  // the producer
    if (t % 32 == 0) {
      const T* x = static_cast<const T*>(c.x);
      for (int s = 0;; ++s) {
        const int item = blockIdx.x + s / span * gridDim.x, h = item % pb * pl.th - int(c.ph) + s % span;
        if (item >= pl.items) break;
        if (s >= pl.ring) mbar_wait(&empty[s % pl.ring], (s / pl.ring - 1) & 1);
        uint64_t* b = &full[s % pl.ring];
        if (h >= 0 && h < H) {
          mbar_expect_tx(b, pl.row_bytes);
          bulk_load(const_cast<unsigned char*>(ring) + (s % pl.ring) * pl.row_bytes, x + (int64_t(item / pb) * H + h) * W * C,
                    pl.row_bytes, b);
        } else {
          mbar_arrive(b);
        }
      }
    }
    return;
  }
  const bool active = t < units;
  const int cv = t % CV, q0 = t / CV * kTQ, w0 = q0 - int(c.pw);
  unsigned cols = 0;  // bit j: column w0 + j lies inside the row
#pragma unroll
  for (int j = 0; j < NW; ++j) cols |= unsigned(active && w0 + j >= 0 && w0 + j < W) << j;
  float wf[KS][KS][V], bias[V];
  thread_weights<T>(c, cv * V, flip, wf);
#pragma unroll
  for (int e = 0; e < V; ++e) bias[e] = epi.bias != nullptr ? static_cast<float>(epi.bias[cv * V + e]) : 0.f;
  float a0[kTQ][V] = {}, a1[kTQ][V] = {}, a2[kTQ][V] = {};
  // the ring slot of the stream's next row and the parity of its `full` phase, stepped row by row
  // (no division in the loop)
  int slot = 0;
  uint32_t parity = 0;
  // the thread's first column in slot 0, as a shared-window address (32-bit math, no generic
  // pointer to convert at each load)
  const uint32_t xs = smem_u32(ring) + uint32_t((w0 * C + cv * V) * int(sizeof(T))), col_bytes = C * sizeof(T);
  for (int item = blockIdx.x; item < pl.items; item += gridDim.x) {
    const int n = item / pb, p0 = item % pb * pl.th, h0 = p0 - int(c.ph), rows = min(pl.th, P - p0);
    T* y = static_cast<T*>(c.y) + (int64_t(n) * P + p0) * Q * C + q0 * C + cv * V;  // output row r - 2 when r >= 2
    // input row r: `done` (output row r - 2) gets kernel row 2 and is stored, `mid` (r - 1) kernel
    // row 1, `fresh` (r) starts at the bias plus kernel row 0; the three rotate (at compile time)
    // row to row
    auto step = [&](float(&done)[kTQ][V], float(&mid)[kTQ][V], float(&fresh)[kTQ][V], int r) {
      const int h = h0 + r;
      const bool hin = h >= 0 && h < H;
      if (hin) mbar_wait(&full[slot], parity);
      const uint32_t row = xs + uint32_t(slot * pl.row_bytes);
      Vec xv[NW];
#pragma unroll
      for (int j = 0; j < NW; ++j) xv[j] = lds_vec<Vec>(row + j * col_bytes, hin && (cols >> j & 1));
#pragma unroll
      for (int oq = 0; oq < kTQ; ++oq)
#pragma unroll
        for (int e = 0; e < V; ++e) fresh[oq][e] = bias[e];
#pragma unroll
      for (int j = 0; j < NW; ++j) {
        float xf[V];
        to_floats<T>(xv[j], xf);
#pragma unroll
        for (int oq = 0; oq < kTQ; ++oq) {
          const int k = j - oq;  // the tap of output column oq that reads column j
          if (k < 0 || k >= KS) continue;
#pragma unroll
          for (int e = 0; e < V; ++e) {
            done[oq][e] += xf[e] * wf[2][k][e];
            mid[oq][e] += xf[e] * wf[1][k][e];
            fresh[oq][e] += xf[e] * wf[0][k][e];
          }
        }
      }
      __syncwarp();
      if (t % 32 == 0) mbar_arrive(&empty[slot]);
      if (++slot == pl.ring) slot = 0, parity ^= 1;
      if (r >= KS - 1 && r - (KS - 1) < rows) {
        if (active) {
#pragma unroll
          for (int oq = 0; oq < kTQ; ++oq)
            if (q0 + oq < Q) store_act<T, A, V>(epi, y + oq * C, done[oq]);
        }
        y += int64_t(Q) * C;
      }
    };
    for (int r = 0; r < span; r += 3) {
      step(a0, a1, a2, r);
      if (r + 1 < span) step(a1, a2, a0, r + 1);
      if (r + 2 < span) step(a2, a0, a1, r + 2);
    }
  }
#endif
}

// The tile kernel's NCHW twin (any channel multiplier): each thread computes kTQ neighbouring
// outputs of one row of one output channel, reading each of the (kTQ - 1) * SW + KS input values of
// a kernel row they need once; lanes run along the row, so a warp reads contiguous runs. It
// replaced a generic walk kernel (a tap loop per output) slower than torch's
// (docs/kernels/depthwise.md#the-tile-kernels).
template <typename T, int KS, int SW>
__global__ void __launch_bounds__(kTileThreads) dw_fwd_nchw_kernel(ConvOperands c, bool flip, Epilogue<T> epi) {
  using Acc = AccOf<T>;
  constexpr int NW = (kTQ - 1) * SW + KS;
  const int H = int(c.H), W = int(c.W), P = int(c.P), Q = int(c.Q), K = int(c.K);
  const int tiles = (Q + kTQ - 1) / kTQ, i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= int(c.N) * K * P * tiles) return;  // the caller keeps this below 2^31
  const int q0 = i % tiles * kTQ, t = i / tiles, p = t % P, nk = t / P, k = nk % K, n = nk / K;
  const T* xc = static_cast<const T*>(c.x) + (int64_t(n) * c.C + k / int(c.Kg)) * H * W;
  const T* wk = static_cast<const T*>(c.w) + k * c.ws[0];
  const int w0 = q0 * SW - int(c.pw);
  Acc acc[kTQ] = {};
  for (int r = 0; r < int(c.R); ++r) {
    const int h = p * int(c.sh) - int(c.ph) + r * int(c.dh);
    if (h < 0 || h >= H) continue;
    const T* xr = xc + h * W;
    T xv[NW], wv[KS];
#pragma unroll
    for (int s = 0; s < KS; ++s) wv[s] = wk[(flip ? int(c.R) - 1 - r : r) * c.ws[2] + (flip ? KS - 1 - s : s) * c.ws[3]];
#pragma unroll
    for (int j = 0; j < NW; ++j) xv[j] = w0 + j >= 0 && w0 + j < W ? xr[w0 + j] : T(0);
#pragma unroll
    for (int j = 0; j < NW; ++j) {
#pragma unroll
      for (int o = 0; o < kTQ; ++o) {
        const int s = j - o * SW;  // the tap of output o that reads column j, if any
        if (s >= 0 && s < KS) acc[o] += static_cast<Acc>(xv[j]) * static_cast<Acc>(wv[s]);
      }
    }
  }
  T* y = static_cast<T*>(c.y) + ((int64_t(n) * K + k) * P + p) * Q + q0;
#pragma unroll
  for (int o = 0; o < kTQ; ++o)
    if (q0 + o < Q) epi.store(y + o, acc[o], k);
}

// The common case, channels_last with one output per channel: each thread computes 16 bytes
// of channels of one output pixel from 16-byte loads of x and of the weight laid out [R, S, C].
template <typename T, Act A>
__global__ void dw_fwd_vec_kernel(ConvOperands c, const T* __restrict__ w_rsc, Epilogue<T> epi) {
  constexpr int V = 16 / sizeof(T);
  const T* x = static_cast<const T*>(c.x);
  T* y = static_cast<T*>(c.y);
  const int CV = int(c.C) / V, Wi = int(c.W), Hi = int(c.H), Ci = int(c.C);
  const int64_t total = c.N * c.P * c.Q * CV;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int cv = int(i % CV);
    const int64_t pix = i / CV, n = pix / (c.P * c.Q);
    const int pq = int(pix % (c.P * c.Q)), p = pq / int(c.Q), q = pq % int(c.Q);
    const T* xn = x + n * Hi * Wi * Ci + cv * V;
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = 0.f;
    for (int r = 0; r < c.R; ++r) {
      const int h = p * int(c.sh) - int(c.ph) + r * int(c.dh);
      if (h < 0 || h >= Hi) continue;
      for (int s = 0; s < c.S; ++s) {
        const int w = q * int(c.sw) - int(c.pw) + s * int(c.dw);
        if (w < 0 || w >= Wi) continue;
        const uint4 xv = *reinterpret_cast<const uint4*>(xn + (h * Wi + w) * Ci);
        const uint4 wv = *reinterpret_cast<const uint4*>(w_rsc + (r * int(c.S) + s) * Ci + cv * V);
        const T* xe = reinterpret_cast<const T*>(&xv);
        const T* we = reinterpret_cast<const T*>(&wv);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] += static_cast<float>(xe[e]) * static_cast<float>(we[e]);
      }
    }
    store_vec<T, A>(epi, y + pix * Ci + cv * V, acc, cv * V);
  }
}

// x and y channels_last dense, aligned to vectors of `bytes`, C a multiple of the vector width,
// K == C; the residual (when given: y's strides) aligned too.
bool vec_ok(const GemmArgs& a, int elem, int bytes = 16) {
  const auto& c = a.conv;
  const int64_t V = bytes / elem;
  return c.K == c.C && c.C % V == 0 && nhwc_dense(c.xs, c.C, c.H, c.W) && nhwc_dense(c.ys, c.K, c.P, c.Q) &&
         reinterpret_cast<uintptr_t>(c.x) % bytes == 0 && reinterpret_cast<uintptr_t>(c.y) % bytes == 0 &&
         reinterpret_cast<uintptr_t>(a.residual) % bytes == 0;
}

bool is_depthwise(const ConvOperands& c) { return c.groups == c.C && c.Cg == 1 && c.groups > 1; }

// dw_fwd_strip_kernel's host side: channels a thread, the most weight bytes a block stages, its
// candidates (strips of `rows` output rows a thread, one item a thread or walked by resident
// blocks; rows 0: the tile kernel instead), and the thread items of strips of tp rows.
constexpr int kStripWeightMax = 16 * 1024;
struct StripConfig {
  int rows;
  bool resident;
};
constexpr StripConfig kStripConfigs[] = {{4, false}, {1, false}, {0, false}, {4, true}};
constexpr int kRowsCandidate = 4;  // dw_fwd_rows_kernel, after the strip configs
const std::vector<std::string> kStripNames = {"strip4", "strip1", "tile", "strip4-resident", "rows"};
const autotune::Family kDepthwiseFamily("conv_depthwise", [] { return kStripNames; });
int64_t strip_items(const ConvOperands& c, int64_t tp) {
  return c.N * ((c.P + tp - 1) / tp) * ((c.Q + kTQ - 1) / kTQ) * (c.C / kStripV);
}

// Whether dw_fwd_strip_kernel applies: 3x3, unit strides and dilations, vectors of 4 channels,
// at most kStripWeightMax bytes of weight (the range it was measured on), 32-bit indices.
bool strip_ok(const GemmArgs& a) {
  const auto& c = a.conv;
  const int64_t es = c10::elementSize(a.dtype), big = int64_t(1) << 31;
  return a.dtype != at::kDouble && c.R == 3 && c.S == 3 && c.sh == 1 && c.sw == 1 && c.dh == 1 && c.dw == 1 &&
         9 * c.C * es <= kStripWeightMax && vec_ok(a, int(es), int(kStripV * es)) && c.W * c.C < big &&
         strip_items(c, 1) < big;
}

// dw_fwd_strip_kernel<T, 3, TP, A>; resident: a grid of the blocks that fit on the GPU at once,
// each walking several items (each thread's weights read once), its thread count a multiple of
// the channel vectors so each thread keeps its channels.
template <typename T, int TP, Act A>
void launch_strip(const GemmArgs& a, bool flip, bool resident) {
  const auto& c = a.conv;
  const auto kernel = dw_fwd_strip_kernel<T, 3, TP, A>;
  const int64_t cv = c.C / kStripV;
  int64_t blocks = (strip_items(c, TP) + kTileThreads - 1) / kTileThreads;
  if (resident) {
    // asked once per device (registers bound it: ~150 a thread, 3 blocks)
    static PerDevice kept{};
    const int per_sm = resident_blocks_kept(kept, kernel, kTileThreads, 0);
    const int64_t unit = cv / std::gcd(cv, int64_t(kTileThreads));  // blocks whose threads span whole cv cycles
    const int64_t fit = int64_t(per_sm) * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    blocks = std::min(blocks, std::max(unit, fit / unit * unit));
  }
  kernel<<<unsigned(blocks), kTileThreads, 0, at::cuda::getCurrentCUDAStream()>>>(c, flip, epilogue_of<T>(a));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// dw_fwd_rows_kernel where it applies (strip_ok's layers, on sm_90 or newer, x's rows 16-byte
// aligned runs of at most kRowsMaxRow bytes, at most kRowsUnits units a row): launched, true. The
// ring holds about kRowsRingBytes (4 to 16 rows). Items of th output rows: the th whose busiest
// block's rows, each output row a read and a write and each item's two extra input rows counted
// half (mostly L2 hits: the neighbouring item reads them too), are fewest.
constexpr int64_t kRowsRingBytes = 96 * 1024, kRowsMaxRow = 24 * 1024;
constexpr size_t kRowsSmemMax = kRowsBarBytes + 4 * kRowsMaxRow;
bool launch_rows(const GemmArgs& a, bool flip) {
  const auto& c = a.conv;
  const auto* prop = at::cuda::getCurrentDeviceProperties();
  const int64_t es = c10::elementSize(a.dtype), row = c.W * c.C * es, units = (c.Q + kTQ - 1) / kTQ * (c.C / kStripV);
  if (prop->major < 9 || row % 16 != 0 || row > kRowsMaxRow || reinterpret_cast<uintptr_t>(c.x) % 16 != 0 ||
      units > kRowsUnits || c.N * c.H >= (int64_t(1) << 31))
    return false;
  RowsPlan pl{};
  pl.row_bytes = int(row);
  pl.ring = int(std::clamp<int64_t>(kRowsRingBytes / row, 4, 16));
  const int threads = int((units + 31) / 32 * 32 + 32);
  const size_t smem = kRowsBarBytes + size_t(pl.ring) * size_t(row);
  bool done = false;
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same<T, double>::value) {
      with_act(a.act, [&](auto act) {
        const auto kernel = dw_fwd_rows_kernel<T, decltype(act)::value>;
        static std::atomic<uint64_t> set_on{0};
        static PerDevice regs{};
        allow_smem(kernel, kRowsSmemMax, set_on);
        const int nregs = kept_per_device(regs, [&] {
          cudaFuncAttributes fa{};
          C10_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
          return std::max(1, fa.numRegs);
        });
        const int64_t warps = threads / 32;
        const int64_t per_sm = std::max<int64_t>(
            1, std::min({int64_t(prop->sharedMemPerMultiprocessor) / int64_t(smem + 1024),
                         int64_t(prop->maxThreadsPerMultiProcessor) / threads,
                         int64_t(prop->regsPerMultiprocessor) / (warps * ((32 * nregs + 255) / 256 * 256))}));
        const int64_t fit = per_sm * prop->multiProcessorCount;
        int64_t best = -1;
        for (int64_t th = 1; th <= std::min<int64_t>(c.P, 32); ++th) {
          const int64_t items = c.N * ((c.P + th - 1) / th), per_block = (items + fit - 1) / fit;
          const int64_t cost = per_block * (2 * th + 1);
          if (best < 0 || cost < best) best = cost, pl.th = int(th), pl.items = int(items);
        }
        const unsigned blocks = unsigned(std::min<int64_t>(pl.items, fit));
        kernel<<<blocks, threads, smem, at::cuda::getCurrentCUDAStream()>>>(c, flip, epilogue_of<T>(a), pl);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        done = true;
      });
    }
  });
  return done;
}

// fn(ks, sw) (integral constants) where the kernel width and column stride are one the tile
// kernels are instantiated for: 3x3, 5x5 and 7x7 at stride 1, 3x3 and 5x5 at stride 2
// (MobileNet's, EfficientNet's, ConvNeXt's), without column dilation. False otherwise.
template <typename Fn>
bool with_dw_shape(const ConvOperands& c, Fn&& fn) {
  bool found = false;
  auto shape = [&](auto ks, auto sw) {
    if (found || c.dw != 1 || c.S != ks.value || c.sw != sw.value) return;
    fn(ks, sw);
    found = true;
  };
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  shape(std::integral_constant<int, 3>{}, One{});
  shape(std::integral_constant<int, 3>{}, Two{});
  shape(std::integral_constant<int, 5>{}, One{});
  shape(std::integral_constant<int, 5>{}, Two{});
  shape(std::integral_constant<int, 7>{}, One{});
  return found;
}

// dw_wgrad_vec_kernel's partial sums [splits, K, 1, R, S] (fp32) of channels_last dense x and
// dy (as conv_wgrad_depthwise makes them) where it applies: one output per channel, C a multiple
// of the vector, a 3, 5 or 7 wide kernel, 16-byte aligned, 32-bit indices. Else undefined.
at::Tensor wgrad_vec_partial(const GemmArgs& a, const ConvOperands& c, int sms) {
  const int64_t V = 16 / int64_t(c10::elementSize(a.dtype)), big = int64_t(1) << 31;
  if (a.dtype == at::kDouble || c.K != c.C || c.C % V != 0 || (c.S != 3 && c.S != 5 && c.S != 7) ||
      reinterpret_cast<uintptr_t>(c.x) % 16 != 0 || reinterpret_cast<uintptr_t>(c.y) % 16 != 0 ||
      c.N * c.H * c.W * c.C >= big || c.N * c.P * c.Q * c.C >= big)
    return {};
  const int64_t CV = c.C / V, cvb = std::min<int64_t>(CV, 32), chunks = (CV + cvb - 1) / cvb, rows = c.N * c.P;
  // about four blocks per SM in all (each block sums its partials once, at the end)
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>(4 * sms / (chunks * c.R) + 1, rows));
  const int64_t per = (rows + splits - 1) / splits;
  at::Tensor partial = at::empty({splits, c.K, 1, c.R, c.S}, cuda_options(at::kFloat));
  const dim3 grid(unsigned(splits), unsigned(chunks), unsigned(c.R));
  const auto stream = at::cuda::getCurrentCUDAStream();
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same<T, double>::value) {
      float* out = partial.data_ptr<float>();
      if (c.S == 3) dw_wgrad_vec_kernel<T, 3><<<grid, 256, 0, stream>>>(c, int(per), out);
      else if (c.S == 5) dw_wgrad_vec_kernel<T, 5><<<grid, 256, 0, stream>>>(c, int(per), out);
      else dw_wgrad_vec_kernel<T, 7><<<grid, 256, 0, stream>>>(c, int(per), out);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partial;
}

// The weight laid out [R, S, C], for the vector kernels that do not stage it.
at::Tensor weight_rsc(const GemmArgs& a) {
  const auto& c = a.conv;
  return device_view(c.w, {c.K, c.R, c.S}, {c.ws[0], c.ws[2], c.ws[3]}, a.dtype).permute({1, 2, 0}).contiguous();
}

// dw_fwd_tile_kernel (channels_last) or dw_fwd_nchw_kernel where one applies: launched, true.
bool depthwise_fwd_tile(const GemmArgs& a, bool flip) {
  const auto& c = a.conv;
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t es = c10::elementSize(a.dtype), big = int64_t(1) << 31;
  const bool vec = a.dtype != at::kDouble && vec_ok(a, int(es));
  const int64_t tiles = (c.Q + kTQ - 1) / kTQ, wbytes = c.R * c.S * c.C * es;
  const int64_t threads = vec ? c.N * c.P * tiles * (c.C / (16 / es)) : c.N * c.K * c.P * tiles;
  const bool nchw = nchw_dense(c.xs, c.C, c.H, c.W) && nchw_dense(c.ys, c.K, c.P, c.Q) && c.N * c.C * c.H * c.W < big;
  const unsigned blocks = unsigned((threads + kTileThreads - 1) / kTileThreads);
  at::Tensor w_rsc;  // weight_rsc(a), made on first use
  auto rsc = [&](auto tag) {
    if (!w_rsc.defined()) w_rsc = weight_rsc(a);
    return static_cast<const decltype(tag)*>(w_rsc.const_data_ptr());
  };
  const bool staged = wbytes <= 16 * 1024;
  bool done = false;
  if (threads < big && c.W * c.C < big && (vec ? staged || !flip : nchw)) {
    with_dtype(a.dtype, [&](auto t) {
      using T = decltype(t);
      const Epilogue<T> epi = epilogue_of<T>(a);
      done = with_dw_shape(c, [&](auto ks, auto sw) {
        if constexpr (!std::is_same<T, double>::value) {
          if (vec) {
            dw_fwd_tile_kernel<T, ks.value, sw.value>
                <<<blocks, kTileThreads, staged ? wbytes : 0, stream>>>(c, staged ? nullptr : rsc(t), flip, epi);
            return;
          }
        }
        dw_fwd_nchw_kernel<T, ks.value, sw.value><<<blocks, kTileThreads, 0, stream>>>(c, flip, epi);
      });
    });
  }
  if (done) C10_CUDA_KERNEL_LAUNCH_CHECK();
  return done;
}

// The forward of a depthwise problem; flip: read the kernel flipped along (R, S) (the data
// gradient as a forward). The strip and tile kernels take the flip and a kernel of up to 16 KiB
// from the weight as it is, staged in shared memory per block: no permuted or flipped copy, which
// cost an allocation and a launch each (host time the b32 rows are bound by). The rest read a copy.
// The 3x3 stride-1 layers (MobileNet's): the row ring (where it applies; else the resident strips
// of 4 output rows) where strips of 4 leave at least two blocks per SM, else strips of one (small
// batches). Measured:
// docs/kernels/depthwise.md#family-conv_depthwise-the-33-stride-1-forward-and-data-gradient.
bool depthwise_fwd(const GemmArgs& a, bool flip) {
  const auto& c = a.conv;
  if (strip_ok(a)) {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int heuristic = strip_items(c, 4) >= 2 * sms * kTileThreads ? kRowsCandidate : 1;
    autotune::run(
        [&] {
          return autotune::op_key({"conv_depthwise", c10::toString(a.dtype),
                                   autotune::shape_class(c.N * c.P * c.Q, c.C, 9), flip ? "flip" : "fwd"});
        },
        kStripNames, heuristic, [&](int i) {
          // the row ring or the tile kernel where it applies (else resident strips, or strips as
          // tall as the heuristic's, one item a thread)
          constexpr int kResident = 3;
          if (i == kRowsCandidate && launch_rows(a, flip)) return;
          StripConfig cfg = kStripConfigs[i == kRowsCandidate ? kResident : i];
          if (cfg.rows == 0 && depthwise_fwd_tile(a, flip)) return;
          if (cfg.rows == 0) cfg = {kStripConfigs[heuristic == kRowsCandidate ? kResident : heuristic].rows, false};
          with_dtype(a.dtype, [&](auto t) {
            using T = decltype(t);
            if constexpr (!std::is_same<T, double>::value) {
              with_act(a.act, [&](auto act) {
                constexpr Act A = decltype(act)::value;
                if (cfg.rows == 4) launch_strip<T, 4, A>(a, flip, cfg.resident);
                else launch_strip<T, 1, A>(a, flip, cfg.resident);
              });
            }
          });
        });
    return true;
  }
  if (depthwise_fwd_tile(a, flip)) return true;
  if (flip) {  // the kernels below read the weight as given: flip a copy
    const at::Tensor wf = device_view(c.w, {c.K, 1, c.R, c.S}, at::IntArrayRef(c.ws, 4), a.dtype).flip({2, 3});
    GemmArgs f = a;
    f.conv.w = const_cast<void*>(wf.const_data_ptr());
    for (int i = 0; i < 4; ++i) f.conv.ws[i] = wf.stride(i);
    return depthwise_fwd(f, false);
  }
  const auto stream = at::cuda::getCurrentCUDAStream();
  const int64_t es = c10::elementSize(a.dtype);
  if (a.dtype != at::kDouble && vec_ok(a, int(es))) {
    const at::Tensor w_rsc = weight_rsc(a);
    with_dtype(a.dtype, [&](auto t) {
      using T = decltype(t);
      if constexpr (!std::is_same<T, double>::value) {
        const Epilogue<T> epi = epilogue_of<T>(a);
        with_act(a.act, [&](auto act) {
          dw_fwd_vec_kernel<T, decltype(act)::value><<<blocks_for(c.N * c.P * c.Q * c.C / (16 / es)), 256, 0, stream>>>(
              c, static_cast<const T*>(w_rsc.const_data_ptr()), epi);
        });
      }
    });
  } else {
    const Walk wk{int(c.K), int(c.P), int(c.Q), c.ys[1] == 1 && c.K > 1};
    with_dtype(a.dtype, [&](auto t) {
      using T = decltype(t);
      const Epilogue<T> epi = epilogue_of<T>(a);
      with_act(a.act, [&](auto act) {
        dw_fwd_kernel<T, AccOf<T>, decltype(act)::value><<<walk_grid(wk, c.N), 256, 0, stream>>>(c, wk, epi);
      });
    });
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

}  // namespace

bool conv_fwd_depthwise(const GemmArgs& a) { return is_depthwise(a.conv) && depthwise_fwd(a, false); }

bool conv_dgrad_depthwise(const GemmArgs& a) {
  const auto& c = a.conv;
  if (!is_depthwise(c)) return false;
  if (c.K == c.C && dgrad_as_forward_ok(c))  // one output per channel: the forward, kernel flipped
    return depthwise_fwd(dgrad_as_forward(a, c.w, c.ws), true);
  const Walk wk{int(c.C), int(c.H), int(c.W), c.xs[1] == 1 && c.C > 1};
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    dw_dgrad_kernel<T, AccOf<T>><<<walk_grid(wk, c.N), 256, 0, at::cuda::getCurrentCUDAStream()>>>(c, wk);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

bool conv_wgrad_depthwise(const GemmArgs& a) {
  const auto& c0 = a.conv;
  if (!is_depthwise(c0) || c0.N * c0.P * c0.Q == 0) return false;
  const auto opts = cuda_options(a.dtype);
  auto wrap = [&](void* p, at::IntArrayRef sizes, const int64_t* st) {
    return device_view(p, sizes, at::IntArrayRef(st, 4), a.dtype).contiguous(at::MemoryFormat::ChannelsLast);
  };
  const at::Tensor x = wrap(c0.x, {c0.N, c0.C, c0.H, c0.W}, c0.xs), dy = wrap(c0.y, {c0.N, c0.K, c0.P, c0.Q}, c0.ys);
  ConvOperands c = c0;  // channels_last copies (no copy when already so)
  c.x = const_cast<void*>(x.const_data_ptr());
  c.y = const_cast<void*>(dy.const_data_ptr());
  for (int i = 0; i < 4; ++i) c.xs[i] = x.stride(i), c.ys[i] = dy.stride(i);
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  at::Tensor partial = wgrad_vec_partial(a, c, sms);
  if (!partial.defined()) {
    const int64_t rows = c.N * c.P, kblocks = (c.K + 31) / 32;
    const int64_t splits = std::max<int64_t>(1, std::min<int64_t>((4 * sms) / (kblocks * c.R * c.S) + 1, rows));
    const int64_t per = (rows + splits - 1) / splits;
    partial = at::empty({splits, c.K, 1, c.R, c.S}, opts.dtype(a.dtype == at::kDouble ? at::kDouble : at::kFloat));
    const dim3 grid(unsigned(splits), unsigned(kblocks), unsigned(c.R * c.S));
    with_dtype(a.dtype, [&](auto t) {
      using Acc = AccOf<decltype(t)>;
      dw_wgrad_kernel<decltype(t), Acc>
          <<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(c, per, static_cast<Acc*>(partial.data_ptr()));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    dw_wgrad_finish_kernel<T, AccOf<T>><<<blocks_for(32 * c.K * c.R * c.S), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        static_cast<const AccOf<T>*>(partial.const_data_ptr()), partial.size(0), c);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

}  // namespace tileops::cuda
