// Hopper family (sm_90a; fp16/bf16, and fp32 as TF32): TMA loads into 128B-swizzled shared memory,
// completing on mbarriers, a STAGES-deep ring; one producer warpgroup (one thread issues
// the copies) and two consumer warpgroups that each run wgmma on 64 rows of the 128-row
// tile. Each consumer keeps one wgmma group in flight and releases a stage as soon as the
// group reading it retires. The epilogue (shared functor) goes through shared memory: C by TMA
// stores where it can (Store::Tma), else 16-byte vectors along rows. That kernel runs one
// output tile per block; gemm_sm90_persistent_kernel (persistent.cuh) walks many per
// block, so loads and epilogues of consecutive tiles overlap.
//
// A is K-major (row-major M x K) or, for the 16-bit types, MN-major (column-major, e.g. dY^T of
// a weight gradient). B is K-major (B^T row-major, e.g. a linear weight) or, for the 16-bit
// types, MN-major (row-major K x N). MN-major operands are read through wgmma's transpose bits. TMA zero-fills
// tile tails. A k tile is 128 bytes of every row (64 16-bit elements, 32 fp32 ones), so the
// swizzle, descriptors and stage sizes are the same for every element type.
//
// TF32: wgmma reads fp32 words and keeps their top 19 bits (truncation). To round to nearest
// as TF32 is defined (and as cuBLAS and the mma.sync rung do), the host hands the one-tile kernel
// operands already rounded (host.cu); the persistent kernels take B rounded and round A in
// registers (load_a_tf32: wgmma with A from registers), so A, the activations of a linear, is read
// in place. Rounding landed stages in shared memory instead was measured slower every way it was
// tried (docs/performance.md#tf32): the extra shared-memory reads and writes slow the wgmmas' own
// reads.
//
// This file: split-K, the one-tile kernel (gemm_sm90_tile / gemm_sm90_kernel) and the
// strided data gradient's phases kernel; the persistent kernels are in persistent.cuh.
#pragma once
#include "cuda/sm90/primitives.cuh"
#include "cuda/sm90/producers.cuh"
#include "cuda/sm90/epilogue.cuh"

