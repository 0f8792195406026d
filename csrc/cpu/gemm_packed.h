// The CPU's packed GEMM: operands packed into contiguous panels in the accumulator type, an
// MR x NR register-blocked microkernel of at::vec::Vectorized FMAs, at::parallel_for over output
// blocks. It serves every problem kind (matmul and the three conv kinds) through the index maps of
// common/problems.h; the conv kinds read their operands in runs along k (Runs<> below), so the
// index map's divisions are paid once per run of contiguous k, not once per element.
//
// This header is compiled once per instruction set: cpu/packed_avx512.cpp and cpu/packed_avx2.cpp
// (through cpu/packed_isa.h, chosen at run time where the CPU has them) and cpu/packed_base.cpp (the
// build's baseline: at::vec's generic Vectorized, which the compiler vectorizes as far as the
// baseline allows). Everything here sits in an unnamed namespace so the copies never meet at link
// time; each file exports one function.
//
// Precision: fp16 and bf16 are converted to fp32 when packed and accumulate in fp32; fp32 in fp32;
// fp64 in double throughout (Acc below). Results are deterministic: each output is one fixed-order
// sum over k (slices of KC in order, each a sequential FMA chain), whatever the thread count.
// Blocking and sizes: docs/kernels/cpu.md.
#pragma once
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "common/epilogue.h"
#include "common/gemm_args.h"
#include "cpu/pack_transpose.h"
#include "cpu/packed_config.h"

