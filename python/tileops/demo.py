"""python -m tileops demo: tileops against torch on a few shapes and a small converted model.

On a GPU it times both (CUDA events, median) and checks the results agree; without one it
runs the CPU path at small sizes and says so."""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from . import conv2d, convert, linear, matmul


def _time_ms(fn, device, reps):
    for _ in range(3):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def _rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def _model():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Flatten(1), torch.nn.Linear(64 * 16 * 16, 256), torch.nn.GELU(), torch.nn.Linear(256, 10),
    )


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tileops demo")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    if cuda:
        print("tileops demo on %s (torch %s, CUDA %s)" % (torch.cuda.get_device_name(0), torch.__version__, torch.version.cuda))
    else:
        print("tileops demo: no CUDA GPU visible, so this runs the CPU path (packed CPU kernels, small sizes)")
    big = cuda and not args.quick
    reps = 20 if cuda else 3
    n = 4096 if big else 256
    rows = []
    for dt in [torch.float32, torch.bfloat16]:
        a, b = torch.randn(n, n, device=dev, dtype=dt), torch.randn(n, n, device=dev, dtype=dt)
        rows.append(("matmul %d^3" % n, dt, lambda a=a, b=b: matmul(a, b), lambda a=a, b=b: torch.matmul(a, b)))
        x = torch.randn(8 if big else 2, 128, 768, device=dev, dtype=dt)
        w, bias = torch.randn(3072, 768, device=dev, dtype=dt), torch.randn(3072, device=dev, dtype=dt)
        rows.append(("linear+gelu %s" % (tuple(x.shape),), dt, lambda x=x, w=w, bias=bias: linear(x, w, bias, "gelu"),
                     lambda x=x, w=w, bias=bias: F.gelu(F.linear(x, w, bias))))
        xi = torch.randn(16 if big else 2, 64, 56, 56, device=dev, dtype=dt).to(memory_format=torch.channels_last)
        wi = torch.randn(64, 64, 3, 3, device=dev, dtype=dt)
        rows.append(("conv3x3 %s" % (tuple(xi.shape),), dt, lambda xi=xi, wi=wi: conv2d(xi, wi, None, 1, 1),
                     lambda xi=xi, wi=wi: F.conv2d(xi, wi, None, 1, 1)))
    print("%-32s %-9s %10s %10s %7s %9s" % ("op", "dtype", "tileops ms", "torch ms", "ratio", "rel err"))
    for label, dt, mine, theirs in rows:
        err = _rel(mine(), theirs())
        tm, tt = _time_ms(mine, dev, reps), _time_ms(theirs, dev, reps)
        print("%-32s %-9s %10.3f %10.3f %6.2fx %9.1e" % (label, str(dt).replace("torch.", ""), tm, tt, tt / tm, err))

    torch.manual_seed(0)
    ref_model = _model().to(dev)
    model = convert(_model().to(dev))
    model.load_state_dict(ref_model.state_dict())
    x = torch.randn(64 if big else 4, 3, 32, 32, device=dev)
    with torch.no_grad():
        err = _rel(model(x), ref_model(x))
        tm = _time_ms(lambda: model(x), dev, reps)
        tt = _time_ms(lambda: ref_model(x), dev, reps)
    print("small CNN, tileops.convert()ed vs stock, batch %d fp32: %.3f ms vs %.3f ms (%.2fx), rel err %.1e"
          % (x.shape[0], tm, tt, tt / tm, err))
    ok = err < 1e-4
    print("demo %s" % ("OK" if ok else "FAILED: converted model disagrees with stock"))
    return 0 if ok else 1
