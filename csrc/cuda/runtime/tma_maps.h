// TMA tensor maps for the Hopper kernels (CUtensorMap, encoded by the driver and kept per host
// thread by their arguments: runtime/tma_maps.cpp). Host code.
#pragma once
#include <c10/core/ScalarType.h>
#include <cuda.h>

#include <cstdint>

namespace tileops::cuda::hopper {

// A tiled map of `rank` dims (inner first; strides in bytes of dims 1..), boxes `box`, 128-byte
// swizzle, reads past the tensor as zeros.
CUtensorMap tiled_map(const void* base, c10::ScalarType st, int rank, const uint64_t* dims, const uint64_t* strides,
                      const uint32_t* box);
// An im2col map (cuTensorMapEncodeIm2col's arguments: corners lower / upper of the rank - 2 spatial
// dims, `channels` x `pixels` a load, element strides estr), 128-byte swizzle, zeros past the
// tensor, into *m. False: the driver refuses it. Tiled and im2col maps are kept by their arguments.
bool im2col_map(const void* base, c10::ScalarType st, int rank, const uint64_t* dims, const uint64_t* strides,
                const int* lower, const int* upper, uint32_t channels, uint32_t pixels, const uint32_t* estr,
                CUtensorMap* m);
CUtensorMapDataType tma_type(c10::ScalarType st);
// The map of a [batch][rows][cols] matrix with a unit stride along cols (row and batch strides
// in elements; a batch stride of 0, one matrix for every batch entry, is given as rows * s_row),
// boxes of box_cols x box_rows, 128-byte swizzle, tails read as zero.
CUtensorMap matrix_map(const void* base, c10::ScalarType st, int64_t cols, int64_t rows, int64_t batch, int64_t s_row,
                       int64_t s_batch, uint32_t box_cols, uint32_t box_rows);

}  // namespace tileops::cuda::hopper
