// The Hopper matmul kernels for fp16, in a translation unit of their own (host.cuh says why).
#include "cuda/sm90/launch.cuh"

template void tileops::cuda::hopper::run_sm90_any_layout<c10::Half>(const GemmArgs& a, TmaLayout l);
