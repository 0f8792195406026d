"""Whole models: tileops-converted against stock torch, same weights, same inputs, same run.

    python benchmarks/bench_models.py [--out benchmarks/results/<gpu>/models.json] [--quick] [--profile]

ViT-S/16 at batch 128 and ResNet-50 channels_last at batch 64, under bf16 autocast; also (MODELS
lists their batches and inputs) ResNeXt-50 32x4d and RegNetY-400MF (grouped convs), r3d_18 (conv3d,
channels_last_3d clips of 16x112^2), Whisper-tiny's encoder (conv1d over 30 s of log-mel frames) and
a Llama-style 8x1024 decoder (seq 512, next-token loss). --models picks some (the whole list runs
past one 10-minute device call). For each: a training step (forward, backward, AdamW step), eager and torch.compile'd (default
mode), and inference (eval, no_grad) at batch 1 and 64, eager, "fused" (tileops.fuse_for_inference
against stock eager) and compiled with --compile-inference.
Each row builds both (same weights) side by side and times them in alternating rounds (--rounds:
tileops, torch, tileops, ...), so drift on a shared GPU lands on both; it records each median of
the round medians and their spread (min, max), ratio = torch_ms / tileops_ms (below 1: tileops
is slower) and each side's peak memory (torch.cuda.max_memory_allocated over what was allocated
before it was built; it includes the weights and, for training, AdamW's state; a fused model's
peak is counted from after its conversion, whose own peak is kept as tileops_convert_peak_mb). A row whose compile or run fails keeps its error and the
benchmark goes on. Writes models.json, models.png beside it, and with --profile models_profile.txt
(profiler table of one tileops training step per model). --quick: eager only, fewer repetitions.
"""
import argparse
import gc
import os
import statistics
import time
import traceback

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
    time_ms,
    write_json,
)
from tileops import models

# name, constructor, training batch, memory format, input: ("image", side) RGB images, ("clip", frames,
# side) RGB clips, ("audio", mels, frames) log-mel frames, all with 10 classes; ("tokens", vocab, length)
# token ids whose next-token logits are scored at every position
MODELS = [
    ("vit_s16", models.vit_s16, 128, torch.contiguous_format, ("image", 224)),
    ("resnet50", models.resnet50, 64, torch.channels_last, ("image", 224)),
    ("resnext50_32x4d", models.resnext50_32x4d, 32, torch.channels_last, ("image", 224)),
    ("regnet_y_400mf", models.regnet_y_400mf, 64, torch.channels_last, ("image", 224)),
    ("r3d_18", models.r3d_18, 16, torch.channels_last_3d, ("clip", 16, 112)),
    ("whisper_tiny_encoder", models.whisper_encoder, 32, torch.contiguous_format, ("audio", 80, 3000)),
    ("llama_8x1024", models.llama, 8, torch.contiguous_format, ("tokens", 32000, 512)),
]
TINY = [  # --tiny: a smoke test of this script (runs on the CPU too)
    ("vit_tiny", lambda: models.vit(img_size=32, patch=8, dim=32, depth=2, heads=2, num_classes=10), 8,
     torch.contiguous_format, ("image", 32)),
    ("resnet_tiny", lambda: models.resnet((1, 1), width=8, num_classes=10, small_input=True), 8, torch.channels_last,
     ("image", 32)),
    ("resnext_tiny", lambda: models.resnet((1, 1), width=16, num_classes=10, small_input=True, groups=4,
                                           width_per_group=16), 8, torch.channels_last, ("image", 32)),
    ("r3d_tiny", lambda: models.r3d((1, 1), width=8, num_classes=10), 4, torch.channels_last_3d, ("clip", 4, 16)),
    ("whisper_tiny", lambda: models.whisper_encoder(n_mels=16, n_ctx=16, dim=32, depth=2, heads=2, num_classes=10), 4,
     torch.contiguous_format, ("audio", 16, 32)),
    ("llama_tiny", lambda: models.llama(vocab=64, dim=32, depth=2, heads=4, kv_heads=2, hidden=48, max_len=32), 4,
     torch.contiguous_format, ("tokens", 64, 16)),
]


