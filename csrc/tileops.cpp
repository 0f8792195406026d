// Every tileops schema, in one place, and the Python module (build facts, device query).
#include <torch/extension.h>

#ifdef TILEOPS_WITH_CUDA
#include "cuda/device_query.h"
#endif

#include "generated/build_info.h"

TORCH_LIBRARY(tileops, m) {
  const std::vector<at::Tag> pt2{at::Tag::pt2_compliant_tag};
  m.def("matmul(Tensor a, Tensor b, str algo=\"auto\") -> Tensor", pt2);
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, str activation=\"none\") -> Tensor", pt2);
  m.def(
      "conv2d(Tensor x, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
      "int[2] dilation=1, int groups=1, str activation=\"none\") -> Tensor",
      pt2);
  m.def(
      "_conv2d_backward(Tensor grad_out, Tensor x, Tensor weight, int[2] stride, int[2] padding, "
      "int[2] dilation, int groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
      pt2);
}

namespace py = pybind11;

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
}
