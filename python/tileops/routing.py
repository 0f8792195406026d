"""Which kernel serves a call, and why: tileops' routing tables as data.

    tileops.explain("conv2d", x, w, padding=1)   # the decision, launching nothing
    tileops.routing.tables()                     # every table: op path, candidates in order
    TILEOPS_TRACE=1 python train.py              # one line per routed problem on stderr
    with tileops.routing.trace(): model(x)       # the same, for a block of code

Each op path (matmul, conv2d forward / grad_input / grad_weight, depthwise, the CPU) is one
ordered table of candidates; the first that can run a problem runs it, and an autotuned family
then picks its config (docs/dispatch.md lists the tables; docs/architecture.md says how to add a
row).
"""
import contextlib
from typing import Any, Dict, Iterator, List, Optional

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import _C, ops
from .ops import _pair

__all__ = ["explain", "portable", "tables", "trace"]

_OPS = ("matmul", "linear", "conv2d", "conv1d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def tables() -> List[Dict[str, Any]]:
    """Every routing table this build has, in order: {"op", "summary", "rows": [{"name", "when", "doc"}]}.
    doc is a page (and anchor) under docs/."""
    return [dict(t) for t in _C._routing_tables()]


def explain(op_name: str, *args: Any, backward: Optional[bool] = None, **kwargs: Any) -> List[Dict[str, Any]]:
    """The routing decisions a call of tileops.<op_name>(*args, **kwargs) would make, without
    launching anything: one dict per problem handed to a table, in call order, each
        {"op": table, "problem": one line, "passed_over": [(candidate, reason), ...],
         "kernel": the candidate chosen, "doc": its page, "config": its config ("" if none),
         "why": why that config, "lowered": [the problems it hands to other tables, same form]}.
    backward (default: whether any tensor argument requires grad) adds the problems of the
    gradients (every input's). Inputs are taken as given (no autocast). Errors are the op's own."""
    if op_name not in _OPS:
        raise ValueError("tileops.explain: op_name must be one of %s, got %r" % (", ".join(_OPS), op_name))
    if backward is None:
        tensors = list(args) + list(kwargs.values())
        backward = any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)
    with torch.no_grad():
        if op_name == "matmul":
            return _explain_matmul(*args, backward=backward, **kwargs)
        if op_name == "linear":
            return _explain_linear(*args, backward=backward, **kwargs)
        if op_name != "conv2d":  # the rest of the conv family, made of conv2d's calls
            return _explain_composite(op_name, args, kwargs, backward)
        return _explain_conv2d(*args, backward=backward, **kwargs)


def _explain_matmul(a, b, algo="auto", *, backward):
    return [dict(d) for d in _C._explain_matmul(a, b, algo, backward)]


def _explain_linear(x, weight, bias=None, activation="none", residual=None, *, backward):
    return [dict(d) for d in _C._explain_linear(x, weight, bias, activation, residual, backward)]


def _explain_conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, activation="none",
                    residual=None, *, backward):
    if isinstance(padding, str):  # tileops.conv2d's 'same' / 'valid', as it resolves them
        if padding == "valid":
            padding = 0
        elif padding == "same":
            d = _pair(dilation, "dilation")
            padding = tuple(d[i] * (weight.shape[2 + i] - 1) // 2 for i in range(2))
        else:
            raise ValueError("tileops.explain: expected padding to be 'valid', 'same' or ints, got %r" % padding)
    return [dict(d) for d in _C._explain_conv2d(x, weight, bias, list(_pair(stride, "stride")),
                                                list(_pair(padding, "padding")), list(_pair(dilation, "dilation")),
                                                groups, activation, residual, backward)]


class _Calls(TorchDispatchMode):
    """The conv2d and _conv2d_backward calls that run below it, with their arguments, in order."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.ops.tileops.conv2d.default, torch.ops.tileops._conv2d_backward.default):
            # every argument, the defaults the dispatcher leaves out included
            self.calls.append((func, [args[i] if i < len(args) else kwargs.get(a.name, a.default_value)
                                      for i, a in enumerate(func._schema.arguments)]))
        return func(*args, **kwargs)


def _explain_composite(op, args, kwargs, backward):
    """A composite conv's decisions (csrc/ops/conv_family.cpp): the conv2d and _conv2d_backward calls
    it makes, found by running it (and, with backward, its gradients) on fake tensors, each then
    explained on empty tensors of the shapes and strides it was handed. Nothing is computed, and the
    composite's own reshapes decide the layouts, so this cannot drift from what a real call runs."""
    device = next(a.device for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor))
    with FakeTensorMode() as mode:
        def fake(a):
            if not isinstance(a, torch.Tensor):
                return a
            f = mode.from_tensor(a)
            return f.requires_grad_() if backward and f.is_floating_point() else f

        fargs, fkwargs = [fake(a) for a in args], {k: fake(v) for k, v in kwargs.items()}
        with torch.enable_grad(), _Calls() as seen:
            y = getattr(ops, op)(*fargs, **fkwargs)
            if backward:
                leaves = [t for t in fargs + list(fkwargs.values()) if isinstance(t, torch.Tensor) and t.requires_grad]
                torch.autograd.grad(y, leaves, torch.empty_like(y))

    def real(t):  # an empty tensor on the caller's device with a fake one's shape, strides and dtype
        return t if not isinstance(t, torch.Tensor) else torch.empty_strided(t.shape, t.stride(), dtype=t.dtype,
                                                                               device=device)

    out = []
    for func, a in seen.calls:
        a = [real(v) for v in a]
        if func is torch.ops.tileops.conv2d.default:
            x, w, b, st, pd, dl, groups, act, res = a
            ds = _C._explain_conv2d(x, w, b, list(st), list(pd), list(dl), groups, act, res, False)
        else:
            gy, x, w, st, pd, dl, groups, mask = a
            ds = _C._explain_conv2d_backward(gy, x, w, list(st), list(pd), list(dl), groups, list(mask))
        out += [dict(d) for d in ds]
    return out


def portable() -> bool:
    """Whether this process routes every op as on a GPU before Hopper (TILEOPS_PORTABLE=1, read at the
    first call that asks): no TMA, wgmma, clusters or dependent launches, so an H100 runs the kernels
    an A100 or an RTX 4090 would (docs/dispatch.md#tileops_portable1-the-pre-hopper-routes)."""
    return bool(_C._portable_only())


@contextlib.contextmanager
def trace(on: bool = True) -> Iterator[None]:
    """Logs each routed problem (the problem, the candidates passed over and why, the one chosen,
    and its config) to stderr inside the block, as TILEOPS_TRACE=1 does for a whole process."""
    before = _C._route_tracing()
    _C._route_trace(on)
    try:
        yield
    finally:
        _C._route_trace(before)
