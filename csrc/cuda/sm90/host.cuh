// The Hopper (wgmma + TMA) family's host side, shared by its translation units: host.cu
// (operand copies, configs and heuristics), ../runtime/tma_maps.cpp (the maps), ../routing/matmul.cu
// (the dispatch), matmul_{bf16,fp16,tf32}.cu (the matmul kernels of one dtype each, instantiated
// from launch.cuh) and ../conv/conv_sm90.cu (the implicit-GEMM conv kernels). One translation
// unit per dtype, because one for all of them was the build's critical path (docs/performance.md#build-and-device-logistics).
#pragma once
#include <cuda.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "common/gemm_args.h"
#include "cuda/runtime/launch_util.h"  // Workspace
#include "cuda/runtime/tma_maps.h"  // tiled_map, im2col_map, tma_type, matrix_map
#include "cuda/sm90/persistent.cuh"  // the whole family: primitives, producers, epilogue, kernels

namespace tileops::cuda::hopper {

// How TMA reads an operand in place: along K, along its rows (M for A, N for B), or not at all.
enum class Major { None, K, MN };
struct TmaLayout {
  Major a = Major::None, b = Major::None;  // MN-major A: column-major M x K (dY^T, x^T of a weight gradient)
  bool ok() const { return a != Major::None && b != Major::None; }
};
TmaLayout sm90_layout(const GemmArgs& g);  // how TMA can read A and B in place
// TF32: how the one-tile kernels' producer threads can read B in place with 16-byte loads (base,
// batch and row strides 16-byte aligned): K-major, MN-major, or not (None: copied).
Major tf32_b_major(const GemmArgs& g);
// The longest K over which they do (launch_sm90_config says why); past it B is copied and rounded.
constexpr int64_t kTf32RegsMaxK = 512;

// An operand TMA cannot read in place is copied once, through the caching allocator, into a
// buffer whose rows are padded to 16 bytes (the padding is never read: the maps' K and N stay
// exact, and TMA zero-fills past them): A row-major (M x K); B K-major (N x K) for fp32, whose
// wgmma takes no MN-major B, else row-major (K x N). The other operand is used in place.
// fp32 runs as TF32 and its copies are rounded on the way (copy_round_tf32); which operands it
// copies: run_sm90_any_layout.
struct Padded {
  Workspace a, b;  // the copies (empty where an operand is read in place)
  GemmArgs args;
};
Padded pad_operands(const GemmArgs& in, const TmaLayout& l);

// Output tiles of a Hopper launch with bm x bn tiles.
inline int64_t output_tiles(const GemmArgs& a, int64_t bn, int64_t bm = sm90::BM) { return tiles_of(a, bm, bn); }

// Split-K factor: only when the output tiles leave most SMs idle and K is long enough that
// each split keeps >= 4 k tiles (skinny M, conv weight gradients); else 1.
int splitk_factor(const GemmArgs& a, int bn, int bk);

// Why the persistent kernels cannot take a problem (nullptr: they can): they stage outputs beside
// the ring, read A K-major and add no residual. The one statement of their limits, for the
// heuristics and the launches alike.
const char* persistent_refusal(const GemmArgs& a, bool a_mn);

// Hopper configs as data: tile width x split-K allowed x two blocks per SM (a 4-stage ring,
// sm90::blocks_per_sm: one block's fill and epilogue overlap the other's main loop, for short
// K) x persistent (the ping-pong and cooperative kernels). The heuristic is sm90_heuristic; split-K
// where splitk_factor says.
enum class Persist { No, PingPong, Coop };
struct Sm90Config {
  const char* name;  // what autotune, pins and explain call it
  int bn;
  bool split, two_blocks;
  Persist persist;
  int cluster;  // persistent: blocks per cluster (2: B multicast to a pair of blocks)
};
extern const Sm90Config kSm90Configs[];
extern const std::vector<std::string> kSm90Names;  // kSm90Configs' names, in order
// A config's index in kSm90Names; call sites keep it in a static (no lookups per call).
int sm90_index(const char* name);

// Clusters of two blocks resident at once, as the heuristics take it: half the SMs, which is what
// the launch's cudaOccupancyMaxActiveClusters answers on an H100/H200, without asking.
inline int64_t resident_clusters(int64_t sms) { return std::max<int64_t>(1, sms / 2); }
// Waves of a persistent kernel's tiles (128 * cluster rows x bn) over what is resident at once:
// one block an SM, or resident_clusters(sms) clusters of two.
inline int64_t persistent_waves(const GemmArgs& a, int64_t bn, int cluster, int64_t sms) {
  const int64_t units = cluster == 2 ? resident_clusters(sms) : sms;
  return (output_tiles(a, bn, 128 * cluster) + units - 1) / units;
}
// Waves of clusters of two over a problem's cluster tiles (256 x bn).
inline int64_t cluster_waves(const GemmArgs& a, int64_t bn, int64_t sms) { return persistent_waves(a, bn, 2, sms); }

// The persistent configs the heuristics choose among (128-row block tiles), with their speed at
// full waves relative to coop128x256-c2's: the three in clusters of two first, which the conv
// forward offers with im2col loads (kClusteredChoices), then the same tiles unclustered (matmul only).
struct PersistentChoice {
  int config;  // index in kSm90Configs
  double speed, speed_tf32;  // 16-bit's, TF32's
};
constexpr int kClusteredChoices = 3, kPersistentChoices = 6;
const std::array<PersistentChoice, kPersistentChoices>& persistent_choices();
// The heuristic's persistent config: its position among the first `n` of persistent_choices()
// (host.cu says how); b_mn: the kernel reads B MN-major (in place, row-major K x N).
int persistent_pick(const GemmArgs& a, int64_t sms, int n = kPersistentChoices, bool b_mn = false);
// The Hopper matmul's config for a's problem, its operands laid out as l, where the autotuner has
// none: an index in kSm90Configs (host.cu says why each).
int sm90_heuristic(const GemmArgs& a, const TmaLayout& l);
// The autotune op key of a Hopper matmul: padded (operands copied for TMA), a_rounded (TF32: A
// copied and rounded, else rounded in registers).
std::string sm90_key(const GemmArgs& a, const TmaLayout& l, bool padded, bool a_rounded);
// Whether a persistent config's block tile is 128 rows (ping-pong 128 x 128, cooperative 128 x 256
// and 128 x 192): the ones the conv forward takes.
bool tm128(const Sm90Config& cfg);

// Matmul on the Hopper kernels of one dtype T, operands laid out as l (run_sm90 picks the config,
// copying what TMA cannot read in place): launch.cuh; instantiated once per dtype, each in
// its own translation unit (matmul_{bf16,fp16,tf32}.cu).
template <typename T>
void run_sm90_any_layout(const GemmArgs& a, TmaLayout l);

}  // namespace tileops::cuda::hopper
