"""fuse_for_inference: a model's graph with BatchNorm folded into the convs before it, and the
activation and residual add that follow a conv or linear computed in its epilogue.

    model.eval()
    fast = tileops.fuse_for_inference(model)    # a torch.fx.GraphModule; model is left as it is

Patterns, each optional after the conv/linear: BatchNorm2d (convs only, folded into the weights),
then `+ other` (the residual), then relu / gelu / silu (modules, functionals or methods). An
intermediate value used anywhere else stops the fusion there. Every other nn.Linear / nn.Conv2d
is swapped for its tileops module, as convert() does. The residual is fused when, at run time,
it has exactly the output's shape and the dtype the op computes in (so autocast's float32
residual streams stay float32); otherwise the add runs separately, as in the original.

The model must be traceable by torch.fx (no data-dependent control flow, no iteration over
shapes) and in eval mode: folding uses BatchNorm's running statistics.
"""
import copy
import operator

import torch
import torch.fx as fx
import torch.nn.functional as F

from . import nn as tnn
from . import ops

_ACT_FUNCTIONS = {F.relu: "relu", torch.relu: "relu", F.gelu: "gelu", F.silu: "silu"}
_ACT_METHODS = {"relu": "relu"}
_ACT_MODULES = {torch.nn.ReLU: "relu", torch.nn.GELU: "gelu", torch.nn.SiLU: "silu"}
_ACT_APPLY = {"none": lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu}
_OPS = (torch.nn.Linear, torch.nn.Conv2d)  # traced as leaves, subclasses too
# Fused are exactly these types (as convert() swaps): a subclass may have its own forward.
# (Not yet the rest of the conv family: conv1d and the transposed convs, whose output shapes and
# BatchNorm folding this module does not compute.)
_FUSABLE = {k: v for k, v in {**tnn._SWAPS, tnn.Linear: tnn.Linear, tnn.Conv2d: tnn.Conv2d}.items()
            if v in (tnn.Linear, tnn.Conv2d)}


class _Tracer(fx.Tracer):
    def is_leaf_module(self, m, qualname):
        return isinstance(m, _OPS) or super().is_leaf_module(m, qualname)


class FusedOp(torch.nn.Module):
    """activation(op(x) + residual) in one tileops kernel; where the residual does not fit at run
    time (broadcast, another dtype or device), the op, the add and the activation run apart."""

    def __init__(self, op):
        super().__init__()
        self.op = op  # a tileops Linear or Conv2d carrying the activation

    def forward(self, x, residual=None):
        if residual is None or self._fits(x, residual):
            return self.op(x, residual)
        return _ACT_APPLY[self.op.activation](self.op._forward(x, None, "none") + residual)

    def _fits(self, x, r):
        if not isinstance(r, torch.Tensor) or r.device != x.device or r.dtype != _compute_dtype(x):
            return False
        return tuple(r.shape) == self._out_shape(x)

    def _out_shape(self, x):
        m = self.op
        if isinstance(m, torch.nn.Linear):
            return (*x.shape[:-1], m.out_features)
        if m.padding == "same":  # stride 1: the size is kept
            hw = tuple(x.shape[-2:])
        else:
            padding = (0, 0) if m.padding == "valid" else m.padding
            hw = ops._conv_out_hw(*x.shape[-2:], m.weight, m.stride, padding, m.dilation)
        return (*x.shape[:-3], m.out_channels, *hw)

    def extra_repr(self):
        return "residual fused when it fits"


def _compute_dtype(x):
    """The dtype the op computes in: autocast's for float32/16 inputs where it is on, else x's."""
    kind = x.device.type
    if x.dtype != torch.float64 and torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return x.dtype