namespace tileops {
namespace cpu {
namespace {

template <typename T>
using AccOf = std::conditional_t<std::is_same<T, double>::value, double, float>;

// Register block: MR rows x NR columns of accumulators, NR two vectors wide, MR as the registers
// allow: 6 x 2 accumulators + 2 B vectors + 1 broadcast A = 15 of AVX2's 16 registers (the
// classic BLIS shape), 12 x 2 + 3 = 27 of AVX-512's 32.
#if defined(CPU_CAPABILITY_AVX512)
constexpr int64_t kMR = 12;
#else
constexpr int64_t kMR = 6;
#endif
template <typename Acc>
constexpr int64_t kNR = 2 * at::vec::Vectorized<Acc>::size();

// Cache blocking (docs/kernels/cpu.md#blocking): a KC-deep B panel (KC x NR) stays in L1 while
// the MC rows of packed A (MC x KC) stream from L2; an output block is MC x NC accumulators.
// AVX-512's 32-wide panels are 32 KiB: a KC of 128 measured no faster.
constexpr int64_t kKC = 256, kMC = 96, kNC = 512;
// The grouped form (grouped_cpu.h) runs in 32-byte vectors (packed_config.h: acc_lanes); the
// AVX-512 row leaves it to the AVX2 row (gemm_cpu.cpp), so it is not compiled there.
constexpr bool kGroupedForm = at::vec::Vectorized<float>::size() == 8;

// An operand element in the accumulator type. c10::Half's own conversion is integer code (several
// instructions an element, the cost of a packed fp16 GEMM); where the build has F16C (the x86
// files) it is one instruction.
template <typename Acc, typename T>
inline Acc to_acc(T v) {
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same<T, c10::Half>::value) return static_cast<Acc>(_cvtsh_ss(v.x));
#endif
  return static_cast<Acc>(v);
}

// And back, rounding to nearest even as c10::Half's conversion does (F16C's immediate 0).
template <typename T, typename Acc>
inline T from_acc(Acc v) {
#if defined(CPU_CAPABILITY_AVX2) || defined(CPU_CAPABILITY_AVX512)
  if constexpr (std::is_same<T, c10::Half>::value) return c10::Half(_cvtss_sh(v, 0), c10::Half::from_bits());
#endif
  return static_cast<T>(v);
}

inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
inline int64_t ceil_div(int64_t v, int64_t m) { return (v + m - 1) / m; }

// ---- Runs along k -----------------------------------------------------------------------------
// Runs<P>::a(p, row, k0, n, f) calls f(i, ptr, stride, len) for consecutive runs covering i in
// [0, n): A(row, k0 + i + j) = ptr[j * stride] for j < len, or 0 where ptr is null (padding).
// Runs<P>::b likewise for a column of B. A matmul's operand is one run; the conv kinds walk their
// (tap, channel) or (image, pixel) coordinates, so the index map's divisions are paid once a run.
template <class P>
struct Runs {
  static constexpr bool kRowsLineUp = false;  // no a_rows (TapRuns): rows are walked one by one
  template <class R, class F>
  static void a(const P& p, const R& row, int64_t k0, int64_t n, F&& f) {
    f(0, row + k0 * p.sa[2], p.sa[2], n);
  }
  template <class C, class F>
  static void b(const P& p, const C& col, int64_t k0, int64_t n, F&& f) {
    f(0, col + k0 * p.sb[1], p.sb[1], n);
  }
};

// Splits k = (o1 * D + o2) * inner_n + inner, from k0 for n steps, into runs of inner: f(o1, o2,
// inner, i, len) for the run of len elements starting at step i. (o1, o2) is a conv tap (r, s) or
// an (image, output row), decoded once and then stepped: no division a run.
template <class F>
inline void walk_runs(int64_t k0, int64_t n, int64_t inner_n, int64_t D, F&& f) {
  const int64_t outer = k0 / inner_n;
  int64_t o1 = outer / D, o2 = outer % D, inner = k0 % inner_n;
  for (int64_t i = 0; i < n; inner = 0) {
    const int64_t len = std::min(inner_n - inner, n - i);
    f(o1, o2, inner, i, len);
    i += len;
    if (++o2 == D) o2 = 0, ++o1;
  }
}

// The conv kinds whose A runs are the taps (forward, input gradient): k = (r, s, inner), inner
// fastest, the same boundaries in every row. Tap::at(p, row, tr, ts, c) is row's run at tap (tr,
// ts) from inner index c, or null (padding, a stride that misses); Tap::inner(p) and
// Tap::stride(p) its length and stride. a_rows hands out a strip's row pointers per run in one
// walk (RunGrid::collect_rows).
template <typename T, class Tap>
struct TapRuns {
  using P = typename Tap::P;
  static constexpr bool kRowsLineUp = true;
  template <class F>
  static void a(const P& p, const typename P::RowA& r, int64_t k0, int64_t n, F&& f) {
    walk_runs(k0, n, Tap::inner(p), p.S, [&](int64_t tr, int64_t ts, int64_t c, int64_t i, int64_t len) {
      f(i, Tap::at(p, r, tr, ts, c), Tap::stride(p), len);
    });
  }
  template <int64_t R, class F>
  static void a_rows(const P& p, const typename P::RowA* rows, int64_t nrows, int64_t k0, int64_t n, F&& f) {
    const T* ptrs[R];
    walk_runs(k0, n, Tap::inner(p), p.S, [&](int64_t tr, int64_t ts, int64_t c, int64_t i, int64_t len) {
      for (int64_t j = 0; j < nrows; ++j) ptrs[j] = Tap::at(p, rows[j], tr, ts, c);
      f(i, ptrs, Tap::stride(p), len);
    });
  }
};

// Forward: A's k = (r, s, c), c fastest: one bounds test per tap.
template <typename T>
struct FwdTap {
  using P = ConvFwdProblem<T>;
  static int64_t inner(const P& p) { return p.Cg; }
  static int64_t stride(const P& p) { return p.xs[1]; }
  static const T* at(const P& p, const typename P::RowA& r, int64_t tr, int64_t ts, int64_t c) {
    const int64_t h = r.h0 + tr * p.dh, w = r.w0 + ts * p.dw;
    return p.inside(h, w) ? r.base + h * p.xs[2] + w * p.xs[3] + c * p.xs[1] : nullptr;
  }
};
template <typename T>
struct Runs<ConvFwdProblem<T>> : TapRuns<T, FwdTap<T>> {
  using P = ConvFwdProblem<T>;
  template <class F>
  static void b(const P& p, const typename P::ColB& col, int64_t k0, int64_t n, F&& f) {
    walk_runs(k0, n, p.Cg, p.S, [&](int64_t tr, int64_t ts, int64_t c, int64_t i, int64_t len) {
      f(i, col + tr * p.ws[2] + ts * p.ws[3] + c * p.ws[1], p.ws[1], len);
    });
  }
};

// Input gradient: A's k = (r, s, k_out), k_out fastest: the tap's stride test once per tap.
template <typename T>
struct DgradTap {
  using P = ConvDgradProblem<T>;
  static int64_t inner(const P& p) { return p.Kg; }
  static int64_t stride(const P& p) { return p.ys[1]; }
  static const T* at(const P& p, const typename P::RowA& r, int64_t tr, int64_t ts, int64_t ko) {
    const int64_t th = r.hp - tr * p.dh, tw = r.wp - ts * p.dw;
    if (th < 0 || tw < 0 || (p.sh != 1 && th % p.sh != 0) || (p.sw != 1 && tw % p.sw != 0)) return nullptr;
    const int64_t oh = p.sh == 1 ? th : th / p.sh, ow = p.sw == 1 ? tw : tw / p.sw;
    return oh < p.P && ow < p.Q ? r.base + oh * p.ys[2] + ow * p.ys[3] + ko * p.ys[1] : nullptr;
  }
};
template <typename T>
struct Runs<ConvDgradProblem<T>> : TapRuns<T, DgradTap<T>> {
  using P = ConvDgradProblem<T>;
  template <class F>
  static void b(const P& p, const typename P::ColB& col, int64_t k0, int64_t n, F&& f) {
    walk_runs(k0, n, p.Kg, p.S, [&](int64_t tr, int64_t ts, int64_t ko, int64_t i, int64_t len) {
      f(i, col + tr * p.ws[2] + ts * p.ws[3] + ko * p.ws[0], p.ws[0], len);
    });
  }
};

// Weight gradient: k = (image, p, q), q fastest: one decode per output row (image, p). B's row
// of x is inside the image for a range of q: zeros before and after it.
template <typename T>
struct Runs<ConvWgradProblem<T>> {
  using P = ConvWgradProblem<T>;
  static constexpr bool kRowsLineUp = false;
  template <class F>
  static void a(const P& p, const typename P::RowA& r, int64_t k0, int64_t n, F&& f) {
    walk_runs(k0, n, p.Q, p.P, [&](int64_t img, int64_t oh, int64_t q, int64_t i, int64_t len) {
      f(i, r + img * p.ys[0] + oh * p.ys[2] + q * p.ys[3], p.ys[3], len);
    });
  }
  template <class F>
  static void b(const P& p, const typename P::ColB& col, int64_t k0, int64_t n, F&& f) {
    // q in [q_lo, q_hi) reads column w = q * sw + woff inside [0, W)
    const int64_t q_lo = col.woff >= 0 ? 0 : ceil_div(-col.woff, p.sw);
    const int64_t q_hi = std::max(q_lo, p.W - col.woff <= 0 ? int64_t(0) : ceil_div(p.W - col.woff, p.sw));
    walk_runs(k0, n, p.Q, p.P, [&](int64_t img, int64_t oh, int64_t q, int64_t i, int64_t len) {
      const int64_t h = oh * p.sh + col.hoff;
      if (h < 0 || h >= p.H) return f(i, static_cast<const T*>(nullptr), int64_t(0), len);
      const T* row = col.base + img * p.xs[0] + h * p.xs[2];
      const int64_t a = std::min(std::max(q, q_lo), q + len), b = std::min(std::max(a, q_hi), q + len);
      if (a > q) f(i, static_cast<const T*>(nullptr), int64_t(0), a - q);
      if (b > a) f(i + a - q, row + (a * p.sw + col.woff) * p.xs[3], p.sw * p.xs[3], b - a);
      if (q + len > b) f(i + b - q, static_cast<const T*>(nullptr), int64_t(0), q + len - b);
    });
  }
};

// Element by element: f(i, value) for i in [0, n) of a Runs callback's runs.
template <typename T, class F>
struct Elements {
  F& f;
  void operator()(int64_t i, const T* ptr, int64_t stride, int64_t len) const {
    if (ptr == nullptr) {
      for (int64_t j = 0; j < len; ++j) f(i + j, T(0.f));
    } else {
      for (int64_t j = 0; j < len; ++j) f(i + j, ptr[j * stride]);
    }
  }
};
template <typename T, class F>
Elements<T, F> elements(F& f) {
  return Elements<T, F>{f};
}

// The runs of R rows (or columns) over the same k range, where they line up for a vector copy: the
// same boundaries in every row, at most kMaxRuns runs (short runs gain nothing), and either
// - Transpose: each run unit-stride or zeros (channels_last x or weight, a row-major A, a linear's
//   weight): gather_transposed;
// - Rows: each run's rows side by side in memory, or all zeros (an NCHW x inside the image at unit
//   stride, a column-major A): at each k the rows are one vector (copy_rows).
enum class Grid { None, Transpose, Rows };
template <typename T, int64_t R>
struct RunGrid {
  static constexpr int64_t kMaxRuns = 32;
  int64_t count = 0, start[kMaxRuns], len[kMaxRuns], stride[kMaxRuns];
  const T* ptr[kMaxRuns][R];
  // collect(rows, fill) with fill(r, cb) calling Runs<P>::a or ::b of row r < rows with cb; rows
  // past `rows` (the operand's edge) pack as zeros
  template <class Fill>
  Grid collect(int64_t rows, Fill&& fill) {
    bool lined_up = true, unit = true, side_by_side = true;
    for (int64_t r = 0; r < rows && lined_up; ++r) {
      int64_t t = 0;
      fill(r, [&](int64_t i, const T* p, int64_t st, int64_t n) {
        if (!lined_up) return;
        if (r == 0 && t < kMaxRuns) start[t] = i, len[t] = n, stride[t] = st;
        lined_up = t < kMaxRuns && start[t] == i && len[t] == n;
        if (!lined_up) return;
        unit = unit && (p == nullptr || st == 1 || n == 1);
        side_by_side = side_by_side && (r == 0 || (p == nullptr) == (ptr[t][0] == nullptr)) &&
                       (p == nullptr || (st == stride[t] && (r == 0 || p == ptr[t][0] + r)));
        ptr[t++][r] = p;
      });
      if (r == 0) count = t;
      lined_up = lined_up && t == count;
    }
    if (!lined_up) return Grid::None;
    return finish(rows, unit, side_by_side);
  }
  // collect_rows(rows, fill) where fill(cb) calls Runs<P>::a_rows, whose runs line up by construction
  template <class Fill>
  Grid collect_rows(int64_t rows, Fill&& fill) {
    bool fits = true, unit = true, side_by_side = true;
    count = 0;
    fill([&](int64_t i, const T* const* ps, int64_t st, int64_t n) {
      if (!(fits = fits && count < kMaxRuns)) return;
      start[count] = i, len[count] = n, stride[count] = st;
      const bool one = st == 1 || n == 1;
      for (int64_t r = 0; r < rows; ++r) {
        ptr[count][r] = ps[r];
        unit = unit && (ps[r] == nullptr || one);
        side_by_side = side_by_side && (ps[0] == nullptr ? ps[r] == nullptr : ps[r] == ps[0] + r);
      }
      ++count;
    });
    return fits ? finish(rows, unit, side_by_side) : Grid::None;
  }
  Grid finish(int64_t rows, bool unit, bool side_by_side) {
    for (int64_t t = 0; t < count; ++t)
      for (int64_t r = rows; r < R; ++r) ptr[t][r] = nullptr;
    return unit ? Grid::Transpose : side_by_side ? Grid::Rows : Grid::None;
  }
  // the copy collect() chose: run t's elements to dst[(start + k) * R + r] (rows past `rows` zero)
  void pack(Grid how, int64_t rows, float* dst) const {
    for (int64_t t = 0; t < count; ++t) {
      float* d = dst + start[t] * R;
      if (how == Grid::Transpose) gather_transposed<R>(ptr[t], len[t], d);
      else copy_rows<R>(ptr[t][0], stride[t], len[t], rows, d);
    }
  }
};

// ---- The microkernel ---------------------------------------------------------------------------
// c[MR x NR] (row stride ldc) = (accumulate ? c : 0) + sum over kc of a[k][MR] (x) b[k][NR].
template <typename Acc>
void micro(int64_t kc, const Acc* a, const Acc* b, Acc* c, int64_t ldc, bool accumulate) {
  using V = at::vec::Vectorized<Acc>;
  constexpr int64_t W = V::size();
  V c0[kMR], c1[kMR];
#pragma GCC unroll 12
  for (int64_t r = 0; r < kMR; ++r) {
    c0[r] = accumulate ? V::loadu(c + r * ldc) : V(Acc(0));
    c1[r] = accumulate ? V::loadu(c + r * ldc + W) : V(Acc(0));
  }
  for (int64_t k = 0; k < kc; ++k, a += kMR, b += 2 * W) {
    const V b0 = V::loadu(b), b1 = V::loadu(b + W);
#pragma GCC unroll 12
    for (int64_t r = 0; r < kMR; ++r) {
      const V ar(a[r]);
      c0[r] = at::vec::fmadd(ar, b0, c0[r]);
      c1[r] = at::vec::fmadd(ar, b1, c1[r]);
    }
  }
#pragma GCC unroll 12
  for (int64_t r = 0; r < kMR; ++r) {
    c0[r].store(c + r * ldc);
    c1[r].store(c + r * ldc + W);
  }
}

// ---- Packing -----------------------------------------------------------------------------------
// B of group g: panels of NR columns, each K x NR (k-major), zero past N. Packed once per call
// (every output block reads all of it), in parallel over panels.
template <typename T, typename Acc, class P>
void pack_b_panel(const P& p, int64_t g, int64_t n0, int64_t N, int64_t K, Acc* dst) {
  constexpr int64_t NR = kNR<Acc>;
  const int64_t nv = std::min(NR, N - n0);
  if constexpr (std::is_same<P, MatmulProblem<T>>::value) {
    // a row-major B (x @ W): walking a column would touch a new cache line per k; copy rows of NR
    if (p.sb[2] == 1 && p.sb[1] != 1) {
      for (int64_t k = 0; k < K; ++k) {
        const T* src = p.B + g * p.sb[0] + k * p.sb[1] + n0;
        for (int64_t j = 0; j < NR; ++j) dst[k * NR + j] = j < nv ? to_acc<Acc>(src[j]) : Acc(0);
      }
      return;
    }
  }
  typename P::ColB cols[NR];
  for (int64_t j = 0; j < nv; ++j) cols[j] = p.col_b(g, n0 + j);
  if constexpr (kTransposePack<Acc>) {  // the panel's columns line up: vector copies
    RunGrid<T, NR> grid;
    const Grid how = grid.collect(nv, [&](int64_t j, auto&& cb) { Runs<P>::b(p, cols[j], 0, K, cb); });
    if (how != Grid::None) return grid.pack(how, nv, dst);
  }
  // column by column, kPackKB rows of the panel at a time: the rows being written (kPackKB x NR)
  // stay in L1 while each column is read along k
  constexpr int64_t kPackKB = 64;
  for (int64_t k0 = 0; k0 < K; k0 += kPackKB) {
    const int64_t kn = std::min(kPackKB, K - k0);
    Acc* d = dst + k0 * NR;
    for (int64_t j = 0; j < nv; ++j) {
      auto put = [&](int64_t k, T v) { d[k * NR + j] = to_acc<Acc>(v); };
      Runs<P>::b(p, cols[j], k0, kn, elements<T>(put));
    }
    for (int64_t j = nv; j < NR; ++j)
      for (int64_t k = 0; k < kn; ++k) d[k * NR + j] = Acc(0);
  }
}

// Rows [m0, m0 + mc) of A, k in [k0, k0 + kc): strips of MR rows, each kc x MR (k-major), zero past M.
template <typename T, typename Acc, class P>
void pack_a(const P& p, const typename P::RowA* rows, int64_t mv, int64_t mc, int64_t k0, int64_t kc, Acc* dst) {
  for (int64_t s0 = 0; s0 < mc; s0 += kMR) {
    Acc* strip = dst + s0 / kMR * kc * kMR;
    const int64_t sv = std::max(int64_t(0), std::min(kMR, mv - s0));
    if constexpr (kTransposePack<Acc>) {  // the strip's rows line up: vector copies
      RunGrid<T, kMR> grid;
      Grid how = Grid::None;
      if constexpr (Runs<P>::kRowsLineUp) {
        how = grid.collect_rows(sv, [&](auto&& cb) { Runs<P>::template a_rows<kMR>(p, rows + s0, sv, k0, kc, cb); });
      } else if (sv > 0) {
        how = grid.collect(sv, [&](int64_t r, auto&& cb) { Runs<P>::a(p, rows[s0 + r], k0, kc, cb); });
      }
      if (how != Grid::None) {
        grid.pack(how, sv, strip);
        continue;
      }
    }
    for (int64_t r = 0; r < kMR; ++r) {
      Acc* col = strip + r;
      if (r >= sv) {
        for (int64_t k = 0; k < kc; ++k) col[k * kMR] = Acc(0);
        continue;
      }
      auto put = [&](int64_t k, T v) { col[k * kMR] = to_acc<Acc>(v); };
      Runs<P>::a(p, rows[s0 + r], k0, kc, elements<T>(put));
    }
  }
}

// ---- The epilogue's transcendental activations, in vectors ---------------------------------------
// epilogue.h's activate() per element costs an erff / expf call each (a third of a linear+GELU's
// time at 768 deep); the blocked form applies GELU and SiLU to a row of fp32 accumulators at once
// with at::vec's erf / exp (torch's own CPU GELU and SiLU), the same formulas as activate()'s exact
// forms. fp64 keeps the per-element path.
template <typename Acc, Act A>
constexpr bool kVecAct = std::is_same<Acc, float>::value && (A == Act::Gelu || A == Act::Silu);

template <Act A>
void activate_vec(float* v, int64_t n) {
  using V = at::vec::Vectorized<float>;
  constexpr int64_t W = V::size();
  for (int64_t i = 0; i < n; i += W) {
    const int64_t cnt = std::min(W, n - i);
    const V x = V::loadu(v + i, cnt);
    // the arguments clamped where the result is already exact (erf(z) is +-1 in float past |z| ~ 4,
    // x / (1 + exp(-x)) is x past x ~ 17): past them exp's result is subnormal, and subnormals
    // take a microcode assist per instruction on Intel cores (GELU at 5x its cost after a 768-deep
    // linear). NaN still propagates through the factor x.
    V y;
    if constexpr (A == Act::Gelu) {
      const V z = at::vec::clamp(x * V(0.70710678118654752440f), V(-9.f), V(9.f));
      y = x * V(0.5f) * (V(1.f) + z.erf());
    } else {
      y = x / (V(1.f) + at::vec::clamp_min(x.neg(), V(-80.f)).exp());
    }
    y.store(v + i, cnt);
  }
}

// ---- The epilogue of an output block -------------------------------------------------------------
// Epilogue<T>::store's steps (bias, residual, activation, with the cast through from_acc) for the
// block's mv x nv accumulators (row stride ld) into C: row by row where C's columns are
// contiguous (a row-major matmul, channels_last), else in tiles of kTileRows rows a column at a
// time (an NCHW output, whose column holds neighbouring pixels: row by row, each store would
// touch a new cache line). GELU and SiLU in vectors along the accumulator rows (kVecAct).
constexpr int64_t kTileRows = 16;
template <typename T, Act A, class P, typename Acc>
void store_block(const P& p, const Epilogue<T>& epi, int64_t g, int64_t m0, int64_t mv, int64_t n0, int64_t nv,
                 Acc* acc, int64_t ld) {
  auto pre_act = [&](Acc v, int64_t j, const T* out) {  // bias and residual
    if (epi.bias != nullptr) v += to_acc<Acc>(epi.bias[p.bias_index(g, n0 + j)]);
    return epi.add_residual(v, out);
  };
  const int64_t col_step = nv > 1 ? p.c(p.row_c(g, m0), 1) - p.c(p.row_c(g, m0), 0) : 1;
  const int64_t tile = col_step == 1 ? 1 : kTileRows;
  typename P::RowC rc[kTileRows];
  for (int64_t r0 = 0; r0 < mv; r0 += tile) {
    const int64_t rn = std::min(tile, mv - r0);
    for (int64_t r = 0; r < rn; ++r) rc[r] = p.row_c(g, m0 + r0 + r);
    Acc* a = acc + r0 * ld;
    // one tile row at a time (rn == 1 where C's columns are contiguous) or one column at a time
    auto for_each = [&](auto&& f) {
      if (rn == 1) {
        for (int64_t j = 0; j < nv; ++j) f(0, j);
      } else {
        for (int64_t j = 0; j < nv; ++j)
          for (int64_t r = 0; r < rn; ++r) f(r, j);
      }
    };
    if constexpr (kVecAct<Acc, A>) {
      for_each([&](int64_t r, int64_t j) { a[r * ld + j] = pre_act(a[r * ld + j], j, p.c(rc[r], n0 + j)); });
      for (int64_t r = 0; r < rn; ++r) activate_vec<A>(a + r * ld, nv);
      for_each([&](int64_t r, int64_t j) { *p.c(rc[r], n0 + j) = from_acc<T>(a[r * ld + j]); });
    } else {
      for_each([&](int64_t r, int64_t j) {
        T* out = p.c(rc[r], n0 + j);
        *out = from_acc<T>(epi.template activated<A>(pre_act(a[r * ld + j], j, out)));
      });
    }
  }
}

// ---- The driver --------------------------------------------------------------------------------
struct Blocking {
  int64_t mc, nc;  // output block, multiples of MR and NR
};

// Blocks of at most kMC x kNC, halved (columns first, down to 4 NR panels, then rows) until there
// are at least 4 blocks per thread, so a 2- or 16-thread pool is kept busy with even shares. Each
// size is then evened out over its count (100 rows in two blocks are 60 + 40, not 96 + 4).
inline int64_t even_blocks(int64_t n, int64_t size, int64_t unit) {
  return std::min(size, round_up(ceil_div(n, ceil_div(n, size)), unit));
}
template <typename Acc>
Blocking blocking(const GemmArgs& a) {
  constexpr int64_t NR = kNR<Acc>;
  Blocking bl{std::min(kMC, round_up(a.M, kMR)), std::min(kNC, round_up(a.N, NR))};
  const int64_t want = 4 * at::get_num_threads();
  while (a.batch * ceil_div(a.M, bl.mc) * ceil_div(a.N, bl.nc) < want) {
    if (bl.nc > 4 * NR) bl.nc = round_up(bl.nc / 2, NR);
    else if (bl.mc > 2 * kMR) bl.mc = round_up(bl.mc / 2, kMR);
    else break;
  }
  return {even_blocks(a.M, bl.mc, kMR), even_blocks(a.N, bl.nc, NR)};
}

template <typename T, class P, Act A>
void gemm_packed(const P& p, const GemmArgs& a) {
  using Acc = AccOf<T>;
  constexpr int64_t NR = kNR<Acc>;
  const Epilogue<T> epi = epilogue_of<T>(a);
  const Blocking bl = blocking<Acc>(a);
  const int64_t Npad = round_up(a.N, NR), panels = Npad / NR;
  // every group's B at once: the output blocks of all groups then share one parallel loop
  std::unique_ptr<Acc[]> bpack(new Acc[a.batch * Npad * a.K]);
  at::parallel_for(0, a.batch * panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t g = i / panels, j = i % panels;
      pack_b_panel<T, Acc>(p, g, j * NR, a.N, a.K, bpack.get() + (g * Npad + j * NR) * a.K);
    }
  });
  const int64_t mblocks = ceil_div(a.M, bl.mc), nblocks = ceil_div(a.N, bl.nc);
  at::parallel_for(0, a.batch * mblocks * nblocks, 1, [&](int64_t begin, int64_t end) {
    std::unique_ptr<Acc[]> apack(new Acc[bl.mc * std::min(kKC, a.K)]), acc(new Acc[bl.mc * bl.nc]);
    std::vector<typename P::RowA> rows(bl.mc);
    for (int64_t blk = begin; blk < end; ++blk) {
      // row blocks fastest: a thread's contiguous share of the blocks spans every row block (the
      // last one short), and consecutive blocks read the same panels of B
      const int64_t g = blk / (mblocks * nblocks), nb = blk / mblocks % nblocks, mb = blk % mblocks;
      const int64_t m0 = mb * bl.mc, mv = std::min(bl.mc, a.M - m0), mc = round_up(mv, kMR);
      const int64_t n0 = nb * bl.nc, nv = std::min(bl.nc, a.N - n0), nc = round_up(nv, NR);
      for (int64_t r = 0; r < mv; ++r) rows[r] = p.row_a(g, m0 + r);
      for (int64_t k0 = 0; k0 < a.K; k0 += kKC) {
        const int64_t kc = std::min(kKC, a.K - k0);
        pack_a<T, Acc>(p, rows.data(), mv, mc, k0, kc, apack.get());
        for (int64_t j = 0; j < nc; j += NR) {
          const Acc* bp = bpack.get() + (g * Npad + n0 + j) * a.K + k0 * NR;
          for (int64_t i = 0; i < mc; i += kMR)
            micro<Acc>(kc, apack.get() + i * kc, bp, acc.get() + i * bl.nc + j, bl.nc, k0 > 0);
        }
      }
      store_block<T, A>(p, epi, g, m0, mv, n0, nv, acc.get(), bl.nc);
    }
  });
}

