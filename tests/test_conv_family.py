"""conv1d, conv3d and conv_transpose1d/2d/3d (csrc/ops/conv_family.cpp: conv2d with H = 1, conv2d's
data gradient whose grad_out is x, and 3-D ones as 2-D ones over batch x depth) against float64
references of torch's F.conv1d / conv3d / conv_transpose1d/2d/3d, on every device and dtype conv2d takes.

One table per op (odd sizes, strides, padding, output_padding, dilation, groups incl. depthwise),
each row run in every dtype and layout (NC(H)W, channels_last, a strided view), unbatched, with bias,
residual and activation, into poisoned output memory; then gradients (gradcheck in float64, and
lower precisions against float64 autograd), opcheck, torch.compile(fullgraph=True), autocast, the
errors, the nn drop-ins and convert(). CUDA rows carry the `cuda` mark (the GPU run takes them).
"""
import re
from collections import Counter
from typing import NamedTuple, Tuple, Union

import pytest
import torch
import torch.nn.functional as F
from torch._prims_common import suggest_memory_format
from torch.utils._python_dispatch import TorchDispatchMode

import tileops
from conftest import DEVICE_KINDS, DEVICES
from utils import DTYPES, check, fresh_generator, randn, tf32

_Int = Union[int, Tuple[int, ...]]
ACTS = ("none", "relu", "gelu", "silu")
ACT_FN = {"none": lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu}
LAYOUTS = ("contiguous", "channels_last", "strided")
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


