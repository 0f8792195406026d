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


def test_bench_conv_family_cpu(tmp_path):
    """Every row of bench_conv_family (tiny sizes) runs on both sides and agrees with torch."""
    out = tmp_path / "family.json"
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_conv_family.py"), "--device", "cpu",
                    "--budget", "1", "--out", str(out)], check=True, capture_output=True, text=True)
    records = json.loads(out.read_text())["records"]
    assert {r["op"] for r in records} == {"conv1d", "conv3d", "conv_transpose2d", "conv_transpose3d"}
    assert all(r["error"] is None and r["ratio"] > 0 for r in records), [r["error"] for r in records if r["error"]]
    assert all(r["rel_err"] < 2e-2 for r in records if r["pass"] == "fwd"), [
        (r["label"], r["dtype"], r["rel_err"]) for r in records if r["pass"] == "fwd"]


def test_bench_models_profile_cpu(tmp_path):
    """--profile-only: a training step's profiler table for each model, tileops and torch alike."""
    out = tmp_path / "models.json"
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_models.py"), "--tiny", "--device", "cpu",
                    "--profile-only", "--out", str(out)], check=True, capture_output=True, text=True)
    text = (tmp_path / "models_profile.txt").read_text()
    heads = [line for line in text.splitlines() if line.startswith("=== ")]
    names = ["vit_tiny", "resnet_tiny", "resnext_tiny", "r3d_tiny", "whisper_tiny", "llama_tiny"]
    assert [h.split(":")[0] + " " + h.split()[3] for h in heads] == [
        "=== %s %s" % (n, impl) for n in names for impl in ("tileops", "torch")]
    sections = text.split("=== ")[1:]
    for i in range(0, len(sections), 2):  # tileops' step runs tileops ops, torch's does not
        assert "tileops::" in sections[i] and "tileops::" not in sections[i + 1], heads[i]
    assert not out.exists()  # no timed rows, no records file


def test_median_runs_keeps_each_row(tmp_path):
    """scripts/device/median_runs.py: one merged record per (op, label, dtype, algo), from the run whose ratio
    is that row's median; the ladder's rungs share a label and dtype and must all survive."""
    ratios = {"m1": (1.0, 0.10, 0.50), "m2": (1.2, 0.30, 0.40), "m3": (0.9, 0.20, 0.60)}
    for run, (r_mm, r_naive, r_tiled) in ratios.items():
        recs = [{"op": "matmul", "label": "square 1024", "dtype": "float32", "algo": "auto", "ratio": r_mm},
                {"op": "ladder", "label": "ladder 4096", "dtype": "float32", "algo": "naive", "ratio": r_naive},
                {"op": "ladder", "label": "ladder 4096", "dtype": "float32", "algo": "tiled", "ratio": r_tiled}]
        (tmp_path / run).mkdir()
        (tmp_path / run / "matmul.json").write_text(json.dumps({"gpu": "G", "records": recs}))
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "device", "median_runs.py"), str(tmp_path)],
                   check=True, capture_output=True, text=True)
    merged = json.loads((tmp_path / "matmul_median3.json").read_text())
    got = {(r["op"], r["algo"]): (r["ratio"], r["run"]) for r in merged["records"]}
    assert got == {("matmul", "auto"): (1.0, "m1"), ("ladder", "naive"): (0.20, "m3"),
                   ("ladder", "tiled"): (0.50, "m1")}
    rows = json.loads((tmp_path / "median3.json").read_text())["rows"]
    assert rows["ladder ladder 4096 [naive]"]["float32"] == {"median": 0.2, "runs": [0.1, 0.3, 0.2]}


def test_results_hold_baselines_only():
    """benchmarks/results/<gpu>/ keeps the current baseline only: every file there is named in its manifest.json
    with the commit measured and the command that made it (older runs live in git history), and results/ stays
    small."""
    results = os.path.join(ROOT, "benchmarks", "results")
    gpus = [g for g in sorted(os.listdir(results)) if os.path.isdir(os.path.join(results, g))]
    assert gpus
    for gpu in gpus:
        folder = os.path.join(results, gpu)
        with open(os.path.join(folder, "manifest.json")) as f:
            files = json.load(f)["files"]
        assert set(os.listdir(folder)) - {"README.md", "manifest.json"} == set(files), gpu
        for name, entry in files.items():
            assert entry.get("commit") and entry.get("command"), "%s/%s: commit and command" % (gpu, name)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(results) for n in names)
    assert size < 5 * 2**20, "benchmarks/results/ holds %.1f MB" % (size / 2**20)
