// Warp-level tensor-core primitives (sm_80+): shared-memory addresses, ldmatrix, cp.async, mma.sync
// with fp32 accumulators and TF32 rounding, shared by the 'mma' rung (gemm_tc.cuh), the skinny
// tensor-core kernel (gemm_skinny_tc.cuh), the small-C conv kernels (conv/conv_smallc_*.cu), the
// Hopper kernels (sm90/) and TF32's operand copy (sm90/host.cu).
#pragma once
#include <cstdint>
#include <type_traits>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace tileops {
namespace cuda {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// v rounded to the nearest TF32 (cvt.rna: ties away from zero, as cuBLAS rounds; NaN and Inf kept),
// as fp32 bits, so that the tensor cores' truncation of the low 13 bits leaves it as it is.
__device__ __forceinline__ uint32_t round_tf32(float v) {
  uint32_t u;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(v));
  return u;
}

// Four 8x8 b16 matrices: lanes 8i..8i+7 give matrix i's row addresses (16 bytes each); thread t
// receives row t / 4, 32-bit word t % 4 of each.
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, uint32_t addr) {  // addr: shared window
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* p) {
  ldmatrix_x4(r, smem_u32(p));
}

// The same with each 8x8 matrix transposed: thread t receives column t / 4, rows 2 (t % 4) and
// 2 (t % 4) + 1 (for tiles stored the other way round from the fragment's rows).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// Two 8x8 b16 matrices (lanes 0..15 give the row addresses).
__device__ __forceinline__ void ldmatrix_x2(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_u32(p)));
}

// 16 bytes from global src to shared dst without passing through registers (cp.async.cg: cached
// in L2 only): the first `bytes` of src, zeros after (0: nothing read, src need only be a valid
// address; without `bytes`, all 16). Completion: cp_async_commit groups the thread's copies,
// cp_async_wait<n> waits until at most n of its groups are still in flight.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// d (16x8, fp32) += a (16 x k) . b (k x 8), one warp: m16n8k16 for fp16 / bf16, m16n8k8 for TF32
// (T = float). Either way a k step is 32 bytes of a row, and the fragments have the same
// register counts and (row, 32-bit word) layout, so the callers' ldmatrix addressing is one.
template <typename T>
__device__ __forceinline__ void mma_sync(float* d, const uint32_t* a, const uint32_t* b) {
#define TILEOPS_MMA(shape_types)                                                                           \
  asm volatile("mma.sync.aligned." shape_types " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
  if constexpr (std::is_same<T, c10::BFloat16>::value) TILEOPS_MMA("m16n8k16.row.col.f32.bf16.bf16.f32");
  else if constexpr (std::is_same<T, c10::Half>::value) TILEOPS_MMA("m16n8k16.row.col.f32.f16.f16.f32");
  else TILEOPS_MMA("m16n8k8.row.col.f32.tf32.tf32.f32");
#undef TILEOPS_MMA
}

// The 32-bit shared-memory words of n values of T: pairs of 16-bit values (low half first), or
// fp32 values rounded to the nearest TF32.
template <typename T, int N>
__device__ __forceinline__ void pack_words(const T (&v)[N], uint32_t* w) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = round_tf32(static_cast<float>(v[i]));
  } else {
    static_assert(sizeof(T) == 2 && N % 2 == 0, "pairs of 16-bit values");
#pragma unroll
    for (int i = 0; i < N / 2; ++i) w[i] = uint32_t(v[2 * i].x) | (uint32_t(v[2 * i + 1].x) << 16);
  }
}

}  // namespace cuda
}  // namespace tileops
