// The packed GEMM for AVX2 + FMA + F16C: the `cpu_avx2` row (cpu/gemm_cpu.cpp), 6 x 16 fp32 blocks.
#define TILEOPS_ISA_AVX2
#define TILEOPS_ISA_RUN run_packed_avx2
#include "cpu/packed_isa.h"
