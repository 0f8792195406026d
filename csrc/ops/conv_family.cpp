// conv1d, conv3d and the transposed convs (1-D, 2-D, 3-D), made of conv2d and _conv2d_backward: no
// kernels of their own, so they run wherever conv2d runs (the CPU's packed GEMM, every CUDA conv table).
//
// - conv1d is conv2d with H = 1: x (N, C, L) -> (N, C, 1, L), weight (K, C/g, kL) -> (K, C/g, 1, kL),
//   views only (an (N, C, L) with stride(1) == 1 becomes a channels_last (N, C, 1, L)).
// - conv_transpose2d(x, w) is the data gradient of conv2d(·, w) whose grad_out is x: the forward
//   runs conv2d's grad_input tables. The conv's input is stood for by a placeholder (one element
//   seen at every index of its shape: one element allocated, never read), and the data gradient
//   then takes x's memory format (ops/conv2d.cpp: is_placeholder). Bias, residual and activation
//   are applied after it, unfused (torch's elementwise ops, in place when no gradient is recorded).
// - conv_transpose1d is conv_transpose2d with H = 1, as conv1d is conv2d.
// - conv3d is one conv2d over (batch x output depth) whose input channels are (channel, depth tap):
//   x's depth taps unfolded into channels (one copy of x per tap of the kernel's depth, none for a
//   1xRxS kernel on a channels_last_3d x without depth stride or padding), the weight's (C, kD) merged.
// - conv_transpose3d is one conv_transpose2d over (batch x input depth) whose output channels are
//   (channel, depth tap); the taps are then added into their output depths (kD strided adds).
//
// All of them are CompositeImplicitAutograd: they call the tileops ops through the dispatcher, so
// autograd (Conv2dFn, Conv2dBackwardFn: the transposed conv's gradients are a conv2d forward and
// a grad_weight), torch.compile (the fake kernels of conv2d and _conv2d_backward) and the profiler
// see the ops they are made of. Autocast is registered for them in register.cpp.
#include <algorithm>

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
Tensor as_2d(const char* op, const char* inner, F run, const char* how = "with H = 1, so shapes are 4-D") {
  try {
    return run();
  } catch (const c10::Error& e) {
    const std::string prefix = std::string("tileops.") + inner + ": ";
    TORCH_CHECK(e.msg().rfind(prefix, 0) != 0, "tileops.", op, " (as ", inner, " ", how, "): ",
                e.msg().substr(prefix.size()));
    throw;
  }
}

// ---- transposed convolution as conv2d's data gradient -------------------------------------------

