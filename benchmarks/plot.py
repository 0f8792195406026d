"""PNG of a benchmark JSON: ratio to torch (torch time / tileops time) per row, by dtype.

    python benchmarks/plot.py benchmarks/results/h200/matmul.json   # writes matmul.png beside it

Ladder records (bench_matmul's op "ladder": each algo rung at one size) also get FILE_ladder.png:
each rung's TFLOP/s, labelled with its % of the cuBLAS measured in the same row and of the peak.
Records with a "pass" (conv.json: fwd, fwd+bwd, fwd+bias+relu) are drawn one panel per pass,
one row per shape and batch, one bar per dtype; rows that failed (ratio null) get a red x.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"float32": "tab:blue", "tf32": "tab:cyan", "float16": "tab:orange", "bfloat16": "tab:red"}
XLABEL = "speed relative to torch (torch ms / tileops ms), log scale; 1.0 = parity"


def title(path, data):
    where = data.get("gpu")
    cpu = data.get("cpu")
    if cpu:  # a CPU run (bench_ops --device cpu): the CPU, its threads and the row tileops took
        where = "%s, %d threads, %s" % (cpu["model"], cpu["threads"], cpu["tileops_row"])
    return "%s: %s, torch %s" % (os.path.basename(path), where, data.get("torch"))


def plot_rows(path, data, out):
    recs = data["records"]
    labels = []
    for r in recs:
        lab = "%s %s %s" % (r.get("op", ""), r["label"], r["dtype"])
        if r.get("algo", "auto") != "auto":
            lab += " [%s]" % r["algo"]
        labels.append(lab)
    fig, ax = plt.subplots(figsize=(10, max(4, 0.22 * len(recs))))
    ys = range(len(recs))
    ax.barh(ys, [r["ratio"] or 0 for r in recs], color=[COLORS.get(r["dtype"], "gray") for r in recs])
    ax.axvline(1.0, color="black", lw=1)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(XLABEL)
    ax.set_title(title(path, data), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_panels(path, data, out):
    recs = data["records"]
    passes = list(dict.fromkeys(r["pass"] for r in recs))
    dtypes = list(dict.fromkeys(r["dtype"] for r in recs))
    rows = {p: list(dict.fromkeys((r["label"], r.get("N")) for r in recs if r["pass"] == p)) for p in passes}
    height = max(4, 0.26 * max(len(v) for v in rows.values()) + 1.5)
    fig, axes = plt.subplots(1, len(passes), figsize=(6.5 * len(passes), height), squeeze=False)
    width = 0.8 / len(dtypes)
    for ax, p in zip(axes[0], passes):
        index = {key: i for i, key in enumerate(rows[p])}
        for j, dt in enumerate(dtypes):
            sel = [r for r in recs if r["pass"] == p and r["dtype"] == dt]
            if not sel:
                continue
            ys = [index[(r["label"], r.get("N"))] + (j - (len(dtypes) - 1) / 2) * width for r in sel]
            ax.barh(ys, [r["ratio"] or 0 for r in sel], height=width, color=COLORS.get(dt, "gray"), label=dt)
            bad = [y for y, r in zip(ys, sel) if not r["ratio"]]
            if bad:
                ax.plot([1.0] * len(bad), bad, "x", color="red", ms=6)
        ax.axvline(1.0, color="black", lw=1)
        ax.set_yticks(range(len(rows[p])))
        ax.set_yticklabels(["%s b%s" % key for key in rows[p]], fontsize=6)
        ax.set_ylim(len(rows[p]) - 0.5, -0.5)
        ax.set_xscale("log")
        ax.set_xlabel(XLABEL, fontsize=7)
        ax.set_title(p, fontsize=9)
        ax.legend(fontsize=6, loc="lower right")
    fig.suptitle(title(path, data), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def plot_ladder(path, data, recs, out):
    fig, ax = plt.subplots(figsize=(9, max(3, 0.32 * len(recs) + 1)))
    ys = range(len(recs))
    ax.barh(ys, [r["tileops_tflops"] for r in recs], color=[COLORS.get(r["dtype"], "gray") for r in recs])
    for y, r in zip(ys, recs):
        peak = r.get("pct_of_peak")
        note = "%.1f TFLOP/s, %.0f%% of cuBLAS" % (r["tileops_tflops"], r["pct_of_cublas"])
        ax.text(r["tileops_tflops"] * 1.05, y, note + ("" if peak is None else ", %.0f%% of peak" % peak),
                va="center", fontsize=7)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(["%s %s" % (r["algo"], r["dtype"]) for r in recs], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(1, max(r["tileops_tflops"] for r in recs) * 8)
    ax.set_xlabel("TFLOP/s (log scale)")
    ax.set_title("kernel ladder, %s: %s" % (recs[0]["label"], title(path, data)), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(path):
    with open(path) as f:
        data = json.load(f)
    out = os.path.splitext(path)[0] + ".png"
    if data["records"] and all("pass" in r for r in data["records"]):
        plot_panels(path, data, out)
    else:
        plot_rows(path, data, out)
    print("wrote", out)
    ladder = [r for r in data["records"] if r.get("op") == "ladder"]
    if ladder:
        out = os.path.splitext(path)[0] + "_ladder.png"
        plot_ladder(path, data, ladder, out)
        print("wrote", out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
