"""Bad input raises an error that names the op, the argument and what was expected; never a
crash or an illegal address, and the device stays usable afterwards. Every case runs on each
device; mixed devices (CPU with CUDA) are the CUDA tests at the end, cuda:0 with cuda:1 is in
test_multigpu.py."""
import pytest
import torch

import tileops
import tileops.nn as tnn
from conftest import DEVICES

ops = torch.ops.tileops


class Make:
    """Tensor factories on one device: f = floating (randn), i = integer/bool (ones)."""

    def __init__(self, device):
        self.device = device

    def f(self, *shape, dtype=torch.float32):
        return torch.randn(shape, device=self.device).to(dtype)

    def i(self, *shape, dtype=torch.int64):
        return torch.ones(shape, dtype=dtype, device=self.device)


def conv_x(t):
    return t.f(2, 4, 8, 8)


def conv_w(t, *shape):
    return t.f(*(shape or (6, 4, 3, 3)))


def bwd(t, grad_out=None, x=None, w=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """_conv2d_backward with valid defaults: x (2, 4, 8, 8), w (6, 4, 3, 3) -> grad_out (2, 6, 6, 6)."""
    g = t.f(2, 6, 6, 6) if grad_out is None else grad_out
    x = conv_x(t) if x is None else x
    w = conv_w(t) if w is None else w
    return ops._conv2d_backward(g, x, w, list(stride), list(padding), list(dilation), groups, [True, True, True])


FLOAT_DTYPES = "float16, bfloat16, float32 or float64"

# (id, call taking a Make, regex the message must match). The messages name the op and the
# argument; the regexes check both.
CASES = [
    # ---------------------------------------------------------------- matmul
    ("mm-inner", lambda t: tileops.matmul(t.f(3, 4), t.f(5, 6)),
     r"tileops.matmul: inner dimensions differ: a is \[3, 4\] \(K=4\) but b is \[5, 6\] \(K=5\)"),
    ("mm-inner-batched", lambda t: tileops.matmul(t.f(2, 3, 4), t.f(2, 5, 6)), r"tileops.matmul: inner dimensions differ"),
    ("mm-a-1d", lambda t: tileops.matmul(t.f(4), t.f(4, 6)),
     r"tileops.matmul: expected a to have at least 2 dimensions, got shape \[4\]"),
    ("mm-a-0d", lambda t: tileops.matmul(t.f(), t.f(4, 6)),
     r"tileops.matmul: expected a to have at least 2 dimensions, got shape \[\]"),
    ("mm-b-1d", lambda t: tileops.matmul(t.f(3, 4), t.f(4)),
     r"tileops.matmul: expected b to have at least 2 dimensions, got shape \[4\]"),
    ("mm-dtype", lambda t: tileops.matmul(t.f(3, 4), t.f(4, 2, dtype=torch.float64)),
     r"tileops.matmul: expected b to have the same dtype as a \(Float\), got Double"),
    ("mm-dtype-half", lambda t: tileops.matmul(t.f(3, 4, dtype=torch.bfloat16), t.f(4, 2, dtype=torch.float16)),
     r"tileops.matmul: expected b to have the same dtype as a \(BFloat16\), got Half"),
    ("mm-batch", lambda t: tileops.matmul(t.f(2, 3, 4), t.f(3, 4, 5)),
     r"tileops.matmul: batch dimensions of a \[2, 3, 4\] and b \[3, 4, 5\] cannot be broadcast together"),
    ("mm-batch-4d", lambda t: tileops.matmul(t.f(2, 3, 3, 4), t.f(4, 4, 5)),
     r"tileops.matmul: batch dimensions of a \[2, 3, 3, 4\] and b \[4, 4, 5\] cannot be broadcast"),
    ("mm-a-int64", lambda t: tileops.matmul(t.i(3, 4), t.f(4, 2)),
     r"tileops.matmul: expected a to have a floating dtype \(%s\), got Long" % FLOAT_DTYPES),
    ("mm-b-int32", lambda t: tileops.matmul(t.f(3, 4), t.i(4, 2, dtype=torch.int32)),
     r"tileops.matmul: expected b to have a floating dtype .*, got Int"),
    ("mm-a-bool", lambda t: tileops.matmul(t.i(3, 4, dtype=torch.bool), t.f(4, 2)),
     r"tileops.matmul: expected a to have a floating dtype .*, got Bool"),
    ("mm-b-uint8", lambda t: tileops.matmul(t.f(3, 4), t.i(4, 2, dtype=torch.uint8)),
     r"tileops.matmul: expected b to have a floating dtype .*, got Byte"),
    ("mm-both-int", lambda t: tileops.matmul(t.i(3, 4), t.i(4, 2)), r"tileops.matmul: expected a to have a floating dtype"),
    ("mm-complex", lambda t: tileops.matmul(t.f(3, 4).to(torch.complex64), t.f(4, 2).to(torch.complex64)),
     r"tileops.matmul: expected a to have a floating dtype .*, got ComplexFloat"),
    ("mm-algo", lambda t: tileops.matmul(t.f(3, 4), t.f(4, 2), algo="fastest"),
     r"tileops.matmul: expected algo to be one of 'auto', 'naive', 'tiled', 'tiled_padded', 'register', "
     r"'vectorized', 'mma', 'wgmma', 'simt', 'wmma', got 'fastest'"),
    ("mm-a-sparse", lambda t: tileops.matmul(t.f(3, 4).to_sparse(), t.f(4, 2)),
     r"tileops.matmul: expected a to be a dense \(strided\) tensor, got layout Sparse"),
    ("mm-b-sparse", lambda t: tileops.matmul(t.f(3, 4), t.f(4, 2).to_sparse()),
     r"tileops.matmul: expected b to be a dense \(strided\) tensor, got layout Sparse"),
    ("mm-b-csr", lambda t: tileops.matmul(t.f(3, 4), t.f(4, 2).to_sparse_csr()),
     r"tileops.matmul: expected b to be a dense \(strided\) tensor, got layout SparseCsr"),
    ("mm-none", lambda t: tileops.matmul(None, t.f(4, 2)), r"tileops.matmul: expected a to be a tensor, got None"),
    # ---------------------------------------------------------------- linear
    ("lin-in-features", lambda t: tileops.linear(t.f(3, 5), t.f(6, 4)),
     r"tileops.linear: x has 5 features in its last dimension \(shape \[3, 5\]\) but weight expects in_features=4"),
    ("lin-in-features-3d", lambda t: tileops.linear(t.f(2, 3, 5), t.f(6, 4)), r"weight expects in_features=4"),
    ("lin-weight-3d", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4, 1)),
     r"tileops.linear: expected weight to be 2-D \(out_features, in_features\), got shape \[6, 4, 1\]"),
    ("lin-weight-1d", lambda t: tileops.linear(t.f(3, 4), t.f(4)), r"tileops.linear: expected weight to be 2-D"),
    ("lin-x-0d", lambda t: tileops.linear(t.f(), t.f(6, 4)),
     r"tileops.linear: expected x to have at least 1 dimension, got a 0-d tensor"),
    ("lin-bias-shape", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4), t.f(5)),
     r"tileops.linear: expected bias of shape \(6\), got \[5\]"),
    ("lin-bias-2d", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4), t.f(1, 6)),
     r"tileops.linear: expected bias of shape \(6\), got \[1, 6\]"),
    ("lin-weight-dtype", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4, dtype=torch.bfloat16)),
     r"tileops.linear: expected weight to have the same dtype as x \(Float\), got BFloat16"),
    ("lin-bias-dtype", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4), t.f(6, dtype=torch.float16)),
     r"tileops.linear: expected bias to have the same dtype as x \(Float\), got Half"),
    ("lin-x-int", lambda t: tileops.linear(t.i(3, 4), t.f(6, 4)),
     r"tileops.linear: expected x to have a floating dtype .*, got Long"),
    ("lin-weight-bool", lambda t: tileops.linear(t.f(3, 4), t.i(6, 4, dtype=torch.bool)),
     r"tileops.linear: expected weight to have a floating dtype .*, got Bool"),
    ("lin-bias-int", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4), t.i(6, dtype=torch.int16)),
     r"tileops.linear: expected bias to have a floating dtype .*, got Short"),
    ("lin-activation", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4), None, "tanh"),
     r"tileops.linear: expected activation to be one of 'none', 'relu', 'gelu', 'silu', got 'tanh'"),
    ("lin-weight-sparse", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4).to_sparse()),
     r"tileops.linear: expected weight to be a dense \(strided\) tensor, got layout Sparse"),
    # ---------------------------------------------------------------- conv2d
    ("conv-x-5d", lambda t: tileops.conv2d(t.f(1, 2, 4, 8, 8), conv_w(t)),
     r"tileops.conv2d: expected x to be 3-D \(C, H, W\) or 4-D \(N, C, H, W\), got shape \[1, 2, 4, 8, 8\]"),
    ("conv-x-2d", lambda t: tileops.conv2d(t.f(8, 8), conv_w(t)), r"tileops.conv2d: expected x to be 3-D .* or 4-D"),
    ("conv-weight-3d", lambda t: tileops.conv2d(conv_x(t), t.f(6, 4, 3)),
     r"tileops.conv2d: expected weight to be 4-D \(out_channels, in_channels/groups, kH, kW\), got shape \[6, 4, 3\]"),
    ("conv-weight-5d", lambda t: tileops.conv2d(conv_x(t), t.f(6, 4, 3, 3, 1)), r"tileops.conv2d: expected weight to be 4-D"),
    ("conv-channels", lambda t: tileops.conv2d(conv_x(t), conv_w(t, 6, 3, 3, 3)),
     r"tileops.conv2d: expected weight.shape\[1\] \* groups == x.shape\[1\] \(4\), got weight shape \[6, 3, 3, 3\] "
     r"with groups=1"),
    ("conv-channels-unbatched", lambda t: tileops.conv2d(t.f(3, 8, 8), conv_w(t)),
     r"tileops.conv2d: expected weight.shape\[1\] \* groups == x.shape\[1\] \(3\)"),
    ("conv-groups-in", lambda t: tileops.conv2d(conv_x(t), conv_w(t, 6, 2, 3, 3), groups=3),
     r"tileops.conv2d: groups=3 must divide the input channels \(x.shape\[1\]=4\)"),
    ("conv-groups-out", lambda t: tileops.conv2d(conv_x(t), conv_w(t, 5, 2, 3, 3), groups=2),
     r"tileops.conv2d: groups=2 must divide the output channels \(weight.shape\[0\]=5\)"),
    ("conv-groups-0", lambda t: tileops.conv2d(conv_x(t), conv_w(t), groups=0),
     r"tileops.conv2d: expected groups to be positive, got 0"),
    ("conv-groups-neg", lambda t: tileops.conv2d(conv_x(t), conv_w(t), groups=-2),
     r"tileops.conv2d: expected groups to be positive, got -2"),
    ("conv-groups-float", lambda t: tileops.conv2d(conv_x(t), conv_w(t), groups=1.5), r"argument 'groups'"),
    ("conv-stride-0", lambda t: tileops.conv2d(conv_x(t), conv_w(t), stride=0),
     r"tileops.conv2d: expected stride to be positive, got \[0, 0\]"),
    ("conv-stride-neg", lambda t: tileops.conv2d(conv_x(t), conv_w(t), stride=(1, -1)),
     r"tileops.conv2d: expected stride to be positive, got \[1, -1\]"),
    ("conv-stride-huge", lambda t: tileops.conv2d(conv_x(t), conv_w(t), stride=2 ** 31),
     r"tileops.conv2d: expected stride below 2\^31"),
    ("conv-stride-3", lambda t: tileops.conv2d(conv_x(t), conv_w(t), stride=(1, 2, 3)),
     r"tileops.conv2d: expected stride to be an int or a pair of ints, got \(1, 2, 3\)"),
    ("conv-stride-float", lambda t: tileops.conv2d(conv_x(t), conv_w(t), stride=1.5),
     r"tileops.conv2d: expected stride to be an int or a pair of ints, got 1.5"),
    ("conv-stride-empty", lambda t: tileops.conv2d(conv_x(t), conv_w(t), stride=[]),
     r"tileops.conv2d: expected stride to be an int or a pair of ints"),
    ("conv-padding-neg", lambda t: tileops.conv2d(conv_x(t), conv_w(t), padding=-1),
     r"tileops.conv2d: expected padding to be non-negative, got \[-1, -1\]"),
    ("conv-padding-neg-one", lambda t: tileops.conv2d(conv_x(t), conv_w(t), padding=(1, -2)),
     r"tileops.conv2d: expected padding to be non-negative, got \[1, -2\]"),
    ("conv-padding-huge", lambda t: tileops.conv2d(conv_x(t), conv_w(t), padding=2 ** 62),
     r"tileops.conv2d: expected padding below 2\^31"),
    ("conv-padding-same-strided", lambda t: tileops.conv2d(conv_x(t), conv_w(t), stride=2, padding="same"),
     r"tileops.conv2d: padding='same' is not supported for strided convolutions"),
    ("conv-padding-str", lambda t: tileops.conv2d(conv_x(t), conv_w(t), padding="full"),
     r"tileops.conv2d: expected padding to be 'valid', 'same' or ints, got 'full'"),
    ("conv-dilation-0", lambda t: tileops.conv2d(conv_x(t), conv_w(t), dilation=0),
     r"tileops.conv2d: expected dilation to be positive, got \[0, 0\]"),
    ("conv-dilation-neg", lambda t: tileops.conv2d(conv_x(t), conv_w(t), dilation=(-1, 1)),
     r"tileops.conv2d: expected dilation to be positive, got \[-1, 1\]"),
    ("conv-kernel-too-large", lambda t: tileops.conv2d(conv_x(t), conv_w(t, 6, 4, 11, 3)),
     r"tileops.conv2d: the \(dilated\) kernel 11x3 is larger than the padded input 8x8"),
    ("conv-kernel-too-large-dilated", lambda t: tileops.conv2d(conv_x(t), conv_w(t), dilation=(1, 4)),
     r"tileops.conv2d: the \(dilated\) kernel 3x9 is larger than the padded input 8x8"),
    ("conv-kernel-too-large-padded", lambda t: tileops.conv2d(conv_x(t), conv_w(t, 6, 4, 13, 3), padding=2),
     r"tileops.conv2d: the \(dilated\) kernel 13x3 is larger than the padded input 12x12"),
    ("conv-kernel-empty", lambda t: tileops.conv2d(conv_x(t), conv_w(t, 6, 4, 0, 3)),
     r"tileops.conv2d: expected weight to have a positive kernel size \(shape\[2:\]\), got shape \[6, 4, 0, 3\]"),
    ("conv-bias-shape", lambda t: tileops.conv2d(conv_x(t), conv_w(t), t.f(5)),
     r"tileops.conv2d: expected bias of shape \(6\), got \[5\]"),
    ("conv-activation", lambda t: tileops.conv2d(conv_x(t), conv_w(t), None, 1, 0, 1, 1, "swish"),
     r"tileops.conv2d: expected activation to be one of 'none', 'relu', 'gelu', 'silu', got 'swish'"),
    ("conv-x-int", lambda t: tileops.conv2d(t.i(2, 4, 8, 8, dtype=torch.int32), conv_w(t)),
     r"tileops.conv2d: expected x to have a floating dtype .*, got Int"),
    ("conv-weight-bool", lambda t: tileops.conv2d(conv_x(t), t.i(6, 4, 3, 3, dtype=torch.bool)),
     r"tileops.conv2d: expected weight to have a floating dtype .*, got Bool"),
    ("conv-bias-int", lambda t: tileops.conv2d(conv_x(t), conv_w(t), t.i(6)),
     r"tileops.conv2d: expected bias to have a floating dtype .*, got Long"),
    ("conv-weight-dtype", lambda t: tileops.conv2d(conv_x(t), conv_w(t).double()),
     r"tileops.conv2d: expected weight to have the same dtype as x \(Float\), got Double"),
    ("conv-bias-dtype", lambda t: tileops.conv2d(conv_x(t), conv_w(t), t.f(6, dtype=torch.bfloat16)),
     r"tileops.conv2d: expected bias to have the same dtype as x \(Float\), got BFloat16"),
    ("conv-x-sparse", lambda t: tileops.conv2d(conv_x(t).to_sparse(), conv_w(t)),
     r"tileops.conv2d: expected x to be a dense \(strided\) tensor, got layout Sparse"),
    # residual: exactly the output's shape (no broadcasting), x's dtype and device, dense
    ("conv-residual-shape", lambda t: tileops.conv2d(conv_x(t), conv_w(t), residual=t.f(2, 6, 5, 5)),
     r"tileops.conv2d: expected residual of the output's shape \[2, 6, 6, 6\], got \[2, 6, 5, 5\]"),
    ("conv-residual-broadcast", lambda t: tileops.conv2d(conv_x(t), conv_w(t), residual=t.f(1, 6, 1, 1)),
     r"tileops.conv2d: expected residual of the output's shape \[2, 6, 6, 6\], got \[1, 6, 1, 1\]"),
    ("conv-residual-unbatched", lambda t: tileops.conv2d(conv_x(t)[0], conv_w(t), residual=t.f(1, 6, 6, 6)),
     r"tileops.conv2d: expected residual of the output's shape \[6, 6, 6\], got \[1, 6, 6, 6\]"),
    ("conv-residual-dtype", lambda t: tileops.conv2d(conv_x(t), conv_w(t), residual=t.f(2, 6, 6, 6, dtype=torch.float16)),
     r"tileops.conv2d: expected residual to have the same dtype as x \(Float\), got Half"),
    ("conv-residual-int", lambda t: tileops.conv2d(conv_x(t), conv_w(t), residual=t.i(2, 6, 6, 6)),
     r"tileops.conv2d: expected residual to have a floating dtype .*, got Long"),
    ("conv-residual-sparse", lambda t: tileops.conv2d(conv_x(t), conv_w(t), residual=t.f(2, 6, 6, 6).to_sparse()),
     r"tileops.conv2d: expected residual to be a dense \(strided\) tensor, got layout Sparse"),
    ("conv-residual-empty-batch", lambda t: tileops.conv2d(t.f(0, 4, 8, 8), conv_w(t), residual=t.f(1, 6, 6, 6)),
     r"tileops.conv2d: expected residual of the output's shape \[0, 6, 6, 6\], got \[1, 6, 6, 6\]"),
    ("lin-residual-shape", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4), None, "relu", t.f(3, 5)),
     r"tileops.linear: expected residual of the output's shape \[3, 6\], got \[3, 5\]"),
    ("lin-residual-broadcast", lambda t: tileops.linear(t.f(2, 3, 4), t.f(6, 4), residual=t.f(6)),
     r"tileops.linear: expected residual of the output's shape \[2, 3, 6\], got \[6\]"),
    ("lin-residual-dtype", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4), residual=t.f(3, 6, dtype=torch.float64)),
     r"tileops.linear: expected residual to have the same dtype as x \(Float\), got Double"),
    ("lin-residual-bool", lambda t: tileops.linear(t.f(3, 4), t.f(6, 4), residual=t.i(3, 6, dtype=torch.bool)),
     r"tileops.linear: expected residual to have a floating dtype .*, got Bool"),
    ("nn-conv-residual-shape", lambda t: tnn.Conv2d(4, 6, 3, device=t.device)(conv_x(t), t.f(2, 6, 8, 8)),
     r"tileops.conv2d: expected residual of the output's shape \[2, 6, 6, 6\], got \[2, 6, 8, 8\]"),
    # ---------------------------------------------------------------- _conv2d_backward
    ("bwd-grad-shape", lambda t: bwd(t, grad_out=t.f(2, 6, 5, 5)),
     r"tileops._conv2d_backward: expected grad_out of shape \(2, 6, 6, 6\), got \[2, 6, 5, 5\]"),
    ("bwd-grad-batch", lambda t: bwd(t, grad_out=t.f(3, 6, 6, 6)),
     r"tileops._conv2d_backward: expected grad_out of shape \(2, 6, 6, 6\), got \[3, 6, 6, 6\]"),
    ("bwd-grad-channels", lambda t: bwd(t, grad_out=t.f(2, 5, 6, 6)),
     r"tileops._conv2d_backward: expected grad_out of shape \(2, 6, 6, 6\), got \[2, 5, 6, 6\]"),
    ("bwd-grad-3d", lambda t: bwd(t, grad_out=t.f(6, 6, 6)),
     r"tileops._conv2d_backward: expected grad_out of shape \(2, 6, 6, 6\), got \[6, 6, 6\]"),
    ("bwd-grad-dtype", lambda t: bwd(t, grad_out=t.f(2, 6, 6, 6, dtype=torch.float64)),
     r"tileops._conv2d_backward: expected grad_out to have the same dtype as x \(Float\), got Double"),
    ("bwd-grad-int", lambda t: bwd(t, grad_out=t.i(2, 6, 6, 6)),
     r"tileops._conv2d_backward: expected grad_out to have a floating dtype .*, got Long"),
    ("bwd-x-3d", lambda t: bwd(t, x=t.f(4, 8, 8)), r"tileops._conv2d_backward: expected x to be 4-D \(N, C, H, W\)"),
    ("bwd-weight-dtype", lambda t: bwd(t, w=conv_w(t).half()),
     r"tileops._conv2d_backward: expected weight to have the same dtype as x \(Float\), got Half"),
    ("bwd-weight-3d", lambda t: bwd(t, w=t.f(6, 4, 3)), r"tileops._conv2d_backward: expected weight to be 4-D"),
    ("bwd-channels", lambda t: bwd(t, w=conv_w(t, 6, 2, 3, 3)),
     r"tileops._conv2d_backward: expected weight.shape\[1\] \* groups == x.shape\[1\] \(4\)"),
    ("bwd-groups", lambda t: bwd(t, w=conv_w(t, 6, 2, 3, 3), groups=3),
     r"tileops._conv2d_backward: groups=3 must divide the input channels"),
    ("bwd-stride-0", lambda t: bwd(t, stride=(0, 1)), r"tileops._conv2d_backward: expected stride to be positive"),
    ("bwd-padding-neg", lambda t: bwd(t, padding=(0, -1)),
     r"tileops._conv2d_backward: expected padding to be non-negative"),
    ("bwd-dilation-0", lambda t: bwd(t, dilation=(1, 0)), r"tileops._conv2d_backward: expected dilation to be positive"),
    ("bwd-kernel-too-large", lambda t: bwd(t, w=conv_w(t, 6, 4, 9, 3)),
     r"tileops._conv2d_backward: the \(dilated\) kernel 9x3 is larger than the padded input 8x8"),
    # ---------------------------------------------------------------- nn modules
    ("nn-linear-activation", lambda t: tnn.Linear(3, 4, activation="tanh"),
     r"tileops: expected activation in \('none', 'relu', 'gelu', 'silu'\), got 'tanh'"),
    ("nn-conv-activation", lambda t: tnn.Conv2d(3, 4, 3, activation="elu"), r"tileops: expected activation in .*'elu'"),
    ("nn-conv-groups", lambda t: tnn.Conv2d(4, 6, 3, groups=3), r"in_channels must be divisible by groups"),
    ("nn-linear-features", lambda t: tnn.Linear(4, 6, device=t.device)(t.f(3, 5)),
     r"tileops.linear: x has 5 features in its last dimension .* but weight expects in_features=4"),
    ("nn-linear-dtype", lambda t: tnn.Linear(4, 6, device=t.device)(t.f(3, 4, dtype=torch.float64)),
     r"tileops.linear: expected weight to have the same dtype as x \(Double\), got Float"),
    ("nn-linear-int", lambda t: tnn.Linear(4, 6, device=t.device)(t.i(3, 4)),
     r"tileops.linear: expected x to have a floating dtype"),
    ("nn-conv-channels", lambda t: tnn.Conv2d(4, 6, 3, device=t.device)(t.f(2, 3, 8, 8)),
     r"tileops.conv2d: expected weight.shape\[1\] \* groups == x.shape\[1\] \(3\)"),
    ("nn-conv-rank", lambda t: tnn.Conv2d(4, 6, 3, device=t.device)(t.f(8, 8)), r"tileops.conv2d: expected x to be 3-D"),
    ("nn-conv-kernel", lambda t: tnn.Conv2d(4, 6, 9, device=t.device)(conv_x(t)),
     r"tileops.conv2d: the \(dilated\) kernel 9x9 is larger than the padded input 8x8"),
    ("nn-conv-dtype", lambda t: tnn.Conv2d(4, 6, 3, device=t.device, dtype=torch.float16)(conv_x(t)),
     r"tileops.conv2d: expected weight to have the same dtype as x \(Float\), got Half"),
    ("nn-converted-features", lambda t: tileops.convert(torch.nn.Sequential(torch.nn.Linear(4, 6))).to(t.device)(t.f(3, 5)),
     r"tileops.linear: x has 5 features"),
]


