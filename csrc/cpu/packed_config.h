// Which form the packed CPU rows run a problem in, decided without touching data, so that the
// run (cpu/gemm_packed.h) and explain (cpu/gemm_cpu.cpp) agree. docs/kernels/cpu.md#forms.
#pragma once
#include <algorithm>
#include <utility>

#include "common/gemm_args.h"

// The x86 instruction-set files (packed_avx2.cpp, packed_avx512.cpp: cpu/packed_isa.h) compile
// their kernels: g++ or clang on x86-64, and not a build that sets torch's CPU_CAPABILITY itself.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(CPU_CAPABILITY)
#define TILEOPS_CPU_X86_KERNELS 1
#endif

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
// The grouped form's two ways of reading a group's inputs (docs/kernels/cpu.md#forms):
// expanded, a copy holding per pixel the vector over output channels of each of their Ig reads (Ig
// times the input), for groups of at most kExpandMaxWidth channels in and out; broadcast, where a
// vector of output channels lies within one group (the output group a multiple of the vector), each
// read one scalar of a plain copy broadcast, for up to kBroadcastMaxReads reads an output. Other
// groups are GEMMs wide enough for the blocked form's 16-column panels.
constexpr int64_t kExpandMaxWidth = 4;
constexpr int64_t kBroadcastMaxReads = 8;

// The output channels a group has and the input channels each reads, as the grouped form vectorizes
// problem a: a data gradient's outputs are x's channels, reading dY's; the others' are dY's / y's
// (the weight gradient: vectors over k, reading x).
inline std::pair<int64_t, int64_t> group_out_reads(const GemmArgs& a) {
  const ConvOperands& c = a.conv;
  return a.kind == Kind::ConvDgrad ? std::make_pair(c.Cg, c.Kg) : std::make_pair(c.Kg, c.Cg);
}
// Lanes of the accumulator vector the grouped form runs in: 32 bytes (at::vec's AVX2 and baseline
// widths; the AVX-512 row leaves the grouped form to the AVX2 row)
inline int64_t acc_lanes(const GemmArgs& a) { return a.dtype == c10::ScalarType::Double ? 4 : 8; }
// Whether the grouped form reads by broadcast (else expanded), for a problem it runs.
inline bool grouped_broadcast(const GemmArgs& a) {
  const auto og_ig = group_out_reads(a);
  return !(og_ig.first <= kExpandMaxWidth && og_ig.second <= kExpandMaxWidth);
}

// nullptr where the grouped form runs a: a conv whose groups are narrow (depthwise: one input
// channel a group; ResNeXt's and RegNet's 4 and 8), forward or either gradient, read as vectors
// across output channels instead of one thin GEMM per group.
inline const char* grouped_why_not(const GemmArgs& a) {
  if (a.kind == Kind::Matmul) return "not a conv";
  const ConvOperands& c = a.conv;
  if (c.groups == 1) return "groups == 1";
  const auto og_ig = group_out_reads(a);
  const bool expand = !grouped_broadcast(a);
  if (!expand && (og_ig.first % acc_lanes(a) != 0 || og_ig.second > kBroadcastMaxReads))
    return "groups neither 4 wide nor a multiple of the vector reading at most 8: blocked";
  if (a.kind == Kind::ConvWgrad && a.bias != nullptr) return "a weight gradient with a bias";
  if (a.kind == Kind::ConvWgrad && c.R * c.S > kGroupedMaxAcc) return "a weight gradient of over 49 taps";
  const int64_t hb = std::max(c.H + c.ph, (c.P - 1) * c.sh + (c.R - 1) * c.dh + 1) + (c.R - 1) * c.dh;
  const int64_t wb = std::max(c.W + c.pw, (c.Q - 1) * c.sw + (c.S - 1) * c.dw + 1) + (c.S - 1) * c.dw;
  // the largest copy: expanded, x (or dy) with each output channel's reads, channels padded
  const int64_t per_pixel = expand ? std::max(c.Cg * (c.K + 16), c.Kg * (c.C + 16)) : std::max(c.C, c.K) + 16;
  if (c.N * hb * wb * per_pixel * 8 > kGroupedMaxCopy) return "padded copy over 256 MiB";
  return nullptr;
}

}  // namespace cpu
}  // namespace tileops
