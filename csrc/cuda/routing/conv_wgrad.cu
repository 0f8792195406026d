#include "cuda/routing/launch_rungs.cuh"
namespace tileops::cuda {
void gemm_cuda_conv_wgrad(const GemmArgs& a) {
  if (conv_wgrad_depthwise(a) || conv_wgrad_lowered(a)) return;
  launch_problem<ConvWgradProblem>(a, a.conv);
}
}  // namespace tileops::cuda
