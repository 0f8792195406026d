// Matmul on the generic rungs (naive ... vectorized, mma): every kernel instantiated for
// MatmulProblem lives in this translation unit, which compiles beside the Hopper ones.
#include <string>
#include <vector>

#include "autotune/cuda_timing.h"
#include "autotune/config_names.h"
#include "cuda/runtime/launch_util.h"
#include "cuda/skinny/gemm_skinny.cuh"
#include "cuda/routing/candidates.h"
#include "cuda/routing/launch_rungs.cuh"
#include "cuda/splitk/splitk.cuh"

namespace tileops::cuda {
namespace {

// How simt_splitk cuts K for `tiles` output tiles: `full` chunks of kc (a multiple of the k tile,
// which keeps the 16-byte loads), then a remainder chunk of rem, in at most splitk_count's chunks.
// kc is rounded up: rounded down it made one chunk more, a part-filled extra wave
// (docs/kernels/ladder.md#split-k-of-the-simt-rungs-simt_splitk).
struct SimtChunks {
  int64_t kc = 0, full = 1, rem = 0;
  int64_t splits() const { return full + (rem > 0); }
};
SimtChunks simt_chunks(const GemmArgs& a, int64_t tiles, int64_t min_k = kMinSplitK) {
  SimtChunks c;
  const int64_t want = a.batch == 1 ? splitk_count(tiles, a.K, min_k) : 1;
  if (want < 2) return c;
  c.kc = (a.K + want * 16 - 1) / (want * 16) * 16;  // rounded up: at most `want` chunks
  c.full = a.K / c.kc, c.rem = a.K % c.kc;
  return c;
}

// Split-K for the SIMT rungs 'auto' runs for fp32 (TF32 off) and fp64, where the output tiles
// would leave most SMs idle and K is long (conv weight gradients, K = N*P*Q; skinny M): K is cut
// into chunks that run as a batch (chunk j's operands start at k = j*kc) writing the partial
// products to a workspace [splits, M, N], which splitk_reduce sums in a fixed order before the
// epilogue. `tiles`: the output tiles of the kernel that runs; launch(g, k_last) runs it on chunk
// args g, the last chunk's K being k_last where that is not 0, and returns false (launching
// nothing) where it cannot: the remainder chunk then takes a launch of its own, which runs after
// the others (slower: docs/kernels/ladder.md#split-k-of-the-simt-rungs-simt_splitk). False: not
// split (nothing launched).
template <class Launch>
bool simt_splitk(const GemmArgs& a, int64_t tiles, Launch&& launch, int64_t min_k = kMinSplitK) {
  const SimtChunks ch = simt_chunks(a, tiles, min_k);
  const int64_t splits = ch.splits(), kc = ch.kc, full = ch.full, rem = ch.rem;
  if (splits < 2) return false;
  const Workspace work = workspace(splits * a.M * a.N, a.dtype);
  const int64_t es = int64_t(c10::elementSize(a.dtype));
  auto chunk = [&](int64_t first, int64_t count, int64_t k) {  // `count` chunks of k, from chunk `first`
    GemmArgs g = a;
    g.fused() = Fused{};
    g.batch = count;
    g.K = k;
    g.mm.a = static_cast<const char*>(a.mm.a) + first * kc * a.mm.sa[2] * es;
    g.mm.b = static_cast<const char*>(a.mm.b) + first * kc * a.mm.sb[1] * es;
    g.mm.c = static_cast<char*>(work.ptr) + first * a.M * a.N * es;
    const int64_t sa0 = kc * a.mm.sa[2], sb0 = kc * a.mm.sb[1], sc[3] = {a.M * a.N, a.N, 1};
    g.mm.sa[0] = sa0;
    g.mm.sb[0] = sb0;
    std::copy(sc, sc + 3, g.mm.sc);
    return g;
  };
  if (rem == 0 || !launch(chunk(0, splits, kc), rem)) {
    launch(chunk(0, full, kc), 0);
    if (rem > 0) launch(chunk(full, 1, rem), 0);
  }
  with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value)
      splitk_reduce<T, T>(work.as<T>(), int(splits), a);
  });
  return true;
}

