// Every tileops op is a (batched) GEMM   C[g] (M x N) = A[g] (M x K) . B[g] (K x N)
// whose operands are read through an index map. A problem type describes that map once,
// and the CPU loop and every CUDA kernel family consume it, so the conv index math is
// written in one place and is tested by the CPU path as well as the GPU one.
//
// A problem type provides (g = batch or group index):
//   RowA row_a(g, m)          per-row state, computed once per tile row (pointer, decoded coords)
//   T    a(const RowA&, k)    the A element, or 0 where it falls into padding
//   ColB col_b(g, n);  T b(const ColB&, k)
//   RowC row_c(g, m);  T* c(const RowC&, n)     where the result goes
//   int64_t bias_index(g, n)
// Callers guarantee m < M, n < N, k < K; tails are predicated by the caller.
//   kFused                    whether the op layer ever gives this kind an activation to fuse
//                             (false: the gradients); kernels then instantiate the identity's
//                             epilogue alone (epilogue.h: with_act_of)
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define TILEOPS_HD __host__ __device__ __forceinline__
#else
#define TILEOPS_HD inline
#endif

namespace tileops {

enum class Act : int { None = 0, Relu = 1, Gelu = 2, Silu = 3 };

// Plain operand descriptions filled by the op layer (no torch types: this header is
// compiled by both g++ and nvcc).
struct MatmulOperands {
  const void* a;
  const void* b;
  void* c;
  int64_t sa[3], sb[3], sc[3];  // strides: batch, row, column (batch stride 0 = broadcast)
  // rq > 0: C's rows in groups of rq, row m at (m / rq) * srq + (m % rq) * sc[1] (a data
  // gradient's phase of dx, cuda/conv/dgrad_phases.h). Only the Hopper one-tile kernels are given it (the
  // persistent ones refuse it: their TMA store needs rows of one stride).
  int64_t rq = 0, srq = 0;
};

// x: input-shaped (N, C, H, W); w: weight (K, C/groups, R, S); y: output-shaped (N, K, P, Q).
// Forward reads x, w and writes y; dgrad reads y, w and writes x; wgrad reads y, x, writes w.
struct ConvOperands {
  int64_t N, C, H, W, K, R, S, P, Q;
  int64_t sh, sw, ph, pw, dh, dw, groups, Cg, Kg;
  void* x;
  void* w;
  void* y;
  int64_t xs[4], ws[4], ys[4];  // strides in (n|k, c, h|r, w|s) order, any memory format
};

// Strides (n, c, h, w) of a dense channels_last (N, C, H, W) tensor: rows (n, h, w) of C.
TILEOPS_HD bool nhwc_dense(const int64_t* st, int64_t C, int64_t H, int64_t W) {
  return st[1] == 1 && st[3] == C && st[2] == W * C && st[0] == H * W * C;
}
// ... and of a dense NCHW one: rows (n, c, h) of W.
TILEOPS_HD bool nchw_dense(const int64_t* st, int64_t C, int64_t H, int64_t W) {
  return st[3] == 1 && st[2] == W && st[1] == H * W && st[0] == C * H * W;
}

template <typename T>
struct MatmulProblem {
  static constexpr bool kFused = true;
  const T* A;
  const T* B;
  T* C;
  int64_t sa[3], sb[3], sc[3], rq, srq;
  MatmulProblem() = default;  // (an array of them: cuda/sm90/kernels.cuh's DgradPhases)
  explicit MatmulProblem(const MatmulOperands& o)
      : A(static_cast<const T*>(o.a)), B(static_cast<const T*>(o.b)), C(static_cast<T*>(o.c)), rq(o.rq), srq(o.srq) {
    for (int i = 0; i < 3; ++i) {
      sa[i] = o.sa[i];
      sb[i] = o.sb[i];
      sc[i] = o.sc[i];
    }
  }
  using RowA = const T*;
  using ColB = const T*;
  using RowC = T*;
  TILEOPS_HD RowA row_a(int64_t g, int64_t m) const { return A + g * sa[0] + m * sa[1]; }
  TILEOPS_HD T a(RowA r, int64_t k) const { return r[k * sa[2]]; }
  TILEOPS_HD ColB col_b(int64_t g, int64_t n) const { return B + g * sb[0] + n * sb[2]; }
  TILEOPS_HD T b(ColB c, int64_t k) const { return c[k * sb[1]]; }
  TILEOPS_HD RowC row_c(int64_t g, int64_t m) const {
    return C + g * sc[0] + (rq > 0 ? (m / rq) * srq + (m % rq) * sc[1] : m * sc[1]);
  }
  TILEOPS_HD T* c(RowC r, int64_t n) const { return r + n * sc[2]; }
  TILEOPS_HD int64_t bias_index(int64_t, int64_t n) const { return n; }
};

// Shared geometry and typed pointers for the three convolution problems.
template <typename T>
struct ConvBase : ConvOperands {
  explicit ConvBase(const ConvOperands& o) : ConvOperands(o) {}
  TILEOPS_HD T* X() const { return static_cast<T*>(x); }
  TILEOPS_HD T* Wt() const { return static_cast<T*>(w); }
  TILEOPS_HD T* Y() const { return static_cast<T*>(y); }
  TILEOPS_HD bool inside(int64_t h, int64_t ww) const { return h >= 0 && h < H && ww >= 0 && ww < W; }
};

// Forward: M = N*P*Q output pixels, N = Kg output channels, K = R*S*Cg (channel fastest,
// so channels_last inputs are read along contiguous memory).
template <typename T>
struct ConvFwdProblem : ConvBase<T> {
  static constexpr bool kFused = true;
  using ConvBase<T>::ConvBase;
  struct RowA { const T* base; int64_t h0, w0; };
  using ColB = const T*;
  using RowC = T*;
  TILEOPS_HD RowA row_a(int64_t g, int64_t m) const {
    const int64_t n = m / (this->P * this->Q), pq = m % (this->P * this->Q);
    const int64_t p = pq / this->Q, q = pq % this->Q;
    return {this->X() + n * this->xs[0] + g * this->Cg * this->xs[1], p * this->sh - this->ph,
            q * this->sw - this->pw};
  }
  TILEOPS_HD T a(const RowA& r, int64_t k) const {
    const int64_t c = k % this->Cg, rs = k / this->Cg;
    const int64_t h = r.h0 + (rs / this->S) * this->dh, w = r.w0 + (rs % this->S) * this->dw;
    return this->inside(h, w) ? r.base[c * this->xs[1] + h * this->xs[2] + w * this->xs[3]] : T(0.f);
  }
  TILEOPS_HD ColB col_b(int64_t g, int64_t n) const { return this->Wt() + (g * this->Kg + n) * this->ws[0]; }
  TILEOPS_HD T b(ColB col, int64_t k) const {
    const int64_t c = k % this->Cg, rs = k / this->Cg;
    return col[c * this->ws[1] + (rs / this->S) * this->ws[2] + (rs % this->S) * this->ws[3]];
  }
  TILEOPS_HD RowC row_c(int64_t g, int64_t m) const {
    const int64_t n = m / (this->P * this->Q), pq = m % (this->P * this->Q);
    return this->Y() + n * this->ys[0] + g * this->Kg * this->ys[1] + (pq / this->Q) * this->ys[2] +
           (pq % this->Q) * this->ys[3];
  }
  TILEOPS_HD T* c(RowC r, int64_t n) const { return r + n * this->ys[1]; }
  TILEOPS_HD int64_t bias_index(int64_t g, int64_t n) const { return g * this->Kg + n; }
};

// Input gradient: M = N*H*W input pixels, N = Cg input channels, K = R*S*Kg. A tap (r, s)
// contributes only where (h + ph - r*dh) is a multiple of the stride and lands inside
// the output; elsewhere A reads 0.
template <typename T>
struct ConvDgradProblem : ConvBase<T> {
  static constexpr bool kFused = false;
  using ConvBase<T>::ConvBase;
  struct RowA { const T* base; int64_t hp, wp; };
  using ColB = const T*;
  using RowC = T*;
  TILEOPS_HD RowA row_a(int64_t g, int64_t m) const {
    const int64_t n = m / (this->H * this->W), hw = m % (this->H * this->W);
    return {this->Y() + n * this->ys[0] + g * this->Kg * this->ys[1], hw / this->W + this->ph,
            hw % this->W + this->pw};
  }
  TILEOPS_HD T a(const RowA& r, int64_t k) const {
    const int64_t ko = k % this->Kg, rs = k / this->Kg;
    const int64_t th = r.hp - (rs / this->S) * this->dh, tw = r.wp - (rs % this->S) * this->dw;
    if (th < 0 || tw < 0 || th % this->sh != 0 || tw % this->sw != 0) return T(0.f);
    const int64_t p = th / this->sh, q = tw / this->sw;
    if (p >= this->P || q >= this->Q) return T(0.f);
    return r.base[ko * this->ys[1] + p * this->ys[2] + q * this->ys[3]];
  }
  TILEOPS_HD ColB col_b(int64_t g, int64_t n) const {
    return this->Wt() + g * this->Kg * this->ws[0] + n * this->ws[1];
  }
  TILEOPS_HD T b(ColB col, int64_t k) const {
    const int64_t ko = k % this->Kg, rs = k / this->Kg;
    return col[ko * this->ws[0] + (rs / this->S) * this->ws[2] + (rs % this->S) * this->ws[3]];
  }
  TILEOPS_HD RowC row_c(int64_t g, int64_t m) const {
    const int64_t n = m / (this->H * this->W), hw = m % (this->H * this->W);
    return this->X() + n * this->xs[0] + g * this->Cg * this->xs[1] + (hw / this->W) * this->xs[2] +
           (hw % this->W) * this->xs[3];
  }
  TILEOPS_HD T* c(RowC r, int64_t n) const { return r + n * this->xs[1]; }
  TILEOPS_HD int64_t bias_index(int64_t, int64_t) const { return 0; }
};

// Weight gradient: M = Kg output channels, N = Cg*R*S weight taps (s fastest), K = N*P*Q.
template <typename T>
struct ConvWgradProblem : ConvBase<T> {
  static constexpr bool kFused = false;
  using ConvBase<T>::ConvBase;
  using RowA = const T*;
  struct ColB { const T* base; int64_t hoff, woff; };
  using RowC = T*;
  TILEOPS_HD RowA row_a(int64_t g, int64_t m) const { return this->Y() + (g * this->Kg + m) * this->ys[1]; }
  TILEOPS_HD T a(RowA r, int64_t k) const {
    const int64_t n = k / (this->P * this->Q), pq = k % (this->P * this->Q);
    return r[n * this->ys[0] + (pq / this->Q) * this->ys[2] + (pq % this->Q) * this->ys[3]];
  }
  TILEOPS_HD ColB col_b(int64_t g, int64_t n) const {
    const int64_t c = n / (this->R * this->S), rs = n % (this->R * this->S);
    return {this->X() + (g * this->Cg + c) * this->xs[1], (rs / this->S) * this->dh - this->ph,
            (rs % this->S) * this->dw - this->pw};
  }
  TILEOPS_HD T b(const ColB& col, int64_t k) const {
    const int64_t n = k / (this->P * this->Q), pq = k % (this->P * this->Q);
    const int64_t h = (pq / this->Q) * this->sh + col.hoff, w = (pq % this->Q) * this->sw + col.woff;
    return this->inside(h, w) ? col.base[n * this->xs[0] + h * this->xs[2] + w * this->xs[3]] : T(0.f);
  }
  TILEOPS_HD RowC row_c(int64_t g, int64_t m) const { return this->Wt() + (g * this->Kg + m) * this->ws[0]; }
  TILEOPS_HD T* c(RowC r, int64_t n) const {
    const int64_t c = n / (this->R * this->S), rs = n % (this->R * this->S);
    return r + c * this->ws[1] + (rs / this->S) * this->ws[2] + (rs % this->S) * this->ws[3];
  }
  TILEOPS_HD int64_t bias_index(int64_t, int64_t) const { return 0; }
};

}  // namespace tileops