namespace tileops {
namespace cuda {
namespace sm90 {

// Split-K: blockIdx.z = g * splits + split; each split runs k tiles [split * kt_per_split,
// +kt_per_split) and writes its fp32 partial tile to partial[blockIdx.z] (M x N, dense); a
// second kernel (splitk_reduce) sums the splits in a fixed order, so results are deterministic.
// (Summing them in the last split to arrive, in-kernel, measured slower; so did summing a
// cluster's splits over distributed shared memory:
// docs/kernels/splitk.md#tried-and-lost-summing-inside-the-gemm. The reduce is launched as this
// kernel's programmatic dependent instead, which hides most of its launch.)
struct SplitK {
  int splits = 1, kt_per_split = 0;
  float* partial = nullptr;  // nullptr: no split, the epilogue writes C
};

// Gather::ConvFwd (implicit-GEMM conv2d forward): A is not read by TMA but gathered from a
// channels_last input (conv.x, C % bk<T> == 0, so one k tile is bk channels of one (r, s) tap)
// in the 128B-swizzled layout TMA would have produced; B (weight rows, K-major) by TMA.
// Gather::ConvWgrad (implicit-GEMM weight gradient, dW^T[RSC, K] = cols(x)^T . dY, K = N*P*Q):
// A gathered from x as MN-major atoms (C % 64 == 0), B = dY rows by TMA, MN-major.
// The Im2col variants: the same A tiles by TMA im2col loads (tm_a an im2col map of x).
//
// A_MN_MAJOR (16-bit types): A is given transposed (column-major M x K, e.g. dY^T of a weight
// gradient) and read as MN-major tiles, as B_MN_MAJOR reads B: two 64-row atoms per stage.
//
// p supplies C's index map (row_c, c, bias_index); batch_a / batch_b: 1 when broadcast.
//
// gemm_sm90_tile is one block's output tile: z stands for blockIdx.z (batch entry and split), b_k0
// is B's first column (conv_im2col_producer); tm_c: C's map where store is Store::Tma.
// gemm_sm90_kernel and gemm_sm90_phases_kernel launch it.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// ACTS: false where the tile is never given an activation (the data gradient's phases), as a weight
// gradient's gather (G) never is: only the identity's epilogue is instantiated then.
template <typename T, int BN, bool B_MN_MAJOR, int STAGES, Gather G, bool A_MN_MAJOR, BLoad BL = BLoad::Tma,
          bool ACTS = true>
__device__ __forceinline__ void gemm_sm90_tile(const CUtensorMap& tm_a, const CUtensorMap& tm_b,
                                               const CUtensorMap* tm_c, const MatmulProblem<T>& p, int64_t M,
                                               int64_t N, int64_t K, const Epilogue<T>& epi, int batch_a,
                                               int batch_b, Store store, const SplitK& sk, const ConvOperands& conv,
                                               int z, int b_k0) {
  static_assert(!(B_MN_MAJOR && kTf32<T>), "wgmma .tf32 reads K-major B only");
  // CONV: A comes from a conv input; GATHER: by the producer warpgroup's cp.async copies
  constexpr bool CONV = G != Gather::None, GATHER = G == Gather::ConvFwd || G == Gather::ConvWgrad;
  constexpr bool FUSED = ACTS && G != Gather::ConvWgrad && G != Gather::ConvWgradIm2col;  // with_act_if
  // B_REGS: the producer's 128 threads load B (tf32_b_producer), and keep their registers
  constexpr bool B_REGS = BL != BLoad::Tma;
  constexpr bool REBALANCE = !GATHER && !B_REGS && blocks_per_sm<BN, STAGES, T>() == 1;
  static_assert(!B_REGS || (kTf32<T> && G == Gather::None && !B_MN_MAJOR), "B through registers: TF32 GEMMs");
  static_assert(!(CONV && kTf32<T>), "the conv gather copies x as it is; TF32 needs rounded operands");
  static_assert(!(A_MN_MAJOR && kTf32<T>), "MN-major A: 16-bit types only");
  static_assert((G != Gather::ConvWgrad && G != Gather::ConvWgradIm2col) || (A_MN_MAJOR && B_MN_MAJOR),
                "the weight-gradient gather fills MN-major A atoms and reads dY as MN-major B");
  static_assert(!((G == Gather::ConvFwd || G == Gather::ConvFwdIm2col) && A_MN_MAJOR) &&
                    !(G == Gather::ConvFwd && B_MN_MAJOR),
                "the forward gather fills K-major A; MN-major B (a flipped weight) only with im2col loads");
  using F = std::conditional_t<std::is_same<T, c10::BFloat16>::value, __nv_bfloat16,
                               std::conditional_t<kTf32<T>, float, __half>>;
  constexpr int BK = bk<T>, KSTEP = 32 / int(sizeof(T));  // one wgmma consumes 32 bytes of each row
  extern __shared__ uint8_t smem_raw[];
  // 128B-swizzled tiles must start on 1024-byte boundaries; offsetting the __shared__ array
  // (not casting an integer) keeps its accesses shared-memory loads and stores
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  T* As = reinterpret_cast<T*>(smem);
  T* Bs = As + STAGES * BM * BK;
  uint64_t* full = reinterpret_cast<uint64_t*>(Bs + STAGES * BN * BK);
  uint64_t* empty = full + STAGES;

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, g = z / sk.splits;
  const int ktiles_all = int((K + BK - 1) / BK);
  const int kt0 = sk.partial ? (z % sk.splits) * sk.kt_per_split : 0;
  const int ktiles = sk.partial ? min(sk.kt_per_split, ktiles_all - kt0) : ktiles_all;  // >= 1 by construction
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], GATHER ? 1 + 128 : B_REGS ? 1 + 4 : 1);  // + one per gathering thread / loading warp
      mbar_init(&empty[s], 2);  // one arrival per consumer warpgroup
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {  // producer
    if constexpr (G == Gather::ConvFwd) {
      conv_fwd_producer<T, BN, STAGES>(conv, tm_b, As, Bs, full, empty, M, m0, n0, kt0, ktiles, t);
    } else if constexpr (G == Gather::ConvWgrad) {
      conv_wgrad_producer<T, BN, STAGES>(conv, tm_b, As, Bs, full, empty, M, K, m0, n0, kt0, ktiles, t);
    } else if constexpr (B_REGS) {
      // k tiles in flight per thread: 64 registers of them with one block per SM, 32 with two
      constexpr int FIT = (blocks_per_sm<BN, STAGES, T>() == 1 ? 64 : 32) / (BN / 4), DEPTH = FIT > 1 ? FIT : 1;
      const int gb = batch_b > 1 ? g : 0;
      tf32_b_producer<BN, STAGES, DEPTH, BL>(tm_a, As, Bs, full, empty, p.B + gb * p.sb[0], p.sb[1], p.sb[2], N, K, m0,
                                             n0, batch_a > 1 ? g : 0, kt0, ktiles, t);
    } else {  // TMA alone, one thread
      if constexpr (REBALANCE) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
      if (t == 0) {
        if constexpr (G == Gather::ConvFwdIm2col) {
          conv_im2col_producer<T, BN, STAGES, B_MN_MAJOR>(conv, tm_a, tm_b, As, Bs, full, empty, m0, n0, kt0, ktiles,
                                                          b_k0);
        } else if constexpr (G == Gather::ConvWgradIm2col) {
          conv_wgrad_im2col_producer<T, BN, STAGES>(conv, tm_a, tm_b, As, Bs, full, empty, M, m0, n0, kt0, ktiles);
        } else {
          const int ga = batch_a > 1 ? g : 0, gb = batch_b > 1 ? g : 0;
          tma_producer<STAGES>(full, empty, ktiles, (BM + BN) * BK * sizeof(T), [&](int kt, int s) {
            const int k = (kt0 + kt) * BK;
            tma_load_tile<BM, BK, A_MN_MAJOR>(As + s * BM * BK, &tm_a, &full[s], m0, k, ga);
            tma_load_tile<BN, BK, B_MN_MAJOR>(Bs + s * BN * BK, &tm_b, &full[s], n0, k, gb);
          });
        }
      }
    }
  } else {  // consumers: warpgroup 1 -> rows 0..63, warpgroup 2 -> rows 64..127
    if constexpr (REBALANCE) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.f;
    const bool has_bias = epi.bias != nullptr && !sk.partial;
    BiasTile<BN, T> bias;
    if (has_bias) bias.load(epi, p, g, n0, N, t);
    const T* a_half = As + (wg - 1) * 64 * BK;
    if constexpr (kTf32<T>) {
      // TF32: A's fragments rounded in registers (load_a_tf32), so the host need not copy a rounded
      // A first; in two register sets, as the persistent kernels hold them: k tile kt + 1's are
      // loaded into one while the wgmmas of kt read the other, once the group that read it retired.
      // Two blocks per SM (bn64x2) leave a thread too few registers for two sets (ptxas C7512:
      // wgmma serialized): one set, refilled once kt's group retired (wait_group 0).
      constexpr int SETS = blocks_per_sm<BN, STAGES, T>() == 1 ? 2 : 1;
      uint32_t af[SETS][BK / KSTEP][4];
      auto acquire = [&](auto u, int kt) {
        const int s = kt % STAGES;
        mbar_wait(&full[s], (kt / STAGES) & 1);
        if constexpr (B_REGS) fence_proxy_async_smem();  // see tf32_b_producer
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; ++kk)
          load_a_tf32(af[decltype(u)::value][kk], a_half + s * BM * BK, kk, t / 32, t % 32);
      };
      auto step = [&](auto u, int kt) {
        constexpr int U = decltype(u)::value;
        const int s = kt % STAGES;
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; ++kk)
          wgmma_rs<BN>(d, af[U][kk], operand_desc<false, KSTEP>(Bs + s * BN * BK, kk));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        if constexpr (SETS == 1) {  // kt's group retired: its stage and the one set are free
          asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
          if (t == 0) mbar_arrive(&empty[s]);
        } else {  // kt - 1's group retired
          asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
          if (kt > 0 && t == 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
        }
        if (kt + 1 < ktiles) acquire(std::integral_constant<int, (U + 1) % SETS>{}, kt + 1);
      };
      acquire(std::integral_constant<int, 0>{}, 0);
      for (int kt = 0; kt < ktiles; kt += 2) {  // in pairs: each k tile's register set is a constant
        step(std::integral_constant<int, 0>{}, kt);
        if (kt + 1 < ktiles) step(std::integral_constant<int, 1 % SETS>{}, kt + 1);
      }
    } else {
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(&full[s], (kt / STAGES) & 1);
        if constexpr (GATHER) fence_proxy_async_smem();  // see conv_producer
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / KSTEP; ++kk) {
          // MN-major A: each consumer's 64 rows are one atom
          const uint64_t da = operand_desc<A_MN_MAJOR, KSTEP>(a_half + s * BM * BK, kk);
          const uint64_t db = operand_desc<B_MN_MAJOR, KSTEP>(Bs + s * BN * BK, kk);
          wgmma<BN, A_MN_MAJOR ? 1 : 0, B_MN_MAJOR ? 1 : 0>(d, da, db, static_cast<F*>(nullptr));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // the previous stage's group retired
        if (kt > 0 && t == 0) mbar_arrive(&empty[(kt - 1) % STAGES]);
      }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    const int warp = t / 32, lane = t % 32;
    // accumulator layout of m64nN: warp w holds rows 16w + lane/4 (+8), n8 block j holds
    // columns 8j + 2*(lane%4) (+1)
    if (sk.partial) {  // split-K: raw fp32 partials; each quad of lanes writes one 32-byte sector
      float* out = sk.partial + int64_t(z) * M * N;
      const bool cols = store == Store::Cols;  // column-major (N x M): 8 lanes' rows fill a sector
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t m = m0 + (wg - 1) * 64 + warp * 16 + lane / 4 + half * 8;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int64_t n = n0 + j * 8 + (lane % 4) * 2;
          const float v0 = d[j * 4 + half * 2], v1 = d[j * 4 + half * 2 + 1];
          if (cols) {
            if (n < N) out[n * M + m] = v0;
            if (n + 1 < N) out[(n + 1) * M + m] = v1;
          } else if (n + 1 < N && N % 2 == 0) {
            *reinterpret_cast<float2*>(out + m * N + n) = make_float2(v0, v1);
          } else {
            if (n < N) out[m * N + n] = v0;
            if (n + 1 < N) out[m * N + n + 1] = v1;
          }
        }
      }
      return;
    }

    // Epilogue. Both consumers must be done with the stages before they become staging space.
    // Without a residual the staged values are final (activated, cast to T); with one they are
    // the fp32 pre-activation (+ bias), and the store loop adds the residual, read 16 bytes at a
    // time at the output's offset, before the activation: one rounding, as torch's reference.
    asm volatile("bar.sync 1, 256;" ::: "memory");
    if constexpr (sizeof(T) == 2) {
      if (store == Store::Cols) {  // no residual, no bias (cols_stores)
        constexpr int RP = 64 + 8;
        T* cstage = As + (wg - 1) * BN * RP;
        with_act_if<FUSED>(epi.act, [&](auto act) {
          stage_fragment<decltype(act)::value, BN, ColumnStaging<RP>, false>(d, cstage, 0, nullptr, false, epi, t);
        });
        asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
        store_columns<64, BN, RP>(cstage, p, g, m0 + (wg - 1) * 64, n0, M, N, t);
        return;
      }
    }
    const bool vec_store = store == Store::Rows;
    constexpr int CP = BN + 8;  // padded pitch: the fragment writes below hit 32 distinct banks
    const bool has_res = epi.residual != nullptr;
    T* stage = As + (wg - 1) * 64 * CP;
    float* fstage = reinterpret_cast<float*>(As) + (wg - 1) * 64 * CP;
    float* bias_s = reinterpret_cast<float*>(As) + 2 * 64 * CP + (wg - 1) * BN;  // past either staging
    if (has_bias) {
      bias.stage(bias_s, t);
      asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
    }
    if (store == Store::Tma) {  // no residual (the host's condition); the stages' bytes are free
      using Staging = SwizzledStaging<64, int(sizeof(T))>;
      T* sstage = As + (wg - 1) * 64 * BN;  // 1 KiB aligned: BN * 64 * sizeof(T) bytes a warpgroup
      with_act_if<FUSED>(epi.act, [&](auto act) {
        stage_fragment<decltype(act)::value, BN, Staging, false>(d, sstage, 0, bias_s, has_bias, epi, t);
      });
      fence_proxy_async_smem();  // staged writes, visible to TMA
      asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
      if (t == 0) {
        tma_store_staged<64, BN>(sstage, tm_c, n0, m0 + (wg - 1) * 64, g);
        // the block's shared memory must outlive the stores' reads of it
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      }
      return;
    }
    if (has_res) {
      stage_fragment<Act::None, BN, PaddedStaging<CP>, true>(d, fstage, 0, bias_s, has_bias, epi, t);
    } else {
      with_act_if<FUSED>(epi.act, [&](auto act) {
        stage_fragment<decltype(act)::value, BN, PaddedStaging<CP>, false>(d, stage, 0, bias_s, has_bias, epi, t);
      });
    }
    asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");  // this warpgroup's staging is written
    constexpr int VEC = 16 / int(sizeof(T));  // elements per 16-byte store
    const bool interior = vec_store && m0 + BM <= M && n0 + BN <= N;
    if (!has_res) {
      store_staged<64, BN, PaddedStaging<CP>>(stage, p, g, m0 + (wg - 1) * 64, n0, M, N, vec_store, interior, t);
      return;
    }
    with_act_if<FUSED>(epi.act, [&](auto act) {  // residual: vec_store also means the residual is 16-byte aligned
      constexpr Act A = decltype(act)::value;
#pragma unroll 2
      for (int i = t; i < 64 * (BN / VEC); i += 128) {
        const int r = i / (BN / VEC), c = (i % (BN / VEC)) * VEC;
        const int64_t m = m0 + (wg - 1) * 64 + r, n = n0 + c;
        if (m >= M) continue;
        const auto row = p.row_c(g, m);
        const float* src = fstage + r * CP + c;
        if (interior || (vec_store && n + VEC <= N)) {
          T* dst = p.c(row, n);
          const uint4 rv = *reinterpret_cast<const uint4*>(epi.residual + (dst - epi.out_base));
          float f[VEC];
#pragma unroll
          for (int q = 0; q < VEC / 4; ++q)
            *reinterpret_cast<float4*>(f + 4 * q) = *reinterpret_cast<const float4*>(src + 4 * q);
          const T* re = reinterpret_cast<const T*>(&rv);
          uint4 ov;
          T* oe = reinterpret_cast<T*>(&ov);
#pragma unroll
          for (int e = 0; e < VEC; ++e) oe[e] = epi.template finish<A>(f[e] + static_cast<float>(re[e]));
          *reinterpret_cast<uint4*>(dst) = ov;
        } else {
          for (int e = 0; e < VEC && n + e < N; ++e) {
            T* dst = p.c(row, n + e);
            *dst = epi.template finish<A>(src[e], dst);
          }
        }
      }
    });
  }
}
#endif

