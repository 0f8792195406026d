"""Where the time of a benchmark row goes: torch.profiler's CUDA kernel table for chosen conv
rows of bench_conv.py, tileops and torch side by side. Guides kernel work; not a benchmark.

    python benchmarks/profile_ops.py [--out profile_ops.txt] [--filter RE] [--batch 32]
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_conv import LAYERS, build, row_key  # noqa: E402
from common import profiled, set_precision  # noqa: E402

DEFAULT = r"resnet 3x3 64@56 .*(fwd$|fwd\+bwd)|stem .* float32 .*fwd\+bwd|1x1 64->256 .* float32"


def kernel_table(fn, reps=5):
    return profiled(fn, reps).key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=150)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="profile_ops.txt")
    ap.add_argument("--filter", default=DEFAULT, help="regular expression over bench_conv row keys")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    lines = []
    for kind, layout in [("bfloat16", "channels_last"), ("float32", "nchw")]:
        for layer in LAYERS:
            for pss in ("fwd", "fwd+bwd"):
                key = row_key(layer, args.batch, kind, layout, pss)
                if not re.search(args.filter, key):
                    continue
                set_precision(kind)
                mine, theirs, _ = build(layer, args.batch, kind, pss, layout, "cuda")
                for who, fn in (("tileops", mine), ("torch", theirs)):
                    lines.append("== %s: %s (5 calls)\n%s" % (key, who, kernel_table(fn)))
                    print(lines[-1], flush=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
