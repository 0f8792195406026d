"""PNG of a benchmark JSON: ratio to torch (torch time / tileops time) per row, by dtype.

    python benchmarks/plot.py benchmarks/results/h200/matmul.json   # writes matmul.png beside it
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path):
    with open(path) as f:
        data = json.load(f)
    recs = data["records"]
    labels = []
    for r in recs:
        lab = "%s %s %s" % (r.get("op", ""), r["label"], r["dtype"])
        if r.get("algo", "auto") != "auto":
            lab += " [%s]" % r["algo"]
        if "pass" in r:
            lab += " " + r["pass"]
        labels.append(lab)
    colors = {"float32": "tab:blue", "tf32": "tab:cyan", "float16": "tab:orange", "bfloat16": "tab:red"}
    fig, ax = plt.subplots(figsize=(10, max(4, 0.22 * len(recs))))
    ys = range(len(recs))
    ax.barh(ys, [r["ratio"] for r in recs], color=[colors.get(r["dtype"], "gray") for r in recs])
    ax.axvline(1.0, color="black", lw=1)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("speed relative to torch (torch ms / tileops ms), log scale; 1.0 = parity")
    ax.set_title("%s: %s, torch %s" % (os.path.basename(path), data.get("gpu"), data.get("torch")), fontsize=9)
    fig.tight_layout()
    out = os.path.splitext(path)[0] + ".png"
    fig.savefig(out, dpi=110)
    print("wrote", out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
