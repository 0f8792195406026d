// Argument checks and dispatch shared by every op. Errors name the op and the argument.
#pragma once
#include <ATen/core/Tensor.h>  // not ATen.h: its every op's declaration doubled each unit's parse
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/silu_backward.h>
#include <ATen/ops/threshold_backward.h>
#include <ATen/TensorOperators.h>  // a + b, a * b, 1 - a
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/library.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "common/gemm_args.h"
#include "routing/route.h"

namespace tileops {
namespace ops {

inline void check_defined(const char* op, const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.defined(), "tileops.", op, ": expected ", name, " to be a tensor, got None");
}

// An int or a pair of ints (a schema's int[2]) as a pair; the error names the argument.
inline std::array<int64_t, 2> int_pair(const char* op, at::IntArrayRef v, const char* name) {
  TORCH_CHECK(v.size() == 1 || v.size() == 2, "tileops.", op, ": expected ", name,
              " to be an int or a pair of ints, got ", v);
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

// meta_ok: a meta tensor passes too (shape inference, a model built on the meta device), where an
// op computes its result from other ops that have fake kernels (conv_family.cpp).
inline void check_float_tensor(const char* op, const at::Tensor& t, const char* name, bool meta_ok = false) {
  check_defined(op, t, name);
  TORCH_CHECK(t.layout() == at::kStrided, "tileops.", op, ": expected ", name,
              " to be a dense (strided) tensor, got layout ", t.layout());
  const auto st = t.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kDouble || st == at::kHalf || st == at::kBFloat16,
              "tileops.", op, ": expected ", name,
              " to have a floating dtype (float16, bfloat16, float32 or float64), got ", st);
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda() || (meta_ok && t.is_meta()), "tileops.", op, ": expected ",
              name, " on a CPU or CUDA device, got ", t.device());
}

// Whether autograd records a call with these inputs: grad mode on and an input that needs a
// gradient, or a forward-mode tangent (Function::apply then says that jvp is not implemented,
// where a direct call would drop the tangent silently).
inline bool has_tangent(const at::Tensor& t) { return t.defined() && t._fw_grad(/*level=*/0).defined(); }
inline bool has_tangent(const c10::optional<at::Tensor>& t) { return t.has_value() && has_tangent(*t); }
inline bool requires_grad(const at::Tensor& t) { return t.defined() && t.requires_grad(); }
inline bool requires_grad(const c10::optional<at::Tensor>& t) { return t.has_value() && requires_grad(*t); }
template <typename... Ts>
bool recorded(const Ts&... inputs) {
  return (c10::GradMode::is_enabled() && (requires_grad(inputs) || ...)) || (has_tangent(inputs) || ...);
}

inline void check_same(const char* op, const at::Tensor& ref, const char* ref_name, const at::Tensor& t,
                       const char* name) {
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "tileops.", op, ": expected ", name,
              " to have the same dtype as ", ref_name, " (", ref.scalar_type(), "), got ", t.scalar_type());
  TORCH_CHECK(t.device() == ref.device(), "tileops.", op, ": expected ", name, " on the same device as ",
              ref_name, " (", ref.device(), "), got ", t.device());
}

// An optional bias for `n` output channels/features: a 1-D tensor with x's dtype and device.
// Returned contiguous: the epilogue indexes it densely (a strided or expanded view would be
// read at the wrong places, or past its storage). Empty when there is no bias.
inline c10::optional<at::Tensor> checked_bias(const char* op, const c10::optional<at::Tensor>& bias,
                                              const at::Tensor& x, int64_t n) {
  if (!bias.has_value() || !bias->defined()) return c10::nullopt;
  check_float_tensor(op, *bias, "bias");
  check_same(op, x, "x", *bias, "bias");
  TORCH_CHECK(bias->dim() == 1 && bias->size(0) == n, "tileops.", op, ": expected bias of shape (", n, "), got ",
              bias->sizes());
  return bias->contiguous();
}

