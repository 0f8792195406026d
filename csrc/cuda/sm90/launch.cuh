// The Hopper family's launches, as templates over the dtype and the kernel's shape: included by
// the translation units that instantiate kernels (matmul_{bf16,fp16,tf32}.cu, ../conv/conv_sm90.cu),
// never by host.cu or ../routing/matmul.cu, so that each dtype's kernels compile in a unit of their own.
#pragma once
#include <algorithm>
#include <atomic>
#include <type_traits>
#include <utility>

#include "autotune/cuda_timing.h"
#include "cuda/runtime/launch_util.h"
#include "cuda/sm90/host.cuh"
#include "cuda/splitk/splitk.cuh"

namespace tileops::cuda::hopper {

// 16-byte stores (and residual loads) along output rows: rows and bases aligned.
template <typename T>
bool vec_stores(const GemmArgs& a) {
  const auto& o = a.mm;
  constexpr int vec_elems = 16 / sizeof(T);
  return o.sc[2] == 1 && o.sc[1] % vec_elems == 0 && o.sc[0] % vec_elems == 0 && o.srq % vec_elems == 0 &&
         reinterpret_cast<uintptr_t>(o.c) % 16 == 0 && reinterpret_cast<uintptr_t>(a.residual) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.out_base) % 16 == 0;
}

// ... or 16-byte stores down the columns of a column-major 16-bit C (sm90::Store::Cols): rows one
// element apart, columns and base 16-byte aligned, no residual or bias (the split-K reduce then
// runs on the transposed problem, whose bias would be per row).
template <typename T>
bool cols_stores(const GemmArgs& a) {
  const auto& o = a.mm;
  return sizeof(T) == 2 && o.sc[1] == 1 && o.rq == 0 && o.sc[2] % 8 == 0 && o.sc[0] % 8 == 0 &&
         reinterpret_cast<uintptr_t>(o.c) % 16 == 0 && a.residual == nullptr && a.bias == nullptr;
}

// C's rows as TMA stores write them (SwizzledStaging's blocks): what both the one-tile and the
// persistent kernels need before they store by TMA (vec_stores, and C's rows one stride apart) and
// the map of C in boxes of 128 bytes of columns by `rows` rows (a consumer warpgroup's block).
template <typename T>
bool tma_stores(const GemmArgs& a) {
  return vec_stores<T>(a) && a.residual == nullptr && a.mm.rq == 0;
}
template <typename T>
CUtensorMap c_store_map(const GemmArgs& a, uint32_t rows) {
  const auto& o = a.mm;
  return matrix_map(o.c, a.dtype, a.N, a.M, a.batch, o.sc[1], o.sc[0], uint32_t(sm90::ROW_BYTES / sizeof(T)), rows);
}

// The problem with M and N swapped and C read transposed: what a Store::Cols split-K's partials
// (column-major) sum into.
inline GemmArgs transposed_c(GemmArgs a) {
  std::swap(a.M, a.N);
  std::swap(a.mm.sc[1], a.mm.sc[2]);
  return a;
}

// The one-tile kernel. C by TMA stores (sm90::Store::Tma) where they can write it (rows and base
// 16-byte aligned, no residual, one row stride, K not split), else by threads.
template <typename T, int BN, int STAGES, bool MN, sm90::Gather G = sm90::Gather::None, bool A_MN = false,
          sm90::BLoad BL = sm90::BLoad::Tma>
