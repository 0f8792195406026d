"""The ViT-B fc1 shape for ncu: two calls of tileops.matmul, then two of torch.matmul (cuBLAS), so
one ncu run can profile both (ncu --clock-control none -k regex:'persistent|nvjet|gemm' ...
python scripts/profile_sm90.py)."""
import torch

import tileops

M, N, K = 25216, 3072, 768
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
for fn in (tileops.matmul, torch.matmul):
    for _ in range(2):
        fn(a, b)
torch.cuda.synchronize()
