"""The GEMMs of ViT-S/16's linear layers at batch 128 (bench_models' training row), each as the
autograd of tileops.linear runs it: forward (with bias, and GELU for fc1), data gradient
gz @ W, weight gradient gz^T @ x (K = 25216 tokens). tileops against torch on the same operands,
GPU ms (benchmarks/common.timed), and the CUDA kernels of each (us per call). Guides matmul work
for issue 5's ViT row; not a benchmark.

    python scripts/dev/probe_vit_gemms.py OUT.json [--batch 128] [--candidates pp128-c2,coop128x192-c2,...]

--candidates: each part also with each matmul_sm90 config pinned (GPU ms in `candidates`; a config
that cannot run the part is left out).
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import tileops  # noqa: E402
from common import kernel_table, timed  # noqa: E402
from tileops import autotune  # noqa: E402

LAYERS = [("qkv", 384, 1152, "none"), ("proj", 384, 384, "none"), ("fc1", 384, 1536, "gelu"), ("fc2", 1536, 384, "none")]


def layer_parts(x, w, b, gz, act):
    """{part: (tileops fn, torch fn)} of one linear layer."""
    fwd = (lambda: F.gelu(F.linear(x, w, b))) if act == "gelu" else (lambda: F.linear(x, w, b))
    return {"fwd": (lambda: tileops.linear(x, w, b, act), fwd),
            "dgrad": (lambda: tileops.matmul(gz, w), lambda: gz @ w),
            "wgrad": (lambda: tileops.matmul(gz.t(), x), lambda: gz.t() @ x)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--candidates", default="", help="matmul_sm90 configs to pin, comma-separated")
    args = ap.parse_args()
    bf = dict(device="cuda", dtype=torch.bfloat16)
    tokens = args.batch * 197
    records = []
    for name, fin, fout, act in LAYERS:
        x = torch.randn(tokens, fin, **bf)
        w = torch.randn(fout, fin, **bf) * fin ** -0.5
        b = torch.randn(fout, **bf)
        gz = torch.randn(tokens, fout, **bf)
        parts = layer_parts(x, w, b, gz, act)
        for part, (mine, stock) in parts.items():
            M, N, K = {"fwd": (tokens, fout, fin), "dgrad": (tokens, fin, fout), "wgrad": (fout, fin, tokens)}[part]
            t_mine, t_stock = timed(mine)[0], timed(stock)[0]
            rec = dict(layer=name, part=part, M=M, N=N, K=K, tileops_ms=t_mine, torch_ms=t_stock, ratio=t_stock / t_mine,
                       tileops_kernels=kernel_table(mine), torch_kernels=kernel_table(stock))
            rec["candidates"] = {}
            for cand in filter(None, args.candidates.split(",")):
                try:
                    with autotune.pinned("matmul_sm90", cand):
                        rec["candidates"][cand] = timed(mine)[0]
                except RuntimeError as e:
                    print("      %s: %s" % (cand, str(e).splitlines()[0][:120]))
            records.append(rec)
            print("%-5s %-6s %6d x %5d x %5d  tileops %8.1f us  torch %8.1f us  %.3fx  %s" % (
                name, part, M, N, K, t_mine * 1e3, t_stock * 1e3, rec["ratio"],
                " ".join("%s %.1f" % (c, t * 1e3) for c, t in rec["candidates"].items())), flush=True)
            for impl in ("tileops", "torch"):
                for k, n, us in rec[impl + "_kernels"]:
                    print("      %-7s %8.1f us x %g  %s" % (impl, us, n, k[:70]))
    with open(args.out, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, tileops=tileops.__version__,
                       records=records), f, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