template <typename T, int BN, bool B_MN_MAJOR, int STAGES, Gather G = Gather::None, bool A_MN_MAJOR = false,
          BLoad BL = BLoad::Tma>
__global__ void __launch_bounds__(THREADS, (blocks_per_sm<BN, STAGES, T>()))
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
                     const __grid_constant__ CUtensorMap tm_c, MatmulProblem<T> p, int64_t M, int64_t N, int64_t K,
                     Epilogue<T> epi, int batch_a, int batch_b, Store store, SplitK sk, ConvOperands conv) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  griddep_wait();  // a dependent launch (launch_sm90): the kernel before it (a transposition) is done
  // and a split's reduce, launched as this grid's dependent, may be scheduled now: its blocks wait
  // for this grid's end at griddep_wait with their launch done (a dependent grid starts only once
  // every block of this one has started, so it never takes an SM this grid still needs)
  if (sk.partial) griddep_launch_dependents();
  gemm_sm90_tile<T, BN, B_MN_MAJOR, STAGES, G, A_MN_MAJOR, BL>(tm_a, tm_b, &tm_c, p, M, N, K, epi, batch_a, batch_b,
                                                               store, sk, conv, int(blockIdx.z), 0);
#else
  __trap();  // built without sm_90a: the host never launches this
#endif
}

