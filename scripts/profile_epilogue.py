"""One linear for ncu, with and without an activation: where a fused epilogue's time goes.

    ncu -k regex:'gemm' ... python scripts/profile_epilogue.py M N K dtype [config]

Runs tileops.linear(x, w, bias) twice, then tileops.linear(x, w, bias, "gelu") twice (so the
plain kernel is launch 0 and the GELU one launch 2); dtype bfloat16, float16 or float32 (TF32
off); config: a matmul_sm90 (16-bit) or matmul_simt (fp32) config pinned for both."""
import contextlib
import sys

import torch

import tileops
from tileops import autotune

M, N, K = (int(v) for v in sys.argv[1:4])
dtype = getattr(torch, sys.argv[4])
config = sys.argv[5] if len(sys.argv) > 5 else None
torch.backends.cuda.matmul.allow_tf32 = False
x = torch.randn(M, K, device="cuda", dtype=dtype)
w = torch.randn(N, K, device="cuda", dtype=dtype)
bias = torch.randn(N, device="cuda", dtype=dtype)
family = "matmul_simt" if dtype == torch.float32 else "matmul_sm90"
with autotune.pinned(family, config) if config else contextlib.nullcontext():
    for act in ("none", "gelu"):
        for _ in range(2):
            tileops.linear(x, w, bias, act)
torch.cuda.synchronize()