// 'vectorized' 64 x 64 (4 warps of 32 x 32, 8 x 4 outputs a thread, 4 blocks per SM): 4x the
// tiles of 128 x 128, for medium problems whose large tiles leave SMs idle.
using VecF32Small = VecConfig<64, 64, 16, 2, 2, 8, 4, 4>;
// 64 x 64 warp tiles (16 x 8 outputs a thread, 217 registers): 6 fragment loads for 128 FFMAs a k
// step, against 128 x 128's 4 for 64. 256 x 128, 8 warps, one block per SM: the tile of cuBLAS's
// fp32 kernel on Hopper (sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3), BK 8 for
// the static shared memory's 48 KiB. Where it wins, and the tiles tried beside it and removed:
// docs/kernels/ladder.md#w256-and-the-tiles-tried-beside-it.
using VecF32W256 = VecConfig<256, 128, 8, 4, 2, 16, 8, 1>;

// The SIMT configs 'auto' chooses from for an fp32 matmul (TF32 off), as data: the kernel and
// its block tile, and whether K may be split (simt_splitk, on that tile's count). Autotune
// family "matmul_simt"; the heuristic is simt_heuristic. 'vectorized' 128 x 128 runs 128 x 64
// where N <= 64 (launch_vectorized). min_k: the shortest K chunk of a split (splitk_count); the
// -k32 / -k64 configs cut small problems finer, each block then running fewer k tiles, which bound
// a block's time where a few dozen blocks share the GPU.
enum class SimtTile { Vec128, Vec128x64, Vec64, Reg64, W256 };
struct SimtChoice {
  const char* name;
  SimtTile tile;
  int bm, bn;
  bool split;
  int64_t min_k = kMinSplitK;
};
constexpr SimtChoice kSimtConfigs[] = {
    {"vec128", SimtTile::Vec128, VecF32::BM, VecF32::BN, true},
    {"vec128x64", SimtTile::Vec128x64, VecF32N64::BM, VecF32N64::BN, true},
    {"vec64", SimtTile::Vec64, VecF32Small::BM, VecF32Small::BN, true},
    {"reg64", SimtTile::Reg64, Simt::BM, Simt::BN, true},
    {"vec128-nosplit", SimtTile::Vec128, VecF32::BM, VecF32::BN, false},
    {"vec128x64-nosplit", SimtTile::Vec128x64, VecF32N64::BM, VecF32N64::BN, false},
    {"vec64-nosplit", SimtTile::Vec64, VecF32Small::BM, VecF32Small::BN, false},
    {"reg64-nosplit", SimtTile::Reg64, Simt::BM, Simt::BN, false},
    {"vec64-k64", SimtTile::Vec64, VecF32Small::BM, VecF32Small::BN, true, 64},
    {"vec64-k32", SimtTile::Vec64, VecF32Small::BM, VecF32Small::BN, true, 32},
    {"w256", SimtTile::W256, VecF32W256::BM, VecF32W256::BN, true},
};
constexpr int kSimtVec128 = 0, kSimtVec128x64 = 1, kSimtVec64 = 2, kSimtVec64K32 = 9, kSimtW256 = 10;
static_assert(kSimtConfigs[kSimtVec64K32].tile == SimtTile::Vec64 && kSimtConfigs[kSimtVec64K32].min_k == 32,
              "kSimtVec64K32 names vec64-k32");
static_assert(kSimtConfigs[kSimtW256].tile == SimtTile::W256 && kSimtConfigs[kSimtW256].split, "kSimtW256 names w256");
const autotune::Family kSimtFamily("matmul_simt", [] { return config_names(kSimtConfigs); });

// One config on problem a (its chunks, where it splits). The vectorized kernel takes a last
// chunk of its own K (gemm_vec_kernel's k_last) where launch_vectorized can; 'register' cannot.
void launch_simt(const GemmArgs& a, const SimtChoice& c) {
  auto launch = [&](const GemmArgs& g, int64_t k_last) {
    const MatmulProblem<float> p(g.mm);
    switch (c.tile) {
      case SimtTile::Vec128: return launch_vectorized<float>(p, g, k_last);
      case SimtTile::Vec128x64: return launch_vectorized<float, VecF32N64>(p, g, k_last);
      case SimtTile::Vec64: return launch_vectorized<float, VecF32Small>(p, g, k_last);
      case SimtTile::W256: return launch_vectorized<float, VecF32W256>(p, g, k_last);
      case SimtTile::Reg64: break;
    }
    if (k_last > 0) return false;
    launch_gemm<Simt, float>(p, g);
    return true;
  };
  if (!c.split || !simt_splitk(a, tiles_of(a, c.bm, c.bn), launch, c.min_k)) launch(a, 0);
}

