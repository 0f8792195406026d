"""Issue-60 probe b: the skinny grad_weight (bf16, w cl, NCHW gy) with other work at once.
Modes: alone | dgrad (tileops dgrad-only on main while wgrad-only on a side stream) |
mm_tileops / mm_torch (8 4096^2 matmuls on main while wgrad on side) | xw (the op, both grads).
Prints one JSON line per mode; saves the first bad gw per mode to $OUT/bad_<tag>_<mode>.pt"""
import json
import os
import sys

import torch
import torch.nn.functional as F

import tileops

tag = sys.argv[1]
tries = int(sys.argv[2])
modes = sys.argv[3].split(",")
torch.manual_seed(0)
kind = torch.bfloat16
x = torch.randn(4, 16, 224, 224, device="cuda").to(kind).contiguous(memory_format=torch.channels_last)
w = torch.randn(16, 16, 16, 16, device="cuda").to(kind).contiguous(memory_format=torch.channels_last)
ys = F.conv2d(torch.empty(x.shape, device="meta"), torch.empty(w.shape, device="meta"), None, 2, (1, 0)).shape
a, b = torch.randn(4096, 4096, device="cuda").to(kind), torch.randn(4096, 4096, device="cuda").to(kind)
side = torch.cuda.Stream()
bw = torch.ops.tileops._conv2d_backward
args = ([2, 2], [1, 0], [1, 1], 1)
# warm: the first call in a process was always right
gy = torch.randn(ys, device="cuda").to(kind)
bw(gy, x, w, *args, [True, True, False])
torch.cuda.synchronize()
out = os.environ.get("OUT", ".")
for mode in modes:
    errs, blocks = [], []
    saved = False
    for _ in range(tries):
        gy = torch.randn(ys, device="cuda").to(kind)
        ref = torch.nn.grad.conv2d_weight(x.double(), w.shape, gy.double(), 2, (1, 0))
        terr = float((torch.nn.grad.conv2d_weight(x, w.shape, gy, 2, (1, 0)).double() - ref).norm() / ref.norm())
        side.wait_stream(torch.cuda.current_stream())
        if mode == "alone":
            gw = bw(gy, x, w, *args, [False, True, False])[1]
        elif mode == "xw":
            gw = bw(gy, x, w, *args, [True, True, False])[1]
        else:
            with torch.cuda.stream(side):
                gw = bw(gy, x, w, *args, [False, True, False])[1]
            if mode == "dgrad":
                gx = bw(gy, x, w, *args, [True, False, False])[0]
            elif mode == "mm_tileops":
                busy = [tileops.matmul(a, b) for _ in range(8)]
            elif mode == "mm_torch":
                busy = [torch.matmul(a, b) for _ in range(8)]
            torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        e = float((gw.double() - ref).norm() / ref.norm())
        errs.append(round(e, 5))
        if e > 4 * terr + 1e-6:
            d = (gw.double() - ref).reshape(16, -1)  # [K, C R S] in w's memory order? (logical KCRS)
            r = ref.reshape(16, -1)
            # logical C R S columns; per output channel and per 64-column block of the (r, s, c) order
            dl = (gw.double() - ref).permute(0, 2, 3, 1).reshape(16, -1)
            rl = ref.permute(0, 2, 3, 1).reshape(16, -1)
            per_k = (dl.norm(dim=1) / rl.norm(dim=1)).tolist()
            per_blk = (dl.reshape(16, 64, 64).norm(dim=(0, 2)) / rl.reshape(16, 64, 64).norm(dim=(0, 2))).tolist()
            blocks.append(dict(rows=[round(v, 2) for v in per_k], blocks_bad=[i for i, v in enumerate(per_blk) if v > 0.02],
                               blk_max=round(max(per_blk), 3)))
            if not saved:
                torch.save(dict(gw=gw.cpu(), ref=ref.cpu(), gy=gy.cpu()), os.path.join(out, "bad_%s_%s.pt" % (tag, mode)))
                saved = True
    print(json.dumps(dict(tag=tag, mode=mode, errs=errs, torch=round(terr, 5), bad=len(blocks), tries=tries,
                          first_bad=blocks[:1])), flush=True)
