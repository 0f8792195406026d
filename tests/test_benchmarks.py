"""The benchmark scripts that can run without a GPU run here, so they do not rot between GPU runs."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_overhead_cpu(tmp_path):
    out = tmp_path / "overhead.json"
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_overhead.py"), "--device", "cpu",
                    "--quick", "--out", str(out)], check=True, capture_output=True, text=True)
    data = json.loads(out.read_text())
    rows = {(r["op"], r["pass"]) for r in data["records"]}
    assert len(rows) == 9 and {p for _, p in rows} == {"no_grad", "fwd", "fwd_bwd"}
    assert all(r["tileops_us"] > 0 and r["torch_us"] > 0 for r in data["records"])
