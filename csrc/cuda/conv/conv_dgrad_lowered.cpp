// The conv data gradient's lowered rows (routing/conv_dgrad.cu's table), groups == 1: a 1x1
// stride-1 gradient as one GEMM, the phases (one forward conv of dY per phase of dx, on the forward
// table; on Hopper all phases of a strided one in one launch), and dcols = dY . W then col2im. The
// reasons: docs/kernels/conv-lowered.md#data-gradient-conv_dgrad_lowered.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "cuda/conv/dgrad_phases.h"
#include "cuda/conv/lowering.h"
#include "cuda/routing/candidates.h"
#include "cuda/routing/entry.h"
#include "cuda/runtime/cuda_util.h"
#include "cuda/runtime/streams.h"

namespace tileops::cuda {
namespace {

// What phases_in_one (below) takes: a strided data gradient in 16 bits on the Hopper kernels, at
// most kTapOrderMax taps, dx channels_last with sides the strides divide (so every phase's
// output rows are one stride apart in groups: implicit_sm90's rq). It also checks each phase.
bool phases_in_one_ok(const GemmArgs& a) {
  const auto& c = a.conv;
  return (c.sh > 1 || c.sw > 1) && c10::elementSize(a.dtype) == 2 && c.R * c.S <= kTapOrderMax &&
         tileops::nhwc_dense(c.xs, c.C, c.H, c.W) && c.H % c.sh == 0 && c.W % c.sw == 0 &&
         sm90_unavailable(a) == nullptr;
}

// conv_dgrad's heuristic for strides up to 2 x 2: phases (dgrad_phases.h) are sh * sw launches of short
// reductions (1 to 4 taps), which beat GEMM + col2im (a column buffer of R*S / (sh*sw) times dx,
// written and read back) only on Hopper's implicit kernels (16-bit, 64-channel multiples) and a
// large dx (>= 2^24 elements; docs/kernels/conv-lowered.md#data-gradient-conv_dgrad_lowered).
// Where all phases go in one launch (phases_in_one_ok), which costs one transposition and one
// launch instead of a pair per phase, it is taken at every size.
bool dgrad_by_phases(const GemmArgs& a) {
  const auto& c = a.conv;
  if (c10::elementSize(a.dtype) != 2 || c.C % 64 != 0 || c.K % 64 != 0 || sm90_unavailable(a) != nullptr) return false;
  return phases_in_one_ok(a) || c.N * c.C * c.H * c.W >= (int64_t(1) << 24);
}

// A strided data gradient's phases in one Hopper launch (conv_dgrad_phases_sm90): B is one
// weight [C][R*S taps][K] of all taps, flipped and ordered phase after phase (each phase's taps
// as its forward conv reads them: tap j along h is w's last - j * step) by one tap_transpose;
// each phase's output a view of dx in row groups (dx channels_last, sides the strides divide).
// The dead phases, which no tap reaches, go along without k tiles: the launch writes their zeros
// (no fill of dx first). False, with nothing run, where that launch cannot take the problem.
using PhaseList = std::vector<std::pair<int64_t, int64_t>>;  // phases (ah, aw)
bool phases_in_one(const GemmArgs& a, const at::Tensor& dy, const std::vector<DgradPhase>& along_h,
                   const std::vector<DgradPhase>& along_w, const PhaseList& live, const PhaseList& dead) {
  const auto& c = a.conv;
  if (!phases_in_one_ok(a)) return false;
  const int64_t es = int64_t(c10::elementSize(a.dtype)), ld = c.R * c.S * c.K;
  at::Tensor wt = at::empty({c.C, ld}, cuda_options(a.dtype));
  TapTranspose t{c.K, c.C, c.R, c.S, c.ws[0], c.ws[1], c.ws[2], c.ws[3], 1, ld, 0, c.K};
  t.tap_order = int(c.R * c.S);
  // every tap belongs to one phase along each side (dgrad_phases.h); a phase's first position
  auto first_tap = [&](int64_t ah, int64_t aw) {
    int64_t pos = 0;
    for (int64_t i = 0; i < c.sh; ++i)
      for (int64_t j = 0; j < c.sw; ++j)
        if (i < ah || (i == ah && j < aw)) pos += along_h[i].taps * along_w[j].taps;
    return pos;
  };
  for (int64_t ah = 0; ah < c.sh; ++ah) {
    for (int64_t aw = 0; aw < c.sw; ++aw) {
      const DgradPhase &fh = along_h[ah], &fw = along_w[aw];
      for (int64_t jr = 0; jr < fh.taps; ++jr)
        for (int64_t js = 0; js < fw.taps; ++js) {
          const int64_t r = fh.r0 + (fh.taps - 1 - jr) * fh.step, s = fw.r0 + (fw.taps - 1 - js) * fw.step;
          t.order[r * c.S + s] = int16_t(first_tap(ah, aw) + jr * fw.taps + js);
        }
    }
  }
  std::vector<GemmArgs> phases;
  std::vector<int64_t> b_k0;  // each phase's first column of wt
  const void* b = wt.const_data_ptr();
  for (const PhaseList* list : {&live, &dead}) {
    for (const auto& [ah, aw] : *list) {
      b_k0.push_back(first_tap(ah, aw) * c.K);
      GemmArgs f = dgrad_as_forward(a, along_h[ah], along_w[aw], ah, aw, dy.const_data_ptr(), dy.strides().data(),
                                    b, c.ws);
      auto& fc = f.conv;  // its y: the phase's view of dx, as grouped_rows takes it
      if (fc.ys[1] != 1 || fc.ys[0] != fc.P * fc.ys[2]) return false;
      const bool zeros = list == &dead;
      if (zeros) fc.R = fc.S = 1;  // no k tiles (the kernel decodes a first tap with these, never loads it)
      MatmulOperands mm{nullptr, b, fc.y, {0, 0, 0}, {0, 1, ld}, {0, fc.ys[3], 1}};
      mm.rq = fc.Q, mm.srq = fc.ys[2];
      GemmArgs g = lowered(f, Fused{}, 1, fc.N * fc.P * fc.Q, fc.K, zeros ? 0 : fc.R * fc.S * fc.C, mm);
      g.conv = fc;
      phases.push_back(g);
    }
  }
  return conv_dgrad_phases_sm90(phases, b_k0, ld, ld, [&] { tap_transpose(c.w, wt.data_ptr(), t, es); });
}

// A 16-bit 1x1 stride-1 unpadded data gradient is one GEMM: dX rows [N*H*W, C] =
// dY rows [N*P*Q, K] . w as a row-major [K][C] matrix, w read in place (Hopper's TMA takes a B
// contiguous along N; the phase path would first write its flipped transposition, a launch more:
// docs/kernels/conv-lowered.md#data-gradient-conv_dgrad_lowered). dx and dy channels_last-dense,
// w's channels contiguous (1x1 weights, KCRS or channels_last). False: not taken.
bool dgrad_1x1(const GemmArgs& a) {
  const auto& c = a.conv;
  if (!plain_1x1(c) || c10::elementSize(a.dtype) != 2 || c.ws[1] != 1 || !tileops::nhwc_dense(c.xs, c.C, c.H, c.W) ||
      !tileops::nhwc_dense(c.ys, c.K, c.P, c.Q))
    return false;  // refused before any tensor is made
  const at::Tensor dx = wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a);
  const at::Tensor dy = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a);
  const at::Tensor w = device_view(c.w, {c.K, c.C}, {c.ws[0], 1}, a.dtype);
  gemm(a, dy.permute({0, 2, 3, 1}).reshape({c.N * c.P * c.Q, c.K}), w, false,
       dx.permute({0, 2, 3, 1}).reshape({c.N * c.H * c.W, c.C}));
  return true;
}

