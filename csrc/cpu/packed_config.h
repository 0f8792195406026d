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

// Bytes the grouped form's zero-padded, channels-last copies may take; past them, blocked.
constexpr int64_t kGroupedMaxCopy = int64_t(256) << 20;
// Accumulator vectors a grouped weight gradient keeps at once, one per (tap, j): it runs the j's in
// chunks, so a kernel of at most this many taps.
constexpr int64_t kGroupedMaxAcc = 49;
// Channels a group (in and out) up to which the grouped form runs a conv; wider groups are GEMMs
// wide enough for the blocked form's 16-column panels (docs/kernels/cpu.md#forms).
constexpr int64_t kGroupedMaxWidth = 4;

// nullptr where the grouped form runs a: a conv whose groups are narrow (depthwise: one input
// channel a group; ResNeXt's and RegNet's 4 to 16), forward or either gradient, read as vectors
// across output channels instead of one thin GEMM per group.
inline const char* grouped_why_not(const GemmArgs& a) {
  if (a.kind == Kind::Matmul) return "not a conv";
  const ConvOperands& c = a.conv;
  if (c.groups == 1) return "groups == 1";
  if (c.Cg > kGroupedMaxWidth || c.Kg > kGroupedMaxWidth) return "groups over 16 channels wide: blocked";
  if (a.kind == Kind::ConvWgrad && a.bias != nullptr) return "a weight gradient with a bias";
  if (a.kind == Kind::ConvWgrad && c.R * c.S > kGroupedMaxAcc) return "a weight gradient of over 49 taps";
  const int64_t hb = std::max(c.H + c.ph, (c.P - 1) * c.sh + (c.R - 1) * c.dh + 1) + (c.R - 1) * c.dh;
  const int64_t wb = std::max(c.W + c.pw, (c.Q - 1) * c.sw + (c.S - 1) * c.dw + 1) + (c.S - 1) * c.dw;
  // the largest copy: x (or dy) with each output channel's Ig inputs, the channels padded
  const int64_t per_pixel = std::max(c.Cg * (c.K + 16), c.Kg * (c.C + 16));
  if (c.N * hb * wb * per_pixel * 8 > kGroupedMaxCopy) return "padded copy over 256 MiB";
  return nullptr;
}

}  // namespace cpu
}  // namespace tileops
