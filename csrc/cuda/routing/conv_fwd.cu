#include "cuda/routing/launch_rungs.cuh"
namespace tileops::cuda {
void gemm_cuda_conv_fwd(const GemmArgs& a) {
  if (conv_fwd_depthwise(a) || conv_fwd_lowered(a)) return;
  launch_problem<ConvFwdProblem>(a, a.conv);
}
}  // namespace tileops::cuda
