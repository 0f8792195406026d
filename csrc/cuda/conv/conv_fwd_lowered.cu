// The conv forward's lowered rows (routing/conv_fwd.cu's table), groups == 1: a 1x1 NCHW conv as
// a batched GEMM, the fp32 NCHW implicit GEMM, the Hopper implicit GEMM (y as it lies, or as rows),
// the fused small-C kernel, a 1x1 channels_last conv as one GEMM, and im2col + GEMM. Each row's
// why_not is pure; its run is fwd_lowered_from(a, row), the path as it always ran from that row
// on, so that a row whose check passes but whose kernel then declines falls through to the next.
// The order and the reasons: docs/kernels/conv-lowered.md#forward-conv_fwd_lowered-in-order-and-why.
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
                      splits > 1 ? sp.work.as<float>() : nullptr};
  const Epilogue<float> epi = splits > 1 ? Epilogue<float>{nullptr, Act::None} : epilogue_of<float>(a);
  conv_vec_kernel<Cfg><<<dim3(unsigned(mt), unsigned(nt), unsigned(splits)), Cfg::THREADS, 0,
                         at::cuda::getCurrentCUDAStream()>>>(ConvFwdProblem<float>(c), M, N, epi, v);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (splits > 1) {  // y as a matmul output: row m = (image, pixel) in groups of P*Q, column = channel
    MatmulOperands mm{nullptr, nullptr, c.y, {0, 0, 0}, {0, 0, 0}, {0, c.ys[3], c.ys[1]}};
    mm.rq = c.P * c.Q, mm.srq = c.ys[0];
    splitk_reduce<float, float>(sp.work.as<float>(), splits, lowered(a, a.fused(), 1, M, N, 0, mm));
  }
}

// The forward's rows, in the table's order (fwd_lowered_from starts at one).
enum FwdRow { kNchw1x1, kSimtF32, kSmallcF32, kSm90Strided, kSmallc, kGemm1x1, kSm90, kIm2col };

// y as the lowered GEMM writes it: its own rows where y is channels_last dense, else a [N*P*Q, K]
// buffer copied into y at the end (ld: the row stride either way).
bool y_as_rows(const ConvOperands& c) { return tileops::nhwc_dense(c.ys, c.K, c.P, c.Q); }

// The GEMM of the Hopper implicit kernels (implicit_sm90) with x gathered as ga says and the weight
// rows as weight_rows makes them (a fresh [K, Kp] copy, or w itself where its rows are already so).
GemmArgs sm90_conv_args(const GemmArgs& ga, const void* wr, int64_t wr_ld, void* c_ptr, int64_t ldc, const Fused& epi,
                        int64_t rq = 0, int64_t srq = 0) {
  const auto& c = ga.conv;
  MatmulOperands mm{nullptr, wr, c_ptr, {0, 0, 0}, {0, 1, wr_ld}, {0, ldc, 1}};
  mm.rq = rq, mm.srq = srq;
  GemmArgs g = lowered(ga, epi, 1, c.N * c.P * c.Q, c.K, c.R * c.S * c.C, mm);
  g.conv = c;
  return g;
}
// ... for the pure checks: the weight rows where weight_rows will leave them (w in place where
// its (r, s, c) rows are contiguous, 8-element aligned and need no padding; else a fresh copy).
GemmArgs sm90_conv_check(const GemmArgs& a, void* c_ptr, int64_t ldc, int64_t rq = 0, int64_t srq = 0) {
  const auto& c = a.conv;
  const int64_t rsc = c.R * c.S * c.C, kp = geom(c).Kp;
  const bool in_place = kp == rsc && c.ws[1] == 1 && c.ws[3] == c.C && c.ws[2] == c.S * c.C && c.ws[0] % 8 == 0;
  const void* fresh = reinterpret_cast<const void*>(uintptr_t(256));
  return sm90_conv_args(as_gathered(a), in_place ? c.w : fresh, in_place ? c.ws[0] : kp, c_ptr, ldc, a.fused(), rq,
                        srq);
}

// Hopper implicit GEMM (no column buffer): the A tile is gathered from x inside the kernel. C:
// rows ldc apart from c on, or, with rq > 0, rows in groups of rq (MatmulOperands::rq), srq apart.
// False where the Hopper kernels cannot run.
bool implicit_sm90(const GemmArgs& a, const at::Tensor& x, const at::Tensor& wr, void* c_ptr, int64_t ldc,
                   const Fused& epi, int64_t rq = 0, int64_t srq = 0) {
  return conv_fwd_sm90(sm90_conv_args(gathering(a, a, x), wr.const_data_ptr(), wr.stride(0), c_ptr, ldc, epi, rq, srq));
}