def _fold_bn(conv, bn):
    """A conv computing bn(conv(x)) with bn's running statistics (in float64, cast back)."""
    scale = bn.weight.double() if bn.weight is not None else torch.ones_like(bn.running_var, dtype=torch.float64)
    shift = bn.bias.double() if bn.bias is not None else torch.zeros_like(scale)
    scale = scale / torch.sqrt(bn.running_var.double() + bn.eps)
    bias = conv.bias.double() if conv.bias is not None else torch.zeros_like(scale)
    new = copy.deepcopy(conv)
    w = conv.weight.double() * scale.reshape(-1, 1, 1, 1)
    new.weight = torch.nn.Parameter(w.to(conv.weight.dtype), requires_grad=False)
    new.bias = torch.nn.Parameter(((bias - bn.running_mean.double()) * scale + shift).to(conv.weight.dtype),
                                  requires_grad=False)
    return new


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _activation(node, modules):
    if node.op == "call_function" and node.target in _ACT_FUNCTIONS:
        if node.kwargs.get("approximate", "none") != "none" or len(node.args) > 1 + (node.target is F.gelu):
            return None
        return _ACT_FUNCTIONS[node.target]
    if node.op == "call_method" and node.target in _ACT_METHODS and len(node.args) == 1 and not node.kwargs:
        return _ACT_METHODS[node.target]
    if node.op == "call_module" and type(modules[node.target]) in _ACT_MODULES:
        m = modules[node.target]
        return None if getattr(m, "approximate", "none") != "none" else _ACT_MODULES[type(m)]
    return None


def _residual(node, src):
    """The other operand when node is `src + other` (or other + src) of two graph values."""
    if node.op != "call_function" or node.target not in (operator.add, torch.add, operator.iadd) or node.kwargs:
        return None
    if len(node.args) != 2:
        return None
    a, b = node.args
    other = b if a is src else a if b is src else None
    return other if isinstance(other, fx.Node) and other is not src else None


def _foldable_bn(m):
    return (isinstance(m, torch.nn.BatchNorm2d) and not m.training and m.track_running_stats
            and m.running_mean is not None)


def fuse_for_inference(model: torch.nn.Module) -> fx.GraphModule:
    """An fx.GraphModule computing model(x) with BatchNorm folded and epilogues fused (see the
    module docstring). model must be in eval mode; it is not changed (parameters are shared
    where nothing is folded)."""
    if model.training:
        raise ValueError("tileops.fuse_for_inference: expected a model in eval mode (call model.eval()); "
                         "folding BatchNorm uses its running statistics")
    try:
        graph = _Tracer().trace(model)
    except Exception as e:
        why = "%s: %s" % (type(e).__name__, e)
        raise RuntimeError("tileops.fuse_for_inference: torch.fx could not trace %s (%s); fuse_for_inference needs a "
                           "model without data-dependent control flow" % (type(model).__name__, why)) from e
    gm = fx.GraphModule(model, graph)
    modules = dict(gm.named_modules())
    count = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or type(modules.get(node.target)) not in _FUSABLE or node.kwargs:
            continue
        m = modules[node.target]
        if len(node.args) != 1 or getattr(m, "activation", "none") != "none":
            continue
        if isinstance(m, torch.nn.Conv2d) and m.padding_mode != "zeros":
            continue
        chain, last = [], node
        nxt = _only_user(last)
        bn = modules[nxt.target] if nxt is not None and nxt.op == "call_module" else None
        if isinstance(m, torch.nn.Conv2d) and _foldable_bn(bn):
            m = _fold_bn(m, bn)
            chain.append(nxt)
            last, nxt = nxt, _only_user(nxt)
        residual = _residual(nxt, last) if nxt is not None else None
        if residual is not None:
            chain.append(nxt)
            last, nxt = nxt, _only_user(nxt)
        act = (_activation(nxt, modules) if nxt is not None else None) or "none"
        if act != "none":
            chain.append(nxt)
            last = nxt
        op = _FUSABLE[type(m)].from_module(m, activation=act)  # parameters shared (or the folded ones)
        while "fused_%d" % count in modules:  # a name the model does not use already
            count += 1
        name = "fused_%d" % count
        modules[name] = FusedOp(op)
        gm.add_submodule(name, modules[name])
        with gm.graph.inserting_before(last):
            args = (node.args[0],) if residual is None else (node.args[0], residual)
            new = gm.graph.call_module(name, args)
        last.replace_all_uses_with(new)
        for n in reversed([node] + chain):  # users before what they use
            gm.graph.erase_node(n)
    gm.graph.lint()
    gm.recompile()
    gm.delete_all_unused_submodules()
    return gm
