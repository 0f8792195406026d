"""Where a kernel's time goes, from an ncu source page: stall samples and executed instructions
per region of SASS lines, the stall reasons overall, and the lines with most samples.

Make the CSV on a GPU machine whose runtime lets ncu read counters (see scripts/dev/ncu_probe.sh):
  ncu --set full --import-source yes -k regex:NAME --launch-count 1 -o rep python3 run.py
  ncu --import rep.ncu-rep --page source --print-source sass --csv > src.csv
Usage: python scripts/dev/ncu_sass_regions.py src.csv [--lines 100] [--top 25]"""
import argparse
import collections
import csv


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--lines", type=int, default=100, help="SASS lines a region")
    ap.add_argument("--top", type=int, default=25, help="lines with most samples to list")
    args = ap.parse_args()
    rows = list(csv.reader(open(args.csv)))
    hdr, data = rows[1], rows[2:]  # row 0 names the kernel
    ix = {h: i for i, h in enumerate(hdr)}
    samples, execs = ix["Warp Stall Sampling (All Samples)"], ix["Instructions Executed"]
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(int(r[samples]) for r in data) or 1
    total_e = sum(int(r[execs]) for r in data) or 1
    print("%s\nsamples %d, warp instructions %d" % (rows[0][1] if len(rows[0]) > 1 else "", total, total_e))
    agg = collections.Counter()
    for r in data:
        for h in reasons:
            agg[h] += int(r[ix[h]])
    print(" ".join("%s %.1f%%" % (h[6:], 100 * v / total) for h, v in agg.most_common(10)))
    print("\nregion       samples   insts   most executed opcodes (thousands)")
    for b in range(0, len(data), args.lines):
        seg = data[b:b + args.lines]
        s, e = sum(int(r[samples]) for r in seg), sum(int(r[execs]) for r in seg)
        if s + e == 0:
            continue
        ops = collections.Counter()
        for r in seg:
            words = r[1].split()
            op = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "")
            ops[op.split(".")[0]] += int(r[execs])
        print("%5d-%5d  %5.1f%%  %5.1f%%   %s" % (b, b + args.lines, 100 * s / total, 100 * e / total_e,
                                            " ".join("%s:%d" % (k, v // 1000) for k, v in ops.most_common(5))))
    print("\nline   samples  executed  instruction  (top two stall reasons)")
    for i in sorted(sorted(range(len(data)), key=lambda i: -int(data[i][samples]))[:args.top]):
        r = data[i]
        top2 = sorted(((int(r[ix[h]]), h[6:]) for h in reasons), reverse=True)[:2]
        print("%5d %6.2f%% %9s  %-60s %s" % (i, 100 * int(r[samples]) / total, r[execs], r[1].strip()[:60],
                                            ", ".join("%s %d" % (n, v) for v, n in top2)))


if __name__ == "__main__":
    main()
