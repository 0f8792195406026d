// Picks a kernel (a rung of the ladder) and its config for a problem and launches it on the
// current stream. Configs are data: one line each here.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "common/gemm_args.h"
#include "cuda/runtime/launch_util.h"
#include "cuda/ladder/gemm_ladder.cuh"
#include "cuda/ladder/gemm_simt.cuh"
#include "cuda/mma/gemm_tc.cuh"
#include "cuda/routing/entry.h"
#include "cuda/splitk/splitk.cuh"

namespace tileops {
namespace cuda {

using Naive = NaiveConfig<8, 32>;  // 8 rows x 32 columns of threads
using Tiled = TiledConfig<32, 0>;
using TiledPadded = TiledConfig<32, 1>;
using Simt = SimtConfig<64, 64, 16, 4, 4>;  // 'register', every dtype
// 'vectorized':            BM   BN  BK  warps  TM TN  blocks/SM (registers <= 65536 / (256 * it))
using VecF32 = VecConfig<128, 128, 16, 4, 2, 8, 8, 2>;  // 128 registers, no spills
// N <= 64 (64-channel convs): no half-empty tiles. 2 blocks/SM: it needs ~95 registers; capped at
// 80 for 3 it spilled, and was slower
// (docs/kernels/ladder.md#the-heuristic-simt_heuristic-and-its-reasons).
using VecF32N64 = VecConfig<128, 64, 16, 4, 2, 8, 4, 2>;
using VecF16 = VecConfig<128, 128, 16, 4, 2, 8, 8, 1>;  // 8-element vectors: 150 registers, 1 block/SM
using VecF64 = VecConfig<64, 64, 8, 4, 2, 4, 4, 2>;     // double accumulators: a quarter of the tile
// 'mma' (fp16, bf16, fp32 as TF32):  BM   BN  warps
using TcLarge = TcConfig<128, 128, 2, 4>;  // where its tiles fill the SMs
// else: 4x the blocks, and split-K below half the SMs. 8 warps (32 x 16 each), not 4: these blocks
// run 2-4 k tiles, bound by each warp's instruction stream
// (docs/kernels/mma.md#measured-reasons-for-its-shape)
using TcSmall = TcConfig<64, 64, 2, 4>;

template <typename T>
using VecFor = std::conditional_t<sizeof(T) == 8, VecF64, std::conditional_t<sizeof(T) == 4, VecF32, VecF16>>;

template <class Cfg>
dim3 gemm_grid(const GemmArgs& a) {
  const int64_t gm = (a.M + Cfg::BM - 1) / Cfg::BM, gn = (a.N + Cfg::BN - 1) / Cfg::BN;
  TORCH_CHECK(gm < (int64_t(1) << 31) && gn <= 65535,
              "tileops: problem too large for one launch (M=", a.M, ", N=", a.N, ")");
  return dim3(unsigned(gm), unsigned(gn), unsigned(std::min<int64_t>(a.batch, 65535)));
}

// One launcher for every family: grid (M tiles, N tiles, batch), `kernel` (launch_gemm: the
// config's, kernel_of), any extra kernel arguments after the epilogue.
template <class Cfg, typename T, class P, typename Kernel, typename... Extra>
void launch_gemm_with(Kernel kernel, const P& p, const GemmArgs& a, Extra... extra) {
  kernel<<<gemm_grid<Cfg>(a), Cfg::THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
      p, a.batch, a.M, a.N, a.K, epilogue_of<T>(a), extra...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
template <class Cfg, typename T, class P, typename... Extra>
void launch_gemm(const P& p, const GemmArgs& a, Extra... extra) {
  launch_gemm_with<Cfg, T>(kernel_of<T, P>(static_cast<Cfg*>(nullptr)), p, a, extra...);
}

// The vectorized kernel takes one batch entry per grid z: batches past the z limit go in
// chunks, each with its operands' pointers moved to its first entry. k_last > 0: the last batch
// entry's K (gemm_vec_kernel), which must not end inside a 16-byte vector along k where the
// loads are vectors: false then, launching nothing (split-K gives that chunk a launch of its own).
template <typename T, class Cfg = VecFor<T>>
bool launch_vectorized(const MatmulProblem<T>& p, const GemmArgs& a, int64_t k_last = 0) {
  if constexpr (std::is_same<Cfg, VecF32>::value) {
    if (a.N <= VecF32N64::BN) return launch_vectorized<T, VecF32N64>(p, a, k_last);
  }
  const VecLayout lay = vec_layout(a, int(sizeof(T)));
  if (k_last > 0 && lay.fast && k_last % (16 / int64_t(sizeof(T))) != 0) return false;
  constexpr int64_t kMaxZ = 65535;
  for (int64_t g0 = 0; g0 < a.batch; g0 += kMaxZ) {
    GemmArgs chunk = a;
    chunk.batch = std::min(a.batch - g0, kMaxZ);
    MatmulProblem<T> q = p;
    q.A += g0 * p.sa[0];
    q.B += g0 * p.sb[0];
    q.C += g0 * p.sc[0];
    const int64_t last = g0 + chunk.batch == a.batch ? k_last : 0;
    // a ragged last k tile: the RAGGED kernel
    const bool ragged = lay.fast && (a.K % Cfg::BK != 0 || last % Cfg::BK != 0);
    launch_gemm_with<Cfg, T>(ragged ? gemm_vec_kernel<T, MatmulProblem<T>, Cfg, true>
                                    : gemm_vec_kernel<T, MatmulProblem<T>, Cfg, false>,
                             q, chunk, lay, last);
  }
  return true;
}

// The 'mma' rung's pipelined kernel (gemm_tc_async_kernel) on TcLarge's tiles: a ring of 4 k tiles,
// 75-80 KiB of shared memory (sm_80 and newer allow it, at one or two blocks an SM).
template <typename T, bool BT>
void launch_tc_async(const MatmulProblem<T>& p, const GemmArgs& a) {
  constexpr int kStages = 4;
  constexpr size_t smem = size_t(kStages) * TcAsyncStage<TcLarge, BT>::BYTES;
  auto kernel = gemm_tc_async_kernel<T, TcLarge, BT, kStages>;
  static std::atomic<uint64_t> set_on{0};
  allow_smem(kernel, smem, set_on);
  kernel<<<gemm_grid<TcLarge>(a), TcLarge::THREADS, smem, c10::cuda::getCurrentCUDAStream()>>>(
      p, a.batch, a.M, a.N, a.K, epilogue_of<T>(a));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The 'mma' rung: TcLarge where its tiles fill the SMs, else TcSmall, whose matmuls split K over
// grid z where even its tiles fill at most half the SMs (chunks of at least two k tiles; the fp32
// partials summed by splitk_reduce, which runs the epilogue). The split is part of the rung, so a
// pinned 'mma' splits too: the ladder times the same kernel 'auto' runs. A 16-bit B whose rows run
// along n, every 16-byte vector of 8 columns aligned, is staged as it lies (gemm_tc.cuh's BT); where
// A and B are both read in aligned vectors and the large tiles fill the SMs, the pipelined kernel runs.
template <typename T, class P>
void launch_tc(const P& p, const GemmArgs& a) {
  constexpr bool matmul = std::is_same<P, MatmulProblem<T>>::value;  // splitk_reduce writes matmul outputs
  const int64_t sms = sm_count();
  auto tiles = [&](int64_t b) { return a.batch * ((a.M + b - 1) / b) * ((a.N + b - 1) / b); };
  bool bt = false;
  if constexpr (matmul && sizeof(T) == 2) {
    // rows of `base` (batch stride s0, row stride s_row, elements contiguous) in aligned 16-byte vectors
    auto vectors = [](const void* base, int64_t s0, int64_t s_row) {
      return reinterpret_cast<uintptr_t>(base) % 16 == 0 && s0 % 8 == 0 && s_row % 8 == 0;
    };
    bt = p.sb[2] == 1 && p.sb[1] != 1 && vectors(p.B, p.sb[0], p.sb[1]);
    const bool a_k = p.sa[2] == 1 && vectors(p.A, p.sa[0], p.sa[1]);
    const bool b_k = p.sb[1] == 1 && vectors(p.B, p.sb[0], p.sb[2]);
    if (a_k && (b_k || bt) && tiles(TcLarge::BM) >= sms) {
      if (bt) launch_tc_async<T, true>(p, a);
      else launch_tc_async<T, false>(p, a);
      return;
    }
  }
  auto go = [&](auto* cfg) {
    using Cfg = std::remove_pointer_t<decltype(cfg)>;
    constexpr int BK = Cfg::KBYTES / int(sizeof(T));
    const SplitPlan sp = plan_split(tiles(Cfg::BM), a.K, BK, a.batch, a.M, a.N, 2 * BK, matmul);
    dim3 grid = gemm_grid<Cfg>(a);
    grid.z = unsigned(std::min<int64_t>(a.batch * sp.splits, 65535));
    auto kernel = gemm_tc_kernel<T, P, Cfg, false>;
    if constexpr (matmul && sizeof(T) == 2) {
      if (bt) kernel = gemm_tc_kernel<T, P, Cfg, true>;
    }
    kernel<<<grid, Cfg::THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
        p, a.batch, a.M, a.N, a.K, epilogue_of<T>(a), int(sp.splits), sp.kper * BK,
        sp.splits > 1 ? sp.work.as<float>() : nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if constexpr (matmul) {
      if (sp.splits > 1) splitk_reduce<T, float>(sp.work.as<float>(), int(sp.splits), a);
    }
  };
  if (tiles(TcLarge::BM) >= sms) go(static_cast<TcLarge*>(nullptr));
  else go(static_cast<TcSmall*>(nullptr));
}

// What 'auto' runs off the Hopper path (routing/matmul.cu takes fp16/bf16 and TF32 matmuls to wgmma first,
// but for the small ones it would first have to copy): tensor cores for fp16, bf16 and TF32; for
// fp64 and strict fp32 'register', except fp32 matmul, which gets 'vectorized' unless its 128x128
// tiles would fill at most half the SMs where the 64x64 tiles of 'register' would fill more (skinny
// and small problems). Between half and all of the SMs, one vectorized block per SM still outruns
// the 4x as many 'register' blocks, each slower per multiply-add
// (docs/kernels/ladder.md#the-heuristic-simt_heuristic-and-its-reasons).
inline Algo auto_algo(const GemmArgs& a) {
  if (tensor_core_dtype(a)) return Algo::Mma;
  if (a.kind != Kind::Matmul || a.dtype != c10::ScalarType::Float) return Algo::Register;
  auto tiles = [&](int64_t bm, int64_t bn) { return a.batch * ((a.M + bm - 1) / bm) * ((a.N + bn - 1) / bn); };
  const int64_t sms = sm_count();
  return 2 * tiles(VecF32::BM, VecF32::BN) <= sms && tiles(Simt::BM, Simt::BN) > tiles(VecF32::BM, VecF32::BN)
             ? Algo::Register
             : Algo::Vectorized;
}

// Runs a problem with the rung it names (a.algo; 'wgmma' is handled in routing/matmul.cu). 'register'
// and 'mma' take every problem kind; the other SIMT rungs are matmul-only.
template <template <typename> class Problem, class Operands>
void launch_problem(const GemmArgs& a, const Operands& ops) {
  constexpr bool matmul = std::is_same<Operands, MatmulOperands>::value;
  const Algo algo = a.algo == Algo::Auto ? auto_algo(a) : a.algo;
  TORCH_CHECK(algo != Algo::Mma || a.dtype != c10::ScalarType::Double,
              "tileops.matmul: algo='mma' (tensor cores, alias 'wmma') takes float32 (run as TF32), float16 and "
              "bfloat16, got float64");
  TORCH_INTERNAL_ASSERT(Problem<float>::kFused || a.act == Act::None,
                        "tileops: internal error: an activation on a gradient problem");  // with_act_of drops it
  with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const Problem<T> p(ops);
    if (algo == Algo::Register) return launch_gemm<Simt, T>(p, a);
    if constexpr (!std::is_same<T, double>::value) {  // fp32 runs as TF32 whatever the flags say
      if (algo == Algo::Mma) return launch_tc<T>(p, a);
    }
    if constexpr (matmul) {
      switch (algo) {
        case Algo::Naive: return launch_gemm<Naive, T>(p, a);
        case Algo::Tiled: return launch_gemm<Tiled, T>(p, a);
        case Algo::TiledPadded: return launch_gemm<TiledPadded, T>(p, a);
        case Algo::Vectorized: launch_vectorized<T>(p, a); return;
        default: break;
      }
    }
    TORCH_CHECK(false, "tileops: internal error: no kernel for algo ", int(algo), " on this problem kind");
  });
}

// The last row of every conv table: the ladder's implicit GEMM on conv problem kind Problem.
template <template <typename> class Problem>
void ladder_conv_run(const GemmArgs& a) {
  launch_problem<Problem>(a, a.conv);
}

// The skinny family (gemm_skinny.cuh) where 'auto' takes it: fp32 and fp64 with M <= 16 (fp32 with
// TF32 allowed only where the skinny tensor-core family does not take it). False: it does not apply.
bool matmul_skinny(const GemmArgs& a);
// The skinny tensor-core family (gemm_skinny_tc.cuh, matmul_skinny_tc.cu) where 'auto' takes it:
// fp16 / bf16, and fp32 with TF32 allowed, with M <= 16 on compute capability 9.0, operands 16-byte
// readable. False: it does not. Asked before matmul_skinny.
bool matmul_skinny_tc(const GemmArgs& a);

}  // namespace cuda
}  // namespace tileops
