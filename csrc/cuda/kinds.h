// One translation unit per problem kind, so they compile in parallel.
#pragma once
#include "../common/gemm_args.h"

namespace tileops {
namespace cuda {
void gemm_cuda_matmul(const GemmArgs& a);
void gemm_cuda_conv_fwd(const GemmArgs& a);
void gemm_cuda_conv_dgrad(const GemmArgs& a);
void gemm_cuda_conv_wgrad(const GemmArgs& a);
// Fast paths tried first by the conv kinds; each returns false when it does not apply.
bool conv_fwd_depthwise(const GemmArgs& a);  // conv_depthwise.cu
bool conv_dgrad_depthwise(const GemmArgs& a);
bool conv_wgrad_depthwise(const GemmArgs& a);
bool conv_fwd_lowered(const GemmArgs& a);    // conv_lowered.cu: groups == 1 onto the matmul families
bool conv_dgrad_lowered(const GemmArgs& a);
bool conv_wgrad_lowered(const GemmArgs& a);
// conv_smallc.cu, for conv_fwd_lowered (forwards, and data gradients run as forwards): the fused
// forward for C % 8 != 0, R*S*C <= 256, fp16/bf16, x rows (w, c) contiguous.
// False when it does not apply.
bool conv_fwd_smallc(const GemmArgs& a);
// matmul.cu: implicit-GEMM forward on Hopper; a.mm holds B (weight rows, K-major) and C,
// a.conv the channels_last input. False when it cannot run (dtype, GPU, C % 64, layout).
bool conv_fwd_sm90(const GemmArgs& a);
// matmul.cu: implicit-GEMM weight gradient on Hopper, dW^T [R*S*C, K] = cols(x)^T . dY; a.mm
// holds B (dY rows [N*P*Q, K], MN-major) and C, a.conv the channels_last input. False as above.
bool conv_wgrad_sm90(const GemmArgs& a);

// grad_input of a stride-1 conv is the forward conv of dy with the flipped kernel, channels
// swapped (per group) and padding dil*(R-1) - pad: possible while that padding is >= 0.
inline bool dgrad_as_forward_ok(const ConvOperands& c) {
  return c.sh == 1 && c.sw == 1 && c.ph <= c.dh * (c.R - 1) && c.pw <= c.dw * (c.S - 1);
}
// The forward problem for a dgrad problem `a`, reading the kernel w indexed (in channel of the
// forward, out channel / groups, r, s) through strides ws. That forward wants the kernel flipped
// along (R, S): the caller passes a flipped copy, or a kernel that reads w flipped (depthwise).
inline GemmArgs dgrad_as_forward(const GemmArgs& a, const void* w, const int64_t* ws) {
  const ConvOperands& c = a.conv;
  GemmArgs f = a;
  f.kind = Kind::ConvFwd;
  f.fused() = Fused{};
  ConvOperands& fc = f.conv;
  fc.C = c.K, fc.K = c.C, fc.Cg = c.Kg, fc.Kg = c.Cg;
  fc.H = c.P, fc.W = c.Q, fc.P = c.H, fc.Q = c.W;
  fc.ph = c.dh * (c.R - 1) - c.ph, fc.pw = c.dw * (c.S - 1) - c.pw;
  fc.x = c.y, fc.y = c.x, fc.w = const_cast<void*>(w);
  for (int i = 0; i < 4; ++i) fc.xs[i] = c.ys[i], fc.ys[i] = c.xs[i], fc.ws[i] = ws[i];
  return f;
}
}  // namespace cuda
}  // namespace tileops
