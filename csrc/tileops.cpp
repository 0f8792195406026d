// Every tileops schema, in one place, and the Python module (build facts, device query).
#include <torch/csrc/Exceptions.h>    // torch::wrap_pybind_function
#include <torch/csrc/utils/pybind.h>  // pybind11 with at::Tensor and optional casters
#include <torch/library.h>

#include "autotune/policy.h"
#include "ops/explain.h"
#include "routing/route.h"

#ifdef TILEOPS_WITH_CUDA
#include "autotune/cuda_timing.h"
#include "cuda/runtime/device_query.h"
#endif

#include "generated/build_info.h"

TORCH_LIBRARY(tileops, m) {
  const std::vector<at::Tag> pt2{at::Tag::pt2_compliant_tag};
  m.def("matmul(Tensor a, Tensor b, str algo=\"auto\") -> Tensor", pt2);
  // residual (last, so positional calls without it keep working): added before the activation
  m.def(
      "linear(Tensor x, Tensor weight, Tensor? bias=None, str activation=\"none\", Tensor? residual=None) -> Tensor",
      pt2);
  m.def(
      "conv2d(Tensor x, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
      "int[2] dilation=1, int groups=1, str activation=\"none\", Tensor? residual=None) -> Tensor",
      pt2);
  m.def(
      "_conv2d_backward(Tensor grad_out, Tensor x, Tensor weight, int[2] stride, int[2] padding, "
      "int[2] dilation, int groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
      pt2);
  // The rest of the convolution family, made of the two above (ops/conv_family.cpp): conv1d is
  // conv2d with H = 1; a transposed conv is conv2d's data gradient, whose grad_out is x; a 3-D one
  // is a 2-D one over (batch x depth) with the depth taps as channels.
  m.def(
      "conv1d(Tensor x, Tensor weight, Tensor? bias=None, int[1] stride=1, int[1] padding=0, "
      "int[1] dilation=1, int groups=1, str activation=\"none\", Tensor? residual=None) -> Tensor",
      pt2);
  m.def(
      "conv_transpose1d(Tensor x, Tensor weight, Tensor? bias=None, int[1] stride=1, int[1] padding=0, "
      "int[1] output_padding=0, int groups=1, int[1] dilation=1, str activation=\"none\", "
      "Tensor? residual=None) -> Tensor",
      pt2);
  m.def(
      "conv_transpose2d(Tensor x, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
      "int[2] output_padding=0, int groups=1, int[2] dilation=1, str activation=\"none\", "
      "Tensor? residual=None) -> Tensor",
      pt2);
  m.def(
      "conv3d(Tensor x, Tensor weight, Tensor? bias=None, int[3] stride=1, int[3] padding=0, "
      "int[3] dilation=1, int groups=1, str activation=\"none\", Tensor? residual=None) -> Tensor",
      pt2);
  m.def(
      "conv_transpose3d(Tensor x, Tensor weight, Tensor? bias=None, int[3] stride=1, int[3] padding=0, "
      "int[3] output_padding=0, int groups=1, int[3] dilation=1, str activation=\"none\", "
      "Tensor? residual=None) -> Tensor",
      pt2);
}

namespace py = pybind11;

namespace {
// routing::Decision as Python data (tileops.explain's dicts).
py::list decisions(const std::vector<tileops::routing::Decision>& ds) {
  py::list out;
  for (const auto& d : ds) {
    py::dict e;
    e["op"] = d.op;
    e["problem"] = d.problem;
    py::list passed;
    for (const auto& [name, why] : d.passed) passed.append(py::make_tuple(name, why));
    e["passed_over"] = passed;
    e["kernel"] = d.kernel;
    e["doc"] = d.doc;
    e["config"] = d.config;
    e["why"] = d.why;
    e["lowered"] = decisions(d.lowered);
    out.append(e);
  }
  return out;
}
}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tileops compiled kernels; the ops live in torch.ops.tileops";
  m.def("build_info", [] {
    py::dict d;
    d["version"] = TILEOPS_VERSION;
    d["git_sha"] = TILEOPS_GIT_SHA;
    d["torch_version"] = TILEOPS_BUILD_TORCH;
#ifdef TILEOPS_WITH_CUDA
    d["with_cuda"] = true;
#else
    d["with_cuda"] = false;
#endif
    d["cuda_version"] = TILEOPS_CUDA_VERSION;
    d["arch_list"] = TILEOPS_ARCH_LIST;
    return d;
  });
#ifdef TILEOPS_WITH_CUDA
  m.def("device_query", [](int index) {
    const auto q = tileops::cuda::device_query(index);
    py::dict d;
    d["name"] = q.name;
    d["capability"] = py::make_tuple(q.major, q.minor);
    d["sm_count"] = q.sm_count;
    d["shared_mem_per_sm"] = q.shared_mem_per_sm;
    d["shared_mem_per_block_optin"] = q.shared_mem_per_block_optin;
    d["l2_bytes"] = q.l2_bytes;
    d["total_mem"] = q.total_mem;
    d["driver_version"] = q.driver_version;
    d["runtime_version"] = q.runtime_version;
    return d;
  }, py::arg("index") = 0, "Properties of CUDA device `index` as the CUDA runtime reports them.");
