// The skinny tensor-core family (gemm_skinny_tc.cuh): where 'auto' takes it, its configs, the K
// split over a cluster, the launch.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <type_traits>
#include <string>
#include <vector>

#include "autotune.h"
#include "config_names.h"
#include "gemm_skinny.cuh"  // kSkinnyMaxM
#include "gemm_skinny_tc.cuh"
#include "launch.cuh"

namespace tileops {
namespace cuda {
namespace {

// Configs as data: warps (columns per block = 16 x warps) and ring stages. bn128 / bn64: ~72 KB of
// ring each, so that three blocks fit an SM; the narrower one gives twice the blocks where N is
// small. bn128-deep: ~200 KB of ring, one block per SM, K split only as far as the blocks fit the
// SMs at once (as cuBLAS's skinny kernel: 128 columns, 11 stages). (bn64-deep, 64 columns and 20
// stages split 2 ways at N = 4096 as cuBLAS's kernel there, ran 16 x 4096 x 4096 in 17.1 us
// against bn128's 13.6 and won nowhere by more than 4%: results/h200/f97c4d3/k1, NOTES 78.)
struct SkinnyTcConfig {
  const char* name;
  int warps, stages;
  bool deep;  // one block per SM: skinny_tc_split keeps the grid within one wave
};
constexpr SkinnyTcConfig kSkinnyTcConfigs[] = {
    {"bn128", 8, 4, false}, {"bn64", 4, 7, false}, {"bn128-deep", 8, 11, true}};
constexpr int kSkinnyTcDeep = 2;
static_assert(kSkinnyTcConfigs[kSkinnyTcDeep].deep, "kSkinnyTcDeep names bn128-deep");
const autotune::Family kSkinnyTcFamily("matmul_skinny_tc", [] { return config_names(kSkinnyTcConfigs); });
template <int I, typename T>
using ShapeOf = SkinnyTcShape<kSkinnyTcConfigs[I].warps, kSkinnyTcConfigs[I].stages, int(sizeof(T))>;

constexpr int kMaxSplit = 8;  // the portable cluster size

// Blocks along K in one cluster: doubled while the grid has fewer than two blocks per SM and
// every rank keeps at least four k tiles (a ring's worth of copies in flight); deep configs (one
// block per SM): while the doubled grid still fits the SMs and each rank keeps 16 k tiles.
int skinny_tc_split(int64_t blocks, int64_t ktiles, int64_t sms, bool deep = false) {
  int s = 1;
  if (deep) {
    while (s < kMaxSplit && blocks * 2 * s <= sms && ktiles >= 32 * s) s *= 2;
  } else {
    while (s < kMaxSplit && blocks * s < 2 * sms && ktiles >= 8 * s) s *= 2;
  }
  return s;
}

template <typename T, int MP, bool KMAJOR, int I>
void launch_cfg(const GemmArgs& a) {
  using S = ShapeOf<I, T>;
  auto* kernel = gemm_skinny_tc_kernel<T, MP, KMAJOR, S::kWarps, S::kStages>;
  static std::atomic<uint64_t> set_on{0};
  allow_smem(kernel, S::kSmemBytes, set_on);
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
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
  launch(kernel, MatmulProblem<T>(a.mm), int(a.M), int(a.N), int(a.K), epilogue_of<T>(a));
}

}  // namespace

bool matmul_skinny_tc(const GemmArgs& a) {
#ifndef TILEOPS_HAVE_SM90A
  return false;  // its kernel is built for sm_90 only
#endif
  if (a.algo != Algo::Auto || a.M > kSkinnyMaxM || a.M == 0 || a.N == 0 || a.K == 0) return false;
  // fp32 where TF32 is allowed: on an H200 (results/h200/35d3d7a/s1/skinny_tf32.json) 16 x 4096 x
  // 4096 took 27 us against the SIMT skinny kernel's 48.5 (fp32 math), and with a K-major B (a
  // linear's weight) 24-62 us against 32-176; but not a row-major B (a matmul's K x N) at one or
  // two rows, where the SIMT kernel is ahead (as cuBLAS runs an fp32 GEMV there with TF32
  // allowed): GPU us, SIMT / this kernel (results/h200/4e3f7a8/k2/skinny_tf32.json), 1 x 4096 x
  // 4096 23.1 / 25.0, 1 x 11008 x 4096 49.0 / 51.2, 1 x 4096 x 11008 48.7 / 54.4, 2 x 4096 x 4096
  // 23.6 / 25.0; 4 rows even (25.3), 8 rows 27.1 / 25.2.
  const bool tf32 = a.dtype == at::kFloat && a.allow_tf32;
  if (a.dtype != at::kHalf && a.dtype != at::kBFloat16 && !tf32) return false;
  const auto* prop = at::cuda::getCurrentDeviceProperties();
  if (prop->major != 9 || a.batch > 65535 || a.N >= (int64_t(1) << 30) || a.K >= (int64_t(1) << 30)) return false;
  // The kernel copies 16-byte chunks along A's rows and along B's unit-stride side, each aligned:
  // the vectorized rung's reading of the operands (vec_layout).
  const int64_t es = int64_t(c10::elementSize(a.dtype));
  const VecLayout l = vec_layout(a, int(es));
  if (!l.a.vec || !l.a.kc || !l.b.vec) return false;
  const bool kmajor = l.b.kc;
  if (tf32 && !kmajor && a.M <= 2) return false;
  // The heuristic: 128 columns a block unless its grid, split as far as K allows, leaves more than
  // half the SMs idle (results/h100/73f962b/j1/skinny_probe.json: bn128 took 4096 x 4096 at M = 1-16
  // in 13-16 us against bn64's 15-17; bn64 took N = 768 and 1024 x 8192, 6-8 column blocks); the
  // deep ring where the column blocks alone fill the SMs (H200, GPU us, results/h200/bbbbb70/e1f/
  // skinny_probe.json: 16 x 32000 x 4096 bn128 79.7, bn128-deep 73.7, cuBLAS 65.0; at 4096 columns
  // it lost, 22.0 against 13.5).
  const int64_t bk = kSkinnyTcRowBytes / es;  // k of a stage (SkinnyTcShape::BK)
  const int64_t sms = prop->multiProcessorCount, ktiles = (a.K + bk - 1) / bk;
  const int64_t wide = (a.N + 127) / 128 * a.batch;
  const int heuristic = wide >= sms ? kSkinnyTcDeep : wide * skinny_tc_split(wide, ktiles, sms) * 2 >= sms ? 0 : 1;
  static const std::vector<std::string> kNames = config_names(kSkinnyTcConfigs);
  autotune::run(
      [&] {
        return autotune::op_key({"matmul_skinny_tc", c10::toString(a.dtype),
                                 autotune::shape_class(a.M, a.N, a.K, a.batch), kmajor ? "bk" : "bmn"});
      },
      kNames, heuristic, [&](int i) {
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
  return true;
}

}  // namespace cuda
}  // namespace tileops
