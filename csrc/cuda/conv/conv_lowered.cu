// conv2d (groups == 1) lowered onto the matmul families, which are much faster than reading
// a convolution through the implicit-GEMM index maps:
//   forward  Y[NPQ, K]   = cols(X)[NPQ, RSC] . W[K, RSC]^T      (+ bias, activation)
//   dgrad    one forward conv of dY per phase of dX (dgrad_phases.h), or (strides > 1)
//            dcols       = dY[NPQ, K] . W[K, RSC], then dX = col2im(dcols) (a gather: no atomics)
//   wgrad    dW[K, RSC]  = dY^T[K, NPQ] . cols(X)[NPQ, RSC]     (split-K on Hopper)
// Column order is (r, s, c), so a channels_last input gives 16-byte loads along c, and a 1x1
// stride-1 convolution of a channels_last input is a plain GEMM over X itself (no copy). Rows
// are padded to a multiple of 8 elements so TMA can read them. The column buffer is bounded:
// larger problems run in chunks of whole images.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "autotune/cuda_timing.h"
#include "cuda/runtime/cuda_util.h"
#include "cuda/runtime/griddep.cuh"
#include "cuda/conv/gemm_conv_vec.cuh"
#include "cuda/conv/dgrad_phases.h"
#include "cuda/routing/entry.h"
#include "cuda/runtime/streams.h"
#include "cuda/routing/launch_rungs.cuh"
#include "cuda/splitk/splitk.cuh"

namespace tileops::cuda {
namespace {

constexpr int64_t kColsLimit = int64_t(1) << 28;  // elements in one column buffer (512 MiB in bf16)

// The convolution geometry the two gather kernels need, in their index type I: 32-bit where every
// index of a launch fits (with_index), as a 64-bit division is a long instruction sequence (it
// was most of col2im's time), else 64-bit.
template <typename I = int64_t>
struct Geom {
  I C, H, W, R, S, P, Q, sh, sw, ph, pw, dh, dw, Kp;
  template <typename J>
  Geom<J> as() const {
    return {J(C), J(H), J(W), J(R), J(S), J(P), J(Q), J(sh), J(sw), J(ph), J(pw), J(dh), J(dw), J(Kp)};
  }
};

Geom<> geom(const ConvOperands& c) {
  return {c.C, c.H, c.W, c.R, c.S, c.P, c.Q, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, (c.R * c.S * c.C + 7) / 8 * 8};
}

// cols[m, k] for images [n0, n0 + rows / PQ): each thread fills 8 consecutive columns.
// VEC: C is a multiple of a 16-byte vector's elements (8 halves, 4 floats) and x is
// channel-contiguous with 16-byte aligned strides, so each vector of the 8 columns is that
// many channels of one input pixel and moves as one 16-byte load.
template <typename T, bool VEC, typename I>
__global__ void im2col_kernel(const T* __restrict__ x, int64_t xs0, int64_t xs1, int64_t xs2, int64_t xs3, Geom<I> g,
                              I n0, I rows, T* __restrict__ cols) {
  const I chunks = g.Kp / 8, total = rows * chunks, RSC = g.R * g.S * g.C;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * I(blockDim.x)) {
    const I m = i / chunks, k0 = (i % chunks) * 8;
    const I n = n0 + m / (g.P * g.Q), pq = m % (g.P * g.Q), p = pq / g.Q, q = pq % g.Q;
    T* dst = cols + m * g.Kp + k0;
    if constexpr (VEC) {
      constexpr int V = 16 / sizeof(T);
#pragma unroll
      for (int j = 0; j < 8; j += V) {
        const I k = k0 + j, rs = k / g.C, c = k % g.C, r = rs / g.S, s = rs % g.S;
        const I h = p * g.sh - g.ph + r * g.dh, w = q * g.sw - g.pw + s * g.dw;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (k < RSC && h >= 0 && h < g.H && w >= 0 && w < g.W)
          v = *reinterpret_cast<const uint4*>(x + n * xs0 + c * xs1 + h * xs2 + w * xs3);
        *reinterpret_cast<uint4*>(dst + j) = v;
      }
    } else {
      const int Ci = int(g.C), Si = int(g.S);  // 32-bit: the column math is the hot part here
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int k = int(k0) + e, rs = k / Ci, c = k % Ci, r = rs / Si, s = rs % Si;
        const I h = p * g.sh - g.ph + r * g.dh, w = q * g.sw - g.pw + s * g.dw;
        dst[e] = (k < RSC && h >= 0 && h < g.H && w >= 0 && w < g.W) ? x[n * xs0 + c * xs1 + h * xs2 + w * xs3]
                                                                     : T(0);
      }
    }
  }
}

// cols where C is not a multiple of the vector (the ResNet stem's C = 3), with unit column dilation
// and each input row's pixels contiguous, where im2col_kernel's per-element (r, s, c) divisions and
// 2-byte stores were most of the stem's time
// (docs/kernels/conv-lowered.md#why-the-copy-kernels-look-as-they-do). A block takes `qt` output
// pixels of one output row and stages the R input rows they read in shared memory, each a
// contiguous run of `span` pixels (zero outside the image), where the (s, c) columns of one tap row
// are contiguous again: cols[m, r*S*C + j] = tile[r][m*sw*C + j]. Each thread then owns one
// 8-column vector of the block's rows, works out where its 8 columns sit in the tile once, and
// writes that vector of every groups-th row as one 16-byte store (the rows of a block are
// contiguous in cols, so neighbouring threads write neighbouring vectors). Two other forms measured
// slower (same doc section).
template <typename T, typename I>
__global__ void im2col_rows_kernel(const T* __restrict__ x, int64_t xs0, int64_t xs2, Geom<I> g, I n0, int qt,
                                   int span, T* __restrict__ cols) {
  extern __shared__ __align__(16) unsigned char im2col_smem[];
  T* tile = reinterpret_cast<T*>(im2col_smem);
  const int C = int(g.C), SC = int(g.S) * C, RSC = int(g.R) * SC, row_len = span * C, Kp = int(g.Kp);
  const int tiles = (int(g.Q) + qt - 1) / qt, q0 = int(blockIdx.x % tiles) * qt;
  const I np = I(blockIdx.x / tiles), n = np / g.P;  // (image within the chunk, output row)
  const int p = int(np % g.P), w_lo = q0 * int(g.sw) - int(g.pw);
  const int64_t row_end = int64_t(g.W) * C;
  for (int r = 0; r < int(g.R); ++r) {
    const int h = p * int(g.sh) - int(g.ph) + r * int(g.dh);
    const T* src = x + int64_t(n0 + n) * xs0 + int64_t(h) * xs2;
    for (int j = threadIdx.x; j < row_len; j += blockDim.x) {
      const int64_t e = int64_t(w_lo) * C + j;  // element within the input row
      tile[r * row_len + j] = h >= 0 && h < int(g.H) && e >= 0 && e < row_end ? src[e] : T(0);
    }
  }
  __syncthreads();
  const int vcols = Kp / 8, groups = max(1, int(blockDim.x) / vcols), rows = min(qt, int(g.Q) - q0);
  const int step = int(g.sw) * C;
  for (int item = threadIdx.x; item < vcols * groups; item += blockDim.x) {
    const int v = item % vcols, grp = item / vcols;
    int off[8];  // tile offset of each of this thread's columns at output pixel 0; -1: zero padding
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int k = v * 8 + e, r = k / SC;
      off[e] = k < RSC ? r * row_len + (k - r * SC) : -1;
    }
    T* out = cols + (np * g.Q + q0) * g.Kp + v * 8;  // m = (n, p, q) rows of this chunk
    for (int m = grp; m < rows; m += groups) {
      const T* src = tile + m * step;
      alignas(16) T e8[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) e8[e] = off[e] >= 0 ? src[off[e]] : T(0);
#pragma unroll
      for (int u = 0; u < int(sizeof(e8) / 16); ++u)
        reinterpret_cast<uint4*>(out + int64_t(m) * Kp)[u] = reinterpret_cast<const uint4*>(e8)[u];
    }
  }
}

