// Which form the packed CPU rows run a problem in, decided without touching data, so that the
// run (cpu/gemm_packed.h) and explain (cpu/gemm_cpu.cpp) agree. docs/kernels/cpu.md#forms.
#pragma once
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

}  // namespace cpu
}  // namespace tileops
