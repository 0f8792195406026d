// launch_util.h's Workspace and device_properties: the ATen side of what the kernel units ask for without
// including ATen (a tensor from the caching allocator, the device's properties).
#include <ATen/cuda/CUDAContext.h>

#include <memory>

#include "cuda/runtime/cuda_util.h"

namespace tileops {
namespace cuda {

Workspace float_workspace(int64_t elements) { return hold(at::empty({elements}, cuda_options(at::kFloat))); }

const cudaDeviceProp& device_properties() { return *at::cuda::getCurrentDeviceProperties(); }

}  // namespace cuda
}  // namespace tileops
