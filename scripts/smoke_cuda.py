"""Quick CUDA check of every op and dtype against float64 references (prints a table)."""
import torch
import torch.nn.functional as F

import tileops

dev = "cuda"
torch.manual_seed(0)


def rel(o, r):
    return float((o.double() - r).norm() / r.norm().clamp_min(1e-300))


cases = []
for kind in ["float64", "float32", "tf32", "float16", "bfloat16"]:
    dt = {"float64": torch.float64, "tf32": torch.float32, "float32": torch.float32}.get(kind) or getattr(torch, kind)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = kind == "tf32"
    for (M, N, K) in [(1, 1, 1), (127, 255, 33), (1000, 1000, 1000), (4095, 257, 513)]:
        a = torch.randn(M, K, dtype=torch.float64)
        b = torch.randn(K, N, dtype=torch.float64)
        o = tileops.matmul(a.to(dev, dt), b.to(dev, dt))
        cases.append(("matmul", kind, (M, N, K), rel(o.cpu(), a.to(dt).double() @ b.to(dt).double())))
        o = tileops.matmul(a.t().contiguous().to(dev, dt).t(), b.t().contiguous().to(dev, dt).t())
        cases.append(("matmul T,T", kind, (M, N, K), rel(o.cpu(), a.to(dt).double() @ b.to(dt).double())))
    x = torch.randn(4, 50, 96, dtype=torch.float64)
    w = torch.randn(80, 96, dtype=torch.float64)
    bias = torch.randn(80, dtype=torch.float64)
    o = tileops.linear(x.to(dev, dt), w.to(dev, dt), bias.to(dev, dt), "gelu")
    cases.append(("linear gelu", kind, tuple(x.shape), rel(o.cpu(), F.gelu(F.linear(x.to(dt).double(), w.to(dt).double(), bias.to(dt).double())))))
    for (N, C, H, W, K, R, st, pd, dl, g) in [(2, 16, 15, 17, 32, 3, 1, 1, 1, 1), (2, 12, 14, 14, 24, 3, 2, 1, 2, 3),
                                               (2, 16, 12, 12, 16, 3, 1, 1, 1, 16), (1, 3, 32, 32, 64, 8, 8, 0, 1, 1)]:
        x = torch.randn(N, C, H, W, dtype=torch.float64)
        w = torch.randn(K, C // g, R, R, dtype=torch.float64)
        for cl in [False, True]:
            xd = x.to(dev, dt)
            if cl:
                xd = xd.to(memory_format=torch.channels_last)
            xd.requires_grad_()
            wd = w.to(dev, dt).requires_grad_()
            o = tileops.conv2d(xd, wd, None, st, pd, dl, g, "relu")
            xr = x.to(dt).double().clone().requires_grad_()
            wr = w.to(dt).double().clone().requires_grad_()
            r = F.relu(F.conv2d(xr, wr, None, st, pd, dl, g))
            go = torch.randn_like(r)
            o.backward(go.to(dev, dt))
            r.backward(go)
            lab = "conv %s" % ("cl" if cl else "nchw")
            cases.append((lab + " fwd", kind, (N, C, H, W, K, R, st, pd, dl, g), rel(o.detach().cpu(), r.detach())))
            cases.append((lab + " dgrad", kind, (N, C, H, W, K, R, st, pd, dl, g), rel(xd.grad.cpu(), xr.grad)))
            cases.append((lab + " wgrad", kind, (N, C, H, W, K, R, st, pd, dl, g), rel(wd.grad.cpu(), wr.grad)))

torch.cuda.synchronize()
worst = {}
for op, kind, shape, e in cases:
    worst[(op, kind)] = max(worst.get((op, kind), 0.0), e)
for (op, kind), e in sorted(worst.items()):
    print("%-18s %-9s worst rel err %.3g" % (op, kind, e))
bad = [c for c in cases if not c[3] < 2e-2]
print("BAD:", bad)

# first timings
def bench(fn, iters=20):
    for _ in range(3):
        fn()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
    return sorted(ts)[len(ts) // 2]

for kind, dt in [("float32", torch.float32), ("tf32", torch.float32), ("bfloat16", torch.bfloat16)]:
    torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    n = 4096
    a = torch.randn(n, n, device=dev, dtype=dt); b = torch.randn(n, n, device=dev, dtype=dt)
    t1 = bench(lambda: tileops.matmul(a, b)); t2 = bench(lambda: torch.matmul(a, b))
    print("matmul %s 4096^3: tileops %.3f ms (%.1f TFLOP/s), torch %.3f ms, ratio %.3f" % (kind, t1, 2*n**3/t1/1e9, t2, t2/t1))