def still_usable(device):
    """A small op after the errors gives the right result (and, on CUDA, no sticky error)."""
    a = torch.randn(3, 4, device=device)
    out = tileops.matmul(a, a.t())
    if device == "cuda":
        torch.cuda.synchronize()
    torch.testing.assert_close(out, a @ a.t())


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_named_error(device, case):
    _, fn, pattern = case
    with pytest.raises((RuntimeError, ValueError, TypeError), match=pattern):
        fn(Make(device))
    still_usable(device)


def test_cpu_only_arguments():
    with pytest.raises(RuntimeError, match="tileops.matmul: algo='simt' names a CUDA kernel family; on cpu only 'auto'"):
        tileops.matmul(torch.randn(3, 4), torch.randn(4, 2), algo="simt")
    with pytest.raises(RuntimeError, match=r"tileops.matmul: expected a to be a dense \(strided\) tensor, got layout Mkldnn"):
        tileops.matmul(torch.randn(3, 4).to_mkldnn(), torch.randn(4, 2))


def _mixed_device_cases():
    """(call, regex) with one argument on the CPU and the rest on CUDA, for every op and argument."""
    c, g = Make("cpu"), Make("cuda")
    return [
        (lambda: tileops.matmul(g.f(3, 4), c.f(4, 5)), r"tileops.matmul: expected b on the same device as a \(cuda:0\), got cpu"),
        (lambda: tileops.matmul(c.f(3, 4), g.f(4, 5)), r"tileops.matmul: expected b on the same device as a \(cpu\), got cuda:0"),
        (lambda: tileops.linear(g.f(3, 4), c.f(5, 4)), r"tileops.linear: expected weight on the same device as x \(cuda:0\), got cpu"),
        (lambda: tileops.linear(c.f(3, 4), g.f(5, 4)), r"tileops.linear: expected weight on the same device as x \(cpu\), got cuda:0"),
        (lambda: tileops.linear(g.f(3, 4), g.f(5, 4), c.f(5)), r"tileops.linear: expected bias on the same device as x \(cuda:0\), got cpu"),
        (lambda: tileops.linear(c.f(3, 4), c.f(5, 4), g.f(5)), r"tileops.linear: expected bias on the same device as x \(cpu\), got cuda:0"),
        (lambda: tileops.conv2d(g.f(1, 2, 5, 5), c.f(3, 2, 3, 3)), r"tileops.conv2d: expected weight on the same device as x \(cuda:0\), got cpu"),
        (lambda: tileops.conv2d(c.f(1, 2, 5, 5), g.f(3, 2, 3, 3)), r"tileops.conv2d: expected weight on the same device as x \(cpu\), got cuda:0"),
        (lambda: tileops.conv2d(g.f(1, 2, 5, 5), g.f(3, 2, 3, 3), c.f(3)), r"tileops.conv2d: expected bias on the same device as x \(cuda:0\), got cpu"),
        (lambda: tileops.conv2d(g.f(1, 2, 5, 5), g.f(3, 2, 3, 3), residual=c.f(1, 3, 3, 3)), r"tileops.conv2d: expected residual on the same device as x \(cuda:0\), got cpu"),
        (lambda: tileops.linear(g.f(3, 4), g.f(5, 4), residual=c.f(3, 5)), r"tileops.linear: expected residual on the same device as x \(cuda:0\), got cpu"),
        (lambda: bwd(c, grad_out=g.f(2, 6, 6, 6)), r"tileops._conv2d_backward: expected grad_out on the same device as x \(cpu\), got cuda:0"),
        (lambda: bwd(g, grad_out=c.f(2, 6, 6, 6)), r"tileops._conv2d_backward: expected grad_out on the same device as x \(cuda:0\), got cpu"),
        (lambda: bwd(g, w=conv_w(c)), r"tileops._conv2d_backward: expected weight on the same device as x \(cuda:0\), got cpu"),
        (lambda: tnn.Linear(4, 5)(g.f(3, 4)), r"tileops.linear: expected weight on the same device as x \(cuda:0\), got cpu"),
        (lambda: tnn.Conv2d(2, 3, 3, device="cuda")(c.f(1, 2, 5, 5)), r"tileops.conv2d: expected weight on the same device as x \(cpu\), got cuda:0"),
    ]


@pytest.mark.cuda
def test_cuda_mixed_devices_raise():
    torch.cuda.set_device(0)
    for fn, pattern in _mixed_device_cases():
        with pytest.raises(RuntimeError, match=pattern):
            fn()
    still_usable("cuda")
