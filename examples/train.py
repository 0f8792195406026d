"""Train a small ViT and a small CNN, every Linear / Conv2d a tileops layer, on scikit-learn's
bundled digits (1797 8x8 grey images, 10 classes; nothing is downloaded).

    python examples/train.py                          # both models, CPU, 20 epochs, curves in out/train
    python examples/train.py --model vit --epochs 5 --device cuda --bf16 --out /tmp/run

Writes OUT/curves.json (per epoch: train loss and accuracy, test loss and accuracy; a fixed --seed
gives the same numbers twice) and OUT/curves.png (matplotlib, when installed).
"""
import argparse
import contextlib
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import tileops
from tileops import models


def load_digits_split(device):
    """80/20 stratified split (fixed, independent of --seed), pixels scaled to [0, 1] then
    standardised with the training set's mean and std."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as e:
        raise SystemExit("train.py needs scikit-learn for its bundled digits data set: pip install scikit-learn (%s)" % e) from e
    d = load_digits()
    x_tr, x_te, y_tr, y_te = train_test_split(d.images, d.target, test_size=0.2, random_state=0, stratify=d.target)

    def tensors(x, y):
        return torch.tensor(x, dtype=torch.float32).unsqueeze(1) / 16.0, torch.tensor(y, dtype=torch.long)

    (x_tr, y_tr), (x_te, y_te) = tensors(x_tr, y_tr), tensors(x_te, y_te)
    mean, std = x_tr.mean(), x_tr.std()
    return [t.to(device) for t in ((x_tr - mean) / std, y_tr, (x_te - mean) / std, y_te)]


def build(name):
    if name == "vit":  # 2x2 patches of 4x4 pixels + a class token, 2 blocks of width 48
        model = models.vit(img_size=8, patch=4, dim=48, depth=2, heads=4, num_classes=10, in_chans=1, mlp_ratio=2.0)
    else:
        model = models.cnn(num_classes=10, in_chans=1, width=16)
    return tileops.convert(model)  # every nn.Linear / nn.Conv2d becomes a tileops layer


HPARAMS = {"vit": dict(lr=4e-3, weight_decay=0.05), "cnn": dict(lr=2e-3, weight_decay=1e-4)}


class Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal, once per epoch otherwise)."""

    def __init__(self, total, label, width=28):
        self.total, self.label, self.width, self.n = total, label, width, 0
        self.tty = sys.stderr.isatty()
        self.t0 = time.perf_counter()

    def update(self, n=1, **info):
        self.n += n
        if self.tty or self.n == self.total:
            filled = self.width * self.n // self.total
            extra = " ".join("%s %s" % kv for kv in info.items())
            sys.stderr.write("\r%-5s [%s%s] %d/%d %.0fs %s" % (
                self.label, "#" * filled, "." * (self.width - filled), self.n, self.total,
                time.perf_counter() - self.t0, extra))
            if self.n == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def evaluate(model, x, y, batch_size, autocast):
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad(), autocast():
        for i in range(0, len(x), batch_size):
            out = model(x[i:i + batch_size]).float()
            loss += F.cross_entropy(out, y[i:i + batch_size], reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + batch_size]).sum().item()
    return loss / len(x), correct / len(x)


def train(name, data, args):
    x_tr, y_tr, x_te, y_te = data
    torch.manual_seed(args.seed)
    model = build(name).to(args.device)
    hp = HPARAMS[name]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr or hp["lr"], weight_decay=hp["weight_decay"])
    steps_per_epoch = math.ceil(len(x_tr) / args.batch_size)
    total = args.epochs * steps_per_epoch
    warmup = min(steps_per_epoch, total // 10 + 1)
    sched = torch.optim.lr_scheduler.LambdaLR(  # linear warm-up, then cosine to zero
        opt, lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / max(1, total - warmup))))
    gen = torch.Generator().manual_seed(args.seed)
    dtype = torch.bfloat16 if args.bf16 else None
    autocast = lambda: torch.autocast(args.device.split(":")[0], dtype=dtype, enabled=dtype is not None)
    curves = {k: [] for k in ("train_loss", "train_acc", "test_loss", "test_acc")}
    bar = Progress(total, name)
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(len(x_tr), generator=gen).to(args.device)
        loss_sum = torch.zeros((), device=args.device)
        correct = torch.zeros((), dtype=torch.long, device=args.device)
        for i in range(0, len(x_tr), args.batch_size):
            idx = perm[i:i + args.batch_size]
            xb, yb = x_tr[idx], y_tr[idx]
            with autocast():
                out = model(xb).float()
            loss = F.cross_entropy(out, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.detach() * len(idx)
            correct += (out.argmax(1) == yb).sum()
            bar.update(epoch=epoch + 1)
        curves["train_loss"].append(loss_sum.item() / len(x_tr))
        curves["train_acc"].append(correct.item() / len(x_tr))
        test_loss, test_acc = evaluate(model, x_te, y_te, 256, autocast)
        curves["test_loss"].append(test_loss)
        curves["test_acc"].append(test_acc)
        if bar.tty:
            bar.update(0, epoch=epoch + 1, test_acc="%.3f" % test_acc)
    seconds = time.perf_counter() - t0
    print("%s: test accuracy %.4f after %d epochs, %.1f s on %s" % (name, curves["test_acc"][-1], args.epochs, seconds, args.device))
    return dict(curves, seconds=seconds, params=sum(p.numel() for p in model.parameters()))


def plot(results, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG, the curves are in the JSON")
        return
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    for color, (name, r) in zip(("tab:blue", "tab:red"), results.items()):
        epochs = range(1, len(r["train_loss"]) + 1)
        for split, style in (("train", "--"), ("test", "-")):
            ax_loss.plot(epochs, r[split + "_loss"], style, color=color, label="%s %s" % (name, split))
            ax_acc.plot(epochs, r[split + "_acc"], style, color=color, label="%s %s" % (name, split))
    ax_loss.set_yscale("log")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy", title="loss")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy", ylim=(0.5, 1.0))
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("tileops layers on sklearn digits (8x8), %s" % ", ".join(
        "%s %.1f%%" % (n, 100 * r["test_acc"][-1]) for n, r in results.items()))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("vit", "cnn", "both"), default="both")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate (default: per model)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads (default 1: the models are tiny, and a fixed count keeps the curves "
                         "reproducible across machines; 0 = torch's default)")
    ap.add_argument("--out", default=os.path.join("out", "train"))
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda"):  # exact fp32, and kernels that pick the same algorithm every run
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    data = load_digits_split(args.device)
    results = {}
    # attention by the math kernel on the GPU: the fused kernels' backward is not bitwise reproducible
    attention = sdpa_kernel(SDPBackend.MATH) if args.device.startswith("cuda") else contextlib.nullcontext()
    with attention:
        for name in (("vit", "cnn") if args.model == "both" else (args.model,)):
            results[name] = train(name, data, args)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "curves.json"), "w") as f:
        json.dump(dict(args=vars(args), torch=torch.__version__, tileops=tileops.__version__, models=results), f, indent=1)
    plot(results, os.path.join(args.out, "curves.png"))
    print("wrote", os.path.join(args.out, "curves.json"), "and curves.png")
    return results


if __name__ == "__main__":
    main()
