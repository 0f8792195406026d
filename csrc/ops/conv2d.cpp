// conv2d forward and backward as implicit GEMMs over any memory format and any strides.
#include "common/skinny.h"
#include "ops/common.h"

namespace tileops {
namespace ops {
namespace {

// Validates shapes and parameters; fills the geometry (no pointers or strides yet).
ConvOperands conv_geometry(const char* op, const at::Tensor& x, const at::Tensor& weight, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  TORCH_CHECK(x.dim() == 4, "tileops.", op, ": expected x to be 4-D (N, C, H, W), got shape ", x.sizes());
  TORCH_CHECK(weight.dim() == 4, "tileops.", op,
              ": expected weight to be 4-D (out_channels, in_channels/groups, kH, kW), got shape ", weight.sizes());
  const auto st = int_pair(op, stride, "stride"), pd = int_pair(op, padding, "padding"),
             dl = int_pair(op, dilation, "dilation");
  TORCH_CHECK(st[0] > 0 && st[1] > 0, "tileops.", op, ": expected stride to be positive, got ", stride);
  TORCH_CHECK(pd[0] >= 0 && pd[1] >= 0, "tileops.", op, ": expected padding to be non-negative, got ", padding);
  TORCH_CHECK(dl[0] > 0 && dl[1] > 0, "tileops.", op, ": expected dilation to be positive, got ", dilation);
  TORCH_CHECK(groups > 0, "tileops.", op, ": expected groups to be positive, got ", groups);
  // Bounded so that no size computed from them (padded extent, dilated kernel) overflows int64.
  constexpr int64_t kMax = int64_t(1) << 31;
  TORCH_CHECK(st[0] < kMax && st[1] < kMax, "tileops.", op, ": expected stride below 2^31, got ", stride);
  TORCH_CHECK(pd[0] < kMax && pd[1] < kMax, "tileops.", op, ": expected padding below 2^31, got ", padding);
  TORCH_CHECK(dl[0] < kMax && dl[1] < kMax, "tileops.", op, ": expected dilation below 2^31, got ", dilation);
  TORCH_CHECK(weight.size(2) > 0 && weight.size(3) > 0, "tileops.", op,
              ": expected weight to have a positive kernel size (shape[2:]), got shape ", weight.sizes());
  ConvOperands c{};
  c.N = x.size(0);
  c.C = x.size(1);
  c.H = x.size(2);
  c.W = x.size(3);
  c.K = weight.size(0);
  c.R = weight.size(2);
  c.S = weight.size(3);
  TORCH_CHECK(c.C % groups == 0, "tileops.", op, ": groups=", groups, " must divide the input channels (x.shape[1]=",
              c.C, ")");
  TORCH_CHECK(c.K % groups == 0, "tileops.", op, ": groups=", groups,
              " must divide the output channels (weight.shape[0]=", c.K, ")");
  TORCH_CHECK(weight.size(1) * groups == c.C, "tileops.", op, ": expected weight.shape[1] * groups == x.shape[1]",
              " (", c.C, "), got weight shape ", weight.sizes(), " with groups=", groups);
  c.sh = st[0];
  c.sw = st[1];
  c.ph = pd[0];
  c.pw = pd[1];
  c.dh = dl[0];
  c.dw = dl[1];
  c.groups = groups;
  c.Cg = c.C / groups;
  c.Kg = c.K / groups;
  const int64_t eh = c.dh * (c.R - 1) + 1, ew = c.dw * (c.S - 1) + 1;  // dilated kernel extent
  TORCH_CHECK(c.H + 2 * c.ph >= eh && c.W + 2 * c.pw >= ew, "tileops.", op, ": the (dilated) kernel ", eh, "x", ew,
              " is larger than the padded input ", c.H + 2 * c.ph, "x", c.W + 2 * c.pw);
  c.P = (c.H + 2 * c.ph - eh) / c.sh + 1;
  c.Q = (c.W + 2 * c.pw - ew) / c.sw + 1;
  return c;
}

void set_tensors(ConvOperands& c, const at::Tensor& x, const at::Tensor& w, const at::Tensor& y) {
  c.x = const_cast<void*>(x.const_data_ptr());  // the problem type decides which one is written
  c.w = const_cast<void*>(w.const_data_ptr());
  c.y = const_cast<void*>(y.const_data_ptr());
  for (int i = 0; i < 4; ++i) {
    c.xs[i] = x.stride(i);
    c.ws[i] = w.stride(i);
    c.ys[i] = y.stride(i);
  }
}

// residual: y's strides (checked_residual), read at the offset of the element written from out_base.
GemmArgs conv_args(Kind kind, const ConvOperands& c, const at::Tensor& x, Act act, const at::Tensor* bias,
                   const void* residual = nullptr, const void* out_base = nullptr) {
  GemmArgs g;
  g.kind = kind;
  g.dtype = x.scalar_type();
  g.allow_tf32 = x.is_cuda() && g.dtype == at::kFloat && at::globalContext().allowTF32CuDNN();
  g.act = act;
  g.bias = bias ? bias->const_data_ptr() : nullptr;
  g.residual = residual;
  g.out_base = out_base;
  g.conv = c;
  g.batch = c.groups;
  switch (kind) {
    case Kind::ConvFwd: g.M = c.N * c.P * c.Q; g.N = c.Kg; g.K = c.R * c.S * c.Cg; break;
    case Kind::ConvDgrad: g.M = c.N * c.H * c.W; g.N = c.Cg; g.K = c.R * c.S * c.Kg; break;
    case Kind::ConvWgrad: g.M = c.Kg; g.N = c.Cg * c.R * c.S; g.K = c.N * c.P * c.Q; break;
    default: break;
  }
  return g;
}

at::Tensor empty_in_format_of(at::IntArrayRef shape, const at::Tensor& like) {
  return at::empty(shape, like.options().memory_format(like.suggest_memory_format()));
}

// conv_transpose2d's stand-in for the input of the conv it transposes (conv_family.cpp:
// input_placeholder): one element seen at every index of the input's shape (stride 0 wherever
// the size is above 1). It gives the data gradient its shape and is never read; having no
// strides of its own, it has no memory format.
bool is_placeholder(const at::Tensor& x) {
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) > 1 && x.stride(d) != 0) return false;
  return true;
}

}  // namespace

