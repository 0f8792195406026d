"""Where a call's host time goes: for model-sized layers (ResNet-50 convs, ViT-S linears, bf16),
the host time per call of tileops and torch (launch-only: the GPU kept busy far ahead by a sleep,
so the loop measures the CPU), and a torch.profiler table of tileops' calls sorted by self CPU
time, which lists the CUDA runtime calls (launches, events, stream waits) and the ATen ops our
ops make. Guides host-side work; not a benchmark.

    python scripts/dev/profile_host.py [--out DIR] [--parts]

--parts: only the convolutions' pieces (forward through tileops.conv2d / F.conv2d, data gradient,
weight gradient, both gradients through the backward ops; time_candidates.problem), host us per
call, printed and written to parts_streams<TILEOPS_STREAMS>.json.
Run it with TILEOPS_STREAMS=0 too to see what the two-stream backward costs on the host.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "python"), os.path.join(HERE, "..", "..", "benchmarks")]
from time_candidates import problem  # noqa: E402

import tileops  # noqa: E402
from bench_conv import LAYERS  # noqa: E402
from bench_overhead import passes  # noqa: E402  (no_grad, fwd, fwd_bwd: the backward of y.sum())


def cases():
    bf = dict(device="cuda", dtype=torch.bfloat16)
    cl = torch.channels_last

    def conv(n, c, hw, k, r, s):
        x = torch.randn(n, c, hw, hw, **bf).to(memory_format=cl)
        w = (torch.randn(k, c, r, r, **bf) * 0.05).to(memory_format=cl)
        return (x, w), (lambda x, w: tileops.conv2d(x, w, None, s, r // 2)), (lambda x, w: F.conv2d(x, w, None, s, r // 2))

    yield ("conv 3x3 64@56 b64",) + conv(64, 64, 56, 64, 3, 1)
    yield ("conv 1x1 256->64@56 b64",) + conv(64, 256, 56, 64, 1, 1)
    yield ("conv 3x3/2 128@56 b64",) + conv(64, 128, 56, 128, 3, 2)
    yield ("conv 3x3 512@7 b64",) + conv(64, 512, 7, 512, 3, 1)
    x, w, b = torch.randn(128 * 197, 384, **bf), torch.randn(1536, 384, **bf) * 0.05, torch.randn(1536, **bf)
    yield "linear+gelu ViT-S fc1 b128", (x, w, b), (lambda x, w, b: tileops.linear(x, w, b, "gelu")), (
        lambda x, w, b: F.gelu(F.linear(x, w, b)))
    w2 = torch.randn(384, 384, **bf) * 0.05
    yield "linear ViT-S proj b128", (x, w2, b[:384].clone()), (lambda x, w, b: tileops.linear(x, w, b)), (
        lambda x, w, b: F.linear(x, w, b))


def host_us(fn, calls=50, repeats=5):
    """Host microseconds per call: the calls are queued behind a long GPU sleep, so none waits."""
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        torch.cuda._sleep(int(2e8))  # ~0.1 s: longer than `calls` host calls (checked below)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        if time.perf_counter() - t1 < 0.01:  # the GPU caught up: the loop waited on it somewhere
            print("  (the sleep ran out before the calls did: this figure includes GPU time)")
    return statistics.median(out)


# the ResNet-50 layers whose pieces --parts times (bench_conv's labels), at batch 64
PART_LAYERS = ["3x3 64@56", "1x1 256->64 @56", "3x3/2 128@56->28", "1x1/2 256->512 @56->28", "3x3 512@7"]


def parts(out):
    records = []
    for layer in (row for row in LAYERS if row[1] in PART_LAYERS):
        for part in ("fwd", "dgrad", "wgrad", "both"):
            make = problem(layer, 64, part)
            rec = dict(case=layer[1], part=part, tileops_us=host_us(make(tileops.conv2d)), torch_us=host_us(make(F.conv2d)))
            records.append(rec)
            print("%-24s %-6s host us/call: tileops %7.1f  torch %7.1f" % (layer[1], part, rec["tileops_us"], rec["torch_us"]),
                  flush=True)
    tag = "streams%s" % os.environ.get("TILEOPS_STREAMS", "1")
    with open(os.path.join(out, "parts_%s.json" % tag), "w") as f:
        json.dump(dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(), records=records), f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=".")
    ap.add_argument("--parts", action="store_true", help="the convolutions' pieces only")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cudnn.benchmark = True  # as in bench_conv and bench_models
    if args.parts:
        return parts(args.out)
    records, tables = [], []
    for name, inputs, mine, theirs in cases():
        ours, stock = passes(inputs, mine), passes(inputs, theirs)
        for p in ("no_grad", "fwd_bwd"):
            rec = dict(case=name, **{"pass": p}, tileops_us=host_us(ours[p]), torch_us=host_us(stock[p]))
            records.append(rec)
            print("%-30s %-8s host us/call: tileops %7.1f  torch %7.1f" % (name, p, rec["tileops_us"], rec["torch_us"]), flush=True)
        for impl, fns in (("tileops", ours), ("torch", stock)):
            fns["fwd_bwd"]()
            torch.cuda.synchronize()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    fns["fwd_bwd"]()
                torch.cuda.synchronize()
            tables.append("=== %s, %s, fwd+bwd, 10 calls ===\n%s\n" % (
                name, impl, prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=90)))
    with open(os.path.join(args.out, "host.json"), "w") as f:
        json.dump(dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(), records=records), f, indent=1)
    with open(os.path.join(args.out, "host_profile.txt"), "w") as f:
        f.write("\n".join(tables))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
