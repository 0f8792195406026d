#pragma once
#include <cstdint>
#include <string>

namespace tileops {
namespace cuda {
struct DeviceQuery {
  std::string name;
  int major = 0, minor = 0, sm_count = 0;
  int64_t shared_mem_per_sm = 0, shared_mem_per_block_optin = 0, l2_bytes = 0, total_mem = 0;
  int driver_version = 0, runtime_version = 0;  // as 1000*major + 10*minor
};
DeviceQuery device_query(int index);
}  // namespace cuda
}  // namespace tileops
