"""conv2d forward and backward against float64 references over parameters, layouts, dtypes."""
import pytest
import torch
import torch.nn.functional as F
from torch._prims_common import suggest_memory_format

import tileops
from conftest import DEVICE_KINDS, DEVICES
from utils import DTYPES, check, fresh_generator, randn, run_poisoned, tf32

# (N, C, H, W, K, R, S, stride, padding, dilation, groups)
CASES = {
    "3x3": (2, 3, 7, 7, 5, 3, 3, 1, 1, 1, 1),
    "odd_kernel_stride2": (1, 4, 9, 11, 6, 3, 2, 2, (1, 0), 1, 1),
    "dilated": (2, 8, 8, 8, 8, 3, 3, 1, 2, 2, 1),
    "aniso": (1, 5, 13, 6, 7, 2, 3, (2, 1), (0, 2), (2, 1), 1),
    "groups3": (2, 6, 10, 9, 9, 3, 3, 2, 1, 1, 3),
    "depthwise": (2, 8, 12, 12, 8, 3, 3, 1, 1, 1, 8),
    "depthwise_x2": (1, 8, 9, 9, 16, 3, 3, 2, 1, 1, 8),
    "1x1": (3, 16, 5, 5, 32, 1, 1, 1, 0, 1, 1),
    "1x1_stride2": (2, 16, 9, 9, 8, 1, 1, 2, 0, 1, 1),
    "patch_embed": (2, 3, 32, 32, 16, 8, 8, 8, 0, 1, 1),
    "stem7x7": (1, 3, 31, 31, 8, 7, 7, 2, 3, 1, 1),
    "kernel_is_input": (1, 2, 5, 5, 3, 5, 5, 1, 0, 1, 1),
    "one_pixel": (1, 7, 1, 1, 127, 1, 1, 1, 0, 1, 1),
    "empty_batch": (0, 4, 6, 6, 4, 3, 3, 1, 1, 1, 1),
}
ACTS = ["none", "relu", "gelu", "silu"]


def make_x(shape, layout, dtype, device, gen):
    if layout == "channels_last":
        return randn(shape, dtype, device, gen).to(memory_format=torch.channels_last)
    if layout == "strided":  # every other column of a wider tensor: no memory format fits
        n, c, h, w = shape
        return randn((n, c, h, 2 * w), dtype, device, gen)[..., ::2]
    return randn(shape, dtype, device, gen)


def conv_ref(x, w, b, p):
    st, pd, dl, g = p
    x64, w64 = x.detach().double().cpu(), w.detach().double().cpu()
    b64 = None if b is None else b.detach().double().cpu()
    ref = F.conv2d(x64, w64, b64, st, pd, dl, g)
    mag = F.conv2d(x64.abs(), w64.abs(), None if b64 is None else b64.abs(), st, pd, dl, g)
    return ref, mag


ACT_FN = {"none": lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu}


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
def test_conv2d_forward(device, kind, case, layout):
    N, C, H, W, K, R, S, st, pd, dl, g = CASES[case]
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x = make_x((N, C, H, W), layout, dt, device, gen)
    w = randn((K, C // g, R, S), dt, device, gen)
    b = randn((K,), dt, device, gen)
    act = ACTS[(len(case) + len(layout)) % 4]  # every activation over the matrix, not every pair
    with tf32(kind == "tf32"):
        y = run_poisoned(lambda: tileops.conv2d(x, w, b, st, pd, dl, g, act), N * K * H * W, dt, device)
    ref, mag = conv_ref(x, w, b, (st, pd, dl, g))
    check(y, ACT_FN[act](ref), mag, kind, "conv %s %s %s seed=%d" % (case, layout, act, seed))
    fmt = suggest_memory_format(x)  # torch's rule: the output keeps the input's memory format
    assert y.is_contiguous(memory_format=fmt), "output not in %s" % fmt


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_conv2d_backward(device, kind, case, layout):
    """grad_input, grad_weight, grad_bias of activation(conv + bias) against float64 autograd."""
    N, C, H, W, K, R, S, st, pd, dl, g = CASES[case]
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x = make_x((N, C, H, W), layout, dt, device, gen).requires_grad_()
    w = randn((K, C // g, R, S), dt, device, gen).requires_grad_()
    b = randn((K,), dt, device, gen).requires_grad_()
    act = ACTS[(len(case) + len(layout)) % 4]
    with tf32(kind == "tf32"):
        y = tileops.conv2d(x, w, b, st, pd, dl, g, act)
        gy = randn(y.shape, dt, device, gen)
        y.backward(gy)
    x64, w64, b64 = (t.detach().double().cpu().requires_grad_() for t in (x, w, b))
    gy64 = gy.double().cpu()
    ACT_FN[act](F.conv2d(x64, w64, b64, st, pd, dl, g)).backward(gy64)
    # magnitude bounds for each gradient: the same products on absolute values
    xa, wa, ga = x64.detach().abs(), w64.detach().abs(), gy64.abs() * 1.2  # |act'| <= 1.13
    mag_x = torch.nn.grad.conv2d_input(xa.shape, wa, ga, st, pd, dl, g)
    mag_w = torch.nn.grad.conv2d_weight(xa, wa.shape, ga, st, pd, dl, g)
    what = "conv bwd %s %s %s seed=%d" % (case, layout, act, seed)
    check(x.grad, x64.grad, mag_x, kind, what + " grad_input")
    check(w.grad, w64.grad, mag_w, kind, what + " grad_weight")
    check(b.grad, b64.grad, ga.sum((0, 2, 3)), kind, what + " grad_bias")


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_unbatched_and_padding_modes(device):
    gen, _ = fresh_generator()
    x = randn((3, 10, 11), torch.float64, device, gen)
    w = randn((4, 3, 3, 2), torch.float64, device, gen)
    for pad in ["same", "valid", 1, (2, 0)]:
        y = tileops.conv2d(x, w, None, 1, pad, 1, 1)
        ref = F.conv2d(x.cpu(), w.cpu(), None, 1, pad, 1, 1)
        assert y.shape == ref.shape and torch.allclose(y.cpu(), ref, atol=1e-10), pad
    y = tileops.conv2d(x, w, None, 1, "same", 2, 1)  # dilation with odd total padding
    assert torch.allclose(y.cpu(), F.conv2d(x.cpu(), w.cpu(), None, 1, "same", 2, 1), atol=1e-10)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float32", "bfloat16"])
def test_conv2d_resnet_layer_cuda(kind):
    """A realistic layer size (3x3, 64 channels, 56x56) in both memory formats."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    for layout in ["contiguous", "channels_last"]:
        x = make_x((4, 64, 56, 56), layout, dt, "cuda", gen)
        w = randn((64, 64, 3, 3), dt, "cuda", gen)
        y = run_poisoned(lambda x=x, w=w: tileops.conv2d(x, w, None, 1, 1), x.numel(), dt, "cuda")
        ref, mag = conv_ref(x, w, None, (1, 1, 1, 1))
        check(y, ref, mag, kind, "resnet layer %s seed=%d" % (layout, seed))
