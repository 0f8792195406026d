// The CPU's routing table and its last row, the reference loop over any problem, parallel over
// output rows. The fast rows are the packed GEMM (cpu/gemm_packed.h), once per instruction set.
// All accumulate in double for fp64 and in float otherwise (as torch's CPU kernels do).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>

#include <string>
#include <type_traits>
#include <vector>

#include "common/epilogue.h"
#include "common/gemm_args.h"
#include "cpu/packed_config.h"
#include "routing/route.h"

namespace tileops {
namespace cpu {
void run_packed_avx512(const GemmArgs& a);  // cpu/packed_avx512.cpp
void run_packed_avx2(const GemmArgs& a);    // cpu/packed_avx2.cpp
void run_packed_base(const GemmArgs& a);    // cpu/packed_base.cpp
}  // namespace cpu
namespace {

// Whether the x86 rows may run, checked once: the build has their kernels (packed_config.h), the
// CPU has the instructions, and torch may use them: ATEN_CPU_CAPABILITY (torch's own switch, read by
// at::get_cpu_capability: "AVX512", "AVX2", "DEFAULT" or, before torch 2.8, "NO AVX") caps tileops'
// rows as it caps torch's kernels.
enum class Isa { Avx2, Avx512 };
bool cpu_allows(Isa isa) {
#ifdef TILEOPS_CPU_X86_KERNELS
  static const std::string cap = at::get_cpu_capability();
  static const bool torch512 = cap.find("AVX512") != std::string::npos;
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                           __builtin_cpu_supports("f16c") && (torch512 || cap.find("AVX2") != std::string::npos);
  static const bool avx512 = avx2 && torch512 && __builtin_cpu_supports("avx512f") &&
                             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                             __builtin_cpu_supports("avx512dq");
  return isa == Isa::Avx512 ? avx512 : avx2;
#else
  (void)isa;
  return false;
#endif
}

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

// The packed rows' shared conditions. K = 0 leaves nothing to pack (the output is the epilogue of
// zero, which the reference writes); a packed B over kMaxPackedB bytes would be a large allocation
// the reference loop (one K-slice of B at a time) does not need.
constexpr int64_t kMaxPackedB = int64_t(1) << 30;
const char* packed_why_not(const GemmArgs& a) {
  if (a.K == 0) return "K is 0: nothing to pack";
  const int64_t acc = a.dtype == at::kDouble ? 8 : 4, nr = 32 / acc * 2;
  if (a.batch * ((a.N + nr - 1) / nr * nr) * a.K * acc > kMaxPackedB) return "packed B would pass 1 GiB";
  return nullptr;
}
const char* avx512_why_not(const GemmArgs& a) {
  if (!cpu_allows(Isa::Avx512)) return "no AVX-512 F/BW/VL/DQ (this CPU, or ATEN_CPU_CAPABILITY below avx512)";
  if (cpu::grouped_why_not(a) == nullptr) return "the grouped form runs in 8-lane vectors: cpu_avx2's";
  // half of a 32-column panel would be padding (kernels/cpu.md#instruction-sets)
  if (cpu::gemv_why_not(a) != nullptr && a.N * (a.dtype == at::kDouble ? 2 : 1) <= 16)
    return "blocked, N <= 16 (8 in fp64): cpu_avx2's 16-column panels pad it less";
  return packed_why_not(a);
}
const char* avx2_why_not(const GemmArgs& a) {
  if (!cpu_allows(Isa::Avx2)) return "no AVX2, FMA and F16C (this CPU, or ATEN_CPU_CAPABILITY=default)";
  return packed_why_not(a);
}

// The packed rows' form (packed_config.h), as explain reports it and the trace logs it.
std::string packed_form(const GemmArgs& a, std::string* why) {
  if (cpu::grouped_why_not(a) == nullptr) {
    const bool dw = a.conv.Cg == 1;
    *why = dw ? "heuristic: depthwise: vectors across channels, not a GEMM a channel"
              : "heuristic: groups of at most 16 channels: vectors across channels, not a thin GEMM a group";
    return dw ? "depthwise" : "grouped";
  }
  const char* no = cpu::gemv_why_not(a);
  *why = no ? std::string("heuristic: ") + no : "heuristic: M <= 8, B's columns contiguous along k: B read in place";
  return no ? "blocked" : "gemv";
}
void packed_explain(const GemmArgs& a, routing::Decision& d) { d.config = packed_form(a, &d.why); }
template <void (*Run)(const GemmArgs&)>
void packed_run(const GemmArgs& a) {
  if (routing::tracing()) {
    std::string why;
    const std::string form = packed_form(a, &why);
    routing::trace_line("config " + form + " (" + why + ")");
  }
  Run(a);
}

const char* reference_why_not(const GemmArgs&) { return nullptr; }
void reference_run(const GemmArgs& a) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.dtype, "tileops_gemm_cpu", [&] {
    visit_problem<scalar_t>(a, [&](const auto& p) { gemm_rows<scalar_t>(p, a); });
  });
}

}  // namespace

// The CPU's routing table: the packed GEMM in the widest vectors the CPU has, else the reference.
const routing::Table kCpuRoutes(
    "cpu", "every op on the CPU",
    {{"cpu_avx512",
      "the CPU has AVX-512 F/BW/VL/DQ (and ATEN_CPU_CAPABILITY allows it): the packed GEMM, 12x32 blocks "
      "of AVX-512 FMAs; not the grouped form, nor a blocked N <= 16",
      "kernels/cpu.md#the-packed-gemm-cpu_avx512-cpu_avx2-cpu_packed", avx512_why_not,
      packed_run<cpu::run_packed_avx512>, packed_explain},
     {"cpu_avx2",
      "the CPU has AVX2 + FMA + F16C (and ATEN_CPU_CAPABILITY is not default): the packed GEMM, "
      "6x16 blocks of AVX2 FMAs",
      "kernels/cpu.md#the-packed-gemm-cpu_avx512-cpu_avx2-cpu_packed", avx2_why_not, packed_run<cpu::run_packed_avx2>,
      packed_explain},
     {"cpu_packed", "the packed GEMM in the build's baseline vectors (at::vec's generic Vectorized)",
      "kernels/cpu.md#the-packed-gemm-cpu_avx512-cpu_avx2-cpu_packed", packed_why_not, packed_run<cpu::run_packed_base>,
      packed_explain},
     {"cpu_reference", "always: the reference loop over the index map, parallel over output rows",
      "kernels/cpu.md#the-reference-loop-cpu_reference", reference_why_not, reference_run}},
    /*on_cpu=*/true);

void gemm_cpu(const GemmArgs& a) {
  if (a.batch == 0 || a.M == 0 || a.N == 0) return;
  routing::route(kCpuRoutes, a);
}

}  // namespace tileops
