// One translation unit per problem kind, so they compile in parallel.
#pragma once
#include "../common/gemm_args.h"

namespace tileops {
namespace cuda {
void gemm_cuda_matmul(const GemmArgs& a);
void gemm_cuda_conv_fwd(const GemmArgs& a);
void gemm_cuda_conv_dgrad(const GemmArgs& a);
void gemm_cuda_conv_wgrad(const GemmArgs& a);
}  // namespace cuda
}  // namespace tileops
