"""Inputs at the edges: element offsets past 2^31 (64-bit indexing), tensors of more than 2^31
elements, NaN and Inf, strided and expanded bias views, very wide outputs."""
import pytest
import torch
import torch.nn.functional as F

import tileops
from conftest import DEVICE_KINDS, DEVICES
from utils import DTYPES, check, fresh_generator, poison, randn, tf32

ops = torch.ops.tileops
BIG = 2 ** 31


def algo_kinds(device, dtype):
    """(algo, tolerance kind) for every kernel family that takes dtype; algo='wmma' runs float32 as TF32."""
    kind = kind_of(dtype)
    if device == "cpu":
        return [("auto", kind)]
    if dtype == torch.float32:
        return [("auto", kind), ("simt", kind), ("wmma", "tf32")]
    return [(a, kind) for a in ("auto", "simt", "wmma", "wgmma")]


# ---------------------------------------------------------------------------------------
# Offsets past 2^31: small operands placed far apart inside one large buffer, so every index
# computation crosses 2^31 elements while only a few kilobytes are touched. On the CPU the
# buffer's untouched pages are never backed by memory, so these run everywhere in well under
# a second.

OFFSET_PARAMS = [("cpu", torch.bfloat16)] + [
    pytest.param("cuda", dt, marks=pytest.mark.cuda) for dt in (torch.bfloat16, torch.float32)]


def kind_of(dtype):
    return {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}[dtype]


@pytest.mark.parametrize("device,dtype", OFFSET_PARAMS, ids=str)
def test_offsets_past_2pow31_matmul_linear(device, dtype):
    gen, seed = fresh_generator()
    buf = torch.empty(BIG + (1 << 20), dtype=dtype, device=device)
    a = buf.as_strided((3, 64), (1 << 30, 1), 0)          # rows at 0, 2^30, 2^31
    b = buf.as_strided((64, 5), (1, 1 << 29), 4096)       # columns up to 2^31 + 4096
    w = buf.as_strided((5, 64), (1 << 29, 1), 8192)       # linear weight rows likewise
    for t in (a, b, w):
        t.copy_(randn(t.shape, dtype, device, gen))
    bias = randn((5,), dtype, device, gen)
    a64, b64, w64, bias64 = (t.double().cpu() for t in (a, b, w, bias))
    for algo, kind in algo_kinds(device, dtype):
        out = tileops.matmul(a, b, algo=algo)
        check(out, a64 @ b64, a64.abs() @ b64.abs(), kind, "matmul algo=%s seed=%d" % (algo, seed))
    out = tileops.linear(a, w, bias, "relu")
    check(out, F.relu(F.linear(a64, w64, bias64)), F.linear(a64.abs(), w64.abs(), bias64.abs()), kind_of(dtype),
          "linear seed=%d" % seed)


