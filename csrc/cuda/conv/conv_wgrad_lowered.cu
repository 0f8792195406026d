// The conv weight gradient's lowered rows (routing/conv_wgrad.cu's table), groups == 1: the fp32
// NCHW implicit GEMM, the Hopper implicit GEMM (x and dY read in place), the quads' small-C kernel,
// and im2col + GEMM. Each row's run is wgrad_lowered_from(a, row): the path as it always ran from
// that row on. The reasons: docs/kernels/conv-lowered.md#weight-gradient-conv_wgrad_lowered.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "cuda/conv/gemm_conv_vec.cuh"
#include "cuda/conv/lowering.h"
#include "cuda/routing/candidates.h"
#include "cuda/routing/entry.h"
#include "cuda/runtime/cuda_util.h"
#include "cuda/routing/launch_rungs.cuh"
#include "cuda/splitk/splitk.cuh"

namespace tileops::cuda {
namespace {

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
                       splits > 1 ? sp.work.as<float>() : nullptr};
  conv_wgrad_vec_kernel<Cfg><<<dim3(unsigned(mt), unsigned(nt), unsigned(splits)), Cfg::THREADS, 0,
                               at::cuda::getCurrentCUDAStream()>>>(ConvWgradProblem<float>(c), M, N, v);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (splits == 1) return;
  const at::Tensor dw = wrap(c.w, {c.K, c.C, c.R, c.S}, c.ws, a);
  at::Tensor rows = tap_rows ? at::Tensor() : at::empty({M, N}, cuda_options(a.dtype));  // [taps, K]
  const MatmulOperands mm{nullptr, nullptr, tap_rows ? c.w : rows.data_ptr(), {0, 0, 0}, {0, 0, 0},
                          {0, tap_rows ? c.ws[3] : N, tap_rows ? c.ws[0] : 1}};
  splitk_reduce<float, float>(sp.work.as<float>(), splits, lowered(a, Fused{}, 1, M, N, 0, mm));
  if (!tap_rows) dw.permute({1, 2, 3, 0}).copy_(rows.view({c.C, c.R, c.S, c.K}));
}

// Where it runs: its main loop takes ~20% more instructions per k tile than the matmul kernel's (tap
// table reads, scalar loads), which the lowered path's column buffer (8 bytes of traffic per pixel
// and tap) outweighs only against few output channels, or in 1x1 layers, whose lowered path copies
// x and dY as well (docs/kernels/conv-lowered.md#weight-gradient-conv_wgrad_lowered).
const char* wgrad_simt_refusal(const GemmArgs& a) {
  const auto& c = a.conv;
  if (c.K > 128 && c.R * c.S > 1) return "more than 128 output channels with taps";
  const int64_t span = (c.C - 1) * std::abs(c.xs[1]) + (c.R - 1) * c.dh * std::abs(c.xs[2]) +
                       (c.S - 1) * c.dw * std::abs(c.xs[3]);
  if (!strict_fp32_nchw(a, c.xs) || c.ys[1] == 1 || c.C * c.K == 0 ||
      span >= (int64_t(1) << 31) || std::max({c.H, c.W, c.P * c.Q + 16}) >= (int64_t(1) << 30) ||
      c.N * ((c.P * c.Q + 15) / 16) >= (int64_t(1) << 31))
    return "not fp32 (TF32 off) NCHW x and dY within 32-bit offsets";
  return nullptr;
}
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

enum WgradRow { kSimtF32, kSm90, kSmallc, kIm2col };

void wgrad_lowered_from(const GemmArgs& a, int from) {
  const auto& c = a.conv;
  if (from <= kSimtF32 && wgrad_simt_refusal(a) == nullptr) {
    if (c.K <= VecF32N64::BN) wgrad_simt<VecF32N64>(a);
    else wgrad_simt<VecF32>(a);
    return;
  }
  const Geom<> g = geom(c);
  const at::Tensor x = gather_ready(wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a));
  const at::Tensor dw = wrap(c.w, {c.K, c.C, c.R, c.S}, c.ws, a);
  const at::Tensor dy = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a);
  if (from <= kSm90 && implicit_wgrad_sm90(a, x, dy, dw)) return;
  if (from <= kSmallc) {  // few channels: no column buffer
    const GemmArgs s = gathering(a, a, x);
    if (smallc_wgrad_why_not(s) == nullptr) return smallc_wgrad_run(s);
  }
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
}

