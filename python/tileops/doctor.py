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


def _error(e):
    return f"{type(e).__name__}: {e}"


def _cuda_int_to_str(v):
    """CUDA's 1000*major + 10*minor encoding (13000) as "13.0"."""
    return f"{v // 1000}.{v % 1000 // 10}" if v else None


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
        info["torch_error"] = _error(e)
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

    info["tileops_built_for"] = read_build_config()
    try:
        _C = importlib.import_module("tileops._C")
        info["tileops"] = dict(_C.build_info())
        info["tileops_error"] = None
    except Exception as e:  # the import error is the finding; tileops/__init__ wraps the root cause
        _C = None
        info["tileops"] = None
        info["tileops_error"] = _error(e.__cause__ or e)

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
            gpu = {"error": _error(e)}
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
    m = re.search(r"release (\d+\.\d+)", (_run([nvcc, "--version"], timeout=60) if nvcc else None) or "")
    info["nvcc"] = m.group(1) if m else None
    info["nvcc_path"] = nvcc
    return info


def read_build_config(path=None):
    """tileops/_build_config.py (written by setup.py) as a dict, read by path so that it works when
    the package itself cannot be imported; None where there is none (a build older than it)."""
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build_config.py")
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    facts = {}
    try:
        exec(compile(text, path, "exec"), {}, facts)  # plain assignments of literals
    except Exception:
        return None
    return {k.lower(): v for k, v in facts.items() if k.isupper()}


def _minor_version(version):
    m = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def torch_mismatch(built_torch, built_cuda, torch_ver, torch_cuda, tileops_version=None):
    """(problem, fix) when tileops compiled against torch `built_torch` (with CUDA `built_cuda`, or
    None/"" for a build without CUDA kernels) cannot load into the running torch; else None.

    A C++ extension links torch's C++ symbols, which change between torch minor releases: a
    different major.minor fails with an undefined symbol, so it is refused before _C is loaded.
    CUDA kernels also need a CUDA torch of the same CUDA major (libcudart's soname).
    """
    what = f"tileops {tileops_version}" if tileops_version else "tileops"
    if _minor_version(built_torch) != _minor_version(torch_ver):
        mm = _minor_version(torch_ver)
        wheel = "a tileops built for this torch"
        if mm:
            tt = "+torch%d.%d." % mm
            wheel = "the tileops wheel built for this torch (version " + (
                f"{tt}cu{''.join(torch_cuda.split('.')[:2])}, or {tt}cpu for the CPU kernels only)" if torch_cuda
                else f"{tt}cpu)")
        return (
            f"{what} was built against torch {built_torch} but torch {torch_ver} is running; "
            "its compiled code does not fit this torch's ABI.",
            "Install " + wheel
            + f", or rebuild tileops against this torch: `pip install --no-build-isolation .` in the tileops "
            f"checkout, or go back to torch {'.'.join(map(str, _minor_version(built_torch) or ())) or built_torch}.",
        )
    if built_cuda and torch_cuda is None:
        return (
            f"{what} was built with its CUDA kernels (CUDA {built_cuda}) but torch {torch_ver} is a CPU-only build.",
            f"Install a CUDA {_major(built_cuda)} build of torch {torch_ver.split('+')[0]}, or a CPU-only tileops "
            "(built with TILEOPS_CPU_ONLY=1: version +...cpu).",
        )
    if built_cuda and _major(built_cuda) != _major(torch_cuda):
        return (
            f"{what} was compiled with CUDA {built_cuda} but torch uses CUDA {torch_cuda}.",
            f"Install the tileops built for CUDA {_major(torch_cuda)}, or rebuild it against this torch with the "
            f"CUDA {_major(torch_cuda)} toolkit: `pip install --no-build-isolation .`.",
        )
    return None


def _parse_arch_list(arch_list):
    """(major, minor, arch-specific, ptx) for each readable entry of a TORCH_CUDA_ARCH_LIST-style string."""
    out = []
    for entry in re.split(r"[;\s,]+", arch_list or ""):
        m = re.fullmatch(r"(\d+)\.(\d+)(a?)(\+PTX)?", entry)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), bool(m.group(3)), bool(m.group(4))))
    return out


