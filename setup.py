"""Build tileops' compiled module (tileops._C) against the torch in this environment.

Install with `pip install --no-build-isolation .` (or `-e .`): the extension must be built
against the torch you will run it with, so the build uses the installed torch rather than
a fresh one in an isolated environment. `pip wheel --no-build-isolation --no-deps .` makes a
wheel for that torch: version 0.1.0+torch2.11.cu130 (or .cpu without the CUDA kernels),
requiring torch 2.11.*.

Environment knobs:
  FORCE_CUDA=1            fail instead of falling back to a CPU-only build
  TILEOPS_CPU_ONLY=1      build the CPU kernels only, even where CUDA is available
  TORCH_CUDA_ARCH_LIST    e.g. "9.0a" or "8.0;9.0+PTX" (default: 8.0;8.6;8.9;9.0+PTX;9.0a: SASS for
                          Ampere/Ada/Hopper, plus compute_90 PTX that newer GPUs JIT-compile)
  DEBUG=1                 -O0 -g, device code with -lineinfo and assertions
  NVCC_FLAGS / CXX_FLAGS  extra flags appended to nvcc / the C++ compiler
  MAX_JOBS                parallel compile jobs (ninja)
"""
import glob
import os
import re
import subprocess
import sys

from setuptools import setup

try:
    import torch
    from torch.utils import cpp_extension
except ImportError:  # pragma: no cover - a build without torch cannot proceed
    sys.exit(
        "tileops: torch must be installed before building tileops.\n"
        "  pip install torch   (then)   pip install --no-build-isolation ."
    )

VERSION = "0.1.0"
ROOT = os.path.dirname(os.path.abspath(__file__))
# 9.0+PTX: with 9.0a present, no sm_90 cubin (sm_90a's covers every 9.0 GPU) but compute_90 PTX of
# the portable kernels, which the driver JIT-compiles for any newer GPU (sm_100, sm_120, ...).
DEFAULT_ARCHS = "8.0;8.6;8.9;9.0+PTX;9.0a"


def log(msg):
    print("tileops build: " + msg, flush=True)


def fail(msg):
    sys.exit("tileops build error: " + msg)


def git_sha():
    if os.environ.get("TILEOPS_GIT_SHA"):  # for builds from a copy without .git
        return os.environ["TILEOPS_GIT_SHA"]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def nvcc_version(cuda_home):
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def want_cuda():
    """Decide whether to build the CUDA kernels; returns (bool, cuda_home, nvcc version)."""
    force = os.environ.get("FORCE_CUDA", "0") == "1"
    if os.environ.get("TILEOPS_CPU_ONLY", "0") == "1":
        if force:
            fail("FORCE_CUDA=1 and TILEOPS_CPU_ONLY=1 contradict each other; unset one.")
        return False, None, None
    if torch.version.cuda is None:
        if force:
            fail(
                "FORCE_CUDA=1 but this torch (%s) is a CPU-only build. Install a CUDA build of torch "
                "whose CUDA major version matches your nvcc." % torch.__version__
            )
        log("torch %s has no CUDA: building the CPU kernels only." % torch.__version__)
        return False, None, None
    explicit = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if explicit and not os.path.exists(os.path.join(explicit, "bin", "nvcc")):
        fail(
            "CUDA_HOME=%s has no bin/nvcc. Point CUDA_HOME at a CUDA %s toolkit (conda: CUDA_HOME=$CONDA_PREFIX "
            "after installing cuda-nvcc), or unset it to build the CPU kernels only." % (explicit, torch.version.cuda)
        )
    cuda_home = cpp_extension.CUDA_HOME
    if cuda_home is None or not os.path.exists(os.path.join(cuda_home, "bin", "nvcc")):
        msg = (
            "no CUDA toolkit found (CUDA_HOME is %s and nvcc is not on PATH). Install the CUDA %s "
            "toolkit (conda: cuda-nvcc and cuda-libraries-dev at torch's CUDA version) and set "
            "CUDA_HOME to it (e.g. CUDA_HOME=$CONDA_PREFIX)." % (os.environ.get("CUDA_HOME", "unset"), torch.version.cuda)
        )
        if force:
            fail(msg)
        log(msg + " Building the CPU kernels only.")
        return False, None, None
    ver = nvcc_version(cuda_home)
    if ver is None:
        fail("could not read the version of %s/bin/nvcc." % cuda_home)
    torch_major = int(torch.version.cuda.split(".")[0])
    if ver[0] != torch_major:
        fail(
            "nvcc is CUDA %d.%d (%s) but torch %s was built with CUDA %s. The CUDA major versions must "
            "match: install the CUDA %d toolkit and point CUDA_HOME at it, or install a torch built for "
            "CUDA %d." % (ver[0], ver[1], cuda_home, torch.__version__, torch.version.cuda, torch_major, ver[0])
        )
    return True, cuda_home, ver


