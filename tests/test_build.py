"""setup.py's build decisions: arch flags, CUDA/CPU choice and the errors that stop a build."""
import importlib.util
import os

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture()
def setup_py(monkeypatch):
    spec = importlib.util.spec_from_file_location("tileops_setup", os.path.join(ROOT, "setup.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # runs no build: setup() is guarded by __main__
    for var in ("FORCE_CUDA", "TILEOPS_CPU_ONLY", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    return mod


def test_gencode_flags(setup_py):
    flags, names = setup_py.gencode_flags("8.0;9.0a 9.0+PTX", (13, 0))
    assert flags == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    ]
    assert names == "8.0;9.0a;9.0+PTX"
    flags, names = setup_py.gencode_flags("9.0;9.0a", (13, 0))  # one Hopper cubin: sm_90a covers 9.0
    assert names == "9.0a" and flags == ["-gencode=arch=compute_90a,code=sm_90a"]
    flags, _ = setup_py.gencode_flags(setup_py.DEFAULT_ARCHS, (11, 8))  # sm_90a needs nvcc >= 12
    assert not any("90a" in f for f in flags) and len(flags) == 4
    with pytest.raises(SystemExit, match="cannot read architecture"):
        setup_py.gencode_flags("sm_90", (13, 0))


def test_cpu_only_switches(setup_py, monkeypatch):
    monkeypatch.setenv("TILEOPS_CPU_ONLY", "1")
    assert setup_py.want_cuda()[0] is False
    monkeypatch.setenv("FORCE_CUDA", "1")
    with pytest.raises(SystemExit, match="contradict"):
        setup_py.want_cuda()


def test_cuda_home_without_nvcc_stops(setup_py, monkeypatch, tmp_path):
    if torch.version.cuda is None:
        pytest.skip("a CPU-only torch never looks for CUDA")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    with pytest.raises(SystemExit, match="has no bin/nvcc"):
        setup_py.want_cuda()


def test_nvcc_major_mismatch_stops(setup_py, monkeypatch, tmp_path):
    if torch.version.cuda is None:
        pytest.skip("a CPU-only torch never looks for CUDA")
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 99.1, V99.1.0'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.setattr(setup_py.cpp_extension, "CUDA_HOME", str(tmp_path))
    with pytest.raises(SystemExit, match="CUDA major versions must match"):
        setup_py.want_cuda()


def test_force_cuda_without_toolkit_stops(setup_py, monkeypatch):
    if torch.version.cuda is None:
        pytest.skip("covered by the CPU-only torch message")
    monkeypatch.setenv("FORCE_CUDA", "1")
    monkeypatch.setattr(setup_py.cpp_extension, "CUDA_HOME", None)
    with pytest.raises(SystemExit, match="no CUDA toolkit found"):
        setup_py.want_cuda()
