"""Host cost of one call: wall time per call of each op on tiny inputs, where the kernel is
negligible and what is timed is Python, the dispatcher, autograd, argument checks and the
launch. tileops against torch's op, same run, with and without autograd, forward and
forward+backward. Writes JSON (records: op, pass, device, tileops_us, torch_us, ratio).

    python benchmarks/bench_overhead.py [--device cpu|cuda] [--out PATH]

On CUDA the loop is synchronized once at its end, so launches overlap and the figure is the
host's time per call (what bounds batch-1 inference and small layers).
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

import tileops
from common import gpu_dir_name, print_table, progress, write_json


def cases(dev):
    t = lambda *s: torch.randn(s, device=dev)  # noqa: E731
    a, b, bias = t(8, 8), t(8, 8), t(8)
    x, w = t(1, 8, 4, 4), t(8, 8, 3, 3)
    yield "matmul", (a, b), tileops.matmul, torch.matmul
    yield "linear+bias+gelu", (a, b, bias), (lambda x, w, b: tileops.linear(x, w, b, "gelu")), (
        lambda x, w, b: F.gelu(F.linear(x, w, b)))
    yield "conv2d+bias+relu", (x, w, bias), (lambda x, w, b: tileops.conv2d(x, w, b, 1, 1, activation="relu")), (
        lambda x, w, b: F.relu(F.conv2d(x, w, b, 1, 1)))
    if dev != "cuda":
        return
    # The paths the GPU benchmarks take: bf16 channels_last through the Hopper implicit-GEMM conv
    # and the depthwise kernels; "(op)" calls the registered op directly, without the Python wrapper.
    cl = dict(dtype=torch.bfloat16, memory_format=torch.channels_last)
    xc, wc, wd = x.new_empty(1, 64, 8, 8).normal_().to(**cl), t(64, 64, 3, 3).to(**cl), t(64, 1, 3, 3).to(**cl)
    op = torch.ops.tileops.conv2d.default
    yield "conv2d bf16 cl", (xc, wc), (lambda x, w: tileops.conv2d(x, w, None, 1, 1)), (lambda x, w: F.conv2d(x, w, None, 1, 1))
    yield "conv2d bf16 cl (op)", (xc, wc), (
        lambda x, w: op(x, w, None, (1, 1), (1, 1), (1, 1), 1, "none", None)), (lambda x, w: F.conv2d(x, w, None, 1, 1))
    yield "depthwise bf16 cl", (xc, wd), (lambda x, w: tileops.conv2d(x, w, None, 1, 1, groups=64)), (
        lambda x, w: F.conv2d(x, w, None, 1, 1, groups=64))


def per_call_us(fn, dev, calls=2000, repeats=7):
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    for _ in range(200):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def passes(args, op):
    """no_grad: inference; fwd: autograd records the call; fwd+bwd: and runs the backward."""
    leaves = [a.detach().requires_grad_() for a in args]

    def no_grad():
        with torch.no_grad():
            op(*args)

    def fwd():
        op(*leaves)

    def fwd_bwd():
        op(*leaves).sum().backward()

    return dict(no_grad=no_grad, fwd=fwd, fwd_bwd=fwd_bwd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="fewer calls per timing")
    args = ap.parse_args()
    dev = args.device
    torch.set_num_threads(1)  # host cost, not CPU kernel parallelism
    where = gpu_dir_name() if dev == "cuda" else "cpu"
    out = args.out or os.path.join(os.path.dirname(__file__), "results", where, "overhead.json")
    todo = []
    for name, inputs, mine, theirs in cases(dev):
        ours, stock = passes(inputs, mine), passes(inputs, theirs)
        todo += [(name, p, ours[p], stock[p]) for p in ours]
    records = []
    for i, (name, p, mine, theirs) in enumerate(todo):
        progress(i, len(todo), "%s %s" % (name, p))
        calls = 300 if args.quick else 2000
        t_mine, t_torch = per_call_us(mine, dev, calls), per_call_us(theirs, dev, calls)
        records.append(dict(op=name, **{"pass": p}, device=dev, tileops_us=t_mine, torch_us=t_torch,
                            ratio=t_torch / t_mine))
    progress(len(todo), len(todo), "done")
    write_json(out, records)
    print_table(records, ["op", "pass", "device", "tileops_us", "torch_us", "ratio"])
    print("wrote", out)


if __name__ == "__main__":
    main()
