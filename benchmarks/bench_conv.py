"""tileops.conv2d against torch (cuDNN, cudnn.benchmark on) on ResNet-50, ViT patch-embedding and
MobileNet layers: forward, forward+backward (autograd, x and weight requiring grad, a fixed
grad_out), and conv + bias + ReLU in one tileops kernel against cuDNN's conv followed by torch's bias
add and ReLU. Same run, same inputs; TF32 flags set for every row (fp32 rows: TF32 off).

    python benchmarks/bench_conv.py [--out benchmarks/results/<gpu>/conv.json] [--quick] [--filter RE]
    python benchmarks/bench_conv.py --device cpu --out /tmp/conv.json   # dry run: tiny sizes, CPU clock

Writes the JSON (records as matmul.json: op, label, dtype, layout, shape, pass, tileops_ms,
torch_ms, ratio = torch_ms / tileops_ms, tileops_tflops; a failing row keeps its error and the run
goes on), a PNG beside it, and prints geometric means per layer group, pass and dtype.
tileops_ms / torch_ms are GPU time (the host queues each call while the GPU is still busy, as in a
model); tileops_call_ms / torch_call_ms (call_ratio) start each call on an idle GPU and so include
the host's cost up to the first launch (benchmarks/bench_overhead.py measures that cost alone).
Reps adapt to the call time (30 for fast calls, down to 3 for calls over 0.5 s) so that the whole
matrix stays within a few minutes on an H200.
"""
import argparse
import math
import os
import re

import torch
import torch.nn.functional as F

import tileops
from common import add_portable_arg, add_row_bench_args, apply_portable, gpu_dir_name, run_rows, time_row

