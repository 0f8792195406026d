// Matmul on the generic rungs (naive ... vectorized, mma): every kernel instantiated for
// MatmulProblem lives in this translation unit, which compiles beside the Hopper ones.
#include "gemm_skinny.cuh"
#include "launch.cuh"
#include "splitk.cuh"

namespace tileops::cuda {
namespace {

// Split-K for the SIMT rungs 'auto' picks for fp32 (TF32 off) and fp64, where the output tiles
// would leave most SMs idle and K is long (conv weight gradients, K = N*P*Q; skinny M): K is cut
// into chunks that run as a batch (chunk j's operands start at k = j*kc) writing the partial
// products to a workspace [splits, M, N], which splitk_reduce sums in a fixed order before the
// epilogue. fp32 takes 'vectorized' here even for few tiles where its 16-byte loads apply (split-K
// fills the SMs it left idle), else 'register', whose 64 x 64 tiles are 4x as many.
// A pinned rung runs as it is (the ladder measures the kernels themselves). False: not split.
bool simt_splitk(const GemmArgs& a) {
  if (a.algo != Algo::Auto || a.batch != 1 || tensor_core_dtype(a) ||
      (a.dtype != at::kFloat && a.dtype != at::kDouble))
    return false;
  const bool vec = a.dtype == at::kFloat && vec_layout(a, 4).fast;
  const int64_t bm = vec ? VecF32::BM : Simt::BM, bn = vec ? VecF32::BN : Simt::BN;
  const int64_t tiles = ((a.M + bm - 1) / bm) * ((a.N + bn - 1) / bn);
  const int64_t want = splitk_count(tiles, a.K);
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

// K chunks for `blocks` blocks per chunk when `slots` blocks are resident at once: a block's time
// is about its chunk's length (each warp streams its rows at the latency of a few loads), so the
// cost of s chunks is waves(s) / s. The fewest chunks within 5% of the best up to `most`.
int64_t skinny_splits(int64_t blocks, int64_t slots, int64_t most) {
  auto cost = [&](int64_t s) { return double((blocks * s + slots - 1) / slots) / double(s); };
  double best = cost(1);
  for (int64_t s = 2; s <= most; ++s) best = std::min(best, cost(s));
  int64_t s = 1;
  while (cost(s) > 1.05 * best) ++s;
  return s;
}

// The skinny kernel for T (float or double) on problem a. K is cut into chunks as skinny_splits
// says, while the chunks' partial sums (T, M x N each) stay within a quarter of B's bytes
// (splits <= K / 4M) and each chunk is at least two block steps.
template <typename T>
void launch_skinny(const GemmArgs& a) {
  constexpr int VMAX = int(16 / sizeof(T));
  const bool kmajor = a.mm.sb[1] == 1 && a.mm.sb[2] != 1;
  // 16-byte vectors where B's pointer and strides keep every one aligned
  const int64_t across = kmajor ? a.mm.sb[2] : a.mm.sb[1];  // the stride that is not 1
  const bool vec = (kmajor || a.mm.sb[2] == 1) && across % VMAX == 0 && a.mm.sb[0] % VMAX == 0 &&
                   reinterpret_cast<uintptr_t>(a.mm.b) % 16 == 0;
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  auto go = [&](auto mt, auto km, auto v) {
    constexpr int MT = decltype(mt)::value, V = decltype(v)::value;
    constexpr bool KM = decltype(km)::value;
    using S = SkinnyShape<KM, V>;
    const auto kernel = gemm_skinny_kernel<T, MT, KM, V>;
    static PerDevice kept{};
    const int per_sm = resident_blocks_kept(kept, kernel, S::kThreads);
    const int64_t blocks = (a.N + S::BN - 1) / S::BN * a.batch;
    const int64_t most = std::max<int64_t>(1, std::min<int64_t>({64, a.K / (4 * a.M), a.K / (2 * S::ROUND)}));
    const int64_t want = skinny_splits(blocks, per_sm * sms, most);
    const int64_t kc = std::max<int64_t>(1, (a.K + want * S::ROUND - 1) / (want * S::ROUND)) * S::ROUND;
    const int64_t splits = std::max<int64_t>(1, (a.K + kc - 1) / kc);
    at::Tensor work;  // the chunks' partial sums when K is split
    if (splits > 1) work = at::empty({a.batch, splits, a.M, a.N}, cuda_options(a.dtype));
    T* part = splits > 1 ? work.data_ptr<T>() : nullptr;
    const dim3 grid(unsigned(blocks / a.batch), unsigned(splits), unsigned(a.batch));
    kernel<<<grid, S::kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(MatmulProblem<T>(a.mm), a.M, a.N, a.K, kc,
                                                                       epilogue_of<T>(a), part);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (splits > 1) splitk_reduce<T, T>(part, int(splits), a);
  };
  using Yes = std::true_type;
  using No = std::false_type;
  using Vec = std::integral_constant<int, VMAX>;
  using One = std::integral_constant<int, 1>;
  with_rows(a.M, [&](auto mt) {
    if (kmajor) vec ? go(mt, Yes{}, Vec{}) : go(mt, Yes{}, One{});
    else vec ? go(mt, No{}, Vec{}) : go(mt, No{}, One{});
  });
}

}  // namespace

// fp32 and fp64; fp32 with TF32 allowed reaches it where the skinny tensor-core family refuses
// (launch.cuh). For fp16/bf16 this kernel lost to Hopper split-K (NOTES 36: a lane's loads in
// flight are bounded by its registers).
bool matmul_skinny(const GemmArgs& a) {
  if (a.algo != Algo::Auto || a.M > kSkinnyMaxM || a.batch > 65535) return false;
  if (a.dtype == at::kFloat) launch_skinny<float>(a);
  else if (a.dtype == at::kDouble) launch_skinny<double>(a);
  else return false;
  return true;
}

namespace {

// Work (multiply-adds) from which an fp32 problem whose operands the 16-byte loads cannot read
// (odd K or N, ragged strides) runs on padded copies instead: at 4095 x 4097 x 4093 the
// element-load path took 3.86 ms against cuBLAS's 2.87 (results/h100/cef00ca), where copying
// both operands costs ~0.1 ms.
constexpr double kPadMinWork = double(int64_t(1) << 28);

// fp32 'auto' on the 'vectorized' rung whose operands are not 16-byte readable: both copied,
// K-major, K padded with zeros to whole vectors (A as [M, Kp], B as [N, Kp]; copy_padded), then
// run as usual. False: not taken.
bool matmul_padded(const GemmArgs& a) {
  if (a.algo != Algo::Auto || a.batch != 1 || a.dtype != at::kFloat || tensor_core_dtype(a) ||
      double(a.M) * double(a.N) * double(a.K) < kPadMinWork || auto_algo(a) != Algo::Vectorized ||
      vec_layout(a, 4).fast)
    return false;
  const int64_t vec = 4, kp = (a.K + vec - 1) / vec * vec;
  const auto& o = a.mm;
  auto padded = [&](const void* p, int64_t rows, int64_t s_row, int64_t s_k) {  // [rows, K] -> [rows, kp]
    return copy_padded(device_view(p, {rows, a.K}, {s_row, s_k}, a.dtype), kp, true);
  };
  const at::Tensor pa = padded(o.a, a.M, o.sa[1], o.sa[2]), pb = padded(o.b, a.N, o.sb[2], o.sb[1]);
  GemmArgs g = a;
  g.K = kp;
  g.mm.a = pa.const_data_ptr();
  g.mm.b = pb.const_data_ptr();
  const int64_t sa[3] = {0, kp, 1}, sb[3] = {0, 1, kp};  // B's strides as (batch, k, n)
  std::copy(sa, sa + 3, g.mm.sa);
  std::copy(sb, sb + 3, g.mm.sb);
  TORCH_INTERNAL_ASSERT(vec_layout(g, 4).fast, "tileops: padded fp32 operands not 16-byte readable");
  if (!simt_splitk(g)) launch_problem<MatmulProblem>(g, g.mm);
  return true;
}

}  // namespace

void launch_matmul(const GemmArgs& a) {
  if (matmul_padded(a)) return;
  if (!simt_splitk(a)) launch_problem<MatmulProblem>(a, a.mm);
}
}  // namespace tileops::cuda
