"""The CUDA kernels one conv pass runs, tileops and torch (cuDNN) side by side: for each ResNet layer
of a bench_conv.py group (default ResNet) at one batch, the forward, data gradient and weight
gradient (bf16 / fp16 channels_last or fp32 NCHW with TF32 off, as time_candidates.problem builds them) under torch.profiler, each kernel's launches per call and
mean time. Says which kernel of a pass is slow (a main GEMM, a split-K reduce, a transposition).

    python scripts/dev/profile_conv_kernels.py [--batch 32] [--group patch] [--dtype float32] [--filter "1x1"]
                                           [--passes fwd] [--out kernels.json]
"""
import argparse
import json
import os
import re
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from time_candidates import problem  # noqa: E402

import tileops  # noqa: E402
from bench_conv import LAYERS  # noqa: E402
from common import kernel_table  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--group", default="resnet", help="bench_conv layer group: resnet, stem, patch, depthwise")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ap.add_argument("--passes", default="fwd,dgrad,wgrad")
    ap.add_argument("--filter", default=None, help="regex on the layer label")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # fp32 rows: TF32 off
    torch.backends.cudnn.benchmark = True  # as bench_conv
    out = []
    for layer in [lay for lay in LAYERS if lay[0] == a.group]:
        if a.filter and not re.search(a.filter, layer[1]):
            continue
        for pss in a.passes.split(","):
            fn = problem(layer, a.batch, pss, dtype)
            for who, conv in (("tileops", tileops.conv2d), ("torch", F.conv2d)):
                rows = kernel_table(fn(conv), a.calls, warmup=3)
                total = sum(n * us for _, n, us in rows)
                print("%-24s %-6s %-8s %7.1f us/call" % (layer[1], pss, who, total), flush=True)
                for name, n, us in rows:
                    print("    %5.2f x %7.1f us  %s" % (n, us, name[:110]))
                out.append({"layer": layer[1], "pass": pss, "batch": a.batch, "dtype": a.dtype, "who": who,
                            "total_us": total,
                            "kernels": [{"name": k, "per_call": n, "us": us} for k, n, us in rows]})
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
