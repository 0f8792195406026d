// Family conv_depthwise: the 3x3 stride-1 depthwise forward (and data gradient, as a forward of dY
// with the kernel flipped), autotuned over strips of output rows (dw_fwd_strip_kernel), the tile
// kernel (depthwise_fwd.cu) and a ring of whole input rows (dw_fwd_rows_kernel, sm_90); the kernels
// and their host side (checks, launches, the autotune key and heuristic: depthwise.h). Measured:
// docs/kernels/depthwise.md#family-conv_depthwise-the-33-stride-1-forward-and-data-gradient.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <iterator>
#include <numeric>

#include "autotune/config_names.h"
#include "autotune/cuda_timing.h"
#include "common/epilogue.h"
#include "cuda/conv/depthwise.cuh"
#include "cuda/conv/depthwise.h"
#include "cuda/ptx/mbarrier.cuh"
#include "cuda/runtime/cuda_util.h"
#include "routing/route.h"  // portable_only

namespace tileops::cuda::depthwise {
namespace {

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
      // the row's loads (generic proxy) before the producer's next bulk copy into the slot (async
      // proxy): docs/kernels/skinny.md#the-rings-release
      fence_proxy_async_smem();
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

// dw_fwd_strip_kernel's host side: the most weight bytes a block stages, the family's candidates
// (one line each: strips of `rows` output rows a thread, one item a thread or walked by resident
// blocks; the tile kernel; the row ring, whose rows / resident are the strips run where its kernel
// does not apply), and the thread items of strips of tp rows.
constexpr int kStripWeightMax = 16 * 1024;
enum class StripKernel { Strips, Tile, Rows };
struct StripConfig {
  const char* name;
  StripKernel kernel;
  int rows;
  bool resident;
};
constexpr StripConfig kStripConfigs[] = {
    // name             kernel               rows resident
    {"strip4",          StripKernel::Strips, 4,   false},
    {"strip1",          StripKernel::Strips, 1,   false},
    {"tile",            StripKernel::Tile,   0,   false},  // where no tile kernel applies: the heuristic's strips
    {"strip4-resident", StripKernel::Strips, 4,   true},
    {"rows",            StripKernel::Rows,   4,   true},   // dw_fwd_rows_kernel (sm_90), else strip4-resident
};
constexpr int kRowsCandidate = 4;
static_assert(kStripConfigs[kRowsCandidate].kernel == StripKernel::Rows, "the heuristic's row ring");
const std::vector<std::string> kStripNames = config_names(kStripConfigs);
const autotune::Family kDepthwiseFamily("conv_depthwise", [] { return kStripNames; });
int64_t strip_items(const ConvOperands& c, int64_t tp) {
  return c.N * ((c.P + tp - 1) / tp) * ((c.Q + kTQ - 1) / kTQ) * (c.C / kStripV);
}
// The height of the strips the 'tile' candidate runs where no tile kernel applies: the
// heuristic's, one item a thread.
int tile_fallback_rows(int heuristic) { return kStripConfigs[heuristic].rows; }

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

// dw_fwd_rows_kernel (where rows_why_not passes). The ring holds about kRowsRingBytes (4 to 16
// rows). Items of th output rows: the th whose busiest block's rows, each output row a read and a
// write and each item's two extra input rows counted half (mostly L2 hits: the neighbouring item
// reads them too), are fewest.
constexpr int64_t kRowsRingBytes = 96 * 1024, kRowsMaxRow = 24 * 1024;
constexpr size_t kRowsSmemMax = kRowsBarBytes + 4 * kRowsMaxRow;
void launch_rows(const GemmArgs& f, bool flip) {
  const auto& c = f.conv;
  const auto* prop = at::cuda::getCurrentDeviceProperties();
  const int64_t es = c10::elementSize(f.dtype), row = c.W * c.C * es, units = (c.Q + kTQ - 1) / kTQ * (c.C / kStripV);
  RowsPlan pl{};
  pl.row_bytes = int(row);
  pl.ring = int(std::clamp<int64_t>(kRowsRingBytes / row, 4, 16));
  const int threads = int((units + 31) / 32 * 32 + 32);
  const size_t smem = kRowsBarBytes + size_t(pl.ring) * size_t(row);
  with_dtype(f.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same<T, double>::value) {
      with_act(f.act, [&](auto act) {
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
        kernel<<<blocks, threads, smem, at::cuda::getCurrentCUDAStream()>>>(c, flip, epilogue_of<T>(f), pl);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
    }
  });
}

}  // namespace

// 3x3, unit strides and dilations, vectors of 4 channels, at most kStripWeightMax bytes of weight
// (the range it was measured on), 32-bit indices.
const char* strip_why_not(const GemmArgs& f) {
  const auto& c = f.conv;
  const int64_t es = c10::elementSize(f.dtype), big = int64_t(1) << 31;
  if (f.dtype == at::kDouble) return "float64";
  if (c.R != 3 || c.S != 3 || c.sh != 1 || c.sw != 1 || c.dh != 1 || c.dw != 1)
    return "not 3x3 at unit stride and dilation";
  if (9 * c.C * es > kStripWeightMax) return "weight over 16 KiB";
  if (const char* why = vec_layout_why_not(f, int(kStripV * es))) return why;
  if (c.W * c.C >= big || strip_items(c, 1) >= big) return "too large for 32-bit indices";
  return nullptr;
}

// dw_fwd_rows_kernel, on strip_why_not's layers: sm_90 or newer, x's rows 16-byte aligned runs of
// at most kRowsMaxRow bytes, at most kRowsUnits units a row.
const char* rows_why_not(const GemmArgs& f) {
  const auto& c = f.conv;
  const int64_t es = c10::elementSize(f.dtype), row = c.W * c.C * es, units = (c.Q + kTQ - 1) / kTQ * (c.C / kStripV);
  if (routing::portable_only()) return routing::kPortableOnly;
  if (at::cuda::getCurrentDeviceProperties()->major < 9) return "before sm_90";
  if (row % 16 != 0 || reinterpret_cast<uintptr_t>(c.x) % 16 != 0) return "x's rows not 16-byte aligned runs";
  if (row > kRowsMaxRow) return "x's rows over 24 KiB";
  if (units > kRowsUnits) return "over 384 units (column tiles x channel vectors) a row";
  if (c.N * c.H >= (int64_t(1) << 31)) return "too large for 32-bit indices";
  return nullptr;
}

const std::vector<std::string>& strip_names() { return kStripNames; }

std::string strip_key(const GemmArgs& f, bool flip) {
  const auto& c = f.conv;
  return autotune::op_key({"conv_depthwise", c10::toString(f.dtype), autotune::shape_class(c.N * c.P * c.Q, c.C, 9),
                           flip ? "flip" : "fwd"});
}

// The 3x3 stride-1 layers (MobileNet's): the row ring (where it applies; else the resident strips
// of 4 output rows) where strips of 4 leave at least two blocks per SM, else strips of one (small
// batches). Measured:
// docs/kernels/depthwise.md#family-conv_depthwise-the-33-stride-1-forward-and-data-gradient.
int strip_heuristic(const GemmArgs& f) {
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  return strip_items(f.conv, 4) >= 2 * sms * kTileThreads ? kRowsCandidate : 1;
}
const char* strip_heuristic_reason(int heuristic) {
  return heuristic == kRowsCandidate ? "strips of 4 rows leave at least two blocks an SM"
                                     : "strips of 4 rows leave under two blocks an SM (a small batch)";
}

std::string strip_stand_in(const GemmArgs& f, bool flip, const std::string& name) {
  const size_t i = size_t(std::find(kStripNames.begin(), kStripNames.end(), name) - kStripNames.begin());
  if (i >= std::size(kStripConfigs)) return "";
  if (kStripConfigs[i].kernel == StripKernel::Rows) {
    if (const char* why = rows_why_not(f))
      return std::string(" (its kernel does not apply: ") + why + "; strip4-resident runs)";
  } else if (kStripConfigs[i].kernel == StripKernel::Tile && !tiles_apply(f, flip)) {
    const int rows = tile_fallback_rows(strip_heuristic(f));
    return " (no tile kernel applies: strips of " + std::to_string(rows) + " rows run)";
  }
  return "";
}

void run_strip(const GemmArgs& f, bool flip) {
  const int heuristic = strip_heuristic(f);
  autotune::run([&] { return strip_key(f, flip); }, kStripNames, heuristic, [&](int i) {
    // the row ring or the tile kernel where it applies (else resident strips, or strips as
    // tall as the heuristic's, one item a thread)
    StripConfig cfg = kStripConfigs[i];
    if (cfg.kernel == StripKernel::Rows && rows_why_not(f) == nullptr) return launch_rows(f, flip);
    if (cfg.kernel == StripKernel::Tile && launch_tiles(f, flip)) return;
    if (cfg.kernel == StripKernel::Tile) cfg.rows = tile_fallback_rows(heuristic), cfg.resident = false;
    with_dtype(f.dtype, [&](auto t) {
      using T = decltype(t);
      if constexpr (!std::is_same<T, double>::value) {
        with_act(f.act, [&](auto act) {
          constexpr Act A = decltype(act)::value;
          if (cfg.rows == 4) launch_strip<T, 4, A>(f, flip, cfg.resident);
          else launch_strip<T, 1, A>(f, flip, cfg.resident);
        });
      }
    });
  });
}

}  // namespace tileops::cuda::depthwise
