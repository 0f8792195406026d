// Implicit-GEMM conv on Hopper: the forward and the weight gradient as wgmma GEMMs whose A
// (the conv's x) is gathered by cp.async or loaded by TMA in im2col mode (sm90/producers.cuh), tuned
// like matmul's Hopper configs (sm90/launch.cuh).

#include <algorithm>
#include <atomic>
#include <climits>
#include <functional>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "autotune/config_names.h"
#include "cuda/routing/candidates.h"
#include "cuda/routing/entry.h"
#include "cuda/sm90/launch.cuh"

namespace tileops::cuda {
using namespace hopper;
namespace {

// Where the Hopper implicit-GEMM conv kernels can run: 16-bit types, an sm_90a build and GPU,
// x channels_last dense and 16-byte aligned, C a multiple of 64 (a k tile, or an A atom, never
// straddles a tap). N*P*Q is the GEMM's M (forward) or K (weight gradient), so
// sm90_unavailable's size bound also keeps the kernels' 32-bit pixel indices in range.
const char* sm90_conv_refusal(const GemmArgs& g) {
  const auto& c = g.conv;
  if (g.dtype != c10::ScalarType::Half && g.dtype != c10::ScalarType::BFloat16)  // TF32 rounding is not wired into the gather
    return "float32 (the Hopper conv kernels take 16 bits)";
  if (const char* why = sm90_unavailable(g)) return why;
  if (c.C % 64 != 0) return "C % 64 != 0";
  if (g.batch != 1) return "batched";
  if (!nhwc_dense(c.xs, c.C, c.H, c.W) || reinterpret_cast<uintptr_t>(c.x) % 16 != 0)
    return "x not channels_last dense and 16-byte aligned";
  return nullptr;
}
bool conv_sm90_ok(const GemmArgs& g) { return sm90_conv_refusal(g) == nullptr; }

// The im2col map of a conv's x (NHWC, 16-bit) for the Im2col producers: the box of filter-origin
// positions runs from -pad to the last output's origin, (P - 1) * stride - pad (for the usual P,
// pad - dilation * (kernel - 1) past the last pixel, less the stride's remainder; a data
// gradient's phase, dgrad_phases.h, has its own P), stepping by the stride; each load is 64 channels of
// `pixels` output pixels. False where the corners leave the range a 4-D map takes ([-128, 127]),
// an offset or stride does not fit, or the driver refuses the map: the caller then gathers.
bool im2col_map(const GemmArgs& g, int pixels, CUtensorMap* m) {
  const auto& c = g.conv;
  const int64_t lw = -c.pw, lh = -c.ph, uw = (c.Q - 1) * c.sw - c.pw - (c.W - 1) - sm90::kIm2colUpperLess,
                uh = (c.P - 1) * c.sh - c.ph - (c.H - 1) - sm90::kIm2colUpperLess;
  for (int64_t v : {lw, lh, uw, uh})
    if (v < -128 || v > 127) return false;
  if (c.sw > 8 || c.sh > 8 || (c.S - 1) * c.dw > 65535 || (c.R - 1) * c.dh > 65535) return false;
  const bool wh = sm90::kIm2colCornersWH;
  const int lower[2] = {int(wh ? lw : lh), int(wh ? lh : lw)}, upper[2] = {int(wh ? uw : uh), int(wh ? uh : uw)};
  const int64_t es = c10::elementSize(g.dtype);
  const uint64_t dims[4] = {uint64_t(c.C), uint64_t(c.W), uint64_t(c.H), uint64_t(c.N)};
  const uint64_t strides[3] = {uint64_t(c.xs[3] * es), uint64_t(c.xs[2] * es), uint64_t(c.xs[0] * es)};
  const uint32_t estr[4] = {1, uint32_t(c.sw), uint32_t(c.sh), 1};
  return hopper::im2col_map(c.x, g.dtype, 4, dims, strides, lower, upper, sm90::bk<c10::Half>, uint32_t(pixels), estr,
                            m);
}

// fn(T{}) for the 16-bit type of dtype (the Hopper conv kernels' types; conv_sm90_ok checked it).
template <typename Fn>
void with_16bit(c10::ScalarType dtype, Fn&& fn) {
  if (dtype == c10::ScalarType::BFloat16) fn(c10::BFloat16{});
  else fn(c10::Half{});
}

// One of a conv family's candidates, autotuned like matmul's under its own family name, keyed by
// the dtype, the GEMM's (M, N, K) class and `detail`; launch(i, T{}) with T the 16-bit type.
template <typename Launch>
void run_candidates(c10::ScalarType dtype, const char* family, int64_t M, int64_t N, int64_t K,
                    const std::string& detail, const std::vector<std::string>& names, int heuristic,
                    Launch&& launch) {
  autotune::run(
      [&] { return autotune::op_key({family, c10::toString(dtype), autotune::shape_class(M, N, K, 1), detail}); },
      names, heuristic, [&](int i) { with_16bit(dtype, [&](auto tag) { launch(i, tag); }); });
}
// ... for one conv GEMM g, keyed by its kernel size (conv_key: that key)
std::string conv_detail(const GemmArgs& g) { return "r" + std::to_string(g.conv.R) + "s" + std::to_string(g.conv.S); }
std::string conv_key(const GemmArgs& g, const char* family) {
  return autotune::op_key({family, c10::toString(g.dtype), autotune::shape_class(g.M, g.N, g.K, 1), conv_detail(g)});
}
template <typename Launch>
void run_conv_candidates(const GemmArgs& g, const char* family, const std::vector<std::string>& names, int heuristic,
                         Launch&& launch) {
  run_candidates(g.dtype, family, g.M, g.N, g.K, conv_detail(g), names, heuristic, std::forward<Launch>(launch));
}

// The families' candidates (autotune::Family), each described where it runs.
// conv_fwd_sm90's one-tile configs, one line each: the tile width over output channels, the ring's
// stages, and whether A arrives by TMA im2col loads (where an im2col map can be made; else the
// cp.async gather). Then the persistent ones (matmul's clusters of two, by im2col loads), then rows64.
struct ConvSm90Config {
  const char* name;
  int bn, stages;
  bool im2col;
};
constexpr ConvSm90Config kConvFwdSm90Configs[] = {
    // name            bn  stages im2col
    {"bn64",           64, 8,     false},  // one block per SM, a deep ring; no im2col variant
    {"bn128",         128, 6,     false},
    {"bn64x2",         64, 4,     false},  // two blocks per SM (sm90::blocks_per_sm)
    {"bn64x2-im2col",  64, 4,     true},
    {"bn128-im2col",  128, 6,     true},
};
constexpr int kFirstPersist = int(std::size(kConvFwdSm90Configs));
std::vector<std::string> fwd_names() {  // conv_fwd_sm90
  std::vector<std::string> v = config_names(kConvFwdSm90Configs);
  const auto& persist = persistent_choices();  // its first kClusteredChoices: clusters of two
  for (int j = 0; j < kClusteredChoices; ++j) v.push_back(kSm90Names[persist[j].config] + "-im2col");
  v.push_back("rows64");  // conv_fwd_rows64 (conv_smallc_fwd.cu), last: the indices above stay
  return v;
}
const std::vector<std::string>& fwd_candidates() {
  static const std::vector<std::string> v = fwd_names();
  return v;
}
// A conv_fwd_sm90 candidate's index by name, once (the heuristic keeps them in statics).
int fwd_index(const char* name) {
  const auto& v = fwd_candidates();
  const auto it = std::find(v.begin(), v.end(), name);
  TORCH_INTERNAL_ASSERT(it != v.end(), "tileops: no conv_fwd_sm90 candidate named ", name);
  return int(it - v.begin());
}
// conv_wgrad_sm90's: the same tiles as the forward's bn64 / bn128, A gathered or by im2col loads
constexpr ConvSm90Config kConvWgradSm90Configs[] = {
    {"bn64", 64, 8, false}, {"bn128", 128, 6, false}, {"bn64-im2col", 64, 8, true}, {"bn128-im2col", 128, 6, true}};
// conv_dgrad_sm90's (all phases in one launch; im2col loads always)
constexpr ConvSm90Config kConvDgradSm90Configs[] = {{"bn64x2", 64, 4, true}, {"bn128", 128, 6, true}};
const std::vector<std::string> kWgradSm90Names = config_names(kConvWgradSm90Configs);
// conv_wgrad_sm90's heuristic: by im2col loads, 64 wide for at most 64 output channels, else 128
int wgrad_heuristic(const GemmArgs& g) { return g.N <= 64 ? 2 : 3; }  // bn64-im2col, bn128-im2col
const std::vector<std::string> kDgradSm90Names = config_names(kConvDgradSm90Configs);
const autotune::Family kFwdSm90Family("conv_fwd_sm90", fwd_names);
const autotune::Family kWgradSm90Family("conv_wgrad_sm90", [] { return kWgradSm90Names; });
const autotune::Family kDgradSm90Family("conv_dgrad_sm90", [] { return kDgradSm90Names; });

// One conv candidate's launch: tile BN x STAGES, A by TMA im2col loads (IM2COL, map ma) where an
// im2col map was made, else gathered with cp.async (GATHER). MN: A and B MN-major (the weight
// gradient), else both K-major (the forward).
template <typename T, int BN, int STAGES, bool MN, sm90::Gather GATHER, sm90::Gather IM2COL>
void launch_conv(const GemmArgs& g, bool im2col, const CUtensorMap& ma, const CUtensorMap& mb) {
  if (im2col) launch_sm90<T, BN, STAGES, MN, IM2COL, MN>(g, ma, mb, 1, 1);
  else launch_sm90<T, BN, STAGES, MN, GATHER, MN>(g, mb, mb, 1, 1);
}

// The phases of a data gradient (conv_dgrad_phases_sm90) in one launch of tile BN x STAGES, in
// the launch's order (`order`: indices into the phases and their maps and first columns).
template <typename T, int BN, int STAGES>
void launch_phases(const std::vector<GemmArgs>& ph, const std::vector<int>& order, const std::vector<CUtensorMap>& ma,
                   const CUtensorMap& mb, const std::vector<int64_t>& b_k0) {
  TORCH_INTERNAL_ASSERT(ph[0].act == Act::None, "tileops: internal error: an activation on a data gradient");
  auto kernel = sm90::gemm_sm90_phases_kernel<T, BN, STAGES>;
  constexpr size_t smem = sm90::smem_bytes<BN, STAGES, T>();
  static std::atomic<uint64_t> set_on{0};
  allow_smem(kernel, smem, set_on);
  sm90::DgradPhases<T> args;
  int64_t row_tiles = 0;
  bool vec = true;
  for (size_t z = 0; z < order.size(); ++z) {
    const GemmArgs& g = ph[order[z]];
    args.at[z] = {ma[order[z]], g.conv, MatmulProblem<T>(g.mm), g.M, g.K, int(b_k0[order[z]])};
    row_tiles = std::max(row_tiles, (g.M + sm90::BM - 1) / sm90::BM);
    vec = vec && vec_stores<T>(g);
  }
  const int64_t N = ph[0].N;
  const dim3 grid(unsigned(row_tiles), unsigned((N + BN - 1) / BN), unsigned(order.size()));
  DependentLaunch launch(grid, dim3(sm90::THREADS), smem);  // after the flipped copy
  launch(kernel, args, mb, N, epilogue_of<T>(ph[0]), vec);
}

}  // namespace

bool conv_dgrad_phases_sm90(const std::vector<GemmArgs>& phases, const std::vector<int64_t>& b_k0, int64_t cols,
                            int64_t ld, const std::function<void()>& before) {
  const int n = int(phases.size());
  if (n == 0 || n > sm90::kMaxPhases || int(b_k0.size()) != n) return false;
  const GemmArgs& first = phases[0];
  const void* w = first.mm.b;  // every phase's B
  std::vector<CUtensorMap> ma(n);
  for (int i = 0; i < n; ++i) {
    const GemmArgs& g = phases[i];
    if (g.N != first.N || g.dtype != first.dtype || g.residual != nullptr || g.bias != nullptr ||
        g.M >= int64_t(INT_MAX) - sm90::BM || g.mm.b != w || b_k0[i] < 0 || b_k0[i] + g.K > cols)
      return false;
    // a phase of no k tiles writes zeros: it reads neither operand
    if (g.K > 0 && (!conv_sm90_ok(g) || sm90_layout(g).b != Major::K || g.mm.sb[2] != ld ||
                    !im2col_map(g, sm90::BM, &ma[i])))
      return false;
  }
  // heaviest first: the grid's blocks start in blockIdx order (gemm_sm90_phases_kernel)
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int i, int j) { return phases[i].K > phases[j].K; });
  before();
  // The tile (family "conv_dgrad_sm90"): bn64x2 (two blocks per SM, 4-stage rings) or bn128 (one,
  // 6 stages); the phases' reductions are short (1-4 taps), and bn64x2 measured faster, so it is
  // the default, as measured in
  // docs/kernels/conv-sm90.md#strided-data-gradient-in-one-launch-conv_dgrad_phases_sm90-family-conv_dgrad_sm90.
  // (Two 128-wide blocks per SM do not compile: 80 registers a thread leave too few for an m64n128
  // accumulator.)
  int64_t m_all = 0, k_all = 0;
  for (const GemmArgs& g : phases) m_all += g.M, k_all += g.K;
  run_candidates(first.dtype, "conv_dgrad_sm90", m_all, first.N, k_all, "p" + std::to_string(n), kDgradSm90Names, 0,
                 [&](int i, auto tag) {
                   using T = decltype(tag);
                   const ConvSm90Config& c = kConvDgradSm90Configs[i];
                   const CUtensorMap mb = matrix_map(w, first.dtype, cols, first.N, 1, ld, 0, sm90::bk<T>, uint32_t(c.bn));
                   if (c.bn == 64) launch_phases<T, 64, 4>(phases, order, ma, mb, b_k0);
                   else launch_phases<T, 128, 6>(phases, order, ma, mb, b_k0);
                 });
  return true;
}

