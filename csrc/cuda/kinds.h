// One translation unit per problem kind, so they compile in parallel.
#pragma once
#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

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
// forward for C % 8 != 0, R*S*C <= 256, fp16/bf16, x rows (w, c) contiguous; and a direct SIMT
// forward for fp32 (TF32 off), R*S*C <= 256, any strides; for conv_wgrad_lowered, the fp16/bf16
// weight gradient of C <= 4 at an even stride (x channels_last, dY channel-contiguous). False when
// they do not apply.
bool conv_fwd_smallc(const GemmArgs& a);
bool conv_fwd_smallc_f32(const GemmArgs& a);
bool conv_wgrad_smallc(const GemmArgs& a);
// conv_smallc.cu, for conv_fwd_sm90: 64 input channels at unit stride (ResNet's 3x3 64@56), the
// weight resident and the input rows staged once an item (conv_rows64_kernel). False when it does not apply.
bool conv_fwd_rows64(const GemmArgs& a);
// dispatch.cpp: runs fns[0] on the current stream and each other fn on a side stream (a fixed few
// per device, from torch's pool; a nested call takes ones its callers do not hold),
// all after the work already on the current stream and before what follows it (fork and join by
// events, which CUDA graph capture records too). For independent launches that fill the GPU only
// together: a backward's data and weight gradients, a strided data gradient's phases (one launch
// of 1.5 waves each). Each fn must write its own outputs. Sequential while autotuning is on, so
// that candidates are timed alone, and where TILEOPS_STREAMS=0.
void concurrently(const std::vector<std::function<void()>>& fns);
// matmul.cu: why the Hopper kernels cannot run problem a on this build, GPU and dtype (nullptr:
// they can); its M, N, K are the GEMM's (the op layer sets them for the conv kinds too).
const char* sm90_unavailable(const GemmArgs& a);
// conv_sm90.cu: implicit-GEMM forward on Hopper; a.mm holds B (weight rows, K-major) and C,
// a.conv the channels_last input. False when it cannot run (dtype, GPU, C % 64, layout).
bool conv_fwd_sm90(const GemmArgs& a);
// conv_sm90.cu: a strided data gradient's phases (below), each a forward problem lowered as
// conv_fwd_sm90 takes it (a.mm: B is the same for every phase, one weight of all phases' taps,
// [N rows][cols] with row stride ld, of which phase i reads the columns from b_k0[i] on; C a
// strided view of dx), in one launch; a phase of K = 0 writes zeros. False where one cannot run
// it (what conv_fwd_sm90 needs, for every phase with k tiles; no epilogue): nothing has run then.
// `before` runs right before the launch (the caller's copy of the taps into that weight).
bool conv_dgrad_phases_sm90(const std::vector<GemmArgs>& phases, const std::vector<int64_t>& b_k0, int64_t cols,
                            int64_t ld, const std::function<void()>& before);
// conv_sm90.cu: a stride-1 data gradient as conv_fwd_sm90's forward conv a of dY (a.mm: C, dx's
// rows), with B the forward weight w itself, channels_last-dense [K][R][S][C], read MN-major with
// its taps flipped in the kernel: no transposition of w first. Only where conv_fwd_sm90 would run
// a one-tile im2col kernel; false (nothing run) elsewhere.
bool conv_dgrad_flipped_sm90(const GemmArgs& a, const void* w);
// conv_sm90.cu: implicit-GEMM weight gradient on Hopper, dW^T [R*S*C, K] = cols(x)^T . dY; a.mm
// holds B (dY rows [N*P*Q, K], MN-major) and C, a.conv the channels_last input. False as above.
bool conv_wgrad_sm90(const GemmArgs& a);

