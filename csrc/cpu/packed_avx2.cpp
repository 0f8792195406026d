// The packed GEMM (cpu/gemm_packed.h) compiled for AVX2 + FMA, run only where the CPU has both
// (packed_avx2_why_not). Torch builds its own CPU kernels once per instruction set the same way.
//
// Every header but at::vec and gemm_packed.h is included before the target pragma, so the inline
// functions and templates the rest of the extension shares (c10, the epilogue, the problem types)
// are compiled for the baseline here as everywhere else: a copy the linker keeps can never hold
// AVX2 code. at::vec's AVX2 code sits in its own namespace (at::vec::AVX2, CPU_CAPABILITY below)
// and the kernels in an unnamed one.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/irange.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "common/epilogue.h"
#include "common/gemm_args.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(CPU_CAPABILITY)
#define TILEOPS_CPU_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
// g++ compiles the static thunks of at::vec's bf16 lambdas without the pragma's target and warns
// that their __m256 return changes the ABI; they live in at::vec::AVX2 and nothing here calls them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
// g++ does not define the ISA macros for a target pragma (gcc does); sleef's declarations and
// at::vec's AVX2 code test them, so they are defined here for this region only.
#ifndef __AVX2__
#define __AVX__ 1
#define __AVX2__ 1
#define __FMA__ 1
#define __F16C__ 1
#define TILEOPS_UNDEF_ISA_MACROS
#endif
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#include "cpu/gemm_packed.h"
static_assert(at::vec::Vectorized<float>::size() == 8, "at::vec's AVX2 Vectorized expected");
namespace tileops {
namespace cpu {
void run_packed_avx2(const GemmArgs& a) { run_packed(a); }
}  // namespace cpu
}  // namespace tileops
#pragma GCC diagnostic pop
#pragma GCC pop_options
#ifdef TILEOPS_UNDEF_ISA_MACROS
#undef __AVX__
#undef __AVX2__
#undef __FMA__
#undef __F16C__
#endif
#endif

namespace tileops {
namespace cpu {

// The CPU has the instructions, and torch may use them: ATEN_CPU_CAPABILITY=default (torch's own
// switch, read by at::get_cpu_capability: "AVX2" or "AVX512" where allowed, "DEFAULT" or, before
// torch 2.8, "NO AVX" where not) sends torch and tileops alike to the baseline kernels.
bool have_avx2() {
#ifdef TILEOPS_CPU_AVX2
  static const bool yes = [] {
    const std::string cap = at::get_cpu_capability();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
           (cap.find("AVX2") != std::string::npos || cap.find("AVX512") != std::string::npos);
  }();
  return yes;
#else
  return false;
#endif
}

#ifndef TILEOPS_CPU_AVX2
void run_packed_avx2(const GemmArgs&) { TORCH_INTERNAL_ASSERT(false, "no AVX2 kernels in this build"); }
#endif

}  // namespace cpu
}  // namespace tileops
