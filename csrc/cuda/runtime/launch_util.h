// Small helpers shared by the CUDA translation units (host-side but for static_for, AccOf, Pack),
// with no ATen in them: a unit that instantiates kernels and launches them needs only c10's
// headers, which cost a unit ~2 s of nvcc where ATen's tensor headers cost ~10
// (docs/performance.md#build-and-device-logistics). The ATen ones: cuda_util.h.
#pragma once
#include <c10/core/ScalarType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace tileops {
namespace cuda {

// Calls fn(T{}) for the storage type of a dtype.
template <typename Fn>
void with_dtype(c10::ScalarType st, Fn&& fn) {
  switch (st) {
    case c10::ScalarType::Double: return fn(double{});
    case c10::ScalarType::Float: return fn(float{});
    case c10::ScalarType::Half: return fn(c10::Half{});
    case c10::ScalarType::BFloat16: return fn(c10::BFloat16{});
    default: TORCH_CHECK(false, "tileops: unsupported dtype ", st);
  }
}

// f(std::integral_constant<int, i>{}) for i = 0 .. N - 1, unrolled: a runtime index dispatched to
// a template's instances on the host, register arrays indexed by i kept in registers on the device.
template <typename F, int... I>
__host__ __device__ __forceinline__ void static_for_impl(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, typename F>
__host__ __device__ __forceinline__ void static_for(F&& f) {
  static_for_impl(f, std::make_integer_sequence<int, N>{});
}

// Accumulator of an element type: double for double, float otherwise.
template <typename T>
using AccOf = std::conditional_t<std::is_same<T, double>::value, double, float>;

// V values of E as one aligned vector: Pack loads and stores are 16-byte (or narrower) accesses.
template <typename E, int V>
struct alignas(sizeof(E) * V) Pack {
  E v[V];
};

// Device memory from torch's caching allocator, on the current device and stream, held while any
// copy of the Workspace lives (a tensor kept alive behind an opaque owner: no ATen here).
struct Workspace {
  std::shared_ptr<void> owner;
  void* ptr = nullptr;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
  explicit operator bool() const { return ptr != nullptr; }
};
Workspace workspace(int64_t elements, c10::ScalarType st);  // runtime/workspace.cpp
inline Workspace float_workspace(int64_t elements) { return workspace(elements, c10::ScalarType::Float); }
// The [rows, K] matrix at p (strides s_row, s_k; dtype st) copied into a new contiguous [rows, kp]
// one, zeros past K (cuda_util.h's copy_padded).
Workspace padded_rows(const void* p, int64_t rows, int64_t K, int64_t s_row, int64_t s_k, c10::ScalarType st,
                      int64_t kp);
// The current device's properties (torch's cache of them) and its multiprocessor count.
const cudaDeviceProp& device_properties();
inline int sm_count() { return device_properties().multiProcessorCount; }
// Blocks of 256 threads for a grid-stride loop over `total` items.
inline unsigned blocks_for(int64_t total, int64_t max_blocks = 1 << 20) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((total + 255) / 256, max_blocks)));
}

// fn(I{}) with I = int32_t when every index of a launch is below `extent` and `extent` leaves room
// for a grid-stride step (blocks_for: at most 2^28 threads), else int64_t: a 64-bit division is a
// long instruction sequence, which index-heavy kernels (col2im, the split-K reduce) spent most of
// their time on.
template <typename Fn>
void with_index(int64_t extent, Fn&& fn) {
  if (extent < (int64_t(1) << 31) - (int64_t(1) << 28)) fn(int32_t{});
  else fn(int64_t{});
}

