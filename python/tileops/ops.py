"""Functional API and fake (meta) kernels for the tileops ops.

The ops themselves are defined in C++ (csrc/tileops.cpp: one schema file) and implemented
for CPU and CUDA there; autocast and autograd (csrc/ops/autograd.cpp: every backward made of
tileops ops) are C++ too, so a call runs no Python beyond its wrapper. This module adds what
torch.compile and torch.export need: a fake kernel per op.
"""
import operator
from typing import Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch._prims_common import suggest_memory_format
from torch.fx.experimental.symbolic_shapes import statically_known_true

ACTIVATIONS = ("none", "relu", "gelu", "silu")
_IntPair = Union[int, Sequence[int]]
_IntSingle = Union[int, Sequence[int]]
_IntTriple = Union[int, Sequence[int]]


def _ints(v, name, op, counts):
    """v as a tuple of ints (numpy and Sym ints too, never floats) of a length in counts (1, 1-2 or 1-3)."""
    items = tuple(v) if isinstance(v, (tuple, list, torch.Size)) else (v,)
    try:
        items = tuple(operator.index(e) for e in items)
    except TypeError:
        items = ()
    if len(items) not in counts:
        what = {2: "an int or a pair of ints", 3: "an int or three ints"}.get(max(counts), "an int or a list of one int")
        raise ValueError("tileops.%s: expected %s to be %s, got %r" % (op, name, what, v))
    return items


def _pair(v, name, op="conv2d") -> Tuple[int, int]:
    if type(v) is int:  # the common cases first: this runs on every call (bench_overhead.py)
        return (v, v)
    if type(v) is tuple and len(v) == 2 and type(v[0]) is int and type(v[1]) is int:
        return v
    items = _ints(v, name, op, (1, 2))
    return (items[0], items[-1])


def _single(v, name, op) -> Tuple[int]:
    return (v,) if type(v) is int else _ints(v, name, op, (1,))


def _triple(v, name, op) -> Tuple[int, int, int]:
    items = (v,) if type(v) is int else _ints(v, name, op, (1, 3))
    return items * 3 if len(items) == 1 else items


