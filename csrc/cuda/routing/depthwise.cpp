// The depthwise routing tables (CUDA): groups == C > 1, one table per conv kind, reached from the
// conv tables' "depthwise" row. The first candidate that can run the problem runs it
// (routing/route.h); docs/dispatch.md is made from these tables. The kernels, their checks and
// launches: conv/depthwise.h (docs/kernels/depthwise.md).
//
// A data gradient with one output per channel at stride 1 is the forward of dY with the kernel
// flipped along (R, S) (dgrad_as_forward): the grad_input table's first rows are the forward
// table's (the same checks and launches on that forward problem, flip = true: the Flip template
// parameter below), then dw_dgrad for the rest. The strip and tile kernels take the flip and a
// kernel of up to 16 KiB from the weight as it is, staged in shared memory per block: no permuted
// or flipped copy, which cost an allocation and a launch each (host time the b32 rows are bound
// by). The rest read a flipped copy.
#include "cuda/conv/depthwise.h"
#include "cuda/conv/dgrad_phases.h"
#include "cuda/routing/candidates.h"

namespace tileops::cuda {

bool is_depthwise(const ConvOperands& c) { return c.groups == c.C && c.Cg == 1 && c.groups > 1; }

namespace {

// The forward problem the kernels run: the forward itself, or (Flip) a data gradient's forward of
// dY, whose kernel they read flipped.
template <bool Flip>
GemmArgs forward_of(const GemmArgs& a) {
  if constexpr (Flip) return dgrad_as_forward(a, a.conv.w, a.conv.ws);
  else return a;
}
// Why a data gradient is not that forward (nullptr: it is; always for the forward).
template <bool Flip>
const char* flip_why_not(const GemmArgs& a) {
  if constexpr (Flip) {
    if (a.conv.K != a.conv.C) return "channel multiplier > 1";
    if (!dgrad_as_forward_ok(a.conv)) return "stride > 1, or padding past the dilated kernel";
  }
  return nullptr;
}
// A forward kernel's check on the forward problem, after flip_why_not.
template <bool Flip, const char* (*WhyNot)(const GemmArgs&)>
const char* fwd_why_not(const GemmArgs& a) {
  if (const char* why = flip_why_not<Flip>(a)) return why;
  return WhyNot(forward_of<Flip>(a));
}
// A forward kernel that reads the weight as given only: on a flipped copy where Flip.
template <bool Flip, void (*Launch)(const GemmArgs&)>
void fwd_unflipped_run(const GemmArgs& a) {
  if constexpr (Flip) depthwise::with_flipped_weight(forward_of<Flip>(a), Launch);
  else Launch(a);
}

// family conv_depthwise: autotuned (its key, heuristic and candidates: depthwise_strip.cu)
template <bool Flip>
void strip_run(const GemmArgs& a) {
  depthwise::run_strip(forward_of<Flip>(a), Flip);
}
template <bool Flip>
void strip_explain(const GemmArgs& a, routing::Decision& d) {
  const GemmArgs f = forward_of<Flip>(a);
  const int heuristic = depthwise::strip_heuristic(f);
  explain_config(d, depthwise::strip_key(f, Flip), depthwise::strip_names(), heuristic,
                 depthwise::strip_heuristic_reason(heuristic));
  d.config += depthwise::strip_stand_in(f, Flip, d.config);
}

// The tile kernel: a weight of up to 16 KiB staged (read flipped there where Flip), a larger one
// from an [R, S, C] copy (of a flipped copy where Flip).
template <bool Flip>
void tile_run(const GemmArgs& a) {
  const GemmArgs f = forward_of<Flip>(a);
  if (!Flip || depthwise::tile_stages_weight(f)) return depthwise::launch_tile(f, Flip);
  depthwise::with_flipped_weight(f, [](const GemmArgs& g) { depthwise::launch_tile(g, false); });
}
template <bool Flip>
void nchw_run(const GemmArgs& a) {
  depthwise::launch_nchw(forward_of<Flip>(a), Flip);
}

const char* always(const GemmArgs&) { return nullptr; }

// A weight gradient with no output pixels (an empty batch): dW is zeros. (Every groups == C
// problem reaches this table; the generic implicit GEMM used to take the empty ones.)
const char* wgrad_empty_why_not(const GemmArgs& a) {
  const auto& c = a.conv;
  return c.N * c.P * c.Q == 0 ? nullptr : "output pixels to sum";
}
void wgrad_empty_run(const GemmArgs& a) {
  const auto& c = a.conv;
  device_view(c.w, {c.K, 1, c.R, c.S}, at::IntArrayRef(c.ws, 4), a.dtype).zero_();
}
void wgrad_vec_run(const GemmArgs& a) { depthwise::launch_wgrad(a, true); }
void wgrad_run(const GemmArgs& a) { depthwise::launch_wgrad(a, false); }

constexpr const char* kFamilyDoc =
    "kernels/depthwise.md#family-conv_depthwise-the-33-stride-1-forward-and-data-gradient";
constexpr const char* kTileDoc = "kernels/depthwise.md#the-tile-kernels";
constexpr const char* kPageDoc = "kernels/depthwise.md";
constexpr const char* kWgradDoc = "kernels/depthwise.md#weight-gradient";

// The forward kernels' rows, in order, with the words of the forward or (Flip) the data gradient's.
template <bool Flip>
std::vector<routing::Route> forward_rows() {
  using namespace depthwise;
  auto when = [](const char* forward, const char* dgrad) { return Flip ? dgrad : forward; };
  return {
      {"conv_depthwise",
       when("3x3 at unit stride and dilation, one output per channel, channels_last, C % 4 == 0, weight <= 16 KiB; "
            "autotuned: strips of rows, the tile kernel, the row ring (sm_90)",
            "one output per channel at stride 1 (the forward of dY, kernel flipped): 3x3 undilated, channels_last, "
            "C % 4 == 0, weight <= 16 KiB; autotuned"),
       kFamilyDoc, fwd_why_not<Flip, strip_why_not>, strip_run<Flip>, strip_explain<Flip>},
      {"dw_fwd_tile",
       when("channels_last, one output per channel, 16-byte channel vectors; 3x3/5x5/7x7 at stride 1, 3x3/5x5 at "
            "stride 2",
            "the flipped forward, channels_last with 16-byte channel vectors, the tile kernel's shapes (a weight "
            "over 16 KiB from a flipped copy)"),
       kTileDoc, fwd_why_not<Flip, tile_why_not>, tile_run<Flip>},
      {"dw_fwd_nchw",
       when("NCHW dense x and y (any dtype), the tile kernel's shapes, any channel multiplier",
            "the flipped forward, NCHW dense x and y (any dtype), the tile kernel's shapes"),
       kTileDoc, fwd_why_not<Flip, nchw_why_not>, nchw_run<Flip>},
      {"dw_fwd_vec",
       when("other channels_last shapes with 16-byte channel vectors, one output per channel (an [R, S, C] weight "
            "copy)",
            "the flipped forward, other channels_last shapes with 16-byte channel vectors (a flipped weight copy)"),
       kPageDoc, fwd_why_not<Flip, vec_why_not>, fwd_unflipped_run<Flip, launch_vec>},
      {"dw_fwd",
       when("everything else: a walk over the output", "the flipped forward otherwise (a flipped weight copy)"),
       kPageDoc, fwd_why_not<Flip, always>, fwd_unflipped_run<Flip, launch_direct>},
  };
}

std::vector<routing::Route> dgrad_rows() {
  std::vector<routing::Route> rows = forward_rows<true>();
  rows.push_back({"dw_dgrad", "everything else (channel multiplier > 1, stride > 1): a walk over dx", kPageDoc, always,
                  depthwise::launch_dgrad});
  return rows;
}

}  // namespace

const routing::Table kDepthwiseFwdRoutes("conv2d.depthwise.forward", "depthwise conv2d forwards (groups == C > 1)",
                                         forward_rows<false>());

const routing::Table kDepthwiseDgradRoutes("conv2d.depthwise.grad_input", "depthwise conv2d data gradients",
                                           dgrad_rows());

const routing::Table kDepthwiseWgradRoutes(
    "conv2d.depthwise.grad_weight", "depthwise conv2d weight gradients",
    {
        {"zeros", "no output pixels (an empty batch): dW is zeros", kWgradDoc, wgrad_empty_why_not, wgrad_empty_run},
        {"dw_wgrad_vec",
         "one output per channel, C a multiple of 16 bytes, a 3, 5 or 7 wide kernel (channels_last copies)", kWgradDoc,
         depthwise::wgrad_vec_why_not, wgrad_vec_run},
        {"dw_wgrad", "everything else: a tap a block, a channel a lane", kWgradDoc, always, wgrad_run},
    });

}  // namespace tileops::cuda
