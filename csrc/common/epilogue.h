// The one epilogue every kernel family (CPU and CUDA) applies to an accumulator:
// + bias, + residual, activation, cast to the output dtype. Math runs in the accumulator type.
#pragma once
#include <cmath>
#include <type_traits>

#include "common/problems.h"

namespace tileops {

TILEOPS_HD float erf_(float v) { return erff(v); }
TILEOPS_HD double erf_(double v) { return erf(v); }
TILEOPS_HD float exp_(float v) { return expf(v); }
TILEOPS_HD double exp_(double v) { return exp(v); }

// 2^v or 1 / v: one MUFU instruction on the GPU (relative errors ~2^-22, ~2^-23), exact on the host.
enum class Mufu { Ex2, Rcp };
template <Mufu F>
TILEOPS_HD float mufu(float v) {
#if defined(__CUDA_ARCH__)
  if constexpr (F == Mufu::Ex2) asm("ex2.approx.ftz.f32 %0, %0;" : "+f"(v));
  else asm("rcp.approx.ftz.f32 %0, %0;" : "+f"(v));
  return v;
#else
  return F == Mufu::Ex2 ? exp2f(v) : 1.f / v;
#endif
}

// max(x, 0) with NaN kept (fmaxf would return the 0): one FMNMX on the GPU.
TILEOPS_HD float relu_nan(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("max.NaN.f32 %0, %0, 0f00000000;" : "+f"(x));
  return x;
#else
  return x != x ? x : (x > 0.f ? x : 0.f);
#endif
}

// GELU and SiLU for 16-bit outputs, computed in fp32 in ~10 instructions and one MUFU where the
// erff / expf + IEEE-division forms take ~30 (an epilogue cost that doubled a short-K linear's
// time: docs/performance.md#epilogue).
// GELU: x * Phi(x) with Phi(-|x|) = 2^P(|x|), P a degree-7 minimax fit of
// log2 Phi(-t) on [0, 6] (Phi(-6) = 1e-9: t is clamped there). Relative error <= 7e-6 for
// |x| <= 6 (scripts/dev/fit_gelu.py), 35x below half an fp16 ulp; for x < 0 it is more accurate
// than fp32's 0.5 x (1 + erf(x / sqrt 2)), whose 1 + erf cancels. The product as
// x Phi(x) = max(x, 0) - |x| Phi(-|x|): one FMNMX and one FFMA where a select and a multiply took
// four, with t for |x| (past 6 the term is below 1e-8 |x|). NaN stays NaN; +inf -> inf, -inf -> ~0.
TILEOPS_HD float gelu_fast(float x) {
  const float t = fminf(fabsf(x), 6.f);
  float p = -1.834827572e-06f;
  p = fmaf(p, t, 6.159860641e-05f);
  p = fmaf(p, t, -9.305271669e-04f);
  p = fmaf(p, t, 8.507899009e-03f);
  p = fmaf(p, t, -5.396008492e-02f);
  p = fmaf(p, t, -4.584643841e-01f);
  p = fmaf(p, t, -1.151251078e+00f);
  p = fmaf(p, t, -9.999952912e-01f);
  const float h = mufu<Mufu::Ex2>(p);  // Phi(-|x|)
  return fmaf(-t, h, relu_nan(x));
}
TILEOPS_HD float silu_fast(float x) {  // x / (1 + e^-x), e^-x as 2^(-x log2 e); x -> -inf: -0
  return x * mufu<Mufu::Rcp>(1.f + mufu<Mufu::Ex2>(-1.4426950408889634f * x));
}

// The activation, in the accumulator type; Fast: the 16-bit outputs' forms above.
template <bool Fast = false, typename Acc>
TILEOPS_HD Acc activate(Acc v, Act act) {
  switch (act) {
    case Act::Relu:  // NaN stays NaN, as torch.relu
      if constexpr (std::is_same<Acc, float>::value) return relu_nan(v);
      return v < Acc(0) ? Acc(0) : v;
    case Act::Gelu:  // exact (erf) form, F.gelu's default
      if constexpr (Fast) return gelu_fast(v);
      return Acc(0.5) * v * (Acc(1) + erf_(v * Acc(0.70710678118654752440)));
    case Act::Silu:
      if constexpr (Fast) return silu_fast(v);
      return v / (Acc(1) + exp_(-v));
    default:
      return v;
  }
}

template <typename T>
struct Epilogue {
  // 16-bit outputs of an fp32 accumulator take the fast GELU / SiLU (their error is far below
  // the output's rounding)
  template <typename Acc>
  static constexpr bool kFastAct = sizeof(T) == 2 && std::is_same<Acc, float>::value;
  const T* bias;  // nullptr: no bias
  Act act;
  // nullptr: no residual. Else a tensor with exactly the output's strides, so the residual of
  // the output element at pointer `out` is residual[out - out_base] (out_base: the output
  // tensor's data pointer; kernels that write a slice or a chunk still measure from it).
  const T* residual = nullptr;
  const T* out_base = nullptr;

