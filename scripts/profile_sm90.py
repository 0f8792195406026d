"""One GEMM shape for ncu: two calls of tileops.matmul, then two of torch.matmul (cuBLAS), so one
ncu run profiles both sides' kernels (copies and reduces included):

    ncu --clock-control none -k regex:'gemm|nvjet|copy|reduce|gemv' ... \\
        python scripts/profile_sm90.py [M N K [dtype]]

dtype: bfloat16 (default), float16, tf32 (fp32 with TF32 allowed) or float32 (TF32 off).
Without arguments: the ViT-B fc1 shape, 25216 x 3072 x 768."""
import sys

import torch

import tileops

M, N, K = (int(v) for v in sys.argv[1:4]) if len(sys.argv) >= 4 else (25216, 3072, 768)
name = sys.argv[4] if len(sys.argv) >= 5 else "bfloat16"
dtype = torch.float32 if name in ("tf32", "float32") else getattr(torch, name)
torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
a = torch.randn(M, K, device="cuda", dtype=dtype)
b = torch.randn(K, N, device="cuda", dtype=dtype)
for fn in (tileops.matmul, torch.matmul):
    for _ in range(2):
        fn(a, b)
torch.cuda.synchronize()