def gencode_flags(arch_list, nvcc_ver):
    """-gencode flags for a TORCH_CUDA_ARCH_LIST-style string; '9.0a' needs nvcc >= 12.0.

    "X.Y" is a cubin (SASS) for sm_XY, "X.Ya" one for sm_XYa, "X.Y+PTX" adds compute_XY PTX. Where
    9.0a is built, a 9.0 cubin would duplicate it (sm_90a code runs on every 9.0 GPU): "9.0" is
    dropped and "9.0+PTX" keeps its PTX only. PTX is only ever of a portable (non-"a") target:
    "a" code runs on its own compute capability only, so its PTX would help no newer GPU.
    """
    flags, names = [], []
    entries = [a for a in re.split(r"[;\s,]+", arch_list) if a]
    sm90a = "9.0a" in entries and nvcc_ver >= (12, 0)
    if sm90a:  # sm_90a code runs on every 9.0 GPU: one cubin, not two
        entries = [a for a in entries if a != "9.0"]
    for entry in entries:
        ptx = entry.endswith("+PTX")
        arch = entry[:-4] if ptx else entry
        m = re.fullmatch(r"(\d+)\.(\d+)(a?)", arch)
        if not m:
            fail("cannot read architecture %r in TORCH_CUDA_ARCH_LIST=%r" % (entry, arch_list))
        num = m.group(1) + m.group(2) + m.group(3)
        if m.group(3) and ptx:
            fail("%r: PTX of an arch-specific target runs on no other GPU; use %s.%s+PTX for forward "
                 "compatibility" % (entry, m.group(1), m.group(2)))
        if m.group(3) and nvcc_ver < (12, 0):
            log("nvcc %d.%d cannot build sm_%s; skipping it." % (nvcc_ver + (num,)))
            continue
        if not (sm90a and arch == "9.0"):
            flags.append("-gencode=arch=compute_%s,code=sm_%s" % (num, num))
        if ptx:
            flags.append("-gencode=arch=compute_%s,code=compute_%s" % (num, num))
        names.append(entry)
    if not flags:
        fail("TORCH_CUDA_ARCH_LIST=%r leaves no architecture to build." % arch_list)
    return flags, ";".join(names)


def ptx_note(arch_names):
    """One line on which GPUs newer than the list can run: those above the newest PTX, or none."""
    ptx = [e[:-4] for e in arch_names.split(";") if e.endswith("+PTX")]
    if not ptx:
        return ("no PTX embedded (no '+PTX' entry): a GPU newer than the list gets no kernel image; "
                "add e.g. '9.0+PTX' to TORCH_CUDA_ARCH_LIST")
    newest = max(ptx, key=lambda a: tuple(int(x) for x in a.split(".")))
    return "PTX for compute_%s: newer GPUs JIT-compile the portable kernels" % newest.replace(".", "")


def major_minor(version):
    """'2.11.0+cu130' -> (2, 11)."""
    return tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", version).groups())


def local_version(with_cuda, torch_version=None, torch_cuda=None):
    """The wheel's version: VERSION plus a local tag naming the torch (major.minor) and CUDA it was
    built for, as torch's own +cu130 wheels do: 0.1.0+torch2.11.cu130, or 0.1.0+torch2.11.cpu for a
    build without the CUDA kernels (which runs on a CPU or a CUDA torch of that version)."""
    torch_version = torch_version or torch.__version__
    torch_cuda = torch_cuda if torch_cuda is not None else torch.version.cuda
    mm = "%d.%d" % major_minor(torch_version)
    tag = "cu" + "".join(torch_cuda.split(".")[:2]) if with_cuda else "cpu"
    return "%s+torch%s.%s" % (VERSION, mm, tag)


def torch_requirement(torch_version=None):
    """The torch a built wheel needs: the major.minor it was compiled against (its C++ ABI)."""
    major, minor = major_minor(torch_version or torch.__version__)
    return "torch>=%d.%d,<%d.%d" % (major, minor, major, minor + 1)


def write_build_info(arch_names, cuda_version, version):
    """Build facts for tileops._C.build_info(), as a generated header (not in git); returns the same
    facts as the text of tileops/_build_config.py, which BuildExt writes beside the _C it builds and
    tileops/__init__ reads before it loads _C."""
    path = os.path.join(ROOT, "csrc", "generated", "build_info.h")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = "// generated by setup.py\n#pragma once\n"
    for key, val in [
        ("VERSION", version),
        ("GIT_SHA", git_sha()),
        ("ARCH_LIST", arch_names),
        ("CUDA_VERSION", cuda_version),
        ("BUILD_TORCH", torch.__version__),
    ]:
        text += '#define TILEOPS_%s "%s"\n' % (key, val)
    write_if_changed(path, text)
    py = '"""Written by setup.py: what tileops._C was built against (read before _C is loaded)."""\n'
    for key, val in [("VERSION", version), ("TORCH_VERSION", torch.__version__),
                     ("CUDA_VERSION", cuda_version or None), ("ARCH_LIST", arch_names or None)]:
        py += "%s = %r\n" % (key, val)
    return py


def write_if_changed(path, text):
    old = open(path).read() if os.path.exists(path) else None
    if old != text:  # keep the timestamp when nothing changed, so ninja does not rebuild
        with open(path, "w") as f:
            f.write(text)


