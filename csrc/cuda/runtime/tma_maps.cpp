// TMA tensor maps (declared in tma_maps.h): cuTensorMapEncodeTiled / Im2col through the driver's
// entry points, and a per-thread cache of the maps already encoded, by their arguments. Moved
// here from matmul.cu unchanged; a .cu so that it compiles with the flags it always had.
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

#include "cuda/runtime/tma_maps.h"

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

// Maps already encoded, by their arguments: an encode costs more host time than a lookup, and a
// model repeats its layers on the same buffers (docs/kernels/sm90.md#design). A small direct-mapped
// table per host thread; an entry is only ever a map of exactly its key.
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

// Runs a driver encode; where the calling thread has no current context (CUDA_ERROR_INVALID_CONTEXT:
// a thread whose first CUDA call this is, such as the autograd engine's device thread, whose device
// guard skips cudaSetDevice when the device already matches), makes the runtime's primary context
// current (cudaFree(nullptr)) and encodes again.
template <typename Encode>
CUresult with_context(Encode&& encode) {
  CUresult r = encode();
  if (r == CUDA_ERROR_INVALID_CONTEXT) {
    C10_CUDA_CHECK(cudaFree(nullptr));
    r = encode();
  }
  return r;
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
    const CUresult r = with_context([&] {
      return encode_tiled()(out, tma_type(st), cuuint32_t(rank), const_cast<void*>(base), k.dims, k.strides, k.box,
                            k.estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    });
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
    return with_context([&] {
             return encode_im2col()(out, tma_type(st), cuuint32_t(rank), const_cast<void*>(base), k.dims, k.strides,
                                    k.lower, k.upper, channels, pixels, k.estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
           }) == CUDA_SUCCESS;
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

}  // namespace hopper
}  // namespace tileops::cuda
