"""Each candidate of matmul_sm90 named on the command line (default: every one) pinned once on a
small fp16 problem of each B layout, checked as the tests check (tests/utils.py: poisoned output,
float64 reference, the fp16 bound), its name printed before it runs: a config whose kernel never
finishes is named by the last line, and the process exits after --limit seconds instead of
holding the GPU (run it before the suite after a kernel change).

    python scripts/dev/smoke_configs.py [pp128-c2,coop128x256-c2] [--limit 60]
"""
import argparse
import faulthandler
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tests.utils import check, fresh_generator, randn, run_poisoned  # noqa: E402

import tileops  # noqa: E402
from tileops import autotune  # noqa: E402

N = 1000  # rows 2000 bytes apart: ragged for TMA, as the odd-size tests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="?", default=None)
    ap.add_argument("--limit", type=float, default=60.0)
    a = ap.parse_args()
    faulthandler.dump_traceback_later(a.limit, exit=True)
    configs = a.configs.split(",") if a.configs else autotune.candidates("matmul_sm90")
    gen, seed = fresh_generator()
    bad = 0
    for c in configs:
        for layout in ("KxN", "NxK"):
            print(c, layout, end=" ", flush=True)
            x, w = randn((N, N), torch.half, "cuda", gen), randn((N, N), torch.half, "cuda", gen)
            b = w if layout == "KxN" else w.t()
            with autotune.pinned("matmul_sm90", c):
                out = run_poisoned(lambda x=x, b=b: tileops.matmul(x, b, algo="wgmma"), N * N, torch.half, "cuda")
            torch.cuda.synchronize()
            x64, b64 = x.double().cpu(), b.double().cpu()
            try:
                check(out, x64 @ b64, x64.abs() @ b64.abs(), "float16", "%s %s seed=%d" % (c, layout, seed))
                print("ok", flush=True)
            except AssertionError as e:
                bad += 1
                print("FAILED:", e, flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