def kernel_path(arch_list, capability):
    """How a GPU of `capability` (major, minor) runs a build for `arch_list`: ("native", "sm_XY") where
    a cubin runs on it, ("ptx", "compute_XY") where only PTX covers it (the driver JIT-compiles it
    on first use), ("none", None) where nothing does.

    "X.Y" is SASS, which also runs on later minors of the same major (X.Z, Z >= Y; torch's own
    check relies on this too); "X.Ya" uses arch-specific instructions and runs on X.Y only;
    "X.Y+PTX" also carries PTX, which the driver JIT-compiles for any capability >= X.Y. (setup.py
    drops the 9.0 cubin of "9.0+PTX" where 9.0a is built: sm_90a code runs on every 9.0 GPU.)
    """
    major, minor = capability
    entries = _parse_arch_list(arch_list)
    native = [(a, b, sp) for a, b, sp, _ in entries if (a, b) == (major, minor) or (not sp and a == major and b <= minor)]
    if native:
        a, b, sp = max(native, key=lambda e: (e[0], e[1], e[2]))  # the closest cubin; sm_90a before sm_90
        return "native", f"sm_{a}{b}{'a' if sp else ''}"
    ptx = [(a, b) for a, b, sp, p in entries if p and not sp and (a, b) <= (major, minor)]
    if ptx:
        a, b = max(ptx)
        return "ptx", f"compute_{a}{b}"
    return "none", None


def arch_covers(arch_list, capability):
    """Whether a TORCH_CUDA_ARCH_LIST-style string has code that runs on `capability` (major, minor)."""
    return kernel_path(arch_list, capability)[0] != "none"


def describe_kernel_path(build, capability, portable=None):
    """One line for the report: which code of this tileops build a GPU of `capability` runs.
    portable (default: TILEOPS_PORTABLE=1 in the environment): routed as before Hopper."""
    if portable is None:
        portable = os.environ.get("TILEOPS_PORTABLE", "0") == "1"
    if not build:
        return "unknown (tileops._C did not load)"
    if not build.get("with_cuda"):
        return "none: tileops was built without its CUDA kernels"
    kind, code = kernel_path(build.get("arch_list"), capability)
    sm = "sm_%d%d" % tuple(capability)
    hopper = "the Hopper (wgmma/TMA) and portable kernels" if tuple(capability) == (9, 0) else "the portable kernels"
    if portable and tuple(capability) == (9, 0):
        hopper = "the portable kernels only (TILEOPS_PORTABLE=1: routed as before Hopper)"
    if kind == "native" and code.endswith("a"):
        return f"native cubin ({code}): {hopper}"
    if kind == "native":
        return f"native cubin ({code}): the portable kernels"
    if kind == "ptx":
        return (f"PTX JIT ({code} -> {sm}, compiled by the driver on first use and cached): the portable "
                "kernels only; the sm_90a (wgmma/TMA) kernels run on compute capability 9.0 only")
    return f"none: no cubin for {sm} and no PTX at or below it in {build.get('arch_list')} (CUDA ops raise)"


