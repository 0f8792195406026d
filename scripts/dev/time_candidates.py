"""Kernel time of each autotune candidate of a family, pinned, beside torch: a conv family on the
ResNet layers of bench_conv.py (conv_depthwise: its depthwise layers; the conv_dgrad families
time the data gradient alone; bf16 channels_last, against cuDNN), or matmul_sm90 on
bench_matmul.py's shapes and its linear+GELU rows (bf16 or --dtype, against cuBLAS), or matmul_simt
there (--dtype float32). Guides the
choice of heuristics and defaults; the ratios users see come from the benchmarks.

    python scripts/dev/time_candidates.py [--family conv_fwd_sm90] [--candidates bn64,bn128,...]
                                      [--batch 32] [--dtype tf32] [--out candidates.json]
"""
import argparse
import json
import os
import re
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import tileops  # noqa: E402
from bench_conv import LAYERS  # noqa: E402
from bench_matmul import SHAPES, build  # noqa: E402
from common import set_precision, time_ms, torch_act  # noqa: E402
from tileops import autotune  # noqa: E402

PASS_OF = {"conv_fwd_sm90": "fwd", "conv_wgrad_sm90": "wgrad", "conv_dgrad": "dgrad", "conv_dgrad_sm90": "dgrad",
           "conv_depthwise": "fwd", "matmul_sm90": "matmul", "matmul_simt": "matmul"}


def time_us(fn, calls=20, reps=15):
    """Median over reps of the mean time of `calls` back-to-back calls, in µs (common.time_ms), each
    rep queued behind a GPU sleep longer than the host takes to queue its calls: GPU time, also
    where a call's host cost exceeds its kernels' (batch 1)."""
    def batch():
        for _ in range(calls):
            fn()

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    batch()
    torch.cuda.synchronize()
    lead_us = 1.5 * (time.perf_counter() - t0) * 1e6 + 50
    return time_ms(batch, warmup=0, reps=reps, lead_us=lead_us) * 1000.0 / calls


