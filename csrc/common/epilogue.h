// The one epilogue every kernel family (CPU and CUDA) applies to an accumulator:
// + bias, activation, cast to the output dtype. Math runs in the accumulator type.
#pragma once
#include <cmath>

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
};

}  // namespace tileops
