"""One launch of each shape for ncu (ncu --clock-control none ... python scripts/profile_sm90.py)."""
import torch

import tileops

for M, N, K in [(25216, 3072, 768), (4096, 4096, 4096)]:
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):
        tileops.matmul(a, b)
    torch.cuda.synchronize()
