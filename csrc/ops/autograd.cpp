// Autograd for the ops, in C++ so that a call spends no time in Python (torch.library's Python
// autograd layer cost host time on every call, with or without grad:
// docs/performance.md#host-overhead). Each forward runs the op below autograd; each backward is
// made of tileops ops plus torch's elementwise activation gradients and reductions, all called
// through the dispatcher, so autocast, torch.compile's tracing, the profiler and double backward
// see them as they see any op.
//
// An absent optional tensor (bias, residual) has no autograd edge, so needs_input_grad's index
// of the residual depends on whether there is a bias: Needs below sorts that out.
#include <torch/autograd.h>

#include "ops/common.h"

namespace tileops {
namespace ops {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using OptTensor = c10::optional<Tensor>;
OptTensor opt(const Tensor& t) { return t.defined() ? OptTensor(t) : c10::nullopt; }

// The conv parameters a backward needs, kept in the context between forward and backward.
struct ConvParams {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;

  void save(AutogradContext* ctx) const {
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["groups"] = groups;
  }
  static ConvParams load(AutogradContext* ctx) {
    auto& d = ctx->saved_data;
    return {d["stride"].toIntVector(), d["padding"].toIntVector(), d["dilation"].toIntVector(), d["groups"].toInt()};
  }
};

// The conv ops with saved parameters and saved (possibly undefined) bias and residual.
Tensor conv(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvParams& p, c10::string_view act,
            const Tensor& res) {
  return dispatch_conv2d(x, w, opt(bias), p.stride, p.padding, p.dilation, p.groups, act, opt(res));
}
std::tuple<Tensor, Tensor, Tensor> conv_backward(const Tensor& gy, const Tensor& x, const Tensor& w,
                                                 const ConvParams& p, std::array<bool, 3> mask) {
  return dispatch_conv2d_backward(gy, x, w, p.stride, p.padding, p.dilation, p.groups, mask);
}

// gelu and silu need their input, which is recomputed with one more forward (residual
// included) rather than kept alive from the forward; relu's mask is the saved output.
bool recomputes(c10::string_view act) { return act == "gelu" || act == "silu"; }

template <typename Recompute>
Tensor pre_activation_grad(const Tensor& grad, const std::string& act, const Tensor& out, Recompute recompute) {
  if (act == "none") return grad;
  if (act == "relu") return at::threshold_backward(grad, out, 0);
  const Tensor z = recompute();
  if (act == "gelu") return at::gelu_backward(grad, z);
  if (c10::GradMode::is_enabled()) {  // create_graph: aten's silu_backward has no derivative, this form has
    const Tensor sig = z.sigmoid();
    return grad * sig * (1 + z * (1 - sig));
  }
  return at::silu_backward(grad, z);
}

// What linear and conv2d both keep: the activation and whether there is a residual, then x,
// weight, bias, the output when relu needs it and the residual when gelu/silu recompute.
void save_fused(AutogradContext* ctx, const Tensor& x, const Tensor& w, const OptTensor& bias, c10::string_view act,
                const OptTensor& res, const Tensor& out) {
  ctx->saved_data["act"] = std::string(act);
  ctx->saved_data["has_residual"] = res.has_value();
  ctx->save_for_backward({x, w, bias.value_or(Tensor()), act == "relu" ? out : Tensor(),
                          recomputes(act) && res ? *res : Tensor()});
}

// Which of x, weight, bias, residual need a gradient (saved bias: s[2], undefined when absent).
struct Needs {
  bool x = false, w = false, bias = false, res = false;
  Needs(AutogradContext* ctx, const Tensor& saved_bias) {
    size_t edge = 0;
    x = ctx->needs_input_grad(edge++);
    w = ctx->needs_input_grad(edge++);
    if (saved_bias.defined()) bias = ctx->needs_input_grad(edge++);
    if (ctx->saved_data["has_residual"].toBool()) res = ctx->needs_input_grad(edge);
  }
};

struct MatmulFn : torch::autograd::Function<MatmulFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b, c10::string_view algo) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->save_for_backward({a, b});
    return dispatch_matmul(a, b, algo);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const Tensor &a = s[0], &b = s[1], &g = grads[0];
    Tensor ga, gb;
    // sum_to_size: batch dimensions that broadcast in the forward sum in the backward
    if (ctx->needs_input_grad(0)) ga = dispatch_matmul(g, b.mT(), "auto").sum_to_size(a.sizes());
    if (ctx->needs_input_grad(1)) gb = dispatch_matmul(a.mT(), g, "auto").sum_to_size(b.sizes());
    return {ga, gb, Tensor()};
  }
};

