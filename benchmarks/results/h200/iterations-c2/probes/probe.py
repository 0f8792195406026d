"""Session-10 probes: GPU time of small GEMMs on each path; conv 128@28 and fc1 regions for ncu."""
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, "benchmarks")
import tileops
from common import timed

what = sys.argv[1]
if what == "small":
    for (B, M, N, K) in [(1, 127, 255, 511), (1, 1000, 1000, 1000), (1, 1024, 1024, 1024), (64, 512, 512, 64), (64, 512, 64, 512)]:
        lead = (B,) if B > 1 else ()
        a = torch.randn(lead + (M, K), device="cuda", dtype=torch.bfloat16)
        b = torch.randn(lead + (K, N), device="cuda", dtype=torch.bfloat16)
        row = {"shape": (B, M, N, K)}
        paths = [("torch", lambda a=a, b=b: torch.matmul(a, b)), ("auto", lambda a=a, b=b: tileops.matmul(a, b)),
                 ("mma", lambda a=a, b=b: tileops.matmul(a, b, algo="mma")),
                 ("wgmma", lambda a=a, b=b: tileops.matmul(a, b, algo="wgmma"))]
        for name, fn in paths:
            g, c, _ = timed(fn, budget_s=0.5)
            row[name] = "%.1f/%.1f us" % (g * 1e3, c * 1e3)
        print(row, flush=True)
elif what == "conv":  # ncu --profile-from-start off: 2 tileops forwards, then 2 cuDNN forwards
    torch.backends.cudnn.benchmark = True
    C, H, K = (int(v) for v in sys.argv[2:5])
    cl = torch.channels_last
    x = torch.randn(32, C, H, H, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    w = torch.randn(K, C, 3, 3, device="cuda", dtype=torch.bfloat16).to(memory_format=cl)
    for _ in range(5):
        tileops.conv2d(x, w, None, 1, 1)
        F.conv2d(x, w, None, 1, 1)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for fn in (lambda: tileops.conv2d(x, w, None, 1, 1), lambda: F.conv2d(x, w, None, 1, 1)):
        for _ in range(2):
            fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
elif what == "vits":  # ViT-S/16 b128 GEMMs (forward linears, data-gradient matmuls), GPU time per candidate
    from tileops import autotune
    M = 128 * 197
    rows = []
    for name, (K, N) in [("qkv", (384, 1152)), ("proj", (384, 384)), ("fc1", (384, 1536)), ("fc2", (1536, 384))]:
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        dy = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
        rows.append(("fwd " + name, lambda x=x, w=w: F.linear(x, w), lambda x=x, w=w: tileops.linear(x, w)))
        rows.append(("dgrad " + name, lambda dy=dy, w=w: dy @ w, lambda dy=dy, w=w: tileops.matmul(dy, w)))
    for label, theirs, mine in rows:
        out = {"row": label, "torch": round(timed(theirs, budget_s=0.3)[0] * 1e3, 1), "default": round(timed(mine, budget_s=0.3)[0] * 1e3, 1)}
        for cand in ["pp128", "pp128-c2", "coop128x256-c2", "coop128x192-c2", "bn256", "bn128"]:
            with autotune.pinned("matmul_sm90", cand):
                try:
                    out[cand] = round(timed(mine, budget_s=0.3)[0] * 1e3, 1)
                except RuntimeError:
                    out[cand] = None
        print(out, flush=True)
