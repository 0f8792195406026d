"""The 'mma' rung against 'wgmma', 'auto' and torch on small and mid matmuls, bf16 and TF32 (GPU ms,
benchmarks/common.timed), with each result's error against float64; how matmul.cu's kTcSmallWork*
were chosen (results/h100/3fc4f70/i2, 5c3d0dd/i7).

    python scripts/probe_mma.py OUT.json
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import tileops  # noqa: E402
from common import timed  # noqa: E402

SH = [(1, 127, 255, 511), (1, 200, 384, 384), (1, 64, 512, 768), (1, 256, 256, 256), (1, 130, 1000, 255),
      (1, 512, 512, 512), (1, 384, 768, 768), (1, 256, 1024, 1024), (1, 1000, 1000, 1000), (1, 1024, 1024, 1024),
      (1, 2048, 2048, 2048), (1, 1, 4096, 4096), (1, 8, 4096, 4096), (1, 16, 4096, 4096), (1, 32, 4096, 4096),
      (8, 128, 128, 64), (64, 512, 512, 64), (64, 512, 64, 512), (1, 3136, 64, 576), (1, 4096, 4096, 4096)]
recs = []
for dt in ("bfloat16", "tf32"):
    tf = dt == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf
    dtype = torch.float32 if tf else getattr(torch, dt)
    for (b, M, N, K) in SH:
        A = torch.randn(b, M, K, device="cuda", dtype=dtype).squeeze(0)
        B = torch.randn(b, K, N, device="cuda", dtype=dtype).squeeze(0)
        ref = A.double() @ B.double()
        r = dict(dtype=dt, batch=b, M=M, N=N, K=K)
        for algo in ("mma", "wgmma", "auto"):
            out = tileops.matmul(A, B, algo=algo)
            r[algo + "_err"] = float((out.double() - ref).norm() / ref.norm())
            r[algo + "_ms"] = timed(lambda A=A, B=B, algo=algo: tileops.matmul(A, B, algo=algo))[0]
        r["torch_ms"] = timed(lambda A=A, B=B: A @ B)[0]
        print("%-8s %3d x %5d x %5d x %5d  mma %.4f  wgmma %.4f  auto %.4f  torch %.4f   err mma %.1e wgmma %.1e" % (
            dt, b, M, N, K, r["mma_ms"], r["wgmma_ms"], r["auto_ms"], r["torch_ms"], r["mma_err"], r["wgmma_err"]), flush=True)
        recs.append(r)
json.dump(recs, open(sys.argv[1], "w"), indent=1)
