// Matmul on CUDA: the Hopper (wgmma + TMA) family where the GPU, build and operand layout
// allow it, else the generic families in launch.cuh.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <vector>

#include "autotune.h"
#include "cuda_util.h"
#include "gemm_sm90.cuh"
#include "launch.cuh"
#include "splitk.cuh"

namespace tileops::cuda {
namespace {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
using EncodeIm2col = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const int*, const int*, cuuint32_t, cuuint32_t, const cuuint32_t*,
                                  CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                  CUtensorMapFloatOOBfill);

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
EncodeIm2col encode_im2col() {
  static const EncodeIm2col fn = driver_entry<EncodeIm2col>("cuTensorMapEncodeIm2col");
  return fn;
}

CUtensorMapDataType tma_type(at::ScalarType st) {
  return st == at::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : st == at::kHalf   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                             : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

// 3-D tiled map (inner dim first) with 128-byte swizzle; tails read as zero. fp32 (TF32)
// operands are the copies copy_round_tf32 already rounded.
CUtensorMap tensor_map(const void* base, at::ScalarType st, const uint64_t dims[3], const uint64_t strides[2],
                       uint32_t box0, uint32_t box1) {
  CUtensorMap m;
  const cuuint64_t d[3] = {dims[0], dims[1], dims[2]};
  const cuuint64_t s[2] = {strides[0], strides[1]};
  const cuuint32_t box[3] = {box0, box1, 1}, es[3] = {1, 1, 1};
  const CUresult r = encode_tiled()(&m, tma_type(st), 3, const_cast<void*>(base), d, s, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "tileops: cuTensorMapEncodeTiled failed with error ", int(r));
  return m;
}

// The map of a [batch][rows][cols] matrix with a unit stride along cols (row and batch strides
// in elements; a batch stride of 0, one matrix for every batch entry, is given as rows * s_row),
// boxes of box_cols x box_rows.
CUtensorMap matrix_map(const void* base, at::ScalarType st, int64_t cols, int64_t rows, int64_t batch, int64_t s_row,
                       int64_t s_batch, uint32_t box_cols, uint32_t box_rows) {
  const uint64_t es = c10::elementSize(st);
  const uint64_t dims[3] = {uint64_t(cols), uint64_t(rows), uint64_t(batch)};
  const uint64_t strides[2] = {uint64_t(s_row) * es, uint64_t(s_batch == 0 ? s_row * rows : s_batch) * es};
  return tensor_map(base, st, dims, strides, box_cols, box_rows);
}

// How TMA reads an operand in place: along K, along its rows (M for A, N for B), or not at all.
enum class Major { None, K, MN };

}  // namespace

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
struct TmaLayout {
  Major a = Major::None, b = Major::None;  // MN-major A: column-major M x K (dY^T, x^T of a weight gradient)
  bool ok() const { return a != Major::None && b != Major::None; }
};
TmaLayout sm90_layout(const GemmArgs& g) {
  const auto& o = g.mm;
  const int64_t es = c10::elementSize(g.dtype);
  return {operand_major(o.a, o.sa[0], o.sa[1], o.sa[2], g.M, g.K, es),
          operand_major(o.b, o.sb[0], o.sb[2], o.sb[1], g.N, g.K, es)};
}

// One pass for a TF32 operand: a [batch, rows, cols] strided float view is read once and written
// once into a [batch, rows, pitch] buffer, each value rounded to the nearest TF32 (cvt.rna: ties
// away from zero; NaN and Inf kept), so wgmma's truncation of the low 13 bits leaves it as it is.
// 64x64 tiles through shared memory: reads run along whichever of rows and cols has the unit
// stride (B's K-major copy is a transpose), writes along cols. The row padding is never written.
// A thread's 16 loads are all issued before its first store: with 32x32 tiles and 4 loads a
// thread, 4096^2 took 76 us on an H100, 1.55 TB/s (results/h100/d1eb10b/h100/ncu).
constexpr int kTile = 64, kTileRowsPerPass = 8, kTileRuns = kTile / kTileRowsPerPass;
__global__ void __launch_bounds__(32 * kTileRowsPerPass)
    copy_round_tf32_kernel(const float* __restrict__ src, int64_t sb, int64_t sr, int64_t sc, float* __restrict__ dst,
                           int64_t rows, int64_t cols, int64_t pitch) {
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
        uint32_t u;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(v[i][h]));
        (along_rows ? tile[b_of(h)][a_of(i)] : tile[a_of(i)][b_of(h)]) = __uint_as_float(u);
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

// An operand TMA cannot read in place is copied once, through the caching allocator, into a
// buffer whose rows are padded to 16 bytes (the padding is never read: the maps' K and N stay
// exact, and TMA zero-fills past them): A row-major (M x K); B K-major (N x K) for fp32, whose
// wgmma takes no MN-major B, else row-major (K x N). The other operand is used in place.
// fp32 runs as TF32 and its copies are rounded on the way (copy_round_tf32); which operands it
// copies: run_sm90_any_layout.
struct Padded {
  at::Tensor a, b;
  GemmArgs args;
};
Padded pad_operands(const GemmArgs& in, const TmaLayout& l) {
  const auto& o = in.mm;
  const auto opts = cuda_options(in.dtype);
  const int64_t ba = o.sa[0] == 0 ? 1 : in.batch, bb = o.sb[0] == 0 ? 1 : in.batch;
  const int64_t al = 16 / c10::elementSize(in.dtype);
  auto up = [al](int64_t n) { return (n + al - 1) / al * al; };
  // view [batch, rows, cols] -> a [batch, rows, pitch] copy; its (batch, row) strides
  auto padded_rows = [&](const at::Tensor& v) {
    at::Tensor t = at::empty({v.size(0), v.size(1), up(v.size(2))}, opts);
    if (in.dtype == at::kFloat) copy_round_tf32(v, t);
    else t.narrow(2, 0, v.size(2)).copy_(v);
    return t;
  };
  auto row_strides = [](const at::Tensor& t) { return std::make_pair(t.size(0) == 1 ? 0 : t.stride(0), t.stride(1)); };
  Padded p{at::Tensor(), at::Tensor(), in};
  if (l.a == Major::None) {
    p.a = padded_rows(at::from_blob(const_cast<void*>(o.a), {ba, in.M, in.K}, {o.sa[0], o.sa[1], o.sa[2]}, opts));
    p.args.mm.a = p.a.const_data_ptr();
    const auto [sb0, sr] = row_strides(p.a);
    const int64_t sa[3] = {sb0, sr, 1};
    std::copy(sa, sa + 3, p.args.mm.sa);
  }
  if (l.b == Major::None) {
    const auto bv = at::from_blob(const_cast<void*>(o.b), {bb, in.K, in.N}, {o.sb[0], o.sb[1], o.sb[2]}, opts);
    const bool kmajor = in.dtype == at::kFloat;
    p.b = padded_rows(kmajor ? bv.transpose(1, 2) : bv);
    p.args.mm.b = p.b.const_data_ptr();
    const auto [sb0, sr] = row_strides(p.b);
    const int64_t sb[3] = {sb0, kmajor ? 1 : sr, kmajor ? sr : 1};
    std::copy(sb, sb + 3, p.args.mm.sb);
  }
  return p;
}

// Output tiles of a Hopper launch with bm x bn tiles.
int64_t output_tiles(const GemmArgs& a, int64_t bn, int64_t bm = sm90::BM) {
  return (a.M + bm - 1) / bm * ((a.N + bn - 1) / bn) * a.batch;
}

// Split-K factor: only when the output tiles leave most SMs idle and K is long enough that
// each split keeps >= 4 k tiles (skinny M, conv weight gradients); else 1.
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

// 16-byte stores (and residual loads) along output rows: rows and bases aligned.
template <typename T>
bool vec_stores(const GemmArgs& a) {
  const auto& o = a.mm;
  constexpr int vec_elems = 16 / sizeof(T);
  return o.sc[2] == 1 && o.sc[1] % vec_elems == 0 && o.sc[0] % vec_elems == 0 && o.srq % vec_elems == 0 &&
         reinterpret_cast<uintptr_t>(o.c) % 16 == 0 && reinterpret_cast<uintptr_t>(a.residual) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.out_base) % 16 == 0;
}

