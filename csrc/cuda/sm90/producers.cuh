// The Hopper family's producers (see kernels.cuh): the conv gathers by cp.async (ConvFwd,
// ConvWgrad), the TMA producer ring, the im2col producers (ConvFwdIm2col, ConvWgradIm2col), and
// TF32's B through the producer warpgroup's registers.
#pragma once
#include "cuda/sm90/primitives.cuh"

namespace tileops {
namespace cuda {
namespace sm90 {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The conv producers (see gemm_sm90_kernel): each of the producer warpgroup's 128 threads
// gathers its share of stage kt's A tile with cp.async (zeros where a tap falls into padding or
// past the problem), thread 0 loads B by TMA. Each thread then hands its copies to the stage's
// full barrier (cp.async.mbarrier.arrive.noinc: one arrival once they land) and goes on to the
// next stage without waiting, so the whole ring can be in flight; the consumers fence the
// proxies after the wait (cp.async writes are generic-proxy, wgmma reads the async proxy).
// Waiting for each thread's own copies and fencing there instead held the ring to a few stages
// (docs/kernels/conv-sm90.md#how-a-arrives). Eight lanes share a 128-byte
// row: lane group t / 8 copies 16-byte chunk t % 8 of rows t / 8 + 16 i, so one warp instruction
// moves four whole lines (a thread per row moved 32 half sectors: twice the L2 traffic, eight
// times the requests). Chunk j of row r lands at chunk j ^ (r % 8), as TMA's 128B swizzle puts
// it, and r % 8 = (t / 8) % 8.
template <typename T, int BN, int STAGES, bool B_MN, typename GatherStage>
__device__ __forceinline__ void conv_producer(const CUtensorMap& tm_b, T* Bs, uint64_t* full, uint64_t* empty,
                                              int n0, int kt0, int ktiles, int t, GatherStage&& gather) {
  constexpr int BK = bk<T>;
  for (int kt = 0; kt < ktiles; ++kt) {
    const int st = kt % STAGES;
    if (kt >= STAGES) mbar_wait(&empty[st], ((kt / STAGES) - 1) & 1);
    if (t == 0) {
      mbar_expect_tx(&full[st], BN * BK * sizeof(T));
      tma_load_tile<BN, BK, B_MN>(Bs + st * BN * BK, &tm_b, &full[st], n0, (kt0 + kt) * BK, 0);
    }
    gather(kt, st);
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(&full[st])) : "memory");
  }
  asm volatile("cp.async.wait_all;" ::: "memory");  // nothing in flight when the thread exits
}

// An output pixel's image and first input row/column (32-bit: M and N*P*Q < 2^31, checked by
// the host; 64-bit division is a long call). Pixels past `count`: far outside, so zero-filled.
struct Pixel {
  uint32_t n;
  int h, w;
};
__device__ __forceinline__ Pixel pixel_of(const ConvOperands& cv, uint32_t m, int64_t count) {
  const uint32_t pq_n = uint32_t(cv.P * cv.Q), q_n = uint32_t(cv.Q);
  const uint32_t n = m / pq_n, pq = m - n * pq_n, p = pq / q_n;
  if (int64_t(m) >= count) return {0, INT_MIN / 2, 0};
  return {n, int(p * cv.sh - cv.ph), int((pq - p * q_n) * cv.sw - cv.pw)};
}
// The address of x[n, h, w, c] when (h, w) is inside the image, else nullptr.
template <typename T>
__device__ __forceinline__ const T* tap_src(const ConvOperands& cv, const T* x, uint32_t n, int h, int w, int64_t c) {
  if (h < 0 || h >= int(cv.H) || w < 0 || w >= int(cv.W)) return nullptr;
  return x + ((int64_t(n) * cv.H + h) * cv.W + w) * cv.C + c;
}

// A (r, s, c) index as filter tap and first channel: the forward's k tile (C % bk == 0, so it
// never straddles a tap; from a split's first k tile, then one k tile at a time with next), or
// the first row of a weight-gradient atom.
struct Tap {
  int r = 0, s = 0;
  int64_t c0 = 0;
  Tap() = default;
  __device__ Tap(const ConvOperands& cv, int64_t k) : r(int(k / (cv.C * cv.S))), s(int((k / cv.C) % cv.S)), c0(k % cv.C) {}
  __device__ void next(const ConvOperands& cv, int bk) {
    if ((c0 += bk) == cv.C) {
      c0 = 0;
      if (++s == cv.S) s = 0, ++r;
    }
  }
};

// One im2col load of pixels from px on at tap, channels tap.c0.. (the map sets how many pixels).
template <typename T>
__device__ __forceinline__ void tma_load_im2col_tap(T* dst, const CUtensorMap* map, uint64_t* bar,
                                                    const ConvOperands& cv, const Pixel& px, const Tap& tap) {
  tma_load_im2col(dst, map, bar, int(tap.c0), px.w, px.h, int(px.n), uint16_t(tap.s * cv.dw), uint16_t(tap.r * cv.dh));
}

// The Hopper TMA producer ring, run by one thread: for each k tile, wait for its stage to be
// free, announce the stage's bytes on its full barrier, then load(kt, stage) issues the copies.
// pos0: the ring position of k tile 0 (a persistent kernel's ring runs on across its tiles).
template <int STAGES, typename Load>
__device__ __forceinline__ void tma_producer(uint64_t* full, uint64_t* empty, int ktiles, uint32_t bytes,
                                             Load&& load, int pos0 = 0) {
  for (int kt = 0; kt < ktiles; ++kt) {
    const int pos = pos0 + kt, st = pos % STAGES;
    if (pos >= STAGES) mbar_wait(&empty[st], ((pos / STAGES) - 1) & 1);
    mbar_expect_tx(&full[st], bytes);
    load(kt, st);
  }
}

// ConvFwd: A row i of stage kt is output pixel m0 + i at tap (r, s), channels c0.. of k tile
// kt0 + kt; a thread's 8 rows stay the same over the k loop, the tap moves.
template <typename T, int BN, int STAGES>
__device__ __forceinline__ void conv_fwd_producer(const ConvOperands& cv, const CUtensorMap& tm_b, T* As, T* Bs,
                                                  uint64_t* full, uint64_t* empty, int64_t M, int m0, int n0,
                                                  int kt0, int ktiles, int t) {
  constexpr int BK = bk<T>, ROWS = BM / 16, VEC = 16 / int(sizeof(T));
  const int chunk = t % 8, row0 = t / 8;
  const T* x = static_cast<const T*>(cv.x) + chunk * VEC;
  Pixel px[ROWS];
#pragma unroll
  for (int i = 0; i < ROWS; ++i) px[i] = pixel_of(cv, uint32_t(m0 + row0 + 16 * i), M);
  const uint32_t dst0 = smem_u32(As) + row0 * ROW_BYTES + ((chunk ^ (row0 & 7)) << 4);
  Tap tap(cv, int64_t(kt0) * BK);  // this split's first k tile
  conv_producer<T, BN, STAGES, false>(tm_b, Bs, full, empty, n0, kt0, ktiles, t, [&](int, int st) {
    const int dh = tap.r * int(cv.dh), dw = tap.s * int(cv.dw);
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      const T* src = tap_src(cv, x, px[i].n, px[i].h + dh, px[i].w + dw, tap.c0);
      cp_async16(dst0 + (st * BM + i * 16) * ROW_BYTES, src ? src : x, src != nullptr ? 16 : 0);
    }
    tap.next(cv, BK);
  });
}

