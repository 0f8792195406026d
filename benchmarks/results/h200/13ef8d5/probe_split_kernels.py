"""Where a pinned matmul_sm90 config's time goes on a few small 16-bit shapes: GPU us per call
(common.timed) and each kernel's us (common.kernel_table), beside cuBLAS. Session 46's question:
does bn128 split 2 (128 SMs) spend less in its GEMM kernel than pp128-c2 (64 SMs) at 1000^3?

    python probe_split_kernels.py OUT.json
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
import tileops  # noqa: E402
from common import kernel_table, meta, timed  # noqa: E402
from tileops import autotune  # noqa: E402

SHAPES = [(1000, 1000, 1000), (1024, 1024, 1024), (1024, 1024, 1000), (1000, 1000, 2000), (2000, 1000, 1000)]
CONFIGS = ["auto", "bn128", "bn128-nosplit", "bn64", "bn64-nosplit", "pp128", "pp128-c2"]


def main():
    rows = []
    for dt in (torch.float16, torch.bfloat16):
        for (m, n, k) in SHAPES:
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(k, n, device="cuda", dtype=dt)
            row = {"dtype": str(dt), "M": m, "N": n, "K": k}
            f = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731
            row["cublas_us"] = timed(f)[0] * 1e3
            row["cublas_k"] = kernel_table(f)
            for c in CONFIGS:
                g = lambda a=a, b=b: tileops.matmul(a, b)  # noqa: E731
                if c == "auto":
                    row[c + "_us"], row[c + "_k"] = timed(g)[0] * 1e3, kernel_table(g)
                    continue
                with autotune.pinned("matmul_sm90", c):
                    row[c + "_us"], row[c + "_k"] = timed(g)[0] * 1e3, kernel_table(g)
            print(m, n, k, dt, {c: round(row[c + "_us"], 2) for c in ["cublas"] + CONFIGS}, flush=True)
            rows.append(row)
    json.dump({**meta(), "rows": rows}, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
