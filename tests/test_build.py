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
    assert flags == [  # 9.0+PTX beside 9.0a: its PTX, not a second Hopper cubin
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_90,code=compute_90",
    ]
    assert names == "8.0;9.0a;9.0+PTX"
    flags, names = setup_py.gencode_flags("9.0;9.0a", (13, 0))  # one Hopper cubin: sm_90a covers 9.0
    assert names == "9.0a" and flags == ["-gencode=arch=compute_90a,code=sm_90a"]
    flags, _ = setup_py.gencode_flags(setup_py.DEFAULT_ARCHS, (11, 8))  # sm_90a needs nvcc >= 12
    assert not any("90a" in f for f in flags) and len(flags) == 5  # 80, 86, 89, 90 cubins + compute_90 PTX
    with pytest.raises(SystemExit, match="cannot read architecture"):
        setup_py.gencode_flags("sm_90", (13, 0))


def test_default_arch_list_embeds_portable_ptx(setup_py):
    # Cubins for Ampere, Ada and Hopper (sm_90a's covers every 9.0 GPU, so no sm_90 one), and PTX of
    # the newest portable target, compute_90, which a newer GPU (sm_100, sm_120) JIT-compiles.
    flags, names = setup_py.gencode_flags(setup_py.DEFAULT_ARCHS, (13, 0))
    assert flags == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_86,code=sm_86",
        "-gencode=arch=compute_89,code=sm_89",
        "-gencode=arch=compute_90,code=compute_90",
        "-gencode=arch=compute_90a,code=sm_90a",
    ]
    assert names == "8.0;8.6;8.9;9.0+PTX;9.0a"
    assert not any("code=compute_90a" in f for f in flags)  # no PTX of arch-specific code: it runs nowhere else
    assert "compute_90" in setup_py.ptx_note(names)


