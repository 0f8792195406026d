"""Issue-60 probe: grad_weight errors of the issue conv per dtype / layout / gradients taken, three
calls each, with tileops.explain's route. Env: P60_POISON=1 fills the allocator's cache with NaN
first; P60_ONLY=substring picks cases; P60_SUFFIX names the output file (in $OUT)."""
import json
import os

import torch
import torch.nn.functional as F

import tileops

torch.manual_seed(0)
dev = "cuda"
if os.environ.get("P60_POISON"):
    big = torch.empty(6 << 30, dtype=torch.uint8, device=dev)
    big.view(torch.float16).fill_(float("nan"))
    del big
SHAPES = {"issue60": ((4, 16, 224, 224), (16, 16, 16, 16), 2, (1, 0)),
          "k16c32": ((2, 32, 96, 96), (16, 32, 3, 3), 1, (1, 1))}
only = os.environ.get("P60_ONLY", "")


def route(x, w, stride, pad):
    try:
        ex = tileops.explain("conv2d", x.detach().requires_grad_(), w.detach().requires_grad_(), None, stride, pad)
    except Exception as e:  # the probe records it and goes on
        return repr(e)[:300]
    return [(d["op"], d["kernel"], d.get("config", ""),
             [(low["op"], low["kernel"], low.get("config", "")) for low in d.get("lowered", [])]) for d in ex]


res = []
for name, (xs, ws, stride, pad) in SHAPES.items():
    for kind in (torch.float16, torch.bfloat16):
        for w_cl in (False, True):
            for gy_cl in (False, True):
                for mask in ((True, True, False), (False, True, False)):
                    tag = "%s %s w_cl=%d gy_cl=%d mask=%s" % (name, str(kind)[6:], w_cl, gy_cl, "xw" if mask[0] else "w")
                    if only and only not in tag:
                        continue
                    x = torch.randn(xs, device=dev).to(kind).contiguous(memory_format=torch.channels_last)
                    w = torch.randn(ws, device=dev).to(kind)
                    if w_cl:
                        w = w.contiguous(memory_format=torch.channels_last)
                    ys = F.conv2d(torch.empty(xs, device="meta"), torch.empty(ws, device="meta"), None, stride, pad).shape
                    gy = torch.randn(ys, device=dev).to(kind)
                    if gy_cl:
                        gy = gy.contiguous(memory_format=torch.channels_last)
                    ref = torch.nn.grad.conv2d_weight(x.double(), ws, gy.double(), stride, pad)
                    th = torch.nn.grad.conv2d_weight(x, ws, gy, stride, pad)
                    terr = float((th.double() - ref).norm() / ref.norm())
                    errs, nans = [], []
                    for _ in range(3):
                        gw = torch.ops.tileops._conv2d_backward(gy, x, w, [stride] * 2, list(pad), [1, 1], 1, list(mask))[1]
                        torch.cuda.synchronize()
                        nans.append(int(torch.isnan(gw).sum()))
                        errs.append(float((gw.double() - ref).norm() / ref.norm()))
                    r = dict(tag=tag, errs=errs, torch=terr, nans=nans, bad=max(errs) > 4 * terr + 1e-6,
                             route=route(x, w, stride, pad))
                    res.append(r)
                    print(json.dumps(r), flush=True)
with open(os.path.join(os.environ.get("OUT", "."), "p60%s.json" % os.environ.get("P60_SUFFIX", "")), "w") as f:
    json.dump(res, f, indent=1)
print("BAD:", sum(r["bad"] for r in res), "of", len(res))
