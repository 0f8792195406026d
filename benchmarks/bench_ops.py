"""First timing of every tileops op against torch (cuBLAS / cuDNN) on a few shapes, same run,
same inputs, TF32 flags set per row. Writes JSON (records: op, label, dtype, shape, ms, ratio).
ratio is of GPU times (common.timed: the host queues each call ahead of the GPU, as in a model);
call_ratio of per-call times on an idle GPU, host cost included.

    python benchmarks/bench_ops.py --out benchmarks/results/<gpu>/ops.json
    python benchmarks/bench_ops.py --device cpu     # the CPU path: the demo's shapes, fp32/bf16/fp16
    python benchmarks/bench_ops.py --device cpu --models   # and whole models' inference

On the CPU both sides are timed per call (wall clock, median) in the same run; the closing line
is the median ratio (torch / tileops) over the shapes, per dtype.
"""
import argparse
import copy
import functools
import os
import platform
import statistics

import torch
import torch.nn.functional as F

import tileops
from common import gpu_dir_name, print_table, progress, set_precision, timed, write_json
from tileops import models


def rows():
    for kind in ["float32", "tf32", "float16", "bfloat16"]:
        for n in [1024, 4096]:
            yield ("matmul", "square %d" % n, kind, dict(M=n, N=n, K=n, batch=1))
        yield ("matmul", "batched 64x512x512x64", kind, dict(M=512, N=512, K=64, batch=64))
    for kind in ["float32", "bfloat16"]:
        yield ("linear+gelu", "ViT-B MLP fc1", kind, dict(M=25216, N=3072, K=768, batch=1))
    for kind, layout in [("float32", "nchw"), ("bfloat16", "channels_last")]:
        yield ("conv2d", "3x3 64@56 b32", kind, dict(N=32, C=64, H=56, W=56, K=64, R=3, stride=1, padding=1, groups=1, layout=layout))
        yield ("conv2d", "1x1 256->64@56 b32", kind, dict(N=32, C=256, H=56, W=56, K=64, R=1, stride=1, padding=0, groups=1, layout=layout))
        yield ("conv2d", "dw3x3 96@56 b32", kind, dict(N=32, C=96, H=56, W=56, K=96, R=3, stride=1, padding=1, groups=96, layout=layout))
        yield ("conv2d", "patch16 3->768@224 b32", kind, dict(N=32, C=3, H=224, W=224, K=768, R=16, stride=16, padding=0, groups=1, layout=layout))
        yield ("conv2d fwd+bwd", "3x3 64@56 b32", kind, dict(N=32, C=64, H=56, W=56, K=64, R=3, stride=1, padding=1, groups=1, layout=layout))


def cpu_rows():
    """The demo's shapes (python -m tileops demo without a GPU), and a conv's backward and a 1x1 conv."""
    for kind in ["float32", "bfloat16", "float16"]:
        yield ("matmul", "square 256", kind, dict(M=256, N=256, K=256, batch=1))
        yield ("linear+gelu", "(2,128,768)->3072", kind, dict(M=256, N=3072, K=768, batch=1))
        yield ("conv2d", "3x3 64@56 b2", kind, dict(N=2, C=64, H=56, W=56, K=64, R=3, stride=1, padding=1, groups=1,
                                                   layout="channels_last"))
        yield ("conv2d", "1x1 256->64@28 b2", kind, dict(N=2, C=256, H=28, W=28, K=64, R=1, stride=1, padding=0, groups=1,
                                                        layout="nchw"))
        yield ("conv2d fwd+bwd", "3x3 64@28 b2", kind, dict(N=2, C=64, H=28, W=28, K=64, R=3, stride=1, padding=1, groups=1,
                                                           layout="channels_last"))


