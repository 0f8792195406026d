#include "launch.cuh"
namespace tileops::cuda {
void gemm_cuda_matmul(const GemmArgs& a) { launch_problem<MatmulProblem>(a, a.mm); }
}  // namespace tileops::cuda
