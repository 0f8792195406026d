// The skinny tensor-core family (gemm_skinny_tc.cuh): where 'auto' takes it, its configs, the K
// split over a cluster, the launch.

#include <algorithm>
#include <atomic>
#include <iterator>
#include <type_traits>
#include <string>
#include <vector>

#include "autotune/cuda_timing.h"
#include "autotune/config_names.h"
#include "cuda/skinny/gemm_skinny.cuh"  // kSkinnyMaxM
#include "cuda/skinny/gemm_skinny_tc.cuh"
#include "cuda/routing/candidates.h"
#include "cuda/routing/launch_rungs.cuh"
#include "cuda/sm90/host.cuh"  // matrix_map

namespace tileops {
namespace cuda {
namespace {

// Configs as data: warps (columns per block = 16 x warps) and ring stages. bn128 / bn64: ~72 KB of
// ring each, so that three blocks fit an SM; the narrower one gives twice the blocks where N is
// small. bn128-deep: ~200 KB of ring, one block per SM, K split only as far as the blocks fit the
// SMs at once (as cuBLAS's skinny kernel: 128 columns, 11 stages). -tma: the same rings filled by a
// producer warp's TMA loads. Configs tried and dropped: docs/kernels/skinny.md#configs.
struct SkinnyTcConfig {
  const char* name;
  int warps, stages;
  bool deep;  // one block per SM: skinny_tc_split keeps the grid within one wave
  bool tma;   // a producer warp fills the ring by TMA (else the warps themselves, by cp.async)
};
constexpr SkinnyTcConfig kSkinnyTcConfigs[] = {
    {"bn128", 8, 4, false, false},    {"bn64", 4, 7, false, false}, {"bn128-deep", 8, 11, true, false},
    {"bn128-tma", 8, 4, false, true}, {"bn64-tma", 4, 7, false, true}};
constexpr int kSkinnyTcWide = 0, kSkinnyTcStreamed = 1, kSkinnyTcTma = 4;  // the heuristic's picks
static_assert(kSkinnyTcConfigs[kSkinnyTcWide].warps == 8 && !kSkinnyTcConfigs[kSkinnyTcWide].tma, "bn128");
static_assert(kSkinnyTcConfigs[kSkinnyTcStreamed].warps == 4 && !kSkinnyTcConfigs[kSkinnyTcStreamed].tma, "bn64");
static_assert(kSkinnyTcConfigs[kSkinnyTcTma].tma && kSkinnyTcConfigs[kSkinnyTcTma].warps == 4, "bn64-tma");
const autotune::Family kSkinnyTcFamily("matmul_skinny_tc", [] { return config_names(kSkinnyTcConfigs); });
template <int I, typename T>
using ShapeOf = SkinnyTcShape<kSkinnyTcConfigs[I].warps, kSkinnyTcConfigs[I].stages, int(sizeof(T)),
                              kSkinnyTcConfigs[I].tma>;

constexpr int kMaxSplit = 8;  // the portable cluster size

// Blocks along K in one cluster: doubled while the grid has fewer blocks than the SMs and every
// rank keeps at least one k tile (short K splits too: docs/kernels/skinny.md#split-skinny_tc_split);
// deep configs (one block per SM): while the doubled grid still fits the SMs and each rank keeps 16
// k tiles.
int skinny_tc_split(int64_t blocks, int64_t ktiles, int64_t sms, bool deep = false) {
  int s = 1;
  if (deep) {
    while (s < kMaxSplit && blocks * 2 * s <= sms && ktiles >= 32 * s) s *= 2;
  } else {
    while (s < kMaxSplit && blocks * s < sms && ktiles >= 2 * s) s *= 2;
  }
  return s;
}

// The TMA kernel's maps of B and A (gemm_skinny_tc_kernel's tm_b, tm_a). The family's operands
// are read in 16-byte chunks (vec_layout), which is what TMA needs too, except where a stride
// spans an extent of one (one row of A, say): any aligned stride serves there. False (no maps)
// where rows overlap (a row stride shorter than the row), which the maps do not describe.
template <typename T, int MP, bool KMAJOR, typename S>
bool tma_maps(const GemmArgs& a, CUtensorMap* mb, CUtensorMap* ma) {
  const auto& o = a.mm;
  constexpr int64_t n = 16 / sizeof(T);
  auto stride = [](int64_t s, int64_t extent, int64_t row) { return extent == 1 ? (row + n - 1) / n * n : s; };
  const int64_t sa = stride(o.sa[1], a.M, a.K), sb = KMAJOR ? stride(o.sb[2], a.N, a.K) : stride(o.sb[1], a.K, a.N);
  if (sa < a.K || sb < (KMAJOR ? a.K : a.N)) return false;
  const int64_t batch_a = a.batch == 1 ? 0 : o.sa[0], batch_b = a.batch == 1 ? 0 : o.sb[0];
  *ma = hopper::matrix_map(o.a, a.dtype, a.K, a.M, a.batch, sa, batch_a, S::BK, MP);
  if constexpr (KMAJOR)
    *mb = hopper::matrix_map(o.b, a.dtype, a.K, a.N, a.batch, sb, batch_b, S::BK, S::BN);
  else
    *mb = hopper::matrix_map(o.b, a.dtype, a.N, a.K, a.batch, sb, batch_b, 8 * S::V, S::BK);
  return true;
}

template <typename T, int MP, bool KMAJOR, int I>
void launch_cfg(const GemmArgs& a) {
  using S = ShapeOf<I, T>;
  constexpr bool kTma = kSkinnyTcConfigs[I].tma;
  CUtensorMap mb{}, ma{};
  if constexpr (kTma) {
    if (!tma_maps<T, MP, KMAJOR, S>(a, &mb, &ma)) return launch_cfg<T, MP, KMAJOR, kSkinnyTcWide>(a);
  }
  auto* kernel = gemm_skinny_tc_kernel<T, MP, KMAJOR, S::kWarps, S::kStages, kTma>;
  static std::atomic<uint64_t> set_on{0};
  allow_smem(kernel, S::kSmemBytes, set_on);
  const int64_t sms = sm_count();
  const int64_t cols = (a.N + S::BN - 1) / S::BN, ktiles = (a.K + S::BK - 1) / S::BK;
  int split = skinny_tc_split(cols * a.batch, ktiles, sms, kSkinnyTcConfigs[I].deep);
  auto launch_with = [&](int s) {
    return ClusterLaunch(dim3(unsigned(cols), unsigned(s), unsigned(a.batch)), dim3(S::kThreads), S::kSmemBytes,
                         dim3(1, unsigned(s), 1));
  };
  if (kSkinnyTcConfigs[I].deep) {
    // One block an SM: fewer clusters than SMs / split may be resident (resident_clusters_kept),
    // and a split whose clusters do not all fit at once would run in two waves. Halved until they fit.
    static PerDevice resident[4];  // [log2 split]: clusters of that many blocks resident at once
    for (; split > 1; split /= 2)
      if (cols * a.batch <= resident_clusters_kept(resident[__builtin_ctz(unsigned(split))], kernel,
                                                   launch_with(split).cfg))
        break;
  }
  ClusterLaunch launch = launch_with(split);
  launch(kernel, MatmulProblem<T>(a.mm), int(a.M), int(a.N), int(a.K), epilogue_of<T>(a), mb, ma);
}

}  // namespace

const char* skinny_tc_why_not(const GemmArgs& a) {
#ifndef TILEOPS_HAVE_SM90A
  return "built without the sm_90a target";  // its kernel is built for sm_90 only
#endif
  if (a.algo != Algo::Auto) return "algo pinned";
  if (a.M > kSkinnyMaxM) return "M > 16";
  if (a.M == 0 || a.N == 0 || a.K == 0) return "an empty side";
  // fp32 where TF32 is allowed, except a row-major B (a matmul's K x N) at one or two rows, where
  // the SIMT kernel is ahead as cuBLAS's fp32 GEMV is (docs/kernels/skinny.md#tf32-eligibility).
  const bool tf32 = a.dtype == c10::ScalarType::Float && a.allow_tf32;
  if (a.dtype != c10::ScalarType::Half && a.dtype != c10::ScalarType::BFloat16 && !tf32) return "float64, or float32 with TF32 off";
  if (routing::portable_only()) return routing::kPortableOnly;
  if (device_properties().major > 9)
    return "sm_90a code runs on compute capability 9.0 only: a newer GPU takes the portable kernels";
  if (device_properties().major != 9) return "not a compute capability 9.x GPU";
  if (a.batch > 65535 || a.N >= (int64_t(1) << 30) || a.K >= (int64_t(1) << 30)) return "too large for one launch";
  // The kernel copies 16-byte chunks along A's rows and along B's unit-stride side, each aligned:
  // the vectorized rung's reading of the operands (vec_layout).
  const VecLayout l = vec_layout(a, int(c10::elementSize(a.dtype)));
  if (!l.a.vec || !l.a.kc || !l.b.vec) return "A's rows or B's unit-stride side not in aligned 16-byte chunks";
  if (tf32 && !l.b.kc && a.M <= 2) return "TF32 at M <= 2 with a row-major B (the SIMT GEMV is ahead)";
  return nullptr;
}

namespace {
// The heuristic (docs/kernels/skinny.md#heuristic): bn64 by cp.async where a 16-bit row-major B
// streams from DRAM (larger than the L2) at M <= 8; bn128 by cp.async where the 128-column blocks
// fill half the SMs or more; else bn64-tma. bn128-deep is left to the autotuner.
std::pair<int, const char*> skinny_tc_heuristic(const GemmArgs& a) {
  const cudaDeviceProp* prop = &device_properties();
  const int64_t es = int64_t(c10::elementSize(a.dtype)), sms = prop->multiProcessorCount;
  const bool kmajor = vec_layout(a, int(es)).b.kc;
  const int64_t wide = (a.N + 127) / 128 * a.batch;
  const int64_t b_bytes = a.K * a.N * es * (a.mm.sb[0] == 0 ? 1 : a.batch);
  if (es == 2 && !kmajor && a.M <= 8 && b_bytes > prop->l2CacheSize)
    return {kSkinnyTcStreamed, "a 16-bit row-major B larger than the L2, M <= 8"};
  if (2 * wide >= sms) return {kSkinnyTcWide, "128-column blocks fill half the SMs"};
  return {kSkinnyTcTma, "few columns: 64-column blocks, K split over a cluster"};
}
std::string skinny_tc_key(const GemmArgs& a) {
  const bool kmajor = vec_layout(a, int(c10::elementSize(a.dtype))).b.kc;
  return autotune::op_key({"matmul_skinny_tc", c10::toString(a.dtype), autotune::shape_class(a.M, a.N, a.K, a.batch),
                           kmajor ? "bk" : "bmn"});
}
const std::vector<std::string>& skinny_tc_names() {
  static const std::vector<std::string> kNames = config_names(kSkinnyTcConfigs);
  return kNames;
}
}  // namespace

void skinny_tc_explain(const GemmArgs& a, routing::Decision& d) {
  const auto [heuristic, reason] = skinny_tc_heuristic(a);
  explain_config(d, skinny_tc_key(a), skinny_tc_names(), heuristic, reason);
}

void skinny_tc_run(const GemmArgs& a) {
  const bool kmajor = vec_layout(a, int(c10::elementSize(a.dtype))).b.kc;
  autotune::run([&] { return skinny_tc_key(a); }, skinny_tc_names(), skinny_tc_heuristic(a).first, [&](int i) {
    with_dtype(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same<T, double>::value) {
        auto go = [&](auto mp, auto km) {
          constexpr int MP = decltype(mp)::value;
          constexpr bool KM = decltype(km)::value;
          static_for<int(std::size(kSkinnyTcConfigs))>([&](auto c) {
            if (i == decltype(c)::value) launch_cfg<T, MP, KM, decltype(c)::value>(a);
          });
        };
        using Yes = std::true_type;
        using No = std::false_type;
        if (a.M <= 8) kmajor ? go(std::integral_constant<int, 8>{}, Yes{}) : go(std::integral_constant<int, 8>{}, No{});
        else kmajor ? go(std::integral_constant<int, 16>{}, Yes{}) : go(std::integral_constant<int, 16>{}, No{});
      }
    });
  });
}

}  // namespace cuda
}  // namespace tileops
