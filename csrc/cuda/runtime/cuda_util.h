// The CUDA translation units' helpers that take ATen tensors: workspace options, views of device
// pointers, padded copies. Units that only instantiate and launch kernels include launch_util.h
// alone (no ATen: docs/performance.md#build-and-device-logistics).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/cuda/CUDAContext.h>

#include <memory>
#include <vector>

#include "cuda/runtime/launch_util.h"

namespace tileops {
namespace cuda {

// Options for workspaces on the current CUDA device (the caller holds the device guard).
inline at::TensorOptions cuda_options(c10::ScalarType st) {
  return at::TensorOptions().dtype(st).device(at::kCUDA, at::cuda::current_device());
}

// A tensor over memory of the current device that the caller's operands own. (at::from_blob without
// a target device asks the driver where the pointer lives, cudaPointerGetAttributes, 11 calls in a
// conv's forward and backward: docs/performance.md#host-overhead.)
inline at::Tensor device_view(const void* p, at::IntArrayRef sizes, at::IntArrayRef strides, c10::ScalarType st) {
  const at::TensorOptions opts = cuda_options(st);
  return at::for_blob(const_cast<void*>(p), sizes).strides(strides).options(opts).target_device(opts.device()).make_tensor();
}

// v [..., cols] copied into a new contiguous [..., pitch] tensor (pitch >= cols). zero_tail: the
// columns past cols are zeros, for readers that take them as values; else they stay unwritten.
// (constant_pad_nd would write the whole output twice: a fill, then the copy.)
inline at::Tensor copy_padded(const at::Tensor& v, int64_t pitch, bool zero_tail) {
  std::vector<int64_t> shape = v.sizes().vec();
  const int64_t cols = shape.back();
  shape.back() = pitch;
  at::Tensor t = at::empty(shape, v.options());
  t.narrow(-1, 0, cols).copy_(v);
  if (zero_tail && pitch > cols) t.narrow(-1, cols, pitch - cols).zero_();
  return t;
}

// A tensor as a Workspace (launch_util.h): its memory, kept while the Workspace lives.
inline Workspace hold(const at::Tensor& t) {
  auto kept = std::make_shared<at::Tensor>(t);
  void* p = kept->data_ptr();
  return Workspace{std::shared_ptr<void>(kept, p), p};
}

}  // namespace cuda
}  // namespace tileops
