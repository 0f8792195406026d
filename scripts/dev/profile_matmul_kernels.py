"""The CUDA kernels of one matmul, tileops and torch (cuBLAS) side by side, under torch.profiler:
each kernel's launches per call and mean us, for bench_matmul-like shapes. Says where a call's time
goes (TF32's rounding copy of B against its GEMM, a split-K reduce), with the bytes a copy moves.

    python scripts/dev/profile_matmul_kernels.py [--dtype tf32] [--shapes 4096x4096x4096,...] [--out k.json]
"""
import argparse
import functools
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))

import tileops  # noqa: E402
from common import kernel_table, set_precision, write_json  # noqa: E402

SHAPES = "4096x4096x4096,8192x8192x8192,4096x4096x11008,25216x3072x768,1024x1024x1024"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtype", default="tf32", help="tf32, float32, bfloat16 or float16")
    ap.add_argument("--shapes", default=SHAPES, help="MxNxK, comma-separated")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    set_precision(a.dtype)
    dt = torch.float32 if a.dtype in ("tf32", "float32") else getattr(torch, a.dtype)
    records = []
    for shape in a.shapes.split(","):
        M, N, K = (int(v) for v in shape.split("x"))
        x, w = torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)
        for side, fn in (("tileops", tileops.matmul), ("torch", torch.matmul)):
            for name, per_call, us in kernel_table(functools.partial(fn, x, w), a.calls):
                records.append({"shape": shape, "dtype": a.dtype, "side": side, "kernel": name[:160],
                                "per_call": per_call, "us": round(us, 2)})
                print("%-22s %-7s %5.2f x %9.2f us  %s" % (shape, side, per_call, us, name[:100]))
        del x, w
    if a.out:
        write_json(a.out, records)


if __name__ == "__main__":
    main()