void launch_sm90(const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb, int ba, int bb,
                 bool allow_split = true) {
  constexpr int BK = sm90::bk<T>;
  auto kernel = sm90::gemm_sm90_kernel<T, BN, MN, STAGES, G, A_MN, BL>;
  constexpr size_t smem = sm90::smem_bytes<BN, STAGES, T>();
  static std::atomic<uint64_t> set_on{0};
  allow_smem(kernel, smem, set_on);
  const MatmulProblem<T> p(a.mm);
  const Epilogue<T> epi = epilogue_of<T>(a);
  sm90::SplitK sk;
  sk.splits = allow_split ? splitk_factor(a, BN, BK) : 1;
  Workspace work;  // split-K partials, through the caching allocator
  if (sk.splits > 1) {
    const int64_t ktiles = (a.K + BK - 1) / BK;
    sk.kt_per_split = int((ktiles + sk.splits - 1) / sk.splits);
    work = float_workspace(a.batch * sk.splits * a.M * a.N);
    sk.partial = work.as<float>();
  }
  const bool by_tma = sk.splits == 1 && tma_stores<T>(a);
  const sm90::Store store = by_tma              ? sm90::Store::Tma
                            : vec_stores<T>(a)  ? sm90::Store::Rows
                            : cols_stores<T>(a) ? sm90::Store::Cols
                                                : sm90::Store::Elements;
  const CUtensorMap mc = by_tma ? c_store_map<T>(a, 64) : CUtensorMap{};  // each consumer stores 64 rows
  const dim3 grid(unsigned((a.M + sm90::BM - 1) / sm90::BM), unsigned((a.N + BN - 1) / BN),
                  unsigned(a.batch * sk.splits));
  DependentLaunch launch(grid, dim3(sm90::THREADS), smem);  // overlaps the kernel before it (griddep.cuh)
  launch(kernel, ma, mb, mc, p, a.M, a.N, a.K, epi, ba, bb, store, sk, a.conv);
  if (sk.splits > 1)
    splitk_reduce<T, float>(sk.partial, sk.splits, store == sm90::Store::Cols ? transposed_c(a) : a);
}

// The persistent kernels (sm90::gemm_sm90_persistent_kernel; TM x BN tiles, COOP: cooperative,
// else ping-pong; CL: blocks per cluster): one block per SM, as many clusters as fit at once on
// the GPU or as there are cluster tiles (persistent_refusal says which problems they take). With
// CL = 2 each block loads half of the B tile: a K-major B map's box is BN / 2 rows (MN-major B is
// read in 64-row atoms either way).
// G = ConvFwdIm2col: ma is an im2col map of the conv's x (im2col_map, BM-pixel boxes).
// A_RS (TF32): A read in place and rounded in registers (see primitives.cuh, load_a_tf32).
template <typename T, bool MN, int TM, int BN, bool COOP, int CL, sm90::Gather G, bool A_RS = false>
void launch_sm90_persistent(const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb, int ba, int bb) {
  using Shape = sm90::PersistShape<TM, BN, COOP, int(sizeof(T))>;
  auto kernel = sm90::gemm_sm90_persistent_kernel<T, MN, TM, BN, COOP, CL, G, A_RS>;
  constexpr size_t smem = Shape::SMEM;
  static std::atomic<uint64_t> set_on{0};
  allow_smem(kernel, smem, set_on);
  const int64_t tiles = output_tiles(a, BN, CL * TM);  // cluster tiles
  TORCH_CHECK(tiles < INT_MAX, "tileops: too many output tiles for the persistent Hopper kernels");
  ClusterLaunch launch(dim3(1), dim3(sm90::THREADS), smem, dim3(CL), dependent_launches());  // grid: below
  cudaLaunchConfig_t& cfg = launch.cfg;
  const int sms = sm_count();
  int resident = sms;  // clusters resident at once: one block per SM
  if constexpr (CL > 1) {  // a GPC's SM count need not be a multiple of CL
    static PerDevice asked{};
    cfg.gridDim = dim3(unsigned(CL * sms));
    resident = resident_clusters_kept(asked, kernel, cfg);
    TORCH_CHECK(resident > 0, "tileops: no cluster of ", CL,
                " blocks of the persistent Hopper kernel fits on this GPU");
  }
  cfg.gridDim = dim3(unsigned(CL * std::min<int64_t>(tiles, resident)));
  // 16-bit C by TMA stores where its rows and base are 16-byte aligned (vec_stores): boxes of 128
  // bytes of columns by a consumer's rows, in the 128-byte swizzle the kernel stages them in; else
  // by threads. TF32: float2 stores where aligned, no map.
  // (persistent_refusal keeps out a residual and grouped rows, so tma_stores is vec_stores here)
  const bool vec = vec_stores<T>(a);
  const CUtensorMap mc = Shape::STAGED && tma_stores<T>(a) ? c_store_map<T>(a, Shape::WROWS) : CUtensorMap{};
  launch(kernel, ma, mb, mc, MatmulProblem<T>(a.mm), a.M, a.N, a.K, epilogue_of<T>(a), int(a.batch), ba, bb, vec,
         a.conv);
}

