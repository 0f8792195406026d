"""environment.yml's pins agree with each other and with pyproject.toml (CPU only, no conda needed).

The yaml and toml modules are used when present; small parsers cover Python 3.9 without pyyaml.
"""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_PATH = os.path.join(ROOT, "environment.yml")
PYPROJECT_PATH = os.path.join(ROOT, "pyproject.toml")

# conda-forge built pytorch 2.7.1 for these CUDA versions only.
CONDA_FORGE_TORCH_271_CUDA = {"12.6", "12.9"}
CUDA_PACKAGES = ["cuda-version", "cuda-nvcc", "cuda-libraries-dev", "cuda-cudart-dev", "cuda-cccl"]


def _read(path):
    with open(path) as f:
        return f.read()


def parse_env_fallback(text):
    """name and dependency strings of a conda environment file, without yaml."""
    name, deps, in_deps = None, [], False
    for line in text.splitlines():
        body = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        if not body:
            continue
        if not line[0].isspace():  # a top-level key ends the dependencies list
            in_deps = body.startswith("dependencies:")
            if body.startswith("name:"):
                name = body.split(":", 1)[1].strip()
        elif in_deps and body.lstrip().startswith("- "):
            deps.append(body.lstrip()[2:].strip())
    return {"name": name, "dependencies": deps}


def load_env():
    text = _read(ENV_PATH)
    try:
        import yaml
    except ImportError:
        return parse_env_fallback(text)
    return yaml.safe_load(text)


def specs(env):
    """{package: (operator, version)} for the plain string dependencies (pip sub-lists skipped)."""
    out = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(==|=|>=|<=|>|<)?\s*(\S*)", dep.strip())
            assert m, f"cannot read dependency {dep!r}"
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def pinned(name):
    op, version = specs(load_env()).get(name, (None, None))
    assert op in ("=", "=="), f"{name} must be pinned with '=' in environment.yml (found {(op, version)!r})"
    return version


def vtuple(version, n=None):
    parts = tuple(int(p) for p in re.findall(r"\d+", version))
    return parts[:n] if n else parts


def load_pyproject():
    """(requires-python, build requirements) from pyproject.toml: the torch floor is build-system's,
    since setup.py pins a built wheel's torch to the one it was compiled against."""
    text = _read(PYPROJECT_PATH)
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        project = text.split("[project]", 1)[1]
        requires = re.search(r'^requires-python\s*=\s*"([^"]+)"', project, re.M).group(1)
        build = text.split("[build-system]", 1)[1]
        deps = re.findall(r'"([^"]+)"', re.search(r"^requires\s*=\s*\[(.*?)\]", build, re.M | re.S).group(1))
        return requires, deps
    data = tomllib.loads(text)
    return data["project"]["requires-python"], data["build-system"]["requires"]


def test_fallback_parser_agrees_with_yaml():
    fallback = parse_env_fallback(_read(ENV_PATH))
    assert fallback["name"] and fallback["dependencies"]
    try:
        import yaml
    except ImportError:
        return
    parsed = yaml.safe_load(_read(ENV_PATH))
    assert fallback == {"name": parsed["name"], "dependencies": [d for d in parsed["dependencies"] if isinstance(d, str)]}


def test_name():
    assert load_env()["name"] == "tileops"


def test_python_is_the_oldest_supported():
    requires, _ = load_pyproject()
    floor = re.search(r">=\s*([\d.]+)", requires).group(1)
    assert pinned("python") == "3.9" == floor


def test_pytorch_fits_pyproject_and_python_39():
    _, deps = load_pyproject()
    torch_min = next(re.search(r">=\s*([\d.]+)", d).group(1) for d in deps if re.match(r"torch\s*>=", d))
    version = pinned("pytorch")
    assert vtuple(version) >= vtuple(torch_min), f"pytorch {version} is older than pyproject's torch>={torch_min}"
    assert vtuple(version, 2) <= (2, 8), "Python 3.9 caps torch at 2.8"
    assert pinned("pytorch-gpu") == version


def test_cuda_packages_share_one_version():
    versions = {name: vtuple(pinned(name), 2) for name in CUDA_PACKAGES}
    assert len(set(versions.values())) == 1, versions
    major, minor = versions["cuda-version"]
    assert f"{major}.{minor}" in CONDA_FORGE_TORCH_271_CUDA


def test_host_compiler_accepted_by_nvcc():
    assert vtuple(pinned("gxx"))[0] <= 13, "nvcc 12.4-12.6 accept GCC up to 13"


def test_cudnn_9():
    assert vtuple(pinned("cudnn"))[0] == 9


def test_build_and_test_tools_present():
    names = specs(load_env())
    for name in ("ninja", "pytest"):
        assert name in names


def test_every_dependency_says_why():
    in_deps = False
    for line in _read(ENV_PATH).splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            in_deps = line.startswith("dependencies:")
        elif in_deps and line.lstrip().startswith("- "):
            assert "#" in line, f"environment.yml: no comment saying why on {line.strip()!r}"