namespace {
// conv_fwd_sm90's candidates the heuristics name (fwd_names' order: the one-tile kernels, the
// persistent ones from kFirstPersist on, rows64 last).
int rows64_index() {
  static const int i = int(fwd_candidates().size()) - 1;
  return i;
}
int bn64x2_index() {
  static const int i = fwd_index("bn64x2");
  return i;
}
int bn64x2_im2col_index() {
  static const int i = fwd_index("bn64x2-im2col");
  return i;
}
int bn128_im2col_index() {
  static const int i = fwd_index("bn128-im2col");
  return i;
}

// conv_fwd_sm90's heuristic: the candidate for conv g (im2col: whether its x has an im2col map).
int fwd_heuristic(const GemmArgs& g, bool im2col) {
  const auto& persist = persistent_choices();
  static const int kCoop256 = [&] {  // coop128x256-c2-im2col
    for (int j = 0; j < kClusteredChoices; ++j)
      if (persist[j].config == sm90_index("coop128x256-c2")) return kFirstPersist + j;
    TORCH_INTERNAL_ASSERT(false, "tileops: coop128x256-c2 is not a persistent choice");
    return -1;
  }();
  // The heuristic, measured on ResNet-50's layers in
  // docs/kernels/conv-sm90.md#forward-conv_fwd_sm90-family-conv_fwd_sm90:
  // at most 64 output channels, or 64-wide tiles filling at most half the SMs (batch 1, where both
  // widths split K), bn64x2-im2col: two blocks an SM hide each other's epilogue. Else the persistent
  // kernels from two 128 x 128 tiles an SM; below that bn128-im2col, or coop128x256-c2 where its
  // waves of 128 x 256 tiles, counted 1.12x faster per area, take less time than bn128's waves.
  const int64_t sms = sm_count();
  const bool can_persist = im2col && persistent_refusal(g, false) == nullptr;
  // 64 input channels at unit stride, at most 64 output channels (ResNet's 3x3 64@56): rows64
  // (conv_fwd_rows64: the weight resident, each input row loaded once an item by TMA;
  // bn64x2-im2col where its kernel does not apply; docs/kernels/conv-sm90.md#rows64).
  // (the layer's shape is conv_fwd_rows64's to check; here only which layers it is meant for)
  const bool rows64 = g.conv.C == 64 && g.N <= 64 && g.conv.R * g.conv.S > 1;
  int heuristic = im2col ? bn128_im2col_index() : bn64x2_index();
  if (rows64) {
    heuristic = rows64_index();
  } else if (g.N <= 64 || 2 * output_tiles(g, 64) <= sms) {
    heuristic = bn64x2_im2col_index();  // gathers where no im2col map can be made
  } else if (can_persist && output_tiles(g, 128) >= 2 * sms) {
    heuristic = kFirstPersist + persistent_pick(g, sms, kClusteredChoices);
  } else if (can_persist) {
    const int64_t waves128 = (output_tiles(g, 128) + sms - 1) / sms;
    if (2.0 * double(cluster_waves(g, 256, sms)) < 1.12 * double(waves128)) heuristic = kCoop256;
  }
  return heuristic;
}
}  // namespace

