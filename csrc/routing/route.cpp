// The routing mechanism (route.h): the table registry, route(), the trace and explain mode.
#include "routing/route.h"

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdio>
#include <sstream>

#include "autotune/policy.h"

namespace tileops {
namespace routing {
namespace {

std::vector<const Table*>& registry() {
  static std::vector<const Table*> r;
  return r;
}

std::atomic<int>& trace_state() {  // -1: not read yet
  static std::atomic<int> s{-1};
  return s;
}

// Explain mode: the decisions of this thread's explain() call, and where the one being made is.
struct Recorder {
  std::vector<Decision> top;
  std::vector<Decision*> open;  // the decisions whose explain hooks are running (innermost last)
};
thread_local Recorder* recorder = nullptr;
thread_local int depth = 0;  // trace indentation: routed problems inside a chosen candidate's run

const char* layout(const int64_t* s, int64_t C, int64_t H, int64_t W) {
  if (nhwc_dense(s, C, H, W)) return "channels_last";
  if (nchw_dense(s, C, H, W)) return "contiguous";
  return s[1] == 1 ? "strided (channels inner)" : "strided";
}

// A matmul operand's layout from its (row, column) strides: which side is contiguous.
std::string side(const int64_t* s, const char* row, const char* col) {
  if (s[2] == 1) return std::string(col) + "-contiguous";
  if (s[1] == 1) return std::string(row) + "-contiguous";
  return "strided";
}

void print(const Decision& d) {
  std::ostringstream o;
  o << "tileops route " << std::string(2 * depth, ' ') << d.op << " [" << d.problem << "]: ";
  for (const auto& [name, why] : d.passed) o << name << " (no: " << why << "), ";
  o << "-> " << d.kernel;
  std::fprintf(stderr, "%s\n", o.str().c_str());
}

}  // namespace

Table::Table(const char* op_, const char* summary_, std::vector<Route> rows_, bool on_cpu_)
    : op(op_), summary(summary_), rows(std::move(rows_)), on_cpu(on_cpu_) {
  registry().push_back(this);
}

const std::vector<const Table*>& tables() { return registry(); }

std::string describe(const GemmArgs& a, bool tf32_switch) {
  std::ostringstream o;
  o << c10::toString(a.dtype);
  if (tf32_switch && a.dtype == c10::ScalarType::Float) o << (a.allow_tf32 ? " (TF32 allowed)" : " (TF32 off)");
  if (a.kind == Kind::Matmul) {
    o << " M=" << a.M << " N=" << a.N << " K=" << a.K;
    if (a.batch > 1) o << " batch=" << a.batch;
    if (a.mm.a) o << ", A " << side(a.mm.sa, "m", "k") << ", B " << side(a.mm.sb, "k", "n");
  } else {
    const auto& c = a.conv;
    o << " N=" << c.N << " C=" << c.C << " " << c.H << "x" << c.W << " K=" << c.K << " " << c.R << "x" << c.S
      << " stride " << c.sh << "x" << c.sw << " pad " << c.ph << "x" << c.pw << " dil " << c.dh << "x" << c.dw;
    if (c.groups > 1) o << " groups " << c.groups;
    o << ", x " << layout(c.xs, c.C, c.H, c.W) << ", w " << layout(c.ws, c.Cg, c.R, c.S) << ", y "
      << layout(c.ys, c.K, c.P, c.Q);
  }
  if (a.bias) o << ", bias";
  if (a.act != Act::None) o << ", activation";
  if (a.residual) o << ", residual";
  if (a.algo != Algo::Auto) o << ", algo pinned";
  return o.str();
}

bool tracing() {
  int s = trace_state().load(std::memory_order_relaxed);
  if (s < 0) {
    s = autotune::env_flag("TILEOPS_TRACE", false) ? 1 : 0;
    trace_state().store(s);
  }
  return s == 1;
}
void set_tracing(bool on) { trace_state().store(on ? 1 : 0); }

bool portable_only() {
  static const bool on = autotune::env_flag("TILEOPS_PORTABLE", false);
  return on;
}

void trace_line(const std::string& text) {
  if (recorder == nullptr) std::fprintf(stderr, "tileops route %s  %s\n", std::string(2 * depth, ' ').c_str(), text.c_str());
}

bool explaining() { return recorder != nullptr; }

void route(const Table& t, const GemmArgs& a) {
  if (recorder == nullptr && !tracing()) {  // the fast path: no strings
    for (const Route& r : t.rows) {
      if (r.why_not(a) == nullptr) return r.run(a);
    }
  }
  Decision d;
  d.op = t.op;
  d.problem = describe(a, !t.on_cpu);
  const Route* chosen = nullptr;
  for (const Route& r : t.rows) {
    if (const char* why = r.why_not(a)) {
      d.passed.emplace_back(r.name, why);
    } else {
      chosen = &r;
      break;
    }
  }
  if (chosen == nullptr) {
    std::ostringstream o;
    for (const auto& [name, why] : d.passed) o << "\n  " << name << ": " << why;
    TORCH_CHECK(false, "tileops: no kernel can run this ", t.op, " problem (", d.problem, "):", o.str());
  }
  d.kernel = chosen->name;
  d.doc = chosen->doc;
  if (recorder != nullptr) {
    recorder->open.push_back(&d);
    struct Pop {
      ~Pop() { recorder->open.pop_back(); }
    };
    {
      const Pop pop;
      if (chosen->explain) chosen->explain(a, d);
    }
    (recorder->open.empty() ? recorder->top : recorder->open.back()->lowered).push_back(std::move(d));
    return;
  }
  print(d);
  ++depth;
  struct Undepth {
    ~Undepth() { --depth; }
  } undepth;
  chosen->run(a);
}

std::vector<Decision> explain(const std::function<void()>& call) {
  TORCH_CHECK(recorder == nullptr, "tileops.explain: already explaining on this thread");
  Recorder r;
  recorder = &r;
  struct Reset {
    ~Reset() { recorder = nullptr; }
  } reset;
  call();
  return std::move(r.top);
}

}  // namespace routing
}  // namespace tileops
