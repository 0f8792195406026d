// The vectorized rung's fp32 tiles fed by cp.async (sm_80+), as cuBLAS's fp32 kernels on Hopper
// are (sm80_xmma_gemm_f32f32_..._stage3): STAGES shared buffers of each k tile, filled straight
// from global memory, no operand staged in registers. The register-staged kernel
// (gemm_vec_kernel) holds the next tile in registers during the math and stores it after; with one
// or two warps a scheduler those loads stall it (NOTES 74). Here a k tile is waited for STAGES - 1
// tiles after its copies were issued, and each tile's first fragments are loaded before the last
// k step of the tile before it (two fragment register sets), so the barrier between tiles does
// not leave the warps waiting on shared-memory loads.
//
// Same warp and thread layout as the vectorized kernel (VecPlace, k-major buffers with rows
// padded by 16 bytes, vec_epilogue), so only the way k tiles arrive differs. Taken where both
// operands are VecLayout::fast; other layouts run the same tile on gemm_vec_kernel.
#pragma once
#include "launch.cuh"
#include "mma_sync.cuh"

namespace tileops {
namespace cuda {

// The next tile's barrier comes before the last k step of a tile, whose math then overlaps the
// next tile's first fragment loads (two fragment sets); the copies of the tile STAGES - 1 ahead
// are spread over a tile's k steps.
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int TM, int TN, int MIN_BLOCKS, int STAGES_>
struct VecAsyncConfig : VecConfig<BM, BN, BK, WARPS_M, WARPS_N, TM, TN, MIN_BLOCKS> {
  static constexpr int STAGES = STAGES_;
  static_assert(STAGES >= 2 && BK % 2 == 0, "a k tile in flight while another is read; fragment sets alternate");
  static constexpr int LDA = BM + 4, LDB = BN + 4;  // VecSmem<Cfg, float>'s rows
  static constexpr int A_TILE = BK * LDA, B_TILE = BK * LDB;
  static constexpr size_t SMEM = size_t(STAGES) * (A_TILE + B_TILE) * sizeof(float);
};

// 4 bytes global -> shared, asynchronously (cp.async.ca: 4-byte copies must go through L1), with
// the L2 fetching the whole 128-byte line (the next k tiles read the rest of it); zeros where bytes
// is 0 (src then not read).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}

// One operand's ROWS x BK tile into a k-major shared buffer [BK][ROWS + 4] by cp.async, with one
// pointer a thread (copy i lies a fixed step from copy 0, the step from the operand's strides, as
// CUTLASS's SIMT kernels address theirs), so the ring costs few registers beside the accumulators.
// KC (k has unit stride: a row-major A, a K-major B): 4-byte copies, transposed on the way; a
// warp copies 8 consecutive k of 4 rows (whole 32-byte runs of each row) to 32 distinct banks;
// copy i is THREADS / 8 rows below copy 0, at the same k. Rows past the operand are not copied
// (their outputs are never stored). Else (the rows have unit stride): 16-byte copies of 4 rows at
// one k, a warp's 512 bytes consecutive in both memories; copy i is THREADS / (ROWS / 4) k below
// copy 0, at the same rows (past the operand: its last vector). k past K lands as zeros (nothing
// read: the copy's source is then the operand's first element).
template <int ROWS, int BK, int THREADS, bool KC>
struct AsyncTileCopy {
  static constexpr int LD = ROWS + 4, VEC = KC ? 1 : 4;
  static constexpr int COPIES = ROWS * BK / (VEC * THREADS);  // per thread per k tile
  static constexpr int RSTEP = KC ? THREADS / 8 : 0, KSTEP = KC ? 0 : THREADS / (ROWS / 4);  // copy i - copy 0
  static_assert(COPIES >= 1 && COPIES * VEC * THREADS == ROWS * BK && ROWS % 4 == 0 && (!KC || BK == 8) &&
                    (KC || THREADS % (ROWS / 4) == 0) && COPIES <= 32 && BK % COPIES == 0,
                "a tile must split evenly over the threads and its k steps, copy i a fixed step from copy 0");
  const float* src;    // copy 0 of the next k tile
  const float* cur;    // the copy issued last
  const float* first;  // the operand's first element: a valid address for zero fills
  int64_t step;        // copy i - copy 0, elements
  uint32_t dst;        // copy 0's byte offset in a buffer
  int k0;              // copy 0's k in the tile
  uint32_t row_ok;     // KC: bit i = copy i's row inside the operand

