#include "launch.cuh"
namespace tileops::cuda {
void gemm_cuda_conv_dgrad(const GemmArgs& a) { launch_problem<ConvDgradProblem>(a, a.conv); }
}  // namespace tileops::cuda