const char* conv_fwd_sm90_why_not(const GemmArgs& g) {
  if (const char* why = sm90_conv_refusal(g)) return why;
  if (sm90_layout(g).b != Major::K) return "weight rows not TMA-readable";  // B = weight rows [K, R*S*C], K-major
  return nullptr;
}

void conv_fwd_sm90_explain(const GemmArgs& g, routing::Decision& d) {
  CUtensorMap ma;
  const bool im2col = im2col_map(g, sm90::BM, &ma);
  explain_config(d, conv_key(g, "conv_fwd_sm90"), fwd_candidates(), fwd_heuristic(g, im2col),
                 "fwd_heuristic (conv/conv_sm90.cu)");
}

bool conv_fwd_sm90(const GemmArgs& g) {
  if (conv_fwd_sm90_why_not(g) != nullptr) return false;
  const int64_t sb[3] = {0, g.mm.sb[2], 1};
  // The tile width over output channels, the depth of the ring and how A arrives, autotuned like
  // matmul's (family "conv_fwd_sm90"). bn64 / bn128: one block per SM, deep rings; bn64x2: a
  // 4-stage ring, two blocks per SM (sm90::blocks_per_sm); all three gather A with cp.async.
  // "-im2col": the same tile loaded by TMA in im2col mode (one thread), the cp.async gather where
  // no im2col map can be made. Then the persistent kernels (clusters of two) with A by im2col
  // loads, which need the im2col map and no residual: matmul's persistent_choices(). (A 64-wide
  // ping-pong, pp128x64-c2, was no faster than bn64x2-im2col; dropped, as the heuristic's doc says.)
  const auto& persist = persistent_choices();
  const auto& kNames = fwd_candidates();
  CUtensorMap ma;
  const bool im2col = im2col_map(g, sm90::BM, &ma);
  const int heuristic = fwd_heuristic(g, im2col);
  run_conv_candidates(g, "conv_fwd_sm90", kNames, heuristic, [&](int i, auto tag) {
    using T = decltype(tag);
    constexpr auto G = sm90::Gather::ConvFwd, I = sm90::Gather::ConvFwdIm2col;
    if (i == rows64_index()) {
      if (conv_fwd_rows64(g)) return;
      i = bn64x2_im2col_index();
    }
    if (i >= kFirstPersist) {
      const char* refusal = persistent_refusal(g, false);
      TORCH_CHECK(refusal == nullptr, refusal);
      TORCH_CHECK(im2col, "tileops: the conv_fwd_sm90 candidate ", kNames[i], " loads x by TMA in im2col mode, which ",
                  "this conv's padding, stride or dilation does not allow (the -im2col one-tile candidates gather)");
      const Sm90Config& c = kSm90Configs[persist[i - kFirstPersist].config];
      const CUtensorMap mb = operand_map<T>(g, g.mm.b, g.N, sb, 1, Major::K, uint32_t(c.bn / 2));  // B halves
      launch_persistent_tm128<T, false, 2, I>(c, g, ma, mb, 1, 1);
      return;
    }
    const ConvSm90Config& c = kConvFwdSm90Configs[i];
    const CUtensorMap mb = operand_map<T>(g, g.mm.b, g.N, sb, 1, Major::K, uint32_t(c.bn));
    const bool by_tma = im2col && c.im2col;
    if (c.bn == 64 && c.stages == 8) launch_sm90<T, 64, 8, false, G>(g, mb, mb, 1, 1);
    else if (c.bn == 128 && c.stages == 6) launch_conv<T, 128, 6, false, G, I>(g, by_tma, ma, mb);
    else if (c.bn == 64 && c.stages == 4) launch_conv<T, 64, 4, false, G, I>(g, by_tma, ma, mb);
    else TORCH_INTERNAL_ASSERT(false, "tileops: conv_fwd_sm90 config ", c.name, " has no instantiation");
  });
  return true;
}

