"""Where the time of a bench_matmul row goes: torch.profiler's CUDA kernel table (name, calls,
time per call) for chosen rows, tileops and torch side by side. Guides kernel work; not a
benchmark.

    python benchmarks/profile_matmul.py [--out profile_matmul.json] [--filter RE]
"""
import argparse
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_matmul import KINDS, SHAPES, build  # noqa: E402
from common import profiled, set_precision  # noqa: E402

DEFAULT = r"skinny|odd|square 1024|batched AV"


def kernels(fn, reps=10):
    """[(kernel name, calls per fn call, us per fn call)], the biggest first."""
    rows = []
    for e in profiled(fn, reps, warmup=3).key_averages():
        t = getattr(e, "device_time_total", None)
        t = e.cuda_time_total if t is None else t
        if t > 0 and e.count > 0 and not e.key.startswith("cuda"):
            rows.append((e.key[:140], e.count / reps, t / reps))
    return sorted(rows, key=lambda r: -r[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="profile_matmul.json")
    ap.add_argument("--filter", default=DEFAULT, help="regular expression over 'label dtype'")
    args = ap.parse_args()
    out = []
    for kind in KINDS:
        for shape in SHAPES:
            key = "%s %s" % (shape[0], kind)
            if not re.search(args.filter, key):
                continue
            set_precision(kind)
            mine, theirs = build("matmul", shape, kind)
            row = {"row": key, "tileops": kernels(mine), "torch": kernels(theirs)}
            out.append(row)
            print("==", key)
            for side in ("tileops", "torch"):
                total = sum(r[2] for r in row[side])
                print("  %-8s %7.1f us kernel time per call" % (side, total))
                for name, calls, us in row[side]:
                    print("     %6.1f us  x%.0f  %s" % (us, calls, name))
            torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