// The fused small-C kernel's problem on x as gather_ready leaves it, writing the row-major
// [N*P*Q, K] matrix at y_ptr with row stride ld (y itself where y is channels_last) with `epi`.
GemmArgs smallc_rows_args(GemmArgs f, void* y_ptr, int64_t ld, const Fused& epi) {
  f.fused() = epi;
  auto& c = f.conv;
  c.y = y_ptr;
  c.ys[0] = c.P * c.Q * ld, c.ys[1] = 1, c.ys[2] = c.Q * ld, c.ys[3] = ld;
  return f;
}

void fwd_lowered_from(const GemmArgs& a, int from) {
  if (from <= kNchw1x1 && nchw_1x1_ok(a)) {
    const auto& c = a.conv;
    const MatmulOperands mm{c.w, c.x, c.y, {0, c.ws[0], c.ws[1]}, {c.xs[0], c.xs[1], 1}, {c.ys[0], c.ys[1], 1}};
    return gemm_cuda_matmul(lowered(a, a.fused(), c.N, c.K, c.H * c.W, c.C, mm));
  }
  if (from <= kSimtF32 && simt_gathers(a, a.conv.xs)) {
    if (a.conv.K <= VecF32N64::BN) conv_simt<VecF32N64>(a);
    else conv_simt<VecF32>(a);
    return;
  }
  if (from <= kSmallcF32 && smallc_f32_why_not(a) == nullptr) return smallc_f32_run(a);
  const auto& c = a.conv;
  const Geom<> g = geom(c);
  const at::Tensor x = gather_ready(wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a));
  const at::Tensor w = wrap(c.w, {c.K, c.C, c.R, c.S}, c.ws, a);
  const at::Tensor y = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a);
  const bool kmajor = x.element_size() == 2;
  const bool y_rows = nhwc_dense(y);  // else the GEMM writes a [NPQ, K] buffer copied into y
  at::Tensor wr;  // weight rows, made once where a path needs them (the small-C kernel reads w)
  if (from <= kSm90Strided && kmajor && !y_rows && a.residual == nullptr && c.N * c.P * c.Q > 0 && grouped_rows(y)) {
    wr = weight_rows(w, g.Kp);
    if (implicit_sm90(a, x, wr, y.data_ptr(), y.stride(3), a.fused(), c.Q, y.stride(2))) return;
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
  auto finish = [&] {
    if (!y_rows) y.copy_(out.view({c.N, c.P, c.Q, c.K}).permute({0, 3, 1, 2}));
  };
  if (from <= kSmallc && kmajor) {  // few channels: one fused kernel, no weight rows
    const GemmArgs f = smallc_rows_args(gathering(a, a, x), out.data_ptr(), out.stride(0), epi);
    if (smallc_fwd_why_not(f) == nullptr) {
      smallc_fwd_run(f);
      return finish();
    }
  }
  // fp16/bf16 take B as a linear weight (Hopper's K-major path); fp32 as row-major K x N,
  // which suits the SIMT families' row loads
  if (!wr.defined()) wr = weight_rows(w, g.Kp);
  if (!kmajor) wr = wr.t().contiguous();
  const bool direct = from <= kGemm1x1 && plain_1x1(c) && g.Kp == c.C && nhwc_dense(x);
  if (direct) {
    gemm(a, x.permute({0, 2, 3, 1}).reshape({c.N * c.H * c.W, c.C}), wr, kmajor, out, epi);
  } else if (from <= kSm90 && kmajor && implicit_sm90(a, x, wr, out.data_ptr(), out.stride(0), epi)) {
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
  finish();
}

const char* kmajor_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  return a.dtype == at::kFloat ? "float32 (it takes 16 bits)" : nullptr;
}

}  // namespace

// --- the rows ---
const char* conv_nchw_1x1_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  return nchw_1x1_ok(a) ? nullptr : "not a 1x1 stride-1 unpadded NCHW conv without bias";
}
void conv_nchw_1x1_run(const GemmArgs& a) { fwd_lowered_from(a, kNchw1x1); }

