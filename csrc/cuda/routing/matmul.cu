// The matmul routing table (CUDA): every matmul, linear, and GEMM a conv lowers to, in order.
// The first candidate that can run the problem runs it (routing/route.h); docs/dispatch.md is
// made from this table.
#include "cuda/routing/candidates.h"
#include "cuda/runtime/launch_util.h"  // device_properties
#include "cuda/skinny/gemm_skinny.cuh"  // kSkinnyMaxM
#include "cuda/sm90/host.cuh"

namespace tileops::cuda {

// Why the Hopper family cannot run on this build, GPU and dtype, or nullptr when it can.
const char* sm90_unavailable(const GemmArgs& a) {
#ifndef TILEOPS_HAVE_SM90A
  return "tileops was built without the sm_90a target (TORCH_CUDA_ARCH_LIST must include 9.0a)";
#endif
  const bool tf32 = a.dtype == c10::ScalarType::Float && (a.allow_tf32 || a.algo == Algo::Wgmma);
  if (a.dtype != c10::ScalarType::Half && a.dtype != c10::ScalarType::BFloat16 && !tf32)
    return "it takes float16, bfloat16 and float32 (as TF32) only";
  if (routing::portable_only()) return routing::kPortableOnly;
  const cudaDeviceProp* prop = &device_properties();
  // sm_90a code runs on 9.0 only: a newer GPU (sm_100, sm_120) running the build's compute_90 PTX,
  // or its own cubin, takes the portable rows below (docs/architecture.md, Build).
  if (prop->major > 9)
    return "sm_90a (wgmma/TMA) code runs on compute capability 9.0 only: a newer GPU takes the portable kernels";
  if (prop->major != 9 || prop->minor != 0) return "it needs a compute capability 9.0 GPU (H100/H200)";
  if (a.K == 0) return "K is zero";
  if (a.batch > 65535 || a.M >= (int64_t(1) << 31) || a.N >= (int64_t(1) << 31) || a.K >= (int64_t(1) << 31))
    return "the problem is too large for one launch";
  return nullptr;
}

namespace {

// Multiply-adds up to which 'auto' runs an fp16/bf16 matmul that TMA cannot read in place, or a
// TF32 one (whose B the Hopper path copies to round it but where K <= 512), on the 'mma' rung: there
// the copies cost more than the Hopper kernel gains (docs/kernels/mma.md#when-routing-takes-it).
// Skinny rows (M <= 16) keep the Hopper split-K: 64-row tiles would be almost empty.
constexpr double kTcSmallWork16 = double(int64_t(1) << 25), kTcSmallWorkTf32 = double(int64_t(1) << 27);

hopper::TmaLayout sm90_reads(const GemmArgs& a) {
  hopper::TmaLayout l = hopper::sm90_layout(a);
  if (a.dtype == c10::ScalarType::Float) l.b = hopper::tf32_b_major(a);  // TF32: as run_sm90_any_layout reads B
  return l;
}

const char* sm90_why_not(const GemmArgs& a) {
  if (a.algo == Algo::Wgmma) return nullptr;  // pinned: it runs, or says why it cannot
  if (a.algo != Algo::Auto) return "algo pinned";
  if (!tensor_core_dtype(a)) return "float64, or float32 with TF32 off";
  if (const char* why = sm90_unavailable(a)) return why;
  const bool tf32 = a.dtype == c10::ScalarType::Float;
  if (a.M > kSkinnyMaxM && (!hopper::sm90_layout(a).ok() || tf32) &&
      double(a.batch) * a.M * a.N * a.K <= (tf32 ? kTcSmallWorkTf32 : kTcSmallWork16))
    return "small, and TMA cannot read it in place (or TF32): the copies cost more than it gains";
  return nullptr;
}

void sm90_run(const GemmArgs& a) {
  if (const char* why = sm90_unavailable(a))
    TORCH_CHECK(false, "tileops.matmul: algo='wgmma' cannot run this problem: ", why);
  const hopper::TmaLayout l = hopper::sm90_layout(a);
  if (a.dtype == c10::ScalarType::BFloat16) hopper::run_sm90_any_layout<c10::BFloat16>(a, l);
  else if (a.dtype == c10::ScalarType::Half) hopper::run_sm90_any_layout<c10::Half>(a, l);
  else hopper::run_sm90_any_layout<float>(a, l);
}

void sm90_explain(const GemmArgs& a, routing::Decision& d) {
  if (sm90_unavailable(a) != nullptr) return;  // a pinned 'wgmma' that will raise
  const hopper::TmaLayout l = sm90_reads(a);
  if (!l.ok()) {
    d.config = "(chosen once the operands TMA cannot read in place are copied)";
    return;
  }
  explain_config(d, hopper::sm90_key(a, l, false, false), hopper::kSm90Names, hopper::sm90_heuristic(a, l),
                 "sm90_heuristic (sm90/host.cu)");
}

const char* mma_why_not(const GemmArgs& a) {
  if (a.algo != Algo::Auto) return "algo pinned";
  if (!tensor_core_dtype(a)) return "float64, or float32 with TF32 off";
  return nullptr;
}
void mma_run(const GemmArgs& a) { launch_matmul(a); }  // auto_algo: 'mma' (matmul_ladder.cu's kernels)

const char* rung_why_not(const GemmArgs& a) { return a.algo == Algo::Auto ? "algo auto" : nullptr; }
void rung_explain(const GemmArgs& a, routing::Decision& d) {
  static const char* const kNames[] = {"auto", "naive", "tiled", "tiled_padded", "register", "vectorized", "mma", "wgmma"};
  d.config = kNames[int(a.algo)];
  d.why = "algo pinned";
}

}  // namespace

const routing::Table kMatmulRoutes(
    "matmul", "matmul, linear, and the GEMMs a conv lowers to",
    {
        {"skinny_tc", "M <= 16, fp16/bf16 (fp32 as TF32), Hopper, operands in aligned 16-byte chunks",
         "kernels/skinny.md#skinny-tensor-core-kernel-matmul_skinny_tc", skinny_tc_why_not, skinny_tc_run, skinny_tc_explain},
        {"skinny", "M <= 16, fp32 or fp64", "kernels/skinny.md#skinny-simt-kernel-matmul_skinny", skinny_why_not, skinny_run},
        {"sm90", "fp16/bf16 (fp32 as TF32) on Hopper, unless small and not TMA-readable; algo='wgmma'",
         "kernels/sm90.md#when-routing-takes-it", sm90_why_not, sm90_run, sm90_explain},
        {"mma", "fp16/bf16 (fp32 as TF32) elsewhere: the portable tensor-core rung", "kernels/mma.md#when-routing-takes-it", mma_why_not, mma_run},
        {"simt_padded", "fp32 (TF32 off) whose operands are not 16-byte readable, large",
         "kernels/ladder.md#matmul_simt-fp32-auto-with-tf32-off", simt_padded_why_not, simt_padded_run},
        {"simt", "fp32 (TF32 off) and fp64", "kernels/ladder.md#the-heuristic-simt_heuristic-and-its-reasons", simt_why_not,
         simt_run, simt_explain},
        {"rung", "algo= names a rung of the ladder", "kernels/ladder.md#the-rungs", rung_why_not, rung_run, rung_explain},
    });

void gemm_cuda_matmul(const GemmArgs& a) {
  TORCH_INTERNAL_ASSERT(a.mm.rq == 0, "tileops: grouped output rows reach only the Hopper implicit conv kernels");
  routing::route(kMatmulRoutes, a);
}

}  // namespace tileops::cuda
