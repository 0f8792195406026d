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
  TILEOPS_CCACHE=0        do not compile through ccache (used by default when `ccache` is on PATH)
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import time

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
NVCC_TIMES = os.path.join(ROOT, "build", "nvcc_time.csv")  # nvcc --time's phases, for the build's report


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


# The heaviest translation units (the Hopper and ladder kernel instantiations, the conv families)
# first: ninja starts jobs in the order it is given them, and a heavy unit started last is the
# build's tail (docs/architecture.md, Build). setuptools sorts the sources; BuildExt reorders them.
HEAVY_FIRST = ("csrc/cuda/sm90/", "csrc/cuda/ladder/", "csrc/cuda/routing/", "csrc/cuda/conv/", "csrc/cuda/")


def build_order(sources):
    """sources with the heavy CUDA units first (HEAVY_FIRST's order, .cu before .cpp), else as given."""
    def rank(src):
        rel = (os.path.relpath(src, ROOT) if os.path.isabs(src) else src).replace(os.sep, "/")
        group = next((i for i, p in enumerate(HEAVY_FIRST) if rel.startswith(p)), len(HEAVY_FIRST))
        return (group, not rel.endswith(".cu"))
    return sorted(sources, key=rank)  # stable: the given order within a group


def use_ccache(cuda_home, with_cuda, link_dir=None):
    """Compile through ccache where it is on PATH (TILEOPS_CCACHE=0: not): nvcc through torch's
    PYTORCH_NVCC, the C++ compiler through a masquerade link named as the compiler, first on PATH (so
    torch's compiler checks still run the real one). Returns a line for the build log."""
    ccache = shutil.which("ccache")
    if os.environ.get("TILEOPS_CCACHE", "1") == "0" or ccache is None:
        return "ccache: off (%s)" % ("TILEOPS_CCACHE=0" if ccache else "not on PATH")
    used = []
    if with_cuda and "PYTORCH_NVCC" not in os.environ:
        os.environ["PYTORCH_NVCC"] = "%s %s" % (ccache, os.path.join(cuda_home, "bin", "nvcc"))
        used.append("nvcc")
    cxx = os.environ.get("CXX", "c++")
    if os.sep not in cxx and " " not in cxx and cxx != "ccache":  # a bare name: masquerade it
        link_dir = link_dir or os.path.join(ROOT, "build", "ccache-bin")
        os.makedirs(link_dir, exist_ok=True)
        link = os.path.join(link_dir, cxx)
        if not os.path.islink(link):
            os.symlink(ccache, link)
        os.environ["PATH"] = link_dir + os.pathsep + os.environ.get("PATH", "")
        used.append(cxx)
    return "ccache: %s (%s)" % (", ".join(used) or "not used", ccache)


def ninja_log_run(text, start_offset=0):
    """[(seconds, object)] of the last ninja run in a .ninja_log's text: the lines after start_offset
    (the log's size before the run) where the log only grew, each object's last line. A ninja run's
    times start at 0 and its lines are written as jobs end, so the run is also the longest tail of
    lines whose end times never decrease (used where ninja rewrote the log)."""
    tail = text[start_offset:] if len(text) >= start_offset else text
    rows = []
    for line in tail.splitlines():
        f = line.split("\t")
        if line.startswith("#") or len(f) < 4 or not f[0].isdigit() or not f[1].isdigit():
            continue
        rows.append((int(f[0]), int(f[1]), f[3]))
    if start_offset == 0 or len(text) < start_offset:
        i = len(rows)
        while i > 1 and rows[i - 2][1] <= rows[i - 1][1]:
            i -= 1
        rows = rows[i - 1:] if rows else rows
    last = {}
    for begin, end, path in rows:
        last[path] = (end - begin) / 1000.0
    return [(sec, path) for path, sec in last.items()]


def nvcc_times_by_arch(csv_text):
    """Seconds of nvcc's device phases (cicc, ptxas) by target, and of the rest as "host", from its
    --time CSV (source, phase, inputs, output, arch, tool, metric, unit)."""
    by_arch = {}
    for line in csv_text.splitlines():
        f = [x.strip() for x in line.split(" , ")]
        if len(f) < 8 or f[7] != "ms":
            continue
        key = f[1] + " " + f[4] if f[4] and ("cicc" in f[1] or "ptxas" in f[1]) else "host"
        try:
            by_arch[key] = by_arch.get(key, 0.0) + float(f[6]) / 1000.0
        except ValueError:
            continue
    return by_arch


