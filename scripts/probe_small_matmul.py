"""Small, odd and skinny matmuls: tileops 'auto', 'mma' and 'wgmma' against torch (GPU ms,
benchmarks/common.timed), each result's error against float64, and with --kernels the CUDA kernel
table (us per call) of 'auto' and of torch. How matmul.cu's kTcSmallWork* were chosen.

    python scripts/probe_small_matmul.py OUT.json [--set small|mma] [--kernels]

--set small (default): bench_matmul's small rows and a few more, bf16 / fp16 / TF32 (results/h100/
ab1464b/i1, 91c145e/i3, 5c3d0dd/i7 small_probe.json, run with --kernels). --set mma: 20 shapes from
127 x 255 x 511 to 4096^3, bf16 / TF32 (3fc4f70/i2 and 5c3d0dd/i7 tc_probe.json).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import tileops  # noqa: E402
from common import profiled, timed  # noqa: E402

SETS = {  # (dtypes, [(batch, M, N, K)])
    "small": (("bfloat16", "float16", "tf32"),
              [(1, 127, 255, 511), (1, 1000, 1000, 1000), (1, 1, 4096, 4096), (1, 16, 4096, 4096),
               (1, 1024, 1024, 1024), (1, 130, 1000, 255), (1, 64, 512, 768), (1, 200, 384, 384)]),
    "mma": (("bfloat16", "tf32"),
            [(1, 127, 255, 511), (1, 200, 384, 384), (1, 64, 512, 768), (1, 256, 256, 256), (1, 130, 1000, 255),
             (1, 512, 512, 512), (1, 384, 768, 768), (1, 256, 1024, 1024), (1, 1000, 1000, 1000),
             (1, 1024, 1024, 1024), (1, 2048, 2048, 2048), (1, 1, 4096, 4096), (1, 8, 4096, 4096),
             (1, 16, 4096, 4096), (1, 32, 4096, 4096), (8, 128, 128, 64), (64, 512, 512, 64), (64, 512, 64, 512),
             (1, 3136, 64, 576), (1, 4096, 4096, 4096)]),
}


def kernel_table(fn, reps=5):
    prof = profiled(fn, reps=reps)
    return [(e.key[:70], round(e.device_time_total / reps, 2)) for e in prof.key_averages() if e.device_time_total > 0][:6]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--set", default="small", choices=sorted(SETS))
    ap.add_argument("--kernels", action="store_true", help="the kernel tables of 'auto' and torch too")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    dtypes, shapes = SETS[args.set]
    recs = []
    for dt in dtypes:
        torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
        dtype = torch.float32 if dt == "tf32" else getattr(torch, dt)
        for (b, M, N, K) in shapes:
            A = torch.randn(b, M, K, device="cuda", dtype=dtype).squeeze(0)
            B = torch.randn(b, K, N, device="cuda", dtype=dtype).squeeze(0)
            ref = A.double() @ B.double()
            r = dict(dtype=dt, batch=b, M=M, N=N, K=K)
            for algo in ("auto", "mma", "wgmma"):
                try:
                    out = tileops.matmul(A, B, algo=algo)
                    r[algo + "_err"] = float((out.double() - ref).norm() / ref.norm())
                    r[algo + "_ms"] = timed(lambda A=A, B=B, algo=algo: tileops.matmul(A, B, algo=algo))[0]
                except RuntimeError as e:  # a rung that cannot run the problem says why
                    r[algo + "_ms"] = None
                    r[algo + "_why"] = str(e)[:120]
            r["torch_ms"] = timed(lambda A=A, B=B: A @ B)[0]
            if args.kernels:
                r["auto_kernels"] = kernel_table(lambda A=A, B=B: tileops.matmul(A, B))
                r["torch_kernels"] = kernel_table(lambda A=A, B=B: A @ B)
            print(json.dumps(r), flush=True)
            recs.append(r)
    with open(args.out, "w") as f:
        json.dump(recs, f, indent=1)


if __name__ == "__main__":
    main()
