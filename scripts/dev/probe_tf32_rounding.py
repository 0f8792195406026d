"""How a TF32 matmul rounds each operand, torch (cuBLAS) and tileops: one operand filled with
x = 1 + 0.75 * 2^-10 (to nearest TF32: 1 + 2^-10; truncated: 1), the other with ones, so every output
is K * x as the GEMM saw it (exact in fp32 for K <= 2^13). Per shape and layout (which operands are
transposed views), the value each side saw for A and for B, in TF32 ulps above 1: 1 = rounded to
nearest, 0 = truncated.

    python scripts/dev/probe_tf32_rounding.py [--out rounding.json]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import tileops  # noqa: E402
from common import write_json  # noqa: E402

X = 1.0 + 0.75 * 2.0**-10
SHAPES = [(256, 256, 256), (1024, 1024, 1024), (4096, 4096, 4096), (25216, 768, 3072), (1, 4096, 4096)]


def operand(rows, cols, value, transposed):
    """rows x cols filled with value; transposed: a transposed view of a cols x rows tensor."""
    if transposed:
        return torch.full((cols, rows), value, device="cuda").t()
    return torch.full((rows, cols), value, device="cuda")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    records = []
    for M, N, K in SHAPES:
        for ta in (False, True):
            for tb in (False, True):
                rec = {"M": M, "N": N, "K": K, "a": "MxK" if not ta else "KxM.t", "b": "KxN" if not tb else "NxK.t"}
                for side, fn in (("torch", torch.matmul), ("tileops", tileops.matmul)):
                    for which in ("a", "b"):
                        x = operand(M, K, X if which == "a" else 1.0, ta)
                        w = operand(K, N, X if which == "b" else 1.0, tb)
                        c = fn(x, w)
                        seen = (c.double() / K - 1.0) * 2.0**10
                        rec["%s_%s" % (side, which)] = [round(seen.min().item(), 3), round(seen.max().item(), 3)]
                records.append(rec)
                print(rec)
    if a.out:
        write_json(a.out, records)


if __name__ == "__main__":
    main()