@pytest.mark.parametrize("device,dtype", OFFSET_PARAMS, ids=str)
def test_offsets_past_2pow31_conv(device, dtype):
    """A 1x1x32769x65537 input (2^31 + 98305 elements): rows past 32768 start beyond 2^31. A
    3x3 conv with stride 4096 reads 3x3 neighbourhoods only; just those rows are written."""
    gen, seed = fresh_generator()
    H, W, st = 32769, 65537, 4096
    x = torch.empty((1, 1, H, W), dtype=dtype, device=device)
    P, Q = (H - 1) // st + 1, (W - 1) // st + 1
    rows = [p * st + d for p in range(P) for d in (-1, 0, 1)]
    cols = [q * st + d for q in range(Q) for d in (-1, 0, 1)]
    inside_r = torch.tensor([0 <= r < H for r in rows])
    inside_c = torch.tensor([0 <= c < W for c in cols])
    used = torch.tensor([r for r in rows if 0 <= r < H], device=device)
    x[0, 0, used] = randn((len(used), W), dtype, device, gen)
    w, bias = randn((2, 1, 3, 3), dtype, device, gen), randn((2,), dtype, device, gen)
    y = tileops.conv2d(x, w, bias, st, 1)
    assert y.shape == (1, 2, P, Q)
    # the same conv on the gathered neighbourhoods (zeros where they fall into the padding)
    g = torch.zeros(1, 1, 3 * P, 3 * Q, dtype=torch.float64)
    sub = x[0, 0, used].double().cpu()[:, torch.tensor([c for c in cols if 0 <= c < W])]
    g[0, 0, inside_r.nonzero()[:, 0][:, None], inside_c.nonzero()[:, 0][None, :]] = sub
    w64, b64 = w.double().cpu(), bias.double().cpu()
    ref, mag = F.conv2d(g, w64, b64, 3), F.conv2d(g.abs(), w64.abs(), b64.abs(), 3)
    check(y, ref, mag, kind_of(dtype), "conv seed=%d" % seed)
    # weight gradient: K = P*Q, reads the same neighbourhoods
    gy = randn((1, 2, P, Q), dtype, device, gen)
    _, gw, _ = ops._conv2d_backward(gy, x, w, [st, st], [1, 1], [1, 1], 1, [False, True, False])
    gy64 = gy.double().cpu()
    check(gw, torch.nn.grad.conv2d_weight(g, w.shape, gy64, 3), torch.nn.grad.conv2d_weight(g.abs(), w.shape, gy64.abs(), 3),
          kind_of(dtype), "conv wgrad seed=%d" % seed)


# ---------------------------------------------------------------------------------------
# More than 2^31 elements, densely (CUDA: a few GB, a few seconds).


def _rows_ref(a, b, rows, bias=None, act=None):
    a64, b64 = a[rows].double(), b.double()
    ref = a64 @ b64 + (0 if bias is None else bias.double())
    mag = a64.abs() @ b64.abs() + (0 if bias is None else bias.double().abs())
    return (ref if act is None else act(ref)), mag


@pytest.mark.cuda
@pytest.mark.parametrize("algo", ["auto", "wmma", "simt"])
def test_huge_output_matmul_cuda(algo):
    """bf16 (65536 x 64) @ (64 x 32776): 2^31 + 524288 output elements (4.3 GB). The output is
    allocated over NaN so an unwritten element shows; rows at both ends and random rows in
    between are checked against float64."""
    gen, seed = fresh_generator()
    M, N, K = 65536, 32776, 64
    assert M * N > BIG
    cuda_gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=cuda_gen).bfloat16()
    b = torch.randn(K, N, device="cuda", generator=cuda_gen).bfloat16()
    poison("cuda", M * N * 2)
    out = tileops.matmul(a, b, algo=algo)
    assert bool(torch.isfinite(out).all()), "non-finite elements: unwritten output (seed=%d)" % seed
    rows = torch.cat([torch.arange(64), torch.randint(64, M - 64, (64,), generator=gen), torch.arange(M - 64, M)]).cuda()
    ref, mag = _rows_ref(a, b, rows)
    check(out[rows], ref, mag, "bfloat16", "huge matmul algo=%s seed=%d" % (algo, seed))


@pytest.mark.cuda
def test_huge_output_linear_cuda():
    """bf16 linear + bias + GELU with 2^31 + 524288 output elements (the Hopper bias epilogue)."""
    gen, seed = fresh_generator()
    M, N, K = 65536, 32776, 64
    cuda_gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(M, K, device="cuda", generator=cuda_gen).bfloat16()
    w = torch.randn(N, K, device="cuda", generator=cuda_gen).bfloat16()
    bias = torch.randn(N, device="cuda", generator=cuda_gen).bfloat16()
    poison("cuda", M * N * 2)
    out = tileops.linear(x, w, bias, "gelu")
    assert bool(torch.isfinite(out).all()), "non-finite elements: unwritten output (seed=%d)" % seed
    rows = torch.cat([torch.arange(64), torch.randint(64, M - 64, (64,), generator=gen), torch.arange(M - 64, M)]).cuda()
    ref, mag = _rows_ref(x, w.t(), rows, bias, F.gelu)
    check(out[rows], ref, mag, "bfloat16", "huge linear seed=%d" % seed)


