"""The fused residual add: conv2d(..., residual=r) = act(conv2d(x, w) + bias + r), and the same for
linear, against float64 references (fresh inputs, poisoned outputs) on every kernel path.

Where the residual goes on each path (csrc/cuda/conv/conv_lowered.cu, sm90/epilogue.cuh): CPU loop, SIMT,
WMMA, the 'vectorized' ladder rung, depthwise (scalar and 16-byte), Hopper wgmma (fp32 staging,
16-byte residual loads in the store loop; split-K's reduce kernel) read it at the output element's
offset; an NCHW conv output computed through a channels_last buffer takes a channels_last copy of
the residual. A residual whose strides differ from the output's is copied once by the op layer.
"""
import pytest
import torch
import torch.nn.functional as F

import tileops
import tileops.nn as tnn
from conftest import DEVICE_KINDS, DEVICES
from test_conv2d import (
    ACT_FN,
    ACTS,
    CASES,
    CUDA_CASES,
    CUDA_KINDS,
    LAYOUTS,
    SOME_KINDS,
    _misaligned,
    check_conv,
    check_format,
    like_x,
    make_w,
    make_x,
    pick_act,
    poisoned,
    sized,
)
from utils import DTYPES, check, fresh_generator, randn, run_poisoned, tf32

ops = torch.ops.tileops
# how the residual is handed over: in the output's memory format (read in place), the other format,
# a strided view, an expanded (stride 0) tensor of the output's shape, the output's strides off
# 16-byte alignment (read in place: no vector loads may take it)
RES_LAYOUTS = ["like_out", "other_format", "strided", "expanded", "misaligned"]


def make_residual(shape, layout, out_format, dtype, device, gen):
    """A residual of `shape` (4-D conv output or any linear output) in the given layout."""
    if layout == "expanded":
        return randn((1,) * (len(shape) - 1) + (shape[-1],), dtype, device, gen).expand(shape)
    if layout == "strided":
        return randn(tuple(shape[:-1]) + (2 * shape[-1],), dtype, device, gen)[..., ::2]
    fmt = out_format
    if layout == "other_format":
        fmt = torch.contiguous_format if out_format == torch.channels_last else torch.channels_last
    r = randn(shape, dtype, device, gen)
    if len(shape) == 4:
        r = r.contiguous(memory_format=fmt)
    return _misaligned(r) if layout == "misaligned" else r


def conv_residual_ref(x, w, b, r, params, act):
    """float64 act(F.conv2d(x, w, b) + r) and the bound |x| * |w| + |b| + |r|."""
    x64, w64, r64 = x.detach().double(), w.detach().double(), r.detach().double()
    b64 = None if b is None else b.detach().double()
    ref = F.conv2d(x64, w64, b64, *params) + r64
    mag = F.conv2d(x64.abs(), w64.abs(), None if b64 is None else b64.abs(), *params) + r64.abs()
    return ACT_FN[act](ref), mag


def run_conv(c, name, device, kind, layout, act, res_layout="like_out", bias=True, unbatched=False):
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x = make_x(c.x_shape, layout, dt, device, gen)
    w = make_w(c.w_shape, like_x(layout), dt, device, gen)
    b = randn((c.K,), dt, device, gen) if bias else None
    out_format = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    r = make_residual(c.out_shape, res_layout, out_format, dt, device, gen)
    xin, rin = (x[0], r[0]) if unbatched else (x, r)
    with tf32(kind == "tf32"):
        y = poisoned(lambda: tileops.conv2d(xin, w, b, *c.params, act, residual=rin), device)
    what = "conv+residual %s x=%s r=%s %s %s bias=%s seed=%d" % (name, layout, res_layout, kind, act, bias, seed)
    assert y.dtype == dt and y.shape == rin.shape, what
    ref, mag = conv_residual_ref(x, w, b, r, c.params, act)
    check_conv(y.unsqueeze(0) if unbatched else y, ref, mag, kind, c.w_shape[1] * c.R * c.S, what)
    check_format(y, xin, what)