// A kernel's dynamic shared-memory limit is a per-device attribute: set once on each device (bit
// d of the kernel's own set_on), not on every launch.
template <typename Kernel>
void allow_smem(Kernel kernel, size_t smem, std::atomic<uint64_t>& set_on) {
  const int dev = at::cuda::current_device();
  TORCH_INTERNAL_ASSERT(dev < 64, "tileops: device index ", dev, " past the attribute bitmask");
  if (!((set_on.load(std::memory_order_acquire) >> dev) & 1)) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    set_on.fetch_or(uint64_t(1) << dev, std::memory_order_release);
  }
}

template <typename T, int BN, int STAGES, bool MN, sm90::Gather G = sm90::Gather::None, bool A_MN = false>
void launch_sm90(const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb, int ba, int bb,
                 bool allow_split = true) {
  constexpr int BK = sm90::bk<T>;
  const bool vec = vec_stores<T>(a);
  auto kernel = sm90::gemm_sm90_kernel<T, BN, MN, STAGES, G, A_MN>;
  constexpr size_t smem = sm90::smem_bytes<BN, STAGES, T>();
  static std::atomic<uint64_t> set_on{0};
  allow_smem(kernel, smem, set_on);
  const auto stream = at::cuda::getCurrentCUDAStream();
  const MatmulProblem<T> p(a.mm);
  const Epilogue<T> epi = epilogue_of<T>(a);
  sm90::SplitK sk;
  sk.splits = allow_split ? splitk_factor(a, BN, BK) : 1;
  at::Tensor work;  // split-K partials, through the caching allocator
  if (sk.splits > 1) {
    const int64_t ktiles = (a.K + BK - 1) / BK;
    sk.kt_per_split = int((ktiles + sk.splits - 1) / sk.splits);
    work = at::empty({a.batch * sk.splits, a.M, a.N}, cuda_options(at::kFloat));
    sk.partial = work.data_ptr<float>();
  }
  const dim3 grid(unsigned((a.M + sm90::BM - 1) / sm90::BM), unsigned((a.N + BN - 1) / BN),
                  unsigned(a.batch * sk.splits));
  kernel<<<grid, sm90::THREADS, smem, stream>>>(ma, mb, p, a.M, a.N, a.K, epi, ba, bb, vec, sk, a.conv);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (sk.splits > 1) splitk_reduce<T, float>(sk.partial, sk.splits, a);
}

