// Picks a kernel family and config for a problem and launches it on the current stream.
// Configs are data: one line per family here.
#pragma once
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "../common/gemm_args.h"
#include "kinds.h"
#include "gemm_simt.cuh"
#include "gemm_tc.cuh"

namespace tileops {
namespace cuda {

using SimtF32 = SimtConfig<64, 64, 16, 4, 4>;
using SimtF64 = SimtConfig<64, 64, 16, 4, 4>;
using Tc16 = TcConfig<128, 128, 32, 2, 4>;   // fp16 / bf16
using TcTf32 = TcConfig<128, 128, 16, 2, 4>;  // fp32 as tf32

template <class Cfg>
dim3 gemm_grid(const GemmArgs& a) {
  const int64_t gm = (a.M + Cfg::BM - 1) / Cfg::BM, gn = (a.N + Cfg::BN - 1) / Cfg::BN;
  TORCH_CHECK(gm < (int64_t(1) << 31) && gn <= 65535,
              "tileops: problem too large for one launch (M=", a.M, ", N=", a.N, ")");
  return dim3(unsigned(gm), unsigned(gn), unsigned(std::min<int64_t>(a.batch, 65535)));
}

template <typename T, typename Acc, class Cfg, class P>
void launch_simt(const P& p, const GemmArgs& a) {
  gemm_simt_kernel<T, Acc, P, Cfg><<<gemm_grid<Cfg>(a), Cfg::THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
      p, a.batch, a.M, a.N, a.K, Epilogue<T>{static_cast<const T*>(a.bias), a.act});
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, class Cfg, class P>
void launch_tc(const P& p, const GemmArgs& a) {
  gemm_tc_kernel<T, P, Cfg><<<gemm_grid<Cfg>(a), Cfg::THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
      p, a.batch, a.M, a.N, a.K, Epilogue<T>{static_cast<const T*>(a.bias), a.act});
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// dtype -> family: fp64 and strict fp32 on SIMT; fp16, bf16 and TF32 on tensor cores.
template <template <typename> class Problem, class Operands>
void launch_problem(const GemmArgs& a, const Operands& ops) {
  if (a.algo == Algo::Simt) {  // the SIMT family takes every dtype (fp32 accumulation below fp64)
    switch (a.dtype) {
      case at::kDouble: return launch_simt<double, double, SimtF64>(Problem<double>(ops), a);
      case at::kFloat: return launch_simt<float, float, SimtF32>(Problem<float>(ops), a);
      case at::kHalf: return launch_simt<c10::Half, float, SimtF32>(Problem<c10::Half>(ops), a);
      case at::kBFloat16: return launch_simt<c10::BFloat16, float, SimtF32>(Problem<c10::BFloat16>(ops), a);
      default: TORCH_CHECK(false, "tileops: unsupported dtype ", a.dtype);
    }
  }
  if (a.algo == Algo::Wmma) {  // tensor cores: fp32 runs as TF32 whatever the flags say
    TORCH_CHECK(a.dtype != at::kDouble, "tileops.matmul: algo='wmma' takes float32, float16 and bfloat16, got float64");
    if (a.dtype == at::kFloat) return launch_tc<float, TcTf32>(Problem<float>(ops), a);
  }
  switch (a.dtype) {
    case at::kDouble: launch_simt<double, double, SimtF64>(Problem<double>(ops), a); break;
    case at::kFloat:
      if (a.allow_tf32) launch_tc<float, TcTf32>(Problem<float>(ops), a);
      else launch_simt<float, float, SimtF32>(Problem<float>(ops), a);
      break;
    case at::kHalf: launch_tc<c10::Half, Tc16>(Problem<c10::Half>(ops), a); break;
    case at::kBFloat16: launch_tc<c10::BFloat16, Tc16>(Problem<c10::BFloat16>(ops), a); break;
    default: TORCH_CHECK(false, "tileops: unsupported dtype ", a.dtype);
  }
}

}  // namespace cuda
}  // namespace tileops