// The Im2col producers (thread 0 alone): TMA's im2col traversal walks output pixels in the
// implicit GEMM's (n, p, q) order from a first pixel on (past the last image it reads zeros), and
// one load fills PIXELS rows of 64 channels at one tap; B by TMA as in the plain GEMM.
// ConvFwdIm2col: each k tile is one load of the tile's 128 pixels at tap (r, s), channels c0...;
// B's k tiles from column b_k0 on (a data-gradient phase's taps in a weight of all phases).
// B_FLIP: B is MN-major, a stride-1 data gradient's forward weight w read in place, its taps
// flipped: tm_b maps w (channels_last) as [taps][K][C] (C innermost), and k tile (r, s, c0) of
// this conv is w's tap R*S - 1 - (r*S + s), rows (w's output channels) c0.., columns n0...
template <typename T, int BN, int STAGES, bool B_FLIP = false>
__device__ __forceinline__ void conv_im2col_producer(const ConvOperands& cv, const CUtensorMap& tm_a,
                                                     const CUtensorMap& tm_b, T* As, T* Bs, uint64_t* full,
                                                     uint64_t* empty, int m0, int n0, int kt0, int ktiles,
                                                     int b_k0) {
  constexpr int BK = bk<T>;
  const Pixel px = pixel_of(cv, uint32_t(m0), INT64_MAX);
  Tap tap(cv, int64_t(kt0) * BK);
  tma_producer<STAGES>(full, empty, ktiles, (BM + BN) * BK * sizeof(T), [&](int kt, int st) {
    tma_load_im2col_tap(As + st * BM * BK, &tm_a, &full[st], cv, px, tap);
    if constexpr (B_FLIP) {
      const int flipped = int(cv.R * cv.S) - 1 - (tap.r * int(cv.S) + tap.s);
      tma_load_tile<BN, BK, true>(Bs + st * BN * BK, &tm_b, &full[st], n0, int(tap.c0), flipped);
    } else {
      tma_load_tile<BN, BK, false>(Bs + st * BN * BK, &tm_b, &full[st], n0, b_k0 + (kt0 + kt) * BK, 0);
    }
    tap.next(cv, BK);
  });
}