namespace {
// conv_dgrad_flipped_sm90's check; where it passes, h and ma are the config and the im2col map
// its launch takes (so the launch does not decide them again).
const char* flipped_check(const GemmArgs& g, const void* w, int& h, CUtensorMap& ma) {
  if (const char* why = sm90_conv_refusal(g)) return why;
  if (g.residual != nullptr || g.bias != nullptr) return "an epilogue";
  if (reinterpret_cast<uintptr_t>(w) % 16 != 0 || g.N % 8 != 0) return "w not in aligned 16-byte rows";
  // The heuristic's path: where autotuning or a pin steers conv_fwd_sm90 for this problem, the
  // caller's transposed weight and conv_fwd_sm90 run instead
  if (autotune::active() && autotune::steered(conv_key(g, "conv_fwd_sm90"))) return "conv_fwd_sm90 steered";
  // Only where conv_fwd_sm90 would take a one-tile im2col kernel on the transposed weight (a wider
  // choice, persistent or rows64, outruns the transposition it needs); decided before any map is
  // encoded, so the caller's path pays no encoding for nothing
  h = fwd_heuristic(g, true);
  if (h != bn64x2_im2col_index() && h != bn128_im2col_index()) return "a wider conv_fwd_sm90 config beats it";
  if (!im2col_map(g, sm90::BM, &ma)) return "no im2col map";
  return nullptr;
}
}  // namespace

