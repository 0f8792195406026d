// The packed rows' vector copies of R operand rows (or columns) written k-major (dst[k * R + r]), as
// pack_a's strips and pack_b_panel's panels are laid out. gather_transposed takes rows that are
// unit-stride runs along k; copy_rows, rows side by side in memory. In
// the x86 files a W x W block (W = the vector: 16 floats in AVX-512, 8 in AVX2) is loaded a row a
// vector (16-bit operands converted as they load), transposed in registers and stored a k a
// vector, where the element-wise copy wrote R strided scalars per k. Elsewhere (the baseline
// build, fp64) the packers copy element by element. Included by gemm_packed.h, so compiled once
// per instruction set like it. docs/kernels/cpu.md#the-packed-gemm-cpu_avx512-cpu_avx2-cpu_packed.
#pragma once
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
#include <immintrin.h>
#endif

namespace tileops {
namespace cpu {
namespace {

#if defined(CPU_CAPABILITY_AVX512)
constexpr int64_t kTW = 16;
using TVec = __m512;
inline TVec zero_vec() { return _mm512_setzero_ps(); }

// r[i][j] -> r[j][i]: pairs of rows interleaved, then pairs of pairs, then 128-bit lanes twice.
inline void transpose_block(TVec r[kTW]) {
  TVec t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0xDD);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
  }
}

// n <= kTW elements of src as floats, lanes past n zero (masked: nothing past n is read)
template <typename T>
inline TVec load_floats(const T* src, int64_t n) {
  const __mmask16 m = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
  if constexpr (std::is_same<T, float>::value) {
    return _mm512_maskz_loadu_ps(m, src);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, src);
    if constexpr (std::is_same<T, c10::Half>::value) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // bf16: the high half
  }
}

inline void store_floats(float* dst, TVec v, int64_t n) {
  if (n >= 16) _mm512_storeu_ps(dst, v);
  else _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << n) - 1), v);
}
#define TILEOPS_TRANSPOSE_PACK 1

#elif defined(CPU_CAPABILITY_AVX2)
constexpr int64_t kTW = 8;
using TVec = __m256;
inline TVec zero_vec() { return _mm256_setzero_ps(); }

inline void transpose_block(TVec r[kTW]) {
  TVec t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

inline __m256i lane_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// n <= kTW elements of src as floats, lanes past n zero (a short run is staged through a zeroed
// buffer: nothing past n is read)
template <typename T>
inline TVec load_floats(const T* src, int64_t n) {
  if constexpr (std::is_same<T, float>::value) {
    return n >= 8 ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, lane_mask(n));
  } else {
    alignas(16) T buf[8] = {};
    if (n < 8) std::copy(src, src + n, buf);
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(n >= 8 ? src : buf));
    if constexpr (std::is_same<T, c10::Half>::value) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));  // bf16: the high half
  }
}

inline void store_floats(float* dst, TVec v, int64_t n) {
  if (n >= 8) _mm256_storeu_ps(dst, v);
  else _mm256_maskstore_ps(dst, lane_mask(n), v);
}
#define TILEOPS_TRANSPOSE_PACK 1
#endif

// Whether the packers take gather_transposed: the x86 files, fp32 accumulators (fp64 packs element
// by element).
#ifdef TILEOPS_TRANSPOSE_PACK
template <typename Acc>
constexpr bool kTransposePack = std::is_same<Acc, float>::value;

// dst[k * R + r] = src[r][k] as floats for k < n and r < R; a null src[r] is a row of zeros.
template <int64_t R, typename T>
void gather_transposed(const T* const* src, int64_t n, float* dst) {
  for (int64_t k = 0; k < n; k += kTW) {  // k outer: each block of output rows is written once
    const int64_t kn = std::min(kTW, n - k);
    for (int64_t r0 = 0; r0 < R; r0 += kTW) {
      const int64_t rn = std::min(kTW, R - r0);
      TVec v[kTW];
      for (int64_t i = 0; i < kTW; ++i)
        v[i] = i < rn && src[r0 + i] != nullptr ? load_floats(src[r0 + i] + k, kn) : zero_vec();
      transpose_block(v);
      for (int64_t j = 0; j < kn; ++j) store_floats(dst + (k + j) * R + r0, v[j], rn);
    }
  }
}

// dst[k * R + r] = src[k * stride + r] as floats for k < n and r < rows, zero for r in [rows, R)
// and everywhere where src is null: rows that lie side by side in memory (an NCHW image's
// neighbouring pixels), a vector a k.
template <int64_t R, typename T>
void copy_rows(const T* src, int64_t stride, int64_t n, int64_t rows, float* dst) {
  if (src == nullptr) return std::fill(dst, dst + n * R, 0.f);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t r0 = 0; r0 < R; r0 += kTW)
      store_floats(dst + k * R + r0, load_floats(src + k * stride + r0, std::max(int64_t(0), std::min(kTW, rows - r0))),
                   std::min(kTW, R - r0));
}
#else
template <typename Acc>
constexpr bool kTransposePack = false;
// never called (kTransposePack)
template <int64_t R, typename T>
void gather_transposed(const T* const*, int64_t, float*) {}
template <int64_t R, typename T>
void copy_rows(const T*, int64_t, int64_t, int64_t, float*) {}
#endif

}  // namespace
}  // namespace cpu
}  // namespace tileops