// What every row after the fp32 implicit GEMM needs: output pixels to reduce over (an empty
// reduction writes zeros on the ladder's implicit GEMM), and a column buffer within kColsLimit
// (past it the ladder's implicit GEMM runs, as it always has).
const char* buffered_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  const auto& c = a.conv;
  if (c.N * c.P * c.Q == 0) return "no output pixels";
  if (c.N * c.P * c.Q * geom(c).Kp > kColsLimit) return "a column buffer over 2^28 elements";
  return nullptr;
}

// implicit_wgrad_sm90's GEMM for the pure checks (dY's rows as B; C's layout does not matter there).
GemmArgs wgrad_sm90_check(const GemmArgs& a) {
  const auto& c = a.conv;
  const MatmulOperands mm{nullptr, c.y, nullptr, {0, 0, 0}, {0, c.K, 1}, {0, c.K, 1}};
  const GemmArgs ga = as_gathered(a);
  GemmArgs g = lowered(ga, Fused{}, 1, c.R * c.S * c.C, c.K, c.N * c.P * c.Q, mm);
  g.conv = ga.conv;
  return g;
}

}  // namespace

// --- the rows ---
const char* wgrad_simt_f32_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  if (a.conv.N * a.conv.P * a.conv.Q == 0) return "no output pixels";
  return wgrad_simt_refusal(a);
}
void wgrad_simt_f32_run(const GemmArgs& a) { wgrad_lowered_from(a, kSimtF32); }

const char* wgrad_sm90_why_not(const GemmArgs& a) {
  if (const char* why = buffered_why_not(a)) return why;
  const auto& c = a.conv;
  if (c10::elementSize(a.dtype) != 2) return "float32 (it takes 16 bits)";
  if (!tileops::nhwc_dense(c.ys, c.K, c.P, c.Q)) return "dY not channels_last dense";
  return conv_wgrad_sm90_why_not(wgrad_sm90_check(a));
}
void wgrad_sm90_run(const GemmArgs& a) { wgrad_lowered_from(a, kSm90); }
void wgrad_sm90_explain(const GemmArgs& a, routing::Decision& d) { conv_wgrad_sm90_explain(wgrad_sm90_check(a), d); }

const char* wgrad_smallc_why_not(const GemmArgs& a) {
  if (const char* why = buffered_why_not(a)) return why;
  return smallc_wgrad_why_not(as_gathered(a));
}
void wgrad_smallc_run(const GemmArgs& a) { wgrad_lowered_from(a, kSmallc); }

const char* wgrad_im2col_why_not(const GemmArgs& a) { return buffered_why_not(a); }
void wgrad_im2col_run(const GemmArgs& a) { wgrad_lowered_from(a, kIm2col); }
void wgrad_im2col_explain(const GemmArgs& a, routing::Decision&) {
  const auto& c = a.conv;
  const int64_t kp = geom(c).Kp, npq = c.N * c.P * c.Q;
  // A = dY^T: a view of a channels_last dY (column-major), else a K-major copy
  const bool dy_rows = tileops::nhwc_dense(c.ys, c.K, c.P, c.Q);
  void* const fresh = reinterpret_cast<void*>(uintptr_t(256));
  MatmulOperands mm{dy_rows ? c.y : fresh, fresh, fresh, {0, dy_rows ? 1 : npq, dy_rows ? c.K : 1}, {0, kp, 1},
                    {0, kp, 1}};
  gemm_cuda_matmul(lowered(a, Fused{}, 1, c.K, kp, npq, mm));
}

}  // namespace tileops::cuda
