// CUDA entry: the caller holds a device guard; empty problems launch nothing.
#include "kinds.h"

namespace tileops {

void gemm_cuda(const GemmArgs& a) {
  if (a.batch == 0 || a.M == 0 || a.N == 0) return;
  switch (a.kind) {
    case Kind::Matmul: cuda::gemm_cuda_matmul(a); break;
    case Kind::ConvFwd: cuda::gemm_cuda_conv_fwd(a); break;
    case Kind::ConvDgrad: cuda::gemm_cuda_conv_dgrad(a); break;
    case Kind::ConvWgrad: cuda::gemm_cuda_conv_wgrad(a); break;
  }
}

}  // namespace tileops
