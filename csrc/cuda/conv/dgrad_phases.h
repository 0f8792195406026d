// A data gradient as forward convolutions of dy, one per phase of dx: the phase math
// (dgrad_phase) and the forward problem of a phase (dgrad_as_forward). Host code, used by
// conv_lowered.cu and routing/depthwise.cpp.
#pragma once
#include <algorithm>
#include <numeric>

#include "common/gemm_args.h"

namespace tileops {
namespace cuda {

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
