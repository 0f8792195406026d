// The Hopper matmul's persistent kernels for tf32 in clusters of 1: one entry of launch.cuh's
// TILEOPS_SM90_PERSISTENT_UNITS, in a translation unit of its own (launch_persistent_cluster says why).
#include "cuda/sm90/launch.cuh"

namespace tileops::cuda::hopper {
TILEOPS_SM90_PERSISTENT_UNIT(float, 1)
}  // namespace tileops::cuda::hopper