// A config's output tiles on problem a, its K chunks there (simt_splitk's) and the blocks they make.
struct SimtGrid {
  int64_t tiles;
  SimtChunks ch;
  int64_t blocks;
};
SimtGrid simt_grid(const GemmArgs& a, const SimtChoice& c) {
  const int64_t tiles = tiles_of(a, c.bm, c.bn);
  const SimtChunks ch = simt_chunks(a, tiles, c.min_k);
  return {tiles, ch, tiles * ch.splits()};
}

// w256 where its tiles are nearly full (90% of their outputs inside C), each of its blocks runs at
// least 384 of K and they fill their waves of one block per SM to 96%: a last wave part empty
// leaves SMs idle for a whole w256 block, where vec128's lone last blocks run faster on theirs.
// Fill aside where vec128's own blocks fill under 3/4 of their slots. Not with GELU or SiLU (erff /
// expf on 128 outputs a thread). Measured:
// docs/kernels/ladder.md#the-heuristic-simt_heuristic-and-its-reasons.
bool w256_fits(const GemmArgs& a, int64_t sms) {
  if (a.act == Act::Gelu || a.act == Act::Silu) return false;
  const SimtChoice& w = kSimtConfigs[kSimtW256];
  const SimtGrid g = simt_grid(a, w), v = simt_grid(a, kSimtConfigs[kSimtVec128]);  // v: two blocks per SM
  const int64_t waves = (g.blocks + sms - 1) / sms;
  const bool full = 10 * a.batch * a.M * a.N >= 9 * g.tiles * w.bm * w.bn;  // outputs inside C
  if (!full || (g.ch.splits() > 1 ? g.ch.kc : a.K) < 384) return false;
  return 25 * g.blocks >= 24 * waves * sms || 4 * v.blocks < 3 * 2 * sms;
}

// w256 where w256_fits, else the largest 'vectorized' tile whose blocks (tiles x K chunks) number
// at least 3/4 of the SMs and whose K chunks are all whole (a remainder chunk takes the slower
// RAGGED kernel); else the smallest, whose blocks are the most, its K cut in chunks from 32
// (vec64-k32) where even its blocks fill at most half the SMs: each block's time is then its k
// tiles' latency. Batched problems (never split) want 3/4 of two blocks per SM. Measured reasons:
// docs/kernels/ladder.md#the-heuristic-simt_heuristic-and-its-reasons.
int simt_heuristic(const GemmArgs& a) {
  const int64_t sms = sm_count();
  if (w256_fits(a, sms)) return kSimtW256;
  const int64_t enough = (a.batch > 1 ? 2 : 1) * sms;
  int most = kSimtVec128;
  int64_t most_blocks = 0;
  for (int i : {kSimtVec128, kSimtVec128x64, kSimtVec64}) {
    const SimtGrid g = simt_grid(a, kSimtConfigs[i]);
    if (4 * g.blocks >= 3 * enough && g.ch.rem == 0) return i;
    if (g.blocks > most_blocks) most = i, most_blocks = g.blocks;
  }
  return most == kSimtVec64 && 2 * most_blocks <= sms ? kSimtVec64K32 : most;
}

std::string simt_key(const GemmArgs& a) {
  return autotune::op_key({"matmul_simt", c10::toString(a.dtype), autotune::shape_class(a.M, a.N, a.K, a.batch),
                           vec_layout(a, 4).fast ? "vec" : "elem"});
}
const std::vector<std::string>& simt_names() {
  static const std::vector<std::string> kNames = config_names(kSimtConfigs);
  return kNames;
}

// fp32 and fp64 'auto' on the SIMT rungs (Kind::Matmul, no tensor cores): fp32 through the
// "matmul_simt" autotune site, fp64 on 'register', split where its tiles leave SMs idle.
void run_simt(const GemmArgs& a) {
  if (a.dtype != c10::ScalarType::Float) {
    auto launch = [](const GemmArgs& g, int64_t k_last) {
      if (k_last > 0) return false;
      launch_gemm<Simt, double>(MatmulProblem<double>(g.mm), g);
      return true;
    };
    if (!simt_splitk(a, tiles_of(a, Simt::BM, Simt::BN), launch)) launch(a, 0);
    return;
  }
  autotune::run([&] { return simt_key(a); }, simt_names(), simt_heuristic(a),
                [&](int i) { launch_simt(a, kSimtConfigs[i]); });
}