const char* conv_dgrad_flipped_sm90_why_not(const GemmArgs& g, const void* w) {
  int h;
  CUtensorMap ma;
  return flipped_check(g, w, h, ma);
}

bool conv_dgrad_flipped_sm90(const GemmArgs& g, const void* w) {
  int h;
  CUtensorMap ma;
  if (flipped_check(g, w, h, ma) != nullptr) return false;
  const auto& c = g.conv;  // the forward conv of dY: C = w's output channels, K (= g.N) its input ones
  const int64_t taps = c.R * c.S;
  with_16bit(g.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr auto I = sm90::Gather::ConvFwdIm2col;
    // w channels_last as [taps][K][C]: rows of K (w's output channels, this GEMM's k) C * taps apart
    const CUtensorMap mb = matrix_map(w, g.dtype, g.N, c.C, taps, taps * g.N, g.N, 64, sm90::bk<T>);
    if (h == bn128_im2col_index()) launch_sm90<T, 128, 6, true, I>(g, ma, mb, 1, 1);
    else launch_sm90<T, 64, 4, true, I>(g, ma, mb, 1, 1);
  });
  return true;
}

const char* conv_wgrad_sm90_why_not(const GemmArgs& g) {
  if (const char* why = sm90_conv_refusal(g)) return why;
  // B = dY rows [N*P*Q, K] (row-major K x N of the GEMM: MN-major)
  if (sm90_layout(g).b != Major::MN) return "dY rows not TMA-readable";
  return nullptr;
}

