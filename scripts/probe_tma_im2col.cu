// Probe: which conventions TMA's im2col mode follows on this GPU, before a conv producer is built
// on it (benchmarks/NOTES.md §17: the cp.async gather is latency-bound; TMA im2col is the
// structural fix). What the driver and PTX documentation leave open is tried each way:
//   - the order of the pixel-box corner arrays of cuTensorMapEncodeIm2col: {W, H} or {H, W};
//   - the order of the im2col offsets of cp.async.bulk.tensor.4d ... .im2col: {w, h} or {h, w};
//   - the upper corner as an offset from the last pixel (pad - dil * (k - 1)) or one less.
// One thread loads PIXELS output pixels x 64 channels for filter tap (r, s) of a padded, strided,
// dilated 3x3 conv over a uint16 NHWC tensor whose values name their pixel and channel, and the
// result is compared with the im2col rows computed on the host (zeros where the tap falls into
// padding). Prints one line per convention: how many of the cases matched.
//
//   nvcc -std=c++17 -arch=sm_90a -o /tmp/probe scripts/probe_tma_im2col.cu -lcuda && /tmp/probe
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

constexpr int C = 64, PIXELS = 32;  // channels per pixel (128 bytes of uint16), pixels per load

#define CHECK(x)                                                                    \
  do {                                                                              \
    auto e_ = (x);                                                                  \
    if (e_ != 0) {                                                                  \
      std::printf("%s failed: %d (line %d)\n", #x, int(e_), __LINE__);              \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

struct Geom {
  int N, H, W, R, S, ph, pw, sh, sw, dh, dw, P, Q;
};

// Loads PIXELS x C elements into shared memory with one im2col TMA, then copies them out.
template <bool OFF_WH>
__global__ void load(const __grid_constant__ CUtensorMap map, int w0, int h0, int n0, int off_w, int off_h,
                     uint16_t* out) {
  __shared__ alignas(128) uint16_t tile[PIXELS * C];
  __shared__ alignas(8) uint64_t bar;
  const uint32_t s_tile = uint32_t(__cvta_generic_to_shared(tile)), s_bar = uint32_t(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(s_bar));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(s_bar), "r"(PIXELS * C * 2) : "memory");
    const uint16_t o0 = uint16_t(OFF_WH ? off_w : off_h), o1 = uint16_t(OFF_WH ? off_h : off_w);
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6], {%7, %8};" ::"r"(s_tile),
        "l"(&map), "r"(0), "r"(w0), "r"(h0), "r"(n0), "r"(s_bar), "h"(o0), "h"(o1)
        : "memory");
    asm volatile(
        "{\n.reg .pred p;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra W;\n}\n" ::"r"(s_bar)
        : "memory");
  }
  __syncthreads();
  for (int i = threadIdx.x; i < PIXELS * C; i += blockDim.x) out[i] = tile[i];
}

uint16_t value(const Geom& g, int n, int h, int w, int c) { return uint16_t(((n * g.H + h) * g.W + w) * C + c + 1); }

