"""One GEMM shape for ncu: two calls of tileops.matmul, then two of torch.matmul (cuBLAS), so one
ncu run profiles both sides' kernels (copies and reduces included):

    ncu --clock-control none -k regex:'gemm|nvjet|copy|reduce|gemv' ... \\
        python scripts/dev/profile_sm90.py [M N K [dtype]] [--linear ACTS] [--config NAME]

dtype: bfloat16 (default), float16, tf32 (fp32 with TF32 allowed) or float32 (TF32 off).
Without a shape: the ViT-B fc1 shape, 25216 x 3072 x 768.
--linear none,gelu: tileops.linear(x, w, bias, act) instead, twice for each activation in turn and
no torch calls (launches 0-1 the first activation's, 2-3 the next's): where a fused epilogue's time
goes. --config: a matmul_sm90 (16-bit, TF32) or matmul_simt (fp32) config pinned throughout."""
import argparse
import contextlib

import torch

import tileops
from tileops import autotune

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("shape", nargs="*", type=str, help="M N K [dtype]")
ap.add_argument("--linear", default=None, help="comma-separated activations: profile tileops.linear with each")
ap.add_argument("--config", default=None)
a = ap.parse_args()
if len(a.shape) not in (0, 3, 4):
    ap.error("give M N K and optionally a dtype")
M, N, K = (int(v) for v in a.shape[:3]) if a.shape else (25216, 3072, 768)
name = a.shape[3] if len(a.shape) == 4 else "bfloat16"
dtype = torch.float32 if name in ("tf32", "float32") else getattr(torch, name)
torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
family = "matmul_simt" if name == "float32" else "matmul_sm90"
with autotune.pinned(family, a.config) if a.config else contextlib.nullcontext():
    if a.linear:
        x, w = torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(N, K, device="cuda", dtype=dtype)
        bias = torch.randn(N, device="cuda", dtype=dtype)
        for act in a.linear.split(","):
            for _ in range(2):
                tileops.linear(x, w, bias, act)
    else:
        x, b = torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(K, N, device="cuda", dtype=dtype)
        for fn in (tileops.matmul, torch.matmul):
            for _ in range(2):
                fn(x, b)
torch.cuda.synchronize()
