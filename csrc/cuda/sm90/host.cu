// The Hopper family's host side (declared in host.cuh): how TMA reads each operand, the operand
// copies (padding, TF32 rounding), split-K and the configs as data (kSm90Names / kSm90Configs,
// the matmul_sm90 autotune family), persistent_choices and the matmul heuristic. Moved here from
// matmul.cu unchanged.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "autotune/config_names.h"
#include "autotune/cuda_timing.h"
#include "cuda/skinny/gemm_skinny.cuh"  // kSkinnyMaxM
#include "cuda/runtime/cuda_util.h"  // copy_padded, device_view, hold
#include "cuda/runtime/griddep.cuh"
#include "cuda/routing/launch_rungs.cuh"
#include "cuda/ptx/mma_sync.cuh"  // round_tf32
#include "cuda/sm90/host.cuh"

namespace tileops::cuda {
namespace hopper {

namespace {

// Whether TMA can read an operand in place, and along what: 16-byte aligned base and strides,
// and a unit stride along K or, for the 16-bit types, along the operand's rows. (s_batch, s_row,
// s_k): the strides of its (batch, row, k) view; rows: M for A, N for B.
Major operand_major(const void* p, int64_t s_batch, int64_t s_row, int64_t s_k, int64_t rows, int64_t K, int64_t es) {
  auto al16 = [es](int64_t elems) { return (elems * es) % 16 == 0; };
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0 || !al16(s_batch)) return Major::None;
  if (s_k == 1 && al16(s_row) && s_row >= K) return Major::K;
  if (es == 2 && s_row == 1 && al16(s_k) && s_k >= rows) return Major::MN;
  return Major::None;
}

}  // namespace

TmaLayout sm90_layout(const GemmArgs& g) {
  const auto& o = g.mm;
  const int64_t es = c10::elementSize(g.dtype);
  return {operand_major(o.a, o.sa[0], o.sa[1], o.sa[2], g.M, g.K, es),
          operand_major(o.b, o.sb[0], o.sb[2], o.sb[1], g.N, g.K, es)};
}

Major tf32_b_major(const GemmArgs& g) {
  const auto& o = g.mm;  // B's strides: (batch, k, n)
  if (reinterpret_cast<uintptr_t>(o.b) % 16 != 0 || o.sb[0] % 4 != 0) return Major::None;
  if (o.sb[1] == 1 && o.sb[2] % 4 == 0) return Major::K;
  if (o.sb[2] == 1 && o.sb[1] % 4 == 0) return Major::MN;
  return Major::None;
}

namespace {

// One pass for a TF32 operand: a [batch, rows, cols] strided float view is read once and written
// once into a [batch, rows, pitch] buffer, each value rounded to the nearest TF32 (cvt.rna: ties
// away from zero; NaN and Inf kept), so wgmma's truncation of the low 13 bits leaves it as it is.
// 64x64 tiles through shared memory: reads run along whichever of rows and cols has the unit
// stride (B's K-major copy is a transpose), writes along cols. The row padding is never written.
// A thread's 16 loads are all issued before its first store, and four blocks run an SM (64
// registers): both for bandwidth (docs/performance.md#tf32, "Copies").
constexpr int kTile = 64, kTileRowsPerPass = 8, kTileRuns = kTile / kTileRowsPerPass;
__global__ void __launch_bounds__(32 * kTileRowsPerPass, 4)
    copy_round_tf32_kernel(const float* __restrict__ src, int64_t sb, int64_t sr, int64_t sc, float* __restrict__ dst,
                           int64_t rows, int64_t cols, int64_t pitch) {
  griddep_launch_dependents();  // the Hopper GEMM after it (a dependent launch) may set up meanwhile
  __shared__ float tile[kTile][kTile + 1];  // +1: the transposed accesses hit 32 different banks
  const bool along_rows = sr == 1 && sc != 1;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c0 = int64_t(blockIdx.x) * kTile;
  const float* s = src + blockIdx.z * sb;
  float* d = dst + blockIdx.z * rows * pitch;
  for (int64_t r0 = int64_t(blockIdx.y) * kTile; r0 < rows; r0 += int64_t(gridDim.y) * kTile) {
    // this thread's elements (i, h): tile[a_of(i)][b_of(h)], the tile laid out as the output
    // (writes run along b); reads take source element (b, a) where the rows have the unit stride,
    // else (a, b), so that consecutive lanes read consecutive addresses either way
    auto a_of = [&](int i) { return ty + i * kTileRowsPerPass; };
    auto b_of = [&](int h) { return tx + h * 32; };
    float v[kTileRuns][2];
#pragma unroll
    for (int i = 0; i < kTileRuns; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int a = a_of(i), b = b_of(h);
        const int64_t r = r0 + (along_rows ? b : a), c = c0 + (along_rows ? a : b);
        v[i][h] = r < rows && c < cols ? s[r * sr + c * sc] : 0.f;
      }
#pragma unroll
    for (int i = 0; i < kTileRuns; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        (along_rows ? tile[b_of(h)][a_of(i)] : tile[a_of(i)][b_of(h)]) = __uint_as_float(round_tf32(v[i][h]));
      }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTileRuns; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t r = r0 + a_of(i), c = c0 + b_of(h);
        if (r < rows && c < cols) d[r * pitch + c] = tile[a_of(i)][b_of(h)];
      }
    __syncthreads();  // the tile is refilled for the next rows
  }
}

void copy_round_tf32(const at::Tensor& v, const at::Tensor& out) {  // v: [batch, rows, cols]; out: [batch, rows, pitch]
  const int64_t batch = v.size(0), rows = v.size(1), cols = v.size(2);
  if (batch * rows * cols == 0) return;
  const dim3 grid(unsigned((cols + kTile - 1) / kTile), unsigned(std::min<int64_t>((rows + kTile - 1) / kTile, 65535)),
                  unsigned(batch));
  copy_round_tf32_kernel<<<grid, dim3(32, kTileRowsPerPass), 0, at::cuda::getCurrentCUDAStream()>>>(
      v.const_data_ptr<float>(), batch == 1 ? 0 : v.stride(0), v.stride(1), v.stride(2), out.data_ptr<float>(), rows,
      cols, out.size(2));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

Padded pad_operands(const GemmArgs& in, const TmaLayout& l) {
  const auto& o = in.mm;
  const auto opts = cuda_options(in.dtype);
  const int64_t ba = operand_batches(in, o.sa[0]), bb = operand_batches(in, o.sb[0]);
  const int64_t al = 16 / c10::elementSize(in.dtype);
  auto up = [al](int64_t n) { return (n + al - 1) / al * al; };
  // view [batch, rows, cols] -> a [batch, rows, pitch] copy; its (batch, row) strides
  auto padded_rows = [&](const at::Tensor& v) {  // the padding is never read: the TMA map ends at cols
    if (in.dtype != at::kFloat) return copy_padded(v, up(v.size(2)), false);
    at::Tensor t = at::empty({v.size(0), v.size(1), up(v.size(2))}, opts);
    copy_round_tf32(v, t);
    return t;
  };
  auto row_strides = [](const at::Tensor& t) { return std::make_pair(t.size(0) == 1 ? 0 : t.stride(0), t.stride(1)); };
  Padded p{Workspace{}, Workspace{}, in};
  if (l.a == Major::None) {
    const at::Tensor t = padded_rows(device_view(o.a, {ba, in.M, in.K}, {o.sa[0], o.sa[1], o.sa[2]}, in.dtype));
    p.a = hold(t);
    p.args.mm.a = t.const_data_ptr();
    const auto [sb0, sr] = row_strides(t);
    const int64_t sa[3] = {sb0, sr, 1};
    std::copy(sa, sa + 3, p.args.mm.sa);
  }
  if (l.b == Major::None) {
    const auto bv = device_view(o.b, {bb, in.K, in.N}, {o.sb[0], o.sb[1], o.sb[2]}, in.dtype);
    const bool kmajor = in.dtype == at::kFloat;
    const at::Tensor t = padded_rows(kmajor ? bv.transpose(1, 2) : bv);
    p.b = hold(t);
    p.args.mm.b = t.const_data_ptr();
    const auto [sb0, sr] = row_strides(t);
    const int64_t sb[3] = {sb0, kmajor ? 1 : sr, kmajor ? sr : 1};
    std::copy(sb, sb + 3, p.args.mm.sb);
  }
  return p;
}

int splitk_factor(const GemmArgs& a, int bn, int bk) {
  const int64_t tiles = output_tiles(a, bn);
  const int64_t ktiles = (a.K + bk - 1) / bk;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  if (2 * tiles > sms || ktiles < 8) return 1;
  const int64_t s = std::min<int64_t>({sms / tiles, ktiles / 4, 64, 65535 / a.batch});
  if (s < 2) return 1;
  const int64_t per = (ktiles + s - 1) / s;
  return int((ktiles + per - 1) / per);  // no empty split
}

const char* persistent_refusal(const GemmArgs& a, bool a_mn) {
  if (a.residual != nullptr) return "tileops: the persistent Hopper kernels take fp16/bf16 and TF32 without a residual";
  if (a_mn) return "tileops: the persistent Hopper kernels take K-major A";
  if (a.mm.rq > 0) return "tileops: the persistent Hopper kernels store C by TMA, rows of one stride";
  return nullptr;
}

// The configs as data (host.cuh says what each field means): one line each.
const Sm90Config kSm90Configs[] = {
    // name              bn  split  two_blocks persist            cluster
    {"bn64",             64,  true,  false,    Persist::No,       1},
    {"bn128",           128,  true,  false,    Persist::No,       1},
    {"bn256",           256,  true,  false,    Persist::No,       1},
    {"bn64-nosplit",     64,  false, false,    Persist::No,       1},
    {"bn128-nosplit",   128,  false, false,    Persist::No,       1},
    {"bn256-nosplit",   256,  false, false,    Persist::No,       1},
    {"bn64x2",           64,  true,  true,     Persist::No,       1},
    {"pp128",           128,  false, false,    Persist::PingPong, 1},
    {"coop256x128",     128,  false, false,    Persist::Coop,     1},
    {"pp128-c2",        128,  false, false,    Persist::PingPong, 2},
    {"coop256x128-c2",  128,  false, false,    Persist::Coop,     2},
    {"coop128x256",     256,  false, false,    Persist::Coop,     1},
    {"coop128x256-c2",  256,  false, false,    Persist::Coop,     2},
    {"coop128x192",     192,  false, false,    Persist::Coop,     1},
    {"coop128x192-c2",  192,  false, false,    Persist::Coop,     2},
};
const std::vector<std::string> kSm90Names = config_names(kSm90Configs);
const autotune::Family kSm90Family("matmul_sm90", [] { return kSm90Names; });

int sm90_index(const char* name) {
  const auto it = std::find(kSm90Names.begin(), kSm90Names.end(), name);
  TORCH_INTERNAL_ASSERT(it != kSm90Names.end(), "tileops: no Hopper config named ", name);
  return int(it - kSm90Names.begin());
}

// Speeds at full waves, relative to coop128x256-c2's, 16-bit and TF32: each config's time against
// coop128x256-c2's corrected by both wave efficiencies, a median over linear + bias shapes of many
// waves; how they were fitted: docs/kernels/sm90.md#configs-matmul_sm90.
const std::array<PersistentChoice, kPersistentChoices>& persistent_choices() {
  static const std::array<PersistentChoice, kPersistentChoices> kChoices = [] {
    const std::array<PersistentChoice, kPersistentChoices> c = {{{sm90_index("coop128x256-c2"), 1.0, 1.0},
                                                                 {sm90_index("coop128x192-c2"), 0.974, 0.943},
                                                                 {sm90_index("pp128-c2"), 0.887, 0.68},
                                                                 {sm90_index("coop128x256"), 0.996, 0.997},
                                                                 {sm90_index("coop128x192"), 0.963, 0.88},
                                                                 {sm90_index("pp128"), 0.889, 0.69}}};
    // persistent_pick takes choice j + kClusteredChoices as choice j's tile without its cluster
    for (int j = 0; j < kClusteredChoices; ++j) {
      const Sm90Config& c2 = kSm90Configs[c[j].config];
      const Sm90Config& c1 = kSm90Configs[c[j + kClusteredChoices].config];
      TORCH_INTERNAL_ASSERT(c2.cluster == 2 && c1.cluster == 1 && c1.bn == c2.bn && c1.persist == c2.persist,
                            "tileops: persistent choice ", j + kClusteredChoices, " is not choice ", j, "'s twin");
    }
    return c;
  }();
  return kChoices;
}
namespace {
// The share of a persistent config's tile slots over its waves (persistent_waves) that covers C: a
// partial last wave and tiles past the edges are lost.
double wave_efficiency(const GemmArgs& a, const Sm90Config& c, int64_t sms) {
  const int64_t slots = persistent_waves(a, c.bn, c.cluster, sms) * (c.cluster == 2 ? resident_clusters(sms) : sms);
  return double(a.M) * double(a.N) * double(a.batch) / (double(slots) * 128.0 * c.cluster * c.bn);
}
}  // namespace

// The heuristic's persistent config: the best wave efficiency times the config's speed at full
// waves. Ping-pong only for short K (<= 256) or a SiLU epilogue over K <= 1024 at >= 4 waves, where
// its epilogue overlaps the other warpgroup's main loop. An unclustered tile takes its clustered
// twin's speed, and wins ties, where B fits in half the L2 (the multicast pays only where B streams
// from DRAM); for an MN-major B only while the twin makes <= 4 waves. Measured reasons:
// docs/kernels/sm90.md#persistent_pick.
int persistent_pick(const GemmArgs& a, int64_t sms, int n, bool b_mn) {
  const auto& choices = persistent_choices();
  TORCH_INTERNAL_ASSERT(n >= kClusteredChoices && n <= kPersistentChoices, "tileops: persistent_pick over ", n,
                        " choices");
  constexpr int kPingPong = 2;
  const bool act_overlap =
      a.act == Act::Silu && a.K <= 1024 && cluster_waves(a, kSm90Configs[choices[kPingPong].config].bn, sms) >= 4;
  const bool ping_pong = a.K <= 256 || act_overlap;
  const bool tf32 = a.dtype == at::kFloat;
  const double b_bytes =
      double(a.N) * double(a.K) * double(c10::elementSize(a.dtype)) * double(operand_batches(a, a.mm.sb[0]));
  const bool b_resident =
      n > kClusteredChoices && 2.0 * b_bytes <= double(at::cuda::getCurrentDeviceProperties()->l2CacheSize);
  int best = -1;
  double best_score = 0.0;
  for (int j = 0; j < n; ++j) {
    const Sm90Config& c = kSm90Configs[choices[j].config];
    if (ping_pong && c.persist != Persist::PingPong) continue;
    double speed = tf32 ? choices[j].speed_tf32 : choices[j].speed;
    // an unclustered choice's clustered twin sits kClusteredChoices before it (persistent_choices)
    const bool unclustered_resident =
        b_resident && j >= kClusteredChoices && (!b_mn || cluster_waves(a, c.bn, sms) <= 4);
    if (unclustered_resident) {
      const PersistentChoice& twin = choices[j - kClusteredChoices];
      speed = std::max(speed, tf32 ? twin.speed_tf32 : twin.speed);
    }
    const double score = speed * wave_efficiency(a, c, sms);
    if (best < 0 || score > best_score || (unclustered_resident && score == best_score)) best = j, best_score = score;
  }
  return best;
}

// The heuristic: small tiles (bn64, bn64x2, bn64-nosplit) where 128-wide ones would leave SMs
// idle, the persistent kernels from one 128 x 128 tile an SM (persistent_pick), else 256 wide for
// wide outputs, 128 below. The rules below, in the order the expression tests them, and the
// measurements behind each: docs/kernels/sm90.md#the-heuristic-sm90_heuristic-rule-by-rule.
std::string sm90_key(const GemmArgs& a, const TmaLayout& l, bool padded, bool a_rounded) {
  return autotune::op_key({"matmul_sm90", c10::toString(a.dtype), autotune::shape_class(a.M, a.N, a.K, a.batch),
                           std::string(l.a == Major::MN ? "amn+" : "") + (l.b == Major::MN ? "bmn" : "bk") +
                               (padded ? "+pad" : "") +
                               (a_rounded ? "+acopy" : "") +  // TF32: A copied, or rounded in registers
                               // GELU / SiLU epilogues: another best tile (docs/performance.md#epilogue)
                               (a.act == Act::Gelu || a.act == Act::Silu ? "+exp" : "")});
}

int sm90_heuristic(const GemmArgs& a, const TmaLayout& l) {
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const bool tf32 = a.dtype == at::kFloat;
  const int64_t es = int64_t(c10::elementSize(a.dtype)), bk = sm90::ROW_BYTES / es;
  const bool a_mn = l.a == Major::MN, b_mn = l.b == Major::MN;
  const bool can_persist = persistent_refusal(a, a_mn) == nullptr;
  const bool persist = can_persist && output_tiles(a, 128) >= sms;
  const bool x2 = !a_mn &&  // A MN: no bn64
                  (a.N <= 64 || (output_tiles(a, 128) < sms && 2 * output_tiles(a, 64) > sms));
  // 16-bit one-tile kernels that split K (a linear's weight gradient gz^T x) take 128-wide tiles:
  // half the splits, each main loop twice as long per prologue
  const bool split = !tf32 && splitk_factor(a, 128, int(bk)) > 1;
  // one_wave64: at most one 64-wide tile an SM over K <= 1024 runs bn64's 8-stage ring (bn64x2's
  // second block never comes); 16-bit rows not 128-byte aligned (ragged: TMA boxes straddle lines)
  // take pp128, both operands ragged pp128-c2, whose multicast halves the straddling B loads.
  const int64_t pitch_a = a_mn ? a.mm.sa[2] : a.mm.sa[1], pitch_b = b_mn ? a.mm.sb[1] : a.mm.sb[2];
  const bool ragged_a = (pitch_a * es) % 128 != 0, ragged_b = (pitch_b * es) % 128 != 0;
  const bool one_wave64 = x2 && output_tiles(a, 64) <= sms && a.K <= 1024;
  // x2_as_128: where a second 64-wide block an SM would double that SM's time, bn128 (16-bit, or
  // split, or TF32 over K > kTf32RegsMaxK, where both copy B); ragged rows as one_wave64 does.
  const bool x2_as_128 = x2 && !one_wave64 && a.N > 64 && (split || !tf32 || a.K > kTf32RegsMaxK);
  static const int kX2 = sm90_index("bn64x2"), kBn64 = sm90_index("bn64"), kBn256 = sm90_index("bn256"),
                   kBn128 = sm90_index("bn128"), kPp128 = sm90_index("pp128"), kPp128c2 = sm90_index("pp128-c2");
  const bool pp_rows = (ragged_a || ragged_b) && !tf32 && can_persist;
  const bool cluster_rows = pp_rows && ragged_a && ragged_b;
  // both operands ragged, K unsplit: a clustered persistent config in place of bn256 / bn128
  const bool persistent = persist || (cluster_rows && !split);
  // few64: 16-bit, rows aligned, 64-wide tiles fill at most half the SMs over K <= 1024 (batch-1
  // ViT linears): bn64 unsplit, the most blocks without a reduce
  const bool few64 = !a_mn && !tf32 && !pp_rows && !persist && 2 * output_tiles(a, 64) <= sms &&
                     a.K <= 1024;
  static const int kBn64Nosplit = sm90_index("bn64-nosplit");
  // the persistent pick; with an operand ragged, among the clustered configs only
  auto pick = [&] {
    // TF32's persistent kernels read a rounded K-major copy of B
    return persistent_choices()[persistent_pick(a, sms, pp_rows ? kClusteredChoices : kPersistentChoices,
                                                b_mn && !tf32)]
        .config;
  };
  // x2 otherwise: TF32 takes bn64 up to one 64-wide tile an SM (bn64x2 keeps one set of A registers)
  const int heuristic = one_wave64   ? (cluster_rows ? kPp128c2 : pp_rows ? kPp128 : kBn64)
                        : x2_as_128  ? (pp_rows ? (ragged_b ? kPp128c2 : kPp128) : kBn128)
                        : x2         ? (tf32 && output_tiles(a, 64) <= sms ? kBn64 : kX2)
                        : few64      ? kBn64Nosplit
                        : persistent ? pick()
                                     : a.N > 128 && !split ? kBn256 : kBn128;
  return heuristic;
}

bool tm128(const Sm90Config& cfg) { return cfg.persist == Persist::PingPong || cfg.bn != 128; }

}  // namespace hopper
}  // namespace tileops::cuda