struct LinearFn : torch::autograd::Function<LinearFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w, const OptTensor& bias,
                        c10::string_view act, const OptTensor& res) {
    at::AutoDispatchBelowADInplaceOrView below;
    Tensor y = dispatch_linear(x, w, bias, act, res);
    save_fused(ctx, x, w, bias, act, res, y);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const Tensor &x = s[0], &w = s[1], &bias = s[2];
    const Tensor gz = pre_activation_grad(grads[0], ctx->saved_data["act"].toStringRef(), s[3],
                                          [&] { return dispatch_linear(x, w, opt(bias), "none", opt(s[4])); });
    const Tensor gz2 = gz.reshape({-1, w.size(0)});
    const Needs needs(ctx, bias);
    Tensor gx, gw, gb, gr;
    if (needs.x) gx = dispatch_matmul(gz2, w, "auto").reshape(x.sizes());
    if (needs.w) gw = dispatch_matmul(gz2.t(), x.reshape({-1, w.size(1)}), "auto");
    if (needs.bias) gb = gz2.sum(0);
    if (needs.res) gr = gz;  // the residual's gradient is the pre-activation one
    return {gx, gw, gb, Tensor(), gr};
  }
};

struct Conv2dFn : torch::autograd::Function<Conv2dFn> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w, const OptTensor& bias,
                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                        c10::string_view act, const OptTensor& res) {
    at::AutoDispatchBelowADInplaceOrView below;
    Tensor y = dispatch_conv2d(x, w, bias, stride, padding, dilation, groups, act, res);
    ConvParams{stride.vec(), padding.vec(), dilation.vec(), groups}.save(ctx);
    save_fused(ctx, x, w, bias, act, res, y);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const Tensor &x = s[0], &w = s[1], &bias = s[2];
    const ConvParams p = ConvParams::load(ctx);
    const Tensor gz = pre_activation_grad(grads[0], ctx->saved_data["act"].toStringRef(), s[3],
                                          [&] { return conv(x, w, bias, p, "none", s[4]); });
    const bool unbatched = x.dim() == 3;  // (C, H, W): the backward op takes a batch of one
    const Needs needs(ctx, bias);
    const std::array<bool, 3> mask{needs.x, needs.w, needs.bias};
    auto g = conv_backward(unbatched ? gz.unsqueeze(0) : gz, unbatched ? x.unsqueeze(0) : x, w, p, mask);
    Tensor gx = mask[0] ? (unbatched ? std::get<0>(g).squeeze(0) : std::get<0>(g)) : Tensor();
    Tensor gr = needs.res ? gz : Tensor();
    return {gx,       mask[1] ? std::get<1>(g) : Tensor(), mask[2] ? std::get<2>(g) : Tensor(), Tensor(), Tensor(),
            Tensor(), Tensor(), Tensor(), gr};
  }
};

