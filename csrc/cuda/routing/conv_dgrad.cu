#include "cuda/routing/launch_rungs.cuh"
namespace tileops::cuda {
void gemm_cuda_conv_dgrad(const GemmArgs& a) {
  if (conv_dgrad_depthwise(a) || conv_dgrad_lowered(a)) return;
  launch_problem<ConvDgradProblem>(a, a.conv);
}
}  // namespace tileops::cuda
