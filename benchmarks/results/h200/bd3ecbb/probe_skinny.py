"""Skinny GEMMs (M <= 16): GPU time of tileops auto (the skinny kernel), tileops pinned to
wgmma (Hopper split-K) and torch (cuBLAS), bf16 / fp16 / fp32, N-major and K-major B."""
import json
import sys

import torch

sys.path.insert(0, "benchmarks")
import tileops  # noqa: E402
from common import timed  # noqa: E402

rows = []
torch.backends.cuda.matmul.allow_tf32 = False
for dt in (torch.float32, torch.float64):
    for (N, K) in ((4096, 4096), (11008, 4096), (1000, 2048), (768, 768)):
        for M in (1, 4, 8, 16):
            for layout in ("n_major", "k_major"):
                a = torch.randn(M, K, device="cuda", dtype=dt)
                b = torch.randn(K, N, device="cuda", dtype=dt) if layout == "n_major" else torch.randn(N, K, device="cuda", dtype=dt).t()
                row = {"dtype": str(dt).replace("torch.", ""), "M": M, "N": N, "K": K, "layout": layout}
                fns = {"torch": lambda a=a, b=b: torch.matmul(a, b), "auto": lambda a=a, b=b: tileops.matmul(a, b)}
                if dt in (torch.float16, torch.bfloat16):
                    fns["wgmma"] = lambda a=a, b=b: tileops.matmul(a, b, algo="wgmma")
                for name, fn in fns.items():
                    g, c, _ = timed(fn, budget_s=0.1)
                    row[name + "_us"] = round(g * 1e3, 2)
                row["ratio_auto"] = round(row["torch_us"] / row["auto_us"], 3)
                if "wgmma_us" in row:
                    row["ratio_wgmma"] = round(row["torch_us"] / row["wgmma_us"], 3)
                rows.append(row)
                print(json.dumps(row), flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
