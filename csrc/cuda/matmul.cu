// Matmul on CUDA: the Hopper (wgmma + TMA) family where the GPU, build and operand layout
// allow it, else the generic families in launch.cuh.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "autotune.h"
#include "gemm_skinny.cuh"  // kSkinnyMaxM
#include "griddep.cuh"
#include "launch.cuh"
#include "mma_sync.cuh"  // round_tf32
#include "sm90_host.cuh"

namespace tileops::cuda {
namespace hopper {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

template <typename Fn>
Fn driver_entry(const char* name) {  // a driver entry point: no libcuda link needed
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
  TORCH_CHECK(q == cudaDriverEntryPointSuccess && p != nullptr, "tileops: the driver has no ", name);
  return reinterpret_cast<Fn>(p);
}
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = driver_entry<EncodeTiled>("cuTensorMapEncodeTiled");
  return fn;
}
using EncodeIm2col = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const int*, const int*, cuuint32_t, cuuint32_t, const cuuint32_t*,
                                  CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                  CUtensorMapFloatOOBfill);
EncodeIm2col encode_im2col() {
  static const EncodeIm2col fn = driver_entry<EncodeIm2col>("cuTensorMapEncodeIm2col");
  return fn;
}

// The arguments of a map, which determine it (the encoding reads no memory at base): a tiled
// map's, or an im2col map's (pixels > 0) with its corners, channels and pixels a load, and element
// strides.
struct MapArgs {
  const void* base;
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], estr[5];
  int32_t lower[3], upper[3];
  int32_t rank, st, channels, pixels;
};
static_assert(std::has_unique_object_representations_v<MapArgs>, "MapArgs is compared and hashed by its bytes");

// Maps already encoded, by their arguments: the driver's encode costs the host ~0.5 us a map
// (results/h200/1d0c1a0/e1) and a Hopper launch takes two or three, while a model repeats the same
// layers on the same buffers. A small direct-mapped table per host thread; an entry is only ever a
// map of exactly its key.
struct MapCache {
  static constexpr size_t kSlots = 64;
  struct Slot {
    MapArgs key;
    CUtensorMap map;
    bool used = false;
  };
  std::array<Slot, kSlots> slots;
  // FNV-1a over the key's 64-bit words (20 steps on every Hopper launch's two or three lookups, not
  // 160 byte steps), then a finalizer that folds the high bits, which the multiplies alone never
  // carry down into the slot's low bits
  static size_t slot_of(const MapArgs& k) {
    static_assert(sizeof(MapArgs) % sizeof(uint64_t) == 0, "MapArgs is hashed by whole words");
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof k; i += sizeof(uint64_t)) {
      uint64_t w;
      std::memcpy(&w, p + i, sizeof w);
      h = (h ^ w) * 1099511628211ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return size_t(h % kSlots);
  }
};

// A key with every field zero but base, type and rank (unused dims stay zero, so equal maps have
// equal keys).
MapArgs map_key(const void* base, at::ScalarType st, int rank, const uint64_t* dims, const uint64_t* strides) {
  TORCH_INTERNAL_ASSERT(rank >= 1 && rank <= 5);
  MapArgs k;
  std::memset(&k, 0, sizeof k);
  k.base = base, k.rank = rank, k.st = int32_t(st);
  for (int i = 0; i < rank; ++i) k.dims[i] = dims[i];
  for (int i = 0; i + 1 < rank; ++i) k.strides[i] = strides[i];
  return k;
}

// The map of key k, from the table or from encode(&map) (false: the driver refused it; nothing
// kept).
template <typename Encode>
bool cached_map(const MapArgs& k, CUtensorMap* out, Encode&& encode) {
  thread_local MapCache cache;
  MapCache::Slot& slot = cache.slots[MapCache::slot_of(k)];
  if (slot.used && std::memcmp(&slot.key, &k, sizeof k) == 0) {
    *out = slot.map;
    return true;
  }
  if (!encode(out)) return false;
  slot.key = k, slot.map = *out, slot.used = true;
  return true;
}

}  // namespace

