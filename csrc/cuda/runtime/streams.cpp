// Side streams and the launch flags read from the environment: TILEOPS_STREAMS (streams_on),
// TILEOPS_PDL (dependent_launches, cuda_util.h), and concurrently (streams.h). Moved here from
// routing/dispatch.cpp unchanged.
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/ScalarType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <vector>

#include "autotune/policy.h"
#include "cuda/runtime/streams.h"
#include "routing/route.h"  // portable_only

namespace tileops {
namespace cuda {

// TILEOPS_STREAMS=0: one stream for everything (profiling, debugging); read once.
bool streams_on() {
  static const bool on = autotune::env_flag("TILEOPS_STREAMS", true);
  return on;
}

// TILEOPS_PDL=0 (or TILEOPS_PORTABLE=1: as before Hopper): every kernel launched the ordinary way
// (cuda_util.h); read once.
bool dependent_launches() {
  static const bool on = autotune::env_flag("TILEOPS_PDL", true) && !routing::portable_only();
  return on && at::cuda::getCurrentDeviceProperties()->major >= 9;
}

// Side stream i of device dev: a fixed few per device, made once. (torch's pool hands out its 32
// streams in turn, and the caching allocator keeps each stream's freed blocks apart, so taking a
// fresh pool stream per call grew the cache by a workspace per stream until all 32 had one:
// test_no_allocation_growth_cuda, 28 more segments over 10,000 calls.)
c10::cuda::CUDAStream side_stream(size_t i, c10::DeviceIndex dev) {
  static std::mutex mu;
  static std::vector<std::vector<c10::cuda::CUDAStream>> streams;  // [device][i]
  const std::lock_guard<std::mutex> lock(mu);
  if (streams.size() <= size_t(dev)) streams.resize(size_t(dev) + 1);
  auto& mine = streams[size_t(dev)];
  while (mine.size() <= i) mine.push_back(c10::cuda::getStreamFromPool(false, dev));
  return mine[i];
}

void concurrently(const std::vector<std::function<void()>>& fns) {
  if (fns.size() < 2 || autotune::enabled() || !streams_on()) {  // tuning times each candidate alone
    for (const auto& fn : fns) fn();
    return;
  }
  const c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream();
  // Side streams for fns[1..]: the ones after those that enclosing calls on this thread hold (a
  // nested call, a data gradient's phases beside its weight gradient, must not queue behind its
  // caller's other fns), skipping the current stream; held until every fn has been issued.
  thread_local size_t held = 0;
  struct Release {
    size_t& held;
    size_t outer;
    ~Release() { held = outer; }
  } release{held, held};
  std::vector<c10::cuda::CUDAStream> sides;
  while (sides.size() + 1 < fns.size()) {
    const c10::cuda::CUDAStream s = side_stream(held++, main.device_index());
    if (s != main) sides.push_back(s);
  }
  // Events: fork (0) and one join per side, this thread's own, created once and reused. (Three
  // at::cuda::CUDAEvent made and destroyed a call cost host time on every conv backward:
  // docs/performance.md#host-overhead.) A stream's wait takes the event's state
  // at the call, so a finished call's events are free again; nested calls take the ones after.
  const size_t dev = size_t(main.device_index());
  thread_local std::vector<std::vector<cudaEvent_t>> pool(size_t(c10::cuda::device_count()));  // [device]
  thread_local std::vector<size_t> taken(pool.size(), 0);  // [device]: held by calls in progress
  const size_t first = taken[dev];
  const Release events{taken[dev], first};
  taken[dev] += fns.size();
  while (pool[dev].size() < taken[dev]) {
    cudaEvent_t e = nullptr;
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    pool[dev].push_back(e);  // never destroyed: a thread's few live as long as the process
  }
  auto event = [&](size_t i) { return pool[dev][first + i]; };
  C10_CUDA_CHECK(cudaEventRecord(event(0), main.stream()));
  std::exception_ptr error;  // the first failure, rethrown once every stream is joined back
  auto attempt = [&](const std::function<void()>& fn) {
    try {
      fn();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  };
  for (size_t i = 1; i < fns.size(); ++i) {
    const c10::cuda::CUDAStream side = sides[i - 1];
    C10_CUDA_CHECK(cudaStreamWaitEvent(side.stream(), event(0), 0));
    {
      // allocations inside fn belong to `side`: the caching allocator reuses them only in its order
      const c10::cuda::CUDAStreamGuard guard(side);
      attempt(fns[i]);
    }
    C10_CUDA_CHECK(cudaEventRecord(event(i), side.stream()));
  }
  attempt(fns[0]);
  for (size_t i = 1; i < fns.size(); ++i) C10_CUDA_CHECK(cudaStreamWaitEvent(main.stream(), event(i), 0));
  if (error) std::rethrow_exception(error);
}

}  // namespace cuda
}  // namespace tileops
