// launch_util.h's Workspace, padded_rows and device_properties: the ATen side of what the kernel units ask for without
// including ATen (a tensor from the caching allocator, the device's properties).
#include <ATen/cuda/CUDAContext.h>

#include <memory>

#include "cuda/runtime/cuda_util.h"

namespace tileops {
namespace cuda {

Workspace workspace(int64_t elements, c10::ScalarType st) { return hold(at::empty({elements}, cuda_options(st))); }

Workspace padded_rows(const void* p, int64_t rows, int64_t K, int64_t s_row, int64_t s_k, c10::ScalarType st,
                      int64_t kp) {
  return hold(copy_padded(device_view(p, {rows, K}, {s_row, s_k}, st), kp, true));
}

const cudaDeviceProp& device_properties() { return *at::cuda::getCurrentDeviceProperties(); }

}  // namespace cuda
}  // namespace tileops