// An optional residual, added to the output before the activation: exactly the shape of `out`
// (the op's output as the caller sees it), x's dtype and device, any strides. Returned with
// out's strides, copied when it has others (expanded, another memory format, a view), since
// the epilogue reads it at the offset of the output element it writes. Empty when there is none.
inline c10::optional<at::Tensor> checked_residual(const char* op, const c10::optional<at::Tensor>& residual,
                                                  const at::Tensor& x, const at::Tensor& out) {
  if (!residual.has_value() || !residual->defined()) return c10::nullopt;
  check_float_tensor(op, *residual, "residual");
  check_same(op, x, "x", *residual, "residual");
  TORCH_CHECK(residual->sizes() == out.sizes(), "tileops.", op, ": expected residual of the output's shape ",
              out.sizes(), ", got ", residual->sizes());
  bool same_strides = true;
  for (int64_t d = 0; d < out.dim(); ++d)  // a size-1 dimension's stride never moves an element
    same_strides = same_strides && (out.size(d) <= 1 || residual->stride(d) == out.stride(d));
  if (same_strides) return *residual;
  return at::empty_strided(out.sizes(), out.strides(), out.options()).copy_(*residual);
}

// One of a fixed set of string choices -> its enum value; the error lists the choices.
template <typename E, size_t N>
E parse_choice(const char* op, const char* arg, c10::string_view s, const std::pair<const char*, E> (&choices)[N]) {
  std::string names;
  for (const auto& c : choices) {
    if (s == c.first) return c.second;
    names += std::string(names.empty() ? "'" : ", '") + c.first + "'";
  }
  TORCH_CHECK(false, "tileops.", op, ": expected ", arg, " to be one of ", names, ", got '", std::string(s), "'");
}

inline Act parse_activation(const char* op, c10::string_view s) {
  static const std::pair<const char*, Act> choices[] = {
      {"none", Act::None}, {"relu", Act::Relu}, {"gelu", Act::Gelu}, {"silu", Act::Silu}};
  return parse_choice(op, "activation", s, choices);
}

inline Algo parse_algo(const char* op, c10::string_view s, const at::Device& device) {
  // The kernel ladder, slowest first; 'simt' and 'wmma' are the earlier names of 'register'
  // and 'mma', kept as aliases.
  static const std::pair<const char*, Algo> choices[] = {
      {"auto", Algo::Auto},
      {"naive", Algo::Naive},
      {"tiled", Algo::Tiled},
      {"tiled_padded", Algo::TiledPadded},
      {"register", Algo::Register},
      {"vectorized", Algo::Vectorized},
      {"mma", Algo::Mma},
      {"wgmma", Algo::Wgmma},
      {"simt", Algo::Register},
      {"wmma", Algo::Mma}};
  const Algo a = parse_choice(op, "algo", s, choices);
  TORCH_CHECK(a == Algo::Auto || device.is_cuda(), "tileops.", op, ": algo='", std::string(s),
              "' names a CUDA kernel family; on ", device, " only 'auto' is available");
  return a;
}

// Runs a problem on the device that holds its tensors.
inline void run_gemm(const GemmArgs& a, const at::Device& device) {
  if (device.is_cuda()) {
#ifdef TILEOPS_WITH_CUDA
    const at::DeviceGuard guard(device);
    gemm_cuda(a);
#else
    TORCH_CHECK(false, "tileops was built without CUDA kernels, so it cannot run on ", device,
                ". Rebuild with a CUDA toolkit whose major version matches torch.version.cuda "
                "(`python -m tileops doctor` says what is missing).");
#endif
  } else {
    gemm_cpu(a);
  }
}

// Problems that write disjoint outputs, on the device that holds their tensors: with at_once, at
// once on a GPU (side streams); else, and on the CPU, one after another.
inline void run_gemms(const std::vector<GemmArgs>& problems, const at::Device& device, bool at_once = true) {
  if (problems.size() < 2 || !at_once || !device.is_cuda() || routing::explaining()) {
    for (const auto& a : problems) run_gemm(a, device);
    return;
  }
#ifdef TILEOPS_WITH_CUDA
  const at::DeviceGuard guard(device);
  gemm_cuda_concurrent(problems);
#else
  run_gemm(problems.front(), device);  // raises: no CUDA kernels in this build
#endif
}