def autocast(device):
    return torch.autocast(device, dtype=torch.bfloat16)


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def make(spec, impl, device, train):
    """A fresh model (seed 0: both impls get the same weights) and its optimizer."""
    name, ctor, _, fmt, _ = spec
    torch.manual_seed(0)
    with torch.device(device):  # initialised on the device: fast, and the same for both impls
        model = ctor()
    model = model.to(memory_format=fmt).train(train)
    if impl == "tileops":
        tileops.convert(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if train else None
    return model, opt


def inputs(spec, batch, device):
    """(x, labels) of a batch of the model's input kind (see MODELS)."""
    _, _, _, fmt, (kind, *dims) = spec
    gen = torch.Generator().manual_seed(1)
    if kind == "tokens":
        vocab, length = dims
        x, y = (torch.randint(0, vocab, (batch, length), generator=gen) for _ in range(2))
        return x.to(device), y.to(device)
    if kind == "image":
        shape = (3, dims[0], dims[0])
    else:  # clip: (3, frames, side, side); audio: (mels, frames)
        shape = (3, dims[0], dims[1], dims[1]) if kind == "clip" else tuple(dims)
    x = torch.randn(batch, *shape, generator=gen).to(device=device, memory_format=fmt)
    return x, torch.randint(0, 10, (batch,), generator=gen).to(device)


def train_step_fn(model, opt, x, y, device):
    def step():
        with autocast(device):
            out = model(x)
        loss = F.cross_entropy(out.float().flatten(0, -2), y.flatten())  # logits (N, C) or (N, T, V)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def infer_fn(model, x, device):
    def run():
        with torch.no_grad(), autocast(device):
            model(x)

    return run


def allocated(device):
    return torch.cuda.memory_allocated() if device == "cuda" else 0


def prepare(spec, impl, mode, pass_, batch, args):
    """(fn, peak MB, seconds of the second call, conversion peak MB or None): build, (compile), and
    make the first two calls; the peak covers the model, its optimizer state and those calls, over
    what was allocated before (the other impl's model may be alive beside it). A fused model's peak
    starts after the conversion, which holds the original and the folded weights at once for a
    moment: that one-time peak is the fourth value. The second call's time sizes the timed
    repetitions (see timed_rounds)."""
    base = allocated(args.device)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    model, opt = make(spec, impl, args.device, pass_ == "train")
    x, y = inputs(spec, batch, args.device)
    convert_peak = None
    if mode == "fused" and impl == "tileops":  # BatchNorm folded, activations and residual adds fused
        model = tileops.fuse_for_inference(model)
        gc.collect()  # the unfolded weights go with the original modules
        if args.device == "cuda":
            convert_peak = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
            torch.cuda.reset_peak_memory_stats()
    if mode == "compiled":
        model = torch.compile(model, mode=args.compile_mode if pass_ == "train" else "reduce-overhead")
    fn = train_step_fn(model, opt, x, y, args.device) if pass_ == "train" else infer_fn(model, x, args.device)
    fn()
    sync(args.device)
    t0 = time.perf_counter()
    fn()
    sync(args.device)
    once = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated() - base) / 2 ** 20 if args.device == "cuda" else None
    return fn, peak, once, convert_peak


