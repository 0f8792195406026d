// What the op layer hands a kernel family: which problem, its sizes, its operands.
#pragma once
#include <c10/core/ScalarType.h>

#include <vector>

#include "common/epilogue.h"
#include "common/problems.h"

namespace tileops {

enum class Kind { Matmul, ConvFwd, ConvDgrad, ConvWgrad };

// Kernel a caller may pin (matmul's `algo`), the rungs of the kernel ladder from the slowest
// up; Auto picks by dtype, device and layout. Names and aliases: parse_algo in ops/common.h.
enum class Algo { Auto, Naive, Tiled, TiledPadded, Register, Vectorized, Mma, Wgmma };

// What the epilogue fuses into a GEMM; Fused{}: a plain GEMM. A problem carries one (GemmArgs
// derives from it), and a path that lowers one problem onto another passes it on or clears it
// as a whole.
struct Fused {
  Act act = Act::None;
  const void* bias = nullptr;  // dtype `dtype`, indexed by problem.bias_index
  // Optional residual added before the activation: dtype `dtype`, exactly the output's strides
  // (the op layer copies it when not), read at the output element's offset from out_base,
  // the output tensor's data pointer (see Epilogue). A path that writes anywhere but the output
  // tensor itself must pass its own residual/out_base pair or clear both.
  const void* residual = nullptr;
  const void* out_base = nullptr;
};

struct GemmArgs : Fused {
  Kind kind = Kind::Matmul;
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool allow_tf32 = false;  // fp32 only: use the tensor-core (tf32) family
  Algo algo = Algo::Auto;
  int64_t batch = 1, M = 0, N = 0, K = 0;
  MatmulOperands mm{};         // kind == Matmul
  ConvOperands conv{};         // the conv kinds
  Fused& fused() { return *this; }
  const Fused& fused() const { return *this; }
};

// Output tiles of bm x bn over problem a (all batch entries): the one count every launch's
// heuristic uses (cuda/sm90/host.cuh's output_tiles is it with the Hopper row tile as default bm).
inline int64_t tiles_of(const GemmArgs& a, int64_t bm, int64_t bn) {
  return (a.M + bm - 1) / bm * ((a.N + bn - 1) / bn) * a.batch;
}

// Batch entries an operand of a holds: one where its batch stride is 0 (broadcast over the batch).
inline int64_t operand_batches(const GemmArgs& a, int64_t batch_stride) { return batch_stride == 0 ? 1 : a.batch; }

// Whether the problem runs on tensor cores: fp16, bf16, and fp32 where TF32 is allowed.
inline bool tensor_core_dtype(const GemmArgs& a) {
  return a.dtype == c10::ScalarType::Half || a.dtype == c10::ScalarType::BFloat16 ||
         (a.dtype == c10::ScalarType::Float && a.allow_tf32);
}

// The epilogue functor of a problem: bias, activation, residual.
template <typename T>
Epilogue<T> epilogue_of(const GemmArgs& a) {
  return Epilogue<T>{static_cast<const T*>(a.bias), a.act, static_cast<const T*>(a.residual),
                     static_cast<const T*>(a.out_base)};
}

// Calls fn(problem) with the problem object of args.kind, typed by T.
template <typename T, typename Fn>
void visit_problem(const GemmArgs& args, Fn&& fn) {
  switch (args.kind) {
    case Kind::Matmul: fn(MatmulProblem<T>(args.mm)); break;
    case Kind::ConvFwd: fn(ConvFwdProblem<T>(args.conv)); break;
    case Kind::ConvDgrad: fn(ConvDgradProblem<T>(args.conv)); break;
    case Kind::ConvWgrad: fn(ConvWgradProblem<T>(args.conv)); break;
  }
}

// Kernel families; the op layer picks by device.
void gemm_cpu(const GemmArgs& args);
#ifdef TILEOPS_WITH_CUDA
void gemm_cuda(const GemmArgs& args);
// Independent problems (disjoint outputs) at once: the first on the current stream, the others on
// side streams joined back into it (cuda::concurrently).
void gemm_cuda_concurrent(const std::vector<GemmArgs>& problems);
#endif

}  // namespace tileops