// A stride-1 data gradient in 16 bits on Hopper with w read in place (conv_dgrad_flipped_sm90): its
// one phase (ph, pw), dx and w channels_last-dense, dx written as the GEMM's rows. False: not taken.
// ... its problem (the forward conv of dy, w read in place, dx written as rows), or why its
// layouts do not allow it.
const char* flipped_args(const GemmArgs& a, const DgradPhase& ph, const DgradPhase& pw, const void* dy,
                         const int64_t* dys, GemmArgs& g) {
  const auto& c = a.conv;
  // (dtype and channel counts: conv_dgrad_flipped_sm90's conv_sm90_ok)
  if (c.groups != 1 || !tileops::nhwc_dense(c.ws, c.C, c.R, c.S) ||
      !tileops::nhwc_dense(c.xs, c.C, c.H, c.W) || ph.out != c.H || pw.out != c.W || ph.taps != c.R || pw.taps != c.S)
    return "w or dx not channels_last dense";
  const GemmArgs f = dgrad_as_forward(a, ph, pw, 0, 0, dy, dys, c.w, c.ws);
  const auto& fc = f.conv;
  MatmulOperands mm{nullptr, c.w, c.x, {0, 0, 0}, {0, 0, 0}, {0, c.C, 1}};
  g = lowered(f, Fused{}, 1, fc.N * fc.P * fc.Q, fc.K, fc.R * fc.S * fc.C, mm);
  g.conv = fc;
  return nullptr;  // the kernel's own checks: conv_dgrad_flipped_sm90(_why_not)
}
bool flipped_in_place(const GemmArgs& a, const DgradPhase& ph, const DgradPhase& pw, const at::Tensor& dy) {
  GemmArgs g;
  return flipped_args(a, ph, pw, dy.const_data_ptr(), dy.strides().data(), g) == nullptr &&
         conv_dgrad_flipped_sm90(g, a.conv.w);
}

