// Depthwise conv2d's data gradient where it is not the flipped forward (dw_dgrad_kernel) and its
// weight gradient (partial sums per split of the output rows, dw_wgrad_vec_kernel or
// dw_wgrad_kernel, then dw_wgrad_finish_kernel), and their host side (depthwise.h).
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/Contiguity.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "cuda/conv/depthwise.cuh"
#include "cuda/conv/depthwise.h"
#include "cuda/runtime/cuda_util.h"

namespace tileops::cuda::depthwise {
namespace {

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

// dw_wgrad_vec_kernel's partial sums [splits, K, 1, R, S] (fp32) of channels_last dense x and
// dy (as launch_wgrad makes them), where wgrad_vec_why_not passes.
at::Tensor wgrad_vec_partial(const GemmArgs& a, const ConvOperands& c, int sms) {
  const int64_t V = 16 / int64_t(c10::elementSize(a.dtype));
  TORCH_INTERNAL_ASSERT(reinterpret_cast<uintptr_t>(c.x) % 16 == 0 && reinterpret_cast<uintptr_t>(c.y) % 16 == 0,
                        "tileops: depthwise grad_weight operands not 16-byte aligned");
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

// dw_wgrad_kernel's partial sums [splits, K, 1, R, S] (fp32, fp64 for double) of x and dy.
at::Tensor wgrad_partial(const GemmArgs& a, const ConvOperands& c, int sms) {
  const int64_t rows = c.N * c.P, kblocks = (c.K + 31) / 32;
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>((4 * sms) / (kblocks * c.R * c.S) + 1, rows));
  const int64_t per = (rows + splits - 1) / splits;
  const auto acc = a.dtype == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor partial = at::empty({splits, c.K, 1, c.R, c.S}, cuda_options(a.dtype).dtype(acc));
  const dim3 grid(unsigned(splits), unsigned(kblocks), unsigned(c.R * c.S));
  with_dtype(a.dtype, [&](auto t) {
    using Acc = AccOf<decltype(t)>;
    dw_wgrad_kernel<decltype(t), Acc>
        <<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(c, per, static_cast<Acc*>(partial.data_ptr()));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return partial;
}

// Whether an (N, C, H, W) operand at p with strides st is 16-byte aligned as launch_wgrad reads
// it: .contiguous(ChannelsLast) keeps it as it is where torch finds it channels_last contiguous
// (its test, which skips dims of size 1), else copies it into a fresh (aligned) allocation.
bool aligned_as_read(const void* p, int64_t N, int64_t C, int64_t H, int64_t W, const int64_t* st) {
  const int64_t sizes[4] = {N, C, H, W};
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 ||
         !c10::_compute_channels_last_contiguous_2d<int64_t>(c10::IntArrayRef(sizes, 4), c10::IntArrayRef(st, 4));
}

}  // namespace

void launch_dgrad(const GemmArgs& a) {
  const auto& c = a.conv;
  const Walk wk{int(c.C), int(c.H), int(c.W), c.xs[1] == 1 && c.C > 1};
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    dw_dgrad_kernel<T, AccOf<T>><<<walk_grid(wk, c.N), 256, 0, at::cuda::getCurrentCUDAStream()>>>(c, wk);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// One output per channel, C a multiple of the vector, a 3, 5 or 7 wide kernel, x and dY 16-byte
// aligned (as read: channels_last copies where they are not so already), 32-bit indices.
const char* wgrad_vec_why_not(const GemmArgs& a) {
  const auto& c = a.conv;
  const int64_t V = 16 / int64_t(c10::elementSize(a.dtype)), big = int64_t(1) << 31;
  if (a.dtype == at::kDouble) return "float64";
  if (c.K != c.C) return "channel multiplier > 1";
  if (c.C % V != 0) return "C not a multiple of 16 bytes of channels";
  if (c.S != 3 && c.S != 5 && c.S != 7) return "kernel not 3, 5 or 7 wide";
  if (!aligned_as_read(c.x, c.N, c.C, c.H, c.W, c.xs) || !aligned_as_read(c.y, c.N, c.K, c.P, c.Q, c.ys))
    return "x or dY channels_last but not 16-byte aligned";
  if (c.N * c.H * c.W * c.C >= big || c.N * c.P * c.Q * c.C >= big) return "too large for 32-bit indices";
  return nullptr;
}

void launch_wgrad(const GemmArgs& a, bool vec) {
  const auto& c0 = a.conv;
  auto wrap = [&](void* p, at::IntArrayRef sizes, const int64_t* st) {
    return device_view(p, sizes, at::IntArrayRef(st, 4), a.dtype).contiguous(at::MemoryFormat::ChannelsLast);
  };
  const at::Tensor x = wrap(c0.x, {c0.N, c0.C, c0.H, c0.W}, c0.xs), dy = wrap(c0.y, {c0.N, c0.K, c0.P, c0.Q}, c0.ys);
  ConvOperands c = c0;  // channels_last copies (no copy when already so)
  c.x = const_cast<void*>(x.const_data_ptr());
  c.y = const_cast<void*>(dy.const_data_ptr());
  for (int i = 0; i < 4; ++i) c.xs[i] = x.stride(i), c.ys[i] = dy.stride(i);
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const at::Tensor partial = vec ? wgrad_vec_partial(a, c, sms) : wgrad_partial(a, c, sms);
  with_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    dw_wgrad_finish_kernel<T, AccOf<T>><<<blocks_for(32 * c.K * c.R * c.S), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        static_cast<const AccOf<T>*>(partial.const_data_ptr()), partial.size(0), c);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace tileops::cuda::depthwise