def diagnose(info):
    """(problem, what to do) pairs for a dict shaped like collect()'s; empty when all fits."""
    problems = []
    add = lambda problem, fix: problems.append((problem, fix))  # noqa: E731
    if info.get("torch_error"):
        add(f"torch cannot be imported ({info['torch_error']}).", "Install torch (>= 2.7) first, then tileops.")
        return problems

    torch_ver, torch_cuda = info.get("torch"), info.get("torch_cuda")
    torch_major = _major(torch_cuda)
    rebuild = "Rebuild tileops against this torch: `pip install --no-build-isolation .` in the tileops checkout"
    build = info.get("tileops")

    built_for = info.get("tileops_built_for")
    mismatch = None
    if build:
        mismatch = torch_mismatch(build.get("torch_version"), build.get("cuda_version") if build.get("with_cuda") else None,
                                  torch_ver, torch_cuda, build.get("version"))
    elif built_for:
        mismatch = torch_mismatch(built_for.get("torch_version"), built_for.get("cuda_version"), torch_ver, torch_cuda,
                                  built_for.get("version"))
    if mismatch and "compiled with CUDA" not in mismatch[0]:  # that one is told below
        add(*mismatch)
    elif info.get("tileops_error"):
        add(f"tileops._C cannot be imported ({info['tileops_error']}).", f"{rebuild} (torch {torch_ver}).")
    elif build and build.get("torch_version") != torch_ver:
        add(
            f"{NOTE}tileops was built against torch {build.get('torch_version')}, torch {torch_ver} is running: "
            "the same minor release, whose C++ ABI is expected to match.",
            f"If an op misbehaves: {rebuild}.",
        )

    if torch_cuda is None and info.get("nvidia_smi"):
        add(
            f"torch {torch_ver} is a CPU-only build, but this machine has an NVIDIA driver "
            f"(nvidia-smi is at {info['nvidia_smi']}).",
            "Install a CUDA build of torch (e.g. `pip install torch --index-url https://download.pytorch.org/whl/cu126`,"
            " or `conda env create -f environment.yml`), then rebuild tileops.",
        )

    driver_cuda = info.get("driver_cuda")
    driver_major = _major(driver_cuda)
    if torch_major is not None and driver_major is not None and driver_major < torch_major:
        add(
            f"the NVIDIA driver supports CUDA up to {driver_cuda} but torch was built with CUDA {torch_cuda}.",
            f"Update the NVIDIA driver to one that supports CUDA {torch_major} (CUDA 12: driver >= 525; "
            f"CUDA 13: driver >= 580), or install a torch built for CUDA {driver_major}.",
        )

    if torch_cuda is not None and not info.get("device_count"):
        said = " ".join(info.get("cuda_init_warnings") or [])
        cvd = info.get("cuda_visible_devices")
        fix = (
            "Run `nvidia-smi`: if it fails, install the NVIDIA driver (in a container: run it with the GPU runtime, "
            "e.g. `docker run --gpus all` with the NVIDIA Container Toolkit)"
        )
        if cvd is not None:
            fix += f"; CUDA_VISIBLE_DEVICES={cvd!r} hides GPUs: unset it or list a valid index"
        add(f"torch has CUDA {torch_cuda} but sees no GPU." + (f" torch said: {said}" if said else ""), fix + ".")

    if build and info.get("device_count") and not build.get("with_cuda"):
        add(
            "tileops was built without its CUDA kernels, yet a GPU is visible (ops on CUDA tensors will raise).",
            "Rebuild with the CUDA kernels: `FORCE_CUDA=1 CUDA_HOME=/path/to/cuda pip install --no-build-isolation .` "
            f"using a CUDA toolkit whose major version matches torch's CUDA {torch_cuda}.",
        )
    if build and build.get("with_cuda") and torch_major is not None:
        built_major = _major(build.get("cuda_version"))
        if built_major is not None and built_major != torch_major:
            add(
                f"tileops was compiled with CUDA {build['cuda_version']} but torch uses CUDA {torch_cuda}.",
                f"Install the CUDA {torch_major} toolkit and point CUDA_HOME at it. {rebuild}.",
            )

    for i, gpu in enumerate(info.get("gpus") or []):
        if "capability" not in gpu:  # its query failed; the report shows why
            continue
        major, minor = gpu["capability"]
        where = f"GPU {i} ({gpu.get('name')}, compute capability {major}.{minor})"
        if (major, minor) < (8, 0):
            # Rebuilding for this arch would not help, so no arch-list advice below.
            add(
                f"{where} is older than sm_80, which tileops' tensor-core kernels need.",
                "Use an Ampere or newer GPU (A100, RTX 30xx, L4, H100, ...), or run tileops on CPU tensors.",
            )
        elif build and build.get("with_cuda"):
            kind, code = kernel_path(build.get("arch_list"), (major, minor))
            if kind == "none":
                add(
                    f"{where} is not among the architectures tileops was compiled for ({build.get('arch_list')}).",
                    f'Rebuild for it: `TORCH_CUDA_ARCH_LIST="{major}.{minor}" pip install --no-build-isolation .` '
                    f'(or add "{major}.{minor}" to your list; the default list\'s 9.0+PTX covers newer GPUs).',
                )
            elif kind == "ptx":
                add(
                    f"{NOTE}{where} has no cubin in this build ({build.get('arch_list')}): it runs the portable "
                    f"kernels from {code} PTX, JIT-compiled by the driver on first use (a one-off delay; cached "
                    "in ~/.nv/ComputeCache, CUDA_CACHE_MAXSIZE), never the sm_90a (wgmma/TMA) ones.",
                    f'For native code build for it: `TORCH_CUDA_ARCH_LIST="{major}.{minor}" pip install '
                    "--no-build-isolation .` with a CUDA toolkit that knows that architecture.",
                )

    if torch_cuda is not None:
        nvcc_major = _major(info.get("nvcc"))
        if not info.get("cuda_home") or nvcc_major is None:
            add(
                f"{NOTE}no CUDA toolkit found (CUDA_HOME={info.get('cuda_home')}, "
                f"nvcc {info.get('nvcc_path') or 'not found'}); it is only needed to build tileops.",
                f"To build: install the CUDA {torch_cuda} toolkit (conda: cuda-nvcc, cuda-libraries-dev) and set "
                "CUDA_HOME (e.g. CUDA_HOME=$CONDA_PREFIX).",
            )
        elif nvcc_major != torch_major:
            add(
                f"nvcc is CUDA {info['nvcc']} but torch uses CUDA {torch_cuda}: building tileops would fail.",
                f"Install the CUDA {torch_major} toolkit (conda: cuda-nvcc={torch_cuda}, "
                f"cuda-libraries-dev={torch_cuda}) and set CUDA_HOME to it.",
            )
    return problems