// The phases of a's dx along each side, and which of them taps reach (live) or none does (dead).
struct Phases {
  std::vector<DgradPhase> h, w;
  PhaseList live, dead;
};
Phases phases_of(const ConvOperands& c) {
  Phases p;
  for (int64_t ah = 0; ah < c.sh; ++ah) p.h.push_back(dgrad_phase(ah, c.H, c.R, c.sh, c.ph, c.dh));
  for (int64_t aw = 0; aw < c.sw; ++aw) p.w.push_back(dgrad_phase(aw, c.W, c.S, c.sw, c.pw, c.dw));
  // no tap reaches a phase (zeros): none, or all of its dy rows skipped
  auto empty = [](const DgradPhase& f, int64_t rows) { return f.taps == 0 || f.skip >= rows; };
  for (int64_t ah = 0; ah < c.sh; ++ah)
    for (int64_t aw = 0; aw < c.sw; ++aw)
      if (p.h[ah].out > 0 && p.w[aw].out > 0)
        (empty(p.h[ah], c.P) || empty(p.w[aw], c.Q) ? p.dead : p.live).emplace_back(ah, aw);
  return p;
}

// A phase's kernel, (C, K, taps_h, taps_w): its taps r0, r0 + step, ..., last, flipped (tap j is
// w's last - j * step). As read in place: w from its last tap, with negative tap strides.
struct Taps {
  const void* base;
  int64_t ws[4];
};
Taps flipped_taps(const ConvOperands& c, const DgradPhase& fh, const DgradPhase& fw, int64_t es) {
  const int64_t last = (fh.r0 + (fh.taps - 1) * fh.step) * c.ws[2] + (fw.r0 + (fw.taps - 1) * fw.step) * c.ws[3];
  return Taps{static_cast<const char*>(c.w) + last * es, {c.ws[1], c.ws[0], -fh.step * c.ws[2], -fw.step * c.ws[3]}};
}
// ... and as one tap_transpose's copy, rows [C][taps_h][taps_w][K] seen as (C, K, taps_h, taps_w):
// these strides, so that the forward's weight_rows takes them as they are
void phase_rows_strides(const ConvOperands& c, const DgradPhase& fh, const DgradPhase& fw, int64_t* ws) {
  ws[0] = fh.taps * fw.taps * c.K, ws[1] = 1, ws[2] = fw.taps * c.K, ws[3] = c.K;
}

