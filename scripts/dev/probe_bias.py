"""What a linear's bias and its weight's layout cost: GPU us (time_candidates.time_us) of tileops and
torch on the same inputs, per shape, for x @ w_kn (N-major B), linear(x, w) (K-major B), linear(x,
w, b) and linear(x, w, b) + GELU; and the kernels each runs (one call, benchmarks/common.kernel_table).

    python scripts/dev/probe_bias.py OUT.json [--dtype bfloat16] [--shapes MxNxK,...]
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks"))
sys.path.insert(0, HERE)
from time_candidates import time_us  # noqa: E402

import tileops  # noqa: E402
from common import kernel_table, meta  # noqa: E402

SHAPES = "25216x3072x768,25216x768x3072,25216x2304x768,25216x3072x512,6272x1536x384,1568x3072x768,4096x4096x4096"


def variants(x, w, w_kn, b):
    """name -> (tileops fn, torch fn)."""
    return {
        "matmul_nmajor": (lambda: tileops.matmul(x, w_kn), lambda: x @ w_kn),
        "linear_nobias": (lambda: tileops.linear(x, w), lambda: F.linear(x, w)),
        "linear_bias": (lambda: tileops.linear(x, w, b), lambda: F.linear(x, w, b)),
        "linear_bias_gelu": (lambda: tileops.linear(x, w, b, "gelu"), lambda: F.gelu(F.linear(x, w, b))),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16"])
    ap.add_argument("--shapes", default=SHAPES)
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    rows = []
    for s in a.shapes.split(","):
        M, N, K = (int(v) for v in s.split("x"))
        x = torch.randn(M, K, device="cuda", dtype=dtype)
        w = torch.randn(N, K, device="cuda", dtype=dtype) / K ** 0.5
        w_kn = w.t().contiguous()
        b = torch.randn(N, device="cuda", dtype=dtype)
        row = dict(shape=s, dtype=a.dtype)
        for name, (mine, theirs) in variants(x, w, w_kn, b).items():
            row[name + "_us"] = round(time_us(mine), 2)
            row[name + "_torch_us"] = round(time_us(theirs), 2)
            row[name + "_kernels"] = kernel_table(mine)
            row[name + "_torch_kernels"] = kernel_table(theirs)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("kernels")}), flush=True)
    with open(a.out, "w") as f:
        json.dump(dict(meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