// cols where the windows do not overlap (stride >= kernel: patch embeddings), with unit column
// dilation and each input row's pixels contiguous: a tap row's S*C columns are then one run of x
// (x[n, h, (q*sw - pw)*C ...]), and each input element is read at most once, so there is nothing to
// stage (im2col_rows_kernel's staging ran one block per output row). Each thread moves one 16-byte
// vector of a cols row as 16 / sizeof(U) loads or stores of x, all issued before they are used: U
// is the widest vector that no run, row or window edge splits (runs_vector); one U a thread left
// too few bytes in flight (docs/kernels/conv-lowered.md#why-the-copy-kernels-look-as-they-do).
// SCATTER: the data gradient of windows that tile x exactly (each element of dx is one element of
// dcols), cols read and x written.
template <typename T, typename U, bool SCATTER, typename I>
__global__ void runs_copy_kernel(T* __restrict__ x, int64_t xs0, int64_t xs2, Geom<I> g, I n0, I rows,
                                 T* __restrict__ cols) {
  constexpr int V = int(sizeof(U) / sizeof(T)), L = int(16 / sizeof(U));  // elements a U, U's a vector
  const I per_row = g.Kp / (V * L), total = rows * per_row, SC = g.S * g.C, RSC = g.R * SC, WC = g.W * g.C;
  const I PQ = g.P * g.Q;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * I(blockDim.x)) {
    const I m = i / per_row, k0 = (i - m * per_row) * (V * L), pq = m % PQ, p = pq / g.Q, q = pq - p * g.Q;
    T* img = x + (n0 + m / PQ) * xs0;
    uint4* vec = reinterpret_cast<uint4*>(cols + m * g.Kp + k0);
    alignas(16) U u[L];
    if constexpr (SCATTER) *reinterpret_cast<uint4*>(u) = *vec;
#pragma unroll
    for (int j = 0; j < L; ++j) {
      const I k = k0 + j * V, r = k / SC;
      const I h = p * g.sh - g.ph + r * g.dh, e = (q * g.sw - g.pw) * g.C + (k - r * SC);
      const bool in = k < RSC && h >= 0 && h < g.H && e >= 0 && e < WC;  // else padding, or past R*S*C
      U* at = reinterpret_cast<U*>(img + h * xs2 + e);
      if constexpr (SCATTER) {
        if (in) *at = u[j];
      } else {
        u[j] = in ? *at : U{};
      }
    }
    if constexpr (!SCATTER) *vec = *reinterpret_cast<const uint4*>(u);
  }
}

// runs_copy_kernel's vector in bytes (0: it does not apply): a power of two up to 16 dividing the
// run (S*C elements), where each window starts (sw*C, pw*C), x's image and row strides and its
// address; and C too where a window may cross the left or right edge, so that a vector is all
// inside or all outside. (A cols row, Kp elements, is a multiple of 16 bytes.)
int runs_vector(const at::Tensor& x, const Geom<>& g) {
  if (g.sw < g.S || g.sh < (g.R - 1) * g.dh + 1 || g.dw != 1 || x.stride(1) != 1 || x.stride(3) != g.C) return 0;
  const int64_t es = x.element_size();
  const bool edges = g.pw > 0 || (g.Q - 1) * g.sw - g.pw + g.S > g.W;
  int64_t all = 0;
  for (int64_t v : {g.S * g.C, g.sw * g.C, g.pw * g.C, x.stride(0), x.stride(2), edges ? g.C : int64_t(0)})
    all = std::gcd(all, v * es);
  all = std::gcd(all, int64_t(reinterpret_cast<uintptr_t>(x.const_data_ptr()) % 16));  // 0: 16-byte aligned
  int vb = 16;
  while (vb > es && all % vb != 0) vb /= 2;
  return vb;
}

template <typename T, bool SCATTER, typename I>
void launch_runs(int vb, T* x, int64_t xs0, int64_t xs2, const Geom<I>& g, I n0, I rows, T* cols) {
  const unsigned b = blocks_for(int64_t(rows) * g.Kp * int64_t(sizeof(T)) / 16);
  const auto stream = at::cuda::getCurrentCUDAStream();
  auto go = [&](auto u) {
    runs_copy_kernel<T, decltype(u), SCATTER, I><<<b, 256, 0, stream>>>(x, xs0, xs2, g, n0, rows, cols);
  };
  if (vb == 16) go(uint4{});
  else if (vb == 8) go(uint2{});
  else if (vb == 4) go(uint32_t{});
  else if constexpr (sizeof(T) == 2) go(uint16_t{});
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// dx[n, c..c+7, h, w] = sum over the (r, s) taps that read (h, w) of dcols[(n, p, q), (r, s, c)],
// in fp32, in a fixed order (deterministic). VEC as in im2col, for dcols reads and dx writes.
template <typename T, bool VEC, typename I>
__global__ void col2im_kernel(const T* __restrict__ dcols, Geom<I> g, I n0, I images, T* __restrict__ dx, int64_t xs0,
                              int64_t xs1, int64_t xs2, int64_t xs3) {
  const I cchunks = (g.C + 7) / 8, total = images * g.H * g.W * cchunks;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total; i += I(gridDim.x) * I(blockDim.x)) {
    const I c0 = (i % cchunks) * 8, pix = i / cchunks, w = pix % g.W, h = (pix / g.W) % g.H, nl = pix / (g.W * g.H);
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    // with unit dilation only every stride-th tap, from (h + ph) % sh, can reach h (a 16x16/16
    // patch: 1 tap of 256)
    for (I r = g.dh == 1 ? (h + g.ph) % g.sh : 0; r < g.R; r += g.dh == 1 ? g.sh : 1) {
      const I hp = h + g.ph - r * g.dh;
      if (hp < 0 || hp % g.sh != 0 || hp / g.sh >= g.P) continue;
      for (I s = g.dw == 1 ? (w + g.pw) % g.sw : 0; s < g.S; s += g.dw == 1 ? g.sw : 1) {
        const I wq = w + g.pw - s * g.dw;
        if (wq < 0 || wq % g.sw != 0 || wq / g.sw >= g.Q) continue;
        const T* src = dcols + ((nl * g.P + hp / g.sh) * g.Q + wq / g.sw) * g.Kp + (r * g.S + s) * g.C + c0;
        if constexpr (VEC) {
          const uint4 v = *reinterpret_cast<const uint4*>(src);
          const T* e8 = reinterpret_cast<const T*>(&v);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[e] += static_cast<float>(e8[e]);
        } else {
          for (int e = 0; e < 8 && c0 + e < g.C; ++e) acc[e] += static_cast<float>(src[e]);
        }
      }
    }
    T* dst = dx + int64_t(n0 + nl) * xs0 + c0 * xs1 + h * xs2 + w * xs3;
    if constexpr (VEC) {
      uint4 v;
      T* e8 = reinterpret_cast<T*>(&v);
#pragma unroll
      for (int e = 0; e < 8; ++e) e8[e] = static_cast<T>(acc[e]);
      *reinterpret_cast<uint4*>(dst) = v;
    } else {
      for (int e = 0; e < 8 && c0 + e < g.C; ++e) dst[e * xs1] = static_cast<T>(acc[e]);
    }
  }
}

at::Tensor wrap(void* p, at::IntArrayRef sizes, const int64_t* strides, const GemmArgs& a) {
  return device_view(p, sizes, at::IntArrayRef(strides, 4), a.dtype);
}

// The 16-byte path: channel-contiguous, 16-byte aligned base and strides, C a multiple of the
// vector's elements (v).
bool vec_ok(const at::Tensor& t) {
  const int64_t v = 16 / t.element_size();
  return t.size(1) % v == 0 && t.stride(1) == 1 && reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0 &&
         t.stride(0) % v == 0 && t.stride(2) % v == 0 && t.stride(3) % v == 0;
}

// x as the gather reads it best: channel-contiguous (copied to channels_last once if not),
// with the 16-byte path where the dtype and C allow it.
at::Tensor gather_ready(const at::Tensor& x) {
  const bool want_vec = x.size(1) % (16 / x.element_size()) == 0;
  return x.stride(1) != 1 || (want_vec && !vec_ok(x)) ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
}

// rows = (n, h, w) of a channels_last-dense tensor: a row-major [N*H*W, C] matrix.
bool nhwc_dense(const at::Tensor& t) { return tileops::nhwc_dense(t.strides().data(), t.size(1), t.size(2), t.size(3)); }