// ---- The gemv form (packed_config.h): M <= kGemvMaxM rows, B's columns contiguous along k ----
// Packing B would cost more than the product (each B element meets at most 8 rows), so B is read
// once, in place, a column at a time: MM dot products along k in vectors (A's rows packed, zero
// rows up to MM), each reduced across lanes in a fixed order. 16-bit columns are converted a
// chunk of KB at a time into an L1 buffer. Parallel over columns.
template <typename T, Act A, int MM>
void gemv_cols(const MatmulProblem<T>& p, const GemmArgs& a) {
  using Acc = AccOf<T>;
  using V = at::vec::Vectorized<Acc>;
  constexpr int64_t W = V::size(), KB = 2048, NB = 8;
  constexpr bool kInPlace = std::is_same<T, Acc>::value;
  const Epilogue<T> epi = epilogue_of<T>(a);
  const int64_t K = a.K, ga = operand_batches(a, p.sa[0]);
  std::unique_ptr<Acc[]> apack(new Acc[ga * MM * K]);
  for (int64_t g = 0; g < ga; ++g)
    for (int64_t m = 0; m < MM; ++m) {
      Acc* dst = apack.get() + (g * MM + m) * K;
      if (m >= a.M) {
        std::fill(dst, dst + K, Acc(0));
        continue;
      }
      const auto row = p.row_a(g, m);
      for (int64_t k = 0; k < K; ++k) dst[k] = to_acc<Acc>(p.a(row, k));
    }
  const int64_t nchunks = ceil_div(a.N, NB);
  at::parallel_for(0, a.batch * nchunks, 1, [&](int64_t begin, int64_t end) {
    std::unique_ptr<Acc[]> buf(kInPlace ? nullptr : new Acc[KB]);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t g = t / nchunks, n0 = t % nchunks * NB, n1 = std::min(a.N, n0 + NB);
      const Acc* arows = apack.get() + (ga == 1 ? 0 : g) * MM * K;
      for (int64_t n = n0; n < n1; ++n) {
        const T* col = p.col_b(g, n);
        V s[MM];
        for (int m = 0; m < MM; ++m) s[m] = V(Acc(0));
        for (int64_t k0 = 0; k0 < K; k0 += KB) {
          const int64_t kc = std::min(KB, K - k0);
          const Acc* b;
          if constexpr (kInPlace) {
            b = col + k0;
          } else {
            for (int64_t k = 0; k < kc; ++k) buf[k] = to_acc<Acc>(col[k0 + k]);
            b = buf.get();
          }
          const Acc* ak = arows + k0;
          int64_t k = 0;
          for (; k + W <= kc; k += W) {
            const V bv = V::loadu(b + k);
            for (int m = 0; m < MM; ++m) s[m] = at::vec::fmadd(V::loadu(ak + m * K + k), bv, s[m]);
          }
          if (k < kc) {  // the tail: lanes past kc load as 0
            const V bv = V::loadu(b + k, kc - k);
            for (int m = 0; m < MM; ++m) s[m] = at::vec::fmadd(V::loadu(ak + m * K + k, kc - k), bv, s[m]);
          }
        }
        for (int64_t m = 0; m < a.M; ++m) {
          Acc lanes[W];
          s[m].store(lanes);
          Acc v = 0;
          for (int64_t l = 0; l < W; ++l) v += lanes[l];
          T* out = p.c(p.row_c(g, m), n);
          if (epi.bias != nullptr) v += to_acc<Acc>(epi.bias[n]);
          *out = from_acc<T>(epi.template activated<A>(epi.add_residual(v, out)));
        }
      }
    }
  });
}

