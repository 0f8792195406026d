// conv1d, conv_transpose1d and conv_transpose2d, made of conv2d and _conv2d_backward: no kernels
// of their own, so they run wherever conv2d runs (the CPU's packed GEMM, every CUDA conv table).
//
// - conv1d is conv2d with H = 1: x (N, C, L) -> (N, C, 1, L), weight (K, C/g, kL) -> (K, C/g, 1, kL),
//   views only (an (N, C, L) with stride(1) == 1 becomes a channels_last (N, C, 1, L)).
// - conv_transpose2d(x, w) is the data gradient of conv2d(·, w) whose grad_out is x: the forward
//   runs conv2d's grad_input tables. The conv's input is stood for by a placeholder (one element
//   seen at every index of its shape: one element allocated, never read), and the data gradient
//   then takes x's memory format (ops/conv2d.cpp: is_placeholder). Bias, residual and activation
//   are applied after it, unfused (torch's elementwise ops, in place when no gradient is recorded).
// - conv_transpose1d is conv_transpose2d with H = 1, as conv1d is conv2d.
//
// All three are CompositeImplicitAutograd: they call the tileops ops through the dispatcher, so
// autograd (Conv2dFn, Conv2dBackwardFn: the transposed conv's gradients are a conv2d forward and
// a grad_weight), torch.compile (the fake kernels of conv2d and _conv2d_backward) and the profiler
// see the ops they are made of. Autocast is registered for them in register.cpp.
#include "ops/common.h"

