// The Hopper matmul for tf32: the dispatch and the one-tile kernels, in a translation unit of their own
// (host.cuh says why); its persistent kernels compile in matmul_tf32_c1.cu and matmul_tf32_c2.cu.
#include "cuda/sm90/launch.cuh"

template void tileops::cuda::hopper::run_sm90_any_layout<float>(const GemmArgs& a, TmaLayout l);
