// Rows (M) at most which a GEMM is skinny: the skinny families (cuda/skinny/) take it, and a conv
// backward does not overlap a weight gradient of so few output channels with its data gradient
// (ops/conv2d.cpp). Host and device code.
#pragma once

namespace tileops {

constexpr int kSkinnyMaxM = 16;

}  // namespace tileops