// Whether the phases read dy as it is (the fp32 NCHW forward gathers from it), else a
// channels_last copy of it where gather_ready makes one.
bool phases_read_dy_in_place(const GemmArgs& a) { return simt_gathers(dgrad_as_forward(a, a.conv.w, a.conv.ws), a.conv.ys); }

// The data gradient as one forward conv per phase of dx (dgrad_phases.h, dgrad_phase), on the forward's
// fast paths (1x1 GEMM, Hopper implicit GEMM); the Hopper one-tile kernels write an even-sized
// phase in place; strided ones on Hopper, all phases in one launch (phases_in_one).
void dgrad_phases(const GemmArgs& a) {
  const auto& c = a.conv;
  const at::Tensor dx = wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a);
  // once for all phases, unless the phases gather from dy as it is (its fp32 NCHW forward)
  const at::Tensor dy_in = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a);
  const at::Tensor dy = phases_read_dy_in_place(a) ? dy_in : gather_ready(dy_in);
  const Phases ps = phases_of(c);
  const auto &along_h = ps.h, &along_w = ps.w;
  const auto &live = ps.live, &dead = ps.dead;
  if (phases_in_one(a, dy, along_h, along_w, live, dead)) return;
  // else dead phases filled: where dx is dense, all of it first (a strided fill of a phase took as
  // long), and the live phases at once (concurrently): each 1-2 waves of short reductions
  if (!dead.empty() && dx.is_non_overlapping_and_dense()) {
    dx.zero_();
  } else {
    for (const auto& [ah, aw] : dead) dx.slice(2, ah, c.H, c.sh).slice(3, aw, c.W, c.sw).zero_();
  }
  const int64_t es = int64_t(c10::elementSize(a.dtype));
  auto phase_kernel = [&](const DgradPhase& fh, const DgradPhase& fw) {
    at::Tensor rows = at::empty({c.C, fh.taps, fw.taps, c.K}, cuda_options(a.dtype));
    const Taps f = flipped_taps(c, fh, fw, es);
    const TapTranspose t{c.K, c.C, fh.taps, fw.taps, f.ws[1], f.ws[0], f.ws[2], f.ws[3],
                         1, fh.taps * fw.taps * c.K, fw.taps * c.K, c.K};
    tap_transpose(f.base, rows.data_ptr(), t, es);
    return rows.permute({0, 3, 1, 2});
  };
  std::vector<std::function<void()>> phases;
  for (const auto& [ah, aw] : live) {
    phases.push_back([&, ah = ah, aw = aw] {
      const DgradPhase &ph = along_h[ah], &pw = along_w[aw];
      if (c.sh == 1 && c.sw == 1 && flipped_in_place(a, ph, pw, dy)) return;
      // where the forward table would take the fp32 implicit kernel, it gets the taps in place: its own
      // [tap][c][ldb] copy reads any strides, so the rows copy would be a second pass for nothing
      const Taps f = flipped_taps(c, ph, pw, es);
      const GemmArgs in_place =
          dgrad_as_forward(a, ph, pw, ah, aw, dy.const_data_ptr(), dy.strides().data(), f.base, f.ws);
      if (conv_nchw_1x1_why_not(in_place) != nullptr && conv_simt_f32_why_not(in_place) == nullptr)
        return conv_simt_f32_run(in_place);
      const at::Tensor wt = phase_kernel(ph, pw);
      routing::route(kConvFwdRoutes, dgrad_as_forward(a, ph, pw, ah, aw, dy.const_data_ptr(), dy.strides().data(),
                                                      wt.const_data_ptr(), wt.strides().data()));
    });
  }
  concurrently(phases);
}

