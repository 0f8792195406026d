"""Drop-in modules (same constructor arguments, parameters and state_dict keys as torch's)
and convert(), which swaps a model's nn.Linear, Conv1d / 2d / 3d and ConvTranspose1d / 2d / 3d for
them with weights kept."""
import fnmatch
from typing import Callable, Iterable, Optional, Union

import torch
import torch.nn.functional as F

from . import ops


def _check_activation(activation):
    if activation not in ops.ACTIVATIONS:
        raise ValueError("tileops: expected activation in %s, got %r" % (ops.ACTIVATIONS, activation))
    return activation


class Linear(torch.nn.Linear):
    """torch.nn.Linear computed by tileops.linear, with an optional fused activation."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, activation="none"):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = _check_activation(activation)

    def forward(self, x, residual=None):
        """activation(x @ weight.T + bias + residual); residual: optional, the output's shape."""
        return self._forward(x, residual, self.activation)

    def _forward(self, x, residual, activation):
        return ops.linear(x, self.weight, self.bias, activation, residual)

    def extra_repr(self):
        s = super().extra_repr()
        return s if self.activation == "none" else s + ", activation=%s" % self.activation

    @classmethod
    def from_module(cls, m: torch.nn.Linear, activation: str = "none") -> "Linear":
        """A tileops Linear sharing m's parameters (the same Parameter objects)."""
        new = cls(m.in_features, m.out_features, bias=m.bias is not None, device="meta", activation=activation)
        new.weight, new.bias = m.weight, m.bias
        new.train(m.training)
        return new


class _Conv:
    """What the conv drop-ins share: torch's constructor arguments plus `activation`, its repr, and
    from_module. A subclass names its functional op (`_op`) and, for a transposed conv, takes
    forward's output_size as torch does."""

    def _set_activation(self, activation):
        self.activation = _check_activation(activation)

    def extra_repr(self):
        s = super().extra_repr()
        return s if self.activation == "none" else s + ", activation=%s" % self.activation

    @classmethod
    def from_module(cls, m, activation: str = "none"):
        """A tileops module of m's kind sharing m's parameters (the same Parameter objects)."""
        kw = dict(stride=m.stride, padding=m.padding, dilation=m.dilation, groups=m.groups, bias=m.bias is not None,
                  padding_mode=m.padding_mode)
        if m.transposed:
            kw["output_padding"] = m.output_padding
        new = cls(m.in_channels, m.out_channels, m.kernel_size, device="meta", activation=activation, **kw)
        new.weight, new.bias = m.weight, m.bias
        new.train(m.training)
        return new


class _ConvN(_Conv):
    """Conv1d / 2d / 3d: padding_mode other than 'zeros' pads explicitly, as torch does."""

    def forward(self, x, residual=None):
        """activation(conv(x) + bias + residual); residual: optional, the output's shape."""
        return self._forward(x, residual, self.activation)

    def _forward(self, x, residual, activation):
        padding = self.padding
        if self.padding_mode != "zeros":  # as torch: pad explicitly, then a conv without padding
            x = F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = 0
        return self._op(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups, activation,
                        residual)


class _ConvTransposeN(_Conv):
    """ConvTranspose1d / 2d / 3d: output_size at call time picks output_padding, as torch's forward does."""

    def forward(self, x, output_size=None, residual=None):
        """activation(conv_transpose(x) + bias + residual); output_size as torch (None: the smallest);
        residual: optional, the output's shape. The bias, residual and activation are not fused."""
        if self.padding_mode != "zeros":
            raise ValueError("tileops.nn.%s: only padding_mode='zeros' is supported, as in torch" % type(self).__name__)
        n = len(self.stride)
        output_padding = self._output_padding(x, output_size, self.stride, self.padding, self.kernel_size, n,
                                              self.dilation)
        return self._op(x, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                        self.dilation, self.activation, residual)


class Conv2d(_ConvN, torch.nn.Conv2d):
    """torch.nn.Conv2d computed by tileops.conv2d, with an optional fused activation."""

    _op = staticmethod(ops.conv2d)

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
        activation="none",
    ):
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, device, dtype
        )
        self._set_activation(activation)