@pytest.mark.cuda
def test_huge_input_conv_cuda():
    """bf16 conv whose input has 33 x 64 x 1024 x 1024 = 2^31 + 2^26 elements (4.4 GB): image 32
    starts exactly at element 2^31. Forward and input gradient (an output of the same size) are
    checked on images 0 and 32 against float64."""
    gen, seed = fresh_generator()
    cuda_gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(33, 64, 1024, 1024, device="cuda", dtype=torch.bfloat16, generator=cuda_gen)
    assert x.numel() > BIG
    w = torch.randn(4, 64, 3, 3, device="cuda", generator=cuda_gen).bfloat16()
    bias = torch.randn(4, device="cuda", generator=cuda_gen).bfloat16()
    y = tileops.conv2d(x, w, bias, 2, 1)
    assert bool(torch.isfinite(y).all())
    for n in (0, 32):
        xs, w64, b64 = x[n:n + 1].double(), w.double(), bias.double()
        check(y[n:n + 1], F.conv2d(xs, w64, b64, 2, 1), F.conv2d(xs.abs(), w64.abs(), b64.abs(), 2, 1), "bfloat16",
              "huge conv image %d seed=%d" % (n, seed))
    del y
    gy = torch.randn(33, 4, 512, 512, device="cuda", generator=cuda_gen).bfloat16()
    poison("cuda", x.numel() * 2)
    gx, _, _ = ops._conv2d_backward(gy, x, w, [2, 2], [1, 1], [1, 1], 1, [True, False, False])
    assert bool(torch.isfinite(gx).all()), "non-finite elements: unwritten input gradient (seed=%d)" % seed
    for n in (0, 32):
        g64 = gy[n:n + 1].double()
        ref = torch.nn.grad.conv2d_input((1, 64, 1024, 1024), w.double(), g64, 2, 1)
        mag = torch.nn.grad.conv2d_input((1, 64, 1024, 1024), w.double().abs(), g64.abs(), 2, 1)
        check(gx[n:n + 1], ref, mag, "bfloat16", "huge conv dgrad image %d seed=%d" % (n, seed))


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["bfloat16", "float32", "tf32"])
def test_wide_output_cuda(kind):
    """(8 x 16) @ (16 x 2^24 + 64): more column tiles than a grid's y dimension holds (65535)
    for every kernel family. torch runs this; tileops must too (or fall back), not fail to launch."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    M, K, N = 8, 16, (1 << 24) + 64
    cuda_gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, device="cuda", generator=cuda_gen).to(dt)
    b = torch.randn(K, N, device="cuda", generator=cuda_gen).to(dt)
    poison("cuda", M * N * a.element_size())
    with tf32(kind == "tf32"):
        out = tileops.matmul(a, b)
    assert bool(torch.isfinite(out).all()), "non-finite elements: unwritten output (seed=%d)" % seed
    cols = torch.cat([torch.arange(256), torch.arange(N - 256, N)]).cuda()
    ref = a.double() @ b[:, cols].double()
    check(out[:, cols], ref, a.double().abs() @ b[:, cols].double().abs(), kind, "wide seed=%d" % seed)


# ---------------------------------------------------------------------------------------
# NaN and Inf propagate as IEEE arithmetic (and torch) propagate them. References are float64
# sums of explicit products, so which elements are NaN, +Inf or -Inf does not depend on a
# summation order or on a library's shortcuts.

NAN, INF = float("nan"), float("inf")


def assert_same_nonfinite(out, ref, what):
    o = out.detach().double().cpu()
    for name, fn in [("NaN", torch.isnan), ("+Inf", lambda t: t == INF), ("-Inf", lambda t: t == -INF)]:
        got, want = fn(o), fn(ref)
        assert torch.equal(got, want), "%s: %s at %d places, expected %d (%d differ)" % (
            what, name, int(got.sum()), int(want.sum()), int((got != want).sum()))
    return torch.isfinite(ref)


def explicit_mm(a, b):
    return (a[:, :, None] * b[None, :, :]).sum(1)


def finite_mag(t):
    return torch.nan_to_num(t.abs(), nan=0.0, posinf=0.0)


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("act", ["none", "relu"])
def test_nan_inf_matmul_linear(device, kind, act):
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    a, b, bias = randn((37, 70), dt, device, gen), randn((70, 45), dt, device, gen), randn((45,), dt, device, gen)
    a[1, 2], a[2, 0], a[3, 5] = NAN, INF, -INF
    a[5, 3], a[5, 9] = INF, -INF          # one row with both signs: NaN or +-Inf by b's signs
    b[4, 1], b[6, 7] = INF, NAN
    bias[10] = -INF
    a64, b64, bias64 = (t.double().cpu() for t in (a, b, bias))
    actf = {"none": lambda t: t, "relu": F.relu}[act]
    # every kernel family that takes this kind (algo='wmma' runs float32 as TF32: the tf32 kind)
    algos = {"float64": ["auto", "simt"], "float32": ["auto", "simt"], "tf32": ["auto", "wmma"]}.get(
        kind, ["auto", "simt", "wmma", "wgmma"]) if device == "cuda" else ["auto"]
    with tf32(kind == "tf32"):
        outs = [("matmul algo=" + al, tileops.matmul(a, b, algo=al), explicit_mm(a64, b64), explicit_mm(
            finite_mag(a64), finite_mag(b64))) for al in algos]
        outs.append(("linear " + act, tileops.linear(a, b.t(), bias, act), actf(explicit_mm(a64, b64) + bias64),
                     explicit_mm(finite_mag(a64), finite_mag(b64)) + finite_mag(bias64)))
    for what, out, ref, mag in outs:
        what = "%s %s seed=%d" % (what, kind, seed)
        fin = assert_same_nonfinite(out, ref, what)
        check(out.double().cpu()[fin], ref[fin], mag[fin], kind, what)


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_nan_through_activations(device, kind, act):
    """NaN pre-activations stay NaN through the fused GELU / SiLU (Inf is left out: torch's own
    GELU gives inf or NaN for +Inf depending on dtype and vectorisation)."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x, w, bias = randn((9, 40), dt, device, gen), randn((33, 40), dt, device, gen), randn((33,), dt, device, gen)
    x[2, 5], w[7, 0], bias[3] = NAN, NAN, NAN
    with tf32(kind == "tf32"):
        out = tileops.linear(x, w, bias, act)
    ref = explicit_mm(x.double().cpu(), w.double().cpu().t()) + bias.double().cpu()
    assert torch.equal(torch.isnan(out.cpu()), torch.isnan(ref)), "%s %s seed=%d" % (act, kind, seed)