// Why the persistent kernels cannot take a problem (nullptr: they can): they stage outputs beside
// the ring, read A K-major and add no residual. The one statement of their limits, for the
// heuristics and the launches alike.
const char* persistent_refusal(const GemmArgs& a, bool a_mn) {
  if (a.residual != nullptr) return "tileops: the persistent Hopper kernels take fp16/bf16 and TF32 without a residual";
  if (a_mn) return "tileops: the persistent Hopper kernels take K-major A";
  if (a.mm.rq > 0) return "tileops: the persistent Hopper kernels store C by TMA, rows of one stride";
  return nullptr;
}

// The persistent kernels (sm90::gemm_sm90_persistent_kernel; TM x BN tiles, COOP: cooperative,
// else ping-pong; CL: blocks per cluster): one block per SM, as many clusters as fit at once on
// the GPU or as there are cluster tiles (persistent_refusal says which problems they take). With
// CL = 2 each block loads half of the B tile: a K-major B map's box is BN / 2 rows (MN-major B is
// read in 64-row atoms either way).
// G = ConvFwdIm2col: ma is an im2col map of the conv's x (im2col_map, BM-pixel boxes).
// A_RS (TF32): A read in place and rounded in registers (see gemm_sm90.cuh).
template <typename T, bool MN, int TM, int BN, bool COOP, int CL, sm90::Gather G, bool A_RS = false>
void launch_sm90_persistent(const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb, int ba, int bb) {
  using Shape = sm90::PersistShape<TM, BN, COOP, int(sizeof(T))>;
  auto kernel = sm90::gemm_sm90_persistent_kernel<T, MN, TM, BN, COOP, CL, G, A_RS>;
  constexpr size_t smem = Shape::SMEM;
  static std::atomic<uint64_t> set_on{0};
  allow_smem(kernel, smem, set_on);
  const int64_t tiles = output_tiles(a, BN, CL * TM);  // cluster tiles
  TORCH_CHECK(tiles < INT_MAX, "tileops: too many output tiles for the persistent Hopper kernels");
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CL;
  attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  cfg.blockDim = dim3(sm90::THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = at::cuda::getCurrentCUDAStream();
  cfg.attrs = attr;
  cfg.numAttrs = CL > 1 ? 1 : 0;
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  int resident = sms;  // clusters resident at once: one block per SM
  if constexpr (CL > 1) {  // asked once per device: a GPC's SM count need not be a multiple of CL
    static std::array<std::atomic<int>, 64> asked{};
    std::atomic<int>& r = asked[at::cuda::current_device()];
    if (r.load(std::memory_order_acquire) == 0) {
      cfg.gridDim = dim3(unsigned(CL * sms));
      int n = 0;
      C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, kernel, &cfg));
      TORCH_CHECK(n > 0, "tileops: no cluster of ", CL, " blocks of the persistent Hopper kernel fits on this GPU");
      r.store(n, std::memory_order_release);
    }
    resident = r.load(std::memory_order_acquire);
  }
  cfg.gridDim = dim3(unsigned(CL * std::min<int64_t>(tiles, resident)));
  // C by TMA stores where its rows and base are 16-byte aligned (vec_stores): boxes of 128 bytes
  // of columns by a consumer's rows, in the 128-byte swizzle the kernel stages them in; else by
  // threads.
  const bool vec = vec_stores<T>(a);
  const auto& o = a.mm;
  const CUtensorMap mc = vec ? matrix_map(o.c, a.dtype, a.N, a.M, a.batch, o.sc[1], o.sc[0],
                                          uint32_t(sm90::ROW_BYTES / sizeof(T)), Shape::WROWS)
                             : CUtensorMap{};
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, ma, mb, mc, MatmulProblem<T>(a.mm), a.M, a.N, a.K, epilogue_of<T>(a),
                                    int(a.batch), ba, bb, vec, a.conv));
}

