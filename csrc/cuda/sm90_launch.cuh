// The Hopper family's launches, as templates over the dtype and the kernel's shape: included by
// the translation units that instantiate kernels (matmul_sm90_{bf16,fp16,tf32}.cu, conv_sm90.cu),
// never by matmul.cu, so that each dtype's kernels compile in a unit of their own.
#pragma once
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <utility>

#include "autotune.h"
#include "cuda_util.h"
#include "sm90_host.cuh"
#include "splitk.cuh"

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

// The problem with M and N swapped and C read transposed: what a Store::Cols split-K's partials
// (column-major) sum into.
inline GemmArgs transposed_c(GemmArgs a) {
  std::swap(a.M, a.N);
  std::swap(a.mm.sc[1], a.mm.sc[2]);
  return a;
}

template <typename T, int BN, int STAGES, bool MN, sm90::Gather G = sm90::Gather::None, bool A_MN = false,
          sm90::BLoad BL = sm90::BLoad::Tma>
void launch_sm90(const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb, int ba, int bb,
                 bool allow_split = true) {
  constexpr int BK = sm90::bk<T>;
  const sm90::Store store = vec_stores<T>(a)   ? sm90::Store::Rows
                            : cols_stores<T>(a) ? sm90::Store::Cols
                                                : sm90::Store::Elements;
  auto kernel = sm90::gemm_sm90_kernel<T, BN, MN, STAGES, G, A_MN, BL>;
  constexpr size_t smem = sm90::smem_bytes<BN, STAGES, T>();
  static std::atomic<uint64_t> set_on{0};
  allow_smem(kernel, smem, set_on);
  const MatmulProblem<T> p(a.mm);
  const Epilogue<T> epi = epilogue_of<T>(a);
  sm90::SplitK sk;
  sk.splits = allow_split ? splitk_factor(a, BN, BK) : 1;
  at::Tensor work;  // split-K partials, through the caching allocator
  if (sk.splits > 1) {
    const int64_t ktiles = (a.K + BK - 1) / BK;
    sk.kt_per_split = int((ktiles + sk.splits - 1) / sk.splits);
    work = at::empty({a.batch * sk.splits, a.M, a.N}, cuda_options(at::kFloat));
    sk.partial = work.data_ptr<float>();
  }
  const dim3 grid(unsigned((a.M + sm90::BM - 1) / sm90::BM), unsigned((a.N + BN - 1) / BN),
                  unsigned(a.batch * sk.splits));
  DependentLaunch launch(grid, dim3(sm90::THREADS), smem);  // overlaps the kernel before it (griddep.cuh)
  launch(kernel, ma, mb, p, a.M, a.N, a.K, epi, ba, bb, store, sk, a.conv);
  if (sk.splits > 1)
    splitk_reduce<T, float>(sk.partial, sk.splits, store == sm90::Store::Cols ? transposed_c(a) : a);
}

// The persistent kernels (sm90::gemm_sm90_persistent_kernel; TM x BN tiles, COOP: cooperative,
// else ping-pong; CL: blocks per cluster): one block per SM, as many clusters as fit at once on
// the GPU or as there are cluster tiles (persistent_refusal says which problems they take). With
// CL = 2 each block loads half of the B tile: a K-major B map's box is BN / 2 rows (MN-major B is
// read in 64-row atoms either way).
// G = ConvFwdIm2col: ma is an im2col map of the conv's x (im2col_map, BM-pixel boxes).
// A_RS (TF32): A read in place and rounded in registers (see gemm_sm90.cuh).
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
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  int resident = sms;  // clusters resident at once: one block per SM
  if constexpr (CL > 1) {  // asked once per device: a GPC's SM count need not be a multiple of CL
    static PerDevice asked{};
    resident = kept_per_device(asked, [&] {
      cfg.gridDim = dim3(unsigned(CL * sms));
      int n = 0;
      C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, kernel, &cfg));
      TORCH_CHECK(n > 0, "tileops: no cluster of ", CL, " blocks of the persistent Hopper kernel fits on this GPU");
      return n;
    });
  }
  cfg.gridDim = dim3(unsigned(CL * std::min<int64_t>(tiles, resident)));
  // 16-bit C by TMA stores where its rows and base are 16-byte aligned (vec_stores): boxes of 128
  // bytes of columns by a consumer's rows, in the 128-byte swizzle the kernel stages them in; else
  // by threads. TF32: float2 stores where aligned, no map.
  const bool vec = vec_stores<T>(a);
  const auto& o = a.mm;
  const CUtensorMap mc = vec && Shape::STAGED ? matrix_map(o.c, a.dtype, a.N, a.M, a.batch, o.sc[1], o.sc[0],
                                          uint32_t(sm90::ROW_BYTES / sizeof(T)), Shape::WROWS)
                             : CUtensorMap{};
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

