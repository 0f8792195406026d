// Autotuning at a CUDA call site: the policy of policy.h with candidates timed by CUDA
// events on the current stream. A call site looks like
//
//   static const std::vector<std::string> kNames = {"bn128", "bn256"};   // its candidates, as data
//   autotune::run([&] { return autotune::op_key({"matmul_sm90", c10::toString(a.dtype),
//                                                 autotune::shape_class(a.M, a.N, a.K, a.batch), "tn"}); },
//                 kNames, /*heuristic=*/a.N > 128 ? 1 : 0,
//                 [&](int i) { i == 0 ? launch_128() : launch_256(); });
//
// launch(i) must enqueue candidate i completely (workspace, zeroing of split-K partials...) so it can
// run several times in a row: when timing, every candidate writes the real output in turn, which is
// harmless because every candidate computes the same result. A candidate that cannot run the problem
// may throw (TORCH_CHECK): it is then skipped while timing. Timing synchronizes the host with the
// stream, once per candidate, on a cache miss only, and never happens while the current stream is
// capturing a CUDA graph (the cache, else the heuristic, is used then).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autotune/policy.h"

namespace tileops {
namespace autotune {

// "<GPU name> sm_<major><minor> <SMs>SM tileops-<version>-<git sha>" for CUDA device `device`:
// the part of a cache key that keeps choices from crossing GPUs and builds.
std::string device_key(int device);

// Candidate index for op_key on the current device and stream (see policy.h for the policy).
// On a cache miss with autotuning on, this runs launch(i) for every candidate to time them.
int choose(const std::string& op_key, const std::vector<std::string>& names, int heuristic,
           const std::function<void(int)>& launch);

// choose() then launch(chosen); returns the index launched. The key-building form builds the key
// only when autotuning is on or a pin is set, so the default path costs one atomic load.
int run(const std::string& op_key, const std::vector<std::string>& names, int heuristic,
        const std::function<void(int)>& launch);
int run(const std::function<std::string()>& make_op_key, const std::vector<std::string>& names, int heuristic,
        const std::function<void(int)>& launch);

// The candidate a call would run, from the pins and the cache, else the heuristic; never measures
// (tileops.explain: routing/route.h).
Choice peek(const std::string& op_key, const std::vector<std::string>& names, int heuristic);

// For the CUDA tests: candidate i is a float32 at::mm_out of two sizes[i] x sizes[i] matrices on the
// current device and stream, so the timing, capture and key paths are exercised without kernels.
Choice choose_mm_for_test(const std::string& op_key, const std::vector<int64_t>& sizes, int heuristic);

}  // namespace autotune
}  // namespace tileops