// Hopper configs as data: tile width x split-K allowed x two blocks per SM (a 4-stage ring,
// sm90::blocks_per_sm: one block's fill and epilogue overlap the other's main loop, for short
// K) x persistent (the ping-pong and cooperative kernels). The heuristic is in run_sm90; split-K
// where splitk_factor says.
enum class Persist { No, PingPong, Coop };
struct Sm90Config {
  int bn;
  bool split, two_blocks;
  Persist persist;
  int cluster;  // persistent: blocks per cluster (2: B multicast to a pair of blocks)
};
const std::vector<std::string> kSm90Names = {
    "bn64",           "bn128",       "bn256",          "bn64-nosplit", "bn128-nosplit", "bn256-nosplit",
    "bn64x2",         "pp128",       "coop256x128",    "pp128-c2",     "coop256x128-c2", "coop128x256",
    "coop128x256-c2", "coop128x192", "coop128x192-c2"};
const Sm90Config kSm90Configs[] = {
    {64, true, false, Persist::No, 1},     {128, true, false, Persist::No, 1},    {256, true, false, Persist::No, 1},
    {64, false, false, Persist::No, 1},    {128, false, false, Persist::No, 1},   {256, false, false, Persist::No, 1},
    {64, true, true, Persist::No, 1},      {128, false, false, Persist::PingPong, 1},
    {128, false, false, Persist::Coop, 1}, {128, false, false, Persist::PingPong, 2},
    {128, false, false, Persist::Coop, 2}, {256, false, false, Persist::Coop, 1},
    {256, false, false, Persist::Coop, 2}, {192, false, false, Persist::Coop, 1},
    {192, false, false, Persist::Coop, 2}};

// A config's index in kSm90Names; call sites keep it in a static (no lookups per call).
int sm90_index(const char* name) {
  const auto it = std::find(kSm90Names.begin(), kSm90Names.end(), name);
  TORCH_INTERNAL_ASSERT(it != kSm90Names.end(), "tileops: no Hopper config named ", name);
  return int(it - kSm90Names.begin());
}

// A persistent config's tile as constants: f(TM, BN, COOP), each a std::integral_constant.
// TM128_ONLY: f is instantiated for the 128-row tiles only (the caller takes no other: tm128).
template <bool TM128_ONLY = false, typename F>
decltype(auto) with_persistent_tile(const Sm90Config& cfg, F&& f) {
  using std::integral_constant;
  using I128 = integral_constant<int, 128>;
  if (cfg.persist == Persist::PingPong) return f(I128{}, I128{}, std::false_type{});
  if constexpr (!TM128_ONLY) {
    if (cfg.bn == 128) return f(integral_constant<int, 256>{}, I128{}, std::true_type{});
  }
  if (cfg.bn == 256) return f(I128{}, integral_constant<int, 256>{}, std::true_type{});
  return f(I128{}, integral_constant<int, 192>{}, std::true_type{});
}

// Clusters of two blocks resident at once, as the heuristics take it: half the SMs, which is what
// the launch's cudaOccupancyMaxActiveClusters answers on an H100/H200, without asking.
int64_t resident_clusters(int64_t sms) { return std::max<int64_t>(1, sms / 2); }
// Waves of those clusters over a problem's cluster tiles (256 x bn).
int64_t cluster_waves(const GemmArgs& a, int64_t bn, int64_t sms) {
  return (output_tiles(a, bn, 256) + resident_clusters(sms) - 1) / resident_clusters(sms);
}

// The persistent configs the heuristics choose among (clusters of two, 128-row block tiles), with
// their speed at full waves (ViT-B fc1 on an H200: 128 x 256 212 us, 128 x 192 217, ping-pong
// 232). The conv forward offers exactly these, with im2col loads.
struct PersistentChoice {
  int config;  // index in kSm90Configs
  double speed;
};
const std::array<PersistentChoice, 3>& persistent_choices() {
  static const std::array<PersistentChoice, 3> kChoices = {
      {{sm90_index("coop128x256-c2"), 1.0}, {sm90_index("coop128x192-c2"), 0.977}, {sm90_index("pp128-c2"), 0.913}}};
  return kChoices;
}

// The heuristic's persistent config, its position in persistent_choices() (TF32 takes bf16's
// relative speeds): the best wave
// efficiency (the share of the clusters' tile slots that covers C: a partial last wave and tiles
// past N's edge are lost) times the config's speed at full waves. On
// results/h200/iterations-c2/cand_3fdd839.json this
// picks the fastest of the three on every row where they run by default, where 128 x 256 alone
// did not: ViT-B fc2 214 -> 192 us (192 wide: 6 full waves, 256 wide: 4.5), QKV 167 -> 163,
// 4095 x 4097 x 4093 355 -> 329 (ping-pong: 8 full waves), linear+GELU fc2 249 -> 205. Short K
// (<= 256: 1x1 convs) takes ping-pong, whose epilogue overlaps the other warpgroup's main loop.
int persistent_pick(const GemmArgs& a, int64_t sms) {
  const auto& choices = persistent_choices();
  constexpr int kPingPong = 2;
  if (a.K <= 256) return kPingPong;
  const int64_t clusters = resident_clusters(sms);
  int best = 0;
  double best_score = 0.0;
  for (int j = 0; j < int(choices.size()); ++j) {
    const int bn = kSm90Configs[choices[j].config].bn;
    const int64_t waves = cluster_waves(a, bn, sms);
    const double score =
        choices[j].speed * double(a.M) * double(a.N) * double(a.batch) / (double(waves * clusters) * 256.0 * bn);
    if (score > best_score) best = j, best_score = score;
  }
  return best;
}