// One persistent config of kSm90Configs, instantiated: its tile, its kind and its cluster size
// (the GEMM's A by TMA tiles); a_rs (TF32): A unrounded, rounded in registers.
template <typename T, bool BMN>
void launch_persistent_config(const Sm90Config& cfg, const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb,
                              int ba, int bb, bool a_rs) {
  constexpr auto G = sm90::Gather::None;
  with_persistent_tile(cfg, [&](auto tm, auto bn, auto coop) {
    constexpr int TM = decltype(tm)::value, BN = decltype(bn)::value;
    constexpr bool COOP = decltype(coop)::value;
    auto go = [&](auto rs) {
      constexpr bool RS = decltype(rs)::value;
      if (cfg.cluster == 2) launch_sm90_persistent<T, BMN, TM, BN, COOP, 2, G, RS>(a, ma, mb, ba, bb);
      else launch_sm90_persistent<T, BMN, TM, BN, COOP, 1, G, RS>(a, ma, mb, ba, bb);
    };
    if constexpr (sm90::kTf32<T>) {
      if (a_rs) go(std::true_type{});
      else go(std::false_type{});
    } else {
      go(std::false_type{});
    }
  });
}

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
// issue every load, rounding and store of B themselves, ~0.7 us a k tile where the consumers'
// wgmmas take ~0.15: it wins only where the copy's fixed cost is the larger share. H200 GPU us,
// copy / registers (results/h200/ebb508d/x3/tf32.json against 35cc54d/c1): batched AV
// 64 x 512 x 64 x 512 (K = 512) bn64x2 33.4 / 30.0, B K-major 33.8 / 28.7; QK^T (K = 64) 48.0 /
// 48.1; 1024^2 bn64 17.9 / 25.1; 2048^2 bn128 72.4 / 139.2.
constexpr int64_t kTf32RegsMaxK = 512;
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
  const int ba = o.sa[0] == 0 ? 1 : int(a.batch), bb = o.sb[0] == 0 ? 1 : int(a.batch);
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
    if constexpr (BL == BLoad::Tma) {
      if (cfg.persist != Persist::No) {
        const char* refusal = persistent_refusal(a, AMN);
        TORCH_CHECK(refusal == nullptr, refusal);
        if constexpr (!AMN) launch_persistent_config<T, BMN>(cfg, a, ma, mb, ba, bb, !a_rounded);
        return;
      }
      if (bn == 256) return launch_sm90<T, 256, 4, BMN, G, AMN>(a, ma, mb, ba, bb, cfg.split);
    }
    if (bn == 128) launch_sm90<T, 128, 6, BMN, G, AMN, BL>(a, ma, mb, ba, bb, cfg.split);
    else if constexpr (!AMN) {
      if (cfg.two_blocks) launch_sm90<T, 64, 4, BMN, G, AMN, BL>(a, ma, mb, ba, bb, cfg.split);
      else launch_sm90<T, 64, 8, BMN, G, AMN, BL>(a, ma, mb, ba, bb, cfg.split);
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

template <typename T>
void run_sm90(const GemmArgs& a, const TmaLayout& l, bool padded, bool a_rounded) {
  // The heuristic: bn64x2 where 128-wide tiles would leave SMs idle but 64-wide ones fill them
  // without split-K, and for N <= 64 (measured, results/h200/14fecd3: square 1024 0.70 -> 1.10x,
  // 1000^3 0.75 -> 0.92x, batched AV 1.00 -> 1.19x; 1x1-conv GEMMs with N = 64 unchanged; large
  // problems are slower with it: ViT-B 0.36-0.67x); the persistent kernels in clusters of two
  // where there are at least two 128 x 128 tiles per SM, TF32 one (persistent_pick; TF32 2048^2
  // on an H100: bn256 79 us, coop128x256-c2 66, results/h100/ddb1659/a/cand_tf32.log); else 256
  // wide for wide outputs, 128 below. (TF32 with N <= 64 took the persistent kernels where they
  // filled the SMs while bn64x2 copied A to round it, H100 batched AV 95 -> 53 us of which 56 were
  // the copies, results/h100/8643bf4/c2; the one-tile kernels now round A in registers too.)
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const bool a_mn = l.a == Major::MN, b_mn = l.b == Major::MN;
  const bool can_persist = persistent_refusal(a, a_mn) == nullptr;
  const bool persist = can_persist && output_tiles(a, 128) >= (sm90::kTf32<T> ? 1 : 2) * sms;
  const bool x2 = !a_mn &&  // A MN: no bn64
                  (a.N <= 64 || (output_tiles(a, 128) < sms && 2 * output_tiles(a, 64) > sms));
  // 16-bit one-tile kernels that split K (few output tiles over a long K, as a linear's weight
  // gradient gz^T x) take 128-wide tiles: as many blocks with half the splits, each a main loop twice
  // as long against the same prologue and partial store (H100, ViT-S b128 weight gradients, K =
  // 25216, bn256 -> bn128: 1152 x 384 59 -> 47 us, 384 x 384 33 -> 28, 1536 x 384 76 -> 59, 384 x
  // 1536 58 -> 55; results/h100/2a3f1ef/n1/vit_gemms.json, NOTES 55).
  const bool split = !sm90::kTf32<T> && splitk_factor(a, 128, sm90::bk<T>) > 1;
  // At most one 64-wide tile per SM over a short K (<= 1024): bn64, one block per SM with an
  // 8-stage ring, where bn64x2's second block per SM never comes and its ring is 4 deep; but, 16-bit,
  // where an operand's rows are not 128-byte aligned (TMA boxes straddle lines), ping-pong pp128,
  // whose 128 x 128 tiles load less per output. Over a longer K, where 128-wide tiles split K:
  // bn128. H200, kernel us (results/h200/f6d89d1/a1/edges.json), bn64 / bn64x2 / pp128 / bn128:
  // 1024^3 6.0 / 6.8 / 8.2 / 10.9, 1000 x 1024 x 1024 6.4 / 7.2 / 8.2; 1000^3 11.8 / 11.8 / 10.3,
  // B K-major 11.3 / 11.3 / 9.7; 1024 x 1024 x 1000 9.0 / 8.9 / 8.3; 1000 x 1000 x 4096 bn128 23.4
  // against bn64x2's 26.4, B K-major 18.6 against 22.5.
  // TF32 takes bn64 where bn64x2 would run with at most one block per SM: bn64x2's two blocks keep
  // one register set of A fragments and a 4-deep ring; nor pp128. Where its 64-wide tiles fill
  // between one and two blocks per SM, bn64x2 (GPU us, results/h200/35cc54d/c1/tf32.json, bn64 /
  // bn64x2 / pp128: 1024^2 17.9 / 27.6 / 27.3, 1000^3 20.3 / 29.0 / 31.7; batched AV
  // 64 x 512 x 64 x 512, 256 tiles, 34.7 / 33.4 / 39.1).
  // 16-bit with both operands' rows ragged: the clusters of two, whose multicast halves the
  // straddling B loads; pp128-c2 in place of pp128 at one wave, and where K is not split a
  // persistent config in place of the one-tile bn256 / bn128 (H200, results/h200/70d0595/p1/edges_c2.json,
  // kernel us: 1000^3 pp128 10.5 -> pp128-c2 9.5, B K-major 9.9 -> 9.4; 2048 x 2048 x 1000 with B
  // K-major bn256 20.0 -> coop128x256-c2 15.5; with one ragged operand pp128 / bn256 stay ahead,
  // 1024^2 x 1000 8.5 against 9.1; split over K = 4096, bn128 18.5 against pp128-c2's 24.8).
  // (Copying both ragged operands to whole-line rows first did not pay at 1000^3: one launch for
  // both took 3.1 us, more than the straddling loads cost; NOTES 72.)
  const int64_t es = int64_t(c10::elementSize(a.dtype));
  const int64_t pitch_a = a_mn ? a.mm.sa[2] : a.mm.sa[1], pitch_b = b_mn ? a.mm.sb[1] : a.mm.sb[2];
  const bool ragged_a = (pitch_a * es) % 128 != 0, ragged_b = (pitch_b * es) % 128 != 0;
  const bool one_wave64 = x2 && output_tiles(a, 64) <= sms && a.K <= 1024;
  const bool long_x2 = x2 && !one_wave64 && a.N > 64 && split;
  static const int kX2 = sm90_index("bn64x2"), kBn64 = sm90_index("bn64"), kBn256 = sm90_index("bn256"),
                   kBn128 = sm90_index("bn128"), kPp128 = sm90_index("pp128"), kPp128c2 = sm90_index("pp128-c2");
  const bool pp_rows = (ragged_a || ragged_b) && !sm90::kTf32<T> && can_persist;
  const bool cluster_rows = pp_rows && ragged_a && ragged_b;
  const bool persistent = persist || (cluster_rows && !split);
  // 16-bit, rows aligned, where even 64-wide tiles fill at most half the SMs over K <= 1024 (batch-1
  // ViT linears, a batch-1 patch embedding's GEMM): bn64 unsplit, the most blocks without a reduce.
  // H200 kernel us (results/h200/11f5cbf/s1/few.json), bn64-nosplit / the bn256 or split bn128
  // it replaces / cuBLAS: 197 x 1152 x 384 4.2 / 10.2 / 3.0, 197 x 384 x 384 4.0 / 10.0 / 2.7,
  // 196 x 768 x 768 5.2 / 7.3 / 3.5, 384 x 768 x 768 4.8 / 7.3 / 3.6, 512^3 4.0 / 6.6 / 3.1; it was the
  // fastest candidate on all 11 shapes probed.
  const bool few64 = !a_mn && !sm90::kTf32<T> && !pp_rows && !persist && 2 * output_tiles(a, 64) <= sms &&
                     a.K <= 1024;
  static const int kBn64Nosplit = sm90_index("bn64-nosplit");
  const int heuristic = one_wave64   ? (cluster_rows ? kPp128c2 : pp_rows ? kPp128 : kBn64)
                        : long_x2    ? kBn128
                        : x2         ? (sm90::kTf32<T> && output_tiles(a, 64) <= sms ? kBn64 : kX2)
                        : few64      ? kBn64Nosplit
                        : persistent ? persistent_choices()[persistent_pick(a, sms)].config
                                     : a.N > 128 && !split ? kBn256 : kBn128;
  autotune::run(
      [&] {
        return autotune::op_key({"matmul_sm90", c10::toString(a.dtype), autotune::shape_class(a.M, a.N, a.K, a.batch),
                                 std::string(a_mn ? "amn+" : "") + (b_mn ? "bmn" : "bk") + (padded ? "+pad" : "") +
                                     (a_rounded ? "+acopy" : "") +  // TF32: A copied, or rounded in registers
                                     // GELU / SiLU epilogues: another best tile (NOTES 53: ViT-B fc1 with
                                     // GELU prefers ping-pong, without it the cooperative 128 x 256)
                                     (a.act == Act::Gelu || a.act == Act::Silu ? "+exp" : "")});
      },
      kSm90Names, heuristic, [&](int i) { launch_sm90_config<T>(a, l, i, a_rounded); });
}

// TF32: A is read in place where TMA can read it, else copied and rounded (copy_round_tf32); B
// in place where 16-byte loads can read it, K-major or MN-major (tf32_b_major: the one-tile
// kernels round it in their producer, launch_sm90_config copies it for the others), else copied,
// rounded and K-major. At 4096^2 the copies of both operands took 85 of 490 us (NOTES 15).
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
