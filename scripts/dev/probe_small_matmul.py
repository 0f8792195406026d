"""Small, odd and skinny matmuls: tileops 'auto', 'mma' and 'wgmma' against torch (GPU ms,
benchmarks/common.timed), each result's error against float64, and with --kernels the CUDA kernel
table (us per call) of 'auto' and of torch. How routing/matmul.cu's kTcSmallWork* were chosen.

    python scripts/dev/probe_small_matmul.py OUT.json [--set small|mma|skinny] [--kernels]

--set small (default): bench_matmul's small rows and a few more, bf16 / fp16 / TF32 (run with
--kernels: small_probe.json in benchmarks/results/h100/ab1464b/i1, 91c145e/i3 and 5c3d0dd/i7, kept in
git at 1f54b6f). --set mma: 20 shapes from 127 x 255 x 511 to 4096^3, bf16 / TF32 (tc_probe.json in
h100/3fc4f70/i2 and 5c3d0dd/i7, the same). --set skinny:
M <= 16 in bf16 / fp16, as matmul (N-major B) and linear (K-major weight), 'auto' with each of
the skinny tensor-core kernel's configs pinned as well (skinny/matmul_skinny_tc.cu). --set skinny_tf32:
the same in fp32 with TF32 allowed, and 'auto' with TF32 off (the SIMT skinny kernel's fp32 math).
--k-major-b: the sets other than skinny also with B the transpose of an N x K tensor (a linear's
weight), each row's b_layout saying which (the 'mma' rung stages each layout its own way).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import tileops  # noqa: E402
from common import kernel_table, timed  # noqa: E402

SETS = {  # (dtypes, [(batch, M, N, K)])
    "small": (("bfloat16", "float16", "tf32"),
              [(1, 127, 255, 511), (1, 1000, 1000, 1000), (1, 1, 4096, 4096), (1, 16, 4096, 4096),
               (1, 1024, 1024, 1024), (1, 130, 1000, 255), (1, 64, 512, 768), (1, 200, 384, 384)]),
    "skinny": (("bfloat16", "float16"),
               [(1, M, N, K) for M in (1, 4, 8, 16) for (N, K) in ((4096, 4096), (11008, 4096), (4096, 11008))] +
               [(1, 16, 768, 768), (1, 8, 1024, 8192), (1, 16, 32000, 4096), (8, 8, 1024, 1024)]),
    "skinny_tf32": (("tf32",),
                    [(1, M, 4096, 4096) for M in (1, 2, 4, 8, 12, 16)] +
                    [(1, M, N, K) for M in (1, 8, 16) for (N, K) in ((11008, 4096), (4096, 11008))] +
                    [(1, 16, 768, 768), (8, 8, 1024, 1024)]),
    "mma": (("bfloat16", "tf32"),
            [(1, 127, 255, 511), (1, 200, 384, 384), (1, 64, 512, 768), (1, 256, 256, 256), (1, 130, 1000, 255),
             (1, 512, 512, 512), (1, 384, 768, 768), (1, 256, 1024, 1024), (1, 1000, 1000, 1000),
             (1, 1024, 1024, 1024), (1, 2048, 2048, 2048), (1, 1, 4096, 4096), (1, 8, 4096, 4096),
             (1, 16, 4096, 4096), (1, 32, 4096, 4096), (8, 128, 128, 64), (64, 512, 512, 64), (64, 512, 64, 512),
             (1, 3136, 64, 576), (1, 4096, 4096, 4096)]),
}


def skinny_rows(dtype, b, M, N, K, kernels, budget):
    """One record per op (matmul: B as K x N; linear: a weight N x K) for a skinny shape."""
    out = []
    for op in ("matmul", "linear"):
        A = torch.randn(b, M, K, device="cuda", dtype=dtype).squeeze(0)
        if op == "matmul":
            B = torch.randn(b, K, N, device="cuda", dtype=dtype).squeeze(0)
            ours, theirs = (lambda A=A, B=B: tileops.matmul(A, B)), (lambda A=A, B=B: A @ B)
            ref = A.double() @ B.double()
        else:
            W = torch.randn(N, K, device="cuda", dtype=dtype)
            ours = lambda A=A, W=W: tileops.linear(A, W)  # noqa: E731
            theirs = lambda A=A, W=W: torch.nn.functional.linear(A, W)  # noqa: E731
            ref = A.double() @ W.double().t()
        r = dict(dtype=str(dtype).replace("torch.", ""), op=op, batch=b, M=M, N=N, K=K)
        r["auto_err"] = float((ours().double() - ref).norm() / ref.norm())
        r["auto_ms"] = timed(ours, budget_s=budget)[0]
        for cfg in tileops.autotune.candidates("matmul_skinny_tc"):
            with tileops.autotune.pinned("matmul_skinny_tc", cfg):
                r[cfg + "_ms"] = timed(ours, budget_s=budget)[0]
        if dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32:
            torch.backends.cuda.matmul.allow_tf32 = False
            r["fp32_ms"] = timed(ours, budget_s=budget)[0]
            r["fp32_err"] = float((ours().double() - ref).norm() / ref.norm())
            torch.backends.cuda.matmul.allow_tf32 = True
        r["torch_ms"] = timed(theirs, budget_s=budget)[0]
        if kernels:
            r["auto_kernels"], r["torch_kernels"] = kernel_table(ours), kernel_table(theirs)
        print(json.dumps(r), flush=True)
        out.append(r)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--set", default="small", choices=sorted(SETS))
    ap.add_argument("--kernels", action="store_true", help="the kernel tables of 'auto' and torch too")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timed calls per measurement")
    ap.add_argument("--k-major-b", action="store_true",
                    help="each shape also with B K-major (a transposed N x K weight) beside the N-major K x N B")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    dtypes, shapes = SETS[args.set]
    budget = args.budget
    recs = []
    for dt in dtypes:
        torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
        dtype = torch.float32 if dt == "tf32" else getattr(torch, dt)
        for (b, M, N, K) in shapes:
            if args.set.startswith("skinny"):
                recs += skinny_rows(dtype, b, M, N, K, args.kernels, args.budget)
                continue
            for b_layout in ("n_major", "k_major") if args.k_major_b else ("n_major",):
                recs.append(general_row(dt, dtype, b, M, N, K, b_layout, args.kernels, budget))
    with open(args.out, "w") as f:
        json.dump(recs, f, indent=1)


def general_row(dt, dtype, b, M, N, K, b_layout, kernels, budget):
    """'auto', 'mma' and 'wgmma' against torch on one shape; B K x N as it lies (n_major) or the
    transpose of an N x K tensor (k_major)."""
    A = torch.randn(b, M, K, device="cuda", dtype=dtype).squeeze(0)
    if b_layout == "n_major":
        B = torch.randn(b, K, N, device="cuda", dtype=dtype).squeeze(0)
    else:
        B = torch.randn(b, N, K, device="cuda", dtype=dtype).squeeze(0).transpose(-1, -2)
    ref = A.double() @ B.double()
    r = dict(dtype=dt, batch=b, M=M, N=N, K=K, b_layout=b_layout)
    for algo in ("auto", "mma", "wgmma"):
        try:
            out = tileops.matmul(A, B, algo=algo)
            r[algo + "_err"] = float((out.double() - ref).norm() / ref.norm())
            r[algo + "_ms"] = timed(lambda A=A, B=B, algo=algo: tileops.matmul(A, B, algo=algo), budget_s=budget)[0]
        except RuntimeError as e:  # a rung that cannot run the problem says why
            r[algo + "_ms"] = None
            r[algo + "_why"] = str(e)[:120]
    r["torch_ms"] = timed(lambda A=A, B=B: A @ B, budget_s=budget)[0]
    if kernels:
        r["auto_kernels"] = kernel_table(lambda A=A, B=B: tileops.matmul(A, B))
        r["torch_kernels"] = kernel_table(lambda A=A, B=B: A @ B)
    print(json.dumps(r), flush=True)
    return r


if __name__ == "__main__":
    main()
