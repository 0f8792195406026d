"""Markdown tables of a bench_matmul JSON, as the README and the issue notes quote them.

    python benchmarks/tables.py benchmarks/results/h200/matmul.json

Prints: the matmul rows (ratio = torch ms / tileops ms per dtype, GPU time; in braces the per-call
ratio where the two differ by more than 10%; bf16 TFLOP/s), the fused linear rows, and the ladder
(TFLOP/s, % of the cuBLAS measured in the same row, % of the dtype's dense peak).
"""
import json
import sys

DTYPES = ["bfloat16", "float16", "tf32", "float32"]
SHORT = {"bfloat16": "bf16", "float16": "fp16", "tf32": "tf32", "float32": "fp32", "float64": "fp64"}


def cell(r):
    if r is None or not r.get("ratio"):
        return "–"
    text = "%.2f×" % r["ratio"]
    call = r.get("call_ratio")
    if call and abs(call / r["ratio"] - 1) > 0.10:
        text += " {%.2f×}" % call
    return text


def matmul_table(recs):
    rows = {}
    for r in recs:
        if r["op"] == "matmul" and r.get("algo", "auto") == "auto":
            rows.setdefault(r["label"], {})[r["dtype"]] = r
    out = ["| shape (M×N×K) | " + " | ".join(SHORT[d] for d in DTYPES) + " | bf16 TFLOP/s |",
           "| --- |" + " ---: |" * (len(DTYPES) + 1)]
    for label, by in rows.items():
        bf = by.get("bfloat16")
        out.append("| %s | %s | %s |" % (label, " | ".join(cell(by.get(d)) for d in DTYPES),
                                         "%.0f" % bf["tileops_tflops"] if bf else "–"))
    return out


def fused_table(recs):
    sel = [r for r in recs if r["op"] != "matmul" and r["op"] != "ladder"]
    out = ["| op | shape | dtype | tileops ms | torch ms | ratio |", "| --- | --- | --- | ---: | ---: | ---: |"]
    for r in sel:
        out.append("| %s | %s (%d×%d×%d) | %s | %.4f | %.4f | %s |" % (
            r["op"], r["label"], r["M"], r["N"], r["K"], SHORT.get(r["dtype"], r["dtype"]), r["tileops_ms"],
            r["torch_ms"], cell(r)))
    return out


def ladder_table(recs):
    sel = [r for r in recs if r["op"] == "ladder"]
    out = ["| rung (`algo=`) | dtype | TFLOP/s | % of cuBLAS | % of peak |", "| --- | --- | ---: | ---: | ---: |"]
    for r in sel:
        peak = r.get("pct_of_peak")
        out.append("| %s | %s | %.1f | %.0f%% | %s |" % (
            r["algo"], SHORT.get(r["dtype"], r["dtype"]), r["tileops_tflops"], r["pct_of_cublas"],
            "–" if peak is None else "%.0f%%" % peak))
    return out


def main(path):
    with open(path) as f:
        data = json.load(f)
    recs = data["records"]
    print("%s: %s, torch %s, %s\n" % (path, data.get("gpu"), data.get("torch"), data.get("date")))
    for table in (matmul_table(recs), fused_table(recs), ladder_table(recs)):
        print("\n".join(table) + "\n")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
