// The packed GEMM (cpu/gemm_packed.h) compiled for one x86 instruction set: included by exactly one
// file per set, which defines TILEOPS_ISA_AVX2 or TILEOPS_ISA_AVX512 and TILEOPS_ISA_RUN (the one
// function it exports) first: packed_avx2.cpp, packed_avx512.cpp. Whether a CPU may run them is
// gemm_cpu.cpp's question (the rows' why_not). Torch builds its own CPU kernels once per instruction
// set the same way.
//
// Every header but at::vec and gemm_packed.h is included before the target pragma, so the inline
// functions and templates the rest of the extension shares (c10, the epilogue, the problem types)
// are compiled for the baseline here as everywhere else: a copy the linker keeps can never hold
// AVX2 or AVX-512 code. at::vec's code sits in a namespace of its instruction set (at::vec::AVX2,
// at::vec::AVX512: CPU_CAPABILITY below) and the kernels in an unnamed one.
#pragma once
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
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
#include "cpu/packed_config.h"

#ifdef TILEOPS_CPU_X86_KERNELS
#pragma GCC push_options
#if defined(TILEOPS_ISA_AVX512)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#else
#pragma GCC target("avx2,fma,f16c")
#endif
// g++ compiles the static thunks of at::vec's bf16 lambdas without the pragma's target and warns
// that their vector return changes the ABI; they live in at::vec's namespace and nothing here calls them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wunknown-pragmas"  // at::vec's clang and nvcc loop pragmas
// g++ does not define the ISA macros for a target pragma (gcc does); sleef's declarations and
// at::vec's code test them, so they are defined for the rest of this file (nothing follows it).
#ifndef __AVX2__
#define __AVX__ 1
#define __AVX2__ 1
#define __FMA__ 1
#define __F16C__ 1
#endif
#if defined(TILEOPS_ISA_AVX512)
#ifndef __AVX512F__
#define __AVX512F__ 1
#define __AVX512BW__ 1
#define __AVX512VL__ 1
#define __AVX512DQ__ 1
#endif
#define CPU_CAPABILITY AVX512
#define CPU_CAPABILITY_AVX512
#else
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#endif
#include "cpu/gemm_packed.h"
namespace tileops {
namespace cpu {
void TILEOPS_ISA_RUN(const GemmArgs& a) { run_packed(a); }
}  // namespace cpu
}  // namespace tileops
#pragma GCC diagnostic pop
#pragma GCC pop_options
#else
namespace tileops {
namespace cpu {
void TILEOPS_ISA_RUN(const GemmArgs&) { TORCH_INTERNAL_ASSERT(false, "tileops: no x86 vector kernels in this build"); }
}  // namespace cpu
}  // namespace tileops
#endif