  __device__ __forceinline__ void init(const float* base, int64_t rs, int64_t ks, int64_t row0, int64_t rows,
                                       int tid) {
    const int r = KC ? tid / 8 : tid % (ROWS / 4) * 4;
    k0 = KC ? tid % 8 : tid / (ROWS / 4);
    dst = uint32_t((k0 * LD + r) * sizeof(float));
    first = base;
    uint32_t ok = 0;
    if constexpr (KC) {
#pragma unroll
      for (int i = 0; i < COPIES; ++i) ok |= uint32_t(row0 + r + i * RSTEP < rows) << i;
      src = base + (row0 + r) * rs + k0;
      step = RSTEP * rs;
    } else {
      src = base + (row0 + r < rows ? row0 + r : rows - 4) + k0 * ks;
      step = KSTEP * ks;
    }
    // kept as a mask: ptxas would otherwise compare every copy's 64-bit row again on every tile
    asm("mov.b32 %0, %1;" : "=r"(row_ok) : "r"(ok));
  }
  // Copy i of the next k tile into the buffer at shared address buf (klim of its k inside K, or
  // BK), copies in order 0, 1, ... (cur walks them); the last one moves src on by `tile_step`.
  template <bool RAGGED>
  __device__ __forceinline__ void copy(int i, uint32_t buf, int klim, int64_t tile_step) {
    cur = i == 0 ? src : cur + step;
    const uint32_t d = buf + dst + uint32_t(i * (KC ? RSTEP : KSTEP * LD) * sizeof(float));
    const int k = k0 + i * KSTEP;
    if (!RAGGED || klim >= BK) {  // a whole k tile: plain copies
      if constexpr (KC) {
        if ((row_ok >> i) & 1) cp_async4(d, cur);
      } else {
        cp_async16(d, cur);
      }
    } else {  // the ragged last one: k past K lands as zeros
      const bool in = k < klim;
      if constexpr (KC) {
        if ((row_ok >> i) & 1) cp_async4(d, in ? cur : first, in ? 4 : 0);
      } else {
        cp_async16(d, in ? cur : first, in ? 16 : 0);
      }
    }
    if (i == COPIES - 1) src += tile_step;
  }
};

// KA / KB: A's / B's k has unit stride (VecLayout's kc). k_last as gemm_vec_kernel's. RAGGED: K or
// k_last is not a multiple of BK, so the last k tile zero-fills past K (a kernel of its own, as
// gemm_vec_kernel's, so that the others' copies carry no such test).
template <class Cfg, bool KA, bool KB, bool RAGGED>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MIN_BLOCKS)
    gemm_vec_async_kernel(MatmulProblem<float> p, int64_t M, int64_t N, int64_t K_all, Epilogue<float> epi,
                          bool c_vec, int64_t k_last) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, S = Cfg::STAGES, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int LDA = Cfg::LDA, LDB = Cfg::LDB, LY = Cfg::LY, LX = Cfg::LX;
  extern __shared__ __align__(16) float smem[];
  float* const sa = smem;
  float* const sb = smem + S * Cfg::A_TILE;

  const int tid = threadIdx.x;
  const VecPlace<Cfg> at(tid);
  const int64_t m0 = int64_t(blockIdx.x) * BM, n0 = int64_t(blockIdx.y) * BN, g = blockIdx.z;
  const int64_t K = k_last > 0 && blockIdx.z == gridDim.z - 1 ? k_last : K_all;
  const int64_t ktiles = (K + BK - 1) / BK;

  // A: rows m, row stride sa[1], k stride sa[2]; B: rows n, row stride sb[2], k stride sb[1]
  AsyncTileCopy<BM, BK, Cfg::THREADS, KA> ca;
  AsyncTileCopy<BN, BK, Cfg::THREADS, KB> cb;
  ca.init(p.A + g * p.sa[0], p.sa[1], p.sa[2], m0, M, tid);
  cb.init(p.B + g * p.sb[0], p.sb[2], p.sb[1], n0, N, tid);
  // k tile t's copies into buffer t % S, copy i of each operand at step i * BK / COPIES of the
  // tile before (all at once for the first S - 1 tiles); one commit group per tile, empty past
  // the last, so that a wait's count of groups in flight is the same on every tile
  int issued = 0, next_buf = 0;
  const int nk = int(ktiles);
  auto issue_step = [&](int kk, bool all) {
    if (issued >= nk) return;
    const int klim = int(K - int64_t(issued) * BK < BK ? K - int64_t(issued) * BK : BK);
    const uint32_t ba = smem_u32(sa + next_buf * Cfg::A_TILE), bb = smem_u32(sb + next_buf * Cfg::B_TILE);
#pragma unroll
    for (int i = 0; i < decltype(ca)::COPIES; ++i)
      if (all || i * BK / decltype(ca)::COPIES == kk) ca.template copy<RAGGED>(i, ba, klim, BK * p.sa[2]);
#pragma unroll
    for (int i = 0; i < decltype(cb)::COPIES; ++i)
      if (all || i * BK / decltype(cb)::COPIES == kk) cb.template copy<RAGGED>(i, bb, klim, BK * p.sb[1]);
  };
  auto commit = [&] {
    ++issued;
    next_buf = next_buf + 1 == S ? 0 : next_buf + 1;
    cp_async_commit();
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

  float af[2][TM], bf[2][TN];
  auto fragments = [&](int set, int buf, int kk) {
    const float* as = sa + buf * Cfg::A_TILE + kk * LDA + at.a_off;
    const float* bs = sb + buf * Cfg::B_TILE + kk * LDB + at.b_off;
#pragma unroll
    for (int i = 0; i < TM / 4; ++i) lds4(as + i * (LY * 4), af[set] + 4 * i);
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) lds4(bs + j * (LX * 4), bf[set] + 4 * j);
  };