// A persistent config's tile as constants: f(TM, BN, COOP), each a std::integral_constant.
// TM128_ONLY: f is instantiated for the 128-row tiles only (the caller takes no other: tm128).
template <bool TM128_ONLY = false, typename F>
decltype(auto) with_persistent_tile(const Sm90Config& cfg, F&& f) {
  using std::integral_constant;
  using I128 = integral_constant<int, 128>;
  if (cfg.persist == Persist::PingPong) return f(I128{}, I128{}, std::false_type{});
  if constexpr (!TM128_ONLY) {
    if (cfg.bn == 128) return f(integral_constant<int, 256>{}, I128{}, std::true_type{});
  }
  if (cfg.bn == 256) return f(I128{}, integral_constant<int, 256>{}, std::true_type{});
  return f(I128{}, integral_constant<int, 192>{}, std::true_type{});
}

// The 128-row persistent configs (tm128), instantiated for one cluster size and A's loads (G: the
// conv forward takes these, in clusters of two, with im2col loads).
template <typename T, bool BMN, int CL, sm90::Gather G>
void launch_persistent_tm128(const Sm90Config& cfg, const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb,
                             int ba, int bb) {
  TORCH_INTERNAL_ASSERT(tm128(cfg) && cfg.cluster == CL, "tileops: not a 128-row persistent config of this cluster size");
  with_persistent_tile<true>(cfg, [&](auto tm, auto bn, auto coop) {
    launch_sm90_persistent<T, BMN, decltype(tm)::value, decltype(bn)::value, decltype(coop)::value, CL, G>(a, ma, mb,
                                                                                                          ba, bb);
  });
}

// The persistent configs of one cluster size CL (the GEMM's A by TMA tiles): cfg's tile and kind,
// B MN-major or K-major (b_mn, 16-bit only) and, for TF32, A unrounded, rounded in registers (a_rs).
// TF32's compile in units of their own, matmul_tf32_c<CL>.cu (TILEOPS_SM90_PERSISTENT_UNITS below):
// with its one-tile kernels, in one unit, they were the build's critical path.
template <typename T, int CL>
void launch_persistent_cluster(const Sm90Config& cfg, const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb,
                               int ba, int bb, bool b_mn, bool a_rs) {
  constexpr auto G = sm90::Gather::None;
  TORCH_INTERNAL_ASSERT(cfg.cluster == CL, "tileops: not a persistent config of this cluster size");
  with_persistent_tile(cfg, [&](auto tm, auto bn, auto coop) {
    constexpr int TM = decltype(tm)::value, BN = decltype(bn)::value;
    constexpr bool COOP = decltype(coop)::value;
    auto go = [&](auto bmn, auto rs) {
      launch_sm90_persistent<T, decltype(bmn)::value, TM, BN, COOP, CL, G, decltype(rs)::value>(a, ma, mb, ba, bb);
    };
    if constexpr (sm90::kTf32<T>) {  // TF32: B K-major (its rounded copy) only
      TORCH_INTERNAL_ASSERT(!b_mn, "tileops: TF32's persistent kernels read B K-major");
      if (a_rs) go(std::false_type{}, std::true_type{});
      else go(std::false_type{}, std::false_type{});
    } else if (b_mn) {
      go(std::true_type{}, std::false_type{});
    } else {
      go(std::false_type{}, std::false_type{});
    }
  });
}

// The (dtype, cluster size) pairs of launch_persistent_cluster instantiated in a translation unit of
// their own (matmul_<dtype>_c<CL>.cu: TILEOPS_SM90_PERSISTENT_UNIT) and declared extern to every
// other one: TF32's, whose 16 persistent kernels took ptxas ~200 s. The 16-bit ones compile with
// their dtype's dispatch (matmul_bf16.cu, matmul_fp16.cu): ~25 s a cluster size, less than a unit's
// own cost (~18 s) would save on two cores.
#define TILEOPS_SM90_PERSISTENT_UNIT(T, CL)                                                                   \
  template void launch_persistent_cluster<T, CL>(const Sm90Config&, const GemmArgs&, const CUtensorMap&, \
                                                 const CUtensorMap&, int, int, bool, bool);
