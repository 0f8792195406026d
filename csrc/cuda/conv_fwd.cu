#include "launch.cuh"
namespace tileops::cuda {
void gemm_cuda_conv_fwd(const GemmArgs& a) { launch_problem<ConvFwdProblem>(a, a.conv); }
}  // namespace tileops::cuda
