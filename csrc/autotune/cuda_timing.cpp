// Autotuning on CUDA: device keys, CUDA-event timing on the current stream, the capture check.
#include "autotune/cuda_timing.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mm.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <mutex>

#include "generated/build_info.h"
#include "routing/route.h"

namespace tileops {
namespace autotune {
namespace {

constexpr int kReps = 5;  // timed launches per candidate, after one warm-up; the median counts

// A legacy-stream query during another stream's capture errors: count that as capturing too.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the next launch check must not see it
    return true;
  }
  return st != cudaStreamCaptureStatusNone;
}

struct Events {
  std::array<cudaEvent_t, kReps + 1> e{};
  Events() {
    for (auto& x : e) C10_CUDA_CHECK(cudaEventCreate(&x));
  }
  ~Events() {
    for (auto x : e)
      if (x) (void)cudaEventDestroy(x);
  }
};

// Median ms of candidate i over kReps launches; NaN when it throws (it cannot run this problem).
double time_ms(const std::function<void(int)>& launch, int i) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  Events ev;
  try {
    launch(i);  // warm-up: module loading, allocator growth, function attributes
    C10_CUDA_CHECK(cudaEventRecord(ev.e[0], stream));
    for (int r = 0; r < kReps; ++r) {
      launch(i);
      C10_CUDA_CHECK(cudaEventRecord(ev.e[r + 1], stream));
    }
  } catch (const c10::Error&) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  C10_CUDA_CHECK(cudaEventSynchronize(ev.e[kReps]));
  std::array<float, kReps> t{};
  for (int r = 0; r < kReps; ++r) C10_CUDA_CHECK(cudaEventElapsedTime(&t[r], ev.e[r], ev.e[r + 1]));
  std::nth_element(t.begin(), t.begin() + kReps / 2, t.end());
  return t[kReps / 2];
}

}  // namespace

std::string device_key(int device) {
  static std::mutex mu;
  static std::map<int, std::string> keys;
  std::lock_guard<std::mutex> lock(mu);
  auto it = keys.find(device);
  if (it == keys.end()) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(device);
    const std::string key = std::string(p->name) + " sm_" + std::to_string(p->major) + std::to_string(p->minor) + " " +
                            std::to_string(p->multiProcessorCount) + "SM tileops-" + TILEOPS_VERSION + "-" +
                            TILEOPS_GIT_SHA;
    it = keys.emplace(device, key).first;
  }
  return it->second;
}

namespace {
Choice choice(const std::string& op_key, const std::vector<std::string>& names, int heuristic,
              const std::function<void(int)>& launch) {
  if (!active()) return {heuristic, Source::Heuristic};
  const bool can_measure = enabled() && !capturing(at::cuda::getCurrentCUDAStream());
  return choose_with(device_key(at::cuda::current_device()), op_key, names, heuristic,
                     [&](int i) { return time_ms(launch, i); }, can_measure);
}

// Under TILEOPS_TRACE, the config chosen, below the routing decision that led here.
void trace_choice(const std::string& op_key, const std::vector<std::string>& names, const Choice& c) {
  if (routing::tracing())
    routing::trace_line("config " + op_key.substr(0, op_key.find('|')) + " = " + names[size_t(c.index)] + " (" +
                        source_name(c.source) + ")");
}
}  // namespace

int choose(const std::string& op_key, const std::vector<std::string>& names, int heuristic,
           const std::function<void(int)>& launch) {
  return choice(op_key, names, heuristic, launch).index;
}

int run(const std::string& op_key, const std::vector<std::string>& names, int heuristic,
        const std::function<void(int)>& launch) {
  const Choice c = choice(op_key, names, heuristic, launch);
  trace_choice(op_key, names, c);
  launch(c.index);
  return c.index;
}

int run(const std::function<std::string()>& make_op_key, const std::vector<std::string>& names, int heuristic,
        const std::function<void(int)>& launch) {
  if (!active() && !routing::tracing()) {  // the fast path: no key
    launch(heuristic);
    return heuristic;
  }
  return run(make_op_key(), names, heuristic, launch);
}

Choice peek(const std::string& op_key, const std::vector<std::string>& names, int heuristic) {
  return choose_with(device_key(at::cuda::current_device()), op_key, names, heuristic,
                     [](int) { return std::numeric_limits<double>::quiet_NaN(); }, false);
}

Choice choose_mm_for_test(const std::string& op_key, const std::vector<int64_t>& sizes, int heuristic) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, at::cuda::current_device());
  std::vector<at::Tensor> a, out;
  std::vector<std::string> names;
  for (const int64_t n : sizes) {
    a.push_back(at::full({n, n}, 1.0f / float(n), opts));
    out.push_back(at::empty({n, n}, opts));
    names.push_back("mm" + std::to_string(n));
  }
  auto launch = [&](int i) { at::mm_out(out[i], a[i], a[i]); };
  const bool can_measure = enabled() && !capturing(at::cuda::getCurrentCUDAStream());
  return choose_with(device_key(at::cuda::current_device()), op_key, names, heuristic,
                     [&](int i) { return time_ms(launch, i); }, can_measure);
}

}  // namespace autotune
}  // namespace tileops
