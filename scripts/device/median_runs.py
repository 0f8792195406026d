"""Median of several whole bench_matmul runs (back to back on one GPU): median3.json (each row's
ratios, run by run, and their median) and matmul_median3.json (bench_matmul's format, each
record taken from the run whose ratio is that row's median; it becomes results/<gpu>/matmul.json).

    python scripts/device/median_runs.py DIR [--runs m1,m2,m3] [--label SHA]

DIR holds <run>/matmul.json for each run.
"""
import argparse
import json
import os
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--runs", default="m1,m2,m3")
    ap.add_argument("--label", default=None, help="how the note names the runs (default: DIR's name)")
    a = ap.parse_args()
    runs = a.runs.split(",")
    data = {r: json.load(open(os.path.join(a.dir, r, "matmul.json"))) for r in runs}
    label = a.label or os.path.basename(os.path.normpath(a.dir))
    # a row is (op, label, dtype, algo): the ladder's rungs share their label and dtype
    by_row = {}  # row -> {run: record}
    for r in runs:
        for rec in data[r]["records"]:
            by_row.setdefault((rec["op"], rec["label"], rec["dtype"], rec.get("algo", "auto")), {})[r] = rec
    rows, records = {}, []
    for (op, name, dtype, algo), recs in by_row.items():
        if len(recs) != len(runs):
            continue  # a row some run lacks
        ratios = [recs[r]["ratio"] for r in runs]
        med = statistics.median(ratios)
        row = "%s %s" % (op, name) if algo == "auto" else "%s %s [%s]" % (op, name, algo)
        rows.setdefault(row, {})[dtype] = {"median": round(med, 3),
                                           "runs": [round(x, 3) for x in ratios]}
        pick = min(runs, key=lambda r: abs(recs[r]["ratio"] - med))
        records.append(dict(recs[pick], run=pick))
    first = data[runs[0]]
    gpu = first.get("gpu")
    summary = {"gpu": gpu, "source": ["%s/matmul.json" % r for r in runs],
               "note": "median and each run's ratio (torch_ms / tileops_ms) per row and dtype, %d whole "
                       "bench_matmul runs back to back on one GPU" % len(runs), "rows": rows}
    merged = {k: v for k, v in first.items() if k != "records"}
    merged["note"] = ("each record: the run (%s/%s: whole bench_matmul runs back to back on one %s) whose "
                      "ratio is that row's median" % (label, ", ".join(runs), gpu))
    merged["records"] = records
    with open(os.path.join(a.dir, "median3.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with open(os.path.join(a.dir, "matmul_median3.json"), "w") as f:
        json.dump(merged, f, indent=1)
    print("wrote %s and %s (%d rows)" % (os.path.join(a.dir, "median3.json"),
                                          os.path.join(a.dir, "matmul_median3.json"), len(records)))


if __name__ == "__main__":
    main()
