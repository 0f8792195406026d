// Implementations of the schemas in tileops.cpp: one device-agnostic function per op
// (it routes to the CPU or CUDA kernel family by the inputs' device), plus autocast
// rules that cast floating inputs to the autocast dtype as torch's matmul/conv do.
#include <ATen/autocast_mode.h>

#include "ops/common.h"

namespace tileops {
namespace ops {
namespace {

template <c10::DeviceType DT>
struct Autocast {
  static at::Tensor cast(const at::Tensor& t) {
    return at::autocast::cached_cast(at::autocast::get_autocast_dtype(DT), t, DT);
  }
  static c10::optional<at::Tensor> cast(const c10::optional<at::Tensor>& t) {
    return t.has_value() ? c10::optional<at::Tensor>(cast(*t)) : t;
  }
  using Guard = c10::impl::ExcludeDispatchKeyGuard;
  static c10::DispatchKey key() { return at::autocast::get_autocast_dispatch_key_from_device_type(DT); }

  static at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, c10::string_view algo) {
    Guard g(key());
    return dispatch_matmul(cast(a), cast(b), algo);
  }
  static at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                           c10::string_view act, const c10::optional<at::Tensor>& res) {
    Guard g(key());
    return dispatch_linear(cast(x), cast(w), cast(b), act, cast(res));
  }
  static at::Tensor conv2d(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                           at::IntArrayRef st, at::IntArrayRef pd, at::IntArrayRef dl, int64_t groups,
                           c10::string_view act, const c10::optional<at::Tensor>& res) {
    Guard g(key());
    return dispatch_conv2d(cast(x), cast(w), cast(b), st, pd, dl, groups, act, cast(res));
  }
  // The composites (conv_family.cpp) are cast here once, so that their unfused epilogue adds a
  // bias and residual of the output's dtype.
  template <const char* Name>
  static at::Tensor conv_nd(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                            at::IntArrayRef st, at::IntArrayRef pd, at::IntArrayRef dl, int64_t groups,
                            c10::string_view act, const c10::optional<at::Tensor>& res) {
    Guard g(key());
    return dispatch_conv_nd<Name>(cast(x), cast(w), cast(b), st, pd, dl, groups, act, cast(res));
  }
  template <const char* Name>
  static at::Tensor conv_transpose(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                                   at::IntArrayRef st, at::IntArrayRef pd, at::IntArrayRef opd, int64_t groups,
                                   at::IntArrayRef dl, c10::string_view act, const c10::optional<at::Tensor>& res) {
    Guard g(key());
    return dispatch_conv_transpose<Name>(cast(x), cast(w), cast(b), st, pd, opd, groups, dl, act, cast(res));
  }
};

void impl_all(torch::Library& m) {
  m.impl("matmul", &matmul);
  m.impl("linear", &linear);
  m.impl("conv2d", &conv2d);
  m.impl("_conv2d_backward", &conv2d_backward);
}

template <c10::DeviceType DT>
void impl_autocast(torch::Library& m) {
  m.impl("matmul", &Autocast<DT>::matmul);
  m.impl("linear", &Autocast<DT>::linear);
  m.impl("conv2d", &Autocast<DT>::conv2d);
  m.impl("conv1d", &Autocast<DT>::template conv_nd<kConv1d>);
  m.impl("conv3d", &Autocast<DT>::template conv_nd<kConv3d>);
  m.impl("conv_transpose1d", &Autocast<DT>::template conv_transpose<kConvTranspose1d>);
  m.impl("conv_transpose2d", &Autocast<DT>::template conv_transpose<kConvTranspose2d>);
  m.impl("conv_transpose3d", &Autocast<DT>::template conv_transpose<kConvTranspose3d>);
}

}  // namespace

// CUDA is registered in CPU-only builds too, so a CUDA tensor gets an error that says
// how to rebuild rather than the dispatcher's "could not run" message.
TORCH_LIBRARY_IMPL(tileops, CPU, m) { impl_all(m); }
TORCH_LIBRARY_IMPL(tileops, CUDA, m) { impl_all(m); }
// Sparse and MKL-DNN tensors reach the same checks, which name the argument and the layout
// expected, instead of the dispatcher's "could not run ... with arguments from the SparseCPU backend".
TORCH_LIBRARY_IMPL(tileops, SparseCPU, m) { impl_all(m); }
TORCH_LIBRARY_IMPL(tileops, SparseCUDA, m) { impl_all(m); }
TORCH_LIBRARY_IMPL(tileops, SparseCsrCPU, m) { impl_all(m); }
TORCH_LIBRARY_IMPL(tileops, SparseCsrCUDA, m) { impl_all(m); }
TORCH_LIBRARY_IMPL(tileops, MkldnnCPU, m) { impl_all(m); }
TORCH_LIBRARY_IMPL(tileops, AutocastCPU, m) { impl_autocast<c10::DeviceType::CPU>(m); }
TORCH_LIBRARY_IMPL(tileops, AutocastCUDA, m) { impl_autocast<c10::DeviceType::CUDA>(m); }

}  // namespace ops
}  // namespace tileops