// A handle to call a registered op through the dispatcher (the dispatch_* calls below).
template <typename Sig>
c10::TypedOperatorHandle<Sig> typed_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

// The ops (one definition each; registered for CPU and CUDA in register.cpp, Autograd in autograd.cpp).
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, c10::string_view algo);
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  c10::string_view activation, const c10::optional<at::Tensor>& residual);
at::Tensor conv2d(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                  c10::string_view activation, const c10::optional<at::Tensor>& residual);
std::tuple<at::Tensor, at::Tensor, at::Tensor> conv2d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                               const at::Tensor& weight, at::IntArrayRef stride,
                                                               at::IntArrayRef padding, at::IntArrayRef dilation,
                                                               int64_t groups, std::array<bool, 3> output_mask);
// The rest of the convolution family (conv_family.cpp): composites of conv2d and _conv2d_backward.
at::Tensor conv1d(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                  c10::string_view activation, const c10::optional<at::Tensor>& residual);
// conv_transpose1d and conv_transpose2d: torch's argument order (output_padding, groups, dilation)
using ConvTransposeFn = at::Tensor(const at::Tensor& x, const at::Tensor& weight,
                                   const c10::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef output_padding, int64_t groups,
                                   at::IntArrayRef dilation, c10::string_view activation,
                                   const c10::optional<at::Tensor>& residual);
ConvTransposeFn conv_transpose1d, conv_transpose2d, conv_transpose3d;
at::Tensor conv3d(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                  c10::string_view activation, const c10::optional<at::Tensor>& residual);

// The ops called again through the dispatcher, by the layers above the kernels (autocast,
// autograd), so that every layer below the caller, tracing included, sees the call.
inline at::Tensor dispatch_matmul(const at::Tensor& a, const at::Tensor& b, c10::string_view algo) {
  static auto h = typed_op<decltype(matmul)>("tileops::matmul");
  return h.call(a, b, algo);
}
inline at::Tensor dispatch_linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                                  c10::string_view activation, const c10::optional<at::Tensor>& residual) {
  static auto h = typed_op<decltype(linear)>("tileops::linear");
  return h.call(x, weight, bias, activation, residual);
}
inline at::Tensor dispatch_conv2d(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                  int64_t groups, c10::string_view activation,
                                  const c10::optional<at::Tensor>& residual) {
  static auto h = typed_op<decltype(conv2d)>("tileops::conv2d");
  return h.call(x, weight, bias, stride, padding, dilation, groups, activation, residual);
}
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> dispatch_conv2d_backward(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, std::array<bool, 3> output_mask) {
  static auto h = typed_op<decltype(conv2d_backward)>("tileops::_conv2d_backward");
  return h.call(grad_out, x, weight, stride, padding, dilation, groups, output_mask);
}
// name: "tileops::conv1d" or "tileops::conv3d" (conv2d's signature)
template <const char* Name>
at::Tensor dispatch_conv_nd(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                            at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                            c10::string_view activation, const c10::optional<at::Tensor>& residual) {
  static auto h = typed_op<decltype(conv1d)>(Name);
  return h.call(x, weight, bias, stride, padding, dilation, groups, activation, residual);
}
inline constexpr char kConv1d[] = "tileops::conv1d";
inline constexpr char kConv3d[] = "tileops::conv3d";
// name: "tileops::conv_transpose1d", "tileops::conv_transpose2d" or "tileops::conv_transpose3d"
template <const char* Name>
at::Tensor dispatch_conv_transpose(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                                   at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef output_padding,
                                   int64_t groups, at::IntArrayRef dilation, c10::string_view activation,
                                   const c10::optional<at::Tensor>& residual) {
  static auto h = typed_op<ConvTransposeFn>(Name);
  return h.call(x, weight, bias, stride, padding, output_padding, groups, dilation, activation, residual);
}
inline constexpr char kConvTranspose1d[] = "tileops::conv_transpose1d";
inline constexpr char kConvTranspose2d[] = "tileops::conv_transpose2d";
inline constexpr char kConvTranspose3d[] = "tileops::conv_transpose3d";

}  // namespace ops
}  // namespace tileops
