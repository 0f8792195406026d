// The one epilogue every kernel family (CPU and CUDA) applies to an accumulator:
// + bias, + residual, activation, cast to the output dtype. Math runs in the accumulator type.
#pragma once
#include <cmath>
#include <type_traits>

#include "problems.h"

namespace tileops {

TILEOPS_HD float erf_(float v) { return erff(v); }
TILEOPS_HD double erf_(double v) { return erf(v); }
TILEOPS_HD float exp_(float v) { return expf(v); }
TILEOPS_HD double exp_(double v) { return exp(v); }

template <typename Acc>
TILEOPS_HD Acc activate(Acc v, Act act) {
  switch (act) {
    case Act::Relu:
      return v < Acc(0) ? Acc(0) : v;  // NaN stays NaN, as torch.relu
    case Act::Gelu:  // exact (erf) form, F.gelu's default
      return Acc(0.5) * v * (Acc(1) + erf_(v * Acc(0.70710678118654752440)));
    case Act::Silu:
      return v / (Acc(1) + exp_(-v));
    default:
      return v;
  }
}

template <typename T>
struct Epilogue {
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
    *out = static_cast<T>(activate(add_residual(v, out), act));
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
    return static_cast<T>(activate(add_residual(v, out), A));
  }
  // Bias and residual already added (kernels that load the residual themselves, e.g. as vectors).
  template <Act A, typename Acc>
  TILEOPS_HD T finish(Acc v) const {
    return static_cast<T>(activate(v, A));
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

}  // namespace tileops
