"""Each candidate of matmul_sm90 named on the command line (default: every one) pinned once on a
small fp16 problem of each B layout, checked against float64, its name printed before it runs: a
config whose kernel never finishes is named by the last line, and the process exits after
--limit seconds instead of holding the GPU (run it before the suite after a kernel change).

    python scripts/smoke_configs.py [pp128-c2x2,coop128x256-c2x2] [--limit 60]
"""
import argparse
import faulthandler
import sys

import torch

import tileops
from tileops import autotune


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="?", default=None)
    ap.add_argument("--limit", type=float, default=60.0)
    a = ap.parse_args()
    faulthandler.dump_traceback_later(a.limit, exit=True)
    configs = a.configs.split(",") if a.configs else autotune.candidates("matmul_sm90")
    bad = 0
    for c in configs:
        for layout in ("KxN", "NxK"):
            print(c, layout, end=" ", flush=True)
            x = torch.randn(1000, 1000, device="cuda", dtype=torch.half)
            w = torch.randn(1000, 1000, device="cuda", dtype=torch.half)
            b = w if layout == "KxN" else w.t()
            with autotune.pinned("matmul_sm90", c):
                out = tileops.matmul(x, b, algo="wgmma")
            torch.cuda.synchronize()
            err = (out.double() - x.double() @ b.double()).abs().max().item()
            bad += err > 0.5
            print("max abs err %.3g" % err, flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
