"""Which dimension makes a medium 16-bit matmul slow: kernel times (torch profiler, summed over
the call's kernels) of near-1024 shapes whose M, N or K is 1000 instead, each matmul_sm90 config
pinned, beside cuBLAS. Guides the small-square heuristic (bench_matmul's 1000^3 and 1024^2 rows).

    python scripts/probe_edges.py OUT.json [--configs bn64x2,bn128,...]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from probe_small_matmul import kernel_table  # noqa: E402

import tileops  # noqa: E402
from tileops import autotune  # noqa: E402

SHAPES = [(1024, 1024, 1024), (1000, 1024, 1024), (1024, 1000, 1024), (1024, 1024, 1000), (1000, 1000, 1000),
          (1024, 1000, 1000), (1000, 1024, 1000), (1000, 1000, 1024), (2048, 2048, 1000), (1000, 1000, 4096)]


def kernel_us(fn, reps=10):
    """(us of all the call's kernels, the kernel table) from probe_small_matmul's profile."""
    ks = kernel_table(fn, reps=reps)
    return sum(t for _, t in ks), ks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--configs", default="bn64x2,bn64,bn128,bn64-nosplit,bn128-nosplit,pp128")
    ap.add_argument("--dtype", default="bfloat16")
    a = ap.parse_args()
    dt = getattr(torch, a.dtype)
    rows = []
    for M, N, K in SHAPES:
        for bkind in ("KxN", "NxK"):
            A = torch.randn(M, K, device="cuda", dtype=dt)
            B = torch.randn(K, N, device="cuda", dtype=dt) if bkind == "KxN" else torch.randn(N, K, device="cuda",
                                                                                                dtype=dt).t()
            row = {"M": M, "N": N, "K": K, "b": bkind}
            row["cublas_us"], row["cublas_k"] = kernel_us(lambda A=A, B=B: A @ B)
            row["auto_us"], row["auto_k"] = kernel_us(lambda A=A, B=B: tileops.matmul(A, B))
            for c in a.configs.split(","):
                try:
                    with autotune.pinned("matmul_sm90", c):
                        row[c + "_us"], _ = kernel_us(lambda A=A, B=B: tileops.matmul(A, B))
                except RuntimeError as e:
                    row[c + "_us"] = None
                    row[c + "_err"] = str(e)[:120]
            rows.append(row)
            print("  ".join("%s=%s" % (k, ("%.2f" % v) if isinstance(v, float) else v) for k, v in row.items()
                            if not k.endswith(("_k", "_err"))), flush=True)
    with open(a.out, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "dtype": a.dtype, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