def timed_rounds(fns, once, args):
    """{impl: [median ms of each round]}: ROUNDS rounds, each timing every impl in turn (time_ms
    over a share of the repetitions), so a drift of clocks or of other work on the GPU lands on
    both sides alike instead of on whichever ran second. once: the slowest side's single call (s)."""
    n = max(3, min(args.reps, int(args.budget / max(once, 1e-6))))
    per_round = max(1, -(-n // args.rounds))
    out = {impl: [] for impl in fns}
    for _ in range(args.rounds):
        for impl, fn in fns.items():
            out[impl].append(time_ms(fn, warmup=0, reps=per_round, device=args.device))
    return out


def record(spec, mode, pass_, batch, args):
    """One row: both impls built side by side (one first call each), then timed in alternating
    rounds; ms = the median of the round medians, spread = their (min, max)."""
    rec = {"model": spec[0], "mode": mode, "pass": pass_, "batch": batch, "dtype": "bfloat16",
           "layout": "contiguous" if spec[3] == torch.contiguous_format else str(spec[3]).replace("torch.", "")}
    torch._dynamo.reset()
    fns, once = {}, 0.0
    try:
        for impl in ("tileops", "torch"):
            try:
                fns[impl], rec[impl + "_peak_mb"], t, convert_peak = prepare(spec, impl, mode, pass_, batch, args)
                if convert_peak is not None:
                    rec[impl + "_convert_peak_mb"] = convert_peak
                once = max(once, t)
            except Exception as e:  # keep going: a failed compile or an OOM is a result too
                rec[impl + "_error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:300] if str(e).strip() else "")
                traceback.print_exc()
        rounds = timed_rounds(fns, once, args) if fns else {}
        for impl in ("tileops", "torch"):
            r = rounds.get(impl)
            rec[impl + "_ms"] = statistics.median(r) if r else None
            rec[impl + "_spread_ms"] = [min(r), max(r)] if r else None
            rec.setdefault(impl + "_peak_mb", None)
    finally:
        del fns
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
    ok = rec["tileops_ms"] and rec["torch_ms"]
    rec["ratio"] = rec["torch_ms"] / rec["tileops_ms"] if ok else None
    rec["tileops_img_per_s"] = batch / rec["tileops_ms"] * 1e3 if rec["tileops_ms"] else None
    return rec


def profile_step(spec, impl, args, path):
    """Profiler table (key_averages) of one training step of `impl` after a warm-up step."""
    model, opt = make(spec, impl, args.device, True)
    x, y = inputs(spec, spec[2], args.device)
    step = train_step_fn(model, opt, x, y, args.device)
    step()
    sync(args.device)
    acts = [torch.profiler.ProfilerActivity.CPU]
    if args.device == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        step()
        sync(args.device)
    table = None
    for key in ("self_device_time_total", "self_cuda_time_total", "self_cpu_time_total"):
        try:
            table = prof.key_averages().table(sort_by=key, row_limit=50, max_name_column_width=110)
            break
        except (AttributeError, KeyError, RuntimeError):
            continue
    with open(path, "a") as f:
        f.write("=== %s: one %s training step, batch %d, bf16 autocast, %s ===\n%s\n\n" % (
            spec[0], impl, spec[2], str(spec[3]).replace("torch.", ""), table))
    del model, opt
    gc.collect()


def plot(records, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = ["%s %s %s b%d" % (r["model"], r["mode"], r["pass"], r["batch"]) for r in records]
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(12, 0.3 * len(records) + 2))
    ys = list(range(len(records)))
    ratios = [r["ratio"] or 0 for r in records]
    ax_t.barh(ys, ratios, color=["tab:green" if v >= 1 else "tab:red" for v in ratios])
    for yv, r in zip(ys, records):
        txt = " %.2fx (%.3g vs %.3g ms)" % (r["ratio"], r["tileops_ms"], r["torch_ms"]) if r["ratio"] else " error"
        ax_t.text(max(r["ratio"] or 0, 1e-3), yv, txt, va="center", fontsize=7)
    ax_t.axvline(1.0, color="black", lw=1)
    ax_t.set_xscale("log")
    ax_t.set_yticks(ys)
    ax_t.set_yticklabels(labels, fontsize=7)
    ax_t.invert_yaxis()
    ax_t.set_xlabel("torch ms / tileops ms (log; >1: tileops faster)")
    h = 0.4
    ax_m.barh([y - h / 2 for y in ys], [r["tileops_peak_mb"] or 0 for r in records], h, label="tileops")
    ax_m.barh([y + h / 2 for y in ys], [r["torch_peak_mb"] or 0 for r in records], h, label="torch")
    ax_m.set_yticks(ys)
    ax_m.set_yticklabels([])
    ax_m.invert_yaxis()
    ax_m.set_xlabel("peak memory allocated (MB)")
    ax_m.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None)
    ap.add_argument("--reps", type=int, default=20, help="most timed repetitions per row")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timed calls per row, at least 3 calls")
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds per row (tileops, torch, ...)")
    ap.add_argument("--quick", action="store_true", help="eager only, 5 repetitions")
    ap.add_argument("--compile-inference", action="store_true", help="also compiled inference (reduce-overhead)")
    ap.add_argument("--compile-mode", default="default", help="torch.compile mode of the training rows")
    ap.add_argument("--profile", action="store_true", help="write models_profile.txt beside --out: a "
                    "training step of each model, tileops and torch")
    ap.add_argument("--profile-only", action="store_true", help="--profile without the timed rows")
    ap.add_argument("--models", default=None, help="comma-separated subset, e.g. vit_s16")
    ap.add_argument("--tiny", action="store_true", help="tiny models and inputs (smoke test; with --device cpu)")
    ap.add_argument("--device", default="cuda")
    add_portable_arg(ap)
    args = ap.parse_args()
    if args.device == "cuda":
        assert torch.cuda.is_available(), "bench_models.py times CUDA training steps; no GPU is visible"
    if args.compile_mode == "default":
        args.compile_mode = None
    if args.quick:
        args.reps = min(args.reps, 5)
        args.rounds = min(args.rounds, 3)
    out = args.out or os.path.join(os.path.dirname(__file__), "results", gpu_dir_name(), "models.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    out = apply_portable(args, out, default_out=args.out is None)
    set_precision("bfloat16")  # TF32 off: the fp32 parts run as fp32 in both
    torch.backends.cudnn.benchmark = True
    specs = TINY if args.tiny else MODELS
    if args.models:
        specs = [s for s in specs if s[0] in args.models.split(",")]
    todo = []
    for spec in [] if args.profile_only else specs:
        todo.append((spec, "eager", "train", spec[2]))
        if not args.quick:
            todo.append((spec, "compiled", "train", spec[2]))
        for b in (1, 64):
            todo.append((spec, "eager", "infer", b))
            todo.append((spec, "fused", "infer", b))
            if args.compile_inference and not args.quick:
                todo.append((spec, "compiled", "infer", b))
    t_start, records = time.perf_counter(), []
    for i, (spec, mode, pass_, batch) in enumerate(todo):
        progress(i, len(todo), "%s %s %s b%d" % (spec[0], mode, pass_, batch))
        records.append(record(spec, mode, pass_, batch, args))
    progress(len(todo), len(todo), "done")
    if args.profile or args.profile_only:
        prof_path = os.path.splitext(out)[0] + "_profile.txt"
        if os.path.exists(prof_path):
            os.remove(prof_path)
        for spec, impl in ((s, i) for s in specs for i in ("tileops", "torch")):
            try:
                profile_step(spec, impl, args, prof_path)
            except Exception:
                traceback.print_exc()
        print("wrote", prof_path)
    if args.profile_only:
        return
    write_json(out, records)
    print_table(records, ["model", "mode", "pass", "batch", "tileops_ms", "torch_ms", "ratio", "tileops_peak_mb", "torch_peak_mb"])
    for r in records:
        for impl in ("tileops", "torch"):
            if impl + "_error" in r:
                print("%s %s %s b%d %s failed: %s" % (r["model"], r["mode"], r["pass"], r["batch"], impl, r[impl + "_error"]))
    try:
        plot(records, os.path.splitext(out)[0] + ".png", "%s: %s, bf16 autocast, torch %s" % (
            gpu_name(), ", ".join(s[0] for s in specs), torch.__version__))
    except ImportError:
        print("matplotlib is not installed: no PNG")
    print("wrote %s (%.0f s)" % (out, time.perf_counter() - t_start))


if __name__ == "__main__":
    main()
