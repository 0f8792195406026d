// The CUDA routing tables' candidates (routing/route.h's Route rows): each family's why_not / run
// / explain, declared here and defined in its family's files, so that a table names them in one
// line each. A candidate's why_not is pure (no launch, no allocation); its run may assume it.
#pragma once
#include <string>
#include <vector>

#include "autotune/cuda_timing.h"
#include "common/gemm_args.h"
#include "routing/route.h"

namespace tileops {
namespace cuda {

// An explain hook's config: what autotune::run would pick (pins, the cache, else the heuristic).
inline void explain_config(routing::Decision& d, const std::string& op_key, const std::vector<std::string>& names,
                           int heuristic, const std::string& reason) {
  const autotune::Choice c = autotune::peek(op_key, names, heuristic);
  d.config = names[size_t(c.index)];
  d.why = c.source == autotune::Source::Heuristic
              ? "heuristic: " + reason
              : std::string(autotune::source_name(c.source)) + " (the heuristic's: " + names[size_t(heuristic)] + ")";
}

// skinny/matmul_skinny_tc.cu: M <= 16 on tensor cores (Hopper), K split over a cluster
const char* skinny_tc_why_not(const GemmArgs& a);
void skinny_tc_run(const GemmArgs& a);
void skinny_tc_explain(const GemmArgs& a, routing::Decision& d);
// ladder/matmul_ladder.cu: the SIMT skinny kernel (fp32, fp64), the SIMT rungs 'auto' runs, the
// padded-copy fp32 path, and a pinned rung
const char* skinny_why_not(const GemmArgs& a);
void skinny_run(const GemmArgs& a);
const char* simt_padded_why_not(const GemmArgs& a);
void simt_padded_run(const GemmArgs& a);
const char* simt_why_not(const GemmArgs& a);
void simt_run(const GemmArgs& a);
void simt_explain(const GemmArgs& a, routing::Decision& d);
void rung_run(const GemmArgs& a);
// Matmul on every rung but 'wgmma' (launch_rungs.cuh's launch_problem<MatmulProblem>): the one
// translation unit that instantiates the ladder's matmul kernels defines it, and the matmul table's
// 'mma' row calls it rather than compiling them again.
void launch_matmul(const GemmArgs& a);

// The conv tables (routing/conv_fwd.cu, conv_dgrad.cu, conv_wgrad.cu) and the forward table, which
// a data gradient's phases take too.
extern const routing::Table kConvFwdRoutes, kConvDgradRoutes, kConvWgradRoutes;
// routing/depthwise.cpp: the depthwise tables (groups == C > 1, is_depthwise), one per conv kind,
// which the conv tables' "depthwise" row routes to; their kernels: conv/depthwise.h
bool is_depthwise(const ConvOperands& c);
extern const routing::Table kDepthwiseFwdRoutes, kDepthwiseDgradRoutes, kDepthwiseWgradRoutes;
// The conv tables' "depthwise" row
inline const char* depthwise_why_not(const GemmArgs& a) {
  return is_depthwise(a.conv) ? nullptr : "not depthwise (groups != channels)";
}
// conv/grouped_dense.cpp: every conv table's "grouped_dense" row (1 < groups < C on tensor cores):
// one dense conv over a block-diagonal weight, routed back into the same table with groups == 1
const char* grouped_dense_why_not(const GemmArgs& a);
void grouped_dense_run(const GemmArgs& a);
void grouped_dense_explain(const GemmArgs& a, routing::Decision& d);
// The last row of every conv table: the ladder's implicit GEMM takes any problem.
inline const char* ladder_why_not(const GemmArgs&) { return nullptr; }
void ladder_explain(const GemmArgs& a, routing::Decision& d);  // routing/launch_rungs.cuh's rung
// conv/conv_fwd_lowered.cu: the forward's lowered rows (groups == 1); conv/lowering.h's
// lowered_why_not is the im2col row's check
const char* conv_nchw_1x1_why_not(const GemmArgs& a);
void conv_nchw_1x1_run(const GemmArgs& a);  // it only lowers onto the matmul table: its explain too
const char* conv_simt_f32_why_not(const GemmArgs& a);
void conv_simt_f32_run(const GemmArgs& a);
void conv_simt_f32_explain(const GemmArgs& a, routing::Decision& d);
const char* conv_smallc_f32_why_not(const GemmArgs& a);
void conv_smallc_f32_run(const GemmArgs& a);
const char* conv_sm90_strided_why_not(const GemmArgs& a);
void conv_sm90_strided_run(const GemmArgs& a);
void conv_sm90_strided_explain(const GemmArgs& a, routing::Decision& d);
const char* conv_smallc_why_not(const GemmArgs& a);
void conv_smallc_run(const GemmArgs& a);
const char* conv_gemm_1x1_why_not(const GemmArgs& a);
void conv_gemm_1x1_run(const GemmArgs& a);
void conv_gemm_1x1_explain(const GemmArgs& a, routing::Decision& d);
const char* conv_sm90_why_not(const GemmArgs& a);
void conv_sm90_run(const GemmArgs& a);
void conv_sm90_explain(const GemmArgs& a, routing::Decision& d);
const char* lowered_why_not(const GemmArgs& a);
void conv_im2col_run(const GemmArgs& a);
void conv_im2col_explain(const GemmArgs& a, routing::Decision& d);
// conv/conv_dgrad_lowered.cpp: the data gradient's lowered rows
const char* dgrad_gemm_1x1_why_not(const GemmArgs& a);
void dgrad_gemm_1x1_run(const GemmArgs& a);
void dgrad_gemm_1x1_explain(const GemmArgs& a, routing::Decision& d);
const char* dgrad_phases_why_not(const GemmArgs& a);
void dgrad_phases_run(const GemmArgs& a);
void dgrad_phases_row_explain(const GemmArgs& a, routing::Decision& d);
const char* dgrad_strided_why_not(const GemmArgs& a);
void dgrad_strided_run(const GemmArgs& a);
void dgrad_strided_explain(const GemmArgs& a, routing::Decision& d);
const char* dgrad_col2im_why_not(const GemmArgs& a);
void dgrad_col2im_run(const GemmArgs& a);
void dgrad_col2im_explain(const GemmArgs& a, routing::Decision& d);
// conv/conv_wgrad_lowered.cu: the weight gradient's lowered rows
const char* wgrad_simt_f32_why_not(const GemmArgs& a);
void wgrad_simt_f32_run(const GemmArgs& a);
const char* wgrad_sm90_why_not(const GemmArgs& a);
void wgrad_sm90_run(const GemmArgs& a);
void wgrad_sm90_explain(const GemmArgs& a, routing::Decision& d);
const char* wgrad_smallc_why_not(const GemmArgs& a);
void wgrad_smallc_run(const GemmArgs& a);
const char* wgrad_im2col_why_not(const GemmArgs& a);
void wgrad_im2col_run(const GemmArgs& a);
void wgrad_im2col_explain(const GemmArgs& a, routing::Decision& d);
// conv/conv_sm90.cu: the Hopper implicit-GEMM conv kernels' checks and configs, on the lowered GEMM
// (a.mm: B and C; a.conv: the channels_last x they gather from)
const char* conv_fwd_sm90_why_not(const GemmArgs& g);
void conv_fwd_sm90_explain(const GemmArgs& g, routing::Decision& d);
const char* conv_wgrad_sm90_why_not(const GemmArgs& g);
void conv_wgrad_sm90_explain(const GemmArgs& g, routing::Decision& d);
// conv/conv_smallc*.cu: few input channels (R*S*C <= 256) with no column buffer, for forwards (and
// data gradients run as forwards) and weight gradients, on the problem as the lowered paths gather it
// conv_smallc_fwd.cu: the fused 16-bit forward, C % 8 != 0, x rows (w, c) contiguous (quads: C <= 4)
const char* smallc_fwd_why_not(const GemmArgs& a);
void smallc_fwd_run(const GemmArgs& a);
// conv_smallc_f32.cu: the direct SIMT forward in fp32 with TF32 off, any strides of x, w and y
const char* smallc_f32_why_not(const GemmArgs& a);
void smallc_f32_run(const GemmArgs& a);
// conv_smallc_wgrad.cu: the quads' 16-bit weight gradient, x channels_last, dY channel-contiguous
const char* smallc_wgrad_why_not(const GemmArgs& a);
void smallc_wgrad_run(const GemmArgs& a);

}  // namespace cuda
}  // namespace tileops