// The persistent configs of kSm90Configs whose block tile is 128 rows (ping-pong 128 x 128,
// cooperative 128 x 256 and 128 x 192), instantiated for one cluster size and A's loads (G: the
// conv forward takes these, in clusters of two, with im2col loads).
bool tm128(const Sm90Config& cfg) { return cfg.persist == Persist::PingPong || cfg.bn != 128; }
template <typename T, bool BMN, int CL, sm90::Gather G>
void launch_persistent_tm128(const Sm90Config& cfg, const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb,
                             int ba, int bb) {
  TORCH_INTERNAL_ASSERT(tm128(cfg) && cfg.cluster == CL, "tileops: not a 128-row persistent config of this cluster size");
  with_persistent_tile<true>(cfg, [&](auto tm, auto bn, auto coop) {
    launch_sm90_persistent<T, BMN, decltype(tm)::value, decltype(bn)::value, decltype(coop)::value, CL, G>(a, ma, mb,
                                                                                                          ba, bb);
  });
}

// One persistent config of kSm90Configs, instantiated: its tile, its kind and its cluster size
// (the GEMM's A by TMA tiles); a_rs (TF32): A unrounded, rounded in registers.
template <typename T, bool BMN>
void launch_persistent_config(const Sm90Config& cfg, const GemmArgs& a, const CUtensorMap& ma, const CUtensorMap& mb,
                              int ba, int bb, bool a_rs) {
  constexpr auto G = sm90::Gather::None;
  with_persistent_tile(cfg, [&](auto tm, auto bn, auto coop) {
    constexpr int TM = decltype(tm)::value, BN = decltype(bn)::value;
    constexpr bool COOP = decltype(coop)::value;
    auto go = [&](auto rs) {
      constexpr bool RS = decltype(rs)::value;
      if (cfg.cluster == 2) launch_sm90_persistent<T, BMN, TM, BN, COOP, 2, G, RS>(a, ma, mb, ba, bb);
      else launch_sm90_persistent<T, BMN, TM, BN, COOP, 1, G, RS>(a, ma, mb, ba, bb);
    };
    if constexpr (sm90::kTf32<T>) {
      if (a_rs) go(std::true_type{});
      else go(std::false_type{});
    } else {
      go(std::false_type{});
    }
  });
}

// The TMA map of a GEMM operand of `rows` rows (M for A, N for B), its strides s as (batch, row,
// k): MN-major, boxes of 64 rows (one swizzle atom each) by BK k-rows; K-major, BK by tile_rows.
template <typename T>
CUtensorMap operand_map(const GemmArgs& a, const void* p, int64_t rows, const int64_t* s, int batch, Major m,
                        uint32_t tile_rows) {
  constexpr uint32_t BK = sm90::bk<T>;
  if (m == Major::MN) return matrix_map(p, a.dtype, rows, a.K, batch, s[2], s[0], 64, BK);
  return matrix_map(p, a.dtype, a.K, rows, batch, s[1], s[0], BK, tile_rows);
}

// Config i of kSm90Configs on a's operands, laid out as l. a_rounded (TF32): A's words are already
// rounded (a copy); the one-tile kernel reads rounded words only, so an A read in place is copied
// (rounded) first, per call; the persistent kernels round it in registers (A_RS).
template <typename T>
void launch_sm90_config(const GemmArgs& a, const TmaLayout& l, int i, bool a_rounded) {
  const Sm90Config cfg = kSm90Configs[i];
  if constexpr (sm90::kTf32<T>) {
    if (cfg.persist == Persist::No && !a_rounded) {
      const Padded p = pad_operands(a, TmaLayout{Major::None, l.b});  // A only
      return launch_sm90_config<T>(p.args, sm90_layout(p.args), i, true);
    }
  }
  const auto& o = a.mm;
  const int ba = o.sa[0] == 0 ? 1 : int(a.batch), bb = o.sb[0] == 0 ? 1 : int(a.batch);
  // B's strides as (batch, row = n, k), the order operand_map reads
  const int64_t sb[3] = {o.sb[0], o.sb[2], o.sb[1]};
  const CUtensorMap ma = operand_map<T>(a, o.a, a.M, o.sa, ba, l.a, sm90::BM);
  // The MN-major A variants come in 128 and 256 wide only (bn64 runs as bn128), which keeps
  // the number of Hopper kernels this file instantiates down.
  auto launch_with = [&](auto a_mn, auto b_mn) {
    constexpr bool AMN = decltype(a_mn)::value, BMN = decltype(b_mn)::value;
    const int bn = cfg.bn == 64 && AMN ? 128 : cfg.bn;
    const CUtensorMap mb = operand_map<T>(a, o.b, a.N, sb, bb, l.b, uint32_t(bn / cfg.cluster));
    constexpr auto G = sm90::Gather::None;
    if (cfg.persist != Persist::No) {
      const char* refusal = persistent_refusal(a, AMN);
      TORCH_CHECK(refusal == nullptr, refusal);
      if constexpr (!AMN) launch_persistent_config<T, BMN>(cfg, a, ma, mb, ba, bb, !a_rounded);
    } else if (bn == 256) launch_sm90<T, 256, 4, BMN, G, AMN>(a, ma, mb, ba, bb, cfg.split);
    else if (bn == 128) launch_sm90<T, 128, 6, BMN, G, AMN>(a, ma, mb, ba, bb, cfg.split);
    else if constexpr (!AMN) {
      if (cfg.two_blocks) launch_sm90<T, 64, 4, BMN>(a, ma, mb, ba, bb, cfg.split);
      else launch_sm90<T, 64, 8, BMN>(a, ma, mb, ba, bb, cfg.split);
    }
  };
  using No = std::false_type;
  using Yes = std::true_type;
  const bool a_mn = l.a == Major::MN, b_mn = l.b == Major::MN;
  if constexpr (sm90::kTf32<T>) {
    TORCH_INTERNAL_ASSERT(!a_mn && !b_mn, "tileops: fp32 (TF32) wgmma needs K-major operands");
    launch_with(No{}, No{});
  } else if (a_mn) {
    if (b_mn) launch_with(Yes{}, Yes{});
    else launch_with(Yes{}, No{});
  } else {
    if (b_mn) launch_with(No{}, Yes{});
    else launch_with(No{}, No{});
  }
}