// Blocks of `kernel` (`threads` each, `smem` bytes of dynamic shared memory) that fit on one SM
// of the current device at once, at least one. A runtime query: callers on hot paths keep the
// answer per device, in a PerDevice of their own (resident_blocks_kept).
template <typename Kernel>
int resident_blocks(Kernel kernel, int threads, size_t smem = 0) {
  int n = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  return std::max(1, n);
}
// A value asked once per device (0: not yet), by device index.
using PerDevice = std::array<std::atomic<int>, 64>;
// The current device's value in `kept`, from ask() (a positive int) the first time.
template <typename Ask>
int kept_per_device(PerDevice& kept, Ask&& ask) {
  const int dev = c10::cuda::current_device();
  TORCH_INTERNAL_ASSERT(dev < 64, "tileops: device index ", dev, " past the per-device cache");
  int n = kept[dev].load(std::memory_order_acquire);
  if (n == 0) kept[dev].store(n = ask(), std::memory_order_release);
  return n;
}
template <typename Kernel>
int resident_blocks_kept(PerDevice& kept, Kernel kernel, int threads, size_t smem = 0) {
  return kept_per_device(kept, [&] { return resident_blocks(kernel, threads, smem); });
}
// Clusters of `kernel` launched as `cfg` (its cluster dimension, block and shared memory) that are
// resident on the current device at once, kept per device; may be 0. A cluster's blocks share a
// GPC, whose SM count need not be a multiple of the cluster size, so this can be fewer than the
// SMs' worth. (Kept as n + 1: kept_per_device holds positive values.)
template <typename Kernel>
int resident_clusters_kept(PerDevice& kept, Kernel kernel, const cudaLaunchConfig_t& cfg) {
  return kept_per_device(kept, [&] {
           int n = 0;
           C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, kernel, &cfg));
           return n + 1;
         }) -
         1;
}

// A kernel's dynamic shared-memory limit is a per-device attribute: set once on each device (bit
// d of the kernel's own set_on), not on every launch.
template <typename Kernel>
void allow_smem(Kernel kernel, size_t smem, std::atomic<uint64_t>& set_on) {
  const int dev = c10::cuda::current_device();
  TORCH_INTERNAL_ASSERT(dev < 64, "tileops: device index ", dev, " past the attribute bitmask");
  if (!((set_on.load(std::memory_order_acquire) >> dev) & 1)) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    set_on.fetch_or(uint64_t(1) << dev, std::memory_order_release);
  }
}

// Whether kernels that follow another of tileops' kernels on the stream are launched as its
// programmatic dependents (griddep.cuh): sm_90 and newer, unless TILEOPS_PDL=0 (streams.cpp,
// beside TILEOPS_STREAMS).
bool dependent_launches();

// A launch on the current stream (cudaLaunchKernelEx) whose blocks form clusters of `cluster`
// blocks (sm_90). For a cluster of one block the attribute is left off: every block is then a
// cluster of its own. dependent: a programmatic dependent launch (sm_90; griddep.cuh).
// Not copyable: cfg.attrs points at attr.
struct ClusterLaunch {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  ClusterLaunch(dim3 grid, dim3 block, size_t smem, dim3 cluster, bool dependent = false) {
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c10::cuda::getCurrentCUDAStream();
    unsigned n = 0;
    if (cluster.x * cluster.y * cluster.z > 1) {
      attr[n].id = cudaLaunchAttributeClusterDimension;
      attr[n].val.clusterDim.x = cluster.x;
      attr[n].val.clusterDim.y = cluster.y;
      attr[n].val.clusterDim.z = cluster.z;
      ++n;
    }
    if (dependent) {
      attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
  template <typename... Params, typename... Args>
  void operator()(void (*kernel)(Params...), Args&&... args) {
    C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  }
};
// A kernel that follows another of tileops' on the stream, launched as its programmatic dependent
// where dependent_launches() says (the kernel calls griddep_wait before touching memory).
struct DependentLaunch : ClusterLaunch {
  DependentLaunch(dim3 grid, dim3 block, size_t smem)
      : ClusterLaunch(grid, block, smem, dim3(1), dependent_launches()) {}
};

}  // namespace cuda
}  // namespace tileops
