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


def test_bench_models_profile_cpu(tmp_path):
    """--profile-only: a training step's profiler table for each model, tileops and torch alike."""
    out = tmp_path / "models.json"
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_models.py"), "--tiny", "--device", "cpu",
                    "--profile-only", "--out", str(out)], check=True, capture_output=True, text=True)
    text = (tmp_path / "models_profile.txt").read_text()
    heads = [line for line in text.splitlines() if line.startswith("=== ")]
    assert [h.split(":")[0] + " " + h.split()[3] for h in heads] == [
        "=== vit_tiny tileops", "=== vit_tiny torch", "=== resnet_tiny tileops", "=== resnet_tiny torch"]
    assert "tileops::" in text.split(heads[1])[0]  # tileops' step runs tileops ops
    assert "tileops::" not in text.split(heads[1])[1].split(heads[2])[0]  # torch's does not
    assert not out.exists()  # no timed rows, no records file
