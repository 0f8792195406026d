// Shared-memory mbarriers and 1-D bulk copies (sm_90: TMA without a tensor map), shared by the
// Hopper GEMM family (sm90/) and the depthwise row ring (conv/depthwise_strip.cu). Device code
// for sm_90 and newer only; callers guard their kernels with __CUDA_ARCH__ >= 900.
#pragma once
#include <cstdint>

#include "cuda/ptx/mma_sync.cuh"  // smem_u32

namespace tileops {
namespace cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count));
}
// Orders this thread's shared-memory accesses by ordinary instructions (st.shared, ldmatrix,
// cp.async) before the async proxy's that follow (TMA loads and stores, bulk copies, wgmma's operand
// reads): data written becomes visible to them, and reads are done before they overwrite the bytes
// (a ring stage released to its producer: docs/kernels/skinny.md#the-rings-release).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// After a thread's mbar_inits: they are visible to the async proxy (TMA's complete_tx) and to the
// cluster's other blocks before the barrier (block or cluster) that follows.
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global src into this CTA's
// shared memory at dst, completing on bar (whose expect_tx the caller set).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
#endif

}  // namespace cuda
}  // namespace tileops