// The gather kernels' element types: the lowered dtypes (fp16, bf16, fp32), never fp64.
template <typename Fn>
void with_gather_dtype(const GemmArgs& a, Fn&& fn) {
  with_dtype(a.dtype, [&](auto tag) {
    if constexpr (!std::is_same<decltype(tag), double>::value) fn(tag);
  });
}

void im2col(const GemmArgs& a, const at::Tensor& x, const Geom<>& g, int64_t n0, int64_t images, at::Tensor& cols) {
  const int64_t out_rows = images * g.P * g.Q;
  const bool vec = vec_ok(x);  // fp32 too: two 16-byte vectors per thread
  // im2col_rows_kernel: `qt` output pixels per block, halved until the staged rows fit 32 KiB
  int qt = 64, span = 0;
  int64_t smem = 0;
  const bool rows_ok = !vec && g.dw == 1 && x.stride(1) == 1 && x.stride(3) == g.C;
  for (; rows_ok; qt /= 2) {
    span = int((std::min<int64_t>(qt, g.Q) - 1) * g.sw + g.S);
    smem = g.R * span * g.C * x.element_size();
    if (smem <= 32 * 1024 || qt <= 8) break;
  }
  const bool rows = rows_ok && smem <= 48 * 1024;
  const int runs = vec ? 0 : runs_vector(x, g);
  const auto stream = at::cuda::getCurrentCUDAStream();
  with_gather_dtype(a, [&](auto tag) {
    with_index(std::max(out_rows * g.Kp, n0 + images), [&](auto itag) {
      using T = decltype(tag);
      using I = decltype(itag);
      auto* out = static_cast<T*>(cols.data_ptr());
      const auto* in = static_cast<const T*>(x.const_data_ptr());
      const int64_t* xs = x.strides().data();
      if (runs > 0) {
        launch_runs<T, false, I>(runs, const_cast<T*>(in), xs[0], xs[2], g.as<I>(), I(n0), I(out_rows), out);
        return;
      }
      if (rows) {
        const unsigned b = unsigned(images * g.P * ((g.Q + qt - 1) / qt));
        im2col_rows_kernel<T, I><<<b, 256, smem, stream>>>(in, xs[0], xs[2], g.as<I>(), I(n0), qt, span, out);
        return;
      }
      const unsigned b = blocks_for(out_rows * g.Kp / 8);
      if (vec) im2col_kernel<T, true, I><<<b, 256, 0, stream>>>(in, xs[0], xs[1], xs[2], xs[3], g.as<I>(), I(n0), I(out_rows), out);
      else im2col_kernel<T, false, I><<<b, 256, 0, stream>>>(in, xs[0], xs[1], xs[2], xs[3], g.as<I>(), I(n0), I(out_rows), out);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Row-major GEMM C = A . B (M x K . K x N) as matmul arguments. b_kmajor: B is given
// transposed (N x K row-major, a linear weight); else K x N row-major. A is set by the caller.
// A matmul problem lowered from a conv problem: its dtype and TF32 flag, epilogue `epi`.
GemmArgs lowered(const GemmArgs& conv, const Fused& epi, int64_t batch, int64_t M, int64_t N, int64_t K,
                 const MatmulOperands& mm) {
  GemmArgs g;
  g.kind = Kind::Matmul;
  g.dtype = conv.dtype;
  g.allow_tf32 = conv.allow_tf32;
  g.fused() = epi;
  g.batch = batch;
  g.M = M;
  g.N = N;
  g.K = K;
  g.mm = mm;
  return g;
}

GemmArgs matmul_args(const GemmArgs& conv, int64_t M, int64_t K, const at::Tensor& B, bool b_kmajor,
                     const at::Tensor& C, const Fused& epi) {
  const MatmulOperands mm{nullptr, B.const_data_ptr(), C.data_ptr(), {0, 0, 0},
                          {0, b_kmajor ? B.stride(1) : B.stride(0), b_kmajor ? B.stride(0) : B.stride(1)},
                          {0, C.stride(0), C.stride(1)}};
  return lowered(conv, epi, 1, M, C.size(1), K, mm);
}

// The same GEMM on the matmul dispatch (Hopper for fp16/bf16 where it can run).
void gemm(const GemmArgs& conv, const at::Tensor& A, const at::Tensor& B, bool b_kmajor, const at::Tensor& C,
          const Fused& epi = {}) {
  GemmArgs g = matmul_args(conv, A.size(0), A.size(1), B, b_kmajor, C, epi);
  g.mm.a = A.const_data_ptr();
  const int64_t sa[3] = {0, A.stride(0), A.stride(1)};
  for (int i = 0; i < 3; ++i) g.mm.sa[i] = sa[i];
  gemm_cuda_matmul(g);
}

// weight (K, C, R, S) -> [K, Kp] in (r, s, c) column order, zero-padded columns. (One kernel
// doing the permuting copy and the padding took what these two ATen launches take: latency, not
// work; docs/kernels/conv-lowered.md#why-the-copy-kernels-look-as-they-do.)
at::Tensor weight_rows(const at::Tensor& w, int64_t Kp) {
  const int64_t K = w.size(0), RSC = w.size(1) * w.size(2) * w.size(3);
  at::Tensor w2 = w.permute({0, 2, 3, 1}).reshape({K, RSC});
  if (Kp != RSC) w2 = at::constant_pad_nd(w2, {0, Kp - RSC});
  return w2.stride(1) == 1 && w2.stride(0) % 8 == 0 ? w2 : w2.contiguous();
}

// A weight-sized transposition, per kernel tap: out[tap][j][i] = in[tap][i][j] for each I x J
// matrix of an Br x Bs grid of taps, every index through element strides (a flip is a negative tap
// stride from the last tap's base). Both sides go through a 64 x 64 shared-memory tile, so the
// reads along j and the writes along i are coalesced whichever side is contiguous (a warp's row of
// 2-byte values is a whole 128-byte line), and each thread has 16 loads in flight, where 4 a
// thread, one after another, were latency-bound
// (docs/kernels/conv-lowered.md#why-the-copy-kernels-look-as-they-do).
// `order` (where tap_order > 0): the output taps in another order, tap (r, s) at position
// order[r * Bs + s], out_s apart (out_r unused).
constexpr int kTapOrderMax = 64;
struct TapTranspose {
  int64_t I, J, Br, Bs;
  int64_t in_i, in_j, in_r, in_s;
  int64_t out_i, out_j, out_r, out_s;
  int tap_order = 0;
  int16_t order[kTapOrderMax] = {};
};
constexpr int kTapTile = 64, kTapRows = 8;  // tile side; rows of 32 threads a block

template <typename E>  // E: the element's bits (a 2- or 4-byte word; nothing is computed)
__global__ void __launch_bounds__(32 * kTapRows)
    tap_transpose_kernel(const E* __restrict__ in, E* __restrict__ out, TapTranspose t) {
  constexpr int T = kTapTile;
  griddep_launch_dependents();  // the GEMM after it (a dependent launch) may set up meanwhile
  __shared__ E tile[T][T + 4 / sizeof(E)];  // rows an odd number of 4-byte words apart: no bank conflicts
  const int64_t r = blockIdx.z / t.Bs, s = blockIdx.z % t.Bs;
  const int64_t i0 = int64_t(blockIdx.y) * T, j0 = int64_t(blockIdx.x) * T;
  in += r * t.in_r + s * t.in_s;
  out += t.tap_order > 0 ? t.order[blockIdx.z] * t.out_s : r * t.out_r + s * t.out_s;
  constexpr int RY = T / kTapRows, RX = T / 32;  // a thread's rows and columns of the tile
  const int y0 = threadIdx.y, x0 = threadIdx.x;
  // Every load into registers first (predicated, none waiting on another), then into the tile: a
  // loop that stored each load to shared memory before the next one waited out every load's
  // latency in turn (4 a thread with 32 x 32 tiles, as the comment above the kernel says).
  E v[RY][RX];
#pragma unroll
  for (int a = 0; a < RY; ++a)
#pragma unroll
    for (int b = 0; b < RX; ++b) {
      const int64_t i = i0 + y0 + a * kTapRows, j = j0 + x0 + b * 32;
      v[a][b] = i < t.I && j < t.J ? in[i * t.in_i + j * t.in_j] : E(0);
    }
#pragma unroll
  for (int a = 0; a < RY; ++a)
#pragma unroll
    for (int b = 0; b < RX; ++b) tile[y0 + a * kTapRows][x0 + b * 32] = v[a][b];
  __syncthreads();
#pragma unroll
  for (int a = 0; a < RY; ++a)
#pragma unroll
    for (int b = 0; b < RX; ++b) {
      const int y = y0 + a * kTapRows, x = x0 + b * 32;
      const int64_t j = j0 + y, i = i0 + x;
      if (i < t.I && j < t.J) out[j * t.out_j + i * t.out_i] = tile[x][y];
    }
}

void tap_transpose(const void* in, void* out, const TapTranspose& t, int64_t element_size) {
  if (t.I == 0 || t.J == 0 || t.Br * t.Bs == 0) return;
  constexpr int T = kTapTile;
  TORCH_INTERNAL_ASSERT(t.Br * t.Bs <= 65535 && (t.I + T - 1) / T <= 65535, "tileops: tap_transpose grid");
  const dim3 grid(unsigned((t.J + T - 1) / T), unsigned((t.I + T - 1) / T), unsigned(t.Br * t.Bs)),
      block(32, kTapRows);
  const auto stream = at::cuda::getCurrentCUDAStream();
  auto go = [&](auto tag) {
    using E = decltype(tag);
    tap_transpose_kernel<E><<<grid, block, 0, stream>>>(static_cast<const E*>(in), static_cast<E*>(out), t);
  };
  if (element_size == 2) go(uint16_t{});
  else go(uint32_t{});
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Images per chunk so that one column buffer stays under kColsLimit elements.
int64_t images_per_chunk(const ConvOperands& c, int64_t Kp) {
  return std::max<int64_t>(1, std::min<int64_t>(c.N, kColsLimit / std::max<int64_t>(1, c.P * c.Q * Kp)));
}

// A lowered GEMM that the Hopper implicit-GEMM kernels run with conv a's geometry, gathering
// from x (channels_last, as gather_ready left it) instead of the op's input.
GemmArgs gathering(GemmArgs g, const GemmArgs& a, const at::Tensor& x) {
  g.conv = a.conv;
  g.conv.x = const_cast<void*>(x.const_data_ptr());
  for (int i = 0; i < 4; ++i) g.conv.xs[i] = x.stride(i);
  return g;
}

// conv_smallc.cu's kernel on x as gather_ready left it (channels_last, a copy only if x was not),
// writing the row-major [N*P*Q, K] matrix `out` (y itself where y is channels_last) with `epi`.
bool smallc_on_rows(const GemmArgs& a, const at::Tensor& x, const at::Tensor& out, const Fused& epi) {
  GemmArgs f = gathering(a, a, x);
  f.fused() = epi;
  auto& c = f.conv;
  const int64_t ld = out.stride(0);
  c.y = out.data_ptr();
  c.ys[0] = c.P * c.Q * ld, c.ys[1] = 1, c.ys[2] = c.Q * ld, c.ys[3] = ld;
  return conv_fwd_smallc(f);
}

// Hopper implicit GEMM (no column buffer): the A tile is gathered from x inside the kernel. C:
// rows ldc apart from c on, or, with rq > 0, rows in groups of rq (MatmulOperands::rq), srq apart
// (a data gradient's phase of an even-sized dx, dgrad_phases.h: written in place, no buffer and copy).
// False where the Hopper kernels cannot run.
bool implicit_sm90(const GemmArgs& a, const at::Tensor& x, const at::Tensor& wr, void* c_ptr, int64_t ldc,
                   const Fused& epi, int64_t rq = 0, int64_t srq = 0) {
  const auto& c = a.conv;
  MatmulOperands mm{nullptr, wr.const_data_ptr(), c_ptr, {0, 0, 0}, {0, wr.stride(1), wr.stride(0)}, {0, ldc, 1}};
  mm.rq = rq, mm.srq = srq;
  return conv_fwd_sm90(gathering(lowered(a, epi, 1, c.N * c.P * c.Q, c.K, c.R * c.S * c.C, mm), a, x));
}
// y's rows as such groups: channel-contiguous, rows (n, p) one stride apart, q another. No
// residual there (the epilogue would read it by its offset from C).
bool grouped_rows(const at::Tensor& y) { return y.stride(1) == 1 && y.stride(0) == y.size(2) * y.stride(2); }

// Weights of at most this many elements, in a layout other than channels_last, take the weight
// gradient's output straight into dw (its rows, (r, s, c), through a grouped-row map; its columns,
// k, dw's k stride apart): the stores scatter 2-byte values, which is cheaper than the
// tap_transpose launch only while dw is small
// (docs/kernels/conv-lowered.md#weight-gradient-conv_wgrad_lowered).
constexpr int64_t kWgradDirectMax = int64_t(1) << 17;

// Hopper implicit weight gradient (no column buffer): dW^T [R*S*C, K] = cols(x)^T . dY with the
// columns gathered inside the kernel, dY's rows read in place (channels_last). A channels_last dw
// [K, R*S*C] is dW^T column-major: the kernel stores 16-byte runs down its columns (and a split's
// reduce writes dw's rows), any size. Else into dw itself where it is small and its taps are one
// stride apart (KCRS: row (t, c) at t * dw's s stride + c * its c stride, rq = C), else into a
// [R*S*C, K] buffer that one tap_transpose writes into dw's (K, C, R, S) in whatever layout dw has.
bool implicit_wgrad_sm90(const GemmArgs& a, const at::Tensor& x, const at::Tensor& dy, const at::Tensor& dw) {
  const auto& c = a.conv;
  if (x.element_size() != 2 || !nhwc_dense(x) || !nhwc_dense(dy)) return false;
  const int64_t npq = c.N * c.P * c.Q, rsc = c.R * c.S * c.C;
  const bool cols = dw.is_contiguous(at::MemoryFormat::ChannelsLast);  // 1x1: KCRS too
  const bool direct = cols || (rsc * c.K <= kWgradDirectMax && dw.stride(2) == c.S * dw.stride(3));
  at::Tensor dwt;
  MatmulOperands mm{nullptr, dy.const_data_ptr(), nullptr, {0, 0, 0}, {0, c.K, 1}, {0, c.K, 1}};
  if (cols) {
    mm.c = dw.data_ptr();
    mm.sc[1] = 1, mm.sc[2] = rsc;
  } else if (direct) {
    mm.c = dw.data_ptr();
    mm.sc[1] = dw.stride(1), mm.sc[2] = dw.stride(0), mm.rq = c.C, mm.srq = dw.stride(3);
  } else {
    dwt = at::empty({rsc, c.K}, cuda_options(a.dtype));
    mm.c = dwt.data_ptr();
  }
  if (!conv_wgrad_sm90(gathering(lowered(a, Fused{}, 1, rsc, c.K, npq, mm), a, x))) return false;
  if (direct) return true;
  // dW^T [(r, s, c), k] -> dw (k, c, r, s): a transposition per tap
  const TapTranspose t{c.C, c.K, c.R, c.S, c.K, 1, c.S * c.C * c.K, c.C * c.K,
                       dw.stride(1), dw.stride(0), dw.stride(2), dw.stride(3)};
  tap_transpose(dwt.const_data_ptr(), dw.data_ptr(), t, dw.element_size());
  return true;
}

// A 1x1 conv that is a GEMM over pixels: stride 1, no padding, output sides those of the input (a
// data gradient's phase may have P != H).
bool plain_1x1(const ConvOperands& c) {
  return c.R == 1 && c.S == 1 && c.sh == 1 && c.sw == 1 && c.ph == 0 && c.pw == 0 && c.P == c.H && c.Q == c.W;
}

// What gemm_conv_vec.cuh's implicit kernels take: fp32 with TF32 off, groups == 1, an input x (of
// strides xs) whose channels are not contiguous (NCHW).
bool strict_fp32_nchw(const GemmArgs& a, const int64_t* xs) {
  return a.dtype == at::kFloat && !a.allow_tf32 && a.conv.groups == 1 && xs[1] != 1;
}

// The forward implicit GEMM of gemm_conv_vec.cuh, which reads x and writes y where they are. Its
// channel chunks of BK pad C: taken where they pad at most 1/8 (not the 3-channel stem, which
// conv_smallc.cu's fp32 kernel takes).
bool simt_gathers(const GemmArgs& a, const int64_t* xs) {
  const auto& c = a.conv;
  const int64_t bk = VecF32::BK, padded = (c.C + bk - 1) / bk * bk;
  return strict_fp32_nchw(a, xs) && c.C > 0 && padded * 8 <= c.C * 9 &&
         std::max({c.H, c.W, c.P, c.Q}) < (int64_t(1) << 24) && c.R * c.S * (padded / bk) < (int64_t(1) << 30);
}

// A 1x1 stride-1 unpadded conv of an NCHW input into an NCHW output, without bias: per image,
// Y[n] (K x HW) = W (K x C) . X[n] (C x HW), a batched GEMM on the tensors as they are (the
// general path would copy x to channels_last and the output back). The epilogue's bias runs
// along output columns, here pixels, so a conv with bias takes the general path.
// fp32 NCHW with at most 64 output channels takes the implicit GEMM instead (simt_gathers): here
// the GEMM rows are the output channels, half of each 128-row tile empty
// (docs/kernels/conv-lowered.md#forward-conv_fwd_lowered-in-order-and-why).
bool nchw_1x1_ok(const GemmArgs& a) {
  const auto& c = a.conv;
  if (c.K <= VecF32N64::BN && simt_gathers(a, c.xs)) return false;
  const bool shape = plain_1x1(c) && a.bias == nullptr;
  const bool rows = c.xs[3] == 1 && c.xs[2] == c.W && c.ys[3] == 1 && c.ys[2] == c.Q && c.xs[1] != 1;
  return shape && rows && c.N <= 65535;
}
bool nchw_1x1(const GemmArgs& a) {
  if (!nchw_1x1_ok(a)) return false;
  const auto& c = a.conv;
  const MatmulOperands mm{c.w, c.x, c.y, {0, c.ws[0], c.ws[1]}, {c.xs[0], c.xs[1], 1}, {c.ys[0], c.ys[1], 1}};
  gemm_cuda_matmul(lowered(a, a.fused(), c.N, c.K, c.H * c.W, c.C, mm));
  return true;
}

// What phases_in_one (below) takes: a strided data gradient in 16 bits on the Hopper kernels, at
// most kTapOrderMax taps, dx channels_last with sides the strides divide (so every phase's
// output rows are one stride apart in groups: implicit_sm90's rq). It also checks each phase.
bool phases_in_one_ok(const GemmArgs& a) {
  const auto& c = a.conv;
  return (c.sh > 1 || c.sw > 1) && c10::elementSize(a.dtype) == 2 && c.R * c.S <= kTapOrderMax &&
         tileops::nhwc_dense(c.xs, c.C, c.H, c.W) && c.H % c.sh == 0 && c.W % c.sw == 0 &&
         sm90_unavailable(a) == nullptr;
}

// conv_dgrad's heuristic for strides up to 2 x 2: phases (dgrad_phases.h) are sh * sw launches of short
// reductions (1 to 4 taps), which beat GEMM + col2im (a column buffer of R*S / (sh*sw) times dx,
// written and read back) only on Hopper's implicit kernels (16-bit, 64-channel multiples) and a
// large dx (>= 2^24 elements; docs/kernels/conv-lowered.md#data-gradient-conv_dgrad_lowered).
// Where all phases go in one launch (phases_in_one_ok), which costs one transposition and one
// launch instead of a pair per phase, it is taken at every size.
bool dgrad_by_phases(const GemmArgs& a) {
  const auto& c = a.conv;
  if (c10::elementSize(a.dtype) != 2 || c.C % 64 != 0 || c.K % 64 != 0 || sm90_unavailable(a) != nullptr) return false;
  return phases_in_one_ok(a) || c.N * c.C * c.H * c.W >= (int64_t(1) << 24);
}

// conv_vec_kernel on problem a: the weight as rows [tap][c][ldb] (one tap_transpose), then one
// launch; where the output tiles leave SMs idle, split-K over grid z into a workspace that
// splitk_reduce sums into y (rows of y one pixel stride apart within an image) with the epilogue.
template <class Cfg>
void conv_simt(const GemmArgs& a) {
  const auto& c = a.conv;
  const int64_t M = c.N * c.P * c.Q, N = c.K, ldb = (c.K + 3) / 4 * 4;
  if (M == 0 || N == 0) return;
  at::Tensor wt = at::empty({c.R * c.S * c.C * ldb}, cuda_options(a.dtype));
  tap_transpose(c.w, wt.data_ptr(), TapTranspose{c.K, c.C, c.R, c.S, c.ws[0], c.ws[1], c.ws[2], c.ws[3], 1, ldb,
                                                 c.S * c.C * ldb, c.C * ldb}, 4);
  const int cchunks = int((c.C + Cfg::BK - 1) / Cfg::BK), ktiles = int(c.R * c.S) * cchunks;
  const int64_t mt = (M + Cfg::BM - 1) / Cfg::BM, nt = (N + Cfg::BN - 1) / Cfg::BN;
  const bool pixel_rows = c.ys[2] == c.Q * c.ys[3];  // the reduce's MatmulProblem reaches y's pixels
  const SplitPlan sp = plan_split(mt * nt, int64_t(ktiles) * Cfg::BK, Cfg::BK, 1, M, N, kMinSplitK, pixel_rows);
  const int splits = int(sp.splits);
  const ConvVecArgs v{static_cast<const float*>(wt.const_data_ptr()), ldb, cchunks, int(sp.kper),
                      c.ys[1] == 1 && c.ys[0] % 4 == 0 && c.ys[2] % 4 == 0 && c.ys[3] % 4 == 0 &&
                          reinterpret_cast<uintptr_t>(c.y) % 16 == 0,
                      c.ys[3] == 1 && pixel_rows && c.P * c.Q % 4 == 0 && c.ys[0] % 4 == 0 && c.ys[1] % 4 == 0 &&
                          reinterpret_cast<uintptr_t>(c.y) % 16 == 0,
                      splits > 1 ? sp.work.data_ptr<float>() : nullptr};
  const Epilogue<float> epi = splits > 1 ? Epilogue<float>{nullptr, Act::None} : epilogue_of<float>(a);
  conv_vec_kernel<Cfg><<<dim3(unsigned(mt), unsigned(nt), unsigned(splits)), Cfg::THREADS, 0,
                         at::cuda::getCurrentCUDAStream()>>>(ConvFwdProblem<float>(c), M, N, epi, v);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (splits > 1) {  // y as a matmul output: row m = (image, pixel) in groups of P*Q, column = channel
    MatmulOperands mm{nullptr, nullptr, c.y, {0, 0, 0}, {0, 0, 0}, {0, c.ys[3], c.ys[1]}};
    mm.rq = c.P * c.Q, mm.srq = c.ys[0];
    splitk_reduce<float, float>(sp.work.data_ptr<float>(), splits, lowered(a, a.fused(), 1, M, N, 0, mm));
  }
}

bool implicit_simt(const GemmArgs& a) {
  if (!simt_gathers(a, a.conv.xs)) return false;
  if (a.conv.K <= VecF32N64::BN) conv_simt<VecF32N64>(a);
  else conv_simt<VecF32>(a);
  return true;
}

// fp32 NCHW weight gradient: conv_wgrad_vec_kernel (gemm_conv_vec.cuh) reads x and dY where they
// are (the lowered path copied x to channels_last, wrote and read back a column buffer of R*S times
// x, transposed dY and copied dW), split-K over pixels into a workspace that splitk_reduce sums
// into dW, whose taps (GEMM rows) must then lie one stride apart (else into a [taps, K] buffer
// copied into dW). Offsets into x are 32-bit.
template <class Cfg>
void wgrad_simt(const GemmArgs& a) {
  const auto& c = a.conv;
  const int64_t M = c.C * c.R * c.S, N = c.K, PQ = c.P * c.Q;
  const int pq_chunks = int((PQ + Cfg::BK - 1) / Cfg::BK), ktiles = int(c.N) * pq_chunks;
  const int64_t mt = (M + Cfg::BM - 1) / Cfg::BM, nt = (N + Cfg::BN - 1) / Cfg::BN;
  const SplitPlan sp = plan_split(mt * nt, int64_t(ktiles) * Cfg::BK, Cfg::BK, 1, M, N);
  const int splits = int(sp.splits);
  const bool tap_rows = c.ws[2] == c.S * c.ws[3] && c.ws[1] == c.R * c.ws[2];  // tap m at m * ws[3]
  const WgradVecArgs v{pq_chunks, int(sp.kper),
                       tap_rows && c.ws[3] == 1 && M % 4 == 0 && c.ws[0] % 4 == 0 &&
                           reinterpret_cast<uintptr_t>(c.w) % 16 == 0,
                       splits > 1 ? sp.work.data_ptr<float>() : nullptr};
  conv_wgrad_vec_kernel<Cfg><<<dim3(unsigned(mt), unsigned(nt), unsigned(splits)), Cfg::THREADS, 0,
                               at::cuda::getCurrentCUDAStream()>>>(ConvWgradProblem<float>(c), M, N, v);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (splits == 1) return;
  const at::Tensor dw = wrap(c.w, {c.K, c.C, c.R, c.S}, c.ws, a);
  at::Tensor rows = tap_rows ? at::Tensor() : at::empty({M, N}, cuda_options(a.dtype));  // [taps, K]
  const MatmulOperands mm{nullptr, nullptr, tap_rows ? c.w : rows.data_ptr(), {0, 0, 0}, {0, 0, 0},
                          {0, tap_rows ? c.ws[3] : N, tap_rows ? c.ws[0] : 1}};
  splitk_reduce<float, float>(sp.work.data_ptr<float>(), splits, lowered(a, Fused{}, 1, M, N, 0, mm));
  if (!tap_rows) dw.permute({1, 2, 3, 0}).copy_(rows.view({c.C, c.R, c.S, c.K}));
}

// Where it runs: its main loop takes ~20% more instructions per k tile than the matmul kernel's (tap
// table reads, scalar loads), which the lowered path's column buffer (8 bytes of traffic per pixel
// and tap) outweighs only against few output channels, or in 1x1 layers, whose lowered path copies
// x and dY as well (docs/kernels/conv-lowered.md#weight-gradient-conv_wgrad_lowered).
bool implicit_wgrad_simt(const GemmArgs& a) {
  const auto& c = a.conv;
  if (c.K > 128 && c.R * c.S > 1) return false;
  const int64_t span = (c.C - 1) * std::abs(c.xs[1]) + (c.R - 1) * c.dh * std::abs(c.xs[2]) +
                       (c.S - 1) * c.dw * std::abs(c.xs[3]);
  if (!strict_fp32_nchw(a, c.xs) || c.ys[1] == 1 || c.C * c.K == 0 ||
      span >= (int64_t(1) << 31) || std::max({c.H, c.W, c.P * c.Q + 16}) >= (int64_t(1) << 30) ||
      c.N * ((c.P * c.Q + 15) / 16) >= (int64_t(1) << 31))
    return false;
  if (c.K <= VecF32N64::BN) wgrad_simt<VecF32N64>(a);
  else wgrad_simt<VecF32>(a);
  return true;
}

bool lowerable(const GemmArgs& a) {
  return a.conv.groups == 1 && (a.dtype == at::kHalf || a.dtype == at::kBFloat16 || a.dtype == at::kFloat);
}

}  // namespace

bool conv_fwd_lowered(const GemmArgs& a) {
  if (!lowerable(a)) return false;
  if (nchw_1x1(a) || implicit_simt(a) || conv_fwd_smallc_f32(a)) return true;
  const auto& c = a.conv;
  const Geom<> g = geom(c);
  const at::Tensor x = gather_ready(wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a));
  const at::Tensor w = wrap(c.w, {c.K, c.C, c.R, c.S}, c.ws, a);
  const at::Tensor y = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a);
  const bool kmajor = x.element_size() == 2;
  const bool y_rows = nhwc_dense(y);  // else the GEMM writes a [NPQ, K] buffer copied into y
  at::Tensor wr;  // weight rows, made once where a path needs them (the small-C kernel reads w)
  if (kmajor && !y_rows && a.residual == nullptr && c.N * c.P * c.Q > 0 && grouped_rows(y)) {
    wr = weight_rows(w, g.Kp);
    if (implicit_sm90(a, x, wr, y.data_ptr(), y.stride(3), a.fused(), c.Q, y.stride(2))) return true;
  }
  const at::Tensor out = y_rows ? y.permute({0, 2, 3, 1}).reshape({c.N * c.P * c.Q, c.K})
                                : at::empty({c.N * c.P * c.Q, c.K}, cuda_options(a.dtype));
  // The epilogue: bias, activation, residual. y_rows: out is y's memory, and the residual (y's
  // strides) is read where the op layer put it. Else the GEMM writes the [NPQ, K] buffer, so
  // the residual goes along as a channels_last copy, which is laid out as that buffer (still
  // fused: one copy of the residual instead of an unfused add and activation over y).
  Fused epi = a.fused();
  at::Tensor res_rows;
  if (a.residual != nullptr && !y_rows) {
    res_rows = wrap(const_cast<void*>(a.residual), {c.N, c.K, c.P, c.Q}, c.ys, a).contiguous(at::MemoryFormat::ChannelsLast);
    epi.residual = res_rows.const_data_ptr();
    epi.out_base = out.const_data_ptr();
  }
  if (kmajor && smallc_on_rows(a, x, out, epi)) {  // few channels: one fused kernel, no weight rows
    if (!y_rows) y.copy_(out.view({c.N, c.P, c.Q, c.K}).permute({0, 3, 1, 2}));
    return true;
  }
  // fp16/bf16 take B as a linear weight (Hopper's K-major path); fp32 as row-major K x N,
  // which suits the SIMT families' row loads
  if (!wr.defined()) wr = weight_rows(w, g.Kp);
  if (!kmajor) wr = wr.t().contiguous();
  const bool direct = plain_1x1(c) && g.Kp == c.C && nhwc_dense(x);
  if (direct) {
    gemm(a, x.permute({0, 2, 3, 1}).reshape({c.N * c.H * c.W, c.C}), wr, kmajor, out, epi);
  } else if (kmajor && implicit_sm90(a, x, wr, out.data_ptr(), out.stride(0), epi)) {
    // Hopper gathered the columns itself
  } else {
    const int64_t per = images_per_chunk(c, g.Kp);
    at::Tensor cols = at::empty({per * c.P * c.Q, g.Kp}, cuda_options(a.dtype));
    for (int64_t n0 = 0; n0 < c.N; n0 += per) {
      const int64_t nb = std::min(per, c.N - n0), rows = nb * c.P * c.Q;
      at::Tensor cv = cols.narrow(0, 0, rows);
      im2col(a, x, g, n0, nb, cv);
      gemm(a, cv, wr, kmajor, out.narrow(0, n0 * c.P * c.Q, rows), epi);
    }
  }
  if (!y_rows) y.copy_(out.view({c.N, c.P, c.Q, c.K}).permute({0, 3, 1, 2}));
  return true;
}

namespace {

// A strided data gradient's phases in one Hopper launch (conv_dgrad_phases_sm90): B is one
// weight [C][R*S taps][K] of all taps, flipped and ordered phase after phase (each phase's taps
// as its forward conv reads them: tap j along h is w's last - j * step) by one tap_transpose;
// each phase's output a view of dx in row groups (dx channels_last, sides the strides divide).
// The dead phases, which no tap reaches, go along without k tiles: the launch writes their zeros
// (no fill of dx first). False, with nothing run, where that launch cannot take the problem.
using PhaseList = std::vector<std::pair<int64_t, int64_t>>;  // phases (ah, aw)
bool phases_in_one(const GemmArgs& a, const at::Tensor& dy, const std::vector<DgradPhase>& along_h,
                   const std::vector<DgradPhase>& along_w, const PhaseList& live, const PhaseList& dead) {
  const auto& c = a.conv;
  if (!phases_in_one_ok(a)) return false;
  const int64_t es = int64_t(c10::elementSize(a.dtype)), ld = c.R * c.S * c.K;
  at::Tensor wt = at::empty({c.C, ld}, cuda_options(a.dtype));
  TapTranspose t{c.K, c.C, c.R, c.S, c.ws[0], c.ws[1], c.ws[2], c.ws[3], 1, ld, 0, c.K};
  t.tap_order = int(c.R * c.S);
  // every tap belongs to one phase along each side (dgrad_phases.h); a phase's first position
  auto first_tap = [&](int64_t ah, int64_t aw) {
    int64_t pos = 0;
    for (int64_t i = 0; i < c.sh; ++i)
      for (int64_t j = 0; j < c.sw; ++j)
        if (i < ah || (i == ah && j < aw)) pos += along_h[i].taps * along_w[j].taps;
    return pos;
  };
  for (int64_t ah = 0; ah < c.sh; ++ah) {
    for (int64_t aw = 0; aw < c.sw; ++aw) {
      const DgradPhase &fh = along_h[ah], &fw = along_w[aw];
      for (int64_t jr = 0; jr < fh.taps; ++jr)
        for (int64_t js = 0; js < fw.taps; ++js) {
          const int64_t r = fh.r0 + (fh.taps - 1 - jr) * fh.step, s = fw.r0 + (fw.taps - 1 - js) * fw.step;
          t.order[r * c.S + s] = int16_t(first_tap(ah, aw) + jr * fw.taps + js);
        }
    }
  }
  std::vector<GemmArgs> phases;
  std::vector<int64_t> b_k0;  // each phase's first column of wt
  const void* b = wt.const_data_ptr();
  for (const PhaseList* list : {&live, &dead}) {
    for (const auto& [ah, aw] : *list) {
      b_k0.push_back(first_tap(ah, aw) * c.K);
      GemmArgs f = dgrad_as_forward(a, along_h[ah], along_w[aw], ah, aw, dy.const_data_ptr(), dy.strides().data(),
                                    b, c.ws);
      auto& fc = f.conv;  // its y: the phase's view of dx, as grouped_rows takes it
      if (fc.ys[1] != 1 || fc.ys[0] != fc.P * fc.ys[2]) return false;
      const bool zeros = list == &dead;
      if (zeros) fc.R = fc.S = 1;  // no k tiles (the kernel decodes a first tap with these, never loads it)
      MatmulOperands mm{nullptr, b, fc.y, {0, 0, 0}, {0, 1, ld}, {0, fc.ys[3], 1}};
      mm.rq = fc.Q, mm.srq = fc.ys[2];
      GemmArgs g = lowered(f, Fused{}, 1, fc.N * fc.P * fc.Q, fc.K, zeros ? 0 : fc.R * fc.S * fc.C, mm);
      g.conv = fc;
      phases.push_back(g);
    }
  }
  return conv_dgrad_phases_sm90(phases, b_k0, ld, ld, [&] { tap_transpose(c.w, wt.data_ptr(), t, es); });
}

// A 16-bit 1x1 stride-1 unpadded data gradient is one GEMM: dX rows [N*H*W, C] =
// dY rows [N*P*Q, K] . w as a row-major [K][C] matrix, w read in place (Hopper's TMA takes a B
// contiguous along N; the phase path would first write its flipped transposition, a launch more:
// docs/kernels/conv-lowered.md#data-gradient-conv_dgrad_lowered). dx and dy channels_last-dense,
// w's channels contiguous (1x1 weights, KCRS or channels_last). False: not taken.
bool dgrad_1x1(const GemmArgs& a) {
  const auto& c = a.conv;
  if (!plain_1x1(c) || c10::elementSize(a.dtype) != 2 || c.ws[1] != 1 || !tileops::nhwc_dense(c.xs, c.C, c.H, c.W) ||
      !tileops::nhwc_dense(c.ys, c.K, c.P, c.Q))
    return false;  // refused before any tensor is made
  const at::Tensor dx = wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a);
  const at::Tensor dy = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a);
  const at::Tensor w = device_view(c.w, {c.K, c.C}, {c.ws[0], 1}, a.dtype);
  gemm(a, dy.permute({0, 2, 3, 1}).reshape({c.N * c.P * c.Q, c.K}), w, false,
       dx.permute({0, 2, 3, 1}).reshape({c.N * c.H * c.W, c.C}));
  return true;
}

// A stride-1 data gradient in 16 bits on Hopper with w read in place (conv_dgrad_flipped_sm90): its
// one phase (ph, pw), dx and w channels_last-dense, dx written as the GEMM's rows. False: not taken.
bool flipped_in_place(const GemmArgs& a, const DgradPhase& ph, const DgradPhase& pw, const at::Tensor& dy) {
  const auto& c = a.conv;
  // (dtype and channel counts: conv_dgrad_flipped_sm90's conv_sm90_ok)
  if (c.groups != 1 || !tileops::nhwc_dense(c.ws, c.C, c.R, c.S) ||
      !tileops::nhwc_dense(c.xs, c.C, c.H, c.W) || ph.out != c.H || pw.out != c.W || ph.taps != c.R || pw.taps != c.S)
    return false;
  const GemmArgs f = dgrad_as_forward(a, ph, pw, 0, 0, dy.const_data_ptr(), dy.strides().data(), c.w, c.ws);
  const auto& fc = f.conv;
  MatmulOperands mm{nullptr, c.w, c.x, {0, 0, 0}, {0, 0, 0}, {0, c.C, 1}};
  GemmArgs g = lowered(f, Fused{}, 1, fc.N * fc.P * fc.Q, fc.K, fc.R * fc.S * fc.C, mm);
  g.conv = fc;
  return conv_dgrad_flipped_sm90(g, c.w);
}

// The data gradient as one forward conv per phase of dx (dgrad_phases.h, dgrad_phase), on the forward's
// fast paths (1x1 GEMM, Hopper implicit GEMM); the Hopper one-tile kernels write an even-sized
// phase in place; strided ones on Hopper, all phases in one launch (phases_in_one).
void dgrad_phases(const GemmArgs& a) {
  const auto& c = a.conv;
  const at::Tensor dx = wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a);
  // once for all phases, unless the phases gather from dy as it is (its fp32 NCHW forward)
  const at::Tensor dy_in = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a);
  const at::Tensor dy = simt_gathers(dgrad_as_forward(a, c.w, c.ws), c.ys) ? dy_in : gather_ready(dy_in);
  std::vector<DgradPhase> along_h, along_w;  // the phases of each dimension
  for (int64_t ah = 0; ah < c.sh; ++ah) along_h.push_back(dgrad_phase(ah, c.H, c.R, c.sh, c.ph, c.dh));
  for (int64_t aw = 0; aw < c.sw; ++aw) along_w.push_back(dgrad_phase(aw, c.W, c.S, c.sw, c.pw, c.dw));
  // no tap reaches a phase (zeros): none, or all of its dy rows skipped
  auto empty = [](const DgradPhase& f, int64_t rows) { return f.taps == 0 || f.skip >= rows; };
  PhaseList live, dead;  // the phases (ah, aw) with dx pixels that taps reach, and that none reaches
  for (int64_t ah = 0; ah < c.sh; ++ah)
    for (int64_t aw = 0; aw < c.sw; ++aw)
      if (along_h[ah].out > 0 && along_w[aw].out > 0)
        (empty(along_h[ah], c.P) || empty(along_w[aw], c.Q) ? dead : live).emplace_back(ah, aw);
  if (phases_in_one(a, dy, along_h, along_w, live, dead)) return;
  // else dead phases filled: where dx is dense, all of it first (a strided fill of a phase took as
  // long), and the live phases at once (concurrently): each 1-2 waves of short reductions
  if (!dead.empty() && dx.is_non_overlapping_and_dense()) {
    dx.zero_();
  } else {
    for (const auto& [ah, aw] : dead) dx.slice(2, ah, c.H, c.sh).slice(3, aw, c.W, c.sw).zero_();
  }
  // A phase's kernel, (C, K, taps_h, taps_w): its taps r0, r0 + step, ..., last, flipped (tap j is
  // w's last - j * step). As read in place: w from its last tap, with negative tap strides.
  const int64_t es = int64_t(c10::elementSize(a.dtype));
  struct Taps {
    const void* base;
    int64_t ws[4];
  };
  auto flipped = [&](const DgradPhase& fh, const DgradPhase& fw) {
    const int64_t last = (fh.r0 + (fh.taps - 1) * fh.step) * c.ws[2] + (fw.r0 + (fw.taps - 1) * fw.step) * c.ws[3];
    return Taps{static_cast<const char*>(c.w) + last * es, {c.ws[1], c.ws[0], -fh.step * c.ws[2], -fw.step * c.ws[3]}};
  };
  // ... and as one tap_transpose's copy, rows [C][taps_h][taps_w][K], so that conv_fwd_lowered's
  // weight_rows takes them as they are (a view; no flip and copy per call).
  auto phase_kernel = [&](const DgradPhase& fh, const DgradPhase& fw) {
    at::Tensor rows = at::empty({c.C, fh.taps, fw.taps, c.K}, cuda_options(a.dtype));
    const Taps f = flipped(fh, fw);
    const TapTranspose t{c.K, c.C, fh.taps, fw.taps, f.ws[1], f.ws[0], f.ws[2], f.ws[3],
                         1, fh.taps * fw.taps * c.K, fw.taps * c.K, c.K};
    tap_transpose(f.base, rows.data_ptr(), t, es);
    return rows.permute({0, 3, 1, 2});
  };
  std::vector<std::function<void()>> phases;
  for (const auto& [ah, aw] : live) {
    phases.push_back([&, ah = ah, aw = aw] {
      const DgradPhase &ph = along_h[ah], &pw = along_w[aw];
      if (c.sh == 1 && c.sw == 1 && flipped_in_place(a, ph, pw, dy)) return;
      // where conv_fwd_lowered would take the fp32 implicit kernel, it gets the taps in place: its own
      // [tap][c][ldb] copy reads any strides, so the rows copy would be a second pass for nothing
      const Taps f = flipped(ph, pw);
      const GemmArgs in_place =
          dgrad_as_forward(a, ph, pw, ah, aw, dy.const_data_ptr(), dy.strides().data(), f.base, f.ws);
      if (!nchw_1x1_ok(in_place) && implicit_simt(in_place)) return;
      const at::Tensor wt = phase_kernel(ph, pw);
      conv_fwd_lowered(dgrad_as_forward(a, ph, pw, ah, aw, dy.const_data_ptr(), dy.strides().data(),
                                        wt.const_data_ptr(), wt.strides().data()));
    });
  }
  concurrently(phases);
}

