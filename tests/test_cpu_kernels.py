"""The CPU table's packed rows (docs/kernels/cpu.md) at their blocking edges, against float64: row
strips (M % 6), column panels (N % 16, N % 8 for fp64), k slices (K > 256), several output blocks,
the gemv form (M <= 8, its k chunks and vector tails), the depthwise form, the fused epilogue,
every problem kind. In this process they run on the widest row the CPU has (`cpu_avx512`, the
grouped form on `cpu_avx2`); children with torch's switch ATEN_CPU_CAPABILITY set lower run the same
cases on `cpu_avx2` and on `cpu_packed` (the baseline build), which no other test reaches on such a
machine."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import tileops
from utils import DTYPES, check, fresh_generator, randn, run_poisoned

KINDS = ["float64", "float32", "bfloat16", "float16"]
# (M, N, K)
SHAPES = [(1, 1, 1), (3, 5, 4099), (7, 17, 300), (97, 33, 513), (200, 530, 70)]
# (N, C, H, W, K, R, stride, padding, dilation, groups, channels_last)
CONVS = [(2, 5, 11, 9, 7, 3, 1, 1, 1, 1, True), (1, 6, 13, 10, 4, 3, 2, (1, 2), (1, 2), 2, False),
         (3, 16, 7, 7, 20, 1, 1, 0, 1, 1, False), (2, 4, 9, 9, 4, 3, 1, 1, 1, 4, True),
         # depthwise (the grouped form): channels past a vector, stride, dilation, uneven padding, NCHW;
         # and with a channel multiplier
         (2, 11, 12, 9, 11, 3, 2, (2, 0), (2, 1), 11, False), (1, 19, 8, 8, 19, 5, 1, 2, 1, 19, True),
         (2, 3, 7, 7, 6, 3, 1, 1, 1, 3, True),
         # the grouped form, expanded (at most 4 channels a group in and out): ResNeXt-like 4 and 4, 4
         # in and 2 out strided and dilated with uneven padding (NCHW), 2 in and 4 out with output
         # channels past a vector, odd row tails (Q % 4); broadcast (output groups a multiple of the
         # vector, at most 8 reads): 8 and 8, the same strided (NCHW), 8 in and 16 out (its data
         # gradient, 8 outputs reading 16, blocked), 4 in and 8 out (data gradient blocked but in
         # fp64); 33 reads (blocked)
         (2, 32, 9, 11, 32, 3, 1, 1, 1, 8, True), (1, 12, 10, 7, 6, 3, 2, (0, 1), (2, 1), 3, False),
         (1, 10, 13, 6, 20, 5, 2, 2, 1, 5, True), (2, 40, 6, 7, 40, 3, 1, 1, 1, 5, True),
         (1, 32, 11, 9, 32, 3, 2, (1, 0), 1, 4, False), (1, 24, 7, 10, 48, 3, 1, 1, (1, 2), 3, True),
         (2, 12, 6, 9, 24, 3, 1, 1, 1, 3, True), (1, 66, 5, 5, 64, 1, 1, 0, 1, 2, True),
         # x and w channels_last ("both", as model.to(channels_last) leaves them): their runs along k
         # unit-stride, packed by the transposing copy (pack_transpose.h): vector tails (40 and 24
         # channels), strips that cross the padding, a partial last strip and panel
         (2, 40, 9, 10, 35, 3, 2, 1, 1, 1, "both"), (1, 24, 7, 6, 48, 3, 1, (2, 1), (2, 1), 1, "both")]


def linear_case(kind, M, N, K, gen):
    dt = DTYPES[kind]
    x, w = randn((M, K), dt, "cpu", gen), randn((N, K), dt, "cpu", gen)
    b, r = randn((N,), dt, "cpu", gen), randn((M, N), dt, "cpu", gen)
    out = run_poisoned(lambda: tileops.linear(x, w, b, "relu", residual=r), M * N, dt, "cpu")
    xd, wd, bd, rd = x.double(), w.double(), b.double(), r.double()
    mag = xd.abs() @ wd.abs().t() + bd.abs() + rd.abs()
    check(out, torch.relu(xd @ wd.t() + bd + rd), mag, kind, "linear %s %dx%dx%d" % (kind, M, N, K))
    # a batched matmul with a broadcast, transposed B
    a, bt = randn((3, M, K), dt, "cpu", gen), randn((N, K), dt, "cpu", gen)
    out = run_poisoned(lambda: tileops.matmul(a, bt.t()), 3 * M * N, dt, "cpu")
    check(out, a.double() @ bt.double().t(), a.double().abs() @ bt.double().abs().t(), kind, "matmul %s" % kind)
    # A broadcast over a batch of B (batch stride 0), B's columns contiguous along k
    b3 = randn((2, N, K), dt, "cpu", gen).transpose(1, 2)
    out = run_poisoned(lambda: tileops.matmul(a[0], b3), 2 * M * N, dt, "cpu")
    check(out, a[0].double() @ b3.double(), a[0].double().abs() @ b3.double().abs(), kind, "broadcast A %s" % kind)


def conv_case(kind, c, gen):
    n, ci, h, w_, k, r, stride, padding, dilation, groups, cl = c
    dt = DTYPES[kind]
    x, w = randn((n, ci, h, w_), dt, "cpu", gen), randn((k, ci // groups, r, r), dt, "cpu", gen)
    if cl:
        x = x.to(memory_format=torch.channels_last)
    if cl == "both":
        w = w.to(memory_format=torch.channels_last)
    b = randn((k,), dt, "cpu", gen)
    args = (stride, padding, dilation, groups)
    x.requires_grad_()
    w.requires_grad_()
    y = tileops.conv2d(x, w, b, *args)
    gy = randn(y.shape, dt, "cpu", gen)
    y.backward(gy)
    xd, wd = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    yd = F.conv2d(xd, wd, b.double(), *args)
    yd.backward(gy.double())
    what = "conv %s %s" % (kind, c)
    mag = F.conv2d(xd.detach().abs(), wd.detach().abs(), b.double().abs(), *args)
    check(y, yd, mag, kind, what + " forward")
    gmag = torch.nn.grad.conv2d_input(x.shape, wd.detach().abs(), gy.double().abs(), *args)
    check(x.grad, xd.grad, gmag, kind, what + " grad_input")
    wmag = torch.nn.grad.conv2d_weight(xd.detach().abs(), w.shape, gy.double().abs(), *args)
    check(w.grad, wd.grad, wmag, kind, what + " grad_weight")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%dx%d" % s)
def test_linear_blocking(kind, shape):
    gen, seed = fresh_generator()
    linear_case(kind, *shape, gen)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("c", CONVS, ids=lambda c: "c%d-k%d-r%d-g%d" % (c[1], c[4], c[5], c[9]))
def test_conv_blocking(kind, c):
    gen, seed = fresh_generator()
    conv_case(kind, c, gen)


def test_threads_do_not_change_bits():
    """Each output is one fixed-order sum, whatever the blocking the thread count picks."""
    gen, _ = fresh_generator()
    a, b = randn((130, 700), torch.float32, "cpu", gen), randn((700, 90), torch.float32, "cpu", gen)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = tileops.matmul(a, b)
        torch.set_num_threads(max(2, old))
        assert torch.equal(one, tileops.matmul(a, b))
    finally:
        torch.set_num_threads(old)


def widest_row():
    (d,) = tileops.explain("matmul", torch.randn(3, 4), torch.randn(4, 40))
    return d["kernel"]


# torch's switch, and the row it leaves tileops' matmul: the AVX2 row only where this process runs wider
CAPPED = [("avx2", "cpu_avx2"), ("default", "cpu_packed")]


@pytest.mark.parametrize("capability,row", CAPPED, ids=[c for c, _ in CAPPED])
def test_narrower_rows(capability, row):
    """The same cases on a narrower row, where torch's own switch turns the wider ones off."""
    if capability == "avx2" and widest_row() != "cpu_avx512":
        pytest.skip("this process runs cpu_avx2 already: the cases above are its test")
    # the child imports the tileops this process imported (the source tree, or an installed package)
    here = os.path.dirname(os.path.dirname(os.path.abspath(tileops.__file__)))
    env = dict(os.environ, ATEN_CPU_CAPABILITY=capability,
               PYTHONPATH=os.pathsep.join([here, os.path.dirname(os.path.abspath(__file__))]))
    p = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "kernel %s" % row in p.stdout, p.stdout


def main():
    print("kernel", widest_row())
    gen, seed = fresh_generator()
    print("seed", seed)
    for kind in KINDS:
        for s in SHAPES:
            linear_case(kind, *s, gen)
        for c in CONVS:
            conv_case(kind, c, gen)
    print("ok")


if __name__ == "__main__":
    main()