// Every argument of a transposed conv (ND = 2 or 3 spatial dims) checked under its own name, before
// the data gradient (whose own checks would name its grad_out and x); returns the output's shape
// (N, C_out, *spatial_out).
template <size_t ND>
std::array<int64_t, ND + 2> transpose_geometry(const char* op, const Tensor& x, const Tensor& w,
                                               const std::array<int64_t, ND>& st, const std::array<int64_t, ND>& pd,
                                               const std::array<int64_t, ND>& op_, const std::array<int64_t, ND>& dl,
                                               int64_t groups) {
  const char* shape = ND == 2 ? "(in_channels, out_channels/groups, kH, kW)"
                              : "(in_channels, out_channels/groups, kD, kH, kW)";
  TORCH_CHECK(w.dim() == int64_t(ND) + 2, "tileops.", op, ": expected weight to be ", ND + 2, "-D ", shape,
              ", got shape ", w.sizes());
  TORCH_CHECK(groups > 0, "tileops.", op, ": expected groups to be positive, got ", groups);
  TORCH_CHECK(w.size(0) == x.size(1), "tileops.", op, ": expected weight.shape[0] == x.shape[1] (", x.size(1),
              " input channels), got weight shape ", w.sizes());
  TORCH_CHECK(x.size(1) % groups == 0, "tileops.", op, ": groups=", groups,
              " must divide the input channels (x.shape[1]=", x.size(1), ")");
  bool kernel = true;
  for (size_t i = 0; i < ND; ++i) kernel = kernel && w.size(2 + i) > 0;
  TORCH_CHECK(kernel, "tileops.", op, ": expected weight to have a positive kernel size (shape[2:]), got shape ",
              w.sizes());
  constexpr int64_t kMax = int64_t(1) << 31;  // as conv2d: no size computed from them overflows
  const at::IntArrayRef s(st), p(pd), o(op_), d(dl);
  std::array<int64_t, ND + 2> out{x.size(0), w.size(1) * groups};
  bool positive = true;
  for (size_t i = 0; i < ND; ++i) {
    TORCH_CHECK(st[i] > 0 && st[i] < kMax, "tileops.", op, ": expected stride in [1, 2^31), got ", s);
    TORCH_CHECK(pd[i] >= 0 && pd[i] < kMax, "tileops.", op, ": expected padding in [0, 2^31), got ", p);
    TORCH_CHECK(dl[i] > 0 && dl[i] < kMax, "tileops.", op, ": expected dilation in [1, 2^31), got ", d);
    TORCH_CHECK(op_[i] >= 0 && (op_[i] < st[i] || op_[i] < dl[i]), "tileops.", op,
                ": expected output_padding to be non-negative and smaller than either stride or dilation, got "
                "output_padding ", o, " with stride ", s, " and dilation ", d);
    out[2 + i] = (x.size(2 + i) - 1) * st[i] - 2 * pd[i] + dl[i] * (w.size(2 + i) - 1) + op_[i] + 1;
    positive = positive && out[2 + i] > 0;
  }
  TORCH_CHECK(positive, "tileops.", op, ": the output would be ", at::IntArrayRef(out).slice(2),
              " (padding too large for input ", x.sizes().slice(2), ")");
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
    std::vector<int64_t> shape(y.dim(), 1);  // (1, C, 1, ...): over the channels of any conv's output
    shape[1] = -1;
    const Tensor b = bias->view(shape);
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

// ---- 3-D as 2-D over (batch x depth) -----------------------------------------------------------

// An int or three ints (a schema's int[3]) as three; the error names the argument.
std::array<int64_t, 3> int_triple(const char* op, at::IntArrayRef v, const char* name) {
  TORCH_CHECK(v.size() == 1 || v.size() == 3, "tileops.", op, ": expected ", name, " to be an int or three ints, got ",
              v);
  return {v[0], v[v.size() / 2], v[v.size() - 1]};
}

// A 3-D op's x (C, D, H, W) or (N, C, D, H, W), batched; weight 5-D; each a float tensor of x's kind.
Tensor batched_3d(const char* op, const Tensor& x, const Tensor& weight, const char* weight_shape) {
  check_float_tensor(op, x, "x", /*meta_ok=*/true);
  check_float_tensor(op, weight, "weight", /*meta_ok=*/true);
  check_same(op, x, "x", weight, "weight");
  TORCH_CHECK(x.dim() == 4 || x.dim() == 5, "tileops.", op,
              ": expected x to be 4-D (C, D, H, W) or 5-D (N, C, D, H, W), got shape ", x.sizes());
  TORCH_CHECK(weight.dim() == 5, "tileops.", op, ": expected weight to be 5-D ", weight_shape, ", got shape ",
              weight.sizes());
  return x.dim() == 4 ? x.unsqueeze(0) : x;
}

// conv3d's arguments checked under its own name; returns the output's shape (N, K, D_out, H_out, W_out).
std::array<int64_t, 5> conv3d_geometry(const char* op, const Tensor& x, const Tensor& w,
                                       const std::array<int64_t, 3>& st, const std::array<int64_t, 3>& pd,
                                       const std::array<int64_t, 3>& dl, int64_t groups) {
  TORCH_CHECK(groups > 0, "tileops.", op, ": expected groups to be positive, got ", groups);
  TORCH_CHECK(w.size(1) * groups == x.size(1), "tileops.", op, ": expected x.shape[1] == weight.shape[1] * groups (",
              w.size(1), " * ", groups, "), got x shape ", x.sizes());
  TORCH_CHECK(w.size(0) % groups == 0, "tileops.", op, ": groups=", groups,
              " must divide the output channels (weight.shape[0]=", w.size(0), ")");
  constexpr int64_t kMax = int64_t(1) << 31;  // as conv2d: no size computed from them overflows
  const at::IntArrayRef s(st), p(pd), d(dl);
  std::array<int64_t, 5> out{x.size(0), w.size(0)};
  bool fits = true;
  for (int i = 0; i < 3; ++i) {
    TORCH_CHECK(st[i] > 0 && st[i] < kMax, "tileops.", op, ": expected stride in [1, 2^31), got ", s);
    TORCH_CHECK(pd[i] >= 0 && pd[i] < kMax, "tileops.", op, ": expected padding in [0, 2^31), got ", p);
    TORCH_CHECK(dl[i] > 0 && dl[i] < kMax, "tileops.", op, ": expected dilation in [1, 2^31), got ", d);
    TORCH_CHECK(w.size(2 + i) > 0, "tileops.", op,
                ": expected weight to have a positive kernel size (shape[2:]), got shape ", w.sizes());
    const int64_t span = dl[i] * (w.size(2 + i) - 1) + 1, padded = x.size(2 + i) + 2 * pd[i];
    fits = fits && span <= padded;
    out[2 + i] = span <= padded ? (padded - span) / st[i] + 1 : 0;
  }
  TORCH_CHECK(fits, "tileops.", op, ": the kernel (", w.sizes().slice(2), " with dilation ", d,
              ") is larger than the padded input (", x.sizes().slice(2), " with padding ", p, ")");
  return out;
}

// A 3-D or transposed conv's bias and residual checked under its own name against its output's shape
// `out` (batched); returns the residual batched as the output.
template <size_t N>
OptTensor checked_extras(const char* op, const Tensor& x, bool unbatched, const std::array<int64_t, N>& out,
                         const OptTensor& bias, const OptTensor& residual) {
  if (has(bias)) {
    check_float_tensor(op, *bias, "bias", /*meta_ok=*/true);
    check_same(op, x, "x", *bias, "bias");
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == out[1], "tileops.", op, ": expected bias of shape (", out[1],
                "), got ", bias->sizes());
  }
  if (!has(residual)) return c10::nullopt;
  check_float_tensor(op, *residual, "residual", /*meta_ok=*/true);
  check_same(op, x, "x", *residual, "residual");
  const auto want = unbatched ? at::IntArrayRef(out).slice(1) : at::IntArrayRef(out);
  TORCH_CHECK(residual->sizes() == want, "tileops.", op, ": expected residual of the output's shape ", want, ", got ",
              residual->sizes());
  return unbatched ? residual->unsqueeze(0) : *residual;
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
  const auto out = transpose_geometry<2>(op, x, weight, st, pd, opd, dl, groups);
  const OptTensor res = checked_extras(op, x, unbatched, out, bias, residual);
  // x's rows past those the conv of the output maps back (output_padding >= stride): zeros
  const std::array<int64_t, 2> extra{opd[0] / st[0], opd[1] / st[1]};
  const Tensor gy = with_zero_rows(x, extra);
  const Tensor y = std::get<0>(dispatch_conv2d_backward(gy, input_placeholder(x, out), weight, st, pd, dl, groups,
                                                        {true, false, false}));
  const Tensor z = epilogue(y, bias, res, act, recorded(x_in, weight, bias, res));
  return unbatched ? z.squeeze(0) : z;
}

