"""TF32 on the persistent Hopper kernels: A read in place and rounded in registers (wgmma with A
from registers) against A copied and rounded first (wgmma reading A from shared memory), on
square problems, pinned to each candidate; a clone of A stands for the copy's cost. A probe for
benchmarks/NOTES.md, not a benchmark.

    python scripts/probe_tf32_forms.py [--sizes 4096,8192] [--candidates coop128x256-c2,...]
"""

import argparse
import json

import torch
from time_candidates import time_us  # scripts/, beside this file

import tileops
from tileops import autotune


def probe(n, candidates):
    a = torch.randn(n, n, device="cuda")
    a_odd = torch.randn(n, n + 1, device="cuda")[:, :n]  # rows 4 (n + 1) bytes apart: TMA cannot read it
    a_odd.copy_(a)
    b = torch.randn(n, n, device="cuda")
    row = {"n": n, "torch_us": time_us(lambda: torch.matmul(a, b)), "clone_a_us": time_us(lambda: a.clone())}
    for c in candidates:
        with autotune.pinned("matmul_sm90", c):
            row[c + "_inplace_us"] = time_us(lambda: tileops.matmul(a, b))
            row[c + "_copied_us"] = time_us(lambda: tileops.matmul(a_odd, b))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--candidates", default="coop128x256-c2,coop128x192-c2,bn256")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        row = probe(n, args.candidates.split(","))
        print("  ".join("%s=%s" % (k, ("%.1f" % v) if isinstance(v, float) else v) for k, v in row.items()), flush=True)
        rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
