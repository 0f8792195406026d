// Matmul on the generic rungs (naive ... vectorized, mma): every kernel instantiated for
// MatmulProblem lives in this translation unit, which compiles beside matmul.cu (Hopper).
#include "gemm_skinny.cuh"
#include "launch.cuh"
#include "splitk.cuh"

namespace tileops::cuda {
namespace {

constexpr int64_t kMinSplitK = 256;  // k per split: enough to hide a tile's prologue and epilogue

// Split-K for the SIMT rungs 'auto' picks for fp32 (TF32 off) and fp64, where the output tiles
// would leave most SMs idle and K is long (conv weight gradients, K = N*P*Q; skinny M): K is cut
// into chunks that run as a batch (chunk j's operands start at k = j*kc) writing the partial
// products to a workspace [splits, M, N], which splitk_reduce sums in a fixed order before the
// epilogue. fp32 takes 'vectorized' here even for few tiles: split-K fills the SMs it left idle.
// A pinned rung runs as it is (the ladder measures the kernels themselves). False: not split.
bool simt_splitk(const GemmArgs& a) {
  if (a.algo != Algo::Auto || a.batch != 1 || tensor_core_dtype(a) ||
      (a.dtype != at::kFloat && a.dtype != at::kDouble))
    return false;
  const bool vec = a.dtype == at::kFloat;
  const int64_t bm = vec ? VecF32::BM : Simt::BM, bn = vec ? VecF32::BN : Simt::BN;
  const int64_t tiles = ((a.M + bm - 1) / bm) * ((a.N + bn - 1) / bn);
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  if (2 * tiles > sms) return false;
  const int64_t want = std::min<int64_t>({2 * sms / tiles, a.K / kMinSplitK, 64});
  if (want < 2) return false;
  const int64_t kc = a.K / want / 16 * 16;  // a multiple of the k tile keeps the 16-byte loads
  const int64_t full = a.K / kc, rem = a.K % kc, splits = full + (rem > 0);
  at::Tensor work = at::empty({splits, a.M, a.N}, cuda_options(a.dtype));
  const int64_t es = int64_t(c10::elementSize(a.dtype));
  auto chunk = [&](int64_t first, int64_t count, int64_t k) {  // `count` chunks of k, from chunk `first`
    GemmArgs g = a;
    g.fused() = Fused{};
    g.algo = vec ? Algo::Vectorized : Algo::Register;
    g.batch = count;
    g.K = k;
    g.mm.a = static_cast<const char*>(a.mm.a) + first * kc * a.mm.sa[2] * es;
    g.mm.b = static_cast<const char*>(a.mm.b) + first * kc * a.mm.sb[1] * es;
    g.mm.c = static_cast<char*>(work.data_ptr()) + first * a.M * a.N * es;
    const int64_t sa0 = kc * a.mm.sa[2], sb0 = kc * a.mm.sb[1], sc[3] = {a.M * a.N, a.N, 1};
    g.mm.sa[0] = sa0;
    g.mm.sb[0] = sb0;
    std::copy(sc, sc + 3, g.mm.sc);
    launch_problem<MatmulProblem>(g, g.mm);
  };
  chunk(0, full, kc);
  if (rem > 0) chunk(full, 1, rem);
  with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value)
      splitk_reduce<T, T>(static_cast<const T*>(work.const_data_ptr()), int(splits), a);
  });
  return true;
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

}  // namespace

// K is cut into chunks until the blocks fill the GPU about four times over; each chunk at least
// one shared-memory stage deep.
bool matmul_skinny(const GemmArgs& a) {
  if (a.algo != Algo::Auto || a.M > kSkinnyMaxM || a.batch > 65535 || (a.dtype != at::kFloat && a.dtype != at::kDouble))
    return false;
  const bool kmajor = a.mm.sb[1] == 1 && a.mm.sb[2] != 1;
  const int64_t cols = kmajor ? skinny_cols<true>() : skinny_cols<false>(), blocks_n = (a.N + cols - 1) / cols;
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t stages = std::max<int64_t>(1, (a.K + kSkinnyKs - 1) / kSkinnyKs);
  const int64_t want = std::max<int64_t>(1, std::min<int64_t>({4 * sms / (blocks_n * a.batch), stages, 64}));
  const int64_t kc = (stages + want - 1) / want * kSkinnyKs, splits = std::max<int64_t>(1, (a.K + kc - 1) / kc);
  const auto stream = at::cuda::getCurrentCUDAStream();
  const dim3 grid(unsigned(blocks_n), unsigned(splits), unsigned(a.batch));
  with_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value) {
      at::Tensor work;  // the chunks' partial sums when K is split
      if (splits > 1) work = at::empty({a.batch, splits, a.M, a.N}, cuda_options(a.dtype));
      T* part = splits > 1 ? work.data_ptr<T>() : nullptr;
      const MatmulProblem<T> p(a.mm);
      with_rows(a.M, [&](auto mt) {
        constexpr int MT = decltype(mt)::value;
        if (kmajor) gemm_skinny_kernel<T, MT, true><<<grid, kSkinnyThreads, 0, stream>>>(p, a.M, a.N, a.K, kc, epilogue_of<T>(a), part);
        else gemm_skinny_kernel<T, MT, false><<<grid, kSkinnyThreads, 0, stream>>>(p, a.M, a.N, a.K, kc, epilogue_of<T>(a), part);
      });
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      if (splits > 1) splitk_reduce<T, T>(part, int(splits), a);
    }
  });
  return true;
}

void launch_matmul(const GemmArgs& a) {
  if (!simt_splitk(a)) launch_problem<MatmulProblem>(a, a.mm);
}
}  // namespace tileops::cuda
