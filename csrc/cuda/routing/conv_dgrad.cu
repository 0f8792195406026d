// The conv2d data-gradient (grad_input) routing table (CUDA), in order: the first candidate that
// can run the problem runs it (routing/route.h). docs/dispatch.md is made from this table.
#include "cuda/routing/candidates.h"
#include "cuda/routing/launch_rungs.cuh"

namespace tileops::cuda {
namespace {
constexpr const char* kDoc = "kernels/conv-lowered.md#data-gradient-conv_dgrad_lowered";
}  // namespace

const routing::Table kConvDgradRoutes(
    "conv2d.grad_input", "conv2d's data gradient (the transposed conv of dY)",
    {
        {"depthwise", "groups == C (the depthwise table)", "kernels/depthwise.md", depthwise_why_not,
         routing::route_to<kDepthwiseDgradRoutes>, routing::explain_by_running<routing::route_to<kDepthwiseDgradRoutes>>},
        {"grouped_dense", "1 < groups < C on tensor cores, <= 64 groups: one dense conv, block-diagonal weight",
         "kernels/grouped.md", grouped_dense_why_not, grouped_dense_run, grouped_dense_explain},
        {"gemm_1x1", "16-bit 1x1 stride-1 unpadded, dx and dy channels_last: one GEMM, w read in place", kDoc,
         dgrad_gemm_1x1_why_not, dgrad_gemm_1x1_run, dgrad_gemm_1x1_explain},
        {"phases", "stride 1: the one phase, a forward conv of dY with the kernel flipped (the forward table)", kDoc,
         dgrad_phases_why_not, dgrad_phases_run, dgrad_phases_row_explain},
        {"phases_or_col2im", "strides up to 2x2 (sh * sw <= 4): phases or col2im, autotuned (family conv_dgrad)",
         kDoc, dgrad_strided_why_not, dgrad_strided_run, dgrad_strided_explain},
        {"col2im", "larger strides (patch embeddings): dcols = dY . W, then col2im", kDoc, dgrad_col2im_why_not,
         dgrad_col2im_run, dgrad_col2im_explain},
        {"ladder", "everything else (fp64; grouped in fp32 without TF32 or over 64 groups): the ladder's implicit GEMM",
         "kernels/ladder.md#the-rungs",
         ladder_why_not, ladder_conv_run<ConvDgradProblem>, ladder_explain},
    });

void gemm_cuda_conv_dgrad(const GemmArgs& a) { routing::route(kConvDgradRoutes, a); }

}  // namespace tileops::cuda
