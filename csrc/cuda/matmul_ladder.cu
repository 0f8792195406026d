// Matmul on the generic rungs (naive ... vectorized, mma): every kernel instantiated for
// MatmulProblem lives in this translation unit, which compiles beside matmul.cu (Hopper).
#include "launch.cuh"

namespace tileops::cuda {
void launch_matmul(const GemmArgs& a) { launch_problem<MatmulProblem>(a, a.mm); }
}  // namespace tileops::cuda
