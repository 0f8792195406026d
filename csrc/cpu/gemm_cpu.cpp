// CPU family: the plain reference loop over any problem, parallel over output rows.
// Accumulates in double for fp64 and in float otherwise (as torch's CPU kernels do).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <type_traits>
#include <vector>

#include "../common/epilogue.h"
#include "../common/gemm_args.h"

namespace tileops {
namespace {

template <typename T, class P>
void gemm_rows(const P& p, const GemmArgs& a) {
  using Acc = std::conditional_t<std::is_same<T, double>::value, double, float>;
  const Epilogue<T> epi{static_cast<const T*>(a.bias), a.act};
  const int64_t rows = a.batch * a.M;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, a.N * a.K));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<Acc> acc(a.N);
    std::vector<typename P::ColB> cols(a.N);
    int64_t cols_g = -1;
    for (int64_t idx = begin; idx < end; ++idx) {
      const int64_t g = idx / a.M, m = idx % a.M;
      if (g != cols_g) {
        for (int64_t n = 0; n < a.N; ++n) cols[n] = p.col_b(g, n);
        cols_g = g;
      }
      std::fill(acc.begin(), acc.end(), Acc(0));
      const auto row = p.row_a(g, m);
      for (int64_t k = 0; k < a.K; ++k) {
        const Acc av = static_cast<Acc>(p.a(row, k));
        for (int64_t n = 0; n < a.N; ++n) acc[n] += av * static_cast<Acc>(p.b(cols[n], k));
      }
      const auto out = p.row_c(g, m);
      for (int64_t n = 0; n < a.N; ++n) *p.c(out, n) = epi(acc[n], p.bias_index(g, n));
    }
  });
}

}  // namespace

void gemm_cpu(const GemmArgs& a) {
  if (a.batch == 0 || a.M == 0 || a.N == 0) return;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.dtype, "tileops_gemm_cpu", [&] {
    visit_problem<scalar_t>(a, [&](const auto& p) { gemm_rows<scalar_t>(p, a); });
  });
}

}  // namespace tileops
