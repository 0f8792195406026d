// What the lowered conv paths share (lowering.cu): conv2d with groups == 1 lowered onto the matmul
// table, which is much faster than reading a convolution through the implicit-GEMM index maps:
//   forward  Y[NPQ, K]   = cols(X)[NPQ, RSC] . W[K, RSC]^T      (+ bias, activation)
//   dgrad    one forward conv of dY per phase of dX (dgrad_phases.h), or (strides > 1)
//            dcols       = dY[NPQ, K] . W[K, RSC], then dX = col2im(dcols) (a gather: no atomics)
//   wgrad    dW[K, RSC]  = dY^T[K, NPQ] . cols(X)[NPQ, RSC]     (split-K on Hopper)
// Column order is (r, s, c), so a channels_last input gives 16-byte loads along c, and a 1x1
// stride-1 convolution of a channels_last input is a plain GEMM over X itself (no copy). Rows
// are padded to a multiple of 8 elements so TMA can read them. The column buffer is bounded:
// larger problems run in chunks of whole images. The rows of the conv tables that use these:
// conv_fwd_lowered.cu, conv_dgrad_lowered.cpp, conv_wgrad_lowered.cu. Host code.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "common/gemm_args.h"

namespace tileops::cuda {

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
Geom<> geom(const ConvOperands& c);

// What the lowered paths take (groups == 1, fp16 / bf16 / fp32): routing/candidates.h's lowered_why_not.

// A device pointer as an (N, C, H, W)-shaped tensor of a's dtype with the given strides.
at::Tensor wrap(void* p, at::IntArrayRef sizes, const int64_t* strides, const GemmArgs& a);
// The 16-byte path: channel-contiguous, 16-byte aligned base and strides, C a multiple of the
// vector's elements (of an (N, C, H, W) operand's strides s and base p, element size es).
bool vec_ok(const int64_t* s, const void* p, int64_t C, int64_t es);
bool vec_ok(const at::Tensor& t);
// x as the gather reads it best: channel-contiguous (copied to channels_last once if not), with
// the 16-byte path where the dtype and C allow it. gather_copies: whether it copies an (N, C, H, W)
// operand of strides s and base p (x, or a data gradient's dy).
at::Tensor gather_ready(const at::Tensor& x);
bool gather_copies(const int64_t* s, const void* p, int64_t C, int64_t es);
// a's conv with x as gather_ready will leave it (its strides; a copy's base stands in as aligned):
// for the pure checks of the rows that gather.
GemmArgs as_gathered(const GemmArgs& a);
// rows = (n, h, w) of a channels_last-dense tensor: a row-major [N*H*W, C] matrix.
bool nhwc_dense(const at::Tensor& t);
// y's rows in groups: channel-contiguous, rows (n, p) one stride apart, q another.
bool grouped_rows(const at::Tensor& y);
bool grouped_rows(const int64_t* ys, int64_t P);

// cols [images * P * Q, Kp] of images [n0, n0 + images) of x (gather_ready's).
void im2col(const GemmArgs& a, const at::Tensor& x, const Geom<>& g, int64_t n0, int64_t images, at::Tensor& cols);
// dx's images [n0, n0 + images) from dcols [images * P * Q, Kp] (each dx element the sum of the
// columns that read it, in a fixed order).
void col2im(const GemmArgs& a, const at::Tensor& dcols, const Geom<>& g, int64_t n0, int64_t images,
            const at::Tensor& dx);
// Images per chunk so that one column buffer stays under kColsLimit elements.
int64_t images_per_chunk(const ConvOperands& c, int64_t Kp);

// A matmul problem lowered from conv problem `conv`: its dtype and TF32 flag, epilogue `epi`.
GemmArgs lowered(const GemmArgs& conv, const Fused& epi, int64_t batch, int64_t M, int64_t N, int64_t K,
                 const MatmulOperands& mm);
// Row-major GEMM C = A . B (M x K . K x N) as matmul arguments. b_kmajor: B is given transposed
// (N x K row-major, a linear weight); else K x N row-major. A is set by the caller.
GemmArgs matmul_args(const GemmArgs& conv, int64_t M, int64_t K, const at::Tensor& B, bool b_kmajor,
                     const at::Tensor& C, const Fused& epi);
// The same GEMM on the matmul table.
void gemm(const GemmArgs& conv, const at::Tensor& A, const at::Tensor& B, bool b_kmajor, const at::Tensor& C,
          const Fused& epi = {});
// In explain mode: the matmul decision of a lowered GEMM of rows [M, K] . (K x N, b_kmajor as
// above) into rows of N, its operands freshly allocated (aligned, dense), without allocating.
void explain_gemm(const GemmArgs& conv, int64_t M, int64_t N, int64_t K, bool b_kmajor, const Fused& epi = {});
// A lowered GEMM that the Hopper implicit-GEMM kernels run with conv a's geometry, gathering from x
// (channels_last, as gather_ready left it) instead of the op's input.
GemmArgs gathering(GemmArgs g, const GemmArgs& a, const at::Tensor& x);

// weight (K, C, R, S) -> [K, Kp] in (r, s, c) column order, zero-padded columns.
at::Tensor weight_rows(const at::Tensor& w, int64_t Kp);

// A weight-sized transposition, per kernel tap: out[tap][j][i] = in[tap][i][j] for each I x J
// matrix of an Br x Bs grid of taps, every index through element strides (a flip is a negative tap
// stride from the last tap's base). `order` (where tap_order > 0): the output taps in another
// order, tap (r, s) at position order[r * Bs + s], out_s apart (out_r unused).
constexpr int kTapOrderMax = 64;
struct TapTranspose {
  int64_t I, J, Br, Bs;
  int64_t in_i, in_j, in_r, in_s;
  int64_t out_i, out_j, out_r, out_s;
  int tap_order = 0;
  int16_t order[kTapOrderMax] = {};
};
void tap_transpose(const void* in, void* out, const TapTranspose& t, int64_t element_size);

// A 1x1 conv that is a GEMM over pixels: stride 1, no padding, output sides those of the input.
bool plain_1x1(const ConvOperands& c);
// What gemm_conv_vec.cuh's implicit kernels take: fp32 with TF32 off, groups == 1, an input x (of
// strides xs) whose channels are not contiguous (NCHW).
bool strict_fp32_nchw(const GemmArgs& a, const int64_t* xs);
// The forward implicit GEMM of gemm_conv_vec.cuh, which reads x and writes y where they are.
bool simt_gathers(const GemmArgs& a, const int64_t* xs);

}  // namespace tileops::cuda