// ConvWgradIm2col: ConvWgrad's MN-major atoms, each one load of the k tile's 64 pixels at the
// atom's tap and channels (an atom's k-rows are pixels, its 128-byte rows 64 channels: the
// layout of a 64-pixel im2col box). An atom past the last (r, s, c) row loads atom 0's pixels
// again: its rows are never stored.
template <typename T, int BN, int STAGES>
__device__ __forceinline__ void conv_wgrad_im2col_producer(const ConvOperands& cv, const CUtensorMap& tm_a,
                                                           const CUtensorMap& tm_b, T* As, T* Bs, uint64_t* full,
                                                           uint64_t* empty, int64_t M, int m0, int n0, int kt0,
                                                           int ktiles) {
  constexpr int BK = bk<T>, ATOMS = BM / 64;
  static_assert(BK == 64 && ATOMS == 2, "an atom's k-rows are a k tile; two atoms per stage");
  const Tap tap[ATOMS] = {Tap(cv, m0), Tap(cv, m0 + 64 < M ? m0 + 64 : m0)};  // (r, s, c0) of an atom's rows
  tma_producer<STAGES>(full, empty, ktiles, (BM + BN) * BK * sizeof(T), [&](int kt, int st) {
    const int k = (kt0 + kt) * BK;
    const Pixel px = pixel_of(cv, uint32_t(k), INT64_MAX);
#pragma unroll
    for (int j = 0; j < ATOMS; ++j) tma_load_im2col_tap(As + (st * ATOMS + j) * 64 * BK, &tm_a, &full[st], cv, px, tap[j]);
    tma_load_tile<BN, BK, true>(Bs + st * BN * BK, &tm_b, &full[st], n0, k, 0);
  });
}

// ConvWgrad (dW^T = cols(x)^T . dY): A is MN-major, two 64-row atoms per stage; atom j holds
// rows m0 + 64 j.. = one tap (r, s) and 64 channels (C % 64 == 0), and its k-row kr is output
// pixel (kt0 + kt) * BK + kr (of npq). The taps stay the same over the k loop, the pixels move.
template <typename T, int BN, int STAGES>
__device__ __forceinline__ void conv_wgrad_producer(const ConvOperands& cv, const CUtensorMap& tm_b, T* As, T* Bs,
                                                    uint64_t* full, uint64_t* empty, int64_t M, int64_t npq, int m0,
                                                    int n0, int kt0, int ktiles, int t) {
  constexpr int BK = bk<T>, ATOMS = BM / 64, KROWS = BK / 16, VEC = 16 / int(sizeof(T));
  static_assert(BK == 64, "an atom's k-rows are a k tile");
  const int chunk = t % 8, krow0 = t / 8;
  const T* x = static_cast<const T*>(cv.x) + chunk * VEC;
  int dh[ATOMS], dw[ATOMS];
  int64_t c[ATOMS];
  bool live[ATOMS];
#pragma unroll
  for (int j = 0; j < ATOMS; ++j) {
    const int64_t i = m0 + 64 * j;  // (r, s, c) of the atom's first row
    live[j] = i < M;
    c[j] = i % cv.C;
    dw[j] = int((i / cv.C) % cv.S * cv.dw);
    dh[j] = int(i / (cv.C * cv.S) * cv.dh);
  }
  const uint32_t dst0 = smem_u32(As) + krow0 * ROW_BYTES + ((chunk ^ (krow0 & 7)) << 4);
  conv_producer<T, BN, STAGES, true>(tm_b, Bs, full, empty, n0, kt0, ktiles, t, [&](int kt, int st) {
#pragma unroll
    for (int i = 0; i < KROWS; ++i) {
      const Pixel px = pixel_of(cv, uint32_t((kt0 + kt) * BK + krow0 + 16 * i), npq);
#pragma unroll
      for (int j = 0; j < ATOMS; ++j) {
        const T* src = live[j] ? tap_src(cv, x, px.n, px.h + dh[j], px.w + dw[j], c[j]) : nullptr;
        cp_async16(dst0 + ((st * ATOMS + j) * 64 + i * 16) * ROW_BYTES, src ? src : x, src != nullptr ? 16 : 0);
      }
    }
  });
}