namespace tileops {
namespace ops {
namespace {

using at::Tensor;
using OptTensor = c10::optional<Tensor>;

bool has(const OptTensor& t) { return t.has_value() && t->defined(); }

// ---- 1-D as 2-D with H = 1 --------------------------------------------------------------------

// A 1-D op's x and weight (and residual): x (N, C, L) or unbatched (C, L); weight (out, in/g, kL).
void check_1d(const char* op, const Tensor& x, const Tensor& weight, const OptTensor& residual,
              const char* weight_shape) {
  check_defined(op, x, "x");
  check_defined(op, weight, "weight");
  TORCH_CHECK(x.dim() == 2 || x.dim() == 3, "tileops.", op,
              ": expected x to be 2-D (C, L) or 3-D (N, C, L), got shape ", x.sizes());
  TORCH_CHECK(weight.dim() == 3, "tileops.", op, ": expected weight to be 3-D ", weight_shape, ", got shape ",
              weight.sizes());
  TORCH_CHECK(!has(residual) || residual->dim() == x.dim(), "tileops.", op, ": expected residual to be ", x.dim(),
              "-D like x, got shape ", residual->sizes());
}

// Where the 1-D op's tensors get their H = 1: before L (x, residual: dim 1 unbatched, 2 batched).
int64_t h_dim(const Tensor& x) { return x.dim() - 1; }
OptTensor with_h(const OptTensor& t, int64_t d) { return has(t) ? OptTensor(t->unsqueeze(d)) : t; }

// A 1-D parameter (int[1]) as the 2-D one: (h, v).
std::vector<int64_t> lift(const char* op, at::IntArrayRef v, const char* name, int64_t h) {
  TORCH_CHECK(v.size() == 1, "tileops.", op, ": expected ", name, " to be an int or a list of one int, got ", v);
  return {h, v[0]};
}

// The 2-D op's argument errors ("tileops.<inner>: expected ...") name it and its 4-D shapes: they
// are raised again naming the 1-D op, and how it ran. Any other error passes unchanged.
template <typename F>
Tensor as_2d(const char* op, const char* inner, F run) {
  try {
    return run();
  } catch (const c10::Error& e) {
    const std::string prefix = std::string("tileops.") + inner + ": ";
    TORCH_CHECK(e.msg().rfind(prefix, 0) != 0, "tileops.", op, " (as ", inner, " with H = 1, so shapes are 4-D): ",
                e.msg().substr(prefix.size()));
    throw;
  }
}

// ---- transposed convolution as conv2d's data gradient -------------------------------------------

// Every argument of conv_transpose2d checked under its own name, before the data gradient (whose
// own checks would name its grad_out and x); returns the output's shape (N, C_out, H_out, W_out).
std::array<int64_t, 4> transpose_geometry(const char* op, const Tensor& x, const Tensor& w,
                                          const std::array<int64_t, 2>& st, const std::array<int64_t, 2>& pd,
                                          const std::array<int64_t, 2>& op_, const std::array<int64_t, 2>& dl,
                                          int64_t groups) {
  TORCH_CHECK(w.dim() == 4, "tileops.", op, ": expected weight to be 4-D (in_channels, out_channels/groups, kH, kW), ",
              "got shape ", w.sizes());
  TORCH_CHECK(groups > 0, "tileops.", op, ": expected groups to be positive, got ", groups);
  TORCH_CHECK(w.size(0) == x.size(1), "tileops.", op, ": expected weight.shape[0] == x.shape[1] (", x.size(1),
              " input channels), got weight shape ", w.sizes());
  TORCH_CHECK(x.size(1) % groups == 0, "tileops.", op, ": groups=", groups,
              " must divide the input channels (x.shape[1]=", x.size(1), ")");
  TORCH_CHECK(w.size(2) > 0 && w.size(3) > 0, "tileops.", op,
              ": expected weight to have a positive kernel size (shape[2:]), got shape ", w.sizes());
  constexpr int64_t kMax = int64_t(1) << 31;  // as conv2d: no size computed from them overflows
  std::array<int64_t, 4> out{x.size(0), w.size(1) * groups, 0, 0};
  for (int i = 0; i < 2; ++i) {
    TORCH_CHECK(st[i] > 0 && st[i] < kMax, "tileops.", op, ": expected stride in [1, 2^31), got ", st[0], ", ", st[1]);
    TORCH_CHECK(pd[i] >= 0 && pd[i] < kMax, "tileops.", op, ": expected padding in [0, 2^31), got ", pd[0], ", ",
                pd[1]);
    TORCH_CHECK(dl[i] > 0 && dl[i] < kMax, "tileops.", op, ": expected dilation in [1, 2^31), got ", dl[0], ", ",
                dl[1]);
    TORCH_CHECK(op_[i] >= 0 && (op_[i] < st[i] || op_[i] < dl[i]), "tileops.", op,
                ": expected output_padding to be non-negative and smaller than either stride or dilation, got "
                "output_padding ",
                op_[0], ", ", op_[1], " with stride ", st[0], ", ", st[1], " and dilation ", dl[0], ", ", dl[1]);
    out[2 + i] = (x.size(2 + i) - 1) * st[i] - 2 * pd[i] + dl[i] * (w.size(2 + i) - 1) + op_[i] + 1;
  }
  TORCH_CHECK(out[2] > 0 && out[3] > 0, "tileops.", op, ": the output would be ", out[2], "x", out[3],
              " (padding too large for input ", x.size(2), "x", x.size(3), ")");
  return out;
}

// The conv's input, for the data gradient's shape alone: one element seen at every index (every
// stride 0). as_strided rather than expand: inductor passes an expand of an empty tensor to the
// op as a dense (contiguous) buffer, which would give the output that format.
Tensor input_placeholder(const Tensor& x, at::IntArrayRef shape) {
  return at::empty({1}, x.options()).as_strided(shape, std::vector<int64_t>(shape.size(), 0));
}

// output_padding >= stride (allowed where dilation is larger) adds output rows past those the conv
// of the output would map back onto x: in conv terms, grad_out rows past x's, all zero. x is then
// padded with them (a copy of x, in its memory format; the one case that copies).
Tensor with_zero_rows(const Tensor& x, const std::array<int64_t, 2>& extra) {
  if (extra[0] == 0 && extra[1] == 0) return x;
  auto shape = x.sizes().vec();
  shape[2] += extra[0];
  shape[3] += extra[1];
  Tensor xp = at::empty(shape, x.options().memory_format(x.suggest_memory_format())).zero_();
  xp.narrow(2, 0, x.size(2)).narrow(3, 0, x.size(3)).copy_(x);
  return xp;
}

// act(y + bias + residual), unfused; in place unless autograd records the call.
Tensor epilogue(Tensor y, const OptTensor& bias, const OptTensor& residual, Act act, bool record) {
  if (has(bias)) {
    const Tensor b = bias->view({1, -1, 1, 1});
    y = record ? y + b : y.add_(b);
  }
  if (has(residual)) y = record ? y + *residual : y.add_(*residual);
  switch (act) {
    case Act::Relu: return record ? at::relu(y) : y.relu_();
    case Act::Gelu: return record ? at::gelu(y) : at::gelu_(y);
    case Act::Silu: return record ? at::silu(y) : at::silu_(y);
    default: return y;
  }
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const OptTensor& bias, at::IntArrayRef stride,
              at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, c10::string_view activation,
              const OptTensor& residual) {
  const char* op = "conv1d";
  check_1d(op, x, weight, residual, "(out_channels, in_channels/groups, kL)");
  const auto st = lift(op, stride, "stride", 1), pd = lift(op, padding, "padding", 0),
             dl = lift(op, dilation, "dilation", 1);
  const int64_t d = h_dim(x);
  return as_2d(op, "conv2d", [&] {
    return dispatch_conv2d(x.unsqueeze(d), weight.unsqueeze(2), bias, st, pd, dl, groups, activation,
                           with_h(residual, d))
        .squeeze(d);
  });
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const OptTensor& bias, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef output_padding, int64_t groups,
                        at::IntArrayRef dilation, c10::string_view activation, const OptTensor& residual) {
  const char* op = "conv_transpose1d";
  check_1d(op, x, weight, residual, "(in_channels, out_channels/groups, kL)");
  const auto st = lift(op, stride, "stride", 1), pd = lift(op, padding, "padding", 0),
             opd = lift(op, output_padding, "output_padding", 0), dl = lift(op, dilation, "dilation", 1);
  const int64_t d = h_dim(x);
  return as_2d(op, "conv_transpose2d", [&] {
    return dispatch_conv_transpose<kConvTranspose2d>(x.unsqueeze(d), weight.unsqueeze(2), bias, st, pd, opd, groups,
                                                     dl, activation, with_h(residual, d))
        .squeeze(d);
  });
}

Tensor conv_transpose2d(const Tensor& x_in, const Tensor& weight, const OptTensor& bias, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef output_padding, int64_t groups,
                        at::IntArrayRef dilation, c10::string_view activation, const OptTensor& residual) {
  const char* op = "conv_transpose2d";
  check_float_tensor(op, x_in, "x", /*meta_ok=*/true);
  check_float_tensor(op, weight, "weight", /*meta_ok=*/true);
  check_same(op, x_in, "x", weight, "weight");
  const Act act = parse_activation(op, activation);
  TORCH_CHECK(x_in.dim() == 3 || x_in.dim() == 4, "tileops.", op,
              ": expected x to be 3-D (C, H, W) or 4-D (N, C, H, W), got shape ", x_in.sizes());
  const bool unbatched = x_in.dim() == 3;
  const Tensor x = unbatched ? x_in.unsqueeze(0) : x_in;
  const auto st = int_pair(op, stride, "stride"), pd = int_pair(op, padding, "padding"),
             opd = int_pair(op, output_padding, "output_padding"), dl = int_pair(op, dilation, "dilation");
  const auto out = transpose_geometry(op, x, weight, st, pd, opd, dl, groups);
  if (has(bias)) {  // added after, broadcast: any strides
    check_float_tensor(op, *bias, "bias", /*meta_ok=*/true);
    check_same(op, x, "x", *bias, "bias");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == out[1], "tileops.", op, ": expected bias of shape (", out[1],
                "), got ", bias->sizes());
  }
  OptTensor res;
  if (has(residual)) {
    check_float_tensor(op, *residual, "residual", /*meta_ok=*/true);
    check_same(op, x, "x", *residual, "residual");
    const auto want = unbatched ? at::IntArrayRef(out).slice(1) : at::IntArrayRef(out);
    TORCH_CHECK(residual->sizes() == want, "tileops.", op, ": expected residual of the output's shape ", want,
                ", got ", residual->sizes());
    res = unbatched ? residual->unsqueeze(0) : *residual;
  }
  // x's rows past those the conv of the output maps back (output_padding >= stride): zeros
  const std::array<int64_t, 2> extra{opd[0] / st[0], opd[1] / st[1]};
  const Tensor gy = with_zero_rows(x, extra);
  const Tensor y = std::get<0>(dispatch_conv2d_backward(gy, input_placeholder(x, out), weight, st, pd, dl, groups,
                                                        {true, false, false}));
  const Tensor z = epilogue(y, bias, res, act, recorded(x_in, weight, bias, res));
  return unbatched ? z.squeeze(0) : z;
}

TORCH_LIBRARY_IMPL(tileops, CompositeImplicitAutograd, m) {
  m.impl("conv1d", &conv1d);
  m.impl("conv_transpose1d", &conv_transpose1d);
  m.impl("conv_transpose2d", &conv_transpose2d);
}

}  // namespace ops
}  // namespace tileops