// Calls fn(std::integral_constant<int, MT>{}) for the skinny kernel's row count MT >= M.
template <typename Fn>
void with_rows(int64_t M, Fn&& fn) {
  if (M <= 1) fn(std::integral_constant<int, 1>{});
  else if (M <= 2) fn(std::integral_constant<int, 2>{});
  else if (M <= 4) fn(std::integral_constant<int, 4>{});
  else if (M <= 8) fn(std::integral_constant<int, 8>{});
  else fn(std::integral_constant<int, kSkinnyMaxM>{});
}

// K chunks for `blocks` blocks per chunk when `slots` blocks are resident at once: a block's time
// is about its chunk's length (each warp streams its rows at the latency of a few loads), so the
// cost of s chunks is waves(s) / s. The fewest chunks within 5% of the best up to `most`.
int64_t skinny_splits(int64_t blocks, int64_t slots, int64_t most) {
  auto cost = [&](int64_t s) { return double((blocks * s + slots - 1) / slots) / double(s); };
  double best = cost(1);
  for (int64_t s = 2; s <= most; ++s) best = std::min(best, cost(s));
  int64_t s = 1;
  while (cost(s) > 1.05 * best) ++s;
  return s;
}

// The skinny kernel for T (float or double) on problem a. K is cut into chunks as skinny_splits
// says, while the chunks' partial sums (T, M x N each) stay within a quarter of B's bytes
// (splits <= K / 4M) and each chunk is at least two block steps.
template <typename T>
void launch_skinny(const GemmArgs& a) {
  constexpr int VMAX = int(16 / sizeof(T));
  const bool kmajor = a.mm.sb[1] == 1 && a.mm.sb[2] != 1;
  // 16-byte vectors where B's pointer and strides keep every one aligned
  const int64_t across = kmajor ? a.mm.sb[2] : a.mm.sb[1];  // the stride that is not 1
  const bool vec = (kmajor || a.mm.sb[2] == 1) && across % VMAX == 0 && a.mm.sb[0] % VMAX == 0 &&
                   reinterpret_cast<uintptr_t>(a.mm.b) % 16 == 0;
  const int64_t sms = sm_count();
  auto go = [&](auto mt, auto km, auto v) {
    constexpr int MT = decltype(mt)::value, V = decltype(v)::value;
    constexpr bool KM = decltype(km)::value;
    using S = SkinnyShape<KM, V>;
    const auto kernel = gemm_skinny_kernel<T, MT, KM, V>;
    static PerDevice kept{};
    const int per_sm = resident_blocks_kept(kept, kernel, S::kThreads);
    const int64_t blocks = (a.N + S::BN - 1) / S::BN * a.batch;
    const int64_t most = std::max<int64_t>(1, std::min<int64_t>({64, a.K / (4 * a.M), a.K / (2 * S::ROUND)}));
    const int64_t want = skinny_splits(blocks, per_sm * sms, most);
    const int64_t kc = std::max<int64_t>(1, (a.K + want * S::ROUND - 1) / (want * S::ROUND)) * S::ROUND;
    const int64_t splits = std::max<int64_t>(1, (a.K + kc - 1) / kc);
    Workspace work;  // the chunks' partial sums when K is split
    if (splits > 1) work = workspace(a.batch * splits * a.M * a.N, a.dtype);
    T* part = work.as<T>();
    const dim3 grid(unsigned(blocks / a.batch), unsigned(splits), unsigned(a.batch));
    kernel<<<grid, S::kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(MatmulProblem<T>(a.mm), a.M, a.N, a.K, kc,
                                                                       epilogue_of<T>(a), part);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (splits > 1) splitk_reduce<T, T>(part, int(splits), a);
  };
  using Yes = std::true_type;
  using No = std::false_type;
  using Vec = std::integral_constant<int, VMAX>;
  using One = std::integral_constant<int, 1>;
  with_rows(a.M, [&](auto mt) {
    if (kmajor) vec ? go(mt, Yes{}, Vec{}) : go(mt, Yes{}, One{});
    else vec ? go(mt, No{}, Vec{}) : go(mt, No{}, One{});
  });
}

}  // namespace

