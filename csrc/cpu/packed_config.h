// Which form the packed CPU rows run a problem in, decided without touching data, so that the
// run (cpu/gemm_packed.h) and explain (cpu/gemm_cpu.cpp) agree. docs/kernels/cpu.md#forms.
#pragma once
#include <algorithm>

#include "common/gemm_args.h"

namespace tileops {
namespace cpu {

// Rows of A the gemv form serves; past it the blocked form's register blocks reuse B enough to pay
// for packing it.
constexpr int64_t kGemvMaxM = 8;

// nullptr where the gemv form runs a: a matmul of at most kGemvMaxM rows whose B columns are
// contiguous along k (a linear's weight), read once, in place, instead of packed.
inline const char* gemv_why_not(const GemmArgs& a) {
  if (a.kind != Kind::Matmul) return "a conv: blocked";
  if (a.M > kGemvMaxM) return "M > 8: blocked";
  if (a.mm.sb[1] != 1 && a.K > 1) return "B's columns not contiguous along k: blocked";
  return nullptr;
}

// Bytes the depthwise form's zero-padded, channels-last copies may take; past them, blocked.
constexpr int64_t kDepthwiseMaxCopy = int64_t(256) << 20;
// Taps a depthwise weight gradient keeps accumulators for (one vector each, on the stack).
constexpr int64_t kDepthwiseMaxTaps = 49;

// nullptr where the depthwise form runs a: a depthwise conv (one input and one output channel a
// group), forward or either gradient, read as vectors across channels instead of one small GEMM
// per channel.
inline const char* depthwise_why_not(const GemmArgs& a) {
  if (a.kind == Kind::Matmul) return "not a conv";
  const ConvOperands& c = a.conv;
  if (c.groups == 1 || c.Cg != 1 || c.Kg != 1) return "not depthwise (one channel a group)";
  if (a.kind == Kind::ConvWgrad && a.bias != nullptr) return "a weight gradient with a bias";
  if (a.kind == Kind::ConvWgrad && c.R * c.S > kDepthwiseMaxTaps) return "a weight gradient of over 49 taps";
  const int64_t hb = std::max(c.H + c.ph, (c.P - 1) * c.sh + (c.R - 1) * c.dh + 1) + (c.R - 1) * c.dh;
  const int64_t wb = std::max(c.W + c.pw, (c.Q - 1) * c.sw + (c.S - 1) * c.dw + 1) + (c.S - 1) * c.dw;
  if (c.N * hb * wb * (c.C + 16) * 8 > kDepthwiseMaxCopy) return "padded copy over 256 MiB";
  return nullptr;
}

}  // namespace cpu
}  // namespace tileops