const char* conv_simt_f32_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  return simt_gathers(a, a.conv.xs) ? nullptr : "not fp32 (TF32 off) NCHW with C padded by at most 1/8";
}
void conv_simt_f32_run(const GemmArgs& a) { fwd_lowered_from(a, kSimtF32); }
void conv_simt_f32_explain(const GemmArgs& a, routing::Decision& d) {
  d.config = a.conv.K <= VecF32N64::BN ? "vec128x64" : "vec128";
  d.why = "at most 64 output channels: no half-empty tiles";
}

const char* conv_smallc_f32_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  return smallc_f32_why_not(a);
}
void conv_smallc_f32_run(const GemmArgs& a) { fwd_lowered_from(a, kSmallcF32); }

const char* conv_sm90_strided_why_not(const GemmArgs& a) {
  if (const char* why = kmajor_why_not(a)) return why;
  const auto& c = a.conv;
  if (y_as_rows(c)) return "y channels_last dense (sm90_implicit writes it)";
  if (a.residual != nullptr) return "a residual";
  if (c.N * c.P * c.Q == 0) return "no output pixels";
  if (!grouped_rows(c.ys, c.P)) return "y's rows not in groups of one stride";
  return conv_fwd_sm90_why_not(sm90_conv_check(a, c.y, c.ys[3], c.Q, c.ys[2]));
}
void conv_sm90_strided_run(const GemmArgs& a) { fwd_lowered_from(a, kSm90Strided); }
void conv_sm90_strided_explain(const GemmArgs& a, routing::Decision& d) {
  const auto& c = a.conv;
  conv_fwd_sm90_explain(sm90_conv_check(a, c.y, c.ys[3], c.Q, c.ys[2]), d);
}

const char* conv_smallc_why_not(const GemmArgs& a) {
  if (const char* why = kmajor_why_not(a)) return why;
  const auto& c = a.conv;
  const bool rows = y_as_rows(c);
  void* fresh = reinterpret_cast<void*>(uintptr_t(256));
  return smallc_fwd_why_not(smallc_rows_args(as_gathered(a), rows ? c.y : fresh, rows ? c.ys[3] : c.K, a.fused()));
}
void conv_smallc_run(const GemmArgs& a) { fwd_lowered_from(a, kSmallc); }

const char* conv_gemm_1x1_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  const auto& c = a.conv;
  const GemmArgs ga = as_gathered(a);
  return plain_1x1(c) && geom(c).Kp == c.C && tileops::nhwc_dense(ga.conv.xs, c.C, c.H, c.W)
             ? nullptr
             : "not a 1x1 stride-1 unpadded conv of channels_last x, C % 8 == 0";
}
void conv_gemm_1x1_run(const GemmArgs& a) { fwd_lowered_from(a, kGemm1x1); }
void conv_gemm_1x1_explain(const GemmArgs& a, routing::Decision&) {
  const auto& c = a.conv;
  explain_gemm(a, c.N * c.H * c.W, c.K, c.C, a.dtype != at::kFloat, a.fused());
}

const char* conv_sm90_why_not(const GemmArgs& a) {
  if (const char* why = kmajor_why_not(a)) return why;
  const auto& c = a.conv;
  void* fresh = reinterpret_cast<void*>(uintptr_t(256));
  return conv_fwd_sm90_why_not(sm90_conv_check(a, y_as_rows(c) ? c.y : fresh, y_as_rows(c) ? c.ys[3] : c.K));
}
void conv_sm90_run(const GemmArgs& a) { fwd_lowered_from(a, kSm90); }
void conv_sm90_explain(const GemmArgs& a, routing::Decision& d) {
  const auto& c = a.conv;
  void* fresh = reinterpret_cast<void*>(uintptr_t(256));
  conv_fwd_sm90_explain(sm90_conv_check(a, y_as_rows(c) ? c.y : fresh, y_as_rows(c) ? c.ys[3] : c.K), d);
}

void conv_im2col_run(const GemmArgs& a) { fwd_lowered_from(a, kIm2col); }
void conv_im2col_explain(const GemmArgs& a, routing::Decision& d) {
  const auto& c = a.conv;
  const int64_t kp = geom(c).Kp, per = images_per_chunk(c, kp);
  d.config = per < c.N ? "in chunks of " + std::to_string(per) + " images" : "";
  explain_gemm(a, std::min(per, c.N) * c.P * c.Q, c.K, kp, a.dtype != at::kFloat, a.fused());
}

}  // namespace tileops::cuda
