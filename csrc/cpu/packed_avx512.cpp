// The packed GEMM for AVX-512 (F, BW, VL, DQ) + FMA + F16C: the `cpu_avx512` row (cpu/gemm_cpu.cpp),
// 12 x 32 fp32 blocks in 32 registers.
#define TILEOPS_ISA_AVX512
#define TILEOPS_ISA_RUN run_packed_avx512
#include "cpu/packed_isa.h"
