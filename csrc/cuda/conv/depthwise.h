// The depthwise kernels' host side (conv/depthwise_fwd.cu, depthwise_strip.cu, depthwise_grad.cu),
// for the depthwise routing tables (routing/depthwise.cpp): each kernel's check, nullptr where it
// applies, else why not in a few words (pure: no launch, no allocation, no state), and its launch,
// which assumes the check passed. The forward kernels take a forward problem f: the forward
// itself, or a data gradient's (dgrad_as_forward: one output per channel, stride 1), whose kernel
// they read flipped along R and S where `flip`. Host code. The kernels: docs/kernels/depthwise.md.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "common/gemm_args.h"
#include "cuda/runtime/cuda_util.h"

namespace tileops::cuda::depthwise {

// ---- depthwise_fwd.cu: the tile kernels, the vector kernel, the direct kernel

// x and y channels_last dense, aligned to vectors of `bytes`, C a multiple of the vector width,
// K == C; the residual (when given: y's strides) aligned too.
const char* vec_layout_why_not(const GemmArgs& f, int bytes);
// dw_fwd_tile_kernel: channels_last, one output per channel, 16-byte channel vectors, a shape it
// is instantiated for, 32-bit indices. It reads a weight of up to 16 KiB as given, staged per block
// (tile_stages_weight: flipped there where asked), a larger one from an [R, S, C] copy (not flipped:
// launch_tile's flip needs the weight staged).
const char* tile_why_not(const GemmArgs& f);
bool tile_stages_weight(const GemmArgs& f);
void launch_tile(const GemmArgs& f, bool flip);
// dw_fwd_nchw_kernel: the same shapes, x and y NCHW dense (and not as the tile kernel takes them).
const char* nchw_why_not(const GemmArgs& f);
void launch_nchw(const GemmArgs& f, bool flip);
// The tile kernel (flip: only with the weight staged), else the NCHW one: whether one applies,
// and (the conv_depthwise family's 'tile' candidate) it launched where one does, true.
bool tiles_apply(const GemmArgs& f, bool flip);
bool launch_tiles(const GemmArgs& f, bool flip);
// dw_fwd_vec_kernel (16 bytes of channels a thread, an [R, S, C] weight copy), and dw_fwd_kernel
// (any problem). Neither reads the weight flipped: a data gradient gives them a flipped copy.
const char* vec_why_not(const GemmArgs& f);
void launch_vec(const GemmArgs& f);
void launch_direct(const GemmArgs& f);

// fn(g): g is f reading a copy of its weight flipped along R and S, kept until fn returns.
template <typename Fn>
void with_flipped_weight(const GemmArgs& f, Fn&& fn) {
  const auto& c = f.conv;
  const at::Tensor wf = device_view(c.w, {c.K, 1, c.R, c.S}, at::IntArrayRef(c.ws, 4), f.dtype).flip({2, 3});
  GemmArgs g = f;
  g.conv.w = const_cast<void*>(wf.const_data_ptr());
  for (int i = 0; i < 4; ++i) g.conv.ws[i] = wf.stride(i);
  fn(g);
}

// ---- depthwise_strip.cu: family conv_depthwise (the 3x3 stride-1 forward and data gradient)

// Whether dw_fwd_strip_kernel applies (and so the family runs).
const char* strip_why_not(const GemmArgs& f);
// The family's candidates, its autotune key (flip: the data gradient's own key), and the
// heuristic's candidate and its reason in words.
const std::vector<std::string>& strip_names();
std::string strip_key(const GemmArgs& f, bool flip);
int strip_heuristic(const GemmArgs& f);
const char* strip_heuristic_reason(int heuristic);
// Where candidate `name` runs another kernel on f (its own does not apply), " (...)" saying which
// and why; else "".
std::string strip_stand_in(const GemmArgs& f, bool flip, const std::string& name);
// The family: autotune::run over its candidates.
void run_strip(const GemmArgs& f, bool flip);

// ---- depthwise_grad.cu: the data gradient's own kernel and the weight gradient

// dw_dgrad_kernel: any data gradient (the flipped forward covers one output per channel at stride 1).
void launch_dgrad(const GemmArgs& a);
// dw_wgrad_vec_kernel's partial sums, else dw_wgrad_kernel's, of channels_last copies of x and dY
// (none where they are so already), then dw_wgrad_finish_kernel.
const char* wgrad_vec_why_not(const GemmArgs& a);
void launch_wgrad(const GemmArgs& a, bool vec);

}  // namespace tileops::cuda::depthwise