def main_cpu(args):
    if args.threads:
        torch.set_num_threads(args.threads)
    print("CPU, %d threads, torch %s" % (torch.get_num_threads(), torch.__version__))
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    records = []
    for op, label, kind, s in cpu_rows():
        mine, theirs, flops = build(op, kind, s, "cpu")
        t_mine, _, _ = timed(mine, device="cpu")
        t_torch, _, _ = timed(theirs, device="cpu")
        rec = dict(op=op, label=label, dtype=kind, tileops_ms=t_mine, torch_ms=t_torch, ratio=t_torch / t_mine,
                   tileops_gflops=flops / t_mine / 1e6, torch_gflops=flops / t_torch / 1e6)
        rec.update({k: v for k, v in s.items()})
        records.append(rec)
        print("%-16s %-20s %-9s tileops %9.3f ms  torch %9.3f ms  ratio %6.3f" % (op, label, kind, t_mine, t_torch,
                                                                                  t_torch / t_mine), flush=True)
    if args.models:
        records += cpu_model_rows()
    for kind in ["float32", "bfloat16", "float16"]:
        ratios = [r["ratio"] for r in records if r["dtype"] == kind and r["op"] != "model"]
        ms = [r["tileops_ms"] for r in records if r["dtype"] == kind and r["op"] != "model"]
        print("%-9s median ratio (torch/tileops) %.3f over %d shapes; tileops ms %s" % (
            kind, statistics.median(ratios), len(ratios), " ".join("%.2f" % m for m in ms)))
    if args.out:
        write_json(args.out, records, cpu=cpu_info())
        print("wrote", args.out)


def cpu_models():
    """(label, model, input, channels_last): fp32 inference at batch 4, the CPU's models."""
    cl = True
    image = (4, 3, 160, 160)
    return [
        ("resnet50 channels_last", models.resnet50, lambda: torch.randn(*image), cl),
        ("resnet50 NCHW", models.resnet50, lambda: torch.randn(*image), not cl),
        ("resnext50_32x4d channels_last", models.resnext50_32x4d, lambda: torch.randn(*image), cl),
        ("regnet_y_400mf channels_last", models.regnet_y_400mf, lambda: torch.randn(*image), cl),
        ("vit_s16 224", models.vit_s16, lambda: torch.randn(4, 3, 224, 224), not cl),
        ("llama 4x512 seq 128", lambda: models.llama(vocab=8000, dim=512, depth=4, heads=8, kv_heads=2, hidden=1408,
                                                     max_len=256), lambda: torch.randint(0, 8000, (2, 128)), not cl),
        ("whisper encoder 1000 frames", lambda: models.whisper_encoder(n_ctx=500), lambda: torch.randn(2, 80, 1000),
         not cl),
    ]


def cpu_model_rows(rounds=3, calls=3):
    """Each model stock and tileops.convert'ed (same weights, same input), eval and no_grad, timed in
    alternating rounds (median of `calls` calls a round); ms is the median over rounds."""
    records = []
    for label, make, inp, cl in cpu_models():
        torch.manual_seed(0)
        stock = make().eval()
        if cl:
            stock = stock.to(memory_format=torch.channels_last)
        mine = tileops.convert(copy.deepcopy(stock)).eval()
        x = inp()
        if cl:
            x = x.to(memory_format=torch.channels_last)
        t = {"tileops": [], "torch": []}
        with torch.no_grad():
            for _ in range(rounds):
                for name, m in (("tileops", mine), ("torch", stock)):
                    t[name].append(timed(functools.partial(m, x), device="cpu", reps=calls)[0])
        rec = dict(op="model", label=label, dtype="float32", tileops_ms=statistics.median(t["tileops"]),
                   torch_ms=statistics.median(t["torch"]))
        rec["ratio"] = rec["torch_ms"] / rec["tileops_ms"]
        records.append(rec)
        print("%-16s %-30s %-9s tileops %9.1f ms  torch %9.1f ms  ratio %6.3f" % (
            "model", label, "float32", rec["tileops_ms"], rec["torch_ms"], rec["ratio"]), flush=True)
    return records


def cpu_info():
    """The CPU the run measured, torch's instruction set on it and the packed row tileops took there."""
    model = platform.processor()
    try:  # the model name, and on a VM that hides it ("Intel(R) Xeon(R) Processor") the family and model
        with open("/proc/cpuinfo") as f:
            fields = dict(ln.split(":", 1) for ln in f.read().split("\n\n")[0].splitlines() if ":" in ln)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        model = "%s (family %s, model %s)" % (fields["model name"], fields["cpu family"], fields["model"])
    except (OSError, KeyError, ValueError):
        pass
    (d,) = tileops.explain("matmul", torch.randn(256, 256), torch.randn(256, 256))
    return dict(model=model, threads=torch.get_num_threads(), torch_capability=torch.backends.cpu.get_cpu_capability(),
                tileops_row=d["kernel"])


