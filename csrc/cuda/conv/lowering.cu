// The lowered conv paths' shared pieces (lowering.h): the gather kernels (im2col, col2im, the
// run copies of non-overlapping windows, the per-tap weight transposition), their launches, and
// the lowering of a conv onto a matmul problem.
#include "cuda/conv/lowering.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/constant_pad_nd.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "cuda/routing/candidates.h"
#include "cuda/routing/entry.h"
#include "cuda/routing/launch_rungs.cuh"
#include "cuda/runtime/cuda_util.h"
#include "cuda/runtime/griddep.cuh"
#include "routing/route.h"

namespace tileops::cuda {
namespace {

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
// The gather kernels' element types: the lowered dtypes (fp16, bf16, fp32), never fp64.
template <typename Fn>
void with_gather_dtype(const GemmArgs& a, Fn&& fn) {
  with_dtype(a.dtype, [&](auto tag) {
    if constexpr (!std::is_same<decltype(tag), double>::value) fn(tag);
  });
}

// tap_transpose's kernel. Both sides go through a 64 x 64 shared-memory tile, so the reads along j
// and the writes along i are coalesced whichever side is contiguous (a warp's row of 2-byte values
// is a whole 128-byte line), and each thread has 16 loads in flight, where 4 a thread, one after
// another, were latency-bound (docs/kernels/conv-lowered.md#why-the-copy-kernels-look-as-they-do).
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

}  // namespace

Geom<> geom(const ConvOperands& c) {
  return {c.C, c.H, c.W, c.R, c.S, c.P, c.Q, c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, (c.R * c.S * c.C + 7) / 8 * 8};
}

at::Tensor wrap(void* p, at::IntArrayRef sizes, const int64_t* strides, const GemmArgs& a) {
  return device_view(p, sizes, at::IntArrayRef(strides, 4), a.dtype);
}

// The 16-byte path: channel-contiguous, 16-byte aligned base and strides, C a multiple of the
// vector's elements (v).
bool vec_ok(const int64_t* s, const void* p, int64_t C, int64_t es) {
  const int64_t v = 16 / es;
  return C % v == 0 && s[1] == 1 && reinterpret_cast<uintptr_t>(p) % 16 == 0 && s[0] % v == 0 && s[2] % v == 0 &&
         s[3] % v == 0;
}
bool vec_ok(const at::Tensor& t) { return vec_ok(t.strides().data(), t.const_data_ptr(), t.size(1), t.element_size()); }

// x as the gather reads it best: channel-contiguous (copied to channels_last once if not),
// with the 16-byte path where the dtype and C allow it.
bool gather_copies(const int64_t* s, const void* p, int64_t C, int64_t es) {
  return s[1] != 1 || (C % (16 / es) == 0 && !vec_ok(s, p, C, es));
}
at::Tensor gather_ready(const at::Tensor& x) {
  return gather_copies(x.strides().data(), x.const_data_ptr(), x.size(1), x.element_size())
             ? x.contiguous(at::MemoryFormat::ChannelsLast)
             : x;
}

GemmArgs as_gathered(const GemmArgs& a) {
  GemmArgs g = a;
  auto& c = g.conv;
  if (gather_copies(c.xs, c.x, c.C, int64_t(c10::elementSize(a.dtype)))) {
    const int64_t s[4] = {c.H * c.W * c.C, 1, c.W * c.C, c.C};
    std::copy(s, s + 4, c.xs);
    c.x = reinterpret_cast<void*>(uintptr_t(256));  // a fresh allocation: aligned (never read)
  }
  return g;
}

const char* lowered_why_not(const GemmArgs& a) {
  if (a.conv.groups != 1) return "groups > 1";
  if (a.dtype != at::kHalf && a.dtype != at::kBFloat16 && a.dtype != at::kFloat) return "float64";
  return nullptr;
}

// rows = (n, h, w) of a channels_last-dense tensor: a row-major [N*H*W, C] matrix.
bool nhwc_dense(const at::Tensor& t) { return tileops::nhwc_dense(t.strides().data(), t.size(1), t.size(2), t.size(3)); }

// grouped_rows: no residual there (the epilogue would read it by its offset from C).
bool grouped_rows(const int64_t* ys, int64_t P) { return ys[1] == 1 && ys[0] == P * ys[2]; }
bool grouped_rows(const at::Tensor& y) { return grouped_rows(y.strides().data(), y.size(2)); }



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
          const Fused& epi) {
  GemmArgs g = matmul_args(conv, A.size(0), A.size(1), B, b_kmajor, C, epi);
  g.mm.a = A.const_data_ptr();
  const int64_t sa[3] = {0, A.stride(0), A.stride(1)};
  for (int i = 0; i < 3; ++i) g.mm.sa[i] = sa[i];
  gemm_cuda_matmul(g);
}

void explain_gemm(const GemmArgs& conv, int64_t M, int64_t N, int64_t K, bool b_kmajor, const Fused& epi) {
  // fresh allocations are 256-byte aligned: stand-in pointers of that alignment (never read)
  void* const fresh = reinterpret_cast<void*>(uintptr_t(256));
  MatmulOperands mm{fresh, fresh, fresh, {0, K, 1}, {0, b_kmajor ? 1 : N, b_kmajor ? K : 1}, {0, N, 1}};
  gemm_cuda_matmul(lowered(conv, epi, 1, M, N, K, mm));
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
// conv_smallc_f32.cu's kernel takes).
bool simt_gathers(const GemmArgs& a, const int64_t* xs) {
  const auto& c = a.conv;
  const int64_t bk = VecF32::BK, padded = (c.C + bk - 1) / bk * bk;
  return strict_fp32_nchw(a, xs) && c.C > 0 && padded * 8 <= c.C * 9 &&
         std::max({c.H, c.W, c.P, c.Q}) < (int64_t(1) << 24) && c.R * c.S * (padded / bk) < (int64_t(1) << 30);
}

void col2im(const GemmArgs& a, const at::Tensor& dcols, const Geom<>& g, int64_t n0, int64_t nb, const at::Tensor& dx) {
  const auto& c = a.conv;
  const bool vec = vec_ok(dx) && dx.element_size() == 2;
  // windows that tile dx exactly (patch embeddings): dx is a permutation of dcols' columns
  const bool tiles = c.ph == 0 && c.pw == 0 && c.sh == c.R && c.sw == c.S && c.dh == 1 && c.dw == 1 &&
                     c.P * c.R == c.H && c.Q * c.S == c.W;
  const int runs = tiles ? runs_vector(dx, g) : 0;
  const int64_t rows = nb * c.P * c.Q;
  const auto stream = at::cuda::getCurrentCUDAStream();
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

}  // namespace tileops::cuda
