// tileops.explain's C++ side: an op's routing decisions on given tensors, launching nothing
// (routing/route.h's explain mode around the op's own implementation, so the decision is the one
// a call would make). The backward's problems are the ones autograd.cpp's backward formulas hand
// to the ops, with a gradient of the output's shape (allocated, never written).
#include "ops/explain.h"

#include "ops/common.h"

namespace tileops {
namespace ops {

std::vector<routing::Decision> explain_matmul(const at::Tensor& a, const at::Tensor& b, c10::string_view algo,
                                              bool backward) {
  return routing::explain([&] {
    const at::Tensor y = matmul(a, b, algo);
    if (!backward) return;
    const at::Tensor gy = at::empty_like(y);
    matmul(gy, b.mT(), "auto");  // grad_a
    matmul(a.mT(), gy, "auto");  // grad_b
  });
}

std::vector<routing::Decision> explain_linear(const at::Tensor& x, const at::Tensor& w,
                                              const c10::optional<at::Tensor>& bias, c10::string_view activation,
                                              const c10::optional<at::Tensor>& residual, bool backward) {
  return routing::explain([&] {
    const at::Tensor y = linear(x, w, bias, activation, residual);
    if (!backward) return;
    const at::Tensor gz2 = at::empty({y.numel() / w.size(0), w.size(0)}, y.options());
    matmul(gz2, w, "auto");                                   // grad_x
    matmul(gz2.t(), x.reshape({-1, w.size(1)}), "auto");  // grad_weight
  });
}

std::vector<routing::Decision> explain_conv2d(const at::Tensor& x, const at::Tensor& w,
                                              const c10::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                              at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                                              c10::string_view activation, const c10::optional<at::Tensor>& residual,
                                              bool backward) {
  return routing::explain([&] {
    const at::Tensor y = conv2d(x, w, bias, stride, padding, dilation, groups, activation, residual);
    if (!backward) return;
    const bool unbatched = x.dim() == 3;
    const at::Tensor gy = at::empty_like(unbatched ? y.unsqueeze(0) : y);
    conv2d_backward(gy, unbatched ? x.unsqueeze(0) : x, w, stride, padding, dilation, groups, {true, true, false});
  });
}

std::vector<routing::Decision> explain_conv2d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                       const at::Tensor& w, at::IntArrayRef stride,
                                                       at::IntArrayRef padding, at::IntArrayRef dilation,
                                                       int64_t groups, std::array<bool, 3> output_mask) {
  return routing::explain(
      [&] { conv2d_backward(grad_out, x, w, stride, padding, dilation, groups, output_mask); });
}

}  // namespace ops
}  // namespace tileops