template <typename T>
void run_sm90(const GemmArgs& a, const TmaLayout& l, bool padded, bool a_rounded) {
  // The heuristic: bn64x2 where 128-wide tiles would leave SMs idle but 64-wide ones fill them
  // without split-K, and for N <= 64 (measured, results/h200/14fecd3: square 1024 0.70 -> 1.10x,
  // 1000^3 0.75 -> 0.92x, batched AV 1.00 -> 1.19x; 1x1-conv GEMMs with N = 64 unchanged; large
  // problems are slower with it: ViT-B 0.36-0.67x); the persistent kernels in clusters of two
  // where there are at least two 128 x 128 tiles per SM (persistent_pick); else 256 wide for wide
  // outputs, 128 below.
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const bool a_mn = l.a == Major::MN, b_mn = l.b == Major::MN;
  const bool x2 = !a_mn && (a.N <= 64 || (output_tiles(a, 128) < sms && 2 * output_tiles(a, 64) > sms));  // A MN: no bn64
  const bool persist = !persistent_refusal(a, a_mn) && output_tiles(a, 128) >= 2 * sms;
  static const int kX2 = sm90_index("bn64x2"), kBn256 = sm90_index("bn256"), kBn128 = sm90_index("bn128");
  const int heuristic =
      x2 ? kX2 : persist ? persistent_choices()[persistent_pick(a, sms)].config : a.N > 128 ? kBn256 : kBn128;
  autotune::run(
      [&] {
        return autotune::op_key({"matmul_sm90", c10::toString(a.dtype), autotune::shape_class(a.M, a.N, a.K, a.batch),
                                 std::string(a_mn ? "amn+" : "") + (b_mn ? "bmn" : "bk") + (padded ? "+pad" : "") +
                                     (a_rounded ? "+acopy" : "")});  // TF32: A copied, or rounded in registers
      },
      kSm90Names, heuristic, [&](int i) { launch_sm90_config<T>(a, l, i, a_rounded); });
}

// TF32: B is always copied, rounded and K-major (copy_round_tf32); A is read in place where TMA
// can read it (launch_sm90_config copies it for the one-tile kernel), else copied and rounded.
// At 4096^2 the copies of both operands took 85 of 490 us (NOTES 15); A, a linear's activations,
// is usually the larger one.
template <typename T>
void run_sm90_any_layout(const GemmArgs& a, TmaLayout l) {
  if constexpr (sm90::kTf32<T>) l.b = Major::None;
  if (l.ok()) return run_sm90<T>(a, l, false, false);
  const Padded p = pad_operands(a, l);
  const TmaLayout pl = sm90_layout(p.args);
  TORCH_INTERNAL_ASSERT(pl.ok(), "tileops: padded operands not TMA-readable");
  run_sm90<T>(p.args, pl, true, l.a == Major::None);
}

}  // namespace

// Where the Hopper implicit-GEMM conv kernels can run: 16-bit types, an sm_90a build and GPU,
// x channels_last dense and 16-byte aligned, C a multiple of 64 (a k tile, or an A atom, never
// straddles a tap). N*P*Q is the GEMM's M (forward) or K (weight gradient), so
// sm90_unavailable's size bound also keeps the kernels' 32-bit pixel indices in range.
bool conv_sm90_ok(const GemmArgs& g) {
  const auto& c = g.conv;
  const bool half = g.dtype == at::kHalf || g.dtype == at::kBFloat16;  // TF32 rounding is not wired into the gather
  return half && sm90_unavailable(g) == nullptr && c.C % 64 == 0 && g.batch == 1 &&
         nhwc_dense(c.xs, c.C, c.H, c.W) && reinterpret_cast<uintptr_t>(c.x) % 16 == 0;
}

