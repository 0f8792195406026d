"""`python -m tileops doctor`: do this machine's GPU, driver, torch, CUDA and tileops build fit together?

collect() gathers facts into a plain dict, diagnose() turns such a dict into (problem, what to do)
pairs, main() prints both. diagnose() is a pure function so it can be tested on made-up machines.

This module imports nothing from the tileops package: it must still run, and say why, when the
compiled module tileops._C does not load. It can also be run by path: `python .../tileops/doctor.py`.
"""
import argparse
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import warnings

# Problems starting with this are advice, not faults: they do not make main() return 1.
NOTE = "note: "


def _run(cmd, timeout):
    """stdout of cmd, or None when it cannot run (missing, hung, failed)."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _cuda_int_to_str(v):
    """CUDA's 1000*major + 10*minor encoding (13000) as "13.0"."""
    return "%d.%d" % (v // 1000, (v % 1000) // 10) if v else None


def _major(version):
    """Leading integer of a version string like "12.6" or "2.7.1+cu126"; None if there is none."""
    m = re.match(r"\s*(\d+)", version or "")
    return int(m.group(1)) if m else None


def _driver_cuda_from_libcuda():
    """Newest CUDA version the installed driver supports, asked of libcuda itself (needs no GPU, no cuInit)."""
    import ctypes

    for name in ("libcuda.so.1", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
            return v.value
    return None


def _gpu_from_torch(torch, i):
    p = torch.cuda.get_device_properties(i)
    return {
        "name": p.name,
        "capability": (p.major, p.minor),
        "sm_count": p.multi_processor_count,
        "shared_mem_per_sm": getattr(p, "shared_memory_per_multiprocessor", None),
        "shared_mem_per_block_optin": getattr(p, "shared_memory_per_block_optin", None),
        "l2_bytes": getattr(p, "L2_cache_size", None),
        "total_mem": p.total_memory,
    }


def collect():
    """Facts about this machine, torch and the tileops build, as a JSON-friendly dict."""
    info = {"python": sys.version.split()[0], "platform": platform.platform()}
    try:
        import torch
    except Exception as e:  # doctor must still report, even on a broken torch
        info["torch_error"] = "%s: %s" % (type(e).__name__, e)
        return info
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    info["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    with warnings.catch_warnings(record=True) as caught:  # torch says here why CUDA did not initialise
        warnings.simplefilter("always")
        info["cuda_available"] = torch.cuda.is_available()
        info["device_count"] = torch.cuda.device_count() if info["cuda_available"] else 0
    info["cuda_init_warnings"] = [str(w.message) for w in caught]
    info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")

    try:
        _C = importlib.import_module("tileops._C")
        info["tileops"] = dict(_C.build_info())
        info["tileops_error"] = None
    except Exception as e:  # the import error is the finding; tileops/__init__ wraps the root cause
        _C, cause = None, e.__cause__ or e
        info["tileops"] = None
        info["tileops_error"] = "%s: %s" % (type(cause).__name__, cause)

    # Prefer tileops' own query (what the CUDA runtime it was built with sees), else torch's.
    query = getattr(_C, "device_query", None)
    info["gpus"], info["driver_cuda"], info["cuda_runtime"] = [], None, None
    for i in range(info["device_count"]):
        try:
            if query is not None:
                gpu = dict(query(i))
                info["driver_cuda"] = _cuda_int_to_str(gpu.pop("driver_version", 0))
                info["cuda_runtime"] = _cuda_int_to_str(gpu.pop("runtime_version", 0))
                gpu["capability"] = tuple(gpu["capability"])
            else:
                gpu = _gpu_from_torch(torch, i)
        except Exception as e:
            gpu = {"error": "%s: %s" % (type(e).__name__, e)}
        info["gpus"].append(gpu)
    if info["driver_cuda"] is None:
        try:
            info["driver_cuda"] = _cuda_int_to_str(_driver_cuda_from_libcuda())
        except Exception:  # an odd libcuda must not stop the report
            pass

    info["nvidia_smi"] = shutil.which("nvidia-smi")
    info["driver_version"] = None
    if info["nvidia_smi"]:
        out = _run([info["nvidia_smi"], "--query-gpu=driver_version", "--format=csv,noheader"], timeout=15)
        info["driver_version"] = out.strip().splitlines()[0] if out and out.strip() else None

    try:
        from torch.utils.cpp_extension import CUDA_HOME
    except Exception:
        CUDA_HOME = None
    info["cuda_home"] = CUDA_HOME
    nvcc = os.path.join(CUDA_HOME, "bin", "nvcc") if CUDA_HOME else None
    if not (nvcc and os.path.exists(nvcc)):
        nvcc = shutil.which("nvcc")
    out = _run([nvcc, "--version"], timeout=60) if nvcc else None
    m = re.search(r"release (\d+\.\d+)", out or "")
    info["nvcc"] = m.group(1) if m else None
    info["nvcc_path"] = nvcc
    return info


def arch_covers(arch_list, capability):
    """Whether a TORCH_CUDA_ARCH_LIST-style string has code that runs on `capability` (major, minor).

    "X.Y" and "X.Ya" are SASS for exactly (X, Y); "X.Y+PTX" also carries PTX, which the driver
    JIT-compiles for any capability >= X.Y.
    """
    for entry in re.split(r"[;\s,]+", arch_list or ""):
        m = re.fullmatch(r"(\d+)\.(\d+)a?(\+PTX)?", entry)
        if not m:
            continue
        arch = (int(m.group(1)), int(m.group(2)))
        if arch == tuple(capability) or (m.group(3) and tuple(capability) >= arch):
            return True
    return False


def diagnose(info):
    """(problem, what to do) pairs for a dict shaped like collect()'s; empty when all fits."""
    problems = []
    add = lambda problem, fix: problems.append((problem, fix))  # noqa: E731
    if info.get("torch_error"):
        add("torch cannot be imported (%s)." % info["torch_error"], "Install torch (>= 2.7) first, then tileops.")
        return problems

    torch_ver, torch_cuda = info.get("torch"), info.get("torch_cuda")
    torch_major = _major(torch_cuda)
    rebuild = "rebuild tileops against this torch: `pip install --no-build-isolation .` in the tileops checkout"
    gpus = [g for g in info.get("gpus") or [] if "capability" in g]
    build = info.get("tileops")

    if info.get("tileops_error"):
        add("tileops._C cannot be imported (%s)." % info["tileops_error"], rebuild.capitalize() + " (torch %s)." % torch_ver)
    elif build and build.get("torch_version") != torch_ver:
        add(
            "tileops was built against torch %s but torch %s is running; its compiled code does not fit this "
            "torch's ABI." % (build.get("torch_version"), torch_ver),
            rebuild.capitalize() + ".",
        )

    if torch_cuda is None and info.get("nvidia_smi"):
        add(
            "torch %s is a CPU-only build, but this machine has an NVIDIA driver (nvidia-smi is at %s)."
            % (torch_ver, info["nvidia_smi"]),
            "Install a CUDA build of torch (e.g. `pip install torch --index-url https://download.pytorch.org/whl/cu126`,"
            " or `conda env create -f environment.yml`), then rebuild tileops.",
        )

    driver_major = _major(info.get("driver_cuda"))
    if torch_major is not None and driver_major is not None and driver_major < torch_major:
        add(
            "the NVIDIA driver supports CUDA up to %s but torch was built with CUDA %s." % (info["driver_cuda"], torch_cuda),
            "Update the NVIDIA driver to one that supports CUDA %d (CUDA 12: driver >= 525; CUDA 13: driver >= 580), "
            "or install a torch built for CUDA %d." % (torch_major, driver_major),
        )

    if torch_cuda is not None and not info.get("device_count"):
        why = " torch said: %s" % " ".join(info["cuda_init_warnings"]) if info.get("cuda_init_warnings") else ""
        cvd = info.get("cuda_visible_devices")
        add(
            "torch has CUDA %s but sees no GPU.%s" % (torch_cuda, why),
            "Run `nvidia-smi`: if it fails, install the NVIDIA driver (in a container: run it with the GPU runtime, "
            "e.g. `docker run --gpus all` with the NVIDIA Container Toolkit)"
            + ("; CUDA_VISIBLE_DEVICES=%r hides GPUs: unset it or list a valid index." % cvd if cvd is not None else ".")
        )

    if build and info.get("device_count") and not build.get("with_cuda"):
        add(
            "tileops was built without its CUDA kernels, yet a GPU is visible (ops on CUDA tensors will raise).",
            "Rebuild with the CUDA kernels: `FORCE_CUDA=1 CUDA_HOME=/path/to/cuda pip install --no-build-isolation .` "
            "using a CUDA toolkit whose major version matches torch's CUDA %s." % torch_cuda,
        )
    if build and build.get("with_cuda") and torch_major is not None:
        built_major = _major(build.get("cuda_version"))
        if built_major is not None and built_major != torch_major:
            add(
                "tileops was compiled with CUDA %s but torch uses CUDA %s." % (build["cuda_version"], torch_cuda),
                "Install the CUDA %d toolkit, point CUDA_HOME at it and %s." % (torch_major, rebuild),
            )

    for i, gpu in enumerate(gpus):
        cap = tuple(gpu["capability"])
        where = "GPU %d (%s, compute capability %d.%d)" % ((i, gpu.get("name")) + cap)
        if cap < (8, 0):
            add(
                "%s is older than sm_80, which tileops' tensor-core kernels need." % where,
                "Use an Ampere or newer GPU (A100, RTX 30xx, L4, H100, ...), or run tileops on CPU tensors.",
            )
        elif build and build.get("with_cuda") and not arch_covers(build.get("arch_list"), cap):
            add(
                "%s is not among the architectures tileops was compiled for (%s)." % (where, build.get("arch_list")),
                'Rebuild for it: `TORCH_CUDA_ARCH_LIST="%d.%d" pip install --no-build-isolation .` (or add "%d.%d" to '
                "your list)." % (cap + cap),
            )

    if torch_cuda is not None:
        nvcc_major = _major(info.get("nvcc"))
        if not info.get("cuda_home") or nvcc_major is None:
            add(
                NOTE + "no CUDA toolkit found (CUDA_HOME=%s, nvcc %s); it is only needed to build tileops."
                % (info.get("cuda_home"), info.get("nvcc_path") or "not found"),
                "To build: install the CUDA %s toolkit (conda: cuda-nvcc, cuda-libraries-dev) and set CUDA_HOME "
                "(e.g. CUDA_HOME=$CONDA_PREFIX)." % torch_cuda,
            )
        elif nvcc_major != torch_major:
            add(
                "nvcc is CUDA %s but torch uses CUDA %s: building tileops would fail." % (info["nvcc"], torch_cuda),
                "Install the CUDA %d toolkit (conda: cuda-nvcc=%s, cuda-libraries-dev=%s) and set CUDA_HOME to it."
                % (torch_major, torch_cuda, torch_cuda),
            )
    return problems


def _fmt_bytes(n):
    if not isinstance(n, int):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1024.0


def _report(info, problems):
    lines = []
    row = lambda k, v: lines.append("  %-22s %s" % (k, "-" if v is None else v))  # noqa: E731
    lines.append("tileops doctor")
    row("python", info.get("python"))
    row("platform", info.get("platform"))
    if info.get("torch_error"):
        row("torch", "IMPORT FAILED: " + info["torch_error"])
    else:
        row("torch", info.get("torch"))
        row("torch CUDA", info.get("torch_cuda") or "none (CPU-only build)")
        row("cuDNN", info.get("cudnn"))
        row("CUDA available", "%s (%d device(s))" % (info.get("cuda_available"), info.get("device_count") or 0))
        row("CUDA_VISIBLE_DEVICES", info.get("cuda_visible_devices"))
        row("driver", info.get("driver_version"))
        row("driver supports CUDA", info.get("driver_cuda"))
        for i, g in enumerate(info.get("gpus") or []):
            if "error" in g:
                row("GPU %d" % i, "query failed: " + g["error"])
                continue
            row("GPU %d" % i, "%s, sm_%d%d, %s SMs" % ((g.get("name"),) + tuple(g["capability"]) + (g.get("sm_count"),)))
            row("", "smem/SM %s, smem/block opt-in %s, L2 %s, memory %s" % tuple(
                _fmt_bytes(g.get(k)) for k in ("shared_mem_per_sm", "shared_mem_per_block_optin", "l2_bytes", "total_mem")))
        row("CUDA_HOME", info.get("cuda_home"))
        row("nvcc", info.get("nvcc"))
        b = info.get("tileops")
        if b:
            row("tileops", "%s (git %s), built with torch %s" % (b.get("version"), b.get("git_sha"), b.get("torch_version")))
            row("tileops CUDA kernels", "CUDA %s, archs %s" % (b.get("cuda_version"), b.get("arch_list"))
                if b.get("with_cuda") else "not built (CPU kernels only)")
        else:
            row("tileops", "IMPORT FAILED: %s" % info.get("tileops_error"))
    lines.append("")
    if not problems:
        lines.append("All good: nothing found that does not fit.")
    for problem, fix in problems:
        lines.append(("NOTE  " + problem[len(NOTE):]) if problem.startswith(NOTE) else "PROBLEM  " + problem)
        lines.append("  fix: " + fix)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tileops doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the facts and problems as JSON")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    info = collect()
    problems = diagnose(info)
    if args.json:
        out = dict(info, problems=[{"problem": p, "fix": f} for p, f in problems])
        print(json.dumps(out, indent=2, default=str))
    else:
        print(_report(info, problems))
    return 1 if any(not p.startswith(NOTE) for p, _ in problems) else 0


if __name__ == "__main__":
    sys.exit(main())