// TF32's B through the producer warpgroup's registers (BLoad::RegsK, RegsMN): B is read where it
// lies, unrounded, each word rounded to the nearest TF32 (cvt.rna) on its way into the K-major
// 128B-swizzled stage the consumers' wgmmas read; thread 0 loads A by TMA as in the plain GEMM.
// Where K <= 512 this replaces copy_round_tf32's rounded K-major copy of B before the GEMM (its
// fixed cost; launch_sm90_config says where). B's words (n, k) land at n * 32 + ((k / 4) ^ (n % 8)) * 4 + k % 4 (16-byte unit
// k / 4 of row n, TMA's 128B swizzle). RegsMN (B row-major K x N, n contiguous): lane l of warp w
// loads k row (l % 16) + 16 (w % 2), 16 bytes at column chunk 2 j + l / 16 of the warp pair's half
// of the tile, so a warp reads 16 rows x 32 contiguous bytes (whole sectors) and each of its four
// word stores hits 32 distinct banks (lanes 16-31's n is lanes 0-15's + 4: their units differ in
// bit 2). RegsK (B^T row-major, k contiguous): 8 lanes a row, chunk l % 8 of rows t / 8 + 16 j, one
// 16-byte store each at its swizzled unit. Load j's words sit a fixed distance from load 0's, in
// B and in the stage, so a stage costs its loads, roundings and stores and little else: the
// producer issues every instruction of its stage (a first form with a bounds check per load was
// bound by its own issue: docs/performance.md#tf32). Stages past K or N (each block's last, the
// last column block's) take a checked path: words outside B read as zero (A is zero-filled past K
// by TMA, but 0 * NaN would not be 0). DEPTH stages of loads are in flight per thread (the next
// ones are issued before this one is stored). Each warp's lane 0 waits for the stage to be free
// and, once the warp's stores are issued (__syncwarp), arrives on its full barrier (1 + 4
// arrivals: thread 0's expect_tx for A, then one a warp); the consumers fence the proxies after
// their wait, as for the conv gathers (a fence here is a MEMBAR.ALL.CTA, which would wait for
// the loads of the stages ahead too).
template <int BN, int STAGES, int DEPTH, BLoad BL>
__device__ __forceinline__ void tf32_b_producer(const CUtensorMap& tm_a, float* As, float* Bs, uint64_t* full,
                                                uint64_t* empty, const float* b, int64_t s_k, int64_t s_n,
                                                int64_t N, int64_t K, int m0, int n0, int ga, int kt0, int ktiles,
                                                int t) {
  constexpr int BK = bk<float>, LOADS = BN / 16;  // 16-byte loads a thread per stage
  constexpr bool MN = BL == BLoad::RegsMN;
  static_assert(BL != BLoad::Tma && LOADS * 16 * 128 == BN * BK * 4, "128 threads share a stage's B tile");
  // load j of this thread: (k, n + NSTEP j) of the tile; its words' stage offsets are load 0's +
  // NSTEP * BK (MN: NSTEP rows of n, n % 8 unchanged; K: 16 rows)
  constexpr int NSTEP = MN ? 8 : 16, WORDS = MN ? 4 : 1;
  const int w = t / 32, l = t % 32;
  const int k = MN ? (l % 16) + 16 * (w % 2) : 4 * (l % 8);
  const int n = MN ? 4 * ((w / 2) * (BN / 8) + l / 16) : t / 8;
  int so[WORDS];  // stage offsets of load 0's words (MN: one per column; K: the 16-byte unit)
#pragma unroll
  for (int e = 0; e < WORDS; ++e) so[e] = (n + e) * BK + ((k / 4) ^ ((n + e) % 8)) * 4 + (MN ? k % 4 : 0);
  const float* src0 = b + (int64_t(kt0) * BK + k) * s_k + (n0 + n) * s_n;
  const int64_t jstep = NSTEP * s_n;  // MN: s_n = 1, so 8 words
  const bool cols_inside = n0 + BN <= N;
  float4 v[DEPTH][LOADS];
  auto fetch = [&](auto u, int kt) {
    float4(&x)[LOADS] = v[decltype(u)::value];
    const float* src = src0 + int64_t(kt) * BK * s_k;
    const int64_t k0 = int64_t(kt0 + kt) * BK;
    if (cols_inside && k0 + BK <= K) {
#pragma unroll
      for (int j = 0; j < LOADS; ++j) x[j] = *reinterpret_cast<const float4*>(src + j * jstep);
    } else {  // words inside B along the load's 4: n.. (MN) or k.. (K)
#pragma unroll
      for (int j = 0; j < LOADS; ++j) {
        const int64_t kk = k0 + k, nn = n0 + n + NSTEP * j, step = MN ? s_n : s_k;
        const int64_t inside = MN ? (kk < K ? N - nn : 0) : (nn < N ? K - kk : 0);
        const float* p = src + j * jstep;
        x[j] = make_float4(inside > 0 ? p[0] : 0.f, inside > 1 ? p[step] : 0.f, inside > 2 ? p[2 * step] : 0.f,
                           inside > 3 ? p[3 * step] : 0.f);
      }
    }
  };
  auto put = [&](auto u, int kt) {
    const int st = kt % STAGES;
    if (kt >= STAGES) {  // one lane a warp waits for the stage to be free
      if (l == 0) mbar_wait(&empty[st], ((kt / STAGES) - 1) & 1);
      __syncwarp();
    }
    if (t == 0) {
      mbar_expect_tx(&full[st], BM * BK * sizeof(float));
      tma_load(As + st * BM * BK, &tm_a, &full[st], (kt0 + kt) * BK, m0, ga);
    }
    uint32_t* dst = reinterpret_cast<uint32_t*>(Bs + st * BN * BK);
    const float4(&x)[LOADS] = v[decltype(u)::value];
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
      const uint32_t r[4] = {round_tf32(x[j].x), round_tf32(x[j].y), round_tf32(x[j].z), round_tf32(x[j].w)};
      if constexpr (MN) {
#pragma unroll
        for (int e = 0; e < 4; ++e) dst[so[e] + j * NSTEP * BK] = r[e];
      } else {
        *reinterpret_cast<uint4*>(dst + so[0] + j * NSTEP * BK) = make_uint4(r[0], r[1], r[2], r[3]);
      }
    }
    __syncwarp();  // the warp's stores, ordered before its lane 0's arrival (a release)
    if (l == 0) mbar_arrive(&full[st]);
  };
  // set kt % DEPTH holds k tile kt; k tile kt + DEPTH - 1's loads go out before kt's stores
  auto step = [&](auto u, int kt) {
    constexpr int U = decltype(u)::value;
    if (kt + DEPTH - 1 < ktiles) fetch(std::integral_constant<int, (U + DEPTH - 1) % DEPTH>{}, kt + DEPTH - 1);
    put(u, kt);
  };
  static_for<DEPTH - 1>([&](auto u) {
    constexpr int U = decltype(u)::value;
    if (U < ktiles) fetch(u, U);
  });
  for (int kt = 0; kt < ktiles; kt += DEPTH) {
    static_for<DEPTH>([&](auto u) {
      constexpr int U = decltype(u)::value;
      if (kt + U < ktiles) step(u, kt + U);
    });
  }
}
#endif

}  // namespace sm90
}  // namespace cuda
}  // namespace tileops
