// The Hopper matmul for fp16: the dispatch and the one-tile kernels, in a translation unit of their own
// (host.cuh says why); its persistent kernels compile in matmul_fp16_c1.cu and matmul_fp16_c2.cu.
#include "cuda/sm90/launch.cuh"

template void tileops::cuda::hopper::run_sm90_any_layout<c10::Half>(const GemmArgs& a, TmaLayout l);