def explicit_conv(x, w, stride, padding):
    """float64 conv as explicit products over unfolded patches (zeros where padding)."""
    n, k = x.shape[0], w.shape[0]
    cols = F.unfold(x, w.shape[2:], padding=padding, stride=stride)  # (n, c*r*s, L)
    out = (w.reshape(k, -1)[None, :, :, None] * cols[:, None, :, :]).sum(2)
    p = (x.shape[2] + 2 * padding - w.shape[2]) // stride + 1
    return out.reshape(n, k, p, -1)


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
def test_nan_inf_conv(device, kind):
    """NaN/Inf in x (forward, weight gradient) and in grad_out (input gradient)."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x, w = randn((2, 3, 9, 8), dt, device, gen), randn((4, 3, 3, 3), dt, device, gen)
    x[0, 1, 2, 3], x[1, 0, 0, 0], x[1, 2, 6, 5], x[1, 2, 6, 7] = NAN, INF, -INF, INF
    st, pd = 2, 1
    x64, w64 = x.double().cpu(), w.double().cpu()
    with tf32(kind == "tf32"):
        y = tileops.conv2d(x, w, None, st, pd)
        gy = randn(y.shape, dt, device, gen)
        _, gw, _ = ops._conv2d_backward(gy, x, w, [st, st], [pd, pd], [1, 1], 1, [False, True, False])
        gy2 = gy.clone()
        gy2[0, 1, 1, 1], gy2[1, 3, 4, 3], gy2[1, 0, 0, 0] = NAN, INF, -INF
        gx, _, _ = ops._conv2d_backward(gy2, x.nan_to_num(0, 0, 0), w, [st, st], [pd, pd], [1, 1], 1, [True, False, False])
    what = "%s seed=%d" % (kind, seed)
    fin = assert_same_nonfinite(y, explicit_conv(x64, w64, st, pd), "conv forward " + what)
    check(y.double().cpu()[fin], explicit_conv(x64, w64, st, pd)[fin],
          explicit_conv(finite_mag(x64), w64.abs(), st, pd)[fin], kind, "conv forward " + what)
    # weight gradient: gw[k, c, r, s] = sum over images and output pixels of gy * x under tap (r, s)
    cols = F.unfold(x64, (3, 3), padding=pd, stride=st)                  # (n, c*9, L)
    gy64 = gy.double().cpu().reshape(2, 4, -1)                           # (n, k, L)
    ref_gw = (gy64[:, :, None, :] * cols[:, None, :, :]).sum((0, 3)).reshape(w.shape)
    fin = assert_same_nonfinite(gw, ref_gw, "conv wgrad " + what)
    mag_gw = (gy64.abs()[:, :, None, :] * finite_mag(cols)[:, None, :, :]).sum((0, 3)).reshape(w.shape)
    check(gw.double().cpu()[fin], ref_gw[fin], mag_gw[fin], kind, "conv wgrad " + what)
    # input gradient: only real contributions (fold is the adjoint of unfold: no padded taps)
    g2 = gy2.double().cpu().reshape(2, 4, -1)
    contrib = (w64.reshape(4, -1)[None, :, :, None] * g2[:, :, None, :]).sum(1)   # (n, c*9, L)
    ref_gx = F.fold(contrib, (9, 8), (3, 3), padding=pd, stride=st)
    fin = assert_same_nonfinite(gx, ref_gx, "conv dgrad " + what)
    mag_gx = F.fold((w64.abs().reshape(4, -1)[None, :, :, None] * finite_mag(g2)[:, :, None, :]).sum(1), (9, 8), (3, 3),
                    padding=pd, stride=st)
    check(gx.double().cpu()[fin], ref_gx[fin], mag_gx[fin], kind, "conv dgrad " + what)


# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=str)
def test_bias_views(device, dtype):
    """A strided or expanded (stride 0) bias gives the result of its values, for linear (both
    Hopper and generic epilogues on CUDA) and conv2d."""
    gen, seed = fresh_generator()
    x, w = randn((130, 64), dtype, device, gen), randn((136, 64), dtype, device, gen)
    xc, wc = randn((2, 4, 6, 6), dtype, device, gen), randn((136, 4, 3, 3), dtype, device, gen)
    kind = "float64" if dtype == torch.float64 else "bfloat16"
    for what, b in [("strided", randn((272,), dtype, device, gen)[::2]), ("expanded", randn((1,), dtype, device, gen).expand(136))]:
        b64 = b.double().cpu()
        x64, w64, xc64, wc64 = (t.double().cpu() for t in (x, w, xc, wc))
        check(tileops.linear(x, w, b), F.linear(x64, w64, b64), F.linear(x64.abs(), w64.abs(), b64.abs()), kind,
              "linear %s bias seed=%d" % (what, seed))
        check(tileops.conv2d(xc, wc, b, 1, 1), F.conv2d(xc64, wc64, b64, 1, 1),
              F.conv2d(xc64.abs(), wc64.abs(), b64.abs(), 1, 1), kind, "conv %s bias seed=%d" % (what, seed))