// fp32 and fp64; fp32 with TF32 allowed reaches it where the skinny tensor-core family refuses
// (routing/launch_rungs.cuh). For fp16/bf16 this kernel lost to Hopper split-K (a lane's loads in flight are
// bounded by its registers: docs/kernels/skinny.md#skinny-simt-kernel-matmul_skinny).
const char* skinny_why_not(const GemmArgs& a) {
  if (a.algo != Algo::Auto) return "algo pinned";
  if (a.M > kSkinnyMaxM) return "M > 16";
  if (a.batch > 65535) return "batch > 65535";
  if (a.dtype != c10::ScalarType::Float && a.dtype != c10::ScalarType::Double) return "float16 or bfloat16 (the Hopper split-K is ahead)";
  return nullptr;
}
void skinny_run(const GemmArgs& a) {
  if (a.dtype == c10::ScalarType::Float) launch_skinny<float>(a);
  else launch_skinny<double>(a);
}

namespace {

// Work (multiply-adds) from which an fp32 problem whose operands the 16-byte loads cannot read
// (odd K or N, ragged strides) runs on padded copies instead: there the element-load path costs
// more than the two copies (docs/kernels/ladder.md#matmul_simt-fp32-auto-with-tf32-off).
constexpr double kPadMinWork = double(int64_t(1) << 28);

}  // namespace

// fp32 'auto' on the 'vectorized' rung whose operands are not 16-byte readable: both copied,
// K-major, K padded with zeros to whole vectors (A as [M, Kp], B as [N, Kp]; copy_padded), then
// run as usual.
const char* simt_padded_why_not(const GemmArgs& a) {
  if (a.algo != Algo::Auto) return "algo pinned";
  if (a.dtype != c10::ScalarType::Float || tensor_core_dtype(a)) return "not float32 with TF32 off";
  if (a.batch != 1) return "batched";
  if (vec_layout(a, 4).fast) return "operands 16-byte readable as they are";
  if (double(a.M) * double(a.N) * double(a.K) < kPadMinWork) return "too little work for two copies";
  if (auto_algo(a) != Algo::Vectorized) return "the heuristic's rung is 'register'";
  return nullptr;
}
void simt_padded_run(const GemmArgs& a) {
  const int64_t vec = 4, kp = (a.K + vec - 1) / vec * vec;
  const auto& o = a.mm;
  const Workspace pa = padded_rows(o.a, a.M, a.K, o.sa[1], o.sa[2], a.dtype, kp);  // [rows, K] -> [rows, kp]
  const Workspace pb = padded_rows(o.b, a.N, a.K, o.sb[2], o.sb[1], a.dtype, kp);
  GemmArgs g = a;
  g.K = kp;
  g.mm.a = pa.ptr;
  g.mm.b = pb.ptr;
  const int64_t sa[3] = {0, kp, 1}, sb[3] = {0, 1, kp};  // B's strides as (batch, k, n)
  std::copy(sa, sa + 3, g.mm.sa);
  std::copy(sb, sb + 3, g.mm.sb);
  TORCH_INTERNAL_ASSERT(vec_layout(g, 4).fast, "tileops: padded fp32 operands not 16-byte readable");
  run_simt(g);
}

// fp32 and fp64 'auto' without tensor cores.
const char* simt_why_not(const GemmArgs& a) {
  if (a.algo != Algo::Auto) return "algo pinned";
  if (a.dtype != c10::ScalarType::Float && a.dtype != c10::ScalarType::Double) return "float16 or bfloat16";
  if (tensor_core_dtype(a)) return "float32 with TF32 allowed";
  return nullptr;
}
void simt_run(const GemmArgs& a) { run_simt(a); }
void simt_explain(const GemmArgs& a, routing::Decision& d) {
  if (a.dtype != c10::ScalarType::Float) {
    d.config = "register", d.why = "float64: the one SIMT kernel with double accumulators";
    return;
  }
  explain_config(d, simt_key(a), simt_names(), simt_heuristic(a), "largest tile whose blocks fill the SMs");
}

// A pinned rung (algo=...): runs as it is named, so that the ladder times kernels.
void rung_run(const GemmArgs& a) { launch_matmul(a); }
void launch_matmul(const GemmArgs& a) { launch_problem<MatmulProblem>(a, a.mm); }
}  // namespace tileops::cuda

namespace tileops::cuda {
void ladder_explain(const GemmArgs& a, routing::Decision& d) {
  const Algo algo = a.algo == Algo::Auto ? auto_algo(a) : a.algo;
  d.config = algo == Algo::Mma ? "mma" : algo == Algo::Register ? "register" : "vectorized";
  d.why = "auto_algo: 'mma' for fp16/bf16 and TF32, else 'register'";
}
}  // namespace tileops::cuda
