// The conv2d forward routing table (CUDA), in order: the first candidate that can run the
// problem runs it (routing/route.h). docs/dispatch.md is made from this table.
#include "cuda/routing/candidates.h"
#include "cuda/routing/launch_rungs.cuh"

namespace tileops::cuda {

const routing::Table kConvFwdRoutes(
    "conv2d.forward", "conv2d, and each phase of a data gradient run as a forward conv",
    {
        {"depthwise", "groups == C (the depthwise table)", "kernels/depthwise.md", depthwise_why_not,
         routing::route_to<kDepthwiseFwdRoutes>, routing::explain_by_running<routing::route_to<kDepthwiseFwdRoutes>>},
        {"grouped_dense", "1 < groups < C on tensor cores, <= 64 groups: one dense conv, block-diagonal weight",
         "kernels/grouped.md", grouped_dense_why_not, grouped_dense_run, grouped_dense_explain},
        {"nchw_1x1", "1x1 stride-1 unpadded, NCHW x and y, no bias: a batched GEMM per image",
         "kernels/conv-lowered.md#forward-conv_fwd_lowered-in-order-and-why", conv_nchw_1x1_why_not, conv_nchw_1x1_run,
         routing::explain_by_running<conv_nchw_1x1_run>},
        {"simt_f32", "fp32 (TF32 off) NCHW x whose channels pad little: the SIMT implicit GEMM",
         "kernels/conv-lowered.md#forward-conv_fwd_lowered-in-order-and-why", conv_simt_f32_why_not, conv_simt_f32_run,
         conv_simt_f32_explain},
        {"smallc_f32", "fp32 (TF32 off), R*S*C <= 256: the direct small-C kernel",
         "kernels/conv-smallc.md#the-fp32-direct-kernel-conv_smallc_f32_kernel",
         conv_smallc_f32_why_not, conv_smallc_f32_run},
        {"sm90_implicit_strided", "16-bit on Hopper, y not channels_last but its rows in groups: written in place",
         "kernels/conv-sm90.md#forward-conv_fwd_sm90-family-conv_fwd_sm90", conv_sm90_strided_why_not, conv_sm90_strided_run,
         conv_sm90_strided_explain},
        {"smallc", "16-bit, C % 8 != 0, R*S*C <= 256, x rows (w, c) contiguous: the fused small-C kernel",
         "kernels/conv-smallc.md#the-16-bit-kernels", conv_smallc_why_not, conv_smallc_run},
        {"gemm_1x1", "1x1 stride-1 unpadded, channels_last x, C % 8 == 0: one GEMM over x itself",
         "kernels/conv-lowered.md#forward-conv_fwd_lowered-in-order-and-why", conv_gemm_1x1_why_not, conv_gemm_1x1_run,
         conv_gemm_1x1_explain},
        {"sm90_implicit", "16-bit on Hopper, C % 64 == 0: the implicit GEMM gathers x (no column buffer)",
         "kernels/conv-sm90.md#forward-conv_fwd_sm90-family-conv_fwd_sm90", conv_sm90_why_not, conv_sm90_run,
         conv_sm90_explain},
        {"im2col_gemm", "groups == 1, fp16/bf16/fp32: a column buffer, then the matmul table",
         "kernels/conv-lowered.md#forward-conv_fwd_lowered-in-order-and-why", lowered_why_not, conv_im2col_run,
         conv_im2col_explain},
        {"ladder", "everything else (fp64; grouped in fp32 without TF32 or over 64 groups): the ladder's implicit GEMM",
         "kernels/ladder.md#the-rungs",
         ladder_why_not, ladder_conv_run<ConvFwdProblem>, ladder_explain},
    });

void gemm_cuda_conv_fwd(const GemmArgs& a) { routing::route(kConvFwdRoutes, a); }

}  // namespace tileops::cuda
