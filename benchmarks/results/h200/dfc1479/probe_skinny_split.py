"""The skinny tensor-core kernel's K split, forced (TILEOPS_PROBE_SKINNY_SPLIT, a probe build's
switch) against its heuristic and cuBLAS: GPU us per call (benchmarks/common.timed) and each
result's error against float64, bf16 matmul (N-major B) and linear (K-major weight).

    python scripts/probe_skinny_split.py OUT.json [large|small]
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
import tileops  # noqa: E402
from common import timed  # noqa: E402

SETS = {  # (M, N, K) or (batch, M, N, K)
    "large": [(16, 4096, 4096), (8, 4096, 4096), (1, 4096, 4096), (16, 768, 768), (16, 11008, 4096),
              (16, 4096, 11008), (16, 1024, 8192)],
    "small": [(16, 768, 768), (1, 768, 768), (8, 768, 768), (16, 384, 384), (16, 3072, 768), (16, 768, 3072),
              (4, 2304, 768), (16, 1024, 2048), (8, 8, 1024, 1024), (4, 16, 512, 512), (16, 2048, 1024)],
}
SPLITS = [None, 1, 2, 4, 8]
ENV = "TILEOPS_PROBE_SKINNY_SPLIT"
CONFIGS = os.environ.get("PROBE_CONFIGS", "bn128,bn64").split(",")


def main():
    out = []
    torch.manual_seed(0)
    for shape in SETS[sys.argv[2] if len(sys.argv) > 2 else "large"]:
        b, M, N, K = shape if len(shape) == 4 else (1,) + shape
        for op in ("matmul", "linear"):
            A = torch.randn(b, M, K, device="cuda", dtype=torch.bfloat16).squeeze(0)
            if op == "matmul":
                B = torch.randn(b, K, N, device="cuda", dtype=torch.bfloat16).squeeze(0)
                ours, theirs, ref = (lambda A=A, B=B: tileops.matmul(A, B)), (lambda A=A, B=B: A @ B), A.double() @ B.double()
            else:
                W = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
                ours = lambda A=A, W=W: tileops.linear(A, W)  # noqa: E731
                theirs = lambda A=A, W=W: torch.nn.functional.linear(A, W)  # noqa: E731
                ref = A.double() @ W.double().t()
            r = dict(op=op, batch=b, M=M, N=N, K=K, torch_us=timed(theirs, reps=30)[0] * 1e3)
            for cfg in CONFIGS:
                for s in SPLITS:
                    if s is None:
                        os.environ.pop(ENV, None)
                    else:
                        os.environ[ENV] = str(s)
                    with tileops.autotune.pinned("matmul_skinny_tc", cfg):
                        err = float((ours().double() - ref).norm() / ref.norm())
                        t = timed(ours, reps=30)[0] * 1e3
                    r["%s_s%s_us" % (cfg, s or "h")] = round(t, 2)
                    r["%s_s%s_err" % (cfg, s or "h")] = err
            os.environ.pop(ENV, None)
            out.append(r)
            print(json.dumps({k: v for k, v in r.items() if not k.endswith("_err")}), flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
