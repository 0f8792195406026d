// Programmatic dependent launch, the device side (sm_90; the host side is ClusterLaunch's
// `dependent`, cuda_util.h).
#pragma once

namespace tileops {
namespace cuda {

// Programmatic dependent launch (sm_90): a kernel launched with ClusterLaunch's `dependent` may
// start while the previous kernel on its stream still runs, once every block of that kernel has
// called griddep_launch_dependents (or exited), so its launch and prologue overlap the other's
// tail; griddep_wait then blocks until that kernel has finished and its writes are visible. Both
// are no-ops in a kernel launched the ordinary way, and before sm_90.
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace cuda
}  // namespace tileops