  const auto multiply = [&](int set) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] += af[set][i] * bf[set][j];
  };
  // Tiles 0 .. S - 2 first; tile kt + S - 1 is copied during tile kt, into the buffer of tile
  // kt - 1, which every thread has read by then (its last fragments came before the barrier of
  // tile kt - 1's last step).
  for (int s = 0; s < S - 1; ++s) {
    issue_step(0, true);
    commit();
  }
  cp_async_wait<S - 2>();  // tile 0 landed (this thread's copies) ...
  __syncthreads();         // ... and every thread's
  fragments(0, 0, 0);
  int buf = 0;  // tile kt's
  for (int kt = 0; kt < nk; ++kt, buf = buf + 1 == S ? 0 : buf + 1) {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      issue_step(kk, false);
      // the fragments of step kk + 1 (of the next tile's first step at the last) load while step
      // kk multiplies
      if (kk < BK - 1) {
        fragments((kk + 1) & 1, buf, kk + 1);
      } else {
        commit();
        if (kt + 1 < nk) {
          cp_async_wait<S - 2>();  // tile kt + 1 landed (tiles up to kt + S - 1 are issued) ...
          __syncthreads();         // ... for every thread
          fragments(0, buf + 1 == S ? 0 : buf + 1, 0);
        }
      }
      multiply(kk & 1);
    }
  }
  cp_async_wait<0>();  // nothing of ours may still write shared memory when the block exits

  const int m_lim = int(M - m0 < BM ? M - m0 : BM), n_lim = int(N - n0 < BN ? N - n0 : BN);
  float* const c0 = p.C + g * p.sc[0] + m0 * p.sc[1] + n0 * p.sc[2];
  vec_epilogue<float, Cfg>(
      acc, epi, at, m_lim, n_lim, [&](int mi) { return c0 + mi * p.sc[1]; }, p.sc[2], c_vec,
      [&](int nj) { return p.bias_index(g, n0 + nj); });
}

// Launches Cfg on the cp.async kernel where both operands take 16-byte vectors
// (VecLayout::fast), else on gemm_vec_kernel (launch_vectorized). Same contract as that.
template <class Cfg>
bool launch_vec_async(const MatmulProblem<float>& p, const GemmArgs& a, int64_t k_last = 0) {
  const VecLayout lay = vec_layout(a, int(sizeof(float)));
  if (!lay.fast) return launch_vectorized<float, Cfg>(p, a, k_last);
  if (k_last > 0 && k_last % 4 != 0) return false;
  using Kernel = void (*)(MatmulProblem<float>, int64_t, int64_t, int64_t, Epilogue<float>, bool, int64_t);
  static const Kernel kernels[2][2][2] = {
      {{gemm_vec_async_kernel<Cfg, false, false, false>, gemm_vec_async_kernel<Cfg, false, false, true>},
       {gemm_vec_async_kernel<Cfg, false, true, false>, gemm_vec_async_kernel<Cfg, false, true, true>}},
      {{gemm_vec_async_kernel<Cfg, true, false, false>, gemm_vec_async_kernel<Cfg, true, false, true>},
       {gemm_vec_async_kernel<Cfg, true, true, false>, gemm_vec_async_kernel<Cfg, true, true, true>}}};
  static std::atomic<uint64_t> set_on[2][2][2]{};
  constexpr int64_t kMaxZ = 65535;
  for (int64_t g0 = 0; g0 < a.batch; g0 += kMaxZ) {
    GemmArgs chunk = a;
    chunk.batch = std::min(a.batch - g0, kMaxZ);
    MatmulProblem<float> q = p;
    q.A += g0 * p.sa[0];
    q.B += g0 * p.sb[0];
    q.C += g0 * p.sc[0];
    const int64_t last = g0 + chunk.batch == a.batch ? k_last : 0;
    const bool ragged = a.K % Cfg::BK != 0 || last % Cfg::BK != 0;
    const Kernel kernel = kernels[lay.a.kc][lay.b.kc][ragged];
    if constexpr (Cfg::SMEM > 48 * 1024) allow_smem(kernel, Cfg::SMEM, set_on[lay.a.kc][lay.b.kc][ragged]);
    kernel<<<gemm_grid<Cfg>(chunk), Cfg::THREADS, Cfg::SMEM, at::cuda::getCurrentCUDAStream()>>>(
        q, chunk.M, chunk.N, chunk.K, epilogue_of<float>(chunk), lay.c_vec, last);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return true;
}

}  // namespace cuda
}  // namespace tileops
