// Independent launches on side streams (streams.cpp). Host code.
#pragma once
#include <functional>
#include <vector>

namespace tileops {
namespace cuda {

// Runs fns[0] on the current stream and each other fn on a side stream (a fixed few
// per device, from torch's pool; a nested call takes ones its callers do not hold),
// all after the work already on the current stream and before what follows it (fork and join by
// events, which CUDA graph capture records too). For independent launches that fill the GPU only
// together: a backward's data and weight gradients, a strided data gradient's phases (one launch
// of 1.5 waves each). Each fn must write its own outputs. Sequential while autotuning is on, so
// that candidates are timed alone, and where TILEOPS_STREAMS=0.
void concurrently(const std::vector<std::function<void()>>& fns);

}  // namespace cuda
}  // namespace tileops
