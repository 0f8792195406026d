// fp32 implicit-GEMM convolutions on the vectorized rung's tiles (gemm_ladder.cuh), for TF32 off
// where x's channels are not contiguous (NCHW; conv_lowered.cu picks them): the forward
// (conv_vec_kernel) and the weight gradient (conv_wgrad_vec_kernel). The data gradient of stride 1
// is a forward (dgrad_phases.h, dgrad_as_forward).
//
// Forward. The A tile (output pixels x input channels) is gathered from x inside the kernel, so
// nothing is copied: the lowered path it replaces copied x to channels_last, wrote a column buffer
// R*S times x's size, read it back, and copied y back to NCHW
// (docs/kernels/conv-lowered.md#forward-conv_fwd_lowered-in-order-and-why).
//
// k runs over (tap, channel chunk): R*S taps, each over ceil(C / BK) chunks of BK channels
// (channels past C read as zeros). A k tile is then one tap (r, s), so a pixel's bounds test is
// one per tile and nothing is divided per element.
//   A: a thread owns one pixel (tile row tid % BM) and the k rows tid / BM + KSTEP * i; at one k a
//      warp loads 32 consecutive pixels (consecutive words of an NCHW row), stored as they are
//      into As[k][m] (conflict-free).
//   B: the weight as rows [tap][c][ldb] (out channels contiguous, ldb a multiple of 4; one
//      tap_transpose makes it): 16-byte vectors along n.
// Split-K (few output tiles, long k): grid z takes k tiles [z * kper, (z + 1) * kper) and writes
// its partial tile, without epilogue, to part + z * M * N (row-major M x N); splitk_reduce sums.
#pragma once
#include "cuda/ladder/gemm_ladder.cuh"