// The im2col map of a conv's x (NHWC, 16-bit) for the Im2col producers: the box of filter-origin
// positions runs from -pad to the last output's origin, (P - 1) * stride - pad (for the usual P,
// pad - dilation * (kernel - 1) past the last pixel, less the stride's remainder; a data
// gradient's phase, kinds.h, has its own P), stepping by the stride; each load is 64 channels of
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
  const cuuint64_t dims[4] = {cuuint64_t(c.C), cuuint64_t(c.W), cuuint64_t(c.H), cuuint64_t(c.N)};
  const cuuint64_t strides[3] = {cuuint64_t(c.xs[3] * es), cuuint64_t(c.xs[2] * es), cuuint64_t(c.xs[0] * es)};
  const cuuint32_t estr[4] = {1, cuuint32_t(c.sw), cuuint32_t(c.sh), 1};
  return encode_im2col()(m, tma_type(g.dtype), 4, c.x, dims, strides, lower, upper, sm90::bk<c10::Half>,
                         cuuint32_t(pixels), estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// One of a conv family's candidates, autotuned like matmul's under its own family name.
template <typename Launch>
void run_conv_candidates(const GemmArgs& g, const char* family, const std::vector<std::string>& names, int heuristic,
                         Launch&& launch) {
  const auto& c = g.conv;
  autotune::run(
      [&] {
        return autotune::op_key({family, c10::toString(g.dtype), autotune::shape_class(g.M, g.N, g.K, 1),
                                 "r" + std::to_string(c.R) + "s" + std::to_string(c.S)});
      },
      names, heuristic, [&](int i) {
        if (g.dtype == at::kBFloat16) launch(i, c10::BFloat16{});
        else launch(i, c10::Half{});
      });
}

// One conv candidate's launch: tile BN x STAGES, A by TMA im2col loads (IM2COL, map ma) where an
// im2col map was made, else gathered with cp.async (GATHER). MN: A and B MN-major (the weight
// gradient), else both K-major (the forward).
template <typename T, int BN, int STAGES, bool MN, sm90::Gather GATHER, sm90::Gather IM2COL>
void launch_conv(const GemmArgs& g, bool im2col, const CUtensorMap& ma, const CUtensorMap& mb) {
  if (im2col) launch_sm90<T, BN, STAGES, MN, IM2COL, MN>(g, ma, mb, 1, 1);
  else launch_sm90<T, BN, STAGES, MN, GATHER, MN>(g, mb, mb, 1, 1);
}

bool conv_fwd_sm90(const GemmArgs& g) {
  if (!conv_sm90_ok(g) || sm90_layout(g).b != Major::K) return false;  // B = weight rows [K, R*S*C], K-major
  const int64_t sb[3] = {0, g.mm.sb[2], 1};
  // The tile width over output channels, the depth of the ring and how A arrives, autotuned like
  // matmul's (family "conv_fwd_sm90"). bn64 / bn128: one block per SM, deep rings; bn64x2: a
  // 4-stage ring, two blocks per SM (sm90::blocks_per_sm); all three gather A with cp.async.
  // "-im2col": the same tile loaded by TMA in im2col mode (one thread), the cp.async gather where
  // no im2col map can be made. Then the persistent kernels (clusters of two) with A by im2col
  // loads, which need the im2col map and no residual: matmul's persistent_choices(). (A
  // 64-wide ping-pong, pp128x64-c2, measured no faster than bn64x2-im2col on 3x3 64@56 b64, 50.3
  // against 50.7 us, and slower elsewhere: iterations-conv/cand_19979d4_b64.json; dropped.)
  const auto& persist = persistent_choices();
  static const std::vector<std::string> kNames = [&] {
    std::vector<std::string> v = {"bn64", "bn128", "bn64x2", "bn64x2-im2col", "bn128-im2col"};
    for (const PersistentChoice& c : persist) v.push_back(kSm90Names[c.config] + "-im2col");
    return v;
  }();
  constexpr int kBn64x2 = 2, kBn64x2Im2col = 3, kBn128Im2col = 4, kFirstPersist = 5;
  static const int kCoop256 = [&] {  // coop128x256-c2-im2col
    for (int j = 0; j < int(persist.size()); ++j)
      if (persist[j].config == sm90_index("coop128x256-c2")) return kFirstPersist + j;
    TORCH_INTERNAL_ASSERT(false, "tileops: coop128x256-c2 is not a persistent choice");
    return -1;
  }();
  CUtensorMap ma;
  const bool im2col = im2col_map(g, sm90::BM, &ma);
  // The heuristic (H200, results/h200/iterations-conv/cand_32fc427_b32.json, _b64: ResNet-50's
  // 3x3 and strided layers at batch 32 and 64): 64 output channels, bn64x2-im2col (two blocks per
  // SM hide each other's epilogue); else the persistent kernels where matmul would take them
  // (3x3 128@28 b64 29 us against bn128-im2col's 31, 1x1/2 256->512 b32 18 against 30);
  // below that bn128-im2col (256@14 b32 17 us, bn64x2-im2col 24, cuDNN 19), or coop128x256-c2
  // where its waves of 128 x 256 tiles (twice the area, counted 1.12x faster per area) take less
  // time than bn128's waves of 128 x 128 ones: 256@14 b64, 98 cluster tiles in one wave of 66
  // clusters against 196 blocks in two waves of 132, 28 us against 31.
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const bool can_persist = im2col && persistent_refusal(g, false) == nullptr;
  int heuristic = im2col ? kBn128Im2col : kBn64x2;
  if (g.N <= 64) {
    heuristic = kBn64x2Im2col;  // gathers where no im2col map can be made
  } else if (can_persist && output_tiles(g, 128) >= 2 * sms) {
    heuristic = kFirstPersist + persistent_pick(g, sms);
  } else if (can_persist) {
    const int64_t waves128 = (output_tiles(g, 128) + sms - 1) / sms;
    if (2.0 * double(cluster_waves(g, 256, sms)) < 1.12 * double(waves128)) heuristic = kCoop256;
  }
  run_conv_candidates(g, "conv_fwd_sm90", kNames, heuristic, [&](int i, auto tag) {
    using T = decltype(tag);
    constexpr auto G = sm90::Gather::ConvFwd, I = sm90::Gather::ConvFwdIm2col;
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
    const bool wide = i == 1 || i == kBn128Im2col;
    const CUtensorMap mb = operand_map<T>(g, g.mm.b, g.N, sb, 1, Major::K, wide ? 128 : 64);
    const bool by_tma = im2col && i >= kBn64x2Im2col;
    if (i == 0) launch_sm90<T, 64, 8, false, G>(g, mb, mb, 1, 1);  // no im2col variant
    else if (wide) launch_conv<T, 128, 6, false, G, I>(g, by_tma, ma, mb);
    else launch_conv<T, 64, 4, false, G, I>(g, by_tma, ma, mb);
  });
  return true;
}

bool conv_wgrad_sm90(const GemmArgs& g) {
  // B = dY rows [N*P*Q, K] (row-major K x N of the GEMM: MN-major)
  if (!conv_sm90_ok(g) || sm90_layout(g).b != Major::MN) return false;
  const int64_t sb[3] = {0, g.mm.sb[2], g.mm.sb[1]};  // (batch, row = n, k)
  // The tile width over output channels and how A arrives (family "conv_wgrad_sm90"), as the
  // forward's; split-K where splitk_factor says (the reduction N*P*Q is long, the output R*S*C x K
  // small). Im2col loads are 64 pixels (an atom's k-rows) each.
  static const std::vector<std::string> kNames = {"bn64", "bn128", "bn64-im2col", "bn128-im2col"};
  run_conv_candidates(g, "conv_wgrad_sm90", kNames, g.N <= 64 ? 2 : 3, [&](int i, auto tag) {
    using T = decltype(tag);
    constexpr auto G = sm90::Gather::ConvWgrad, I = sm90::Gather::ConvWgradIm2col;
    const CUtensorMap mb = operand_map<T>(g, g.mm.b, g.N, sb, 1, Major::MN, 64);
    CUtensorMap ma;
    const bool im2col = i >= 2 && im2col_map(g, 64, &ma);
    if (i % 2 == 0) launch_conv<T, 64, 8, true, G, I>(g, im2col, ma, mb);
    else launch_conv<T, 128, 6, true, G, I>(g, im2col, ma, mb);
  });
  return true;
}

void gemm_cuda_matmul(const GemmArgs& a) {
  TORCH_INTERNAL_ASSERT(a.mm.rq == 0, "tileops: grouped output rows reach only the Hopper implicit conv kernels");
  if (matmul_skinny(a)) return;  // M <= 16 in fp32/fp64: bound by reading B, no tile fits it
  const bool want = a.algo == Algo::Wgmma || (a.algo == Algo::Auto && tensor_core_dtype(a));
  const char* why = want ? sm90_unavailable(a) : "not requested";
  const TmaLayout l = why == nullptr ? sm90_layout(a) : TmaLayout{};
  // Auto: tiny problems that would need copies stay on one WMMA launch.
  const bool small = double(a.batch) * a.M * a.N * a.K < double(1 << 22);
  if (want && why == nullptr && (a.algo == Algo::Wgmma || !small || l.ok())) {
    if (a.dtype == at::kBFloat16) run_sm90_any_layout<c10::BFloat16>(a, l);
    else if (a.dtype == at::kHalf) run_sm90_any_layout<c10::Half>(a, l);
    else run_sm90_any_layout<float>(a, l);
    return;
  }
  TORCH_CHECK(a.algo != Algo::Wgmma, "tileops.matmul: algo='wgmma' cannot run this problem: ", why);
  launch_matmul(a);
}

}  // namespace tileops::cuda