Tensor conv3d(const Tensor& x_in, const Tensor& weight, const OptTensor& bias, at::IntArrayRef stride,
              at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, c10::string_view activation,
              const OptTensor& residual) {
  const char* op = "conv3d";
  const Tensor x = batched_3d(op, x_in, weight, "(out_channels, in_channels/groups, kD, kH, kW)");
  const auto st = int_triple(op, stride, "stride"), pd = int_triple(op, padding, "padding"),
             dl = int_triple(op, dilation, "dilation");
  const auto out = conv3d_geometry(op, x, weight, st, pd, dl, groups);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(3), W = x.size(4), K = weight.size(0),
                Cg = weight.size(1), T = weight.size(2), R = weight.size(3), S = weight.size(4), Do = out[2];
  const bool cl = x.suggest_memory_format() == at::MemoryFormat::ChannelsLast3d;
  // (N, C, D_out, H, W, T): each output depth's T input depths, views of x (padded in depth: a copy)
  const Tensor xp = pd[0] > 0 ? at::constant_pad_nd(x, {0, 0, 0, 0, pd[0], pd[0]}) : x;
  const int64_t span = dl[0] * (T - 1) + 1;
  const Tensor taps = xp.unfold(2, span, st[0]).slice(5, 0, span, dl[0]);
  // the conv2d's x (N * D_out, C * T, H, W), channel c * T + t, in x's format; weight (K, C/g * T, R, S)
  const Tensor x2 = cl ? taps.permute({0, 2, 3, 4, 1, 5}).reshape({N * Do, H, W, C * T}).permute({0, 3, 1, 2})
                       : taps.permute({0, 2, 1, 5, 3, 4}).reshape({N * Do, C * T, H, W});
  const Tensor w2 = cl ? weight.permute({0, 3, 4, 1, 2}).reshape({K, R, S, Cg * T}).permute({0, 3, 1, 2})
                       : weight.reshape({K, Cg * T, R, S});
  // the residual checked as a transposed conv's (its bias is conv2d's to check), then as conv2d's
  OptTensor res2 = checked_extras(op, x, x_in.dim() == 4, out, c10::nullopt, residual);
  if (res2) res2 = res2->permute({0, 2, 1, 3, 4}).reshape({N * Do, K, out[3], out[4]});
  const Tensor y2 = as_2d(
      op, "conv2d",
      [&] {
        return dispatch_conv2d(x2, w2, bias, {st[1], st[2]}, {pd[1], pd[2]}, {dl[1], dl[2]}, groups, activation,
                               res2);
      },
      "over (batch x output depth), the depth taps as channels, so shapes are 4-D");
  // (N * D_out, K, H_out, W_out) -> (N, K, D_out, H_out, W_out): a view where channels last
  const Tensor y = y2.unflatten(0, {N, Do}).permute({0, 2, 1, 3, 4}).contiguous(
      cl ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::Contiguous);
  return x_in.dim() == 4 ? y.squeeze(0) : y;
}