namespace tileops {
namespace cuda {

// The two kernels' epilogue: split-K partials as a row-major M x N tile (part, already at the
// block's first element), else the output: out_row(mi) the pointer of tile row mi's first column,
// columns cs apart, 16-byte stores along rows (m_vec) or columns (c_vec) where they apply.
template <class Cfg, typename Row, typename BiasAt>
__device__ __forceinline__ void conv_epilogue(const float (&acc)[Cfg::TM][Cfg::TN], const Epilogue<float>& epi,
                                              const VecPlace<Cfg>& at, int m_lim, int n_lim, float* part, int64_t N,
                                              Row&& out_row, int64_t cs, bool c_vec, bool m_vec, BiasAt&& bias_at) {
  if (part != nullptr)
    vec_epilogue<float, Cfg>(acc, epi, at, m_lim, n_lim, [&](int mi) { return part + mi * N; }, 1, N % 4 == 0,
                             bias_at);
  else if (m_vec)
    vec_epilogue<float, Cfg, true>(acc, epi, at, m_lim, n_lim, out_row, cs, false, bias_at);
  else
    vec_epilogue<float, Cfg>(acc, epi, at, m_lim, n_lim, out_row, cs, c_vec, bias_at);
}

struct ConvVecArgs {
  const float* wt;
  int64_t ldb;
  int cchunks;    // ceil(C / BK)
  int kper;       // k tiles per grid z
  bool c_vec;     // y's channels contiguous and every 4th one 16-byte aligned: 4 outputs per store
  bool m_vec;     // y's pixels contiguous, P*Q % 4 == 0, 16-byte aligned (NCHW): 4 pixels per store
  float* part;    // split-K partials, or nullptr: the epilogue writes y
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
    conv_vec_kernel(ConvFwdProblem<float> p, int64_t M, int64_t N, Epilogue<float> epi, ConvVecArgs v) {
  using Smem = VecSmem<Cfg, float>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, THREADS = Cfg::THREADS;
  constexpr int LDA = Smem::LDA, LDB = Smem::LDB;
  constexpr int KSTEP = THREADS / BM, LA = BK / KSTEP;  // A: this thread's k rows, KSTEP apart
  constexpr int VROW = BN / 4, LB = BN * BK / (4 * THREADS);  // B: 16-byte vectors per k row, per thread
  static_assert(THREADS % BM == 0 && BK % KSTEP == 0 && LB >= 1 && LB * 4 * THREADS == BN * BK,
                "tiles must split evenly over the threads");
  __shared__ __align__(16) Smem sm;

  const int tid = threadIdx.x;
  const VecPlace<Cfg> at(tid);
  const int64_t m0 = int64_t(blockIdx.x) * BM, n0 = int64_t(blockIdx.y) * BN;
  const int kbeg = int(blockIdx.z) * v.kper;
  const int ktiles = min(v.kper, int(p.R * p.S) * v.cchunks - kbeg);

  // this thread's pixel (image img, output (oh, ow)) and the input position of tap (0, 0)
  const int am = tid % BM, ak = tid / BM;
  const bool m_ok = m0 + am < M;
  const int64_t m = m_ok ? m0 + am : 0, PQ = p.P * p.Q, img = m / PQ, pq = m - img * PQ, oh = pq / p.Q;
  const int h0 = int(oh * p.sh - p.ph), w0 = int((pq - oh * p.Q) * p.sw - p.pw);
  const float* const xa = p.X() + img * p.xs[0] + ak * p.xs[1];
  const int C = int(p.Cg), S = int(p.S), H = int(p.H), W = int(p.W);

  float acc[Cfg::TM][Cfg::TN];
#pragma unroll
  for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = 0.f;

  // the next k tile's tap (r, s) and first channel c0: fetch takes the k tiles in order, so
  // they advance by one chunk per call (no division per tile)
  int c0 = (kbeg % v.cchunks) * BK, r = kbeg / v.cchunks / S, s = kbeg / v.cchunks % S;
  const int64_t cstep = KSTEP * p.xs[1];  // between a thread's k rows of A
  float a[LA];
  float4 b[LB];
  vec_mainloop(
      sm, at, ktiles, acc,
      [&](int64_t) {
        const int h = h0 + r * int(p.dh), w = w0 + s * int(p.dw);
        const bool ok = m_ok && unsigned(h) < unsigned(H) && unsigned(w) < unsigned(W);
        const float* src = xa + (ok ? c0 * p.xs[1] + h * p.xs[2] + w * p.xs[3] : 0);
#pragma unroll
        for (int i = 0; i < LA; ++i, src += cstep) a[i] = ok && c0 + ak + KSTEP * i < C ? __ldg(src) : 0.f;
        const float* wrow = v.wt + (int64_t(r * S + s) * C + c0) * v.ldb + n0;
#pragma unroll
        for (int i = 0; i < LB; ++i) {
          const int idx = tid + i * THREADS, kr = idx / VROW, nc = idx % VROW * 4;
          b[i] = c0 + kr < C && n0 + nc < v.ldb ? __ldg(reinterpret_cast<const float4*>(wrow + kr * v.ldb + nc))
                                                : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        if ((c0 += BK) >= C) {
          c0 = 0;
          if (++s == S) s = 0, ++r;
        }
      },
      [&](int buf) {
#pragma unroll
        for (int i = 0; i < LA; ++i) sm.As[buf][(ak + KSTEP * i) * LDA + am] = a[i];
#pragma unroll
        for (int i = 0; i < LB; ++i) {
          const int idx = tid + i * THREADS;
          *reinterpret_cast<float4*>(&sm.Bs[buf][idx / VROW * LDB + idx % VROW * 4]) = b[i];
        }
      });

  const int m_lim = int(M - m0 < BM ? M - m0 : BM), n_lim = int(N - n0 < BN ? N - n0 : BN);
  float* const part = v.part != nullptr ? v.part + blockIdx.z * M * N + m0 * N + n0 : nullptr;
  conv_epilogue<Cfg>(
      acc, epi, at, m_lim, n_lim, part, N, [&](int mi) { return p.c(p.row_c(0, m0 + mi), n0); }, p.ys[1], v.c_vec,
      v.m_vec, [&](int nj) { return p.bias_index(0, n0 + nj); });
}

// Weight gradient, dW^T[(c, r, s), k] = sum over pixels of cols(x)[pixel, (c, r, s)] . dY[pixel, k]:
// rows m = taps (c, r, s), columns n = output channels, k = pixels, in chunks of BK pixels of one
// image (pixels past P*Q read as zeros). A thread owns one pixel of the k tile (tid % BK) for
// both operands, so a warp's loads at one tap or channel are BK consecutive pixels (consecutive
// words of an NCHW row at stride 1), and the rows of A and columns of B tid / BK + 16 i. A's
// taps come from a table made once per block in shared memory: x offset and tap position.
// Output (m, n) at dw + tap offset(m) + n * ws[0]; split-K partials as in the forward.
struct WgradVecArgs {
  int pq_chunks;  // ceil(P*Q / BK)
  int kper;       // k tiles per grid z
  bool m_vec;     // dw's taps contiguous (a contiguous weight), R*S*C % 4 == 0, 16-byte aligned
  float* part;    // split-K partials, or nullptr: the epilogue writes dw
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
    conv_wgrad_vec_kernel(ConvWgradProblem<float> p, int64_t M, int64_t N, WgradVecArgs v) {
  using Smem = VecSmem<Cfg, float>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, THREADS = Cfg::THREADS;
  constexpr int LDA = Smem::LDA, LDB = Smem::LDB;
  constexpr int RSTEP = THREADS / BK, LA = BM / RSTEP, LB = BN / RSTEP;  // rows RSTEP apart
  static_assert(THREADS % BK == 0 && BM % RSTEP == 0 && BN % RSTEP == 0, "tiles must split evenly");
  struct Tap {
    int off, dr, ds, ok;  // x offset of tap (c, r, s) from its pixel's (0, 0) tap; ok: m < M
  };
  __shared__ __align__(16) Smem sm;
  __shared__ Tap taps[BM];

  const int tid = threadIdx.x;
  const VecPlace<Cfg> at(tid);
  const int64_t m0 = int64_t(blockIdx.x) * BM, n0 = int64_t(blockIdx.y) * BN;
  const int RS = int(p.R * p.S), S = int(p.S), PQ = int(p.P * p.Q), Q = int(p.Q), H = int(p.H), W = int(p.W);
  for (int i = tid; i < BM; i += THREADS) {
    const int64_t m = m0 + i;
    const int c = m < M ? int(m / RS) : 0, r = m < M ? int(m % RS) / S : 0, s = m < M ? int(m % RS) % S : 0;
    taps[i] = {int(c * p.xs[1] + r * p.dh * p.xs[2] + s * p.dw * p.xs[3]), r * int(p.dh), s * int(p.dw), m < M};
  }
  __syncthreads();

  const int kbeg = int(blockIdx.z) * v.kper;
  const int ktiles = min(v.kper, int(p.N) * v.pq_chunks - kbeg);
  const int kk = tid % BK, row = tid / BK;  // this thread's pixel in the k tile, first row / column
  int img = kbeg / v.pq_chunks, pq0 = kbeg % v.pq_chunks * BK;  // the next k tile's image and pixel
  const int64_t nlim = N - n0;

  float acc[Cfg::TM][Cfg::TN];
#pragma unroll
  for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = 0.f;

  float a[LA], b[LB];
  vec_mainloop(
      sm, at, ktiles, acc,
      [&](int64_t) {
        const int pq = pq0 + kk, oh = pq / Q, ow = pq - oh * Q;
        const bool pix = pq < PQ;
        const int h0 = oh * int(p.sh) - int(p.ph), w0 = ow * int(p.sw) - int(p.pw);
        const float* xp = p.X() + img * p.xs[0] + int64_t(h0) * p.xs[2] + int64_t(w0) * p.xs[3];
#pragma unroll
        for (int i = 0; i < LA; ++i) {
          const Tap t = taps[row + RSTEP * i];
          const bool ok = pix && t.ok && unsigned(h0 + t.dr) < unsigned(H) && unsigned(w0 + t.ds) < unsigned(W);
          a[i] = ok ? __ldg(xp + t.off) : 0.f;
        }
        const float* yp = p.Y() + img * p.ys[0] + (n0 + row) * p.ys[1] + oh * p.ys[2] + ow * p.ys[3];
#pragma unroll
        for (int i = 0; i < LB; ++i) b[i] = pix && row + RSTEP * i < nlim ? __ldg(yp + RSTEP * i * p.ys[1]) : 0.f;
        if ((pq0 += BK) >= PQ) pq0 = 0, ++img;
      },
      [&](int buf) {
#pragma unroll
        for (int i = 0; i < LA; ++i) sm.As[buf][kk * LDA + row + RSTEP * i] = a[i];
#pragma unroll
        for (int i = 0; i < LB; ++i) sm.Bs[buf][kk * LDB + row + RSTEP * i] = b[i];
      });

  const int m_lim = int(M - m0 < BM ? M - m0 : BM), n_lim = int(nlim < BN ? nlim : BN);
  float* const part = v.part != nullptr ? v.part + blockIdx.z * M * N + m0 * N + n0 : nullptr;
  const auto tap_row = [&](int mi) {  // dw's tap m0 + mi, from output channel n0 on
    const int64_t m = m0 + mi, c = m / RS, rs = m % RS;
    return p.Wt() + c * p.ws[1] + rs / S * p.ws[2] + rs % S * p.ws[3] + n0 * p.ws[0];
  };
  conv_epilogue<Cfg>(acc, Epilogue<float>{nullptr, Act::None}, at, m_lim, n_lim, part, N, tap_row, p.ws[0], false,
                     v.m_vec, [](int) { return int64_t(0); });
}

}  // namespace cuda
}  // namespace tileops