#endif

  // Routing (python/tileops/routing.py is the user API: explain, trace; csrc/routing/route.h).
  m.def("_routing_tables", [] {
    py::list out;
    for (const tileops::routing::Table* t : tileops::routing::tables()) {
      py::list rows;
      for (const auto& r : t->rows) {
        py::dict d;
        d["name"] = r.name;
        d["when"] = r.when;
        d["doc"] = r.doc;
        rows.append(d);
      }
      py::dict d;
      d["op"] = t->op;
      d["summary"] = t->summary;
      d["rows"] = rows;
      out.append(d);
    }
    return out;
  }, "Every registered routing table, in registration order: op, summary, rows (name, when, doc).");
  m.def("_route_trace", [](bool on) { tileops::routing::set_tracing(on); }, py::arg("on"),
        "Turns TILEOPS_TRACE's per-call routing log on or off for this process.");
  m.def("_route_tracing", [] { return tileops::routing::tracing(); });
  m.def("_portable_only", [] { return tileops::routing::portable_only(); },
        "Whether TILEOPS_PORTABLE=1 routes every op as on a GPU before Hopper (read once).");
  namespace ops_ = tileops::ops;
  m.def("_explain_matmul", torch::wrap_pybind_function([](const at::Tensor& a, const at::Tensor& b,
                                                          const std::string& algo, bool backward) {
          return decisions(ops_::explain_matmul(a, b, algo, backward));
        }));
  m.def("_explain_linear",
        torch::wrap_pybind_function([](const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias,
                                       const std::string& activation, const c10::optional<at::Tensor>& residual,
                                       bool backward) {
          return decisions(ops_::explain_linear(x, w, bias, activation, residual, backward));
        }));
  m.def("_explain_conv2d",
        torch::wrap_pybind_function([](const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias,
                                       std::vector<int64_t> stride, std::vector<int64_t> padding,
                                       std::vector<int64_t> dilation, int64_t groups, const std::string& activation,
                                       const c10::optional<at::Tensor>& residual, bool backward) {
          return decisions(ops_::explain_conv2d(x, w, bias, stride, padding, dilation, groups, activation, residual,
                                                backward));
        }));
  m.def("_explain_conv2d_backward",
        torch::wrap_pybind_function([](const at::Tensor& gy, const at::Tensor& x, const at::Tensor& w,
                                       std::vector<int64_t> stride, std::vector<int64_t> padding,
                                       std::vector<int64_t> dilation, int64_t groups, std::vector<bool> mask) {
          TORCH_CHECK(mask.size() == 3, "tileops.explain: output_mask must have 3 entries");
          return decisions(ops_::explain_conv2d_backward(gy, x, w, stride, padding, dilation, groups,
                                                         {mask[0], mask[1], mask[2]}));
        }));

  // Autotuning (python/tileops/autotune.py is the user API; csrc/autotune/policy.h the policy).
  namespace at_ = tileops::autotune;
  m.def("_autotune_set_enabled", torch::wrap_pybind_function([](bool on) { at_::set_enabled(on); }));
  m.def("_autotune_enabled", torch::wrap_pybind_function([] { return at_::enabled(); }));
  m.def("_autotune_pin", torch::wrap_pybind_function(
      [](const std::string& pattern, const std::string& candidate) { at_::pin(pattern, candidate); }));
  m.def("_autotune_unpin", torch::wrap_pybind_function([](const std::optional<std::string>& pattern) {
    if (pattern) at_::unpin(*pattern);
    else at_::unpin_all();
  }), py::arg("pattern") = py::none());
  m.def("_autotune_pins", torch::wrap_pybind_function([] { return at_::pins(); }));
  m.def("_autotune_clear", torch::wrap_pybind_function([](bool memory, bool disk) { at_::clear(memory, disk); }),
        py::arg("memory") = true, py::arg("disk") = true);
  m.def("_autotune_reload", torch::wrap_pybind_function([] { at_::reload(); }));
  m.def("_autotune_cache_path", torch::wrap_pybind_function([] { return at_::cache_path(); }));
  m.def("_autotune_entries", torch::wrap_pybind_function([] { return at_::entries(); }));
  m.def("_autotune_families", torch::wrap_pybind_function([] { return at_::families(); }));
  m.def("_autotune_candidates",
        torch::wrap_pybind_function([](const std::string& family) { return at_::candidates(family); }));
  m.def("_autotune_reset_from_env_for_test", torch::wrap_pybind_function([] { at_::reset_from_env(); }));
  m.def("_autotune_shape_class", torch::wrap_pybind_function([](int64_t M, int64_t N, int64_t K, int64_t batch) {
    return at_::shape_class(M, N, K, batch);
  }), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("batch") = 1);
  // The policy with fake timings: returns (index, source, how many candidates were measured).
  // Without the GIL, so that tests can call it from several threads at once.
  m.def("_autotune_choose_for_test", torch::wrap_pybind_function_no_gil(
      [](const std::string& key, const std::vector<std::string>& names, int heuristic,
         const std::vector<double>& fake_ms, const std::string& device, bool can_measure) {
        TORCH_CHECK(fake_ms.size() == names.size(), "_autotune_choose_for_test: one fake time per candidate");
        int calls = 0;
        const auto c = at_::choose_with(device, key, names, heuristic, [&](int i) {
          ++calls;
          return fake_ms.at(size_t(i));
        }, can_measure);
        return std::make_tuple(c.index, std::string(at_::source_name(c.source)), calls);
      }), py::arg("key"), py::arg("names"), py::arg("heuristic"), py::arg("fake_ms"),
      py::arg("device") = "test-device", py::arg("can_measure") = true);
#ifdef TILEOPS_WITH_CUDA
  m.def("_autotune_device_key", torch::wrap_pybind_function([](int index) { return at_::device_key(index); }),
        py::arg("index") = 0);
  // Real CUDA-event timing of float32 mm candidates of the given sizes: returns (index, source).
  m.def("_autotune_cuda_choose_for_test", torch::wrap_pybind_function(
      [](const std::string& key, const std::vector<int64_t>& sizes, int heuristic) {
        const auto c = at_::choose_mm_for_test(key, sizes, heuristic);
        return py::make_tuple(c.index, at_::source_name(c.source));
      }));
#endif
}