// dgrad_phases' decisions, launching nothing: all phases in one Hopper launch, or per live phase
// the flipped in-place kernel, the fp32 implicit kernel on w's taps in place, or the forward table
// (routed here in explain mode) on the rows copy.
void dgrad_phases_explain(const GemmArgs& a, routing::Decision& d) {
  const auto& c = a.conv;
  const Phases ps = phases_of(c);
  if (phases_in_one_ok(a)) {
    d.config = "all " + std::to_string(ps.live.size() + ps.dead.size()) + " phases in one launch (conv_dgrad_phases_sm90)";
    return;
  }
  // dy as the phases read it: in place, or gather_ready's channels_last copy (aligned)
  const void* dy = c.y;
  int64_t dys[4] = {c.ys[0], c.ys[1], c.ys[2], c.ys[3]};
  if (!phases_read_dy_in_place(a) && gather_copies(c.ys, c.y, c.K, int64_t(c10::elementSize(a.dtype)))) {
    dy = reinterpret_cast<const void*>(uintptr_t(256));
    const int64_t s[4] = {c.P * c.Q * c.K, 1, c.Q * c.K, c.K};
    std::copy(s, s + 4, dys);
  }
  const int64_t es = int64_t(c10::elementSize(a.dtype));
  int flipped = 0, simt = 0;
  for (const auto& [ah, aw] : ps.live) {
    const DgradPhase &ph = ps.h[ah], &pw = ps.w[aw];
    GemmArgs g;
    if (c.sh == 1 && c.sw == 1 && flipped_args(a, ph, pw, dy, dys, g) == nullptr &&
        conv_dgrad_flipped_sm90_why_not(g, c.w) == nullptr) {
      ++flipped;
      continue;
    }
    const Taps f = flipped_taps(c, ph, pw, es);
    const GemmArgs in_place = dgrad_as_forward(a, ph, pw, ah, aw, dy, dys, f.base, f.ws);
    if (conv_nchw_1x1_why_not(in_place) != nullptr && conv_simt_f32_why_not(in_place) == nullptr) {
      ++simt;
      continue;
    }
    int64_t ws[4];
    phase_rows_strides(c, ph, pw, ws);
    routing::route(kConvFwdRoutes, dgrad_as_forward(a, ph, pw, ah, aw, dy, dys, reinterpret_cast<const void*>(uintptr_t(256)), ws));
  }
  d.config = std::to_string(ps.live.size()) + " live phase(s)";
  if (flipped) d.config += ", w read in place flipped (conv_dgrad_flipped_sm90)";
  if (simt) d.config += ", the fp32 implicit kernel on w's taps in place";
  if (!ps.dead.empty()) d.config += ", " + std::to_string(ps.dead.size()) + " zero";
}

// The data gradient as dcols = dY . W (a GEMM) and a col2im gather into dx.
void dgrad_col2im(const GemmArgs& a) {
  const auto& c = a.conv;
  const Geom<> g = geom(c);
  const at::Tensor dx = wrap(c.x, {c.N, c.C, c.H, c.W}, c.xs, a);
  const at::Tensor w = wrap(c.w, {c.K, c.C, c.R, c.S}, c.ws, a);
  const at::Tensor dy = wrap(c.y, {c.N, c.K, c.P, c.Q}, c.ys, a).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor wr = weight_rows(w, g.Kp);  // [K, Kp]: B row-major (K x Kp)
  const at::Tensor dy_rows = dy.permute({0, 2, 3, 1}).reshape({c.N * c.P * c.Q, c.K});
  const int64_t per = images_per_chunk(c, g.Kp);
  at::Tensor dcols = at::empty({per * c.P * c.Q, g.Kp}, cuda_options(a.dtype));
  for (int64_t n0 = 0; n0 < c.N; n0 += per) {
    const int64_t nb = std::min(per, c.N - n0), rows = nb * c.P * c.Q;
    gemm(a, dy_rows.narrow(0, n0 * c.P * c.Q, rows), wr, false, dcols.narrow(0, 0, rows));
    col2im(a, dcols, g, n0, nb, dx);
  }
}