class Conv1d(_ConvN, torch.nn.Conv1d):
    """torch.nn.Conv1d computed by tileops.conv1d (conv2d's kernels), with an optional fused activation."""

    _op = staticmethod(ops.conv1d)

    def __init__(self, *args, activation="none", **kwargs):
        super().__init__(*args, **kwargs)  # torch.nn.Conv1d's arguments, unchanged
        self._set_activation(activation)


class ConvTranspose2d(_ConvTransposeN, torch.nn.ConvTranspose2d):
    """torch.nn.ConvTranspose2d computed by tileops.conv_transpose2d (conv2d's grad_input kernels), with
    an optional activation (applied after, unfused)."""

    _op = staticmethod(ops.conv_transpose2d)

    def __init__(self, *args, activation="none", **kwargs):
        super().__init__(*args, **kwargs)  # torch.nn.ConvTranspose2d's arguments, unchanged
        self._set_activation(activation)


class ConvTranspose1d(_ConvTransposeN, torch.nn.ConvTranspose1d):
    """torch.nn.ConvTranspose1d computed by tileops.conv_transpose1d, with an optional activation
    (applied after, unfused)."""

    _op = staticmethod(ops.conv_transpose1d)

    def __init__(self, *args, activation="none", **kwargs):
        super().__init__(*args, **kwargs)  # torch.nn.ConvTranspose1d's arguments, unchanged
        self._set_activation(activation)


class Conv3d(_ConvN, torch.nn.Conv3d):
    """torch.nn.Conv3d computed by tileops.conv3d (one conv2d over batch x depth), with an optional fused
    activation."""

    _op = staticmethod(ops.conv3d)

    def __init__(self, *args, activation="none", **kwargs):
        super().__init__(*args, **kwargs)  # torch.nn.Conv3d's arguments, unchanged
        self._set_activation(activation)


class ConvTranspose3d(_ConvTransposeN, torch.nn.ConvTranspose3d):
    """torch.nn.ConvTranspose3d computed by tileops.conv_transpose3d (one conv_transpose2d over batch x
    depth), with an optional activation (applied after, unfused)."""

    _op = staticmethod(ops.conv_transpose3d)

    def __init__(self, *args, activation="none", **kwargs):
        super().__init__(*args, **kwargs)  # torch.nn.ConvTranspose3d's arguments, unchanged
        self._set_activation(activation)


# Exactly these types are swapped; subclasses with their own forward are left alone.
_SWAPS = {
    torch.nn.Linear: Linear,
    torch.nn.modules.linear.NonDynamicallyQuantizableLinear: Linear,
    torch.nn.Conv2d: Conv2d,
    torch.nn.Conv1d: Conv1d,
    torch.nn.ConvTranspose1d: ConvTranspose1d,
    torch.nn.ConvTranspose2d: ConvTranspose2d,
    torch.nn.Conv3d: Conv3d,
    torch.nn.ConvTranspose3d: ConvTranspose3d,
}

Filter = Union[None, Iterable[str], Callable[[str, torch.nn.Module], bool]]


def _matches(flt: Filter, name: str, module: torch.nn.Module) -> Optional[bool]:
    if flt is None:
        return None
    if callable(flt):
        return bool(flt(name, module))
    if isinstance(flt, str):
        flt = [flt]
    return any(fnmatch.fnmatchcase(name, pat) for pat in flt)


def convert(model: torch.nn.Module, include: Filter = None, exclude: Filter = None) -> torch.nn.Module:
    """Swap every nn.Linear, Conv1d / 2d / 3d and ConvTranspose1d / 2d / 3d in `model` (in place) for the
    tileops.nn module of the same name.

    Parameters are shared, not copied, so weights, optimizers and state_dict keys are kept.
    include / exclude: glob patterns over qualified module names (as in named_modules(),
    e.g. "blocks.*.mlp.*"), or a callable (name, module) -> bool. A module is swapped when it
    matches include (default: all) and does not match exclude. Returns the model (or the
    swapped module when `model` itself is one of them). A transposed conv's forward takes
    output_size as torch's does.
    """

    def wanted(name, module):
        if type(module) not in _SWAPS:
            return False
        if _matches(include, name, module) is False:
            return False
        return not _matches(exclude, name, module)

    if wanted("", model):
        return _SWAPS[type(model)].from_module(model)
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = child_name if not name else name + "." + child_name
            if wanted(full, child):
                setattr(module, child_name, _SWAPS[type(child)].from_module(child))
    return model
