"""tileops matmul / linear against torch (cuBLAS) on the issue's shapes, same run, same inputs,
TF32 flags set per row; plus the kernel ladder: each `algo` rung at 4096^3 with TFLOP/s, % of
cuBLAS (timed in the same row, same inputs) and % of the GPU's dense peak.

    python benchmarks/bench_matmul.py [--out benchmarks/results/<gpu>/matmul.json] [--quick]

ratio is of GPU times (the host queues each call ahead of the GPU, as in a model); call_ratio of
per-call times on an idle GPU, host cost included (see record()).
"""
import argparse
import os
import re

import torch
import torch.nn.functional as F

import tileops
from common import (
    add_portable_arg,
    apply_portable,
    gpu_dir_name,
    gpu_name,
    print_table,
    progress,
    set_precision,
    timed,
    torch_act,
    write_json,
)

KINDS = ["float32", "tf32", "float16", "bfloat16"]
SHAPES = [  # label, batch, M, N, K
    ("square 1024", 1, 1024, 1024, 1024), ("square 2048", 1, 2048, 2048, 2048),
    ("square 4096", 1, 4096, 4096, 4096), ("square 8192", 1, 8192, 8192, 8192),
    ("ViT-B MLP fc1", 1, 25216, 3072, 768), ("ViT-B MLP fc2", 1, 25216, 768, 3072),
    ("ViT-B QKV", 1, 25216, 2304, 768), ("LLM up", 1, 4096, 11008, 4096), ("LLM down", 1, 4096, 4096, 11008),
    ("skinny M=1", 1, 1, 4096, 4096), ("skinny M=8", 1, 8, 4096, 4096), ("skinny M=16", 1, 16, 4096, 4096),
    ("odd 127x255x511", 1, 127, 255, 511), ("odd 1000^3", 1, 1000, 1000, 1000), ("odd 4095x4097x4093", 1, 4095, 4097, 4093),
    ("batched QK^T 64x512x512x64", 64, 512, 512, 64), ("batched AV 64x512x64x512", 64, 512, 64, 512),
]
# The ladder at 4096^3: SIMT rungs in exact fp32 (TF32 off), tensor-core rungs in bf16 (mma also
# as TF32), 'auto', cuBLAS itself, and fp64 on the two fast SIMT rungs. ~5-10 s on an H100/H200,
# most of it the naive and tiled rungs.
LADDER_SIZE = 4096
LADDER = [(algo, "float32") for algo in ("naive", "tiled", "tiled_padded", "register", "vectorized", "auto", "cublas")]
LADDER += [("mma", "tf32"), ("mma", "bfloat16"), ("wgmma", "bfloat16"), ("auto", "bfloat16"), ("cublas", "bfloat16")]
LADDER += [("register", "float64"), ("vectorized", "float64"), ("cublas", "float64")]
# Dense peaks in TFLOP/s (NVIDIA datasheets, boost clock), matched in order by GPU-name substring:
# fp32 is the SIMT peak (no tensor cores), fp64 the tensor-core one (SIMT fp64 is half of it).
PEAKS = [
    ("H100 PCIe", {"float32": 51.2, "tf32": 378.0, "bfloat16": 756.0, "float16": 756.0, "float64": 51.2}),
    ("H100 NVL", {"float32": 60.0, "tf32": 417.5, "bfloat16": 835.5, "float16": 835.5, "float64": 60.0}),
    ("H100", {"float32": 67.0, "tf32": 494.5, "bfloat16": 989.5, "float16": 989.5, "float64": 67.0}),  # SXM
    ("H200", {"float32": 67.0, "tf32": 494.5, "bfloat16": 989.5, "float16": 989.5, "float64": 67.0}),
]


def peak_tflops(kind):
    name = gpu_name()
    for key, peaks in PEAKS:
        if key in name:
            return peaks.get(kind)
    return None

def dtype_of(kind):
    return torch.float32 if kind == "tf32" else getattr(torch, kind)


def operands(kind, batch, M, N, K):
    dt = dtype_of(kind)
    lead = (batch,) if batch > 1 else ()
    return torch.randn(*lead, M, K, device="cuda", dtype=dt), torch.randn(*lead, K, N, device="cuda", dtype=dt)


