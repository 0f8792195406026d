// The CUDA entry points: one per problem kind (routing/matmul.cu, conv_fwd.cu, conv_dgrad.cu,
// conv_wgrad.cu: one translation unit per problem kind, so they compile in parallel) and the
// conv families' fast paths they try in turn. A data gradient's phase math: conv/dgrad_phases.h.
#pragma once
#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include "common/gemm_args.h"

namespace tileops {
namespace cuda {
void gemm_cuda_matmul(const GemmArgs& a);
void gemm_cuda_conv_fwd(const GemmArgs& a);
void gemm_cuda_conv_dgrad(const GemmArgs& a);
void gemm_cuda_conv_wgrad(const GemmArgs& a);
// Fast paths tried first by the conv kinds; each returns false when it does not apply.
// conv_smallc_fwd.cu, for conv_fwd_sm90: 64 input channels at unit stride (ResNet's 3x3 64@56), the
// weight resident and the input rows staged once an item (conv_rows64_kernel). False when it does not apply.
bool conv_fwd_rows64(const GemmArgs& a);
// routing/matmul.cu: why the Hopper kernels cannot run problem a on this build, GPU and dtype (nullptr:
// they can); its M, N, K are the GEMM's (the op layer sets them for the conv kinds too).
const char* sm90_unavailable(const GemmArgs& a);
// conv_sm90.cu: implicit-GEMM forward on Hopper; a.mm holds B (weight rows, K-major) and C,
// a.conv the channels_last input. False when it cannot run (dtype, GPU, C % 64, layout).
bool conv_fwd_sm90(const GemmArgs& a);
// conv_sm90.cu: a strided data gradient's phases (below), each a forward problem lowered as
// conv_fwd_sm90 takes it (a.mm: B is the same for every phase, one weight of all phases' taps,
// [N rows][cols] with row stride ld, of which phase i reads the columns from b_k0[i] on; C a
// strided view of dx), in one launch; a phase of K = 0 writes zeros. False where one cannot run
// it (what conv_fwd_sm90 needs, for every phase with k tiles; no epilogue): nothing has run then.
// `before` runs right before the launch (the caller's copy of the taps into that weight).
bool conv_dgrad_phases_sm90(const std::vector<GemmArgs>& phases, const std::vector<int64_t>& b_k0, int64_t cols,
                            int64_t ld, const std::function<void()>& before);
// conv_sm90.cu: a stride-1 data gradient as conv_fwd_sm90's forward conv a of dY (a.mm: C, dx's
// rows), with B the forward weight w itself, channels_last-dense [K][R][S][C], read MN-major with
// its taps flipped in the kernel: no transposition of w first. Only where conv_fwd_sm90 would run
// a one-tile im2col kernel; false (nothing run) elsewhere.
bool conv_dgrad_flipped_sm90(const GemmArgs& a, const void* w);
const char* conv_dgrad_flipped_sm90_why_not(const GemmArgs& a, const void* w);  // its check alone (pure)
// conv_sm90.cu: implicit-GEMM weight gradient on Hopper, dW^T [R*S*C, K] = cols(x)^T . dY; a.mm
// holds B (dY rows [N*P*Q, K], MN-major) and C, a.conv the channels_last input. False as above.
bool conv_wgrad_sm90(const GemmArgs& a);

}  // namespace cuda
}  // namespace tileops
