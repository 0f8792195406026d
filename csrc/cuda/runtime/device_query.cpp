#include "cuda/runtime/device_query.h"

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime_api.h>

namespace tileops {
namespace cuda {
DeviceQuery device_query(int index) {
  cudaDeviceProp p{};
  C10_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  DeviceQuery q;
  q.name = p.name;
  q.major = p.major;
  q.minor = p.minor;
  q.sm_count = p.multiProcessorCount;
  q.shared_mem_per_sm = p.sharedMemPerMultiprocessor;
  q.shared_mem_per_block_optin = p.sharedMemPerBlockOptin;
  q.l2_bytes = p.l2CacheSize;
  q.total_mem = p.totalGlobalMem;
  C10_CUDA_CHECK(cudaDriverGetVersion(&q.driver_version));
  C10_CUDA_CHECK(cudaRuntimeGetVersion(&q.runtime_version));
  return q;
}
}  // namespace cuda
}  // namespace tileops
