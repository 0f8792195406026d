// The one epilogue every kernel family (CPU and CUDA) applies to an accumulator:
// + bias, activation, cast to the output dtype. Math runs in the accumulator type.
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
  template <typename Acc>
  TILEOPS_HD T operator()(Acc v, int64_t bias_index) const {
    if (bias != nullptr) v += static_cast<Acc>(bias[bias_index]);
    return static_cast<T>(activate(v, act));
  }
  // The same with the activation fixed at compile time, for kernels whose epilogue is hot:
  // no per-element branch, and only the one activation's code in the instruction stream.
  template <Act A, typename Acc>
  TILEOPS_HD T apply(Acc v, int64_t bias_index) const {
    if (bias != nullptr) v += static_cast<Acc>(bias[bias_index]);
    return finish<A>(v);
  }
  // For kernels that already added the bias (e.g. from a shared-memory copy of the tile's).
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