def build_report(run, wall, link, jobs, by_arch=None, top=12):
    """The build log's lines on where the build's time went."""
    if not run:
        return ["build time: %.0f s wall, nothing compiled (up to date)" % wall]
    total = sum(sec for sec, _ in run)
    lines = ["build time: %.0f s wall (%.0f s compiling, %.0f s linking); %d translation units, %.0f s of "
             "compile time over %s jobs" % (wall, wall - link, link, len(run), total, jobs)]
    for sec, path in sorted(run, reverse=True)[:top]:
        rel = path[path.find("csrc/"):] if "csrc/" in path else path  # the source's path, .o for .cu/.cpp
        lines.append("  %7.1f s  %s" % (sec, rel))
    if by_arch:
        lines.append("  nvcc by target: " + ", ".join("%s %.0f s" % kv for kv in sorted(by_arch.items())))
    return lines


def make_extension():
    with_cuda, cuda_home, nvcc_ver = want_cuda()
    debug = os.environ.get("DEBUG", "0") == "1"
    sources = cpu_sources()
    defines = []
    # -g0: Python's own CFLAGS (sysconfig, which setuptools puts first) carry -g, which made 90% of
    # a release _C (41 of 46 MB, CPU build) debug info and slowed every C++ unit's compile
    cxx = ["-O0", "-g"] if debug else ["-O3", "-g0"]
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
        user_flags = os.environ.get("NVCC_FLAGS", "").split()
        if len(gencode) > 1 and not any(f.startswith(("-t", "--threads")) for f in user_flags):
            # a unit's targets compile side by side: with several, the heaviest unit would otherwise
            # compile them one after another on one core at the build's end
            nvcc += ["--threads", str(min(len(gencode), os.cpu_count() or 1))]
        nvcc += user_flags
        defines += [("TILEOPS_WITH_CUDA", None)]
        if "9.0a" in arch_names.split(";"):
            defines += [("TILEOPS_HAVE_SM90A", None)]
    ccache_line = use_ccache(cuda_home, with_cuda)
    if with_cuda and "ccache" not in os.environ.get("PYTORCH_NVCC", ""):
        # per-target phase times for the build's report (BuildExt); not through ccache, which would
        # take --time's file for a second input and cache nothing
        os.makedirs(os.path.dirname(NVCC_TIMES), exist_ok=True)
        nvcc += ["--time", NVCC_TIMES]
    version = local_version(with_cuda)
    BuildExt.config_text = write_build_info(arch_names, "%d.%d" % nvcc_ver if with_cuda else "", version)
    log("version %s, torch %s (CUDA %s), python %s" % (version, torch.__version__, torch.version.cuda, sys.version.split()[0]))
    if with_cuda:
        log("CUDA kernels: ON  (CUDA_HOME=%s, nvcc %d.%d, archs %s)" % ((cuda_home,) + nvcc_ver + (arch_names,)))
        log("nvcc flags: %s" % " ".join(nvcc))
        log(ptx_note(arch_names))
    else:
        log("CUDA kernels: OFF (CPU kernels only; tileops ops on CUDA tensors will raise)")
    log(ccache_line)
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

    def build_extension(self, ext):
        """torch's build (ninja), the heavy units first (build_order), then where its time went."""
        log_path = os.path.join(self.build_temp, ".ninja_log")
        offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        times_csv = NVCC_TIMES
        if os.path.exists(times_csv):
            os.remove(times_csv)
        compile_fn = self.compiler.compile
        compiled = []

        def ordered_compile(sources, *args, **kwargs):
            begin = time.time()
            try:
                return compile_fn(build_order(sources), *args, **kwargs)
            finally:
                compiled.append(time.time() - begin)

        self.compiler.compile = ordered_compile
        start = time.time()
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_fn
        wall = time.time() - start
        text = open(log_path).read() if os.path.exists(log_path) else ""
        by_arch = nvcc_times_by_arch(open(times_csv).read()) if os.path.exists(times_csv) else None
        link = wall - sum(compiled)
        for line in build_report(ninja_log_run(text, offset), wall, link, os.environ.get("MAX_JOBS", "auto"), by_arch):
            log(line)

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