class Case(NamedTuple):
    """x (N, C, *spatial) * weight; transposed: weight (C, K // groups, *kernel), else (K, C // groups, *kernel)."""

    op: str
    N: int
    C: int
    spatial: Tuple[int, ...]
    K: int
    kernel: Tuple[int, ...]
    stride: _Int = 1
    padding: _Int = 0
    dilation: _Int = 1
    groups: int = 1
    output_padding: _Int = 0

    @property
    def transposed(self):
        return self.op.startswith("conv_transpose")

    @property
    def x_shape(self):
        return (self.N, self.C, *self.spatial)

    @property
    def w_shape(self):
        if self.transposed:
            return (self.C, self.K // self.groups, *self.kernel)
        return (self.K, self.C // self.groups, *self.kernel)

    def args(self):
        """The op's arguments after weight and bias, in its (torch's) order."""
        if self.transposed:
            return (self.stride, self.padding, self.output_padding, self.groups, self.dilation)
        return (self.stride, self.padding, self.dilation, self.groups)

    def tileops(self, x, w, b, act="none", res=None):
        return getattr(tileops, self.op)(x, w, b, *self.args(), act, res)

    def torch(self, x, w, b):
        return getattr(F, self.op)(x, w, b, *self.args())


def c1(N, C, L, K, k, stride=1, padding=0, dilation=1, groups=1):
    return Case("conv1d", N, C, (L,), K, (k,), stride, padding, dilation, groups)


def t1(N, C, L, K, k, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
    return Case("conv_transpose1d", N, C, (L,), K, (k,), stride, padding, dilation, groups, output_padding)


def t2(N, C, H, W, K, kh, kw, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
    return Case("conv_transpose2d", N, C, (H, W), K, (kh, kw), stride, padding, dilation, groups, output_padding)


def c3(N, C, DHW, K, k, stride=1, padding=0, dilation=1, groups=1):
    return Case("conv3d", N, C, DHW, K, k, stride, padding, dilation, groups)


def t3(N, C, DHW, K, k, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
    return Case("conv_transpose3d", N, C, DHW, K, k, stride, padding, dilation, groups, output_padding)


CASES = {
    "c1_k3": c1(2, 3, 11, 5, 3, 1, 1),
    "c1_k3_s2": c1(2, 8, 13, 6, 3, 2, 1),
    "c1_k5_dil2": c1(1, 4, 17, 7, 5, 1, 2, 2),
    "c1_k1": c1(3, 16, 9, 32, 1),
    "c1_stride_gt_kernel": c1(1, 4, 16, 6, 2, 3),  # positions without gradient
    "c1_groups3": c1(2, 6, 10, 9, 3, 2, 1, 1, 3),
    "c1_depthwise": c1(2, 8, 12, 8, 3, 1, 1, 1, 8),
    "c1_depthwise_x2": c1(1, 4, 9, 8, 5, 2, 2, 1, 4),
    "c1_kernel_is_input": c1(1, 2, 5, 3, 5),
    "c1_empty_batch": c1(0, 4, 6, 4, 3, 1, 1),
    "t1_k4_s2": t1(2, 6, 9, 5, 4, 2, 1),
    "t1_k3_s2_op1": t1(2, 4, 11, 3, 3, 2, 1, 1),
    "t1_op_ge_stride": t1(1, 3, 7, 4, 3, 1, 0, 1, 2),  # output_padding 1 >= stride 1 (< dilation 2)
    "t1_groups3": t1(2, 6, 8, 9, 3, 3, 1, 2, 1, 3),
    "t1_depthwise": t1(1, 5, 10, 5, 5, 1, 2, 0, 1, 5),
    "t2_3x3_s2_op1": t2(2, 4, 5, 6, 3, 3, 3, 2, 1, 1),
    "t2_4x4_s2": t2(2, 8, 7, 5, 6, 4, 4, 2, 1),  # a DCGAN / U-Net upsampling
    "t2_aniso": t2(1, 5, 6, 7, 4, 3, 2, (2, 1), (1, 0), (1, 0), (1, 2)),
    "t2_op_ge_stride": t2(1, 3, 5, 5, 4, 3, 3, 1, 0, (1, 0), 2),  # zero rows added to x
    "t2_groups2": t2(2, 6, 5, 5, 4, 3, 3, 2, 1, 1, 1, 2),
    "t2_depthwise": t2(2, 6, 6, 7, 6, 3, 3, 2, 1, 1, 1, 6),
    "t2_depthwise_x2": t2(1, 4, 5, 6, 8, 3, 3, 1, 1, 0, 1, 4),
    "t2_1x1": t2(2, 16, 5, 6, 8, 1, 1),
    "t2_1x1_s2": t2(1, 4, 5, 5, 4, 1, 1, 2, 0, 1),  # every other output pixel: bias only
    "t2_2x2_s2": t2(1, 8, 4, 5, 8, 2, 2, 2),
    "t2_2x2_s3_op2": t2(1, 3, 4, 4, 5, 2, 2, 3, 0, 2),  # stride > kernel: gaps
    "t2_5x5_pad3": t2(1, 4, 6, 6, 3, 5, 5, 1, 3),  # padding crops the output
    "t2_empty_batch": t2(0, 4, 5, 5, 3, 3, 3, 2, 1, 1),
    "c3_3x3x3": c3(2, 3, (5, 6, 7), 4, (3, 3, 3), 1, 1),
    "c3_s2": c3(1, 4, (7, 6, 5), 6, (3, 3, 3), 2, 1),
    "c3_1x1x1": c3(2, 8, (3, 4, 5), 6, (1, 1, 1)),  # channels_last_3d: views only
    "c3_1x3x3": c3(2, 4, (4, 5, 5), 6, (1, 3, 3), 1, (0, 1, 1)),  # r(2+1)d's spatial conv
    "c3_3x1x1": c3(2, 6, (6, 4, 4), 4, (3, 1, 1), 1, (1, 0, 0)),  # and its temporal one
    "c3_aniso": c3(1, 4, (7, 8, 6), 5, (2, 3, 1), (2, 1, 2), (1, 0, 0), (2, 1, 1)),
    "c3_groups2": c3(2, 6, (4, 5, 5), 4, (3, 3, 3), 1, 1, 1, 2),
    "c3_depthwise": c3(1, 4, (5, 5, 5), 4, (3, 3, 3), 2, 1, 1, 4),
    "c3_stride_gt_kernel": c3(1, 3, (7, 5, 5), 4, (2, 2, 2), 3),
    "c3_kernel_is_input": c3(1, 2, (3, 3, 3), 3, (3, 3, 3)),
    "c3_empty_batch": c3(0, 4, (3, 4, 4), 3, (3, 3, 3), 1, 1),
    "t3_2x2x2_s2": t3(2, 4, (3, 4, 5), 6, (2, 2, 2), 2),
    "t3_3x3x3_s2_op1": t3(1, 4, (3, 4, 4), 3, (3, 3, 3), 2, 1, 1),
    "t3_4x4x4_s2": t3(1, 3, (4, 3, 3), 4, (4, 4, 4), 2, 1),
    "t3_aniso": t3(1, 4, (3, 5, 4), 3, (3, 2, 3), (1, 2, 1), (2, 0, 1), (0, 1, 0), (2, 1, 1)),  # depth padding crops
    "t3_op_ge_stride": t3(1, 3, (3, 3, 3), 4, (3, 3, 3), 1, 0, (1, 0, 0), 2),  # zero output depths at the end
    "t3_groups2": t3(2, 4, (3, 3, 4), 6, (3, 3, 3), 2, 1, 1, 1, 2),
    "t3_1x1x1": t3(2, 8, (3, 4, 4), 4, (1, 1, 1)),
    "t3_1x1x1_s2": t3(1, 4, (3, 3, 3), 4, (1, 1, 1), 2, 0, 1),  # gaps: bias only
    "t3_s3_gaps": t3(1, 3, (3, 2, 2), 2, (2, 2, 2), 3, (1, 0, 0), 2),
    "t3_lands_nowhere": t3(1, 3, (2, 2, 2), 4, (1, 3, 3), (2, 1, 1), 1),  # the padding crops every tap: bias only
    "t3_empty_batch": t3(0, 4, (3, 3, 3), 3, (3, 3, 3), 2, 1, 1),
}
# CUDA: the same edges at sizes spanning several tiles, so conv2d's CUDA tables serve them.
CUDA_CASES = {
    "c1_k3_c64": c1(4, 64, 300, 96, 3, 1, 1),
    "c1_k7_s2": c1(2, 32, 257, 48, 7, 2, 3),
    "c1_depthwise": c1(2, 64, 301, 64, 5, 1, 2, 1, 64),
    "c1_groups4": c1(2, 64, 129, 64, 3, 2, 1, 1, 4),
    "t1_k4_s2_c64": t1(2, 64, 130, 32, 4, 2, 1),
    "t1_dil2_op1": t1(2, 32, 65, 64, 3, 1, 1, 1, 2),
    "t2_4x4_s2_c64": t2(2, 64, 17, 15, 64, 4, 4, 2, 1),
    "t2_3x3_s2_op1_c128": t2(2, 128, 14, 13, 64, 3, 3, 2, 1, 1),
    "t2_2x2_s2_c256": t2(2, 256, 14, 14, 128, 2, 2, 2),
    "t2_1x1_c64": t2(4, 64, 14, 14, 96, 1, 1),
    "t2_depthwise": t2(2, 64, 15, 16, 64, 3, 3, 2, 1, 1, 1, 64),
    "t2_groups2": t2(2, 32, 9, 11, 48, 3, 3, 2, 1, 1, 1, 2),
    "c3_3x3x3_c64": c3(2, 64, (8, 14, 14), 64, (3, 3, 3), 1, 1),  # r3d_18's layers, smaller clips
    "c3_3x3x3_s2_c64": c3(2, 64, (8, 14, 13), 128, (3, 3, 3), 2, 1),
    "c3_1x1x1_s2_c64": c3(2, 64, (8, 14, 14), 128, (1, 1, 1), 2),
    "c3_1x3x3_c32": c3(2, 32, (8, 15, 14), 64, (1, 3, 3), 1, (0, 1, 1)),
    "c3_depthwise": c3(2, 64, (6, 9, 9), 64, (3, 3, 3), 1, 1, 1, 64),
    "t3_2x2x2_s2_c64": t3(2, 64, (4, 9, 8), 32, (2, 2, 2), 2),
    "t3_3x3x3_s2_c64": t3(2, 64, (4, 7, 7), 64, (3, 3, 3), 2, 1, 1),
}


def pick(*keys):
    """A fixed pick per row over a list (activations, layouts), not every pair."""
    return sum(len(str(k)) for k in keys)


def make(shape, layout, dtype, device, gen):
    """x or weight in a layout: contiguous; channels last (C stride 1: channels_last for 4-D, (N, L, C)
    storage for 3-D); strided (every other element of the last dim of a wider tensor)."""
    if layout == "contiguous":
        return randn(shape, dtype, device, gen)
    if layout == "channels_last":
        perm = (0, *range(2, len(shape)), 1)  # stored channels last
        inv = [perm.index(i) for i in range(len(shape))]
        return randn(tuple(shape[p] for p in perm), dtype, device, gen).permute(*inv)
    if layout == "strided":
        return randn((*shape[:-1], 2 * shape[-1]), dtype, device, gen)[..., ::2]
    raise ValueError(layout)


def poisoned(fn, device):
    """fn() with the CUDA caching allocator's free memory set to 0xFF bytes (NaN in every float dtype):
    an output element read or left before it is written turns the result into NaN."""
    if device == "cuda":
        torch.cuda.empty_cache()
        blocks = [torch.full((n // 4,), -1, dtype=torch.int32, device=device) for n in [64 << 20] + [512 << 10] * 16]
        del blocks
    return fn()


def reference(c, x, w, b, res, act):
    """float64 act(op(x, w) + b + res) and its bound |x| * |w| + |b| + |res|."""
    x64, w64 = x.detach().double(), w.detach().double()
    b64 = None if b is None else b.detach().double()
    ref = c.torch(x64, w64, b64)
    mag = c.torch(x64.abs(), w64.abs(), None if b64 is None else b64.abs())
    if res is not None:
        ref, mag = ref + res.double(), mag + res.double().abs()
    return ACT_FN[act](ref), mag


def check_format(y, x, what):
    """y keeps x's memory format: channels last in, channels last out (2-D: channels_last)."""
    if x.dim() == 3:  # (N, C, L): as (N, C, 1, L)
        y, x = y.unsqueeze(2), x.unsqueeze(2)
    fmt = suggest_memory_format(x)
    assert y.is_contiguous(memory_format=fmt), "%s: strides %s, expected %s like x's %s" % (what, y.stride(), fmt,
                                                                                           x.stride())


def run_forward(c, name, device, kind, layout, act, bias=True, residual=False, unbatched=False):
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x = make(c.x_shape, layout, dt, device, gen)
    w = make(c.w_shape, "channels_last" if layout == "channels_last" else "contiguous", dt, device, gen)
    b = randn((c.K,), dt, device, gen) if bias else None
    out_shape = c.torch(torch.empty(c.x_shape, device="meta"), torch.empty(c.w_shape, device="meta"), None).shape
    res = randn(out_shape, dt, device, gen) if residual else None
    xin, rin = (x[0], None if res is None else res[0]) if unbatched else (x, res)
    with tf32(kind == "tf32"):
        y = poisoned(lambda: c.tileops(xin, w, b, act, rin), device)
    what = "%s %s %s %s act=%s bias=%s res=%s unbatched=%s seed=%d" % (c.op, name, layout, kind, act, bias, residual,
                                                                       unbatched, seed)
    assert y.dtype == dt and y.device == x.device and y.dim() == xin.dim(), what
    ref, mag = reference(c, x, w, b, res, act)
    # a transposed conv's bias, residual and activation are unfused: 16-bit rounds after each step
    steps = 1 + (c.transposed and dt in (torch.float16, torch.bfloat16)) * ((b is not None) + (res is not None)
                                                                           + (act != "none"))
    check(y.unsqueeze(0) if unbatched else y, ref, mag * steps, kind, what)
    if y.numel() > 0:
        check_format(y, xin, what)


# ----------------------------------------------------------------------------------------------
# Forward


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_forward(device, kind, case, layout):
    c = CASES[case]
    p = pick(case, kind, layout)
    run_forward(c, case, device, kind, layout, ACTS[p % 4], bias=p % 3 != 0, residual=p % 2 == 0)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float32", "tf32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", list(CUDA_CASES))
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_forward_cuda(kind, case, layout):
    p = pick(case, kind, layout)
    run_forward(CUDA_CASES[case], case, "cuda", kind, layout, ACTS[p % 4], bias=True, residual=p % 2 == 0)


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("case", ["c1_k3_s2", "c1_depthwise", "t1_k3_s2_op1", "t2_3x3_s2_op1", "t2_depthwise",
                                  "c3_3x3x3", "t3_2x2x2_s2"])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("residual", [False, True], ids=["", "residual"])
def test_bias_activation_residual(device, kind, case, act, residual):
    run_forward(CASES[case], case, device, kind, "channels_last", act, bias=True, residual=residual)
    run_forward(CASES[case], case, device, kind, "contiguous", act, bias=False, residual=residual)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["c1_k3", "c1_groups3", "t1_k4_s2", "t2_3x3_s2_op1", "t2_groups2", "c3_s2",
                                  "t3_3x3x3_s2_op1"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_unbatched(device, case, layout):
    """(C, L) / (C, H, W) / (C, D, H, W) x, as in torch; a residual of the unbatched output's shape."""
    for kind in ("float64", "float32"):
        run_forward(CASES[case]._replace(N=1), case, device, kind, layout, "relu", residual=True, unbatched=True)


class Ops(TorchDispatchMode):
    """The ops a call runs below autograd, with the shapes of the tensors they make."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.seen.append((str(func.overloadpacket), [tuple(t.shape) for t in ([out] if isinstance(out, torch.Tensor)
                                                                           else [])]))
        return out

    def __enter__(self):
        self.seen = []
        return super().__enter__()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
def test_views_not_copies(device, layout):
    """conv1d hands conv2d views of x, weight and residual (never a copy, a channels-last (N, C, L)
    included); a transposed conv allocates no stand-in for the input of the conv it transposes."""
    gen, _ = fresh_generator()
    dt = torch.float32
    x = make((2, 6, 13), layout, dt, device, gen)
    w1, wt = randn((4, 6, 3), dt, device, gen), randn((6, 4, 3), dt, device, gen)
    x2 = make((2, 6, 5, 7), layout, dt, device, gen)
    wt2 = randn((6, 4, 3, 3), dt, device, gen)
    r = randn((2, 4, 11), dt, device, gen)
    allowed = {"aten.unsqueeze", "aten.squeeze", "aten.as_strided", "aten.empty", "aten.view", "aten.add_",
               "tileops.conv2d", "tileops._conv2d_backward"}
    b = torch.ones(4, dtype=dt, device=device)
    for call, x_ in ((lambda: tileops.conv1d(x, w1, None, 1, 0, 1, 1, "relu", r), x),
                     (lambda: tileops.conv_transpose1d(x, wt, b, 2), x),
                     (lambda: tileops.conv_transpose2d(x2, wt2, None, 2, 1, 1), x2)):
        with Ops() as ops:
            y = call()
        names = {n for n, _ in ops.seen}
        assert names <= allowed, names - allowed
        made = [s for n, shapes in ops.seen if n == "aten.empty" for s in shapes]
        assert all(torch.Size(s).numel() <= 1 for s in made), made  # the placeholder's one element
        if layout != "strided":
            check_format(y, x_, "views %s" % layout)


@pytest.mark.parametrize("device", DEVICES)
def test_3d_views_where_they_can(device):
    """On a channels_last_3d x, a kD = 1 conv3d without depth stride or padding (r(2+1)d's spatial
    convs, every 1x1x1) and a kD = 1 unstrided conv_transpose3d copy nothing: x, weight and output
    are views of conv2d's (conv_transpose2d's) operands."""
    gen, _ = fresh_generator()
    dt = torch.float32
    x = make((2, 8, 3, 5, 4), "channels_last", dt, device, gen)
    w1, w2, wt = (make(s, "channels_last", dt, device, gen) for s in ((6, 8, 1, 3, 3), (6, 4, 1, 1, 1), (8, 3, 1, 2, 2)))
    for call in (lambda: tileops.conv3d(x, w1, None, 1, (0, 1, 1)), lambda: tileops.conv3d(x, w2, None, 1, 0, 1, 2),
                 lambda: tileops.conv_transpose3d(x, wt, None, (1, 2, 2))):
        with Ops() as ops:
            y = call()
        copies = {n for n, _ in ops.seen if re.search("clone|copy|pad|cat|contiguous|zeros|add", n)}
        assert not copies, copies
        made = [s for n, shapes in ops.seen if "empty" in n for s in shapes]
        assert all(torch.Size(s).numel() <= 1 for s in made), made  # conv_transpose2d's placeholder
        check_format(y, x, "3-D views")


@pytest.mark.parametrize("device", DEVICES)
def test_conv1d_padding_modes(device):
    gen, _ = fresh_generator()
    x = randn((2, 3, 12), torch.float64, device, gen)
    for k, dil in ((3, 1), (4, 1), (4, 3), (2, 2)):  # odd totals put the extra one after, as torch
        w = randn((5, 3, k), torch.float64, device, gen)
        for pad in ("same", "valid", 2, (1,), [0]):
            y = tileops.conv1d(x, w, None, 1, pad, dil)
            ref = F.conv1d(x, w, None, 1, pad, dil)
            assert y.shape == ref.shape and torch.allclose(y, ref, atol=1e-12), (k, dil, pad)
        y = tileops.conv1d(x[0], w, None, 1, "same", dil)  # unbatched
        assert torch.allclose(y, F.conv1d(x[0], w, None, 1, "same", dil), atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_autocast(device):
    """Under autocast float32 inputs run in the autocast dtype, bias and residual too, as torch's convs."""
    gen, _ = fresh_generator()
    dt = torch.bfloat16
    x1, x2 = randn((2, 4, 9), torch.float32, device, gen), randn((2, 4, 5, 6), torch.float32, device, gen)
    x3 = randn((2, 4, 3, 5, 6), torch.float32, device, gen)
    b = randn((6,), torch.float32, device, gen)
    calls = [(CASES["c1_k3"]._replace(C=4, K=6), x1), (CASES["t1_k4_s2"]._replace(C=4, K=6), x1),
             (CASES["t2_3x3_s2_op1"]._replace(C=4, K=6), x2), (CASES["c3_3x3x3"]._replace(C=4, K=6), x3),
             (CASES["t3_3x3x3_s2_op1"]._replace(C=4, K=6), x3)]
    for c, x in calls:
        w = randn(c.w_shape, torch.float32, device, gen)
        out_shape = c.torch(x.to("meta"), w.to("meta"), None).shape
        res = randn(out_shape, torch.float32, device, gen)
        with torch.autocast(device, dtype=dt):
            y = c.tileops(x, w, b, "relu", res)
        assert y.dtype == dt, c.op
        ref, mag = reference(c, x.to(dt), w.to(dt), b.to(dt), res.to(dt), "relu")
        check(y, ref, mag * 4, "bfloat16", c.op + " autocast")


# ----------------------------------------------------------------------------------------------
# Gradients


def leaf(shape, device, gen, layout="contiguous", dtype=torch.float64):
    return make(shape, layout, dtype, device, gen).requires_grad_()


GRAD_CASES = ["c1_k3_s2", "c1_k5_dil2", "c1_groups3", "c1_depthwise_x2", "c1_stride_gt_kernel", "t1_k4_s2",
              "t1_op_ge_stride", "t1_groups3", "t2_3x3_s2_op1", "t2_aniso", "t2_op_ge_stride", "t2_groups2",
              "t2_depthwise", "t2_2x2_s3_op2", "t2_5x5_pad3", "c3_s2", "c3_1x1x1", "c3_aniso", "c3_groups2",
              "c3_stride_gt_kernel", "t3_3x3x3_s2_op1", "t3_aniso", "t3_op_ge_stride", "t3_groups2", "t3_1x1x1",
              "t3_s3_gaps", "t3_lands_nowhere"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", GRAD_CASES)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_gradcheck(device, case, layout):
    """Every input's gradient (x, weight, bias, residual) through each activation, in float64."""
    c = CASES[case]._replace(N=2)
    gen, _ = fresh_generator()
    x, w = leaf(c.x_shape, device, gen, layout), leaf(c.w_shape, device, gen)
    b = leaf((c.K,), device, gen)
    r = leaf(c.torch(x.detach(), w.detach(), None).shape, device, gen)
    act = ACTS[pick(case, layout) % 4]
    assert torch.autograd.gradcheck(lambda x, w, b, r: c.tileops(x, w, b, act, r), (x, w, b, r), fast_mode=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["c1_k3_s2", "t1_k3_s2_op1", "t2_3x3_s2_op1", "t2_groups2", "c3_s2", "t3_3x3x3_s2_op1",
                                  "t3_2x2x2_s2"])
def test_gradgradcheck(device, case):
    """Second derivatives: conv2d's and _conv2d_backward's own backwards are tileops ops again."""
    c = CASES[case]
    gen, _ = fresh_generator()
    x, w, b = leaf(c.x_shape, device, gen), leaf(c.w_shape, device, gen), leaf((c.K,), device, gen)
    assert torch.autograd.gradgradcheck(lambda x, w, b: c.tileops(x, w, b, "gelu"), (x, w, b), fast_mode=True)


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("case", ["c1_k3_s2", "c1_depthwise", "t1_k3_s2_op1", "t2_4x4_s2", "t2_groups2",
                                  "t2_op_ge_stride", "c3_3x3x3", "c3_groups2", "c3_1x1x1", "t3_3x3x3_s2_op1",
                                  "t3_aniso"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_backward(device, kind, case, layout):
    """grad_input, grad_weight, grad_bias in every dtype against float64 autograd of torch's op."""
    c = CASES[case]
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x = make(c.x_shape, layout, dt, device, gen).requires_grad_()
    w = make(c.w_shape, "channels_last" if layout == "channels_last" else "contiguous", dt, device,
             gen).requires_grad_()
    b = randn((c.K,), dt, device, gen).requires_grad_()
    with tf32(kind == "tf32"):
        y = c.tileops(x, w, b)
        gy = randn(y.shape, dt, device, gen)
        poisoned(lambda: y.backward(gy), device)
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    gy64 = gy.double()
    c.torch(x64, w64, b64).backward(gy64)
    xa, wa = x64.detach().abs().requires_grad_(), w64.detach().abs().requires_grad_()
    c.torch(xa, wa, None).backward(gy64.abs())  # bounds: the same products of absolute values
    what = "%s bwd %s %s %s seed=%d" % (c.op, case, layout, kind, seed)
    check(x.grad, x64.grad, xa.grad, kind, what + " grad_input")
    check(w.grad, w64.grad, wa.grad, kind, what + " grad_weight")
    check(b.grad, b64.grad, gy64.abs().sum([d for d in range(gy.dim()) if d != 1]), kind, what + " grad_bias")
    if x.numel() > 0:
        check_format(x.grad, x, what + " grad_input")


# ----------------------------------------------------------------------------------------------
# opcheck, torch.compile


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_opcheck(device, dtype):
    gen, _ = fresh_generator()
    ops = torch.ops.tileops

    def t(shape, layout="contiguous"):
        return make(shape, layout, dtype, device, gen).requires_grad_()

    cases = [
        (ops.conv1d.default, (t((2, 4, 9)), t((6, 2, 3)), t((6,)), [2], [1], [1], 2, "relu")),
        (ops.conv1d.default, (t((2, 4, 9), "channels_last"), t((4, 1, 3)), None, [1], [2], [2], 4, "silu",
                              t((2, 4, 9), "channels_last"))),
        (ops.conv1d.default, (t((4, 9)), t((3, 4, 1)), None, [1], [0], [1], 1, "none")),
        (ops.conv_transpose1d.default, (t((2, 4, 7)), t((4, 3, 4)), t((6,)), [2], [1], [0], 2, [1], "gelu")),
        (ops.conv_transpose1d.default, (t((4, 7)), t((4, 5, 3)), None, [1], [0], [1], 1, [2], "none")),
        (ops.conv_transpose2d.default, (t((2, 4, 5, 6)), t((4, 3, 3, 3)), t((3,)), [2, 2], [1, 1], [1, 1], 1,
                                        [1, 1], "relu", t((2, 3, 10, 12)))),
        (ops.conv_transpose2d.default, (t((2, 6, 5, 6), "channels_last"), t((6, 1, 3, 2)), None, [2, 1], [1, 0],
                                        [1, 0], 6, [1, 2], "none")),
        (ops.conv_transpose2d.default, (t((4, 5, 6)), t((4, 2, 2, 2)), None, [2, 2], [0, 0], [0, 0], 2, [1, 1],
                                        "silu")),
        (ops.conv3d.default, (t((2, 4, 3, 5, 4)), t((6, 2, 3, 3, 2)), t((6,)), [1, 2, 1], [1, 1, 0], [1, 1, 2], 2,
                              "relu", t((2, 6, 3, 3, 2)))),
        (ops.conv3d.default, (t((2, 4, 3, 5, 4), "channels_last"), t((4, 4, 1, 1, 1)), None, [1, 1, 1], [0, 0, 0],
                              [1, 1, 1], 1, "none")),
        (ops.conv_transpose3d.default, (t((2, 4, 3, 3, 4), "channels_last"), t((4, 3, 3, 2, 3)), t((3,)),
                                        [2, 1, 2], [1, 0, 1], [1, 0, 0], 1, [1, 2, 1], "gelu")),
        (ops.conv_transpose3d.default, (t((4, 2, 3, 3)), t((4, 1, 2, 2, 2)), None, [2, 2, 2], [0, 0, 0],
                                        [0, 0, 0], 4, [1, 1, 1], "none", t((4, 4, 6, 6)))),
    ]
    for op, args in cases:
        # the AOT check compares traced 16-bit activations with eager's beyond its tolerance (test_autograd)
        torch.library.opcheck(op, args, test_utils=OPCHECK_TESTS if dtype == torch.float32 else OPCHECK_TESTS[:-1])


class Family(torch.nn.Module):
    """conv1d -> conv_transpose1d, conv_transpose2d, and conv3d -> conv_transpose3d, with bias, residual
    and activations."""

    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(8, 4, 3) * 0.3)
        self.wt1 = torch.nn.Parameter(torch.randn(8, 4, 4) * 0.3)
        self.wt2 = torch.nn.Parameter(torch.randn(4, 6, 3, 3) * 0.3)
        self.b = torch.nn.Parameter(torch.randn(4))
        self.w3 = torch.nn.Parameter(torch.randn(6, 4, 3, 3, 3) * 0.2)
        self.wt3 = torch.nn.Parameter(torch.randn(6, 4, 2, 3, 2) * 0.2)

    def forward(self, x1, x2, x3):
        h = tileops.conv1d(x1, self.w1, None, 1, "same", activation="gelu")
        y1 = tileops.conv_transpose1d(h, self.wt1, self.b, 2, 1, 0, 1, 1, "relu", None)
        y2 = tileops.conv_transpose2d(x2, self.wt2, None, 2, 1, 1, activation="silu")
        h3 = tileops.conv3d(x3, self.w3, None, (1, 2, 1), 1, activation="relu")
        y3 = tileops.conv_transpose3d(h3, self.wt3, self.b, 2, (0, 1, 0), (1, 0, 0), activation="gelu")
        return y1, y2, y3

    def reference(self, x1, x2, x3):
        h = F.gelu(F.conv1d(x1, self.w1, None, 1, "same"))
        h3 = F.relu(F.conv3d(x3, self.w3, None, (1, 2, 1), 1))
        return (F.relu(F.conv_transpose1d(h, self.wt1, self.b, 2, 1)),
                F.silu(F.conv_transpose2d(x2, self.wt2, None, 2, 1, 1)),
                F.gelu(F.conv_transpose3d(h3, self.wt3, self.b, 2, (0, 1, 0), (1, 0, 0))))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph(device, backend):
    """No graph break; forward, gradients and strides (channels last in, channels last out) as eager."""
    # inductor's on-disk caches key on the graph, not on the extension's C++: a compile cached under an
    # earlier build of these composite ops would come back (and test nothing)
    with torch._inductor.config.patch(fx_graph_cache=False), torch._functorch.config.patch(
            enable_autograd_cache=False):
        run_compiled(device, backend)


def run_compiled(device, backend):
    torch._dynamo.reset()
    gen, _ = fresh_generator()
    m = Family().to(device).double()
    x1 = make((2, 4, 11), "channels_last", torch.float64, device, gen).requires_grad_()
    x2 = make((2, 4, 5, 6), "channels_last", torch.float64, device, gen).requires_grad_()
    x3 = make((2, 4, 3, 6, 5), "channels_last", torch.float64, device, gen).requires_grad_()
    compiled = torch.compile(m, fullgraph=True, backend=backend)
    outs = compiled(x1, x2, x3)
    refs, eager = m.reference(x1, x2, x3), m(x1, x2, x3)
    for o, r, e in zip(outs, refs, eager):
        torch.testing.assert_close(o, r, rtol=1e-9, atol=1e-9)
        assert o.stride() == e.stride(), (o.stride(), e.stride())  # the fake kernels' strides are the real ones
    g = torch.autograd.grad(sum(o.square().sum() for o in outs), [x1, x2, x3, *m.parameters()])
    g_ref = torch.autograd.grad(sum(r.square().sum() for r in refs), [x1, x2, x3, *m.parameters()])
    for a, e in zip(g, g_ref):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------------------------
# Errors: each names the op and the bad argument


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    gen, _ = fresh_generator()

    def r(*shape, dtype=torch.float32):
        return randn(shape, dtype, device, gen)

    x1, w1, wt1 = r(2, 4, 9), r(6, 4, 3), r(4, 6, 3)
    x2, wt2 = r(2, 4, 5, 6), r(4, 3, 3, 3)
    x3, w3, wt3 = r(2, 4, 3, 5, 6), r(6, 4, 3, 3, 3), r(4, 3, 3, 3, 3)
    bad = [
        (lambda: tileops.conv1d(r(2, 4, 9, 1), w1), "conv1d: expected x to be 2-D"),
        (lambda: tileops.conv1d(x1, r(6, 4, 3, 1)), "conv1d: expected weight to be 3-D"),
        (lambda: tileops.conv1d(x1, r(6, 3, 3)), "weight.shape\\[1\\] \\* groups"),
        (lambda: tileops.conv1d(x1, w1, stride=(1, 2)), "conv1d: expected stride to be an int or a list of one"),
        (lambda: torch.ops.tileops.conv1d(x1, w1, None, [1, 2]), "conv1d: expected stride"),
        (lambda: tileops.conv1d(x1, w1, padding=-1), "padding"),
        (lambda: tileops.conv1d(x1, w1, padding="same", stride=2), "conv1d: padding='same' is not supported"),
        (lambda: tileops.conv1d(x1, w1, padding="full"), "conv1d: expected padding to be 'valid'"),
        (lambda: tileops.conv1d(x1, w1, r(5)), "bias"),
        (lambda: tileops.conv1d(x1, w1, None, residual=r(2, 6, 9)), "residual"),
        (lambda: tileops.conv1d(x1, w1, None, residual=r(2, 6, 7, 1)), "conv1d: expected residual to be 3-D"),
        (lambda: tileops.conv1d(x1, w1, activation="tanh"), "activation"),
        (lambda: tileops.conv1d(x1, w1.double()), "weight to have the same dtype"),
        (lambda: tileops.conv1d(x1, r(6, 4, 12)), "kernel"),
        (lambda: tileops.conv_transpose1d(x1, r(5, 6, 3)), "conv_transpose1d.*weight.shape\\[0\\] == x.shape\\[1\\]"),
        (lambda: tileops.conv_transpose1d(x1, wt1, stride=2, output_padding=2), "conv_transpose1d.*output_padding"),
        (lambda: tileops.conv_transpose1d(x1, wt1, output_padding=(1, 1)), "conv_transpose1d: expected output_padding"),
        (lambda: tileops.conv_transpose1d(x1, r(4, 6)), "conv_transpose1d: expected weight to be 3-D"),
        (lambda: tileops.conv_transpose2d(x2, wt2, stride=2, output_padding=2), "conv_transpose2d: expected output_padding"),
        (lambda: tileops.conv_transpose2d(x2, wt2, stride=0), "conv_transpose2d: expected stride"),
        (lambda: tileops.conv_transpose2d(x2, wt2, padding=-1), "conv_transpose2d: expected padding"),
        (lambda: tileops.conv_transpose2d(x2, wt2, dilation=0), "conv_transpose2d: expected dilation"),
        (lambda: tileops.conv_transpose2d(x2, wt2, padding=5), "conv_transpose2d: the output would be"),
        (lambda: tileops.conv_transpose2d(x2, wt2, groups=3), "conv_transpose2d: groups=3 must divide"),
        (lambda: tileops.conv_transpose2d(x2, wt2, groups=0), "conv_transpose2d: expected groups"),
        (lambda: tileops.conv_transpose2d(x2, r(3, 3, 3, 3)), "conv_transpose2d.*weight.shape\\[0\\]"),
        (lambda: tileops.conv_transpose2d(x2, r(4, 3, 3)), "conv_transpose2d: expected weight to be 4-D"),
        (lambda: tileops.conv_transpose2d(r(4, 5), wt2), "conv_transpose2d: expected x to be 3-D"),
        (lambda: tileops.conv_transpose2d(x2, wt2, r(4)), "conv_transpose2d: expected bias of shape \\(3\\)"),
        (lambda: tileops.conv_transpose2d(x2, wt2, residual=r(2, 3, 7, 9)), "conv_transpose2d: expected residual"),
        (lambda: tileops.conv_transpose2d(x2, wt2.half()), "conv_transpose2d: expected weight to have the same"),
        (lambda: tileops.conv_transpose2d(x2, wt2, activation="tanh"), "conv_transpose2d: expected activation"),
        (lambda: tileops.conv_transpose2d(x2.int(), wt2), "conv_transpose2d: expected x to have a floating"),
        (lambda: tileops.conv_transpose2d(x2, wt2, stride=(1, 2, 3)), "conv_transpose2d: expected stride"),
        (lambda: tileops.conv3d(r(2, 4, 5), w3), "conv3d: expected x to be 4-D \\(C, D, H, W\\) or 5-D"),
        (lambda: tileops.conv3d(x3, w3[0]), "conv3d: expected weight to be 5-D"),
        (lambda: tileops.conv3d(x3, r(6, 3, 3, 3, 3)), "conv3d: expected x.shape\\[1\\] == weight.shape\\[1\\]"),
        (lambda: tileops.conv3d(x3, r(5, 2, 3, 3, 3), groups=2), "conv3d: groups=2 must divide the output"),
        (lambda: tileops.conv3d(x3, w3, groups=0), "conv3d: expected groups"),
        (lambda: tileops.conv3d(x3, w3, stride=(1, 2)), "conv3d: expected stride to be an int or three ints"),
        (lambda: torch.ops.tileops.conv3d(x3, w3, None, [1, 2]), "conv3d: expected stride to be an int or three"),
        (lambda: tileops.conv3d(x3, w3, stride=(0, 1, 1)), "conv3d: expected stride in"),
        (lambda: tileops.conv3d(x3, w3, padding=(0, -1, 0)), "conv3d: expected padding in"),
        (lambda: tileops.conv3d(x3, w3, dilation=(1, 1, 0)), "conv3d: expected dilation in"),
        (lambda: tileops.conv3d(x3, r(6, 4, 5, 3, 3)), "conv3d: the kernel .* is larger than the padded input"),
        (lambda: tileops.conv3d(x3, r(6, 4, 3, 9, 3)), "conv3d: the kernel"),
        (lambda: tileops.conv3d(x3, w3, padding="same", stride=2), "conv3d: padding='same' is not supported"),
        (lambda: tileops.conv3d(x3, w3, r(5)), "conv3d.*bias"),
        (lambda: tileops.conv3d(x3, w3, residual=r(2, 6, 3, 5, 6)), "conv3d: expected residual of the output's"),
        (lambda: tileops.conv3d(x3, w3.double()), "conv3d: expected weight to have the same dtype"),
        (lambda: tileops.conv3d(x3.int(), w3), "conv3d: expected x to have a floating"),
        (lambda: tileops.conv3d(x3, w3, activation="tanh"), "conv3d.*activation"),
        (lambda: tileops.conv_transpose3d(x3, r(3, 2, 3, 3, 3)), "conv_transpose3d.*weight.shape\\[0\\]"),
        (lambda: tileops.conv_transpose3d(x3, wt3, stride=2, output_padding=(0, 0, 2)),
         "conv_transpose3d: expected output_padding"),
        (lambda: tileops.conv_transpose3d(x3, wt3, padding=(4, 0, 0)), "conv_transpose3d: the output would be"),
        (lambda: tileops.conv_transpose3d(x3, wt3, groups=3), "conv_transpose3d: groups=3 must divide"),
        (lambda: tileops.conv_transpose3d(x3, wt3[..., 0]), "conv_transpose3d: expected weight to be 5-D"),
        (lambda: tileops.conv_transpose3d(r(2, 4, 5), wt3), "conv_transpose3d: expected x to be 4-D"),
        (lambda: tileops.conv_transpose3d(x3, wt3, r(4)), "conv_transpose3d: expected bias of shape \\(3\\)"),
        (lambda: tileops.conv_transpose3d(x3, wt3, residual=r(2, 3, 5, 7, 7)), "conv_transpose3d: expected residual"),
        (lambda: tileops.conv_transpose3d(x3, wt3, dilation=[1, 1]), "conv_transpose3d: expected dilation"),
        (lambda: tileops.conv_transpose3d(x3, wt3, activation="tanh"), "conv_transpose3d: expected activation"),
    ]
    for call, match in bad:
        with pytest.raises((RuntimeError, ValueError), match=match):
            call()
            pytest.fail("no error, expected one matching %r" % match)


# ----------------------------------------------------------------------------------------------
# tileops.nn drop-ins and convert()

MODULES = [
    (torch.nn.Conv1d, tileops.nn.Conv1d, (4, 6, 3), dict(stride=2, padding=1, groups=2), (2, 4, 11)),
    (torch.nn.Conv1d, tileops.nn.Conv1d, (4, 6, 4), dict(padding="same", padding_mode="reflect", dilation=2),
     (2, 4, 11)),
    (torch.nn.Conv1d, tileops.nn.Conv1d, (4, 6, 3), dict(padding=2, padding_mode="circular", bias=False), (4, 11)),
    (torch.nn.ConvTranspose1d, tileops.nn.ConvTranspose1d, (4, 6, 4), dict(stride=2, padding=1, groups=2), (2, 4, 9)),
    (torch.nn.ConvTranspose2d, tileops.nn.ConvTranspose2d, (4, 6, 3), dict(stride=2, padding=1, output_padding=1),
     (2, 4, 5, 6)),
    (torch.nn.ConvTranspose2d, tileops.nn.ConvTranspose2d, (4, 4, (3, 2)), dict(stride=(2, 1), groups=4, dilation=2,
                                                                               bias=False), (4, 5, 6)),
    (torch.nn.Conv3d, tileops.nn.Conv3d, (4, 6, 3), dict(stride=(1, 2, 2), padding=1, groups=2), (2, 4, 5, 7, 6)),
    (torch.nn.Conv3d, tileops.nn.Conv3d, (4, 6, (1, 3, 3)), dict(padding="same", padding_mode="replicate"),
     (4, 3, 5, 6)),
    (torch.nn.ConvTranspose3d, tileops.nn.ConvTranspose3d, (4, 6, 3), dict(stride=2, padding=1, output_padding=1),
     (2, 4, 3, 4, 3)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("i", range(len(MODULES)))
def test_modules_drop_in(device, i):
    theirs_cls, ours_cls, args, kwargs, x_shape = MODULES[i]
    gen, _ = fresh_generator()
    torch.manual_seed(0)
    theirs = theirs_cls(*args, **kwargs).to(device, torch.float64)
    ours = ours_cls(*args, **kwargs).to(device, torch.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    x = randn(x_shape, torch.float64, device, gen)
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-12, atol=1e-12)
    shared = ours_cls.from_module(theirs, activation="relu")
    assert shared.weight is theirs.weight and shared.bias is theirs.bias and "activation=relu" in repr(shared)
    torch.testing.assert_close(shared(x), F.relu(theirs(x)), rtol=1e-12, atol=1e-12)
    if theirs.transposed:  # output_size at call time picks output_padding, as torch
        n = len(theirs.stride)
        least = [s - p for s, p in zip(theirs(x).shape[-n:], theirs.output_padding)]
        for size in (least, [s + st - 1 for s, st in zip(least, theirs.stride)]):
            torch.testing.assert_close(ours(x, output_size=size), theirs(x, output_size=size), rtol=1e-12, atol=1e-12)
        with pytest.raises(ValueError):
            ours(x, output_size=[s + 5 for s in least])


def test_convert_family():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv1d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1),
                                torch.nn.Unflatten(1, (4, 1)), torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1,
                                                                                        output_padding=1))
    x = torch.randn(2, 3, 10)
    ref = model(x)
    keys = list(model.state_dict())
    tileops.convert(model, exclude=["4"])
    assert [type(m) for m in model] == [tileops.nn.Conv1d, torch.nn.ReLU, tileops.nn.ConvTranspose1d,
                                        torch.nn.Unflatten, torch.nn.ConvTranspose2d]
    tileops.convert(model, include=lambda name, m: isinstance(m, torch.nn.ConvTranspose2d))
    assert type(model[4]) is tileops.nn.ConvTranspose2d
    assert list(model.state_dict()) == keys
    torch.testing.assert_close(model(x), ref, rtol=1e-5, atol=1e-5)
    one = tileops.convert(torch.nn.ConvTranspose1d(3, 3, 2))
    assert type(one) is tileops.nn.ConvTranspose1d
    video = torch.nn.Sequential(torch.nn.Conv3d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.ConvTranspose3d(8, 4, 2, stride=2))
    x3 = torch.randn(2, 3, 4, 6, 5)
    ref3 = video(x3)
    tileops.convert(video)
    assert [type(m) for m in video] == [tileops.nn.Conv3d, torch.nn.ReLU, tileops.nn.ConvTranspose3d]
    torch.testing.assert_close(video(x3), ref3, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_forward_ad_refused_and_inference_mode(device):
    """A dual tensor gets conv2d's clear refusal (never a tangent dropped); inference_mode runs the
    in-place epilogue."""
    import torch.autograd.forward_ad as fwAD

    gen, _ = fresh_generator()
    for name in ("c1_k3_s2", "t1_k3_s2_op1", "t2_3x3_s2_op1", "c3_s2", "t3_3x3x3_s2_op1"):
        c = CASES[name]
        x, w, b = (randn(s, torch.float64, device, gen) for s in (c.x_shape, c.w_shape, (c.K,)))
        with fwAD.dual_level(), pytest.raises(RuntimeError, match="jvp is not implemented"):
            c.tileops(fwAD.make_dual(x, torch.randn_like(x)), w, b)
        with torch.inference_mode():
            y = c.tileops(x, w, b, "gelu")
        torch.testing.assert_close(y, F.gelu(c.torch(x, w, b)), rtol=1e-12, atol=1e-12)


def _problems(fn, capfd):
    """The problems a real call routed, from its trace (the op's own: depth 0)."""
    capfd.readouterr()
    with tileops.routing.trace():
        fn()
    return [p for indent, p in re.findall(r"tileops route ( *)\S+ \[(.*?)\]:", capfd.readouterr().err) if not indent]


@pytest.mark.parametrize("case", ["c1_k3_s2", "c1_depthwise", "t1_k3_s2_op1", "t1_op_ge_stride", "t2_3x3_s2_op1",
                                  "t2_op_ge_stride", "t2_groups2", "c3_s2", "c3_1x1x1", "c3_groups2",
                                  "t3_3x3x3_s2_op1", "t3_aniso", "t3_1x1x1"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_explain_matches_a_real_call(case, layout, capfd):
    """tileops.explain names the problems a call routes, forward and backward, as its trace does."""
    c = CASES[case]
    gen, _ = fresh_generator()
    x = make(c.x_shape, layout, torch.float32, "cpu", gen).requires_grad_()
    w = make(c.w_shape, layout, torch.float32, "cpu", gen).requires_grad_()
    kw = dict(zip(("stride", "padding", "output_padding", "groups", "dilation") if c.transposed else
                  ("stride", "padding", "dilation", "groups"), c.args()))
    fwd = tileops.explain(c.op, x, w, backward=False, **kw)
    both = tileops.explain(c.op, x, w, **kw)
    assert all(d["op"] == "cpu" for d in both) and len(both) == 3, both  # the data and weight gradients
    out = []
    ran = _problems(lambda: out.append(getattr(tileops, c.op)(x, w, **kw)), capfd)
    assert [d["problem"] for d in fwd] == ran
    gy = torch.randn_like(out[0])
    ran_bwd = _problems(lambda: out[0].backward(gy), capfd)
    assert Counter(d["problem"] for d in both[len(fwd):]) == Counter(ran_bwd)


def test_meta_device():
    """Shapes on the meta device (a model built there), as conv2d gives them."""
    for c in (CASES["c1_k3_s2"], CASES["t1_k3_s2_op1"], CASES["t2_3x3_s2_op1"], CASES["c3_s2"],
              CASES["t3_3x3x3_s2_op1"], CASES["t3_aniso"]):
        x, w, b = (torch.empty(s, device="meta") for s in (c.x_shape, c.w_shape, (c.K,)))
        ref = c.torch(x, w, b)
        assert c.tileops(x, w, b, "relu", torch.empty(ref.shape, device="meta")).shape == ref.shape
