"""Issue-60 probe c: which work beside the skinny TMA grad_weight breaks it, and which kernel change
fixes it (TILEOPS_X60 bits in the experiment build). Args: tag tries modes"""
import json
import sys

import torch
import torch.nn.functional as F

import tileops

tag, tries, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
torch.manual_seed(0)
kind = torch.bfloat16
x = torch.randn(4, 16, 224, 224, device="cuda").to(kind).contiguous(memory_format=torch.channels_last)
w = torch.randn(16, 16, 16, 16, device="cuda").to(kind).contiguous(memory_format=torch.channels_last)
ys = F.conv2d(torch.empty(x.shape, device="meta"), torch.empty(w.shape, device="meta"), None, 2, (1, 0)).shape
side = torch.cuda.Stream()
bw = torch.ops.tileops._conv2d_backward
args = ([2, 2], [1, 0], [1, 1], 1)
gy = torch.randn(ys, device="cuda").to(kind)
bw(gy, x, w, *args, [True, True, False])
torch.cuda.synchronize()
wr = w.permute(0, 2, 3, 1).reshape(16, 4096).contiguous()
a64, b64 = torch.randn(44520, 64, device="cuda").to(kind), torch.randn(64, 4096, device="cuda").to(kind)
big1 = torch.empty(182 << 20, dtype=kind, device="cuda")
big2 = torch.empty_like(big1)
for mode in modes:
    errs, diag, nbad = [], [], 0
    for _ in range(tries):
        gy = torch.randn(ys, device="cuda").to(kind)
        dy_rows = gy.permute(0, 2, 3, 1).reshape(-1, 16).contiguous()
        ref = torch.nn.grad.conv2d_weight(x.double(), w.shape, gy.double(), 2, (1, 0))
        terr = float((torch.nn.grad.conv2d_weight(x, w.shape, gy, 2, (1, 0)).double() - ref).norm() / ref.norm())
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            gw = bw(gy, x, w, *args, [False, True, False])[1]
        if mode == "dgrad":
            bw(gy, x, w, *args, [True, False, False])
        elif mode == "mm_k16":
            tileops.matmul(dy_rows, wr)
        elif mode == "mm_k64":
            tileops.matmul(a64, b64)
        elif mode == "torch_k16":
            torch.matmul(dy_rows, wr)
        elif mode == "copy":
            big2.copy_(big1)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        e = float((gw.double() - ref).norm() / ref.norm())
        errs.append(round(e, 4))
        nbad += e > 4 * terr + 1e-6
        if e > 4 * terr + 1e-6 and len(diag) < 2:
            dl = (gw.double() - ref).permute(0, 2, 3, 1).reshape(16, 4096)
            rl = ref.permute(0, 2, 3, 1).reshape(16, 4096)
            blk = (dl.reshape(16, 64, 64).norm(dim=(0, 2)) / rl.reshape(16, 64, 64).norm(dim=(0, 2)))
            rows = dl.norm(dim=1) / rl.norm(dim=1)
            diag.append(dict(blocks_bad=[i for i, v in enumerate(blk.tolist()) if v > 0.02],
                             blk_max=round(float(blk.max()), 3), rows=[round(v, 3) for v in rows.tolist()],
                             frac_elems_bad=round(float((dl.abs() > 0.05 * rl.abs().max()).double().mean()), 4)))
    print(json.dumps(dict(tag=tag, mode=mode, bad=nbad, tries=tries, errs=errs,
                          torch=round(terr, 5), diag=diag)), flush=True)
