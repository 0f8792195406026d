"""matmul and linear against float64 references: dtypes x odd sizes x layouts x activations."""
import pytest
import torch
import torch.nn.functional as F

import tileops
from conftest import DEVICE_KINDS, DEVICES
from utils import DTYPES, check, fresh_generator, randn, run_poisoned, tf32

KINDS = ["float64", "float32", "tf32", "float16", "bfloat16"]
SIZES = [(1, 1, 1), (7, 7, 7), (127, 255, 33), (255, 127, 127), (1, 1000, 7), (1000, 1, 64), (33, 65, 1000),
         (129, 264, 72), (256, 8, 1024), (0, 5, 3), (5, 0, 3), (5, 3, 0)]


def make(shape, layout, dtype, device, gen):
    """A (rows, cols) operand as a contiguous, transposed ("T") or strided ("S") view."""
    r, c = shape
    if layout == "T":
        return randn((c, r), dtype, device, gen).t()
    if layout == "S":
        return randn((r, 2 * c + 1), dtype, device, gen)[:, 1::2]
    return randn((r, c), dtype, device, gen)




def ref_mm(a, b):
    a64, b64 = a.double().cpu(), b.double().cpu()
    return a64 @ b64, a64.abs() @ b64.abs()


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layouts", ["CC", "TC", "CT", "TT", "SS"])
def test_matmul_2d(device, kind, size, layouts):
    M, N, K = size
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    a = make((M, K), layouts[0], dt, device, gen)
    b = make((K, N), layouts[1], dt, device, gen)
    with tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.matmul(a, b), M * N, dt, device)
    assert out.dtype == dt and out.device == a.device
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "matmul %s %s seed=%d" % (size, layouts, seed))


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("shapes", [((3, 17, 9), (3, 9, 11)), ((1, 17, 9), (4, 9, 11)), ((4, 17, 9), (1, 9, 11)),
                                    ((17, 9), (5, 9, 11)), ((5, 17, 9), (9, 11)), ((2, 1, 7, 9), (3, 9, 5)),
                                    ((0, 7, 9), (0, 9, 5))], ids=str)
def test_matmul_batched(device, kind, shapes):
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    a, b = randn(shapes[0], dt, device, gen), randn(shapes[1], dt, device, gen)
    if a.dim() == 3 and a.shape[0] > 1:
        a = a.transpose(-1, -2).contiguous().transpose(-1, -2)  # batched, column-major slices
    with tf32(kind == "tf32"):
        out = tileops.matmul(a, b)
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "batched %s seed=%d" % (shapes, seed))


@pytest.mark.cuda
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("size", [(1000, 1000, 1000), (4095, 257, 2049), (64, 4097, 300)], ids=str)
def test_matmul_large_cuda(kind, size):
    M, N, K = size
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    a, b = randn((M, K), dt, "cuda", gen), randn((N, K), dt, "cuda", gen).t()
    with tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.matmul(a, b), M * N, dt, "cuda")
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "large %s seed=%d" % (size, seed))


ALGO_KINDS = [("simt", k) for k in ["float64", "float32", "float16", "bfloat16"]] + [
    ("wmma", k) for k in ["tf32", "float16", "bfloat16"]] + [("wgmma", k) for k in ["float16", "bfloat16"]]


@pytest.mark.cuda
@pytest.mark.parametrize("algo,kind", ALGO_KINDS)
@pytest.mark.parametrize("case", ["CC", "CT", "TT", "batched", "broadcast_b", "odd_tails", "odd_unaligned",
                                  "square_1024"])
