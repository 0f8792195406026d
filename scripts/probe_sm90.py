"""Quick check of the Hopper matmul family on both B layouts (prints one line per case)."""
import sys

import torch

import tileops

ok = True
for name, M, N, K, bt in [("K-major B", 300, 520, 200, True), ("MN-major B", 300, 520, 200, False),
                          ("MN-major wide", 1000, 1000, 1000, False), ("K-major narrow", 129, 72, 64, True)]:
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t() if bt else torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    out = tileops.matmul(a, b, algo="wgmma")
    ref = a.double() @ b.double()
    err = float((out.double() - ref).norm() / ref.norm())
    good = err < 1e-2
    ok &= good
    print("%-16s rel err %.3g %s" % (name, err, "ok" if good else "WRONG"))
sys.exit(0 if ok else 1)
