// tileops.explain (python/tileops/routing.py): each op's routing decisions on given tensors, as
// routing::Decision lists (explain.cpp), launching nothing. backward: also the problems of its
// gradients (every input's).
#pragma once
#include <ATen/core/Tensor.h>

#include <array>
#include <vector>

#include "routing/route.h"

namespace tileops {
namespace ops {

std::vector<routing::Decision> explain_matmul(const at::Tensor& a, const at::Tensor& b, c10::string_view algo,
                                              bool backward);
std::vector<routing::Decision> explain_linear(const at::Tensor& x, const at::Tensor& w,
                                              const c10::optional<at::Tensor>& bias, c10::string_view activation,
                                              const c10::optional<at::Tensor>& residual, bool backward);
std::vector<routing::Decision> explain_conv2d(const at::Tensor& x, const at::Tensor& w,
                                              const c10::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                              at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                                              c10::string_view activation, const c10::optional<at::Tensor>& residual,
                                              bool backward);
// _conv2d_backward on its own (the transposed convs' problems: python/tileops/routing.py).
std::vector<routing::Decision> explain_conv2d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                       const at::Tensor& w, at::IntArrayRef stride,
                                                       at::IntArrayRef padding, at::IntArrayRef dilation,
                                                       int64_t groups, std::array<bool, 3> output_mask);

}  // namespace ops
}  // namespace tileops