# group, label, C, H (= W), K, R (= S), stride, padding, groups
LAYERS = [
    ("stem", "stem 7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3, 1),
    ("resnet", "3x3 64@56", 64, 56, 64, 3, 1, 1, 1),
    ("resnet", "3x3 128@28", 128, 28, 128, 3, 1, 1, 1),
    ("resnet", "3x3 256@14", 256, 14, 256, 3, 1, 1, 1),
    ("resnet", "3x3 512@7", 512, 7, 512, 3, 1, 1, 1),
    ("resnet", "3x3/2 128@56->28", 128, 56, 128, 3, 2, 1, 1),
    ("resnet", "1x1/2 256->512 @56->28", 256, 56, 512, 1, 2, 0, 1),
    ("resnet", "1x1 256->64 @56", 256, 56, 64, 1, 1, 0, 1),
    ("resnet", "1x1 64->256 @56", 64, 56, 256, 1, 1, 0, 1),
    ("patch", "patch16 3->768 @224", 3, 224, 768, 16, 16, 0, 1),
    ("patch", "patch14 3->768 @224", 3, 224, 768, 14, 14, 0, 1),
    ("depthwise", "dw3x3 32@112", 32, 112, 32, 3, 1, 1, 32),
    ("depthwise", "dw3x3 96@56", 96, 56, 96, 3, 1, 1, 96),
    # issue 61's grouped layers (ResNeXt-50 32x4d, RegNet group width 16, groups 2)
    ("grouped", "ResNeXt g32 128@56", 128, 56, 128, 3, 1, 1, 32),
    ("grouped", "ResNeXt g32 256@28", 256, 28, 256, 3, 1, 1, 32),
    ("grouped", "ResNeXt g32 512@14", 512, 14, 512, 3, 1, 1, 32),
    ("grouped", "ResNeXt g32 1024@7", 1024, 7, 1024, 3, 1, 1, 32),
    ("grouped", "ResNeXt 3x3/2 g32 256@56", 256, 56, 256, 3, 2, 1, 32),
    ("grouped", "RegNet gw16 64@56 (g4)", 64, 56, 64, 3, 1, 1, 4),
    ("grouped", "RegNet gw16 320@14 (g20)", 320, 14, 320, 3, 1, 1, 20),
    ("grouped", "groups 2 256@28", 256, 28, 256, 3, 1, 1, 2),
]
BATCHES = [1, 32, 64]
KINDS = [("bfloat16", "channels_last"), ("float16", "channels_last"), ("float32", "nchw")]  # fp32: TF32 off
TF32 = ("tf32", "nchw")  # --tf32: fp32 tensors with TF32 on for tileops and cuDNN alike
FUSED = ("bfloat16", "channels_last")  # conv + bias + ReLU, on the ResNet layers
PASSES = ["fwd", "fwd+bwd", "fwd+bias+relu"]


def rows(quick, tf32=False):
    batches = [32] if quick else BATCHES
    kinds = [k for k in KINDS if not quick or k[0] != "float16"] + ([TF32] if tf32 else [])
    for pss in PASSES[:2]:
        for kind, layout in kinds:
            for layer in LAYERS:
                for n in batches:
                    yield layer, n, kind, layout, pss
    for layer in LAYERS:
        if layer[0] == "resnet":
            for n in batches:
                yield layer, n, FUSED[0], FUSED[1], "fwd+bias+relu"


def tiny(layer):
    """The CPU dry run's version of a layer: same kernel, stride and padding, few channels, small image."""
    group, label, C, H, K, R, st, pd, g = layer
    C2 = C if C <= 4 else 8
    K2, g2 = (C2, C2) if g == C else (8, 2) if g > 1 else (min(K, 16), 1)  # depthwise, grouped, dense
    return group, label, C2, max(H // 8, R), K2, R, st, pd, g2


def row_key(layer, n, kind, layout, pss):
    return "%s %s %s %s b%d %s" % (layer[0], layer[1], kind, layout, n, pss)


def build(layer, n, kind, pss, layout, device):
    """(tileops fn, torch fn, flops, check fn) on shared inputs."""
    _, _, C, H, K, R, st, pd, g = layer
    dt = torch.float32 if kind == "tf32" else getattr(torch, kind)
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x = torch.randn(n, C, H, H, device=device, dtype=dt).to(memory_format=fmt)
    w = (torch.randn(K, C // g, R, R, device=device, dtype=dt) / math.sqrt(C // g * R * R)).to(memory_format=fmt)
    b = torch.randn(K, device=device, dtype=dt) if pss == "fwd+bias+relu" else None
    P = (H + 2 * pd - R) // st + 1
    flops = 2.0 * n * K * P * P * (C // g) * R * R
    args = (st, pd, 1, g)
    if pss == "fwd":
        return (lambda: tileops.conv2d(x, w, None, *args)), (lambda: F.conv2d(x, w, None, *args)), flops
    if pss == "fwd+bias+relu":
        return ((lambda: tileops.conv2d(x, w, b, *args, activation="relu")),
                (lambda: F.relu(F.conv2d(x, w, b, *args), inplace=True)), flops)
    x.requires_grad_()
    w.requires_grad_()
    gy = torch.randn_like(F.conv2d(x.detach(), w.detach(), None, *args))

    def step(conv):
        x.grad = w.grad = None
        conv(x, w, None, *args).backward(gy)

    return (lambda: step(tileops.conv2d)), (lambda: step(F.conv2d)), 3 * flops


def run_row(layer, n, kind, layout, pss, device, budget_s):
    group, label, C, H, K, R, st, pd, g = layer
    rec = dict(op="conv2d", group=group, label=label, dtype=kind, layout=layout, N=n, C=C, H=H, W=H, K=K, R=R,
               S=R, stride=st, padding=pd, groups=g, **{"pass": pss})
    return time_row(rec, kind, lambda: build(layer, n, kind, pss, layout, device), pss != "fwd+bwd", device, budget_s)


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summary(records):
    """Geometric means of the ratio per pass, layer group and dtype (the issue's goals are stated so)."""
    out = []
    ok = [r for r in records if r["ratio"]]
    for pss in PASSES:
        for group in ["resnet", "stem", "patch", "depthwise", "grouped", "all"]:
            for kind in [k for k, _ in KINDS + [TF32]]:
                rs = [r for r in ok if r["pass"] == pss and r["dtype"] == kind and group in ("all", r["group"])]
                sel = [r["ratio"] for r in rs]
                if sel:
                    out.append(dict(pass_=pss, group=group, dtype=kind, n=len(sel), geomean=geomean(sel),
                                    worst=min(sel), best=max(sel), call_geomean=geomean([r.get("call_ratio") for r in rs])))
    return out


def print_summary(records):
    print("\nper row (ratio = torch ms / tileops ms; > 1 means tileops is faster)")
    print("%-36s %-9s %-4s %-14s %10s %10s %8s %8s %s" % ("layer", "dtype", "N", "pass", "tileops_ms", "torch_ms", "ratio",
                                                          "TFLOP/s", "rel_err / error"))
    for r in records:
        if r["error"]:
            print("%-36s %-9s %-4d %-14s %s" % (r["label"], r["dtype"], r["N"], r["pass"], "ERROR " + r["error"][:80]))
        else:
            print("%-36s %-9s %-4d %-14s %10.4f %10.4f %7.2fx %8.1f %s" % (
                r["label"], r["dtype"], r["N"], r["pass"], r["tileops_ms"], r["torch_ms"], r["ratio"],
                r["tileops_tflops"], "%.1e" % r["rel_err"] if "rel_err" in r else ""))
    print("\ngeometric mean of the ratio of GPU times (n rows; worst..best), and of per-call times")
    for s in summary(records):
        print("  %-14s %-10s %-9s %6.3fx  (n=%d; %.3f..%.3f)  call %s" % (
            s["pass_"], s["group"], s["dtype"], s["geomean"], s["n"], s["worst"], s["best"],
            "%.3fx" % s["call_geomean"] if s["call_geomean"] else "-"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="batch 32 only, bf16 and fp32 only")
    ap.add_argument("--filter", default=None, help="regex on 'group label dtype layout bN pass'")
    ap.add_argument("--tf32", action="store_true", help="also rows of fp32 tensors with TF32 on (dtype 'tf32')")
    add_row_bench_args(ap)
    add_portable_arg(ap)
    args = ap.parse_args()
    dry = args.device == "cpu"
    assert dry or torch.cuda.is_available(), "bench_conv.py times CUDA kernels; no GPU is visible (--device cpu: dry run)"
    torch.backends.cudnn.benchmark = True
    if dry:
        torch.set_num_threads(1)  # tiny problems: thread start-up would dominate
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", gpu_dir_name(), "conv.json")
    out = apply_portable(args, out, default_out=args.out is None)
    todo = [t for t in rows(args.quick, args.tf32) if not args.filter or re.search(args.filter, row_key(*t))]
    if dry:
        todo = [(tiny(t[0]), min(t[1], 2)) + t[2:] for t in todo if t[1] <= 32]
    run_rows(todo, row_key, run_row, args.device, args.budget, out, print_summary)


if __name__ == "__main__":
    main()