def problem(layer, n, pss, dtype=torch.bfloat16, act="none"):
    """conv -> fn: pass `pss` of a bench_conv layer at batch n, bf16 / fp16 channels_last or fp32
    NCHW as bench_conv runs them (fwd: through `conv`, tileops.conv2d or F.conv2d, then act on
    torch's side, fused into tileops'; dgrad / wgrad / both: the backward op with that mask)."""
    _, _, C, H, K, R, st, pd, g = layer
    fmt = torch.contiguous_format if dtype == torch.float32 else torch.channels_last
    x = torch.randn(n, C, H, H, device="cuda", dtype=dtype).to(memory_format=fmt)
    w = torch.randn(K, C // g, R, R, device="cuda", dtype=dtype).to(memory_format=fmt)
    args = (st, pd, 1, g)
    gy = torch.randn_like(F.conv2d(x, w, None, *args)).contiguous(memory_format=fmt)
    if pss == "fwd":
        if act == "none":  # the bare call (profile_host times its host cost)
            return lambda conv: (lambda: conv(x, w, None, *args))
        stock_act = torch_act(act)
        return lambda conv: ((lambda: stock_act(conv(x, w, None, *args))) if conv is F.conv2d else
                             (lambda: conv(x, w, None, *args, activation=act)))
    mask = [pss in ("dgrad", "both"), pss in ("wgrad", "both"), False]

    def bwd(conv):
        if conv is F.conv2d:
            return lambda: torch.ops.aten.convolution_backward(gy, x, w, None, [st] * 2, [pd] * 2, [1] * 2, False,
                                                               [0, 0], g, mask)
        return lambda: torch.ops.tileops._conv2d_backward(gy, x, w, [st] * 2, [pd] * 2, [1] * 2, g, mask)

    return bwd


def matmul_problems(kind, small=False, act="gelu", linear_shapes=None, matmul_shapes=None):
    """(label, torch fn, tileops fn) for bench_matmul's rows of dtype kind (bench_matmul.build) past
    the skinny shapes (small: with them), then its linear+GELU rows (K-major B; act: another
    activation); linear_shapes ("MxNxK,..."): those linear+act rows alone instead; matmul_shapes:
    plain matmul rows of these shapes alone (B row-major, MN-major)."""
    if linear_shapes or matmul_shapes:
        mnk = [tuple(int(v) for v in s.split("x")) for s in (linear_shapes or matmul_shapes).split(",")]
        op = "linear+" + act if linear_shapes else "matmul"
        rows = [(op, ("%dx%dx%d" % s, 1) + s) for s in mnk]
    else:
        rows = [("matmul", s) for s in SHAPES if small or s[2] >= 128] + [("linear+" + act, s) for s in SHAPES
                                                                  if s[0].startswith("ViT-B")]
    out = []
    for op, shape in rows:
        mine, theirs = build(op, shape, kind)
        out.append((shape[0] if op == "matmul" else op + " " + shape[0], theirs, mine))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="conv_fwd_sm90", choices=sorted(PASS_OF))
    ap.add_argument("--candidates", default=None, help="default: every candidate of the family")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "tf32", "float32"],
                    help="the matmul families only (matmul_simt: float32)")
    ap.add_argument("--filter", default=None, help="regex on the row label")
    ap.add_argument("--small", action="store_true", help="matmul_sm90: the rows with M < 128 too (skinny, odd)")
    ap.add_argument("--conv", action="store_true",
                    help="matmul_sm90: bench_conv's ResNet forwards instead (its 1x1 layers are GEMMs)")
    ap.add_argument("--act", default=None, choices=tileops.ACTIVATIONS,
                    help="the linear rows' activation (default gelu), or the conv forwards' (default none)")
    shapes = ap.add_mutually_exclusive_group()
    shapes.add_argument("--linear-shapes", default=None,
                        help="matmul_sm90 / matmul_simt: linear + act rows of these shapes only, MxNxK,...")
    shapes.add_argument("--matmul-shapes", default=None,
                        help="matmul_sm90 / matmul_simt: plain matmul rows (B row-major) of these shapes only")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    pss = PASS_OF[a.family]
    rows = []
    if pss == "matmul" and not a.conv:
        set_precision(a.dtype)  # TF32 on for tf32, as bench_matmul's rows
        problems = [(label, {"torch_us": theirs}, mine)
                    for label, theirs, mine in matmul_problems(a.dtype, a.small, a.act or "gelu", a.linear_shapes,
                                                                     a.matmul_shapes)]
    else:
        problems = []
        group = "depthwise" if a.family == "conv_depthwise" else "resnet"
        for layer in [lay for lay in LAYERS if lay[0] == group]:
            fn = problem(layer, a.batch, "fwd" if pss == "matmul" else pss, act=a.act or "none")
            problems.append((layer[1], {"cudnn_us": fn(F.conv2d)}, fn(tileops.conv2d)))
    for label, theirs, mine in problems:
        if a.filter and not re.search(a.filter, label):
            continue
        row = {"layer": label, "pass": pss, "batch": a.batch, "dtype": a.dtype if pss == "matmul" and not a.conv else
               "bfloat16"}
        row.update({k: time_us(f) for k, f in theirs.items()})
        row["default_us"] = time_us(mine)
        for cand in a.candidates.split(",") if a.candidates else autotune.candidates(a.family):
            try:
                with autotune.pinned(a.family, cand):
                    row[cand + "_us"] = time_us(mine)
            except RuntimeError as e:  # not a candidate of this shape (or of this build)
                row[cand + "_us"] = None
                row[cand + "_error"] = str(e).splitlines()[0][:200]
        rows.append(row)
        print("  ".join("%s=%s" % (k, ("%.1f" % v) if isinstance(v, float) else v) for k, v in row.items()
                        if not k.endswith("_error")), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "family": a.family, "dtype": a.dtype, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