# tiny problems: every dtype, activation and memory format on the CPU (and CUDA)
CONV_CASES = ["3x3", "3x3_s2", "3x3_c64", "1x1", "1x1_c5_k7", "odd_kernel_stride2", "stem7x7", "groups3",
              "depthwise", "depthwise_x2"]


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("act", ACTS)
def test_conv2d_residual(device, kind, case, layout, act):
    run_conv(CASES[case], case, device, kind, layout, act)


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("case", ["1x1", "3x3_s2", "3x3_c64", "stem7x7", "depthwise"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("res_layout", RES_LAYOUTS[1:])
def test_conv2d_residual_layouts(device, kind, case, layout, res_layout):
    run_conv(sized(case, device), case, device, kind, layout, pick_act(case, layout, res_layout), res_layout)


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("case", ["1x1", "3x3", "depthwise"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_residual_unbatched_nobias(device, kind, case, layout):
    run_conv(sized(case, device)._replace(N=1), case, device, kind, layout, "relu", bias=False, unbatched=True)


# CUDA, multi-tile sizes: the 1x1 direct GEMM (channels_last) and the NCHW buffer (contiguous),
# Hopper implicit GEMM (fp16/bf16, channels_last, C % 64 == 0; split-K where the tiles are few:
# 3x3_c64), im2col (stride 2, stem, C % 64 != 0), tails in M and N, more than one 256-wide tile,
# depthwise (16-byte and scalar kernels), grouped (generic implicit GEMM)
CUDA_RES_CASES = ["1x1", "1x1_c5_k7", "1x1_stride2", "1x1_m_tail", "resnet_1x1_256to64@56", "3x3_s2", "3x3_big",
                  "3x3_m_tail", "3x3_k264", "3x3_c64", "3x3_c64_s2", "5x5_c128_p0", "nchw_c130_k70",
                  "resnet_3x3_64@56", "stem7x7",
                  "depthwise", "depthwise_s2", "depthwise_c67", "depthwise_x2", "groups4", "groups4_1x1"]


@pytest.mark.cuda
@pytest.mark.parametrize("kind", CUDA_KINDS)
@pytest.mark.parametrize("case", CUDA_RES_CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_residual_cuda(kind, case, layout):
    run_conv(CUDA_CASES[case], case, "cuda", kind, layout, pick_act(case, layout, kind))


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["3x3_big", "5x5_c128_p0", "nchw_c130_k70"])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("res_layout", ["like_out", "misaligned", "other_format"])
def test_conv2d_residual_fp32_nchw_cuda(case, act, res_layout):
    """fp32 NCHW's implicit GEMM: its own epilogue (3x3_big) and split-K's reduce into NCHW rows
    (5x5_c128_p0, nchw_c130_k70), every activation, residuals in place or copied."""
    run_conv(CUDA_CASES[case], case, "cuda", "float32", "contiguous", act, res_layout)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", ["1x1", "3x3_c64", "resnet_3x3_64@56", "3x3_k264", "depthwise", "stem7x7", "c3_k130"])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("res_layout", ["like_out", "misaligned", "other_format"])
def test_conv2d_residual_hopper_epilogue_cuda(kind, case, act, res_layout):
    """The wgmma store loop (16-byte residual loads; scalar when misaligned) and split-K's reduce,
    the small-C kernel's paired stores (stem7x7, c3_k130), every activation, channels_last (the
    layout of those kernels)."""
    run_conv(CUDA_CASES[case], case, "cuda", kind, "channels_last", act, res_layout)


# ----------------------------------------------------------------------------------------------
# linear


def run_linear(x_shape, fout, device, kind, act, res_layout, bias=True):
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    fin = x_shape[-1]
    x = randn(x_shape, dt, device, gen)
    w = randn((fout, fin), dt, device, gen)
    b = randn((fout,), dt, device, gen) if bias else None
    out_shape = tuple(x_shape[:-1]) + (fout,)
    if res_layout == "transposed" and len(out_shape) >= 2:
        r = randn(out_shape[::-1], dt, device, gen).permute(*reversed(range(len(out_shape))))
    else:
        r = make_residual(out_shape, "like_out" if res_layout == "transposed" else res_layout,
                          torch.contiguous_format, dt, device, gen)
    numel = int(torch.Size(out_shape).numel())
    with tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.linear(x, w, b, act, r), numel, dt, device)
    x64, w64, r64 = x.double().cpu(), w.double().cpu(), r.double().cpu()
    b64 = b.double().cpu() if bias else None
    ref = ACT_FN[act](F.linear(x64, w64, b64) + r64)
    mag = F.linear(x64.abs(), w64.abs(), b64.abs() if bias else None) + r64.abs()
    check(out, ref, mag, kind, "linear+residual %s->%d r=%s %s %s seed=%d" % (x_shape, fout, res_layout, kind, act, seed))
    return out, (x, w, b, r)


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("x_shape", [(7, 33), (2, 5, 127), (0, 33), (33,)], ids=str)
def test_linear_residual(device, kind, act, x_shape):
    run_linear(x_shape, 45, device, kind, act, "like_out")


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("res_layout", ["transposed", "strided", "expanded", "misaligned"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_linear_residual_layouts(device, kind, res_layout, bias):
    run_linear((2, 9, 40), 72, device, kind, pick_act(res_layout, bias), res_layout, bias)


# (x shape, out_features): tails; the 'vectorized' rung (fp32, 2304 x 1024: all tiles interior);
# skinny M with K = 4096 (Hopper split-K, fp16/bf16), a batch of skinny rows with an odd K
LINEAR_CUDA_SHAPES = [((300, 200), 257), ((2, 150, 256), 256), ((2304, 256), 1024), ((2333, 200), 1100),
                      ((16, 4096), 4096), ((1, 4096), 4096), ((3, 8, 4100), 136)]


@pytest.mark.cuda
@pytest.mark.parametrize("kind", CUDA_KINDS)
@pytest.mark.parametrize("shape", LINEAR_CUDA_SHAPES, ids=str)
@pytest.mark.parametrize("res_layout", ["like_out", "misaligned"])
def test_linear_residual_cuda(kind, shape, res_layout):
    x_shape, fout = shape
    out, inputs = run_linear(x_shape, fout, "cuda", kind, pick_act(shape, kind, res_layout), res_layout)
    x, w, b, r = inputs
    with tf32(kind == "tf32"):  # the same precision mode as the first call
        again = tileops.linear(x, w, b, pick_act(shape, kind, res_layout), r)
    assert torch.equal(out, again), "linear+residual differs run to run (split-K must be deterministic)"


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("algo_shape", [((16, 4096), 4096), ((130, 1000), 255), ((2, 64, 512), 384)], ids=str)
def test_linear_residual_splitk_cuda(kind, act, algo_shape):
    """Every activation through the split-K reduce kernel and the staged wgmma epilogue."""
    x_shape, fout = algo_shape
    run_linear(x_shape, fout, "cuda", kind, act, "like_out")


# ----------------------------------------------------------------------------------------------
# autograd, compile, export, autocast, modules


def leaf(shape, device, gen):
    return randn(shape, torch.float64, device, gen).requires_grad_()


# gradcheck with a residual (float64, CPU and CUDA): test_autograd.py's tables, `residual` rows


@pytest.mark.parametrize("device", DEVICES)
def test_residual_grad_only(device):
    """Only the residual requires grad (a frozen layer on a skip path): its gradient is the
    pre-activation gradient, for conv (unbatched too) and linear."""
    gen, _ = fresh_generator()
    x, w = randn((2, 4, 6, 6), torch.float64, device, gen), randn((4, 4, 3, 3), torch.float64, device, gen)
    for xin, r in ((x, leaf((2, 4, 6, 6), device, gen)), (x[0], leaf((4, 6, 6), device, gen))):
        y = tileops.conv2d(xin, w, None, 1, 1, 1, 1, "relu", r)
        y.sum().backward()
        assert torch.equal(r.grad, (y > 0).double())
    r = leaf((3, 5), device, gen)
    y = tileops.linear(randn((3, 7), torch.float64, device, gen), randn((5, 7), torch.float64, device, gen), None,
                       "none", r)
    (2 * y).sum().backward()
    assert torch.equal(r.grad, torch.full_like(r, 2.0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_opcheck_residual(device, dtype):
    gen, _ = fresh_generator()

    def t(*shape, cl=False):
        v = randn(shape, dtype, device, gen)
        return (v.to(memory_format=torch.channels_last) if cl else v).requires_grad_()

    cases = [
        (ops.conv2d.default, (t(2, 4, 7, 6), t(6, 2, 3, 3), t(6), [2, 1], [1, 0], [1, 1], 2, "gelu", t(2, 6, 4, 4))),
        (ops.conv2d.default, (t(2, 8, 7, 6, cl=True), t(8, 8, 1, 1), None, [1, 1], [0, 0], [1, 1], 1, "relu",
                              t(2, 8, 7, 6, cl=True))),
        (ops.conv2d.default, (t(2, 8, 7, 6, cl=True), t(8, 1, 3, 3), t(8), [1, 1], [1, 1], [1, 1], 8, "silu",
                              t(2, 8, 7, 6))),  # residual NCHW, output channels_last: copied
        (ops.conv2d.default, (t(4, 7, 6), t(3, 4, 1, 1), None, [1, 1], [0, 0], [1, 1], 1, "none", t(3, 7, 6))),
        (ops.linear.default, (t(3, 4, 6), t(5, 6), t(5), "silu", t(3, 4, 5))),
        (ops.linear.default, (t(3, 6), t(5, 6), None, "relu", t(5, 3).t())),
    ]
    tests = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    for op, args in cases:
        torch.library.opcheck(op, args, test_utils=tests if dtype == torch.float32 else tests[:-1])


class ResBlock(torch.nn.Module):
    """relu(conv_bn(x) + identity) and an MLP with a skip, in the fused form."""

    def __init__(self, c, f):
        super().__init__()
        self.conv1 = tnn.Conv2d(c, c, 3, padding=1, activation="relu")
        self.conv2 = tnn.Conv2d(c, c, 3, padding=1, activation="relu")
        self.fc = tnn.Linear(f, f, activation="gelu")

    def forward(self, x):
        y = self.conv2(self.conv1(x), residual=x)
        return self.fc(y, residual=y)


def res_block_ref(m, x):
    y = F.relu(F.conv2d(F.relu(F.conv2d(x, m.conv1.weight, m.conv1.bias, 1, 1)), m.conv2.weight, m.conv2.bias, 1, 1) + x)
    return F.gelu(F.linear(y, m.fc.weight, m.fc.bias) + y)


@pytest.mark.parametrize("device", DEVICES)
def test_residual_modules_compile_fullgraph(device):
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = ResBlock(4, 6).to(device)
    x = torch.randn(2, 4, 5, 6, device=device)
    eager = m(x)
    torch.testing.assert_close(eager, res_block_ref(m, x), rtol=1e-5, atol=1e-5)
    compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
    out = compiled(x)
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    res_block_ref(m, x).sum().backward()
    for g, p in zip(grads, m.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_residual_export(device):
    m = ResBlock(4, 6).to(device).eval()
    x = torch.randn(2, 4, 5, 6, device=device)
    ep = torch.export.export(m, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=2, max=64)}})
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"tileops.linear.default", "tileops.conv2d.default"} <= targets, sorted(targets)
    x3 = torch.randn(3, 4, 5, 6, device=device)
    torch.testing.assert_close(ep.module()(x3), m(x3), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_residual_autocast(device):
    """Under autocast the residual is cast with the other floating inputs."""
    gen, _ = fresh_generator()
    x, w, b = (randn(s, torch.float32, device, gen) for s in ((2, 3, 9, 9), (4, 3, 3, 3), (4,)))
    r = randn((2, 4, 9, 9), torch.float32, device, gen)
    a, lw, lr = (randn(s, torch.float32, device, gen) for s in ((33, 65), (9, 65), (33, 9)))
    with torch.autocast(device, dtype=torch.bfloat16):
        outs = [tileops.conv2d(x, w, b, 1, 1, 1, 1, "relu", r), tileops.linear(a, lw, None, "none", lr)]
        refs = [F.relu(F.conv2d(x, w, b, 1, 1) + r), F.linear(a, lw) + lr]
    for o, ref in zip(outs, refs):
        assert o.dtype == torch.bfloat16
        torch.testing.assert_close(o.float(), ref.float(), rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_conv_module_residual_padding_mode(device):
    gen, _ = fresh_generator()
    m = tnn.Conv2d(3, 5, 3, padding=1, padding_mode="reflect", activation="silu").to(device).double()
    x, r = randn((2, 3, 7, 8), torch.float64, device, gen), randn((2, 5, 7, 8), torch.float64, device, gen)
    ref = F.silu(torch.nn.Conv2d.forward(m, x) + r)
    torch.testing.assert_close(m(x, r), ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(m(x, residual=r), ref, rtol=1e-10, atol=1e-10)