Tensor conv_transpose3d(const Tensor& x_in, const Tensor& weight, const OptTensor& bias, at::IntArrayRef stride,
                        at::IntArrayRef padding, at::IntArrayRef output_padding, int64_t groups,
                        at::IntArrayRef dilation, c10::string_view activation, const OptTensor& residual) {
  const char* op = "conv_transpose3d";
  const Tensor x = batched_3d(op, x_in, weight, "(in_channels, out_channels/groups, kD, kH, kW)");
  const Act act = parse_activation(op, activation);
  const auto st = int_triple(op, stride, "stride"), pd = int_triple(op, padding, "padding"),
             opd = int_triple(op, output_padding, "output_padding"), dl = int_triple(op, dilation, "dilation");
  const auto out = transpose_geometry<3>(op, x, weight, st, pd, opd, dl, groups);
  const bool unbatched = x_in.dim() == 4;
  const OptTensor res = checked_extras(op, x, unbatched, out, bias, residual);
  const int64_t N = x.size(0), C = x.size(1), D = x.size(2), H = x.size(3), W = x.size(4), Kg = weight.size(1),
                T = weight.size(2), R = weight.size(3), S = weight.size(4), K = out[1], Do = out[2];
  const bool cl = x.suggest_memory_format() == at::MemoryFormat::ChannelsLast3d;
  const auto fmt = cl ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::Contiguous;
  // the conv_transpose2d's x (N * D, C, H, W): a view where channels last; weight (C, K/g * T, R, S),
  // output channel k * T + t (group-major, as conv_transpose2d orders them)
  const Tensor x2 = x.permute({0, 2, 1, 3, 4}).reshape({N * D, C, H, W});
  const Tensor w2 = cl ? weight.permute({0, 3, 4, 1, 2}).reshape({C, R, S, Kg * T}).permute({0, 3, 1, 2})
                       : weight.reshape({C, Kg * T, R, S});
  const Tensor z = as_2d(
      op, "conv_transpose2d",
      [&] {
        return dispatch_conv_transpose<kConvTranspose2d>(x2, w2, c10::nullopt, {st[1], st[2]}, {pd[1], pd[2]},
                                                         {opd[1], opd[2]}, groups, {dl[1], dl[2]}, "none",
                                                         c10::nullopt);
      },
      "over (batch x input depth), the depth taps as channels, so shapes are 4-D");
  // (N, K, D, H_out, W_out, T): input depth d's tap t lands on output depth d * stride - padding + t * dilation
  const Tensor taps = z.unflatten(0, {N, D}).unflatten(2, {K, T}).permute({0, 2, 1, 4, 5, 3});
  Tensor y;
  if (st[0] == T && dl[0] == 1 && pd[0] == 0 && opd[0] == 0) {
    // the taps tile the output depths without overlap or gap (a 3-D U-Net's k2 s2, every kD = 1
    // unstrided): output depth d * kD + t is tap t of input depth d, one copy (a view where kD = 1)
    if (T == 1) {
      y = taps.select(5, 0).contiguous(fmt);
    } else {
      y = at::empty({N, K, Do, out[3], out[4]}, z.options().memory_format(fmt));
      y.view({N, K, D, T, out[3], out[4]}).copy_(taps.permute({0, 1, 2, 5, 3, 4}));
    }
  } else {  // each tap added into the output depths it reaches (of a zeroed output), strided by the stride
    y = at::empty({N, K, Do, out[3], out[4]}, z.options().memory_format(fmt)).zero_();
    for (int64_t t = 0; t < T; ++t) {
      const int64_t off = t * dl[0] - pd[0];  // the output depth of input depth 0's tap t
      const int64_t lo = off >= 0 ? 0 : (st[0] - 1 - off) / st[0];  // the input depths that land: lo..hi
      const int64_t hi = Do - 1 - off >= 0 ? std::min(D - 1, (Do - 1 - off) / st[0]) : -1;
      const int64_t n = std::max<int64_t>(0, hi - lo + 1);
      // also a tap that lands nowhere adds (an empty slice): the output stays a function of x and
      // weight for autograd (zero gradients), as torch's is
      Tensor into = n > 0 ? y.slice(2, lo * st[0] + off, (lo + n - 1) * st[0] + off + 1, st[0]) : y.narrow(2, 0, 0);
      into.add_(taps.select(5, t).narrow(2, n > 0 ? lo : 0, n));
    }
  }
  const Tensor out_y = epilogue(y, bias, res, act, recorded(x_in, weight, bias, res));
  return unbatched ? out_y.squeeze(0) : out_y;
}

TORCH_LIBRARY_IMPL(tileops, CompositeImplicitAutograd, m) {
  m.impl("conv1d", &conv1d);
  m.impl("conv_transpose1d", &conv_transpose1d);
  m.impl("conv_transpose2d", &conv_transpose2d);
  m.impl("conv3d", &conv3d);
  m.impl("conv_transpose3d", &conv_transpose3d);
}

}  // namespace ops
}  // namespace tileops
