// matmul and linear: checks, output allocation, strided operand description.
#include <ATen/ExpandUtils.h>

#include "ops/common.h"

namespace tileops {
namespace ops {
namespace {

// Describes out[b] = a[b] @ b[b] (+ bias, activation) with a: (B|1, M, K) and bT given
// as a (B|1, K, N) strided view. A batch of size 1 is broadcast through stride 0.
GemmArgs matmul_args(const at::Tensor& a3, const at::Tensor& b3, const at::Tensor& out3, const at::Tensor* bias,
                     Act act, Algo algo = Algo::Auto, const at::Tensor* residual = nullptr) {
  GemmArgs g;
  g.kind = Kind::Matmul;
  g.dtype = a3.scalar_type();
  g.allow_tf32 = a3.is_cuda() && g.dtype == at::kFloat && at::globalContext().allowTF32CuBLAS();
  g.act = act;
  g.algo = algo;
  g.batch = out3.size(0);
  g.M = out3.size(1);
  g.N = out3.size(2);
  g.K = a3.size(2);
  g.bias = bias ? bias->const_data_ptr() : nullptr;
  g.residual = residual ? residual->const_data_ptr() : nullptr;  // out3's strides (checked_residual)
  g.out_base = out3.const_data_ptr();
  g.mm.a = a3.const_data_ptr();
  g.mm.b = b3.const_data_ptr();
  g.mm.c = out3.mutable_data_ptr();
  for (int i = 0; i < 3; ++i) {
    g.mm.sa[i] = a3.stride(i);
    g.mm.sb[i] = b3.stride(i);
    g.mm.sc[i] = out3.stride(i);
  }
  if (a3.size(0) == 1) g.mm.sa[0] = 0;
  if (b3.size(0) == 1) g.mm.sb[0] = 0;
  return g;
}

}  // namespace

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b, c10::string_view algo_name) {
  check_float_tensor("matmul", a, "a");
  check_float_tensor("matmul", b, "b");
  check_same("matmul", a, "a", b, "b");
  const Algo algo = parse_algo("matmul", algo_name, a.device());
  TORCH_CHECK(a.dim() >= 2, "tileops.matmul: expected a to have at least 2 dimensions, got shape ", a.sizes());
  TORCH_CHECK(b.dim() >= 2, "tileops.matmul: expected b to have at least 2 dimensions, got shape ", b.sizes());
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  TORCH_CHECK(b.size(-2) == K, "tileops.matmul: inner dimensions differ: a is ", a.sizes(), " (K=", K,
              ") but b is ", b.sizes(), " (K=", b.size(-2), ")");

  // Batch dimensions broadcast as in torch.matmul; 2-D operands have an empty batch.
  const auto a_batch = a.sizes().slice(0, a.dim() - 2), b_batch = b.sizes().slice(0, b.dim() - 2);
  std::vector<int64_t> batch;
  {
    const size_t nd = std::max(a_batch.size(), b_batch.size());
    batch.resize(nd);
    for (size_t i = 0; i < nd; ++i) {
      const int64_t da = i < nd - a_batch.size() ? 1 : a_batch[i - (nd - a_batch.size())];
      const int64_t db = i < nd - b_batch.size() ? 1 : b_batch[i - (nd - b_batch.size())];
      TORCH_CHECK(da == db || da == 1 || db == 1, "tileops.matmul: batch dimensions of a ", a.sizes(),
                  " and b ", b.sizes(), " cannot be broadcast together");
      batch[i] = da == 1 ? db : da;
    }
  }
  int64_t B = 1;
  for (auto d : batch) B *= d;

  std::vector<int64_t> out_shape(batch);
  out_shape.push_back(M);
  out_shape.push_back(N);
  auto out = at::empty(out_shape, a.options());
  if (out.numel() == 0) return out;

  // Views (B or 1, M, K): a 3-D or 2-D operand stays in place (a broadcast batch reads with
  // stride 0); more batch dims are expanded and flattened, which copies only where the
  // broadcast pattern cannot be expressed by a single stride.
  auto as3 = [&](const at::Tensor& t, at::IntArrayRef tb, int64_t rows, int64_t cols) {
    if (t.dim() == 2) return t.unsqueeze(0);
    if (t.dim() == 3 && (tb[0] == B || tb[0] == 1)) return t;
    std::vector<int64_t> shape(batch);
    shape.push_back(rows);
    shape.push_back(cols);
    return t.expand(shape).reshape({B, rows, cols});
  };
  const auto a3 = as3(a, a_batch, M, K), b3 = as3(b, b_batch, K, N);
  const auto out3 = out.view({B, M, N});
  run_gemm(matmul_args(a3, b3, out3, nullptr, Act::None, algo), a.device());
  return out;
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                  c10::string_view activation, const c10::optional<at::Tensor>& residual) {
  check_float_tensor("linear", x, "x");
  check_float_tensor("linear", weight, "weight");
  check_same("linear", x, "x", weight, "weight");
  const Act act = parse_activation("linear", activation);
  TORCH_CHECK(x.dim() >= 1, "tileops.linear: expected x to have at least 1 dimension, got a 0-d tensor");
  TORCH_CHECK(weight.dim() == 2, "tileops.linear: expected weight to be 2-D (out_features, in_features), got shape ",
              weight.sizes());
  const int64_t in = weight.size(1), outf = weight.size(0);
  TORCH_CHECK(x.size(-1) == in, "tileops.linear: x has ", x.size(-1), " features in its last dimension (shape ",
              x.sizes(), ") but weight expects in_features=", in);
  const auto bias_c = checked_bias("linear", bias, x, outf);
  const at::Tensor* b = bias_c.has_value() ? &*bias_c : nullptr;
  auto out_shape = x.sizes().vec();
  out_shape.back() = outf;
  auto out = at::empty(out_shape, x.options());
  const auto res_c = checked_residual("linear", residual, x, out);  // contiguous, as out
  if (out.numel() == 0) return out;
  const int64_t M = out.numel() / outf;
  const auto x3 = x.reshape({1, M, in});           // a view for any x whose leading dims flatten
  const auto wT3 = weight.t().unsqueeze(0);        // (1, in, out): weight read in place
  run_gemm(matmul_args(x3, wT3, out.view({1, M, outf}), b, act, Algo::Auto, res_c.has_value() ? &*res_c : nullptr),
           x.device());
  return out;
}

}  // namespace ops
}  // namespace tileops