def build(op, kind, s, dev):
    dt = torch.float32 if kind == "tf32" else getattr(torch, kind)
    if op == "matmul":
        shape_a = (s["batch"], s["M"], s["K"]) if s["batch"] > 1 else (s["M"], s["K"])
        shape_b = (s["batch"], s["K"], s["N"]) if s["batch"] > 1 else (s["K"], s["N"])
        a, b = torch.randn(shape_a, device=dev, dtype=dt), torch.randn(shape_b, device=dev, dtype=dt)
        flops = 2 * s["batch"] * s["M"] * s["N"] * s["K"]
        return (lambda: tileops.matmul(a, b)), (lambda: torch.matmul(a, b)), flops
    if op == "linear+gelu":
        x = torch.randn(s["M"], s["K"], device=dev, dtype=dt)
        w, b = torch.randn(s["N"], s["K"], device=dev, dtype=dt), torch.randn(s["N"], device=dev, dtype=dt)
        return (lambda: tileops.linear(x, w, b, "gelu")), (lambda: F.gelu(F.linear(x, w, b))), 2 * s["M"] * s["N"] * s["K"]
    x = torch.randn(s["N"], s["C"], s["H"], s["W"], device=dev, dtype=dt)
    w = torch.randn(s["K"], s["C"] // s["groups"], s["R"], s["R"], device=dev, dtype=dt)
    if s["layout"] == "channels_last":
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    args = (None, s["stride"], s["padding"], 1, s["groups"])
    P = (s["H"] + 2 * s["padding"] - s["R"]) // s["stride"] + 1
    flops = 2 * s["N"] * s["K"] * P * P * (s["C"] // s["groups"]) * s["R"] * s["R"]
    if op == "conv2d":
        return (lambda: tileops.conv2d(x, w, *args)), (lambda: F.conv2d(x, w, *args)), flops
    x.requires_grad_()
    w.requires_grad_()
    gy = torch.randn_like(F.conv2d(x, w, *args))

    def step(fn):
        x.grad = w.grad = None
        fn(x, w, *args).backward(gy)

    return (lambda: step(tileops.conv2d)), (lambda: step(F.conv2d)), 3 * flops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    ap.add_argument("--models", action="store_true",
                    help="CPU: also whole models' fp32 inference at batch 4, converted against stock")
    args = ap.parse_args()
    if args.device == "cpu":
        return main_cpu(args)
    assert torch.cuda.is_available(), "bench_ops.py times CUDA kernels; no GPU is visible"
    torch.backends.cudnn.benchmark = True
    out = args.out or os.path.join(os.path.dirname(__file__), "results", gpu_dir_name(), "ops.json")
    todo = list(rows())
    records = []
    for i, (op, label, kind, s) in enumerate(todo):
        progress(i, len(todo), "%s %s %s" % (op, label, kind))
        set_precision(kind)
        mine, theirs, flops = build(op, kind, s, "cuda")
        t_mine, call_mine, _ = timed(mine, reps=args.reps)
        t_torch, call_torch, _ = timed(theirs, reps=args.reps)
        rec = dict(op=op, label=label, dtype=kind, tileops_ms=t_mine, torch_ms=t_torch, ratio=t_torch / t_mine,
                   tileops_tflops=flops / t_mine / 1e9, torch_tflops=flops / t_torch / 1e9, tileops_call_ms=call_mine,
                   torch_call_ms=call_torch, call_ratio=call_torch / call_mine)
        rec.update({k: v for k, v in s.items()})
        records.append(rec)
        del mine, theirs
        torch.cuda.empty_cache()
    progress(len(todo), len(todo), "done")
    write_json(out, records)
    print_table(records, ["op", "label", "dtype", "tileops_ms", "torch_ms", "ratio", "call_ratio", "tileops_tflops"])
    print("wrote", out)


if __name__ == "__main__":
    main()
