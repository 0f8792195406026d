"""One launch of the ViT-B fc1 shape for ncu (ncu --clock-control none ... python scripts/profile_sm90.py)."""
import torch

import tileops

M, N, K = 25216, 3072, 768
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
for _ in range(2):
    tileops.matmul(a, b)
torch.cuda.synchronize()