def test_matmul_algos_cuda(algo, kind, case):
    """Each kernel family pinned through `algo`, on layouts every family (wgmma too) accepts."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    M, N, K = {"square_1024": (1024, 1024, 1024), "odd_tails": (1000, 264, 200),
               "odd_unaligned": (1001, 263, 203)}.get(case, (129, 264, 72))
    a = randn((3, M, K) if case in ("batched", "broadcast_b") else (M, K), dt, "cuda", gen)
    if case == "TT":  # both column-major: wgmma reads padded row-major copies
        a, b = randn((K, M), dt, "cuda", gen).t(), randn((K, N), dt, "cuda", gen).t().contiguous().t()
    elif case == "CT":
        b = randn((N, K), dt, "cuda", gen).t()  # K-major b (a linear weight)
    elif case == "batched":
        b = randn((3, K, N), dt, "cuda", gen)
    else:
        b = randn((K, N), dt, "cuda", gen)
    with tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.matmul(a, b, algo=algo), out_numel=a.numel() // K * N, dtype=dt, device="cuda")
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "algo=%s %s seed=%d" % (algo, case, seed))


@pytest.mark.cuda
def test_matmul_algo_errors_cuda():
    a = torch.randn(64, 72, device="cuda", dtype=torch.float16)
    with pytest.raises(RuntimeError, match="algo='wgmma' cannot run this problem: it takes float16 and bfloat16"):
        tileops.matmul(a.float(), a.float().t(), algo="wgmma")
    with pytest.raises(RuntimeError, match="algo='wmma' takes float32, float16 and bfloat16"):
        tileops.matmul(a.double(), a.double().t(), algo="wmma")


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("x_shape", [(7, 33), (2, 5, 127), (300, 64), (0, 33), (33,)], ids=str)
def test_linear(device, kind, activation, with_bias, x_shape):
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    fin, fout = x_shape[-1], 45
    x = randn(x_shape, dt, device, gen)
    w = randn((fin, fout), dt, device, gen).t()  # weight given as a transposed view
    bias = randn((fout,), dt, device, gen) if with_bias else None
    with tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.linear(x, w, bias, activation), x.numel() // fin * fout, dt, device)
    x64, w64 = x.double().cpu(), w.double().cpu()
    b64 = bias.double().cpu() if with_bias else None
    z = F.linear(x64, w64, b64)
    act = {"none": lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu}[activation]
    mag = F.linear(x64.abs(), w64.abs(), b64.abs() if with_bias else None)
    check(out, act(z), mag, kind, "linear %s %s seed=%d" % (x_shape, activation, seed))


@pytest.mark.parametrize("device", DEVICES)
def test_tf32_flag_is_honoured(device):
    """With TF32 off, fp32 results carry full fp32 accuracy (tf32 would miss 1e-5)."""
    gen, _ = fresh_generator()
    a, b = randn((256, 512), torch.float32, device, gen), randn((512, 256), torch.float32, device, gen)
    ref, mag = ref_mm(a, b)
    with tf32(False):
        check(tileops.matmul(a, b), ref, mag, "float32", "tf32 off")
    with tf32(True):
        out = tileops.matmul(a, b)
    err = float((out.double().cpu() - ref).norm() / ref.norm())
    if device == "cuda":
        assert 1e-5 < err < 5e-4, "TF32 on: expected tf32-level error, got %.3g" % err
    else:
        assert err < 1e-5, "the CPU path never uses TF32"


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_nan_inf_propagate(device):
    a = torch.ones(4, 8, device=device)
    b = torch.ones(8, 3, device=device)
    a[1, 2] = float("nan")
    a[2, 0] = float("inf")
    out = tileops.matmul(a, b).cpu()
    ref = (a.double() @ b.double()).cpu()
    assert torch.isnan(out[1]).all() and torch.isinf(out[2]).all()
    assert torch.equal(out[0], ref[0].float())


@pytest.mark.parametrize("device", DEVICES)
def test_outputs_are_fresh_and_deterministic(device):
    gen, _ = fresh_generator()
    a, b = randn((65, 130), torch.float16, device, gen), randn((130, 70), torch.float16, device, gen)
    o1, o2 = tileops.matmul(a, b), tileops.matmul(a, b)
    assert torch.equal(o1, o2)
    assert o1.data_ptr() not in (a.data_ptr(), b.data_ptr(), o2.data_ptr())
