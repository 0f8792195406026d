// CPU family: the plain reference loop over any problem, parallel over output rows.
// Accumulates in double for fp64 and in float otherwise (as torch's CPU kernels do).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <type_traits>
#include <vector>

#include "common/epilogue.h"
#include "common/gemm_args.h"
#include "routing/route.h"

namespace tileops {
namespace {

// Blocks of RB rows share one packed copy of a K-slice of B (KT x N, accumulator type), so
// the inner loop runs over contiguous memory whatever B's strides or index map are.
template <typename T, class P>
void gemm_rows(const P& p, const GemmArgs& a) {
  using Acc = std::conditional_t<std::is_same<T, double>::value, double, float>;
  constexpr int64_t RB = 16, KT = 64;
  const Epilogue<T> epi = epilogue_of<T>(a);
  const int64_t blocks_per_g = (a.M + RB - 1) / RB;
  at::parallel_for(0, a.batch * blocks_per_g, 1, [&](int64_t begin, int64_t end) {
    std::vector<Acc> acc(RB * a.N), bpack(KT * a.N);
    std::vector<typename P::ColB> cols(a.N);
    std::vector<typename P::RowA> rows(RB);
    int64_t cols_g = -1;
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t g = blk / blocks_per_g, m0 = (blk % blocks_per_g) * RB;
      const int64_t nr = std::min(RB, a.M - m0);
      if (g != cols_g) {
        for (int64_t n = 0; n < a.N; ++n) cols[n] = p.col_b(g, n);
        cols_g = g;
      }
      for (int64_t r = 0; r < nr; ++r) rows[r] = p.row_a(g, m0 + r);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k0 = 0; k0 < a.K; k0 += KT) {
        const int64_t kt = std::min(KT, a.K - k0);
        for (int64_t n = 0; n < a.N; ++n)
          for (int64_t kk = 0; kk < kt; ++kk) bpack[kk * a.N + n] = static_cast<Acc>(p.b(cols[n], k0 + kk));
        for (int64_t r = 0; r < nr; ++r) {
          Acc* out = acc.data() + r * a.N;
          for (int64_t kk = 0; kk < kt; ++kk) {
            const Acc av = static_cast<Acc>(p.a(rows[r], k0 + kk));
            const Acc* bk = bpack.data() + kk * a.N;
            for (int64_t n = 0; n < a.N; ++n) out[n] += av * bk[n];
          }
        }
      }
      for (int64_t r = 0; r < nr; ++r) {
        const auto c = p.row_c(g, m0 + r);
        for (int64_t n = 0; n < a.N; ++n) epi.store(p.c(c, n), acc[r * a.N + n], p.bias_index(g, n));
      }
    }
  });
}

const char* cpu_why_not(const GemmArgs&) { return nullptr; }
void cpu_run(const GemmArgs& a) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.dtype, "tileops_gemm_cpu", [&] {
    visit_problem<scalar_t>(a, [&](const auto& p) { gemm_rows<scalar_t>(p, a); });
  });
}

}  // namespace

// The CPU's routing table: one candidate, every problem kind and dtype.
const routing::Table kCpuRoutes("cpu", "every op on the CPU",
                                {{"cpu", "always: the packed reference loop, parallel over output rows",
                                  "architecture.md#1-the-layers", cpu_why_not, cpu_run}});

void gemm_cpu(const GemmArgs& a) {
  if (a.batch == 0 || a.M == 0 || a.N == 0) return;
  routing::route(kCpuRoutes, a);
}

}  // namespace tileops