void conv_wgrad_sm90_explain(const GemmArgs& g, routing::Decision& d) {
  explain_config(d, conv_key(g, "conv_wgrad_sm90"), kWgradSm90Names, wgrad_heuristic(g),
                 g.N <= 64 ? "at most 64 output channels" : "more than 64 output channels");
}

bool conv_wgrad_sm90(const GemmArgs& g) {
  if (conv_wgrad_sm90_why_not(g) != nullptr) return false;
  TORCH_INTERNAL_ASSERT(g.act == Act::None, "tileops: internal error: an activation on a weight gradient");
  const int64_t sb[3] = {0, g.mm.sb[2], g.mm.sb[1]};  // (batch, row = n, k)
  // The tile width over output channels and how A arrives (family "conv_wgrad_sm90"), as the
  // forward's; split-K where splitk_factor says (the reduction N*P*Q is long, the output R*S*C x K
  // small). Im2col loads are 64 pixels (an atom's k-rows) each.
  run_conv_candidates(g, "conv_wgrad_sm90", kWgradSm90Names, wgrad_heuristic(g), [&](int i, auto tag) {
    using T = decltype(tag);
    constexpr auto G = sm90::Gather::ConvWgrad, I = sm90::Gather::ConvWgradIm2col;
    const ConvSm90Config& c = kConvWgradSm90Configs[i];
    const CUtensorMap mb = operand_map<T>(g, g.mm.b, g.N, sb, 1, Major::MN, 64);
    CUtensorMap ma;
    const bool im2col = c.im2col && im2col_map(g, 64, &ma);
    if (c.bn == 64) launch_conv<T, 64, 8, true, G, I>(g, im2col, ma, mb);
    else launch_conv<T, 128, 6, true, G, I>(g, im2col, ma, mb);
  });
  return true;
}

}  // namespace tileops::cuda
