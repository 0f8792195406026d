// One translation unit per problem kind, so they compile in parallel.
#pragma once
#include "../common/gemm_args.h"

namespace tileops {
namespace cuda {
void gemm_cuda_matmul(const GemmArgs& a);
void gemm_cuda_conv_fwd(const GemmArgs& a);
void gemm_cuda_conv_dgrad(const GemmArgs& a);
void gemm_cuda_conv_wgrad(const GemmArgs& a);
// Fast paths tried first by the conv kinds; each returns false when it does not apply.
bool conv_fwd_depthwise(const GemmArgs& a);  // conv_depthwise.cu
bool conv_dgrad_depthwise(const GemmArgs& a);
bool conv_wgrad_depthwise(const GemmArgs& a);
bool conv_fwd_lowered(const GemmArgs& a);    // conv_lowered.cu: groups == 1 onto the matmul families
bool conv_dgrad_lowered(const GemmArgs& a);
bool conv_wgrad_lowered(const GemmArgs& a);
// matmul.cu: implicit-GEMM forward on Hopper; a.mm holds B (weight rows, K-major) and C,
// a.conv the channels_last input. False when it cannot run (dtype, GPU, C % 64, layout).
bool conv_fwd_sm90(const GemmArgs& a);
}  // namespace cuda
}  // namespace tileops
