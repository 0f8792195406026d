// Grouped convolutions (1 < groups < C) as one dense conv over a block-diagonal weight: the conv
// tables' "grouped_dense" rows. Group g's weight is the diagonal block (Kg x Cg) g of a zero dense
// (K, C, R, S) weight, so the dense conv gives every group's outputs in one problem that the
// table's own groups == 1 rows run (the Hopper implicit GEMM, im2col + the matmul table), at
// `groups` times the useful work; the ladder, which runs each group as its own narrow GEMM, was
// 12-100x slower than cuDNN. Forward and data gradient build the dense weight (one fill, one
// copy); the weight gradient writes the dense gradient and keeps its diagonal blocks. Why and
// when: docs/kernels/grouped.md. Host code (ATen ops and the tables), no kernels of its own.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>

#include "cuda/conv/lowering.h"
#include "cuda/routing/candidates.h"
#include "cuda/runtime/cuda_util.h"

namespace tileops::cuda {
namespace {

// At most this many groups: a guard while the crossover with the ladder is unmeasured (each
// group's share of the dense work is 1/groups; docs/kernels/grouped.md#when-the-dense-conv-wins).
constexpr int64_t kDenseMaxGroups = 64;
constexpr int64_t kDenseMaxWeight = int64_t(1) << 28;  // dense weight elements (512 MiB in bf16)

// Problem `a` with groups = 1 over the dense weight at w (channels_last: its (r, s, c) rows
// contiguous, as the implicit GEMM reads a weight in place and the weight gradient writes it).
GemmArgs dense_args(const GemmArgs& a, void* w) {
  GemmArgs d = a;
  auto& c = d.conv;
  c.groups = 1, c.Cg = c.C, c.Kg = c.K;
  c.w = w;
  const int64_t ws[4] = {c.R * c.S * c.C, 1, c.S * c.C, c.C};
  std::copy(ws, ws + 4, c.ws);
  d.batch = 1;  // the op layer's conv_args, with one group
  switch (a.kind) {
    case Kind::ConvFwd: d.N = c.K, d.K = c.R * c.S * c.C; break;
    case Kind::ConvDgrad: d.N = c.C, d.K = c.R * c.S * c.K; break;
    case Kind::ConvWgrad: d.M = c.K, d.N = c.C * c.R * c.S; break;
    default: break;
  }
  return d;
}

// The diagonal blocks of a dense (K, C, R, S) weight as (Kg, Cg, R, S, groups): block g at [..., g].
at::Tensor diagonal_blocks(const at::Tensor& dense, const ConvOperands& c) {
  return dense.view({c.groups, c.Kg, c.groups, c.Cg, c.R, c.S}).diagonal(0, 0, 2);
}
// The grouped (K, Cg, R, S) weight at c.w as the same (Kg, Cg, R, S, groups).
at::Tensor by_group(const GemmArgs& a) {
  const auto& c = a.conv;
  return wrap(c.w, {c.K, c.Cg, c.R, c.S}, c.ws, a).view({c.groups, c.Kg, c.Cg, c.R, c.S}).permute({1, 2, 3, 4, 0});
}

const routing::Table& table_of(Kind kind) {
  return kind == Kind::ConvFwd ? kConvFwdRoutes : kind == Kind::ConvDgrad ? kConvDgradRoutes : kConvWgradRoutes;
}

}  // namespace

const char* grouped_dense_why_not(const GemmArgs& a) {
  const auto& c = a.conv;
  if (c.groups == 1) return "groups == 1";
  if (!tensor_core_dtype(a)) return "not on tensor cores (float64, or fp32 with TF32 off)";
  if (c.groups > kDenseMaxGroups) return "more than 64 groups (kDenseMaxGroups, a guard: unmeasured past it)";
  if (c.K * c.C * c.R * c.S > kDenseMaxWeight) return "a dense weight over 2^28 elements";
  return nullptr;
}

void grouped_dense_run(const GemmArgs& a) {
  const auto& c = a.conv;
  at::Tensor dense =
      at::empty({c.K, c.C, c.R, c.S}, cuda_options(a.dtype).memory_format(at::MemoryFormat::ChannelsLast));
  if (a.kind != Kind::ConvWgrad) {  // the weight is read: zeros but on the diagonal
    dense.zero_();
    diagonal_blocks(dense, c).copy_(by_group(a));
  }
  routing::route(table_of(a.kind), dense_args(a, dense.data_ptr()));
  if (a.kind == Kind::ConvWgrad) by_group(a).copy_(diagonal_blocks(dense, c));  // the gradient's blocks
}

// Explain mode: the dense problem's decision, its weight a fresh allocation (never touched).
void grouped_dense_explain(const GemmArgs& a, routing::Decision&) {
  routing::route(table_of(a.kind), dense_args(a, reinterpret_cast<void*>(uintptr_t(256))));
}

}  // namespace tileops::cuda
