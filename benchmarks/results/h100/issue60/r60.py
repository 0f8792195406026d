"""Issue 60's bad case once (bf16, w channels_last, NCHW grad_out, both gradients), for
compute-sanitizer: prints grad_weight's error against float64."""
import torch
import torch.nn.functional as F

import tileops  # noqa: F401  (registers torch.ops.tileops)

torch.manual_seed(0)
kind = torch.bfloat16
x = torch.randn(4, 16, 224, 224, device="cuda").to(kind).contiguous(memory_format=torch.channels_last)
w = torch.randn(16, 16, 16, 16, device="cuda").to(kind).contiguous(memory_format=torch.channels_last)
ys = F.conv2d(torch.empty(x.shape, device="meta"), torch.empty(w.shape, device="meta"), None, 2, (1, 0)).shape
gy = torch.randn(ys, device="cuda").to(kind)
ref = torch.nn.grad.conv2d_weight(x.double(), w.shape, gy.double(), 2, (1, 0))
gw = torch.ops.tileops._conv2d_backward(gy, x, w, [2, 2], [1, 0], [1, 1], 1, [True, True, False])[1]
torch.cuda.synchronize()
print("r60 err", float((gw.double() - ref).norm() / ref.norm()))
