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
from torch._prims_common import suggest_memory_format
from torch._subclasses.fake_tensor import FakeTensorMode

from . import _C
from .ops import _pair, _single

__all__ = ["explain", "tables", "trace"]

_OPS = ("matmul", "linear", "conv2d", "conv1d", "conv_transpose1d", "conv_transpose2d")


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
        if op_name == "conv1d":
            return _explain_conv1d(*args, backward=backward, **kwargs)
        if op_name.startswith("conv_transpose"):
            return _explain_conv_transpose(op_name, *args, backward=backward, **kwargs)
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


def _explain_conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, activation="none",
                    residual=None, *, backward):
    """conv1d's decisions: those of the conv2d with H = 1 it runs (csrc/ops/conv_family.cpp)."""
    op = "conv1d"
    stride, dilation = _single(stride, "stride", op)[0], _single(dilation, "dilation", op)[0]
    padding = padding if isinstance(padding, str) else (0, _single(padding, "padding", op)[0])
    d = x.dim() - 1
    return _explain_conv2d(x.unsqueeze(d), weight.unsqueeze(2), bias, (1, stride), padding, (1, dilation), groups,
                           activation, None if residual is None else residual.unsqueeze(d), backward=backward)


def _explain_conv_transpose(op, x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                            activation="none", residual=None, *, backward):
    """A transposed conv's decisions: conv2d's data gradient with x as grad_out (its forward), then, for its
    gradients, conv2d of the output's gradient (x's) and conv2d's weight gradient (weight's), as
    csrc/ops/conv_family.cpp and Conv2dBackwardFn run them. Bias, residual and activation route nothing."""
    n = _single if op == "conv_transpose1d" else _pair
    st, pd, opd, dl = (list(n(v, name, op)) for v, name in ((stride, "stride"), (padding, "padding"),
                                                             (output_padding, "output_padding"), (dilation, "dilation")))
    with FakeTensorMode() as mode:  # the op's own checks and output shape, nothing run
        fake = [None if t is None else mode.from_tensor(t) for t in (x, weight, bias, residual)]
        out = tuple(getattr(torch.ops.tileops, op)(*fake[:3], st, pd, opd, groups, dl, activation, fake[3]).shape)
    if op == "conv_transpose1d":  # conv_transpose2d with H = 1
        d = x.dim() - 1
        x, weight, out = x.unsqueeze(d), weight.unsqueeze(2), (*out[:d], 1, out[d])
        st, pd, opd, dl = [1] + st, [0] + pd, [0] + opd, [1] + dl
    if x.dim() == 3:
        x, out = x.unsqueeze(0), (1, *out)
    fmt = suggest_memory_format(x)
    gy = x
    if any(o >= s for o, s in zip(opd, st)):  # x with zero rows added (the op's one copy)
        rows = [x.shape[2 + i] + opd[i] // st[i] for i in range(2)]
        gy = torch.empty((*x.shape[:2], *rows), dtype=x.dtype, device=x.device, memory_format=fmt)
    placeholder = x.new_empty(1).as_strided(out, (0, 0, 0, 0))
    ds = list(_C._explain_conv2d_backward(gy, placeholder, weight, st, pd, dl, groups, [True, False, False]))
    if backward:
        g = torch.empty(out, dtype=x.dtype, device=x.device, memory_format=fmt)  # the output's gradient
        ds += _C._explain_conv2d(g, weight, None, st, pd, dl, groups, "none", None, False)  # x's gradient
        ds += _C._explain_conv2d_backward(gy, g, weight, st, pd, dl, groups, [False, True, False])  # weight's
    return [dict(d) for d in ds]


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
