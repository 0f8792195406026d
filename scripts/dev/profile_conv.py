"""One forward and one backward of a ResNet conv layer (bf16 channels_last) for ncu:
    ncu --clock-control none -k regex:gemm_sm90 [--section ...] python scripts/dev/profile_conv.py [C H K R stride batch]
Defaults: 3x3 64@56, stride 1, batch 32. The second of two iterations is the one to read (the first
sets up maps and attributes); pass --launch-skip to ncu to skip it."""
import sys

import torch

import tileops

C, H, K, R, st, n = (int(v) for v in (sys.argv[1:] or [64, 56, 64, 3, 1, 32]))
cl = torch.channels_last
x = torch.randn(n, C, H, H, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
w = (torch.randn(K, C, R, R, device="cuda", dtype=torch.bfloat16) / (C * R * R) ** 0.5).to(memory_format=cl)
pd = R // 2
for _ in range(2):
    y = tileops.conv2d(x, w, None, st, pd)
    gy = torch.randn_like(y)
    torch.ops.tileops._conv2d_backward(gy, x, w, [st] * 2, [pd] * 2, [1, 1], 1, [True, True, False])
torch.cuda.synchronize()