// grad_input as forward convolutions of dy ("phases"). Along one dimension (stride s, padding
// pad, dilation d, kernel R), the dx positions a, a + s, a + 2s, ... are reached only by the taps
// r with (a + pad - r d) % s == 0: r0, r0 + step, ... (step = s / gcd(s, d)), whose dy offsets fall
// by dil = d / gcd(s, d) from one to the next. So that phase of dx is a stride-1 forward conv of dy
// with those taps, flipped, dilation dil and padding pad below, and `out` output positions; where
// that padding would be negative, the conv skips dy's first `skip` rows instead. Stride 1 is one
// phase with every tap (the transposed conv); taps == 0: no tap reaches the phase (zeros).
struct DgradPhase {
  int64_t out = 0, r0 = 0, taps = 0, step = 1, dil = 1, pad = 0, skip = 0;
};
inline DgradPhase dgrad_phase(int64_t a, int64_t H, int64_t R, int64_t s, int64_t pad, int64_t d) {
  DgradPhase f;
  f.out = H > a ? (H - a + s - 1) / s : 0;
  const int64_t g = std::gcd(s, d);
  f.step = s / g, f.dil = d / g;
  for (int64_t r = 0; r < std::min(R, f.step); ++r) {
    if ((a + pad - r * d) % s != 0) continue;
    f.r0 = r, f.taps = (R - 1 - r) / f.step + 1;
    const int64_t lead = (f.taps - 1) * f.dil - (a + pad - r * d) / s;  // exact division
    f.pad = std::max<int64_t>(lead, 0), f.skip = std::max<int64_t>(-lead, 0);
    break;
  }
  return f;
}
// Stride 1 and no row skipped: the data gradient is one forward conv of dy as it is.
inline bool dgrad_as_forward_ok(const ConvOperands& c) {
  return c.sh == 1 && c.sw == 1 && dgrad_phase(0, c.H, c.R, 1, c.ph, c.dh).skip == 0 &&
         dgrad_phase(0, c.W, c.S, 1, c.pw, c.dw).skip == 0;
}
// The forward problem of phase (ah, aw) of dgrad problem `a` (fh, fw: its dgrad_phase along h and
// w; dy must have rows past their skip), reading dy through dy / dys and the phase's kernel taps,
// flipped, indexed (in channel of the forward, out channel / groups, tap r, tap s) through w / ws:
// the caller passes a flipped copy, or a kernel that reads w flipped (depthwise, stride 1). It
// writes dx's (ah, aw) phase, a strided view of dx.
inline GemmArgs dgrad_as_forward(const GemmArgs& a, const DgradPhase& fh, const DgradPhase& fw, int64_t ah, int64_t aw,
                                 const void* dy, const int64_t* dys, const void* w, const int64_t* ws) {
  const ConvOperands& c = a.conv;
  GemmArgs f = a;
  f.kind = Kind::ConvFwd;
  f.fused() = Fused{};
  ConvOperands& fc = f.conv;
  fc.C = c.K, fc.K = c.C, fc.Cg = c.Kg, fc.Kg = c.Cg;
  fc.H = c.P - fh.skip, fc.W = c.Q - fw.skip, fc.P = fh.out, fc.Q = fw.out, fc.R = fh.taps, fc.S = fw.taps;
  fc.sh = fc.sw = 1, fc.ph = fh.pad, fc.pw = fw.pad, fc.dh = fh.dil, fc.dw = fw.dil;
  const int64_t es = int64_t(c10::elementSize(a.dtype));
  fc.x = const_cast<char*>(static_cast<const char*>(dy)) + (fh.skip * dys[2] + fw.skip * dys[3]) * es;
  fc.w = const_cast<void*>(w);
  fc.y = static_cast<char*>(c.x) + (ah * c.xs[2] + aw * c.xs[3]) * es;
  const int64_t ys[4] = {c.xs[0], c.xs[1], c.xs[2] * c.sh, c.xs[3] * c.sw};
  for (int i = 0; i < 4; ++i) fc.xs[i] = dys[i], fc.ys[i] = ys[i], fc.ws[i] = ws[i];
  return f;
}
// Stride 1: the one phase.
inline GemmArgs dgrad_as_forward(const GemmArgs& a, const void* w, const int64_t* ws) {
  const ConvOperands& c = a.conv;
  return dgrad_as_forward(a, dgrad_phase(0, c.H, c.R, 1, c.ph, c.dh), dgrad_phase(0, c.W, c.S, 1, c.pw, c.dw), 0, 0,
                          c.y, c.ys, w, ws);
}
}  // namespace cuda
}  // namespace tileops
