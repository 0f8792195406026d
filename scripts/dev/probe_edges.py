"""GPU time per call (common.timed: the queue runs ahead, so launch gaps count only where the GPU
waits) of one autotune family's configs, each pinned, beside cuBLAS and tileops' own choice, on a
set of shapes; the kernels of cuBLAS's and tileops' own choice from the profiler. (Until f8d75a3 the
times were the profiler's kernel times summed, which counts twice the time a dependent launch, such
as a split's reduce, spends waiting for the kernel before it.)

--set edges (default; family matmul_sm90, bf16): near-1024 shapes whose M, N or K is 1000 instead,
which dimension makes a medium 16-bit matmul slow (bench_matmul's 1000^3 and 1024^2 rows).
--set simt (family matmul_simt, fp32 with TF32 off): the SIMT tile / split-K choice on small and
medium problems (bench_matmul's fp32 127x255x511 and 1000^3 rows).
--set tf32 (family matmul_sm90, fp32 as TF32): the Hopper configs on bench_matmul's TF32 rows.
--set ragged (family matmul_sm90, fp16): mid-size shapes whose operands' rows are ragged for TMA (K and
N not multiples of 64), both or one, one to three waves: where bn64x2, pp128-c2 and split-K meet.
--set x2 (family matmul_sm90, fp16): the same regime with aligned rows.
--set few (family matmul_sm90, bf16): aligned matmuls whose 64-wide tiles fill at most half the SMs
over K <= 1024 (batch-1 ViT linears, a batch-1 patch embedding's GEMM): split-K or more blocks.

    python scripts/dev/probe_edges.py OUT.json [--set simt] [--configs c1,c2,...] [--dtype float16]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))

import tileops  # noqa: E402
from common import kernel_table, timed  # noqa: E402
from tileops import autotune  # noqa: E402

EDGES = [(1024, 1024, 1024), (1000, 1024, 1024), (1024, 1000, 1024), (1024, 1024, 1000), (1000, 1000, 1000),
          (1024, 1000, 1000), (1000, 1024, 1000), (1000, 1000, 1024), (2048, 2048, 1000), (1000, 1000, 4096)]
# (M, N, K) or (batch, M, N, K)
SIMT = [(127, 255, 511), (1000, 1000, 1000), (1024, 1024, 1024), (512, 512, 512), (768, 768, 768),
        (1280, 1280, 2048), (2048, 2048, 2048), (4096, 4096, 4096), (256, 256, 4096), (1000, 64, 1000), (4095, 4097, 4093),
        (64, 512, 64, 512), (32, 196, 256, 1024)]
TF32 = [(1024, 1024, 1024), (1000, 1000, 1000), (2048, 2048, 2048), (4096, 4096, 4096), (127, 255, 511),
        (64, 512, 64, 512), (64, 512, 512, 64), (25216, 768, 3072)]
FEW = [(196, 768, 768), (197, 1152, 384), (197, 384, 384), (197, 1536, 384), (64, 512, 768), (384, 768, 768),
       (256, 1024, 1024), (512, 512, 512), (256, 256, 256), (128, 2048, 512), (512, 768, 1024)]
# Both operands' rows ragged (K and N not multiples of 64 16-bit elements), then one: mid-size
# problems of one to three waves, where sm90_heuristic's bn64x2 / pp128-c2 / split choices meet.
RAGGED = [(m, n, k) for m in (500, 1000, 2000, 3000) for n in (1000, 2000) for k in (1000, 3000)]
RAGGED += [(2000, 1024, 1000), (2000, 1000, 1024), (1000, 2048, 1000), (3000, 1000, 1024)]
# Rows aligned, 64-wide tiles between one and two per SM (sm90_heuristic's bn64x2 / bn128 regime):
# short and long K.
X2 = [(1024, 2048, 1024), (2048, 1024, 1024), (1280, 1536, 1024), (2048, 1024, 512), (1024, 1920, 768),
      (768, 2560, 1024), (1024, 2048, 2048), (2048, 1024, 4096)]
SETS = {
    "edges": ("matmul_sm90", "bfloat16", EDGES, "bn64x2,bn64,bn128,bn64-nosplit,bn128-nosplit,pp128"),
    "tf32": ("matmul_sm90", "tf32", TF32, "bn64x2,bn64,bn128,bn256,pp128,pp128-c2,coop128x256-c2,coop128x192-c2"),
    "simt": ("matmul_simt", "float32", SIMT, None),
    "x2": ("matmul_sm90", "float16", X2, "bn64x2,bn64,bn128,bn256,pp128,pp128-c2,coop128x192-c2"),
    "ragged": ("matmul_sm90", "float16", RAGGED,
               "bn64x2,bn64,bn128,bn256,pp128,pp128-c2,coop128x256-c2,coop128x192-c2,coop256x128-c2"),
    "few": ("matmul_sm90", "bfloat16", FEW, "bn64,bn64-nosplit,bn64x2,bn128,bn128-nosplit,bn256-nosplit,pp128"),  # None: every candidate of the family
}


def gpu_us(fn):
    """GPU microseconds per call, median (common.timed)."""
    return round(timed(fn, budget_s=0.3)[0] * 1e3, 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--set", default="edges", choices=sorted(SETS))
    ap.add_argument("--configs", default=None, help="default: the set's (simt: the whole family)")
    ap.add_argument("--dtype", default=None, help="default: the set's")
    a = ap.parse_args()
    family, dtype, shapes, configs = SETS[a.set]
    dtype = a.dtype or dtype
    dt = torch.float32 if dtype == "tf32" else getattr(torch, dtype)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"  # fp32 means fp32, for cuBLAS and tileops
    rows = []
    for shape in shapes:
        batch, (M, N, K) = (1, shape) if len(shape) == 3 else (shape[0], shape[1:])
        lead = (batch,) if batch > 1 else ()
        for bkind in ("KxN", "NxK"):
            A = torch.randn(lead + (M, K), device="cuda", dtype=dt)
            B = (torch.randn(lead + (K, N), device="cuda", dtype=dt) if bkind == "KxN" else
                 torch.randn(lead + (N, K), device="cuda", dtype=dt).transpose(-1, -2))
            row = {"batch": batch, "M": M, "N": N, "K": K, "b": bkind}
            row["cublas_us"], row["cublas_k"] = gpu_us(lambda A=A, B=B: A @ B), kernel_table(lambda A=A, B=B: A @ B)
            ours = lambda A=A, B=B: tileops.matmul(A, B)  # noqa: E731
            row["auto_us"], row["auto_k"] = gpu_us(ours), kernel_table(ours)
            for c in (a.configs or configs or ",".join(autotune.candidates(family))).split(","):
                try:
                    with autotune.pinned(family, c):
                        row[c + "_us"] = gpu_us(lambda A=A, B=B: tileops.matmul(A, B))
                except RuntimeError as e:
                    row[c + "_us"] = None
                    row[c + "_err"] = str(e)[:120]
            rows.append(row)
            print("  ".join("%s=%s" % (k, ("%.2f" % v) if isinstance(v, float) else v) for k, v in row.items()
                            if not k.endswith(("_k", "_err"))), flush=True)
    with open(a.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "family": family, "dtype": dtype, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
