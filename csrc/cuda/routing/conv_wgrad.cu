// The conv2d weight-gradient (grad_weight) routing table (CUDA), in order: the first candidate
// that can run the problem runs it (routing/route.h). docs/dispatch.md is made from this table.
#include "cuda/routing/candidates.h"
#include "cuda/routing/launch_rungs.cuh"

namespace tileops::cuda {
namespace {
constexpr const char* kDoc = "kernels/conv-lowered.md#weight-gradient-conv_wgrad_lowered";
}  // namespace

const routing::Table kConvWgradRoutes(
    "conv2d.grad_weight", "conv2d's weight gradient (dW = dY^T . cols(x))",
    {
        {"depthwise", "groups == C (the depthwise table)", "kernels/depthwise.md", depthwise_why_not,
         routing::route_to<kDepthwiseWgradRoutes>, routing::explain_by_running<routing::route_to<kDepthwiseWgradRoutes>>},
        {"grouped_dense", "1 < groups < C on tensor cores, <= 64 groups: one dense conv, block-diagonal weight",
         "kernels/grouped.md", grouped_dense_why_not, grouped_dense_run, grouped_dense_explain},
        {"simt_f32", "fp32 (TF32 off) NCHW, at most 128 output channels or 1x1: the SIMT implicit GEMM", kDoc,
         wgrad_simt_f32_why_not, wgrad_simt_f32_run},
        {"sm90_implicit", "16-bit on Hopper, C % 64 == 0, dY channels_last: x and dY read in place",
         "kernels/conv-sm90.md#weight-gradient-conv_wgrad_sm90-family-conv_wgrad_sm90", wgrad_sm90_why_not, wgrad_sm90_run,
         wgrad_sm90_explain},
        {"smallc", "16-bit, C <= 4 at an even stride: the quads' kernel (no column buffer)", "kernels/conv-smallc.md#the-16-bit-kernels",
         wgrad_smallc_why_not, wgrad_smallc_run},
        {"im2col_gemm", "groups == 1, fp16/bf16/fp32, a column buffer within 2^28 elements: the matmul table", kDoc,
         wgrad_im2col_why_not, wgrad_im2col_run, wgrad_im2col_explain},
        {"ladder",
         "everything else (fp64, grouped the dense row leaves, huge or empty reductions): the ladder's implicit GEMM",
         "kernels/ladder.md#the-rungs", ladder_why_not, ladder_conv_run<ConvWgradProblem>, ladder_explain},
    });

void gemm_cuda_conv_wgrad(const GemmArgs& a) { routing::route(kConvWgradRoutes, a); }

}  // namespace tileops::cuda