// Stride 1: the one phase (the transposed conv). Strides up to 2 x 2: phases or col2im, autotuned
// (family "conv_dgrad"; the heuristic: dgrad_by_phases). Larger strides (patch embeddings: no
// overlap, sh * sw launches) keep col2im, which is then a plain permutation (where the windows tile
// dx exactly, runs_copy_kernel's scatter).
const std::vector<std::string> kDgradNames = {"phases", "col2im"};
const autotune::Family kDgradFamily("conv_dgrad", [] { return kDgradNames; });
std::string dgrad_key(const GemmArgs& a) {
  const auto& c = a.conv;
  return autotune::op_key({"conv_dgrad", c10::toString(a.dtype), autotune::shape_class(c.N * c.H * c.W, c.C, c.K * c.R * c.S, 1),
                           "r" + std::to_string(c.R) + "s" + std::to_string(c.S),
                           "st" + std::to_string(c.sh) + "x" + std::to_string(c.sw)});
}
bool unit_stride(const ConvOperands& c) { return c.sh == 1 && c.sw == 1; }

}  // namespace

// --- the rows ---
const char* dgrad_gemm_1x1_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  const auto& c = a.conv;
  if (!plain_1x1(c) || c10::elementSize(a.dtype) != 2 || c.ws[1] != 1 || !tileops::nhwc_dense(c.xs, c.C, c.H, c.W) ||
      !tileops::nhwc_dense(c.ys, c.K, c.P, c.Q))
    return "not a 16-bit 1x1 stride-1 unpadded conv, dx and dy channels_last dense";
  return nullptr;
}
void dgrad_gemm_1x1_run(const GemmArgs& a) { dgrad_1x1(a); }
void dgrad_gemm_1x1_explain(const GemmArgs& a, routing::Decision&) {
  const auto& c = a.conv;
  explain_gemm(a, c.N * c.P * c.Q, c.C, c.K, false);
}

const char* dgrad_phases_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  return unit_stride(a.conv) ? nullptr : "strided";
}
void dgrad_phases_run(const GemmArgs& a) { dgrad_phases(a); }
void dgrad_phases_row_explain(const GemmArgs& a, routing::Decision& d) { dgrad_phases_explain(a, d); }

const char* dgrad_strided_why_not(const GemmArgs& a) {
  if (const char* why = lowered_why_not(a)) return why;
  const auto& c = a.conv;
  if (unit_stride(c)) return "stride 1";
  return c.sh * c.sw > 4 ? "stride product > 4" : nullptr;
}
void dgrad_strided_run(const GemmArgs& a) {
  autotune::run([&] { return dgrad_key(a); }, kDgradNames, dgrad_by_phases(a) ? 0 : 1,
                [&](int i) { i == 0 ? dgrad_phases(a) : dgrad_col2im(a); });
}
void dgrad_strided_explain(const GemmArgs& a, routing::Decision& d) {
  const bool phases = dgrad_by_phases(a);
  explain_config(d, dgrad_key(a), kDgradNames, phases ? 0 : 1,
                 phases ? "16-bit, 64-channel multiples on Hopper: all phases in one launch, or a large dx"
                        : "the phases' short reductions lose to col2im here");
  routing::Decision how;  // the chosen way's own decisions, under this one
  if (d.config == "phases") {
    dgrad_phases_explain(a, how);
    d.config += ": " + how.config;
  } else {
    dgrad_col2im_explain(a, how);
  }
}

const char* dgrad_col2im_why_not(const GemmArgs& a) { return lowered_why_not(a); }
void dgrad_col2im_run(const GemmArgs& a) { dgrad_col2im(a); }
void dgrad_col2im_explain(const GemmArgs& a, routing::Decision& d) {
  const auto& c = a.conv;
  const int64_t kp = geom(c).Kp, per = images_per_chunk(c, kp);
  d.config = per < c.N ? "in chunks of " + std::to_string(per) + " images" : "";
  explain_gemm(a, std::min(per, c.N) * c.P * c.Q, kp, c.K, false);
}

}  // namespace tileops::cuda