def _string_padding(op, x, weight, padding, stride, dilation):
    """padding='valid' / 'same' of a conv over the len(stride) last dims as ints: (x, padding). An
    odd 'same' total puts the extra one after (bottom/right), as torch does: x is padded then."""
    n = len(stride)
    if padding == "valid":
        return x, (0,) * n
    if padding != "same":
        raise ValueError("tileops.%s: expected padding to be 'valid', 'same' or ints, got %r" % (op, padding))
    if any(s != 1 for s in stride):
        raise ValueError("tileops.%s: padding='same' is not supported for strided convolutions" % op)
    total = [dilation[i] * (weight.shape[2 + i] - 1) for i in range(n)]
    left = [t // 2 for t in total]
    extra = [t - 2 * lt for t, lt in zip(total, left)]
    if any(extra):  # odd total: one more on the bottom/right, as torch does
        x = F.pad(x, [p for e in reversed(extra) for p in (0, e)])
    return x, tuple(left)


# The kernel ladder, slowest first (`algo=` of matmul); ALGO_ALIASES: earlier names, still accepted.
ALGOS = ("auto", "naive", "tiled", "tiled_padded", "register", "vectorized", "mma", "wgmma")
ALGO_ALIASES = {"simt": "register", "wmma": "mma"}


def matmul(a: torch.Tensor, b: torch.Tensor, algo: str = "auto") -> torch.Tensor:
    """a @ b for 2-D or batched operands (batch dims broadcast as torch.matmul); any strides.

    algo pins a CUDA kernel, one rung of the ladder (benchmarks/bench_matmul.py times each):

    - 'naive': one thread per output, operands read straight from global memory.
    - 'tiled': 32x32 shared-memory tiles, one output per thread.
    - 'tiled_padded': the same with +1 padding on the shared-memory rows.
    - 'register' (alias 'simt'): 64x64x16 tiles, 4x4 outputs per thread.
    - 'vectorized': 128x128x16 tiles, 8x8 outputs per thread in a warp tiling, 16-byte
      loads into double-buffered shared memory; the fast exact-fp32 kernel.
    - 'mma' (alias 'wmma'): tensor cores through mma.sync fed by ldmatrix (any GPU from
      sm_80); 128x128 tiles where they fill the SMs, else 64x64 tiles with split-K; float32
      runs as TF32 whatever the TF32 flag says; no float64.
    - 'wgmma': Hopper (sm_90a) TMA + wgmma; float16, bfloat16, and float32 as TF32 (rounded
      to nearest; whatever the TF32 flag says, as 'mma').

    The SIMT rungs (naive ... vectorized) take every dtype (float64 accumulates in float64,
    the others in float32) and any layout. 'auto' picks by dtype, GPU and layout: wgmma for
    float16/bfloat16 and TF32 on Hopper (mma for small problems that wgmma would first have to
    copy: TF32 up to 2^27 multiply-adds, unaligned float16/bfloat16 up to 2^25), mma for them
    elsewhere, vectorized for float32 with TF32 off (register when fewer 128x128 tiles than
    SMs), register for float64; for M <= 16 a skinny kernel bound by reading b once (on Hopper
    float16/bfloat16 and float32 with TF32 allowed on tensor cores, where the rows are 16-byte
    aligned; float32/float64 on CUDA cores otherwise). It is the
    only choice on the CPU. A rung that cannot run a problem raises an
    error saying why."""
    return torch.ops.tileops.matmul.default(a, b, algo)


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    activation: str = "none",
    residual: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """activation(x @ weight.T + bias + residual) in one kernel; activation in 'none', 'relu', 'gelu',
    'silu'. residual (optional): exactly the output's shape, x's dtype and device, any strides."""
    return torch.ops.tileops.linear.default(x, weight, bias, activation, residual)


def conv2d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    stride: _IntPair = 1,
    padding: Union[_IntPair, str] = 0,
    dilation: _IntPair = 1,
    groups: int = 1,
    activation: str = "none",
    residual: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """activation(conv2d(x, weight) + bias + residual), as F.conv2d; NCHW or channels_last, output in
    x's format. residual (optional, e.g. ResNet's identity): exactly the output's shape, x's dtype and
    device, any strides (one in the output's memory format is read in place, others are copied).

    padding may be an int, a pair, 'valid' or 'same' (stride 1 only, as in torch)."""
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    if isinstance(padding, str):
        x, padding = _string_padding("conv2d", x, weight, padding, stride, dilation)
    return torch.ops.tileops.conv2d.default(
        x, weight, bias, stride, _pair(padding, "padding"), dilation, groups, activation, residual
    )


def conv1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    stride: _IntSingle = 1,
    padding: Union[_IntSingle, str] = 0,
    dilation: _IntSingle = 1,
    groups: int = 1,
    activation: str = "none",
    residual: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """activation(conv1d(x, weight) + bias + residual), as F.conv1d; x (N, C, L) or (C, L), weight
    (out_channels, in_channels/groups, kL). Runs as conv2d with H = 1 (views of x, weight and
    residual, no copies), so on conv2d's kernels, fused epilogue included; an (N, C, L) x with
    stride(1) == 1 (channels last) gives an output of that layout too.

    padding may be an int, 'valid' or 'same' (stride 1 only, as in torch)."""
    stride, dilation = _single(stride, "stride", "conv1d"), _single(dilation, "dilation", "conv1d")
    if isinstance(padding, str):
        x, padding = _string_padding("conv1d", x, weight, padding, stride, dilation)
    return torch.ops.tileops.conv1d.default(
        x, weight, bias, stride, _single(padding, "padding", "conv1d"), dilation, groups, activation, residual
    )


def conv_transpose2d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    stride: _IntPair = 1,
    padding: _IntPair = 0,
    output_padding: _IntPair = 0,
    groups: int = 1,
    dilation: _IntPair = 1,
    activation: str = "none",
    residual: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """activation(conv_transpose2d(x, weight) + bias + residual), as F.conv_transpose2d (its argument
    order); x (N, C_in, H, W) or (C_in, H, W), weight (C_in, C_out/groups, kH, kW); NCHW or
    channels_last, output in x's format.

    The transposed conv is conv2d's data gradient with x as its grad_out, so it runs conv2d's
    grad_input kernels; its gradients are a conv2d forward (for x) and conv2d's grad_weight (for
    weight). Bias, residual and activation are NOT fused: torch's elementwise ops apply them after
    (in place when no gradient is recorded). output_padding must be smaller than stride or
    dilation (as torch); where it is not smaller than stride, x is copied with zero rows added."""
    op = "conv_transpose2d"
    return torch.ops.tileops.conv_transpose2d.default(
        x, weight, bias, _pair(stride, "stride", op), _pair(padding, "padding", op),
        _pair(output_padding, "output_padding", op), groups, _pair(dilation, "dilation", op), activation, residual
    )


def conv_transpose1d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    stride: _IntSingle = 1,
    padding: _IntSingle = 0,
    output_padding: _IntSingle = 0,
    groups: int = 1,
    dilation: _IntSingle = 1,
    activation: str = "none",
    residual: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """activation(conv_transpose1d(x, weight) + bias + residual), as F.conv_transpose1d; x (N, C_in, L)
    or (C_in, L), weight (C_in, C_out/groups, kL). conv_transpose2d with H = 1 (views only): its
    kernels, and its unfused bias, residual and activation."""
    op = "conv_transpose1d"
    return torch.ops.tileops.conv_transpose1d.default(
        x, weight, bias, _single(stride, "stride", op), _single(padding, "padding", op),
        _single(output_padding, "output_padding", op), groups, _single(dilation, "dilation", op), activation, residual
    )


def conv3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    stride: _IntTriple = 1,
    padding: Union[_IntTriple, str] = 0,
    dilation: _IntTriple = 1,
    groups: int = 1,
    activation: str = "none",
    residual: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """activation(conv3d(x, weight) + bias + residual), as F.conv3d; x (N, C, D, H, W) or (C, D, H, W),
    weight (out_channels, in_channels/groups, kD, kH, kW); NCDHW or channels_last_3d, output in x's
    format. Runs as one conv2d over (batch x output depth) whose input channels are (channel, depth
    tap), so on conv2d's kernels with its fused epilogue; x's depth taps are gathered into channels
    first (a copy of x per depth tap; none for a kD = 1 kernel, unstrided and unpadded in depth, on a
    channels_last_3d x).

    padding may be an int, three ints, 'valid' or 'same' (stride 1 only, as in torch)."""
    op = "conv3d"
    stride, dilation = _triple(stride, "stride", op), _triple(dilation, "dilation", op)
    if isinstance(padding, str):
        x, padding = _string_padding(op, x, weight, padding, stride, dilation)
    return torch.ops.tileops.conv3d.default(
        x, weight, bias, stride, _triple(padding, "padding", op), dilation, groups, activation, residual
    )


def conv_transpose3d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    stride: _IntTriple = 1,
    padding: _IntTriple = 0,
    output_padding: _IntTriple = 0,
    groups: int = 1,
    dilation: _IntTriple = 1,
    activation: str = "none",
    residual: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """activation(conv_transpose3d(x, weight) + bias + residual), as F.conv_transpose3d; x (N, C_in, D,
    H, W) or (C_in, D, H, W), weight (C_in, C_out/groups, kD, kH, kW); NCDHW or channels_last_3d,
    output in x's format. Runs as one conv_transpose2d over (batch x input depth) whose output channels
    are (channel, depth tap), each tap then added into the output depths it reaches; bias, residual and
    activation unfused, as conv_transpose2d's."""
    op = "conv_transpose3d"
    return torch.ops.tileops.conv_transpose3d.default(
        x, weight, bias, _triple(stride, "stride", op), _triple(padding, "padding", op),
        _triple(output_padding, "output_padding", op), groups, _triple(dilation, "dilation", op), activation, residual
    )


# ---------------------------------------------------------------------------------------
# Fake kernels: shapes, dtypes and strides exactly as the real kernels produce them.


@torch.library.register_fake("tileops::matmul")
def _matmul_fake(a, b, algo="auto"):
    torch._check(a.dim() >= 2 and b.dim() >= 2, lambda: "tileops.matmul: expected operands of at least 2-D")
    torch._check(a.shape[-1] == b.shape[-2], lambda: "tileops.matmul: inner dimensions differ")
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return a.new_empty((*batch, a.shape[-2], b.shape[-1]))


def _check_residual_fake(op, residual, out):
    if residual is not None:
        torch._check(
            residual.shape == out.shape,
            lambda: "tileops.%s: expected residual of the output's shape %s, got %s" % (op, tuple(out.shape), tuple(residual.shape)),
        )
    return out


@torch.library.register_fake("tileops::linear")
def _linear_fake(x, weight, bias=None, activation="none", residual=None):
    torch._check(weight.dim() == 2, lambda: "tileops.linear: expected weight to be 2-D")
    torch._check(x.shape[-1] == weight.shape[1], lambda: "tileops.linear: x and weight disagree on in_features")
    return _check_residual_fake("linear", residual, x.new_empty((*x.shape[:-1], weight.shape[0])))


def _conv_out_hw(h, w, weight, stride, padding, dilation):
    r, s = weight.shape[2], weight.shape[3]
    p = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    q = (w + 2 * padding[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1
    return p, q


def _known_true(cond):
    return cond if isinstance(cond, bool) else statically_known_true(cond)


def _empty_like_format(shape, like):
    return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=suggest_memory_format(like))


@torch.library.register_fake("tileops::conv2d")
def _conv2d_fake(
    x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, activation="none", residual=None
):
    stride, padding, dilation = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    xx = x.unsqueeze(0) if x.dim() == 3 else x
    p, q = _conv_out_hw(xx.shape[2], xx.shape[3], weight, stride, padding, dilation)
    y = _empty_like_format((xx.shape[0], weight.shape[0], p, q), xx)
    return _check_residual_fake("conv2d", residual, y.squeeze(0) if x.dim() == 3 else y)


@torch.library.register_fake("tileops::_conv2d_backward")
def _conv2d_backward_fake(grad_out, x, weight, stride, padding, dilation, groups, output_mask):
    # grad_input in x's memory format, in grad_out's where x is conv_transpose2d's placeholder (stride 0
    # wherever the size is above 1: ops/conv2d.cpp is_placeholder)
    like = grad_out if all(_known_true(n <= 1) or _known_true(s == 0) for n, s in zip(x.shape, x.stride())) else x
    gx = _empty_like_format(x.shape, like) if output_mask[0] else x.new_empty((0,))
    gw = _empty_like_format(weight.shape, weight) if output_mask[1] else x.new_empty((0,))
    gb = x.new_empty((weight.shape[0],)) if output_mask[2] else x.new_empty((0,))
    return gx, gw, gb
