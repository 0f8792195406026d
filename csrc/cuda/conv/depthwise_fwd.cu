// Depthwise conv2d (groups == C: each group reads one input channel and writes K/C outputs), the
// forward kernels other than the conv_depthwise family's (depthwise_strip.cu): the tile kernels
// (channels_last and NCHW), the 16-byte vector kernel and the direct kernel, and their host side
// (checks and launches: depthwise.h). As GEMMs each group is a sliver (NPQ x RS . RS x K/C) far too
// thin for tiles. They run data gradients too, as forwards of dY with the kernel flipped.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "common/epilogue.h"
#include "cuda/conv/depthwise.cuh"
#include "cuda/conv/depthwise.h"
#include "cuda/runtime/cuda_util.h"

namespace tileops::cuda::depthwise {
namespace {

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

// The weight laid out [R, S, C], for the vector kernels that do not stage it.
at::Tensor weight_rsc(const GemmArgs& a) {
  const auto& c = a.conv;
  return device_view(c.w, {c.K, c.R, c.S}, {c.ws[0], c.ws[2], c.ws[3]}, a.dtype).permute({1, 2, 0}).contiguous();
}


// with_dw_shape's shapes, as a reason.
bool tile_shape(const ConvOperands& c) {
  return with_dw_shape(c, [](auto, auto) {});
}
constexpr const char* kNotTileShape = "not 3x3/5x5/7x7 at stride 1 or 3x3/5x5 at stride 2 (columns undilated)";
constexpr int64_t kBig = int64_t(1) << 31;  // the tile kernels' indices are 32-bit

// The tile kernels' threads: 16-byte channel vectors (vec) or channels, each kTQ outputs of a row.
int64_t tile_threads(const ConvOperands& c, int64_t es, bool vec) {
  const int64_t tiles = (c.Q + kTQ - 1) / kTQ;
  return vec ? c.N * c.P * tiles * (c.C / (16 / es)) : c.N * c.K * c.P * tiles;
}

}  // namespace

const char* vec_layout_why_not(const GemmArgs& f, int bytes) {
  const auto& c = f.conv;
  const int64_t V = bytes / int64_t(c10::elementSize(f.dtype));
  if (c.K != c.C) return "channel multiplier > 1";
  if (!nhwc_dense(c.xs, c.C, c.H, c.W) || !nhwc_dense(c.ys, c.K, c.P, c.Q)) return "x or y not channels_last dense";
  if (c.C % V != 0) return "C not a multiple of the channel vector";
  if (reinterpret_cast<uintptr_t>(c.x) % bytes != 0 || reinterpret_cast<uintptr_t>(c.y) % bytes != 0 ||
      reinterpret_cast<uintptr_t>(f.residual) % bytes != 0)
    return "x, y or the residual not aligned to the channel vector";
  return nullptr;
}

const char* tile_why_not(const GemmArgs& f) {
  const auto& c = f.conv;
  if (f.dtype == at::kDouble) return "float64";
  if (!tile_shape(c)) return kNotTileShape;
  if (const char* why = vec_layout_why_not(f, 16)) return why;
  if (tile_threads(c, c10::elementSize(f.dtype), true) >= kBig || c.W * c.C >= kBig)
    return "too large for 32-bit indices";
  return nullptr;
}

bool tile_stages_weight(const GemmArgs& f) {
  const auto& c = f.conv;
  return c.R * c.S * c.C * int64_t(c10::elementSize(f.dtype)) <= 16 * 1024;
}

void launch_tile(const GemmArgs& f, bool flip) {
  const auto& c = f.conv;
  const int64_t es = c10::elementSize(f.dtype), wbytes = c.R * c.S * c.C * es;
  const bool staged = tile_stages_weight(f);
  TORCH_INTERNAL_ASSERT(staged || !flip, "tileops: the depthwise tile kernel reads only a staged weight flipped");
  const unsigned blocks = unsigned((tile_threads(c, es, true) + kTileThreads - 1) / kTileThreads);
  const at::Tensor w_rsc = staged ? at::Tensor() : weight_rsc(f);
  const auto stream = at::cuda::getCurrentCUDAStream();
  with_dtype(f.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same<T, double>::value) {
      const Epilogue<T> epi = epilogue_of<T>(f);
      const T* rsc = staged ? nullptr : static_cast<const T*>(w_rsc.const_data_ptr());
      with_dw_shape(c, [&](auto ks, auto sw) {
        dw_fwd_tile_kernel<T, ks.value, sw.value>
            <<<blocks, kTileThreads, staged ? wbytes : 0, stream>>>(c, rsc, flip, epi);
      });
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

const char* nchw_why_not(const GemmArgs& f) {
  const auto& c = f.conv;
  if (!tile_shape(c)) return kNotTileShape;
  if (f.dtype != at::kDouble && vec_layout_why_not(f, 16) == nullptr) return "channels_last (the tile kernel's)";
  if (!nchw_dense(c.xs, c.C, c.H, c.W) || !nchw_dense(c.ys, c.K, c.P, c.Q)) return "x or y not NCHW dense";
  if (c.N * c.C * c.H * c.W >= kBig || tile_threads(c, c10::elementSize(f.dtype), false) >= kBig || c.W * c.C >= kBig)
    return "too large for 32-bit indices";
  return nullptr;
}

void launch_nchw(const GemmArgs& f, bool flip) {
  const auto& c = f.conv;
  const int64_t threads = tile_threads(c, c10::elementSize(f.dtype), false);
  const unsigned blocks = unsigned((threads + kTileThreads - 1) / kTileThreads);
  const auto stream = at::cuda::getCurrentCUDAStream();
  with_dtype(f.dtype, [&](auto t) {
    using T = decltype(t);
    const Epilogue<T> epi = epilogue_of<T>(f);
    with_dw_shape(c, [&](auto ks, auto sw) {
      dw_fwd_nchw_kernel<T, ks.value, sw.value><<<blocks, kTileThreads, 0, stream>>>(c, flip, epi);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

namespace {
// The channels_last tile kernel, reading the weight flipped only where it stages it.
bool tile_takes(const GemmArgs& f, bool flip) {
  return tile_why_not(f) == nullptr && (!flip || tile_stages_weight(f));
}
}  // namespace

bool tiles_apply(const GemmArgs& f, bool flip) { return tile_takes(f, flip) || nchw_why_not(f) == nullptr; }

bool launch_tiles(const GemmArgs& f, bool flip) {
  if (tile_takes(f, flip)) launch_tile(f, flip);
  else if (nchw_why_not(f) == nullptr) launch_nchw(f, flip);
  else return false;
  return true;
}

const char* vec_why_not(const GemmArgs& f) {
  return f.dtype == at::kDouble ? "float64" : vec_layout_why_not(f, 16);
}

void launch_vec(const GemmArgs& f) {
  const auto& c = f.conv;
  const int64_t es = c10::elementSize(f.dtype);
  const at::Tensor w_rsc = weight_rsc(f);
  with_dtype(f.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same<T, double>::value) {
      const Epilogue<T> epi = epilogue_of<T>(f);
      with_act(f.act, [&](auto act) {
        dw_fwd_vec_kernel<T, decltype(act)::value>
            <<<blocks_for(c.N * c.P * c.Q * c.C / (16 / es)), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
                c, static_cast<const T*>(w_rsc.const_data_ptr()), epi);
      });
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void launch_direct(const GemmArgs& f) {
  const auto& c = f.conv;
  const Walk wk{int(c.K), int(c.P), int(c.Q), c.ys[1] == 1 && c.K > 1};
  with_dtype(f.dtype, [&](auto t) {
    using T = decltype(t);
    const Epilogue<T> epi = epilogue_of<T>(f);
    with_act(f.act, [&](auto act) {
      dw_fwd_kernel<T, AccOf<T>, decltype(act)::value>
          <<<walk_grid(wk, c.N), 256, 0, at::cuda::getCurrentCUDAStream()>>>(c, wk, epi);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace tileops::cuda::depthwise