CUtensorMap tiled_map(const void* base, at::ScalarType st, int rank, const uint64_t* dims, const uint64_t* strides,
                      const uint32_t* box) {
  MapArgs k = map_key(base, st, rank, dims, strides);
  for (int i = 0; i < rank; ++i) k.box[i] = box[i], k.estr[i] = 1;
  CUtensorMap m;
  cached_map(k, &m, [&](CUtensorMap* out) {
    const CUresult r = encode_tiled()(out, tma_type(st), cuuint32_t(rank), const_cast<void*>(base), k.dims,
                                      k.strides, k.box, k.estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    TORCH_CHECK(r == CUDA_SUCCESS, "tileops: cuTensorMapEncodeTiled failed with error ", int(r));
    return true;
  });
  return m;
}

bool im2col_map(const void* base, at::ScalarType st, int rank, const uint64_t* dims, const uint64_t* strides,
                const int* lower, const int* upper, uint32_t channels, uint32_t pixels, const uint32_t* estr,
                CUtensorMap* m) {
  TORCH_INTERNAL_ASSERT(rank >= 3 && pixels > 0);
  MapArgs k = map_key(base, st, rank, dims, strides);
  for (int i = 0; i < rank; ++i) k.estr[i] = estr[i];
  for (int i = 0; i + 2 < rank; ++i) k.lower[i] = lower[i], k.upper[i] = upper[i];
  k.channels = int32_t(channels), k.pixels = int32_t(pixels);
  return cached_map(k, m, [&](CUtensorMap* out) {
    return encode_im2col()(out, tma_type(st), cuuint32_t(rank), const_cast<void*>(base), k.dims, k.strides, k.lower,
                           k.upper, channels, pixels, k.estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                           CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  });
}

CUtensorMapDataType tma_type(at::ScalarType st) {
  return st == at::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : st == at::kHalf   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                             : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

namespace {

// 3-D tiled map (inner dim first) with 128-byte swizzle; tails read as zero. fp32 (TF32)
// operands are the copies copy_round_tf32 already rounded.
CUtensorMap tensor_map(const void* base, at::ScalarType st, const uint64_t dims[3], const uint64_t strides[2],
                       uint32_t box0, uint32_t box1) {
  const uint32_t box[3] = {box0, box1, 1};
  return hopper::tiled_map(base, st, 3, dims, strides, box);
}

}  // namespace

CUtensorMap matrix_map(const void* base, at::ScalarType st, int64_t cols, int64_t rows, int64_t batch, int64_t s_row,
                       int64_t s_batch, uint32_t box_cols, uint32_t box_rows) {
  const uint64_t es = c10::elementSize(st);
  const uint64_t dims[3] = {uint64_t(cols), uint64_t(rows), uint64_t(batch)};
  const uint64_t strides[2] = {uint64_t(s_row) * es, uint64_t(s_batch == 0 ? s_row * rows : s_batch) * es};
  return tensor_map(base, st, dims, strides, box_cols, box_rows);
}

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
// A thread's 16 loads are all issued before its first store: with 32x32 tiles and 4 loads a
// thread, 4096^2 took 76 us on an H100, 1.55 TB/s (results/h100/d1eb10b/h100/ncu). Four blocks an
// SM (64 registers; ptxas took 114 unbounded, two blocks): 4096^2 40.9 -> 33.1 us on an H200, 4.05
// TB/s, 8192^2 155 -> 127, 4096 x 11008 106 -> 86 (results/h200/5a2431f/c1, c2; three blocks, 78
// registers, 34.1). A 16-byte form (4 x 4 blocks transposed in registers, no shared memory) was
// slower: 125 us with 16 lanes down the rows (32-byte store runs), 44.5 with 4 (c1).
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
  Padded p{at::Tensor(), at::Tensor(), in};
  if (l.a == Major::None) {
    p.a = padded_rows(device_view(o.a, {ba, in.M, in.K}, {o.sa[0], o.sa[1], o.sa[2]}, in.dtype));
    p.args.mm.a = p.a.const_data_ptr();
    const auto [sb0, sr] = row_strides(p.a);
    const int64_t sa[3] = {sb0, sr, 1};
    std::copy(sa, sa + 3, p.args.mm.sa);
  }
  if (l.b == Major::None) {
    const auto bv = device_view(o.b, {bb, in.K, in.N}, {o.sb[0], o.sb[1], o.sb[2]}, in.dtype);
    const bool kmajor = in.dtype == at::kFloat;
    p.b = padded_rows(kmajor ? bv.transpose(1, 2) : bv);
    p.args.mm.b = p.b.const_data_ptr();
    const auto [sb0, sr] = row_strides(p.b);
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

// The configs as data (sm90_host.cuh says what each field means).
const std::vector<std::string> kSm90Names = {
    "bn64",           "bn128",       "bn256",          "bn64-nosplit", "bn128-nosplit", "bn256-nosplit",
    "bn64x2",         "pp128",       "coop256x128",    "pp128-c2",     "coop256x128-c2", "coop128x256",
    "coop128x256-c2", "coop128x192", "coop128x192-c2"};
const autotune::Family kSm90Family("matmul_sm90", [] { return kSm90Names; });
const Sm90Config kSm90Configs[] = {
    {64, true, false, Persist::No, 1},     {128, true, false, Persist::No, 1},    {256, true, false, Persist::No, 1},
    {64, false, false, Persist::No, 1},    {128, false, false, Persist::No, 1},   {256, false, false, Persist::No, 1},
    {64, true, true, Persist::No, 1},      {128, false, false, Persist::PingPong, 1},
    {128, false, false, Persist::Coop, 1}, {128, false, false, Persist::PingPong, 2},
    {128, false, false, Persist::Coop, 2}, {256, false, false, Persist::Coop, 1},
    {256, false, false, Persist::Coop, 2}, {192, false, false, Persist::Coop, 1},
    {192, false, false, Persist::Coop, 2}};

int sm90_index(const char* name) {
  const auto it = std::find(kSm90Names.begin(), kSm90Names.end(), name);
  TORCH_INTERNAL_ASSERT(it != kSm90Names.end(), "tileops: no Hopper config named ", name);
  return int(it - kSm90Names.begin());
}

// Speeds at full waves, relative to coop128x256-c2's, 16-bit and TF32: fitted on linear + bias
// shapes from under one wave to 36 (H200, results/h200/c11183d/w1/waves_*.json, NOTES 78): each
// config's time against coop128x256-c2's, corrected by the two wave efficiencies, was nearly
// constant over the shapes of many waves (the medians here). Unclustered, the tiles ran as fast as
// clustered (TF32's coop128x192 slower on the largest, 0.75 at 8192^3, where the multicast of
// its 4-byte B still pays: 0.88 here); they win on waves, and where B is L2-resident
// (persistent_pick).
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
// waves. On results/h200/iterations-c2/cand_3fdd839.json this picked the fastest of the clustered
// three on every row where they ran by default, where 128 x 256 alone did not: ViT-B fc2 214 -> 192
// us (192 wide: 6 full waves, 256 wide: 4.5), QKV 167 -> 163, 4095 x 4097 x 4093 355 -> 329
// (ping-pong: 8 full waves), linear+GELU fc2 249 -> 205. Short K (<= 256: 1x1 convs) takes
// ping-pong, whose epilogue overlaps the other warpgroup's main loop; so does a SiLU epilogue up to
// K = 1024 if ping-pong's clustered tiles make at least 4 waves (on fewer the last wave's share,
// which the scores weigh, outweighs the overlap): bf16 linear + bias + SiLU, us, cooperative /
// pp128-c2 (results/h200/9f98b77/p1/lin_silu.json): 25216 x 3072 x 512 157.7 / 150.4, ViT-B fc1 and
// QKV within 1%; fc2 (K 3072) 165.7 / 187.3. GELU took ping-pong as well until its epilogue got
// cheaper (NOTES 77); now the cooperative tiles run it faster (lin_gelu.json: ViT-B fc1 204.2 /
// 222.3, QKV 158.0 / 168.9, 25216 x 3072 x 512 161.0 / 168.8).
// Where ping-pong is the rule, the wave scores choose between its clustered and unclustered forms.
// The clusters' B multicast pays only where B streams from DRAM: where B fits in half the L2, an
// unclustered tile runs at least as fast as its clustered twin at the same waves, so it takes the
// twin's speed where that is higher and wins ties. H200, us, unclustered / clustered, B's bytes
// (results/h200/c11183d/w1, linear + bias): TF32 128 x 192 3136 x 768 x 3072 57.9 / 63.6 (9 MB), 6272
// x 384 x 1536 33.7 / 36.4 (2 MB), 25216 x 768 x 3072 335.5 / 343.9 (9 MB); bf16 128 x 256 1568 x 2304
// x 768 12.6 / 13.0; but TF32 128 x 192 4096^3 (64 MB) 480 / 459, 4096 x 4096 x 11008 (172 MB) 1457 /
// 1206, and 128 x 256 there 1002 / 978. With B MN-major (16-bit matmuls of a row-major B) the clusters
// keep an edge over many waves even so (f0c5f3b/w2, bf16 128 x 256: 25216 x 3072 x 768, 18 waves,
// 167.7 / 164.0; 25088 x 1536 x 384 51.0 / 49.4), so there the rule holds while the clustered twin
// makes at most 4 waves (1568 x 2304 x 768 12.0 / 12.4, 6272 x 384 x 1536 on 128 x 192 14.6 / 15.1).
// The pick's mean loss to the fastest of the six over 21 persistent rows, before (c385cd0/r1) / after
// (8873633/t1): bf16 linear 0.8% / 0.15%, TF32 linear 2.2% / 0.6%, bf16 matmul 0.5% (the old scores on
// f0c5f3b/w2's times) / 0.1%; the worst row after, TF32 6272 x 1152 x 384, 11% (256-wide tiles make 2
// waves, 192-wide 3, and at K = 384 the third wave costs less than the wider epilogue).
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

// The heuristic: bn64x2 where 128-wide tiles would leave SMs idle but 64-wide ones fill them
// without split-K, and for N <= 64 (measured, results/h200/14fecd3: square 1024 0.70 -> 1.10x,
// 1000^3 0.75 -> 0.92x, batched AV 1.00 -> 1.19x; 1x1-conv GEMMs with N = 64 unchanged; large
// problems are slower with it: ViT-B 0.36-0.67x); the persistent kernels where there is at least
// one 128 x 128 tile per SM (persistent_pick; TF32 2048^2 on an H100: bn256 79 us,
// coop128x256-c2 66, results/h100/ddb1659/a/cand_tf32.log; 16-bit took them from two tiles per SM
// until the unclustered configs joined the pick, NOTES 78); else 256 wide for wide outputs, 128
// below. (TF32 with N <= 64 took the persistent kernels where they filled the SMs while bn64x2
// copied A to round it, H100 batched AV 95 -> 53 us of which 56 were the copies,
// results/h100/8643bf4/c2; the one-tile kernels now round A in registers too.)
int sm90_heuristic(const GemmArgs& a, const TmaLayout& l) {
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const bool tf32 = a.dtype == at::kFloat;
  const int64_t es = int64_t(c10::elementSize(a.dtype)), bk = sm90::ROW_BYTES / es;
  const bool a_mn = l.a == Major::MN, b_mn = l.b == Major::MN;
  const bool can_persist = persistent_refusal(a, a_mn) == nullptr;
  const bool persist = can_persist && output_tiles(a, 128) >= sms;
  const bool x2 = !a_mn &&  // A MN: no bn64
                  (a.N <= 64 || (output_tiles(a, 128) < sms && 2 * output_tiles(a, 64) > sms));
  // 16-bit one-tile kernels that split K (few output tiles over a long K, as a linear's weight
  // gradient gz^T x) take 128-wide tiles: as many blocks with half the splits, each a main loop twice
  // as long against the same prologue and partial store (H100, ViT-S b128 weight gradients, K =
  // 25216, bn256 -> bn128: 1152 x 384 59 -> 47 us, 384 x 384 33 -> 28, 1536 x 384 76 -> 59, 384 x
  // 1536 58 -> 55; results/h100/2a3f1ef/n1/vit_gemms.json, NOTES 55).
  const bool split = !tf32 && splitk_factor(a, 128, int(bk)) > 1;
  // At most one 64-wide tile per SM over a short K (<= 1024): bn64, one block per SM with an
  // 8-stage ring, where bn64x2's second block per SM never comes and its ring is 4 deep; but, 16-bit,
  // where an operand's rows are not 128-byte aligned (TMA boxes straddle lines), ping-pong pp128,
  // whose 128 x 128 tiles load less per output. Over a longer K, where 128-wide tiles split K:
  // bn128. H200, kernel us (results/h200/f6d89d1/a1/edges.json), bn64 / bn64x2 / pp128 / bn128:
  // 1024^3 6.0 / 6.8 / 8.2 / 10.9, 1000 x 1024 x 1024 6.4 / 7.2 / 8.2; 1000^3 11.8 / 11.8 / 10.3,
  // B K-major 11.3 / 11.3 / 9.7; 1024 x 1024 x 1000 9.0 / 8.9 / 8.3; 1000 x 1000 x 4096 bn128 23.4
  // against bn64x2's 26.4, B K-major 18.6 against 22.5.
  // TF32 takes bn64 where bn64x2 would run with at most one block per SM: bn64x2's two blocks keep
  // one register set of A fragments and a 4-deep ring; nor pp128. Where its 64-wide tiles fill
  // between one and two blocks per SM, bn64x2 (GPU us, results/h200/35cc54d/c1/tf32.json, bn64 /
  // bn64x2 / pp128: 1024^2 17.9 / 27.6 / 27.3, 1000^3 20.3 / 29.0 / 31.7; batched AV
  // 64 x 512 x 64 x 512, 256 tiles, 34.7 / 33.4 / 39.1).
  // 16-bit with both operands' rows ragged: the clusters of two, whose multicast halves the
  // straddling B loads; pp128-c2 in place of pp128 at one wave, and where K is not split a
  // persistent config in place of the one-tile bn256 / bn128 (H200, results/h200/70d0595/p1/edges_c2.json,
  // kernel us: 1000^3 pp128 10.5 -> pp128-c2 9.5, B K-major 9.9 -> 9.4; 2048 x 2048 x 1000 with B
  // K-major bn256 20.0 -> coop128x256-c2 15.5; with one ragged operand pp128 / bn256 stay ahead,
  // 1024^2 x 1000 8.5 against 9.1; split over K = 4096, bn128 18.5 against pp128-c2's 24.8).
  // (Copying both ragged operands to whole-line rows first did not pay at 1000^3: one launch for
  // both took 3.1 us, more than the straddling loads cost; NOTES 72.) With either operand ragged
  // the persistent pick stays with the clusters: 4095 x 4097 x 4093 (B's padded rows ragged, 8
  // waves either way) took 322 us on pp128-c2, 370 on pp128 (results/h200/c385cd0/r1, NOTES 78).
  const int64_t pitch_a = a_mn ? a.mm.sa[2] : a.mm.sa[1], pitch_b = b_mn ? a.mm.sb[1] : a.mm.sb[2];
  const bool ragged_a = (pitch_a * es) % 128 != 0, ragged_b = (pitch_b * es) % 128 != 0;
  const bool one_wave64 = x2 && output_tiles(a, 64) <= sms && a.K <= 1024;
  // Nor bn64x2 where its 64-wide tiles outnumber the SMs over a long K (> 1024) unsplit: the SMs
  // that get a second block take twice as long, while 128-wide tiles give each busy SM one; bn128
  // (H200, linear + bias 1568 x 768 x 3072, kernel us: bn64x2 26.4, bn128 18.3, pp128 18.3;
  // results/h200/b7605fa/s1/small_linear.json). 16-bit takes bn128 there over any K: fp16 GPU us,
  // bn64x2 / bn128 / cuBLAS (results/h200/be957a2/g2/x2.json): 1024 x 2048 x 1024 14.0 / 11.5 / 11.2,
  // 2048 x 1024 x 512 10.1 / 8.9 / 8.7, 1024 x 1920 x 768 12.0 / 10.3 / 9.8; bn128 was the fastest
  // or within 0.1 us of it on all 8 shapes. Where an operand's rows are ragged, the ping-pong
  // tiles instead, in clusters of two where B's are (their multicast halves its straddling loads),
  // as one_wave64 does (g1/ragged.json: 2000 x 1000 x 1000 bn64x2 22.7, pp128-c2 14.8, cuBLAS 12.8;
  // 2000 x 1000 x 3000 bn128 37.8, pp128-c2 30.3; A's rows only, 2000 x 1024 x 1000 bn64x2 18.9,
  // pp128 13.0). TF32 too where K > kTf32RegsMaxK, where both copy B (results/h200/ec9befe/t1/x2_tf32.json,
  // GPU us, bn64x2 / bn128 / cuBLAS: 1024 x 2048 x 1024 30.6 / 23.8 / 21.2, 1024 x 1920 x 768 24.8 /
  // 20.2 / 19.6); at K <= 512 bn64x2 reads B in place (2048 x 1024 x 512 25.3 / 24.2, pp128 19.0).
  const bool x2_as_128 = x2 && !one_wave64 && a.N > 64 && (split || !tf32 || a.K > kTf32RegsMaxK);
  static const int kX2 = sm90_index("bn64x2"), kBn64 = sm90_index("bn64"), kBn256 = sm90_index("bn256"),
                   kBn128 = sm90_index("bn128"), kPp128 = sm90_index("pp128"), kPp128c2 = sm90_index("pp128-c2");
  const bool pp_rows = (ragged_a || ragged_b) && !tf32 && can_persist;
  const bool cluster_rows = pp_rows && ragged_a && ragged_b;
  const bool persistent = persist || (cluster_rows && !split);
  // 16-bit, rows aligned, where even 64-wide tiles fill at most half the SMs over K <= 1024 (batch-1
  // ViT linears, a batch-1 patch embedding's GEMM): bn64 unsplit, the most blocks without a reduce.
  // H200 kernel us (results/h200/11f5cbf/s1/few.json), bn64-nosplit / the bn256 or split bn128
  // it replaces / cuBLAS: 197 x 1152 x 384 4.2 / 10.2 / 3.0, 197 x 384 x 384 4.0 / 10.0 / 2.7,
  // 196 x 768 x 768 5.2 / 7.3 / 3.5, 384 x 768 x 768 4.8 / 7.3 / 3.6, 512^3 4.0 / 6.6 / 3.1; it was the
  // fastest candidate on all 11 shapes probed.
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

// Why the Hopper family cannot run on this build, GPU and dtype, or nullptr when it can.
const char* sm90_unavailable(const GemmArgs& a) {
#ifndef TILEOPS_HAVE_SM90A
  return "tileops was built without the sm_90a target (TORCH_CUDA_ARCH_LIST must include 9.0a)";
#endif
  const bool tf32 = a.dtype == at::kFloat && (a.allow_tf32 || a.algo == Algo::Wgmma);
  if (a.dtype != at::kHalf && a.dtype != at::kBFloat16 && !tf32)
    return "it takes float16, bfloat16 and float32 (as TF32) only";
  const auto* prop = at::cuda::getCurrentDeviceProperties();
  if (prop->major != 9 || prop->minor != 0) return "it needs a compute capability 9.0 GPU (H100/H200)";
  if (a.K == 0) return "K is zero";
  if (a.batch > 65535 || a.M >= (int64_t(1) << 31) || a.N >= (int64_t(1) << 31) || a.K >= (int64_t(1) << 31))
    return "the problem is too large for one launch";
  return nullptr;
}

// Multiply-adds up to which 'auto' runs an fp16/bf16 matmul that TMA cannot read in place, or a
// TF32 one (whose B the Hopper path copies to round it but where K <= 512), on the 'mma' rung: there
// the copies cost more than the Hopper kernel gains (H100, results/h100/5c3d0dd/i7/tc_probe.json):
// 127 x 255 x 511 bf16 28.4 -> 12.6 us, TF32 28.8 -> 11.8 us; TF32 512^3 20.3 -> 17.4 us, but
// 256 x 1024 x 1024 (2^28) 22.5 against 23.8. Where TMA reads the 16-bit operands in place the
// Hopper kernel won at every size measured (256^3 9.1 against 11.1 us). Skinny rows (M <= 16)
// keep the Hopper split-K: 64-row tiles would be almost empty.
constexpr double kTcSmallWork16 = double(int64_t(1) << 25), kTcSmallWorkTf32 = double(int64_t(1) << 27);

void gemm_cuda_matmul(const GemmArgs& a) {
  TORCH_INTERNAL_ASSERT(a.mm.rq == 0, "tileops: grouped output rows reach only the Hopper implicit conv kernels");
  // M <= 16: bound by reading B, where a 64- or 128-row tile would be mostly empty
  if (matmul_skinny_tc(a) || matmul_skinny(a)) return;
  const bool want = a.algo == Algo::Wgmma || (a.algo == Algo::Auto && tensor_core_dtype(a));
  const char* why = want ? sm90_unavailable(a) : "not requested";
  if (want && why == nullptr) {
    const hopper::TmaLayout l = hopper::sm90_layout(a);
    const bool tf32 = a.dtype == at::kFloat;
    const bool small = a.algo == Algo::Auto && a.M > kSkinnyMaxM && (!l.ok() || tf32) &&
                       double(a.batch) * a.M * a.N * a.K <= (tf32 ? kTcSmallWorkTf32 : kTcSmallWork16);
    if (!small) {
      if (a.dtype == at::kBFloat16) hopper::run_sm90_any_layout<c10::BFloat16>(a, l);
      else if (a.dtype == at::kHalf) hopper::run_sm90_any_layout<c10::Half>(a, l);
      else hopper::run_sm90_any_layout<float>(a, l);
      return;
    }
  }
  TORCH_CHECK(a.algo != Algo::Wgmma, "tileops.matmul: algo='wgmma' cannot run this problem: ", why);
  launch_matmul(a);
}

}  // namespace tileops::cuda
