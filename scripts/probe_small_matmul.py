"""Small, odd and skinny matmuls in bf16, fp16 and TF32: tileops 'auto', 'mma' and 'wgmma' against
torch (GPU ms, benchmarks/common.timed), with the CUDA kernel table (us per call) of 'auto' and of
torch for each (results/h100/ab1464b/i1, 91c145e/i3, 5c3d0dd/i7).

    python scripts/probe_small_matmul.py OUT.json
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import tileops  # noqa: E402
from common import profiled, timed  # noqa: E402

torch.backends.cudnn.benchmark = True
SH = [(127, 255, 511), (1000, 1000, 1000), (1, 4096, 4096), (16, 4096, 4096), (1024, 1024, 1024), (130, 1000, 255),
      (64, 512, 768), (200, 384, 384)]
recs = []
for dt in ("bfloat16", "float16", "tf32"):
    tf = dt == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf
    dtype = torch.float32 if tf else getattr(torch, dt)
    for (M, N, K) in SH:
        A = torch.randn(M, K, device="cuda", dtype=dtype)
        B = torch.randn(K, N, device="cuda", dtype=dtype)
        ref = A.double() @ B.double()
        r = dict(dtype=dt, M=M, N=N, K=K)
        for algo in ("auto", "mma", "wgmma"):
            try:
                out = tileops.matmul(A, B, algo=algo)
                r[algo + "_err"] = float((out.double() - ref).norm() / ref.norm())
                r[algo + "_ms"] = timed(lambda A=A, B=B, algo=algo: tileops.matmul(A, B, algo=algo))[0]
            except Exception as e:
                r[algo + "_ms"] = None
                r[algo + "_why"] = str(e)[:120]
        r["torch_ms"] = timed(lambda A=A, B=B: A @ B)[0]
        for name, fn in (("auto", lambda A=A, B=B: tileops.matmul(A, B)), ("torch", lambda A=A, B=B: A @ B)):
            prof = profiled(fn, reps=5)
            r[name + "_kernels"] = [(e.key[:70], round(e.device_time_total / 5, 2)) for e in prof.key_averages()
                                    if e.device_time_total > 0][:6]
        print(json.dumps(r), flush=True)
        recs.append(r)
json.dump(recs, open(sys.argv[1], "w"), indent=1)