template <typename T, Act A>
void gemv(const MatmulProblem<T>& p, const GemmArgs& a) {
  if (a.M <= 1) gemv_cols<T, A, 1>(p, a);
  else if (a.M <= 2) gemv_cols<T, A, 2>(p, a);
  else if (a.M <= 4) gemv_cols<T, A, 4>(p, a);
  else gemv_cols<T, A, kGemvMaxM>(p, a);
}

}  // namespace
}  // namespace cpu
}  // namespace tileops

#include "cpu/grouped_cpu.h"

namespace tileops {
namespace cpu {
namespace {

// The one entry each instruction-set file exports: any problem kind, any floating dtype.
inline void run_packed(const GemmArgs& a) {
  const bool use_gemv = gemv_why_not(a) == nullptr, use_grouped = grouped_why_not(a) == nullptr;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.dtype, "tileops_gemm_cpu_packed", [&] {
    if (use_gemv || use_grouped) {
      return with_act(a.act, [&](auto act) {
        constexpr Act A = decltype(act)::value;
        if (use_gemv) return gemv<scalar_t, A>(MatmulProblem<scalar_t>(a.mm), a);
        if constexpr (kGroupedForm) grouped<scalar_t, A>(a);
        else TORCH_INTERNAL_ASSERT(false, "tileops: internal error: the grouped form in a row without it");
      });
    }
    visit_problem<scalar_t>(a, [&](const auto& p) {
      using P = std::decay_t<decltype(p)>;
      TORCH_INTERNAL_ASSERT(P::kFused || a.act == Act::None, "tileops: internal error: an activation on a gradient");
      with_act_of<P>(a.act, [&](auto act) { gemm_packed<scalar_t, P, decltype(act)::value>(p, a); });
    });
  });
}

}  // namespace
}  // namespace cpu
}  // namespace tileops
