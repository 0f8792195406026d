// The Hopper matmul kernels for bf16, in a translation unit of their own (host.cuh says why).
#include "cuda/sm90/launch.cuh"

template void tileops::cuda::hopper::run_sm90_any_layout<c10::BFloat16>(const GemmArgs& a, TmaLayout l);
