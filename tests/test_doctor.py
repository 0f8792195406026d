"""`tileops doctor`'s diagnoses on made-up machines (CPU only), and one real run of the command.

doctor.py is loaded by file path so these tests run even where tileops._C is not built.
"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_DIR = os.path.join(ROOT, "python")

_spec = importlib.util.spec_from_file_location("tileops_doctor_under_test", os.path.join(PYTHON_DIR, "tileops", "doctor.py"))
doctor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doctor)


def healthy(**changes):
    """An H100 machine where everything fits; keyword arguments override single facts."""
    info = {
        "python": "3.9.19",
        "platform": "Linux-x86_64",
        "torch": "2.7.1",
        "torch_cuda": "12.6",
        "cudnn": 91002,
        "cuda_available": True,
        "device_count": 1,
        "cuda_init_warnings": [],
        "cuda_visible_devices": None,
        "tileops": {
            "version": "0.1.0",
            "git_sha": "abc",
            "torch_version": "2.7.1",
            "with_cuda": True,
            "cuda_version": "12.6",
            "arch_list": "8.0;8.6;8.9;9.0;9.0a",
        },
        "tileops_error": None,
        "gpus": [{"name": "NVIDIA H100 80GB HBM3", "capability": (9, 0), "sm_count": 132}],
        "driver_cuda": "12.8",
        "driver_version": "570.124.06",
        "nvidia_smi": "/usr/bin/nvidia-smi",
        "cuda_home": "/opt/conda/envs/tileops",
        "nvcc": "12.6",
        "nvcc_path": "/opt/conda/envs/tileops/bin/nvcc",
    }
    info.update(changes)
    return info


def build(**changes):
    b = dict(healthy()["tileops"])
    b.update(changes)
    return b


def fixes_for(info, text):
    """Fixes of the problems whose description contains `text`; fails if there is none."""
    problems = doctor.diagnose(info)
    found = [fix for problem, fix in problems if text in problem]
    assert found, f"no problem mentioning {text!r} in {problems!r}"
    return " ".join(found)


def test_healthy_machine_has_no_problems():
    assert doctor.diagnose(healthy()) == []


def test_torch_import_failure():
    assert "Install torch" in fixes_for({"torch_error": "ImportError: libcudart.so.12"}, "torch cannot be imported")


def test_extension_import_failure():
    info = healthy(tileops=None, tileops_error="ImportError: undefined symbol: _ZN3c10")
    assert "pip install --no-build-isolation" in fixes_for(info, "tileops._C cannot be imported")


def test_built_against_other_torch():
    info = healthy(tileops=build(torch_version="2.8.0"))
    assert "pip install --no-build-isolation" in fixes_for(info, "built against torch 2.8.0")


def test_cpu_only_torch_on_gpu_machine():
    info = healthy(torch="2.7.1+cpu", torch_cuda=None, cuda_available=False, device_count=0, gpus=[])
    info["tileops"] = build(torch_version="2.7.1+cpu", with_cuda=False, cuda_version="", arch_list="")
    assert "CUDA build of torch" in fixes_for(info, "CPU-only build")


def test_cpu_only_torch_without_nvidia_is_fine():
    info = healthy(torch="2.7.1+cpu", torch_cuda=None, cuda_available=False, device_count=0, gpus=[], nvidia_smi=None)
    info["tileops"] = build(torch_version="2.7.1+cpu", with_cuda=False, cuda_version="", arch_list="")
    assert doctor.diagnose(info) == []


def test_no_gpu_visible():
    info = healthy(cuda_available=False, device_count=0, gpus=[], nvidia_smi=None, driver_cuda=None)
    assert "nvidia-smi" in fixes_for(info, "sees no GPU")


def test_no_gpu_visible_because_of_cuda_visible_devices():
    info = healthy(cuda_available=False, device_count=0, gpus=[], cuda_visible_devices="")
    assert "CUDA_VISIBLE_DEVICES" in fixes_for(info, "sees no GPU")


def test_driver_too_old_for_torch_cuda():
    info = healthy(driver_cuda="11.4", cuda_available=False, device_count=0, gpus=[])
    assert "Update the NVIDIA driver" in fixes_for(info, "driver supports CUDA up to 11.4")


def test_newer_minor_driver_is_fine():
    # CUDA minor-version compatibility: a 12.2 driver runs torch built with 12.6.
    assert doctor.diagnose(healthy(driver_cuda="12.2")) == []


def test_extension_without_cuda_kernels_on_gpu_machine():
    info = healthy(tileops=build(with_cuda=False, cuda_version="", arch_list=""))
    assert "FORCE_CUDA=1" in fixes_for(info, "without its CUDA kernels")


def test_extension_cuda_major_differs_from_torch():
    info = healthy(tileops=build(cuda_version="11.8"))
    assert "CUDA 12 toolkit" in fixes_for(info, "compiled with CUDA 11.8")


def test_gpu_not_in_arch_list():
    info = healthy(gpus=[{"name": "NVIDIA RTX PRO 6000", "capability": (12, 0), "sm_count": 188}])
    assert 'TORCH_CUDA_ARCH_LIST="12.0"' in fixes_for(info, "not among the architectures")


def test_ptx_covers_newer_gpus():
    info = healthy(tileops=build(arch_list="8.0;9.0+PTX"), gpus=[{"name": "B200", "capability": (10, 0)}])
    problems = doctor.diagnose(info)
    assert problems and all(p.startswith(doctor.NOTE) for p, _ in problems)  # advice, not a fault
    assert "compute_90 PTX" in problems[0][0] and "sm_90a" in problems[0][0]


DEFAULT = "8.0;8.6;8.9;9.0+PTX;9.0a"  # setup.py's DEFAULT_ARCHS (tests/test_build.py checks its flags)


@pytest.mark.parametrize(
    "arch_list, capability, path",
    [
        (DEFAULT, (9, 0), ("native", "sm_90a")),  # H100/H200: the Hopper kernels
        (DEFAULT, (8, 0), ("native", "sm_80")),
        (DEFAULT, (8, 7), ("native", "sm_86")),  # Orin: the closest lower cubin of its major
        (DEFAULT, (8, 9), ("native", "sm_89")),
        (DEFAULT, (10, 0), ("ptx", "compute_90")),  # B200
        (DEFAULT, (12, 0), ("ptx", "compute_90")),  # RTX 50xx, RTX PRO 6000
        ("9.0a", (10, 0), ("none", None)),  # CI's list: no PTX
        ("8.0;9.0a", (12, 0), ("none", None)),
        ("8.0+PTX;9.0a", (12, 0), ("ptx", "compute_80")),
        ("9.0+PTX", (8, 9), ("none", None)),
    ],
)
def test_kernel_path(arch_list, capability, path):
    assert doctor.kernel_path(arch_list, capability) == path


def test_report_says_which_path_a_gpu_gets():
    b = build(arch_list=DEFAULT)
    assert doctor.describe_kernel_path(b, (9, 0), portable=False).startswith("native cubin (sm_90a)")
    assert "TILEOPS_PORTABLE=1" in doctor.describe_kernel_path(b, (9, 0), portable=True)
    newer = doctor.describe_kernel_path(b, (12, 0))
    assert newer.startswith("PTX JIT (compute_90 -> sm_120") and "portable kernels only" in newer
    assert doctor.describe_kernel_path(build(arch_list="9.0a"), (10, 0)).startswith("none")
    assert doctor.describe_kernel_path(build(with_cuda=False), (10, 0)).startswith("none")
    info = healthy(tileops=b, gpus=[{"name": "NVIDIA B200", "capability": (10, 0), "sm_count": 148}])
    report = doctor._report(info, doctor.diagnose(info))
    assert "tileops code: PTX JIT (compute_90 -> sm_100" in report


def test_torch_mismatch():
    # another minor release: refused before _C loads (its C++ symbols differ)
    found = doctor.torch_mismatch("2.11.0+cu130", "13.0", "2.10.0+cu128", "12.8", "0.1.0+torch2.11.cu130")
    assert "tileops 0.1.0+torch2.11.cu130 was built against torch 2.11.0+cu130" in found[0]
    assert "+torch2.10.cu128, or +torch2.10.cpu" in found[1] and "pip install --no-build-isolation" in found[1]
    assert "(version +torch2.10.cpu)" in doctor.torch_mismatch("2.11.0", None, "2.10.0+cpu", None)[1]
    assert doctor.torch_mismatch("2.11.0+cu130", "13.0", "2.11.1+cu130", "13.0") is None  # a patch release
    assert doctor.torch_mismatch("2.11.0", None, "2.11.0+cpu", None) is None  # CPU kernels: any 2.11
    assert "CPU-only build" in doctor.torch_mismatch("2.11.0", "13.0", "2.11.0+cpu", None)[0]
    assert "compiled with CUDA 13.0" in doctor.torch_mismatch("2.11.0", "13.0", "2.11.0+cu126", "12.6")[0]


def test_mismatch_told_when_extension_does_not_load():
    built_for = {"version": "0.1.0+torch2.11.cpu", "torch_version": "2.11.0", "cuda_version": None, "arch_list": None}
    info = healthy(tileops=None, tileops_error="ImportError: tileops: ...", tileops_built_for=built_for)
    assert "+torch2.7.cu126" in fixes_for(info, "was built against torch 2.11.0 but torch 2.7.1 is running")
    assert "tileops built for" in doctor._report(info, doctor.diagnose(info))


def test_patch_release_is_a_note():
    problems = doctor.diagnose(healthy(tileops=build(torch_version="2.7.0")))
    assert problems and all(p.startswith(doctor.NOTE) for p, _ in problems)


def test_read_build_config(tmp_path):
    path = tmp_path / "_build_config.py"
    path.write_text("VERSION = '0.1.0+torch2.11.cpu'\nTORCH_VERSION = '2.11.0'\nCUDA_VERSION = None\n")
    assert doctor.read_build_config(str(path)) == {"version": "0.1.0+torch2.11.cpu", "torch_version": "2.11.0",
                                                   "cuda_version": None}
    assert doctor.read_build_config(str(tmp_path / "missing.py")) is None


def test_import_refuses_another_torch(monkeypatch):
    try:
        import tileops
    except Exception as e:
        pytest.skip(f"tileops does not import here ({e})")
    import torch

    other = {"version": "0.1.0+torch1.13.cpu", "torch_version": "1.13.1", "cuda_version": None}
    monkeypatch.setattr(tileops._doctor, "read_build_config", lambda: other)
    with pytest.raises(ImportError, match="built against torch 1.13.1 but torch " + torch.__version__.replace("+", r"\+")):
        tileops._check_torch()
    monkeypatch.setattr(tileops._doctor, "read_build_config", lambda: dict(other, torch_version=torch.__version__))
    tileops._check_torch()  # the torch it was built for: no complaint


@pytest.mark.parametrize(
    "arch_list, capability, covered",
    [
        ("8.0;8.6;8.9;9.0;9.0a", (9, 0), True),
        ("9.0a", (9, 0), True),
        ("8.0", (8, 6), True),  # SASS runs on later minors of its major
        ("8.6", (8, 0), False),
        ("8.0", (9, 0), False),  # ... but not on the next major
        ("9.0a", (9, 1), False),  # arch-specific code runs on its own capability only
        ("8.0+PTX", (9, 0), True),  # PTX is JIT-compiled for any later GPU
        ("9.0+PTX", (8, 9), False),  # ... never an earlier one
        ("", (8, 0), False),
        ("8.0 9.0", (9, 0), True),
    ],
)
def test_arch_covers(arch_list, capability, covered):
    assert doctor.arch_covers(arch_list, capability) is covered


def test_gpu_older_than_sm80():
    info = healthy(gpus=[{"name": "Tesla T4", "capability": (7, 5), "sm_count": 40}])
    assert "Ampere" in fixes_for(info, "older than sm_80")
    # Rebuilding for 7.5 would not help, so the arch-list advice is not given as well.
    assert not [p for p, _ in doctor.diagnose(info) if "architectures" in p]


def test_missing_toolkit_is_only_a_note():
    info = healthy(cuda_home=None, nvcc=None, nvcc_path=None)
    problems = doctor.diagnose(info)
    assert "CUDA_HOME" in fixes_for(info, "no CUDA toolkit found")
    assert all(p.startswith(doctor.NOTE) for p, _ in problems)


def test_nvcc_major_differs_from_torch():
    info = healthy(nvcc="13.0")
    assert "cuda-nvcc=12.6" in fixes_for(info, "nvcc is CUDA 13.0")


def test_command_prints_json():
    try:
        import torch

        import tileops
    except Exception as e:  # the command needs the package to import for `python -m tileops`
        pytest.skip(f"tileops does not import here ({e})")
    env = dict(os.environ)
    # the subprocess imports the same tileops this process did (source tree or site-packages)
    here = os.path.dirname(os.path.dirname(os.path.abspath(tileops.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [here, env.get("PYTHONPATH")] if p)
    out = subprocess.run(
        [sys.executable, "-m", "tileops", "doctor", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode in (0, 1), out.stderr
    report = json.loads(out.stdout)
    assert report["torch"] == torch.__version__
    assert isinstance(report["problems"], list)
