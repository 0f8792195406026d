// The packed GEMM (cpu/gemm_packed.h) for the build's baseline instruction set: the generic
// at::vec::Vectorized (fixed-size arrays the compiler vectorizes as the baseline allows). Runs
// where packed_avx2 cannot (a CPU without AVX2 + FMA, or a non-x86 build).
#include "cpu/gemm_packed.h"

namespace tileops {
namespace cpu {
void run_packed_base(const GemmArgs& a) { run_packed(a); }
}  // namespace cpu
}  // namespace tileops
