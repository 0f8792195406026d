"""Split-K (skinny M, long K) on Hopper (fp16/bf16) and on the SIMT rungs (fp32 with TF32 off,
fp64): the partial tiles and their fixed-order reduction, with bias, activations, residuals,
odd N and K, strided operands, batches and run-to-run bitwise determinism."""
import pytest
import torch
import torch.nn.functional as F

import tileops
from utils import DTYPES, check, fresh_generator, randn, run_poisoned, tf32

# (batch, M, N, K): few output tiles and K >= 512 so the split path runs on an H100/H200
SPLIT_SIZES = [(1, 1, 4096, 4096), (1, 16, 4096, 4096), (1, 64, 256, 2048), (1, 130, 255, 1000),
               (3, 8, 136, 4100), (1, 200, 7, 3000)]


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("size", SPLIT_SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("activation", ["none", "gelu"])
def test_splitk_linear(kind, size, activation):
    B, M, N, K = size
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x, w, bias = randn((B, M, K), dt, "cuda", gen), randn((N, K), dt, "cuda", gen), randn((N,), dt, "cuda", gen)
    out = run_poisoned(lambda: tileops.linear(x, w, bias, activation), B * M * N, dt, "cuda")
    x64, w64, b64 = x.double().cpu(), w.double().cpu(), bias.double().cpu()
    pre = x64 @ w64.t() + b64
    ref = {"none": pre, "gelu": F.gelu(pre)}[activation]
    mag = x64.abs() @ w64.abs().t() + b64.abs()
    check(out, ref, mag, kind, "split-K linear %s %s seed=%d" % (size, activation, seed))
    again = tileops.linear(x, w, bias, activation)
    assert torch.equal(out, again), "split-K result differs run to run"


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
def test_splitk_matmul_transposed(kind):
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    a = randn((2048, 32), dt, "cuda", gen).t()  # column-major a: the padded-copy path, then split-K
    b = randn((2048, 300), dt, "cuda", gen)
    out = run_poisoned(lambda: tileops.matmul(a, b), 32 * 300, dt, "cuda")
    a64, b64 = a.double().cpu(), b.double().cpu()
    check(out, a64 @ b64, a64.abs() @ b64.abs(), kind, "split-K matmul seed=%d" % seed)


# (M, N, K): few 128x128 (fp32) or 64x64 (fp64) output tiles and K long enough for several
# 256-deep splits; odd K leaves a remainder chunk; the last has tiles enough to run unsplit
SIMT_SPLIT_SIZES = [(1, 4096, 4096), (8, 300, 5003), (64, 152, 20000), (130, 64, 2064), (7, 9, 777), (1024, 1280, 600)]


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float32", "float64"])
@pytest.mark.parametrize("size", SIMT_SPLIT_SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("activation", ["none", "silu"])
@pytest.mark.parametrize("residual", [False, True], ids=["", "residual"])
def test_splitk_simt_linear(kind, size, activation, residual):
    M, N, K = size
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x, w, bias = randn((M, K), dt, "cuda", gen), randn((N, K), dt, "cuda", gen), randn((N,), dt, "cuda", gen)
    res = randn((M, N), dt, "cuda", gen) if residual else None
    with tf32(False):
        out = run_poisoned(lambda: tileops.linear(x, w, bias, activation, res), M * N, dt, "cuda")
        again = tileops.linear(x, w, bias, activation, res)
    x64, w64, b64 = x.double().cpu(), w.double().cpu(), bias.double().cpu()
    pre = x64 @ w64.t() + b64 + (res.double().cpu() if residual else 0)
    ref = {"none": pre, "silu": F.silu(pre)}[activation]
    mag = x64.abs() @ w64.abs().t() + b64.abs() + (res.double().cpu().abs() if residual else 0)
    check(out, ref, mag, kind, "SIMT split-K linear %s %s seed=%d" % (size, activation, seed))
    assert torch.equal(out, again), "SIMT split-K result differs run to run"


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float32", "float64"])
@pytest.mark.parametrize("view", ["a_transposed", "b_transposed", "sliced"])
def test_splitk_simt_matmul_strided(kind, view):
    """Operands as views: the chunks' start offsets walk K through each operand's own K stride."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    M, N, K = 24, 200, 6000
    if view == "a_transposed":
        a, b = randn((K, M), dt, "cuda", gen).t(), randn((K, N), dt, "cuda", gen)
    elif view == "b_transposed":
        a, b = randn((M, K), dt, "cuda", gen), randn((N, K), dt, "cuda", gen).t()
    else:
        a, b = randn((M, 2 * K + 3), dt, "cuda", gen)[:, 3::2], randn((K, N + 5), dt, "cuda", gen)[:, 5:]
    with tf32(False):
        out = run_poisoned(lambda: tileops.matmul(a, b), M * N, dt, "cuda")
    a64, b64 = a.double().cpu(), b.double().cpu()
    check(out, a64 @ b64, a64.abs() @ b64.abs(), kind, "SIMT split-K matmul %s seed=%d" % (view, seed))