  template <typename Acc>
  TILEOPS_HD Acc add_residual(Acc v, const T* out) const {
    return residual != nullptr ? v + static_cast<Acc>(residual[out - out_base]) : v;
  }
  // *out = act(v + bias[bias_index] + residual at out)
  template <typename Acc>
  TILEOPS_HD void store(T* out, Acc v, int64_t bias_index) const {
    if (bias != nullptr) v += static_cast<Acc>(bias[bias_index]);
    *out = static_cast<T>(activate<kFastAct<Acc>>(add_residual(v, out), act));
  }
  // The same with the activation fixed at compile time, for kernels whose epilogue is hot:
  // no per-element branch, and only the one activation's code in the instruction stream.
  template <Act A, typename Acc>
  TILEOPS_HD void store(T* out, Acc v, int64_t bias_index) const {
    if (bias != nullptr) v += static_cast<Acc>(bias[bias_index]);
    *out = finish<A>(v, out);
  }
  // For kernels that already added the bias (e.g. from a shared-memory copy of the tile's):
  // the value for output element `out` (residual added, activated, cast), not stored.
  template <Act A, typename Acc>
  TILEOPS_HD T finish(Acc v, const T* out) const {
    return static_cast<T>(activate<kFastAct<Acc>>(add_residual(v, out), A));
  }
  // Bias and residual already added (kernels that load the residual themselves, e.g. as vectors).
  template <Act A, typename Acc>
  TILEOPS_HD T finish(Acc v) const {
    return static_cast<T>(activated<A>(v));
  }
  // The same, not yet cast (kernels that convert pairs of outputs in one instruction).
  template <Act A, typename Acc>
  TILEOPS_HD Acc activated(Acc v) const {
    return activate<kFastAct<Acc>>(v, A);
  }
};

// Calls fn(std::integral_constant<Act, a>{}) for the runtime activation a.
template <typename Fn>
TILEOPS_HD void with_act(Act a, Fn&& fn) {
  switch (a) {
    case Act::Relu: fn(std::integral_constant<Act, Act::Relu>{}); break;
    case Act::Gelu: fn(std::integral_constant<Act, Act::Gelu>{}); break;
    case Act::Silu: fn(std::integral_constant<Act, Act::Silu>{}); break;
    default: fn(std::integral_constant<Act, Act::None>{}); break;
  }
}

// with_act where ACTS, else fn(None) alone: a kernel that never takes a fused activation (a
// gradient's) then carries no activation variants no call can reach.
template <bool ACTS, typename Fn>
TILEOPS_HD void with_act_if(Act a, Fn&& fn) {
  if constexpr (ACTS) with_act(a, fn);
  else fn(std::integral_constant<Act, Act::None>{});
}
// ... for a kernel on problem type P (P::kFused false: the gradients).
template <class P, typename Fn>
TILEOPS_HD void with_act_of(Act a, Fn&& fn) {
  with_act_if<P::kFused>(a, fn);
}

// Calls fn(std::true_type{}) where there is a bias, else fn(std::false_type{}): the test made once
// outside a kernel's epilogue loop rather than for every output.
template <typename Fn>
TILEOPS_HD void with_bias(bool has_bias, Fn&& fn) {
  if (has_bias) fn(std::true_type{});
  else fn(std::false_type{});
}

}  // namespace tileops
