// The split-K reduce's kernels, once for each (T, Acc) of TILEOPS_SPLITK_TYPES (splitk.cuh): a
// translation unit of their own, which every family's calls link against.
#include "cuda/splitk/splitk.cuh"

namespace tileops::cuda {
#define TILEOPS_SPLITK_INSTANTIATE(T, Acc) template void splitk_reduce<T, Acc>(const Acc*, int, const GemmArgs&);
TILEOPS_SPLITK_TYPES(TILEOPS_SPLITK_INSTANTIATE)
#undef TILEOPS_SPLITK_INSTANTIATE
}  // namespace tileops::cuda
