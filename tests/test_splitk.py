"""Hopper split-K (skinny M, long K): the partial tiles and their fixed-order reduction,
with bias, activations, odd N, batches and run-to-run bitwise determinism."""
import pytest
import torch
import torch.nn.functional as F

import tileops
from utils import DTYPES, check, fresh_generator, randn, run_poisoned

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
