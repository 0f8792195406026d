"""The rest of the conv family against torch (cuDNN, cudnn.benchmark on): tileops.conv1d, conv3d and
conv_transpose2d/3d (conv2d's kernels: csrc/ops/conv_family.cpp) on the layers of models that use
them: Whisper's and wav2vec2's conv1d front ends, Mamba's depthwise causal conv1d, r3d_18's and
r(2+1)d's conv3d, DCGAN's and a U-Net/VAE decoder's transposed convs. Forward and forward+backward,
bf16/fp16 channels last (channels_last_3d for 5-D; (N, L, C) storage for 1-D) and fp32 NC(D)HW with
TF32 off. Same run, same inputs, medians; bench_conv.py's timing and summary conventions.

    python benchmarks/bench_conv_family.py [--out benchmarks/results/<gpu>/conv_family.json] [--filter RE]
    python benchmarks/bench_conv_family.py --device cpu --out /tmp/family.json   # dry run: tiny sizes

Records: op, group, label, dtype, layout, x / w shapes, args (torch's order after bias), pass,
tileops_ms, torch_ms, ratio = torch_ms / tileops_ms, tileops_tflops, rel_err (forward rows).
"""
import argparse
import math
import os
import re

import torch
import torch.nn.functional as F

import tileops
from bench_conv import geomean
from common import add_portable_arg, add_row_bench_args, apply_portable, gpu_dir_name, run_rows, time_row

# group, label, op, x shape (N, C, *spatial), weight shape, args after bias in torch's order
# (conv: stride, padding, dilation, groups; transposed: stride, padding, output_padding, groups, dilation)
LAYERS = [
    ("conv1d", "whisper stem k3 80->768 T3000", "conv1d", (8, 80, 3000), (768, 80, 3), (1, 1, 1, 1)),
    ("conv1d", "whisper k3/2 768->768 T3000", "conv1d", (8, 768, 3000), (768, 768, 3), (2, 1, 1, 1)),
    ("conv1d", "wav2vec2 k10/5 1->512 L16000", "conv1d", (8, 1, 16000), (512, 1, 10), (5, 0, 1, 1)),
    ("conv1d", "wav2vec2 k3/2 512->512 L3199", "conv1d", (8, 512, 3199), (512, 512, 3), (2, 0, 1, 1)),
    ("mamba", "mamba dw causal k4 d2048 L2048", "conv1d", (4, 2048, 2048), (2048, 1, 4), (1, 3, 1, 2048)),
    ("mamba", "mamba dw causal k4 d4096 L2048", "conv1d", (4, 4096, 2048), (4096, 1, 4), (1, 3, 1, 4096)),
    ("conv3d", "r3d stem 3x7x7/(1,2,2) 3->64 @16x112", "conv3d", (4, 3, 16, 112, 112), (64, 3, 3, 7, 7),
     ((1, 2, 2), (1, 3, 3), 1, 1)),
    ("conv3d", "r3d 3x3x3 64@16x56", "conv3d", (4, 64, 16, 56, 56), (64, 64, 3, 3, 3), (1, 1, 1, 1)),
    ("conv3d", "r3d 3x3x3/2 64->128 @16x56", "conv3d", (4, 64, 16, 56, 56), (128, 64, 3, 3, 3), (2, 1, 1, 1)),
    ("conv3d", "r3d 3x3x3 256@4x14", "conv3d", (4, 256, 4, 14, 14), (256, 256, 3, 3, 3), (1, 1, 1, 1)),
    ("conv3d", "r3d 1x1x1/2 128->256 @8x28", "conv3d", (4, 128, 8, 28, 28), (256, 128, 1, 1, 1), (2, 0, 1, 1)),
    ("conv3d", "r2+1d 1x3x3 64->144 @16x56", "conv3d", (4, 64, 16, 56, 56), (144, 64, 1, 3, 3),
     (1, (0, 1, 1), 1, 1)),
    ("conv3d", "r2+1d 3x1x1 144->64 @16x56", "conv3d", (4, 144, 16, 56, 56), (64, 144, 3, 1, 1),
     (1, (1, 0, 0), 1, 1)),
    ("transposed", "dcgan k4/2 512->256 @8", "conv_transpose2d", (64, 512, 8, 8), (512, 256, 4, 4),
     (2, 1, 0, 1, 1)),
    ("transposed", "dcgan k4/2 256->128 @16", "conv_transpose2d", (64, 256, 16, 16), (256, 128, 4, 4),
     (2, 1, 0, 1, 1)),
    ("transposed", "dcgan k4/2 128->64 @32", "conv_transpose2d", (64, 128, 32, 32), (128, 64, 4, 4),
     (2, 1, 0, 1, 1)),
    ("transposed", "unet up k2/2 512->256 @32", "conv_transpose2d", (16, 512, 32, 32), (512, 256, 2, 2),
     (2, 0, 0, 1, 1)),
    ("transposed", "vae up k4/2 256->128 @64", "conv_transpose2d", (8, 256, 64, 64), (256, 128, 4, 4),
     (2, 1, 0, 1, 1)),
    ("transposed", "3d up k2/2 128->64 @8x28", "conv_transpose3d", (4, 128, 8, 28, 28), (128, 64, 2, 2, 2),
     (2, 0, 0, 1, 1)),
]
KINDS = [("bfloat16", "channels_last"), ("float16", "channels_last"), ("float32", "contiguous")]  # fp32: TF32 off
PASSES = ["fwd", "fwd+bwd"]


