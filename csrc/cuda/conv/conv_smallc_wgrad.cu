// The weight gradient of conv_smallc_fwd.cu's quads problems (few input channels, 16-bit: C <= 4 at
// an even stride along w, the ResNet stem's), with no column buffer: the forward's staged rows of x
// (conv_smallc.cuh's QuadRows) read transposed against dY's tiles, each block's sums to a float
// workspace, then reduced in block order into dW. docs/kernels/conv-smallc.md.

#include <atomic>
#include <cstdint>

#include "common/epilogue.h"
#include "cuda/conv/conv_smallc.cuh"
#include "cuda/runtime/launch_util.h"
#include "cuda/routing/candidates.h"
#include "cuda/ptx/mma_sync.cuh"

namespace tileops::cuda {
using namespace smallc;
namespace {

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

// Devices on which each kernel's dynamic shared-memory limit is set (allow_smem).
template <typename T, int KR>
std::atomic<uint64_t> wg_smem_set_on{0};

// What the weight gradient's checks computed: the quads' geometry, the shared memory a block
// takes, and the grid (blocks along the items, each a slice of the workspace; kblocks of kNB
// output channels).
struct WgradPlan {
  SmallC g;
  int kr = 0;  // KR: 16 or 32
  size_t smem = 0;
  int blocks = 0;
  int64_t kblocks = 0;
};

// The quads' weight gradient (conv_wgrad_smallc4_kernel): fp16/bf16, groups 1, the forward's quad
// conditions on x (channels_last as the grad_weight rows' gather_ready left it), dY channel-contiguous
// in 16-byte chunks (K % 8 == 0), R KR <= 256. The grad_weight table tries it before im2col_gemm.
// nullptr where it applies (p then holds its launch), else why not.
const char* smallc_wgrad_plan(const GemmArgs& a, WgradPlan& p) {
  const ConvOperands& c = a.conv;
  if (c.K % 8 != 0) return "K % 8 != 0";
  if (c.ys[1] != 1 || c.ys[0] % 8 != 0 || c.ys[2] % 8 != 0 || c.ys[3] % 8 != 0 ||
      reinterpret_cast<uintptr_t>(c.y) % 16 != 0)
    return "dY not channel-contiguous in 16-byte chunks";
  SmallC& g = p.g;
  if (const char* why = small_16bit(a, g)) return why;
  const cudaDeviceProp* dev = &device_properties();
  if (const char* why = quad_why_not(c)) return why;
  p.kr = quad_geometry(c, g);
  if (g.Kp > 16 * 2 * kWgWarps) return "R*KR > 256";  // two column tiles a warp
  p.smem = (size_t(g.RR) * 4 * g.rowp + size_t(g.RR) * g.raw_len + 2 * size_t(kQT) * kLdy) * 2;
  if (p.smem > size_t(kMaxSmem)) return "shared memory over the limit";
  p.kblocks = (c.K + kNB - 1) / kNB;
  if (p.kblocks > 65535) return "K > 65535 * 64";
  const int64_t want = std::max<int64_t>(1, 2 * dev->multiProcessorCount / p.kblocks);  // 2 blocks a SM
  g.per = (g.items + want - 1) / want;
  p.blocks = int((g.items + g.per - 1) / g.per);
  return nullptr;
}

}  // namespace

const char* smallc_wgrad_why_not(const GemmArgs& a) {
  WgradPlan p;
  return smallc_wgrad_plan(a, p);
}

void smallc_wgrad_run(const GemmArgs& a) {
  const ConvOperands& c = a.conv;
  WgradPlan p;
  const char* why = smallc_wgrad_plan(a, p);
  TORCH_INTERNAL_ASSERT(why == nullptr, "smallc_wgrad_run: ", why);
  const SmallC& g = p.g;
  const Workspace part = float_workspace(int64_t(p.blocks) * c.K * g.Kp);
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const int64_t outs = c.K * c.C * c.R * c.S;
  with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, c10::Half>::value || std::is_same<T, c10::BFloat16>::value) {
      auto launch = [&](auto* kernel, std::atomic<uint64_t>& set_on) {
        allow_smem(kernel, size_t(kMaxSmem), set_on);
        kernel<<<dim3(unsigned(p.blocks), unsigned(p.kblocks)), kWgThreads, p.smem, stream>>>(c, g, part.as<float>());
      };
      if (p.kr == 16) launch(conv_wgrad_smallc4_kernel<T, 16>, wg_smem_set_on<T, 16>);
      else launch(conv_wgrad_smallc4_kernel<T, 32>, wg_smem_set_on<T, 32>);
      wgrad_reduce_kernel<T><<<blocks_for(outs, int64_t(1) << 30), 256, 0, stream>>>(part.as<float>(), p.blocks,
                                                                                      c, g, p.kr);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace tileops::cuda
