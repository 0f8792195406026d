"""tileops: hand-written shared-memory CUDA matmul and conv2d kernels as PyTorch ops.

    import torch, tileops
    y = tileops.matmul(a, b)
    y = tileops.linear(x, w, bias, activation="gelu")
    y = tileops.conv2d(x, w, bias, stride=1, padding=1, activation="relu")
    y = tileops.conv_transpose2d(x, w, bias, stride=2)  # also conv1d, conv3d, conv_transpose1d/3d
    model = tileops.convert(model)          # nn.Linear / nn.Conv*d / ConvTranspose*d -> tileops.nn.*
    fast = tileops.fuse_for_inference(model.eval())  # BatchNorm folded, activation + residual fused
    torch.ops.tileops.matmul(a, b)          # the registered ops themselves
    tileops.autotune.enable()               # time kernel configs once per problem class, cache them
    tileops.explain("conv2d", x, w, padding=1)  # which kernel serves a call, and why (nothing runs)
"""
import os

import torch  # noqa: F401  (loads libtorch before the extension)

from . import doctor as _doctor  # noqa: E402  (imports nothing of tileops: safe before _C)

_DOCTOR = "`python %s`" % os.path.join(os.path.dirname(__file__), "doctor.py")


def _check_torch():
    """Refuse, with the doctor's words, a _C built for another torch before loading it: loading it
    would fail with an undefined C++ symbol (or worse, not fail). _build_config.py is what setup.py
    recorded; a tree built before it existed has none and is not checked."""
    built = _doctor.read_build_config()
    if not built:
        return
    found = _doctor.torch_mismatch(built.get("torch_version"), built.get("cuda_version"), torch.__version__,
                                   torch.version.cuda, built.get("version"))
    if found:
        raise ImportError("%s\n  fix: %s\n  (%s shows the whole picture.)" % (found[0], found[1], _DOCTOR))


_check_torch()
try:
    from . import _C
except ImportError as e:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "tileops: the compiled module tileops._C could not be loaded (%s). It must be built against the "
        "torch you run (%s): reinstall with `pip install --no-build-isolation .`, and run "
        "%s to see what does not fit." % (e, torch.__version__, _DOCTOR)
    ) from e

from . import autotune, models, nn, routing  # noqa: E402
from .fuse import fuse_for_inference  # noqa: E402
from .nn import convert  # noqa: E402
from .ops import (  # noqa: E402
    ACTIVATIONS,
    ALGOS,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    linear,
    matmul,
)
from .routing import explain  # noqa: E402

__version__ = _C.build_info()["version"]


def build_info():
    """What tileops._C was built against: versions, git sha, CUDA kernels on/off, arch list."""
    return dict(_C.build_info())


__all__ = ["ACTIVATIONS", "ALGOS", "autotune", "build_info", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
           "conv_transpose2d", "conv_transpose3d", "convert", "explain", "fuse_for_inference", "linear", "matmul", "models", "nn", "routing"]