// A strided data gradient's phases (../conv/dgrad_phases.h), each a forward conv of dy into a strided view of
// dx, in one launch: blockIdx.z is the phase, blockIdx.x its row tile (the grid is as wide as the
// tallest phase; the others' blocks past their rows return at once). Each phase's A by its own
// im2col map (its padding and output size differ); B is one flipped weight [C, taps, K] whose
// taps stand phase after phase, so a phase's B is its columns from b_k0 on. The phases come
// heaviest first (most taps): blocks start in blockIdx order, so the short ones fill the tail.
constexpr int kMaxPhases = 4;
template <typename T>
struct DgradPhaseArgs {
  CUtensorMap a;        // im2col map of dy as this phase's forward reads it
  ConvOperands conv;    // the phase's forward conv
  MatmulProblem<T> p;   // where its output rows go (a strided view of dx)
  int64_t M = 0, K = 0;
  int b_k0 = 0;
};
template <typename T>
struct DgradPhases {
  DgradPhaseArgs<T> at[kMaxPhases];
};
// A phase of K = 0 (no tap reaches it) is zeros: the blockIdx.y == 0 block of each row tile
// stores them, every column, without the ring (a GEMM tile's barriers, staging and syncs per
// 16 KB of zeros measured slower than filling dx before the launch).
template <typename T, int BN, int STAGES>
__global__ void __launch_bounds__(THREADS, (blocks_per_sm<BN, STAGES, T>()))
    gemm_sm90_phases_kernel(const __grid_constant__ DgradPhases<T> phases, const __grid_constant__ CUtensorMap tm_b,
                            int64_t N, Epilogue<T> epi, bool vec_store) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(sizeof(T) == 2, "16-bit types: zeros are stored as bits");
  griddep_wait();  // a dependent launch (launch_phases) after the weight's flipped copy
  const DgradPhaseArgs<T>& f = phases.at[blockIdx.z];
  const int m0 = blockIdx.x * BM;
  if (m0 >= f.M) return;  // before any barrier: the whole block leaves
  if (f.K == 0) {
    if (blockIdx.y > 0) return;
    constexpr int VEC = 8;  // elements per 16-byte store
    const int chunks = int((N + VEC - 1) / VEC), rows = int(f.M - m0 < BM ? f.M - m0 : BM);
    for (int i = threadIdx.x; i < rows * chunks; i += THREADS) {
      const int r = i / chunks, n = (i % chunks) * VEC;
      T* row = f.p.row_c(0, m0 + r);
      if (vec_store && n + VEC <= N) {
        *reinterpret_cast<uint4*>(f.p.c(row, n)) = make_uint4(0, 0, 0, 0);
      } else {
        for (int e = 0; e < VEC && n + e < N; ++e) *reinterpret_cast<uint16_t*>(f.p.c(row, n + e)) = 0;
      }
    }
    return;
  }
  // a data gradient: never an activation (ACTS false)
  gemm_sm90_tile<T, BN, false, STAGES, Gather::ConvFwdIm2col, false, BLoad::Tma, false>(
      f.a, tm_b, nullptr, f.p, f.M, N, f.K, epi, 1, 1, vec_store ? Store::Rows : Store::Elements, SplitK{}, f.conv, 0,
      f.b_k0);
#else
  __trap();  // built without sm_90a: the host never launches this
#endif
}

}  // namespace sm90
}  // namespace cuda
}  // namespace tileops