// The data gradient as dcols = dY . W (a GEMM) and a col2im gather into dx.
void dgrad_col2im(const GemmArgs& a) {
  const auto& c = a.conv;
  const Geom<> g = geom(c);
  const at::Tensor dx = wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a);
  const at::Tensor w = wrap(c.w, {c.K, c.C, c.R, c.S}, c.ws, a);
  const at::Tensor dy = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor wr = weight_rows(w, g.Kp);  // [K, Kp]: B row-major (K x Kp)
  const at::Tensor dy_rows = dy.permute({0, 2, 3, 1}).reshape({c.N * c.P * c.Q, c.K});
  const int64_t per = images_per_chunk(c, g.Kp);
  at::Tensor dcols = at::empty({per * c.P * c.Q, g.Kp}, cuda_options(a.dtype));
  const bool vec = vec_ok(dx) && dx.element_size() == 2;
  // windows that tile dx exactly (patch embeddings): dx is a permutation of dcols' columns
  const bool tiles = c.ph == 0 && c.pw == 0 && c.sh == c.R && c.sw == c.S && c.dh == 1 && c.dw == 1 &&
                     c.P * c.R == c.H && c.Q * c.S == c.W;
  const int runs = tiles ? runs_vector(dx, g) : 0;
  const auto stream = at::cuda::getCurrentCUDAStream();
  for (int64_t n0 = 0; n0 < c.N; n0 += per) {
    const int64_t nb = std::min(per, c.N - n0), rows = nb * c.P * c.Q;
    gemm(a, dy_rows.narrow(0, n0 * c.P * c.Q, rows), wr, false, dcols.narrow(0, 0, rows));
    with_gather_dtype(a, [&](auto tag) {
      with_index(std::max({nb * c.H * c.W * ((c.C + 7) / 8 * 8), rows * g.Kp, n0 + nb}), [&](auto itag) {
        using T = decltype(tag);
        using I = decltype(itag);
        const auto* src = static_cast<const T*>(dcols.const_data_ptr());
        auto* out = static_cast<T*>(dx.data_ptr());
        const unsigned b = blocks_for(nb * c.H * c.W * ((c.C + 7) / 8));
        const int64_t* xs = dx.strides().data();
        if (runs > 0) launch_runs<T, true, I>(runs, out, xs[0], xs[2], g.as<I>(), I(n0), I(rows), const_cast<T*>(src));
        else if (vec) col2im_kernel<T, true, I><<<b, 256, 0, stream>>>(src, g.as<I>(), I(n0), I(nb), out, xs[0], xs[1], xs[2], xs[3]);
        else col2im_kernel<T, false, I><<<b, 256, 0, stream>>>(src, g.as<I>(), I(n0), I(nb), out, xs[0], xs[1], xs[2], xs[3]);
      });
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

}  // namespace

// Stride 1: the one phase (the transposed conv). Strides up to 2 x 2: phases or col2im, autotuned
// (family "conv_dgrad"; the heuristic: dgrad_by_phases). Larger strides (patch embeddings: no
// overlap, sh * sw launches) keep col2im, which is then a plain permutation (where the windows tile
// dx exactly, runs_copy_kernel's scatter).
const std::vector<std::string> kDgradNames = {"phases", "col2im"};
const autotune::Family kDgradFamily("conv_dgrad", [] { return kDgradNames; });

bool conv_dgrad_lowered(const GemmArgs& a) {
  if (!lowerable(a)) return false;
  const auto& c = a.conv;
  if (c.sh == 1 && c.sw == 1) {
    if (!dgrad_1x1(a)) dgrad_phases(a);
  } else if (c.sh * c.sw > 4) {
    dgrad_col2im(a);
  } else {
    autotune::run(
        [&] {
          return autotune::op_key({"conv_dgrad", c10::toString(a.dtype),
                                   autotune::shape_class(c.N * c.H * c.W, c.C, c.K * c.R * c.S, 1),
                                   "r" + std::to_string(c.R) + "s" + std::to_string(c.S),
                                   "st" + std::to_string(c.sh) + "x" + std::to_string(c.sw)});
        },
        kDgradNames, dgrad_by_phases(a) ? 0 : 1, [&](int i) { i == 0 ? dgrad_phases(a) : dgrad_col2im(a); });
  }
  return true;
}

bool conv_wgrad_lowered(const GemmArgs& a) {
  if (!lowerable(a)) return false;
  const auto& c = a.conv;
  const Geom<> g = geom(c);
  // empty reductions (zeros) and column buffers over the bound stay on the implicit path
  if (c.N * c.P * c.Q == 0) return false;
  if (implicit_wgrad_simt(a)) return true;
  if (c.N * c.P * c.Q * g.Kp > kColsLimit) return false;
  const at::Tensor x = gather_ready(wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a));
  const at::Tensor dw = wrap(c.w, {c.K, c.C, c.R, c.S}, c.ws, a);
  const at::Tensor dy = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a);
  if (implicit_wgrad_sm90(a, x, dy, dw)) return true;
  if (conv_wgrad_smallc(gathering(a, a, x))) return true;  // few channels: no column buffer
  at::Tensor cols = at::empty({c.N * c.P * c.Q, g.Kp}, cuda_options(a.dtype));
  im2col(a, x, g, 0, c.N, cols);
  // A = dY^T [K, NPQ]: of a channels_last dY a view (column-major: the Hopper kernel reads it
  // MN-major, the SIMT kernels through its strides), else one transposing copy
  const int64_t npq = c.N * c.P * c.Q;
  const at::Tensor dyt = nhwc_dense(dy) ? dy.permute({0, 2, 3, 1}).reshape({npq, c.K}).t()
                                        : dy.permute({1, 0, 2, 3}).reshape({c.K, npq}).contiguous();
  at::Tensor dwr = at::empty({c.K, g.Kp}, cuda_options(a.dtype));
  gemm(a, dyt, cols, false, dwr);
  dw.copy_(dwr.narrow(1, 0, c.R * c.S * c.C).view({c.K, c.R, c.S, c.C}).permute({0, 3, 1, 2}));
  return true;
}

}  // namespace tileops::cuda