def tiny(layer):
    """The CPU dry run's version of a layer: same op, kernel, stride and padding, few channels, small sizes."""
    group, label, op, xs, ws, args = layer
    transposed = op.startswith("conv_transpose")
    groups = args[3]
    c = xs[1] if xs[1] <= 4 else 8
    k = c if groups > 1 else min(ws[1] if transposed else ws[0], 8)
    g = c if groups > 1 else 1
    args = args[:3] + (g,) + args[4:]
    ws2 = (c, k // g, *ws[2:]) if transposed else (k, c // g, *ws[2:])
    sp = tuple(max(s // 8, w) for s, w in zip(xs[2:], ws[2:]))
    return group, label, op, (min(xs[0], 2), c, *sp), ws2, args


def stored_channels_last(shape, dt, device):
    """A tensor of `shape` stored with the channels last (channels_last(_3d); (N, L, C) for 3-D)."""
    perm = (0, *range(2, len(shape)), 1)
    return torch.randn([shape[p] for p in perm], device=device, dtype=dt).permute(
        *[perm.index(i) for i in range(len(shape))])


def flops_of(op, xs, ws, out_shape):
    """2 x the multiply-adds: each output (conv) or input (transposed) element x its group's weights."""
    per = math.prod(ws[1:]) if not op.startswith("conv_transpose") else ws[1] * math.prod(ws[2:])
    return 2.0 * (math.prod(out_shape) if not op.startswith("conv_transpose") else math.prod(xs)) * per


def build(layer, kind, layout, pss, device):
    """(tileops fn, torch fn, flops) on shared inputs."""
    _, _, op, xs, ws, args = layer
    dt = getattr(torch, kind)
    fan_in = math.prod(ws[1:]) if not op.startswith("conv_transpose") else ws[0] // args[3] * math.prod(ws[2:])
    if layout == "channels_last":
        x, w = stored_channels_last(xs, dt, device), stored_channels_last(ws, dt, device) / math.sqrt(fan_in)
    else:
        x, w = torch.randn(xs, device=device, dtype=dt), torch.randn(ws, device=device, dtype=dt) / math.sqrt(fan_in)
    mine, theirs = getattr(tileops, op), getattr(F, op)
    out_shape = theirs(x, w, None, *args).shape
    flops = flops_of(op, xs, ws, out_shape)
    if pss == "fwd":
        return (lambda: mine(x, w, None, *args)), (lambda: theirs(x, w, None, *args)), flops
    x.requires_grad_()
    w.requires_grad_()
    gy = torch.randn(out_shape, device=device, dtype=dt)

    def step(conv):
        x.grad = w.grad = None
        conv(x, w, None, *args).backward(gy)

    return (lambda: step(mine)), (lambda: step(theirs)), 3 * flops


def run_row(layer, kind, layout, pss, device, budget_s):
    group, label, op, xs, ws, args = layer
    rec = dict(op=op, group=group, label=label, dtype=kind, layout=layout, x=list(xs), w=list(ws),
               args=[list(a) if isinstance(a, tuple) else a for a in args], **{"pass": pss})
    return time_row(rec, kind, lambda: build(layer, kind, layout, pss, device), pss == "fwd", device, budget_s)


def summary(records):
    """Geometric mean (and worst row) of the ratio per group, pass and dtype: the issue's goals."""
    out = []
    for group in sorted({r["group"] for r in records}):
        for pss in PASSES:
            for kind, _ in KINDS:
                sel = [r["ratio"] for r in records if r["ratio"] and (r["group"], r["pass"], r["dtype"]) == (
                    group, pss, kind)]
                if sel:
                    out.append(dict(group=group, pass_=pss, dtype=kind, n=len(sel), geomean=geomean(sel),
                                    worst=min(sel), best=max(sel)))
    return out


def print_summary(records):
    print("\nper row (ratio = torch ms / tileops ms; > 1 means tileops is faster)")
    for r in records:
        head = "%-38s %-9s %-8s" % (r["label"], r["dtype"], r["pass"])
        if r["error"]:
            print(head, "ERROR", r["error"][:100])
        else:
            print(head, "%10.4f %10.4f %7.2fx %8.1f %s" % (r["tileops_ms"], r["torch_ms"], r["ratio"],
                                                         r["tileops_tflops"], "%.1e" % r.get("rel_err", 0)))
    print("\ngeometric mean of the ratio per group, pass and dtype (n rows; worst..best)")
    for s in summary(records):
        print("  %-10s %-8s %-9s %6.3fx  (n=%d; %.3f..%.3f)" % (s["group"], s["pass_"], s["dtype"], s["geomean"],
                                                               s["n"], s["worst"], s["best"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--filter", default=None, help="regex on 'group label dtype layout pass'")
    add_row_bench_args(ap)
    add_portable_arg(ap)
    args = ap.parse_args()
    dry = args.device == "cpu"
    assert dry or torch.cuda.is_available(), "bench_conv_family.py times CUDA kernels (--device cpu: dry run)"
    torch.backends.cudnn.benchmark = True
    if dry:
        torch.set_num_threads(1)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", gpu_dir_name(),
                                   "conv_family.json")
    out = apply_portable(args, out, default_out=args.out is None)
    todo = [(layer, kind, layout, pss) for pss in PASSES for kind, layout in KINDS for layer in LAYERS]
    todo = [t for t in todo if not args.filter or re.search(args.filter, "%s %s %s %s %s" % (
        t[0][0], t[0][1], t[1], t[2], t[3]))]
    if dry:
        todo = [(tiny(t[0]),) + t[1:] for t in todo]
    run_rows(todo, lambda layer, kind, layout, pss: "%s %s %s" % (layer[1], kind, pss), run_row, args.device,
             args.budget, out, print_summary)


if __name__ == "__main__":
    main()