int main() {
  const Geom geoms[] = {{2, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0},
                        {2, 9, 8, 3, 3, 1, 1, 2, 2, 1, 1, 0, 0},
                        {1, 11, 10, 3, 3, 2, 2, 1, 1, 2, 2, 0, 0},
                        {1, 9, 12, 3, 5, 1, 2, 2, 1, 1, 1, 0, 0}};
  int passed[2][2][2] = {}, cases = 0;
  for (Geom g : geoms) {
    g.P = (g.H + 2 * g.ph - g.dh * (g.R - 1) - 1) / g.sh + 1;
    g.Q = (g.W + 2 * g.pw - g.dw * (g.S - 1) - 1) / g.sw + 1;
    std::vector<uint16_t> x(size_t(g.N) * g.H * g.W * C);
    for (int n = 0; n < g.N; ++n)
      for (int h = 0; h < g.H; ++h)
        for (int w = 0; w < g.W; ++w)
          for (int c = 0; c < C; ++c) x[((size_t(n) * g.H + h) * g.W + w) * C + c] = value(g, n, h, w, c);
    uint16_t *dx, *dout;
    CHECK(cudaMalloc(&dx, x.size() * 2));
    CHECK(cudaMalloc(&dout, PIXELS * C * 2));
    CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    for (int cfg = 0; cfg < 4; ++cfg) {
      const int corner_wh = cfg & 1, minus = cfg >> 1;
      // the box of filter-origin positions: lower = -pad, upper = pad - dilation * (kernel - 1)
      const int lw = -g.pw, lh = -g.ph, uw = g.pw - g.dw * (g.S - 1) - minus, uh = g.ph - g.dh * (g.R - 1) - minus;
      const int lower[2] = {corner_wh ? lw : lh, corner_wh ? lh : lw}, upper[2] = {corner_wh ? uw : uh, corner_wh ? uh : uw};
      const cuuint64_t dims[4] = {C, cuuint64_t(g.W), cuuint64_t(g.H), cuuint64_t(g.N)};
      const cuuint64_t strides[3] = {C * 2, cuuint64_t(g.W) * C * 2, cuuint64_t(g.H) * g.W * C * 2};
      const cuuint32_t estr[4] = {1, cuuint32_t(g.sw), cuuint32_t(g.sh), 1};
      CUtensorMap map;
      const CUresult enc = cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, dx, dims, strides, lower,
                                                   upper, C, PIXELS, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                                   CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (enc != CUDA_SUCCESS) {  // a convention the driver refuses for this geometry: no case of it counts
        std::printf("encode refused (error %d): corners %s, upper - %d\n", int(enc), corner_wh ? "{W, H}" : "{H, W}", minus);
        if (cfg == 0) cases += 9;
        continue;
      }
      for (int off_wh = 0; off_wh < 2; ++off_wh) {
        for (int m0 : {0, 5, g.P * g.Q - 3}) {  // the last start runs into the next image and past the end
          for (int tap : {0, g.S + 1, g.R * g.S - 1}) {
            const int r = tap / g.S, s = tap % g.S;
            const int n0 = m0 / (g.P * g.Q), p0 = m0 % (g.P * g.Q) / g.Q, q0 = m0 % g.Q;
            const int w0 = q0 * g.sw - g.pw, h0 = p0 * g.sh - g.ph;
            if (off_wh) load<true><<<1, 128>>>(map, w0, h0, n0, s * g.dw, r * g.dh, dout);
            else load<false><<<1, 128>>>(map, w0, h0, n0, s * g.dw, r * g.dh, dout);
            std::vector<uint16_t> got(PIXELS * C);
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(got.data(), dout, got.size() * 2, cudaMemcpyDeviceToHost));
            bool ok = true;
            for (int i = 0; i < PIXELS && ok; ++i) {
              const int m = m0 + i;  // past the last pixel: unchecked (the kernel's M tail)
              if (m >= g.N * g.P * g.Q) break;
              const int n = m / (g.P * g.Q), p = m % (g.P * g.Q) / g.Q, q = m % g.Q;
              const int h = p * g.sh - g.ph + r * g.dh, w = q * g.sw - g.pw + s * g.dw;
              for (int c = 0; c < C; ++c) {
                const bool in = h >= 0 && h < g.H && w >= 0 && w < g.W;
                ok = ok && got[i * C + c] == (in ? value(g, n, h, w, c) : 0);
              }
            }
            passed[minus][corner_wh][off_wh] += ok;
            if (cfg == 0 && off_wh == 0) ++cases;
          }
        }
      }
    }
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dout));
  }
  for (int u = 0; u < 2; ++u)
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        std::printf("corners %s%s, offsets %s: %d of %d cases match\n", a ? "{W, H}" : "{H, W}",
                    u ? " (upper - 1)" : "", b ? "{w, h}" : "{h, w}", passed[u][a][b], cases);
  return 0;
}