#define TILEOPS_SM90_PERSISTENT_UNITS(X) X(float, 1) X(float, 2)
#define TILEOPS_SM90_PERSISTENT_EXTERN(T, CL) extern TILEOPS_SM90_PERSISTENT_UNIT(T, CL)
TILEOPS_SM90_PERSISTENT_UNITS(TILEOPS_SM90_PERSISTENT_EXTERN)
#undef TILEOPS_SM90_PERSISTENT_EXTERN

// The TMA map of a GEMM operand of `rows` rows (M for A, N for B), its strides s as (batch, row,
// k): MN-major, boxes of 64 rows (one swizzle atom each) by BK k-rows; K-major, BK by tile_rows.
template <typename T>
CUtensorMap operand_map(const GemmArgs& a, const void* p, int64_t rows, const int64_t* s, int batch, Major m,
                        uint32_t tile_rows) {
  constexpr uint32_t BK = sm90::bk<T>;
  if (m == Major::MN) return matrix_map(p, a.dtype, rows, a.K, batch, s[2], s[0], 64, BK);
  return matrix_map(p, a.dtype, a.K, rows, batch, s[1], s[0], BK, tile_rows);
}

// Config i of kSm90Configs on a's operands, laid out as l. a_rounded (TF32): A's words are already
// rounded (a copy, where TMA could not read A in place); else every kernel rounds A's fragments in
// registers (the one-tile kernel always, the persistent ones with A_RS). TF32's B: l.b == None, a
// rounded K-major copy (pad_operands), by TMA; else B unrounded in place, which the one-tile kernels
// up to 128 wide load through their producer's registers (BLoad) where K is at most
// kTf32RegsMaxK, while the others (bn256: its consumers need the registers the producer would
// keep; the persistent kernels; longer K) take a rounded copy made here. The producer's threads
// issue every load, rounding and store of B themselves, several times the consumers' time a k
// tile: it wins only where the copy's fixed cost is the larger share
// (docs/kernels/sm90.md#ktf32regsmaxk-tf32s-b-through-the-producer). (kTf32RegsMaxK: host.cuh.)
template <typename T>
void launch_sm90_config(const GemmArgs& a, const TmaLayout& l, int i, bool a_rounded) {
  using sm90::BLoad;
  const Sm90Config cfg = kSm90Configs[i];
  const bool b_regs = sm90::kTf32<T> && l.b != Major::None;  // TF32's B unrounded, in place
  if (b_regs && (cfg.persist != Persist::No || cfg.bn == 256 || a.K > kTf32RegsMaxK)) {
    const TmaLayout copied{l.a, Major::None};
    const Padded p = pad_operands(a, copied);
    return launch_sm90_config<T>(p.args, copied, i, a_rounded);
  }
  const auto& o = a.mm;
  const int ba = int(operand_batches(a, o.sa[0])), bb = int(operand_batches(a, o.sb[0]));
  // B's strides as (batch, row = n, k), the order operand_map reads
  const int64_t sb[3] = {o.sb[0], o.sb[2], o.sb[1]};
  const CUtensorMap ma = operand_map<T>(a, o.a, a.M, o.sa, ba, l.a, sm90::BM);
  // The MN-major A variants come in 128 and 256 wide only (bn64 runs as bn128), which keeps
  // the number of Hopper kernels this file instantiates down. BL != Tma (TF32's B through the
  // producer's registers) reaches the one-tile kernels up to 128 wide only (above), without a map.
  auto launch_with = [&](auto a_mn, auto b_mn, auto b_load) {
    constexpr bool AMN = decltype(a_mn)::value, BMN = decltype(b_mn)::value;
    constexpr BLoad BL = decltype(b_load)::value;
    const int bn = cfg.bn == 64 && AMN ? 128 : cfg.bn;
    const CUtensorMap mb =
        BL == BLoad::Tma ? operand_map<T>(a, o.b, a.N, sb, bb, l.b, uint32_t(bn / cfg.cluster)) : CUtensorMap{};
    constexpr auto G = sm90::Gather::None;
    const bool split = cfg.split;
    if constexpr (BL == BLoad::Tma) {
      if (cfg.persist != Persist::No) {
        const char* refusal = persistent_refusal(a, AMN);
        TORCH_CHECK(refusal == nullptr, refusal);
        if constexpr (!AMN) {
          if (cfg.cluster == 2) launch_persistent_cluster<T, 2>(cfg, a, ma, mb, ba, bb, BMN, !a_rounded);
          else launch_persistent_cluster<T, 1>(cfg, a, ma, mb, ba, bb, BMN, !a_rounded);
        }
        return;
      }
      if (bn == 256) return launch_sm90<T, 256, 4, BMN, G, AMN>(a, ma, mb, ba, bb, split);
    }
    if (bn == 128) launch_sm90<T, 128, 6, BMN, G, AMN, BL>(a, ma, mb, ba, bb, split);
    else if constexpr (!AMN) {
      if (cfg.two_blocks) launch_sm90<T, 64, 4, BMN, G, AMN, BL>(a, ma, mb, ba, bb, split);
      else launch_sm90<T, 64, 8, BMN, G, AMN, BL>(a, ma, mb, ba, bb, split);
    }
  };
  using No = std::false_type;
  using Yes = std::true_type;
  using Tma = std::integral_constant<BLoad, BLoad::Tma>;
  const bool a_mn = l.a == Major::MN, b_mn = l.b == Major::MN;
  if constexpr (sm90::kTf32<T>) {
    TORCH_INTERNAL_ASSERT(!a_mn, "tileops: fp32 (TF32) wgmma needs K-major A");
    if (!b_regs) launch_with(No{}, No{}, Tma{});
    else if (b_mn) launch_with(No{}, No{}, std::integral_constant<BLoad, BLoad::RegsMN>{});
    else launch_with(No{}, No{}, std::integral_constant<BLoad, BLoad::RegsK>{});
  } else if (a_mn) {
    if (b_mn) launch_with(Yes{}, Yes{}, Tma{});
    else launch_with(Yes{}, No{}, Tma{});
  } else {
    if (b_mn) launch_with(No{}, Yes{}, Tma{});
    else launch_with(No{}, No{}, Tma{});
  }
}