@pytest.mark.parametrize(
    "arch_list, flags, names",
    [
        ("9.0a", ["-gencode=arch=compute_90a,code=sm_90a"], "9.0a"),  # CI's list: no PTX
        ("8.6", ["-gencode=arch=compute_86,code=sm_86"], "8.6"),
        ("8.0+PTX", ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_80,code=compute_80"], "8.0+PTX"),
        ("9.0+PTX", ["-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_90,code=compute_90"], "9.0+PTX"),
        ("8.9,9.0a;9.0+PTX", ["-gencode=arch=compute_89,code=sm_89", "-gencode=arch=compute_90a,code=sm_90a",
                              "-gencode=arch=compute_90,code=compute_90"], "8.9;9.0a;9.0+PTX"),
        ("10.0 12.0+PTX", ["-gencode=arch=compute_100,code=sm_100", "-gencode=arch=compute_120,code=sm_120",
                           "-gencode=arch=compute_120,code=compute_120"], "10.0;12.0+PTX"),
    ],
)
def test_gencode_flags_for_arch_lists(setup_py, arch_list, flags, names):
    assert setup_py.gencode_flags(arch_list, (13, 0)) == (flags, names)


def test_ptx_of_arch_specific_target_stops(setup_py):
    with pytest.raises(SystemExit, match="PTX of an arch-specific target"):
        setup_py.gencode_flags("9.0a+PTX", (13, 0))


def test_no_ptx_is_said(setup_py):
    assert "no PTX embedded" in setup_py.ptx_note("8.0;9.0a")
    assert "compute_120" in setup_py.ptx_note("8.0+PTX;12.0+PTX")


def test_wheel_version_names_torch_and_cuda(setup_py):
    assert setup_py.local_version(True, "2.11.0+cu130", "13.0") == setup_py.VERSION + "+torch2.11.cu130"
    assert setup_py.local_version(True, "2.7.1", "12.6") == setup_py.VERSION + "+torch2.7.cu126"
    assert setup_py.local_version(False, "2.11.0+cu130", "13.0") == setup_py.VERSION + "+torch2.11.cpu"
    assert setup_py.local_version(False, "2.11.0+cpu", None) == setup_py.VERSION + "+torch2.11.cpu"
    assert setup_py.torch_requirement("2.11.0+cu130") == "torch>=2.11,<2.12"
    assert setup_py.torch_requirement("2.9.1") == "torch>=2.9,<2.10"


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


def test_ninja_log_run_takes_this_build(setup_py):
    old = "# ninja log v7\n0\t5000\t1\t/b/temp/csrc/a.o\th\n0\t60000\t1\t/b/temp/csrc/b.o\th\n"
    new = "0\t30000\t2\t/b/temp/csrc/c.o\th\n100\t42000\t2\t/b/temp/csrc/a.o\th\n"
    run = setup_py.ninja_log_run(old + new, len(old))  # the lines this build appended
    assert sorted(run) == [(30.0, "/b/temp/csrc/c.o"), (41.9, "/b/temp/csrc/a.o")]
    # ninja rewrote the log (smaller than before): the tail whose end times never decrease
    assert sorted(setup_py.ninja_log_run(old + new, 10 ** 6)) == sorted(run)
    lines = setup_py.build_report(run, 50.0, 3.0, "2", {"cicc compute_90a": 20.0, "host": 9.0}, top=1)
    assert lines[0].startswith("build time: 50 s wall (47 s compiling, 3 s linking); 2 translation units, 72 s")
    assert lines[1].split() == ["41.9", "s", "csrc/a.o"] and "cicc compute_90a 20 s" in lines[2]
    assert setup_py.build_report([], 1.0, 0.0, "2")[0].endswith("nothing compiled (up to date)")


def test_nvcc_times_by_arch(setup_py):
    head = "source file name , phase name , phase input files , phase output file , arch , tool, metric , unit\n"
    rows = ["a.cu , cicc , a.ii , a.ptx , compute_90a , nvcc , 1500.0 , ms",
            "a.cu , ptxas , a.ptx , a.cubin , sm_90a , nvcc , 2500.0 , ms",
            "a.cu , cudafe++ , a.ii , a.cpp , compute_90a , nvcc , 1000.0 , ms",
            "b.cu , cicc , b.ii , b.ptx , compute_90a , nvcc , 500.0 , ms"]
    assert setup_py.nvcc_times_by_arch(head + "\n".join(rows)) == {
        "cicc compute_90a": 2.0, "ptxas sm_90a": 2.5, "host": 1.0}


def test_build_order_puts_kernel_units_first(setup_py):
    srcs = sorted(["csrc/tileops.cpp", "csrc/cuda/conv/lowering.cu", "csrc/cuda/runtime/streams.cpp",
                   "csrc/cuda/sm90/matmul_tf32.cu", "csrc/ops/matmul.cpp", "csrc/cuda/splitk/splitk.cu"])
    assert setup_py.build_order(srcs) == ["csrc/cuda/sm90/matmul_tf32.cu", "csrc/cuda/conv/lowering.cu",
                                          "csrc/cuda/splitk/splitk.cu", "csrc/cuda/runtime/streams.cpp",
                                          "csrc/ops/matmul.cpp", "csrc/tileops.cpp"]


def test_ccache_off(setup_py, monkeypatch):
    monkeypatch.setenv("TILEOPS_CCACHE", "0")
    monkeypatch.delenv("PYTORCH_NVCC", raising=False)
    assert setup_py.use_ccache("/usr/local/cuda", True).startswith("ccache: off")
    assert "PYTORCH_NVCC" not in os.environ


def test_ccache_on_path(setup_py, monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "ccache"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexec \"$@\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent) + os.pathsep + os.environ["PATH"])
    for var in ("TILEOPS_CCACHE", "PYTORCH_NVCC", "CXX"):
        monkeypatch.delenv(var, raising=False)
    line = setup_py.use_ccache("/usr/local/cuda", True, link_dir=str(tmp_path / "links"))
    assert line.startswith("ccache: nvcc, c++")
    assert os.environ["PYTORCH_NVCC"] == "%s /usr/local/cuda/bin/nvcc" % fake
    # c++ resolves to the masquerade link (ccache), first on PATH; torch's checks run it as c++
    assert os.path.realpath(str(tmp_path / "links" / "c++")) == os.path.realpath(str(fake))
    assert os.environ["PATH"].split(os.pathsep)[0] == str(tmp_path / "links")


def test_each_sm90_persistent_unit_has_its_file():
    # launch.cuh declares each (dtype, cluster) extern; a unit file must instantiate it, or the
    # kernels would be missing at link time
    import re

    text = open(os.path.join(ROOT, "csrc", "cuda", "sm90", "launch.cuh")).read()
    body = text.split("#define TILEOPS_SM90_PERSISTENT_UNITS(X)", 1)[1].split("\n#define", 1)[0]
    units = re.findall(r"X\(([\w:]+), (\d)\)", body)
    names = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "tf32"}
    assert units == [("float", "1"), ("float", "2")]
    for dtype, cl in units:
        path = os.path.join(ROOT, "csrc", "cuda", "sm90", "matmul_%s_c%s.cu" % (names[dtype], cl))
        assert "TILEOPS_SM90_PERSISTENT_UNIT(%s, %s)" % (dtype, cl) in open(path).read(), path


# The units that instantiate kernels and only launch them include launch_util.h, not ATen's tensor
# headers, which cost each nvcc unit ~8.5 s of its 2-core build (docs/performance.md#build-and-device-logistics).
LIGHT_UNITS = ["cuda/sm90/matmul_bf16.cu", "cuda/sm90/matmul_fp16.cu", "cuda/sm90/matmul_tf32.cu",
               "cuda/sm90/matmul_tf32_c1.cu", "cuda/sm90/matmul_tf32_c2.cu", "cuda/splitk/splitk.cu",
               "cuda/routing/conv_fwd.cu", "cuda/routing/conv_dgrad.cu", "cuda/routing/conv_wgrad.cu",
               "cuda/conv/conv_sm90.cu", "cuda/conv/conv_smallc_fwd.cu", "cuda/conv/conv_smallc_f32.cu",
               "cuda/conv/conv_smallc_wgrad.cu", "cuda/skinny/matmul_skinny_tc.cu", "cuda/ladder/matmul_ladder.cu",
               "cuda/routing/matmul.cu"]


def _includes(rel, seen):
    """Every header a csrc file reaches through its quoted includes, and the <...> ones they name."""
    import re

    path = os.path.join(ROOT, "csrc", rel)
    angled = set()
    with open(path) as f:
        for line in f:
            m = re.match(r'\s*#include\s+([<"])([^>"]+)[>"]', line)
            if not m:
                continue
            if m.group(1) == "<":
                angled.add(m.group(2))
            elif m.group(2) not in seen:
                seen.add(m.group(2))
                angled |= _includes(m.group(2), seen)
    return angled


@pytest.mark.parametrize("unit", LIGHT_UNITS)
def test_kernel_units_include_no_aten(unit):
    aten = sorted(h for h in _includes(unit, set()) if h.startswith(("ATen/", "torch/")))
    assert not aten, "%s reaches %s" % (unit, aten)
