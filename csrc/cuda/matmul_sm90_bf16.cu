// The Hopper matmul kernels for bf16, in a translation unit of their own (sm90_host.cuh says why).
#include "sm90_launch.cuh"

template void tileops::cuda::hopper::run_sm90_any_layout<c10::BFloat16>(const GemmArgs& a, TmaLayout l);