// The config: sm90_heuristic's (host.cu), or the autotuner's.
template <typename T>
void run_sm90(const GemmArgs& a, const TmaLayout& l, bool padded, bool a_rounded) {
  const int heuristic = sm90_heuristic(a, l);
  autotune::run([&] { return sm90_key(a, l, padded, a_rounded); },
                kSm90Names, heuristic, [&](int i) { launch_sm90_config<T>(a, l, i, a_rounded); });
}

// TF32: A is read in place where TMA can read it, else copied and rounded (copy_round_tf32); B
// in place where 16-byte loads can read it, K-major or MN-major (tf32_b_major: the one-tile
// kernels round it in their producer, launch_sm90_config copies it for the others), else copied,
// rounded and K-major. Copying both operands was a large share of the time (docs/performance.md#tf32).
template <typename T>
void run_sm90_any_layout(const GemmArgs& a, TmaLayout l) {
  if constexpr (sm90::kTf32<T>) l.b = tf32_b_major(a);
  if (l.ok()) return run_sm90<T>(a, l, false, false);
  const Padded p = pad_operands(a, l);
  TmaLayout pl = sm90_layout(p.args);
  // TF32: B in place, unrounded, as l says; or None: its rounded K-major copy (launch_sm90_config)
  if constexpr (sm90::kTf32<T>) pl.b = l.b;
  TORCH_INTERNAL_ASSERT(pl.a != Major::None && (pl.b != Major::None || sm90::kTf32<T>),
                        "tileops: padded operands not TMA-readable");
  run_sm90<T>(p.args, pl, true, l.a == Major::None);
}

}  // namespace tileops::cuda::hopper