def record(op, label, kind, batch, M, N, K, mine, theirs, reps, **extra):
    """tileops_ms / torch_ms and ratio: GPU time (common.timed: the host queues each call while the
    GPU is still busy, as in a model); *_call_ms and call_ratio: each call on an idle GPU, host cost
    included (what the skinny and small rows mostly measure)."""
    set_precision(kind)
    (t_mine, call_mine, _), (t_torch, call_torch, _) = timed(mine, reps=reps), timed(theirs, reps=reps)
    flops = 2.0 * batch * M * N * K
    rec = dict(op=op, label=label, dtype=kind, M=M, N=N, K=K, batch=batch, tileops_ms=t_mine, torch_ms=t_torch,
               ratio=t_torch / t_mine, tileops_tflops=flops / t_mine / 1e9, torch_tflops=flops / t_torch / 1e9,
               tileops_call_ms=call_mine, torch_call_ms=call_torch, call_ratio=call_torch / call_mine)
    rec.update(extra)
    return rec


def build(op, shape, kind, algo="auto"):
    """(tileops fn, torch fn) of a row on fresh inputs: matmul (a @ b, b row-major K x N), or
    linear+<act> (x @ w^T + b, then act in gelu / silu / relu; the torch side two kernels)."""
    _, batch, M, N, K = shape
    if op.startswith("linear+"):
        act = op.split("+", 1)[1]
        x = torch.randn(M, K, device="cuda", dtype=dtype_of(kind))
        w, b = torch.randn(N, K, device="cuda", dtype=x.dtype), torch.randn(N, device="cuda", dtype=x.dtype)
        stock_act = torch_act(act)
        return (lambda: tileops.linear(x, w, b, act)), (lambda: stock_act(F.linear(x, w, b)))
    a, b = operands(kind, batch, M, N, K)
    return (lambda: tileops.matmul(a, b, algo=algo)), (lambda: torch.matmul(a, b))


def run_row(op, shape, kind, algo="auto", reps=30):
    label, batch, M, N, K = shape
    mine, theirs = build(op, shape, kind, algo)
    return record(op, label, kind, batch, M, N, K, mine, theirs, reps, algo=algo)


def run_ladder(algo, kind, reps=30):
    """One rung at LADDER_SIZE^3 against cuBLAS on the same inputs ('cublas' times cuBLAS twice)."""
    n = LADDER_SIZE
    a, b = operands(kind, 1, n, n, n)
    mine = (lambda: torch.matmul(a, b)) if algo == "cublas" else (lambda: tileops.matmul(a, b, algo=algo))
    rec = record("ladder", "ladder %d" % n, kind, 1, n, n, n, mine, lambda: torch.matmul(a, b), reps, algo=algo)
    peak = peak_tflops(kind)
    rec.update(pct_of_cublas=100.0 * rec["ratio"], peak_tflops=peak,
               pct_of_peak=None if peak is None else 100.0 * rec["tileops_tflops"] / peak)
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="squares up to 4096 only")
    ap.add_argument("--filter", default=None, help="regex on 'op label dtype' (ladder rows: 'ladder algo dtype')")
    add_portable_arg(ap)
    args = ap.parse_args()
    assert torch.cuda.is_available(), "bench_matmul.py times CUDA kernels; no GPU is visible"
    out = args.out or os.path.join(os.path.dirname(__file__), "results", gpu_dir_name(), "matmul.json")
    out = apply_portable(args, out, default_out=args.out is None)
    shapes = [s for s in SHAPES if not (args.quick and s[2] * s[3] * s[4] > 4096 ** 3)]
    todo = [("matmul", s, k) for k in KINDS for s in shapes]
    todo += [("linear+gelu", s, "bfloat16") for s in SHAPES if s[0].startswith("ViT")]
    todo += [("ladder", algo, k) for algo, k in LADDER]
    if args.filter:
        todo = [t for t in todo if re.search(args.filter, " ".join(x if isinstance(x, str) else x[0] for x in t))]
    records = []
    for i, item in enumerate(todo):
        progress(i, len(todo), " ".join(str(x) if isinstance(x, str) else x[0] for x in item))
        if item[0] == "ladder":
            records.append(run_ladder(item[1], item[2], reps=args.reps))
        else:
            records.append(run_row(*item, reps=args.reps))
        torch.cuda.empty_cache()
    progress(len(todo), len(todo), "done")
    torch.cuda.empty_cache()
    write_json(out, records)
    print_table([r for r in records if r["op"] != "ladder"],
                ["label", "dtype", "algo", "tileops_ms", "torch_ms", "ratio", "call_ratio", "tileops_tflops"])
    print("\nkernel ladder, %d^3 on %s (peak: dense TFLOP/s of the dtype, see PEAKS)" % (LADDER_SIZE, gpu_name()))
    print_table([r for r in records if r["op"] == "ladder"],
                ["algo", "dtype", "tileops_ms", "tileops_tflops", "pct_of_cublas", "pct_of_peak"])
    print("wrote", out)


if __name__ == "__main__":
    main()