def _fmt_bytes(n):
    if not isinstance(n, int):
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def _report(info, problems):
    lines = ["tileops doctor"]

    def row(key, value):
        lines.append(f"  {key:<22} {'-' if value is None else value}")

    row("python", info.get("python"))
    row("platform", info.get("platform"))
    if info.get("torch_error"):
        row("torch", "IMPORT FAILED: " + info["torch_error"])
    else:
        row("torch", info.get("torch"))
        row("torch CUDA", info.get("torch_cuda") or "none (CPU-only build)")
        row("cuDNN", info.get("cudnn"))
        row("CUDA available", f"{info.get('cuda_available')} ({info.get('device_count') or 0} device(s))")
        row("CUDA_VISIBLE_DEVICES", info.get("cuda_visible_devices"))
        row("driver", info.get("driver_version"))
        row("driver supports CUDA", info.get("driver_cuda"))
        for i, g in enumerate(info.get("gpus") or []):
            if "error" in g:
                row(f"GPU {i}", "query failed: " + g["error"])
                continue
            major, minor = g["capability"]
            row(f"GPU {i}", f"{g.get('name')}, sm_{major}{minor}, {g.get('sm_count')} SMs")
            sizes = [_fmt_bytes(g.get(k)) for k in ("shared_mem_per_sm", "shared_mem_per_block_optin", "l2_bytes", "total_mem")]
            row("", "smem/SM {}, smem/block opt-in {}, L2 {}, memory {}".format(*sizes))
            row("", "tileops code: " + describe_kernel_path(info.get("tileops"), (major, minor)))
        row("CUDA_HOME", info.get("cuda_home"))
        row("nvcc", info.get("nvcc"))
        b = info.get("tileops")
        if b:
            row("tileops", f"{b.get('version')} (git {b.get('git_sha')}), built with torch {b.get('torch_version')}")
            kernels = f"CUDA {b.get('cuda_version')}, archs {b.get('arch_list')}"
            row("tileops CUDA kernels", kernels if b.get("with_cuda") else "not built (CPU kernels only)")
        else:
            row("tileops", f"IMPORT FAILED: {info.get('tileops_error')}")
            bf = info.get("tileops_built_for")
            if bf:
                row("tileops built for", f"{bf.get('version')}: torch {bf.get('torch_version')}, "
                    f"CUDA {bf.get('cuda_version') or 'none (CPU kernels only)'}, archs {bf.get('arch_list') or '-'}")
    lines.append("")
    if not problems:
        lines.append("All good: nothing found that does not fit.")
    for problem, fix in problems:
        lines.append("NOTE  " + problem[len(NOTE):] if problem.startswith(NOTE) else "PROBLEM  " + problem)
        lines.append("  fix: " + fix)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tileops doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the facts and problems as JSON")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    info = collect()
    problems = diagnose(info)
    if args.json:
        print(json.dumps(dict(info, problems=[{"problem": p, "fix": f} for p, f in problems]), indent=2, default=str))
    else:
        print(_report(info, problems))
    return 1 if any(not p.startswith(NOTE) for p, _ in problems) else 0


if __name__ == "__main__":
    sys.exit(main())
