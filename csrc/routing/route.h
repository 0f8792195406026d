// Routing as data: each op path (matmul, conv forward, grad_input, grad_weight, depthwise, the
// CPU) is one ordered table of candidates, and the first candidate that can run a problem runs it.
// The tables live one file per op path (csrc/cuda/routing/*.cu, csrc/cpu/gemm_cpu.cpp); this file
// is the mechanism they share, with no CUDA in it:
//   - route(table, problem): asks each candidate's why_not in order, runs the first that has no
//     reason against it, and fails with every candidate's reason where none can;
//   - TILEOPS_TRACE=1 (read once; tileops._C._route_trace switches it): each routed problem logs one
//     line to stderr, the problem, each candidate passed over with its reason, the one chosen, and,
//     indented below it, the problems it lowers to and the configs its families choose;
//   - explain(call): runs `call` (an op, on real tensors) with routing in explain mode, where
//     route() records its decision and asks the chosen candidate's explain hook (its config, the
//     problems it lowers to) instead of running it: nothing is launched. tileops.explain wraps it.
// docs/dispatch.md is generated from the registered tables (scripts/dev/gen_dispatch.py), and
// tests/test_routing.py fails when it is stale. How to add a candidate: docs/architecture.md.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "common/gemm_args.h"

namespace tileops {
namespace routing {

// One routed problem's decision, as explain returns it and the trace prints it.
struct Decision {
  std::string op;       // the op path: "matmul", "conv2d.forward", "conv2d.grad_weight", ...
  std::string problem;  // the problem in one line (dtype, sizes, layouts)
  std::vector<std::pair<std::string, std::string>> passed;  // (candidate, why it could not run), in order
  std::string kernel;   // the candidate chosen
  std::string doc;      // its family's page (docs/kernels/...)
  std::string config;   // the config its family chose ("" where it has none)
  std::string why;      // why that config: "heuristic: ...", "pinned", "autotuned (cached)"
  std::vector<Decision> lowered;  // the problems the chosen candidate hands to other tables
};

// One candidate of a table. why_not(problem): nullptr when it can run the problem, else the reason
// it cannot, in a few words (a static string); it must not launch, allocate or change anything.
// run(problem): runs it. explain (optional): fills the decision's config and lowered problems as
// run would choose them, launching nothing.
struct Route {
  const char* name;  // the kernel family, as docs/kernels/ names it
  const char* when;  // when it runs, in words, for docs/dispatch.md
  const char* doc;   // its family's page and anchor under docs/kernels/
  const char* (*why_not)(const GemmArgs&);
  void (*run)(const GemmArgs&);
  void (*explain)(const GemmArgs&, Decision&) = nullptr;
};

// The explain hook of a candidate whose run only hands its problem to other tables (launching
// nothing itself): in explain mode, running it records their decisions.
template <void (*Run)(const GemmArgs&)>
void explain_by_running(const GemmArgs& a, Decision&) {
  Run(a);
}

// A table: registered at load time (one namespace-scope Table per op path), so the docs generator
// and tileops._C._routing_tables list every table before any call.
struct Table {
  const char* op;       // the op path
  const char* summary;  // what reaches it, one line
  std::vector<Route> rows;
  bool on_cpu;  // the CPU's table: no TF32 switch, so its problems do not name one
  Table(const char* op, const char* summary, std::vector<Route> rows, bool on_cpu = false);
};
const std::vector<const Table*>& tables();  // in registration order

// Runs the first candidate of `t` that can run `a` (see above).
void route(const Table& t, const GemmArgs& a);
// A candidate that hands its problem to another table (a conv table's depthwise row).
template <const Table& Next>
void route_to(const GemmArgs& a) {
  route(Next, a);
}

// The problem in one line, as the trace and explain show it.
std::string describe(const GemmArgs& a, bool tf32_switch = true);

// Explain mode (this thread): whether route() records instead of running, and explain itself.
bool explaining();
std::vector<Decision> explain(const std::function<void()>& call);
bool tracing();
void set_tracing(bool on);

// TILEOPS_PORTABLE=1 (read once): every op is routed as on a GPU before Hopper (sm_80 to sm_89),
// whatever the GPU: no candidate that uses TMA, wgmma, thread-block clusters or dependent launches
// runs, so an H100 runs and times the kernels an A100 or an RTX 4090 would
// (docs/dispatch.md#tileops_portable1-the-pre-hopper-routes). kPortableOnly: the reason such a
// candidate gives.
bool portable_only();
inline constexpr char kPortableOnly[] = "TILEOPS_PORTABLE=1: routed as on a GPU before Hopper";
// A line of the trace, at the current depth (a family reporting its config while it runs).
void trace_line(const std::string& text);

}  // namespace routing
}  // namespace tileops