at::Tensor conv2d(const at::Tensor& x_in, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                  c10::string_view activation, const c10::optional<at::Tensor>& residual) {
  check_float_tensor("conv2d", x_in, "x");
  check_float_tensor("conv2d", weight, "weight");
  check_same("conv2d", x_in, "x", weight, "weight");
  const Act act = parse_activation("conv2d", activation);
  TORCH_CHECK(x_in.dim() == 3 || x_in.dim() == 4, "tileops.conv2d: expected x to be 3-D (C, H, W) or 4-D (N, C, H, W), got shape ",
              x_in.sizes());
  const bool unbatched = x_in.dim() == 3;
  const at::Tensor x = unbatched ? x_in.unsqueeze(0) : x_in;
  ConvOperands c = conv_geometry("conv2d", x, weight, stride, padding, dilation, groups);
  const auto bias_c = checked_bias("conv2d", bias, x, c.K);
  const at::Tensor* b = bias_c.has_value() ? &*bias_c : nullptr;
  auto y = empty_in_format_of({c.N, c.K, c.P, c.Q}, x);
  // checked against the output as the caller sees it (3-D when x is); only its pointer is
  // passed on, and it has y's strides, so every kernel path reads it at the output's offsets
  const auto res_c = checked_residual("conv2d", residual, x_in, unbatched ? y.squeeze(0) : y);
  if (y.numel() > 0) {
    set_tensors(c, x, weight, y);
    run_gemm(conv_args(Kind::ConvFwd, c, x, act, b, res_c.has_value() ? res_c->const_data_ptr() : nullptr,
                       y.const_data_ptr()),
             x.device());
  }
  return unbatched ? y.squeeze(0) : y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> conv2d_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                                               const at::Tensor& weight, at::IntArrayRef stride,
                                                               at::IntArrayRef padding, at::IntArrayRef dilation,
                                                               int64_t groups, std::array<bool, 3> output_mask) {
  const char* op = "_conv2d_backward";
  check_float_tensor(op, grad_out, "grad_out");
  check_float_tensor(op, x, "x");
  check_float_tensor(op, weight, "weight");
  check_same(op, x, "x", weight, "weight");
  check_same(op, x, "x", grad_out, "grad_out");
  ConvOperands c = conv_geometry(op, x, weight, stride, padding, dilation, groups);
  TORCH_CHECK(grad_out.dim() == 4 && grad_out.size(0) == c.N && grad_out.size(1) == c.K && grad_out.size(2) == c.P &&
                  grad_out.size(3) == c.Q,
              "tileops._conv2d_backward: expected grad_out of shape (", c.N, ", ", c.K, ", ", c.P, ", ", c.Q,
              "), got ", grad_out.sizes());
  at::Tensor gx, gw, gb;
  // grad_input in x's memory format; in grad_out's where x is a placeholder (conv_transpose2d)
  gx = output_mask[0] ? empty_in_format_of(x.sizes(), is_placeholder(x) ? grad_out : x)
                      : at::empty({0}, x.options());
  gw = output_mask[1] ? empty_in_format_of(weight.sizes(), weight) : at::empty({0}, x.options());
  // (tileops.explain launches nothing: the bias gradient is torch's sum, not a routed problem)
  gb = output_mask[2] && !routing::explaining() ? grad_out.sum({0, 2, 3}) : at::empty({0}, x.options());
  // The data and weight gradients at once (on a GPU, two streams) where the kernel has taps or a
  // stride: their implicit GEMMs leave a last wave part-filled (or most SMs idle), which the other
  // fills. A 1x1 stride-1 conv's gradients are plain GEMMs that fill the GPU on their own, and
  // overlapping them measured slower (docs/kernels/conv-lowered.md#the-backwards-two-streams-opsconv2dcpp).
  // Not at once where the weight gradient's GEMM is skinny (K <= kSkinnyMaxM output channels):
  // beside the data gradient it gave wrong 16-bit grad_weights on an H100 (issue 60: the skinny
  // TMA ring released stages before their last reads, now fenced: docs/kernels/skinny.md#the-rings-release);
  // kept until a GPU run confirms the fence (docs/kernels/conv-lowered.md#the-backwards-two-streams-opsconv2dcpp).
  const bool overlap =
      !(c.R == 1 && c.S == 1 && c.sh == 1 && c.sw == 1) && !(output_mask[1] && c.K <= kSkinnyMaxM);
  std::vector<GemmArgs> problems;
  if (output_mask[0] && gx.numel() > 0) {
    set_tensors(c, gx, weight, grad_out);
    problems.push_back(conv_args(Kind::ConvDgrad, c, x, Act::None, nullptr));
  }
  if (output_mask[1] && gw.numel() > 0) {
    set_tensors(c, x, gw, grad_out);
    problems.push_back(conv_args(Kind::ConvWgrad, c, x, Act::None, nullptr));
  }
  run_gemms(problems, x.device(), overlap);
  return {gx, gw, gb};
}

}  // namespace ops
}  // namespace tileops