// Double backward of conv2d. _conv2d_backward's outputs are bilinear: grad_x = dgrad(gy, w),
// grad_w = wgrad(x, gy), grad_b = sum(gy). So the gradients of <ggx, grad_x> + <ggw, grad_w> +
// <ggb, grad_b> are: for gy, conv(ggx, w) + conv(x, ggw) + ggb over every pixel; for x,
// dgrad(gy, ggw); for w, wgrad(ggx, gy). All are tileops ops again (triple backward too).
struct Conv2dBackwardFn : torch::autograd::Function<Conv2dBackwardFn> {
  static variable_list forward(AutogradContext* ctx, const Tensor& gy, const Tensor& x, const Tensor& w,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                               int64_t groups, std::array<bool, 3> mask) {
    at::AutoDispatchBelowADInplaceOrView below;
    auto g = dispatch_conv2d_backward(gy, x, w, stride, padding, dilation, groups, mask);
    ConvParams{stride.vec(), padding.vec(), dilation.vec(), groups}.save(ctx);
    ctx->saved_data["mask"] = c10::List<bool>({mask[0], mask[1], mask[2]});
    ctx->save_for_backward({gy, x, w});
    ctx->set_materialize_grads(false);  // an output nobody used (or one masked off) has no gradient
    return {std::get<0>(g), std::get<1>(g), std::get<2>(g)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list gg) {
    const auto s = ctx->get_saved_variables();
    const Tensor &gy = s[0], &x = s[1], &w = s[2];
    const ConvParams p = ConvParams::load(ctx);
    // a masked-off output is an empty tensor: its incoming gradient, if any, is ignored
    const auto mask = ctx->saved_data["mask"].toBoolList();
    const Tensor ggx = mask[0] ? gg[0] : Tensor(), ggw = mask[1] ? gg[1] : Tensor(), ggb = mask[2] ? gg[2] : Tensor();
    Tensor dgy, dx, dw;
    auto add = [&](const Tensor& t) { dgy = dgy.defined() ? dgy + t : t; };
    if (ctx->needs_input_grad(0)) {
      if (ggx.defined()) add(conv(ggx, w, Tensor(), p, "none", Tensor()));
      if (ggw.defined()) add(conv(x, ggw, Tensor(), p, "none", Tensor()));
      if (ggb.defined()) add(ggb.reshape({1, -1, 1, 1}).expand(gy.sizes()));
    }
    if (ctx->needs_input_grad(1) && ggw.defined())
      dx = std::get<0>(conv_backward(gy, x, ggw, p, {true, false, false}));
    if (ctx->needs_input_grad(2) && ggx.defined())
      dw = std::get<1>(conv_backward(gy, ggx, w, p, {false, true, false}));
    return {dgy, dx, dw, Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

// recorded (common.h): whether a call goes through autograd at all. When not (no input needs a
// gradient, or grad mode is off: inference), the op runs straight below autograd, without the
// node and context Function::apply builds even for calls it does not record.

// The defined checks come first here: autograd cannot record an input that is None.
Tensor matmul_autograd(const Tensor& a, const Tensor& b, c10::string_view algo) {
  check_defined("matmul", a, "a");
  check_defined("matmul", b, "b");
  if (!recorded(a, b)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return dispatch_matmul(a, b, algo);
  }
  return MatmulFn::apply(a, b, algo);
}

Tensor linear_autograd(const Tensor& x, const Tensor& w, const OptTensor& bias, c10::string_view act,
                       const OptTensor& res) {
  check_defined("linear", x, "x");
  check_defined("linear", w, "weight");
  if (!recorded(x, w, bias, res)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return dispatch_linear(x, w, bias, act, res);
  }
  return LinearFn::apply(x, w, bias, act, res);
}

Tensor conv2d_autograd(const Tensor& x, const Tensor& w, const OptTensor& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, c10::string_view act,
                       const OptTensor& res) {
  check_defined("conv2d", x, "x");
  check_defined("conv2d", w, "weight");
  if (!recorded(x, w, bias, res)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return dispatch_conv2d(x, w, bias, stride, padding, dilation, groups, act, res);
  }
  return Conv2dFn::apply(x, w, bias, stride, padding, dilation, groups, act, res);
}

std::tuple<Tensor, Tensor, Tensor> conv2d_backward_autograd(const Tensor& gy, const Tensor& x, const Tensor& w,
                                                            at::IntArrayRef stride, at::IntArrayRef padding,
                                                            at::IntArrayRef dilation, int64_t groups,
                                                            std::array<bool, 3> mask) {
  check_defined("_conv2d_backward", gy, "grad_out");
  check_defined("_conv2d_backward", x, "x");
  check_defined("_conv2d_backward", w, "weight");
  if (!recorded(gy, x, w)) {
    at::AutoDispatchBelowADInplaceOrView below;
    return dispatch_conv2d_backward(gy, x, w, stride, padding, dilation, groups, mask);
  }
  auto g = Conv2dBackwardFn::apply(gy, x, w, stride, padding, dilation, groups, mask);
  return {g[0], g[1], g[2]};
}

}  // namespace

TORCH_LIBRARY_IMPL(tileops, Autograd, m) {
  m.impl("matmul", &matmul_autograd);
  m.impl("linear", &linear_autograd);
  m.impl("conv2d", &conv2d_autograd);
  m.impl("_conv2d_backward", &conv2d_backward_autograd);
}

}  // namespace ops
}  // namespace tileops
