"""Bad input raises an error that names the argument and what was expected; never a crash."""
import pytest
import torch

import tileops
import tileops.nn as tnn
from conftest import DEVICES


def T(*shape, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, device=device).to(dtype)


def cases(device):
    d = dict(device=device)
    x, w = T(2, 4, 8, 8, **d), T(6, 4, 3, 3, **d)
    return [
        # matmul
        (lambda: tileops.matmul(T(3, 4, **d), T(5, 6, **d)), "inner dimensions differ"),
        (lambda: tileops.matmul(T(4, **d), T(4, 6, **d)), "expected a to have at least 2 dimensions"),
        (lambda: tileops.matmul(T(3, 4, **d), T(4, **d)), "expected b to have at least 2 dimensions"),
        (lambda: tileops.matmul(T(3, 4, **d), T(4, 2, dtype=torch.float64, **d)), "expected b to have the same dtype as a"),
        (lambda: tileops.matmul(T(2, 3, 4, **d), T(3, 4, 5, **d)), "cannot be broadcast"),
        (lambda: tileops.matmul(torch.ones(3, 4, dtype=torch.int64, device=device), T(4, 2, **d)),
         "expected a to have a floating dtype"),
        (lambda: tileops.matmul(T(3, 4, **d), torch.ones(4, 2, dtype=torch.bool, device=device)),
         "expected b to have a floating dtype"),
        (lambda: tileops.matmul(T(3, 4, **d), T(4, 2, **d), algo="fastest"), "expected algo to be one of"),
        # linear
        (lambda: tileops.linear(T(3, 5, **d), T(6, 4, **d)), "weight expects in_features=4"),
        (lambda: tileops.linear(T(3, 4, **d), T(6, 4, 1, **d)), "expected weight to be 2-D"),
        (lambda: tileops.linear(T(3, 4, **d), T(6, 4, **d), T(5, **d)), "expected bias of shape \\(6\\)"),
        (lambda: tileops.linear(T(3, 4, **d), T(6, 4, **d), None, "tanh"), "expected activation to be one of"),
        (lambda: tileops.linear(T(3, 4, **d), T(6, 4, **d), T(6, dtype=torch.float16, **d)),
         "expected bias to have the same dtype as x"),
        # conv2d
        (lambda: tileops.conv2d(T(2, 4, 8, **d).unsqueeze(0).unsqueeze(0), w), "expected x to be 3-D .* or 4-D"),
        (lambda: tileops.conv2d(x, T(6, 4, 3, **d)), "expected weight to be 4-D"),
        (lambda: tileops.conv2d(x, T(6, 2, 3, 3, **d), groups=3), "groups=3 must divide the input channels"),
        (lambda: tileops.conv2d(x, T(5, 2, 3, 3, **d), groups=2), "groups=2 must divide the output channels"),
        (lambda: tileops.conv2d(x, T(6, 3, 3, 3, **d)), "expected weight.shape\\[1\\] \\* groups == x.shape\\[1\\]"),
        (lambda: tileops.conv2d(x, w, groups=0), "expected groups to be positive"),
        (lambda: tileops.conv2d(x, w, stride=0), "expected stride to be positive"),
        (lambda: tileops.conv2d(x, w, stride=(1, -1)), "expected stride to be positive"),
        (lambda: tileops.conv2d(x, w, padding=-1), "expected padding to be non-negative"),
        (lambda: tileops.conv2d(x, w, dilation=0), "expected dilation to be positive"),
        (lambda: tileops.conv2d(x, T(6, 4, 11, 3, **d)), "larger than the padded input"),
        (lambda: tileops.conv2d(x, w, T(5, **d)), "expected bias of shape \\(6\\)"),
        (lambda: tileops.conv2d(x, w, None, 1, 0, 1, 1, "swish"), "expected activation to be one of"),
        (lambda: tileops.conv2d(x.to(torch.int32), w), "expected x to have a floating dtype"),
        (lambda: tileops.conv2d(x, w.double()), "expected weight to have the same dtype as x"),
        (lambda: tileops.conv2d(x, w, stride=(1, 2, 3)), "expected stride to be an int or a pair"),
        (lambda: tileops.conv2d(x, w, stride=2, padding="same"), "padding='same' is not supported for strided"),
        (lambda: tileops.conv2d(x, w, padding="full"), "expected padding to be 'valid', 'same' or ints"),
        # backward op
        (lambda: torch.ops.tileops._conv2d_backward(T(2, 6, 5, 5, **d), x, w, [1, 1], [0, 0], [1, 1], 1,
                                                     [True, True, True]), "expected grad_out of shape"),
        # modules
        (lambda: tnn.Linear(3, 4, activation="tanh"), "expected activation in"),
    ]


def test_cpu_algo_is_auto_only():
    with pytest.raises(RuntimeError, match="names a CUDA kernel family; on cpu only 'auto'"):
        tileops.matmul(T(3, 4), T(4, 2), algo="simt")


@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_raises_named_error(device):
    for fn, pattern in cases(device):
        with pytest.raises((RuntimeError, ValueError), match=pattern):
            fn()
    # the device still works afterwards
    a = T(3, 4, device=device)
    torch.testing.assert_close(tileops.matmul(a, a.t()), a @ a.t())


@pytest.mark.cuda
def test_cuda_mixed_devices_raise():
    a, b = T(3, 4), T(4, 5, device="cuda")
    with pytest.raises(RuntimeError, match="expected b on the same device as a"):
        tileops.matmul(a, b)
    with pytest.raises(RuntimeError, match="expected weight on the same device as x"):
        tileops.linear(T(3, 4, device="cuda"), T(5, 4))
    with pytest.raises(RuntimeError, match="expected bias on the same device as x"):
        tileops.conv2d(T(1, 2, 5, 5, device="cuda"), T(3, 2, 3, 3, device="cuda"), T(3))