# Source selection (globs: a new file needs no registration). Every build compiles the C++ under
# csrc/, csrc/ops/, csrc/cpu/, csrc/autotune/ and csrc/routing/ but for the CUDA-only files of csrc/autotune/
# (named cuda_*); a CUDA build adds those and everything under csrc/cuda/ (one folder per concern).
CPU_SOURCE_DIRS = ("csrc", "csrc/ops", "csrc/cpu", "csrc/autotune", "csrc/routing")


def cpu_sources():
    sources = []
    for d in CPU_SOURCE_DIRS:
        found = sorted(glob.glob(os.path.join(d, "*.cpp")))
        sources += [s for s in found if not os.path.basename(s).startswith("cuda_")]
    return sources


def cuda_sources():
    sources = sorted(glob.glob(os.path.join("csrc", "autotune", "cuda_*.cpp")))
    sources += sorted(glob.glob(os.path.join("csrc", "cuda", "**", "*.cpp"), recursive=True))
    sources += sorted(glob.glob(os.path.join("csrc", "cuda", "**", "*.cu"), recursive=True))
    return sources


def openmp_flags():
    """-fopenmp where torch's CPU parallelism is OpenMP (its Linux wheels and conda builds) and the
    compiler is GCC-compatible on Linux; [] elsewhere (at::parallel_for then runs serially)."""
    if not sys.platform.startswith("linux") or not torch.backends.openmp.is_available():
        return []
    return ["-fopenmp"]


def make_extension():
    with_cuda, cuda_home, nvcc_ver = want_cuda()
    debug = os.environ.get("DEBUG", "0") == "1"
    sources = cpu_sources()
    defines = []
    cxx = ["-O0", "-g"] if debug else ["-O3"]
    cxx += ["-std=c++17"] + os.environ.get("CXX_FLAGS", "").split()
    link = []
    if openmp_flags():
        # at::parallel_for is inline OpenMP in torch's headers: compiled without -fopenmp it runs
        # serially. Linked by its soname, libgomp resolves to the copy torch already loaded.
        cxx += openmp_flags()
        link += openmp_flags()
    nvcc = []
    arch_names = ""
    if with_cuda:
        sources += cuda_sources()
        archs = os.environ.get("TORCH_CUDA_ARCH_LIST") or DEFAULT_ARCHS
        gencode, arch_names = gencode_flags(archs, nvcc_ver)
        nvcc = gencode + ["-std=c++17", "-lineinfo", "--expt-relaxed-constexpr"]
        nvcc += ["-O0", "-G"] if debug else ["-O3"]
        nvcc += os.environ.get("NVCC_FLAGS", "").split()
        defines += [("TILEOPS_WITH_CUDA", None)]
        if "9.0a" in arch_names.split(";"):
            defines += [("TILEOPS_HAVE_SM90A", None)]
    version = local_version(with_cuda)
    BuildExt.config_text = write_build_info(arch_names, "%d.%d" % nvcc_ver if with_cuda else "", version)
    log("version %s, torch %s (CUDA %s), python %s" % (version, torch.__version__, torch.version.cuda, sys.version.split()[0]))
    if with_cuda:
        log("CUDA kernels: ON  (CUDA_HOME=%s, nvcc %d.%d, archs %s)" % ((cuda_home,) + nvcc_ver + (arch_names,)))
        log("nvcc flags: %s" % " ".join(nvcc))
        log(ptx_note(arch_names))
    else:
        log("CUDA kernels: OFF (CPU kernels only; tileops ops on CUDA tensors will raise)")
    log("cxx flags: %s; link flags: %s; debug=%s; MAX_JOBS=%s" % (" ".join(cxx), " ".join(link) or "-", debug,
                                                                os.environ.get("MAX_JOBS", "auto")))

    kwargs = dict(
        name="tileops._C",
        sources=sources,
        include_dirs=[os.path.join(ROOT, "csrc")],
        define_macros=defines,
        extra_compile_args={"cxx": cxx, "nvcc": nvcc} if with_cuda else {"cxx": cxx},
        extra_link_args=link,
    )
    if with_cuda:
        return cpp_extension.CUDAExtension(**kwargs), version
    return cpp_extension.CppExtension(**kwargs), version


class BuildExt(cpp_extension.BuildExtension.with_options(use_ninja=True)):
    """torch's build_ext, then tileops/_build_config.py beside the _C it built: in python/tileops/ for
    an editable (in-place) build, in the wheel's tree otherwise, so a non-editable install from this
    checkout (scripts/test_oldest.sh) does not rewrite the record of the editable build's _C."""

    config_text = None

    def run(self):
        super().run()
        if self.config_text is not None:
            path = os.path.join(os.path.dirname(self.get_ext_fullpath("tileops._C")), "_build_config.py")
            write_if_changed(path, self.config_text)


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import its helpers
    ext, version = make_extension()
    setup(
        version=version,  # pyproject.toml leaves version and dependencies to this file
        install_requires=[torch_requirement()],
        packages=["tileops"],
        package_dir={"": "python"},
        ext_modules=[ext],
        cmdclass={"build_ext": BuildExt},
    )
