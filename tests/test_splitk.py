"""Split-K (skinny M, long K) on Hopper (fp16/bf16) and on the SIMT rungs (fp32 with TF32 off,
fp64; M > 16), the skinny kernel (fp32 and fp64, M <= 16, K chunks summed the same way) and the
skinny tensor-core kernel (fp16/bf16 and TF32, M <= 16, Hopper: K split over a cluster): the partial tiles
and their fixed-order reduction, with bias, activations, residuals, odd N and K, strided operands,
batches and run-to-run bitwise determinism."""
import re

import pytest
import torch
import torch.nn.functional as F

import tileops
from utils import DTYPES, check, cuda_kernels, family, fresh_generator, randn, run_poisoned, tf32

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
SIMT_SPLIT_SIZES = [(17, 4096, 4096), (32, 300, 5003), (64, 152, 20000), (130, 64, 2064), (40, 9, 777), (1024, 1280, 600)]


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


# The fp32 SIMT configs (autotune family "matmul_simt", ladder/matmul_ladder.cu's kSimtConfigs, in its
# order), each pinned: 'vectorized' 128 x 128, 128 x 64 and 64 x 64, 256 x 128 with 16 x 8 a thread
# (w256) and 'register' 64 x 64, each split where its tiles leave SMs idle or never;
# on tails, odd K (element loads), a batch, strided operands and a linear with bias, activation and
# residual.
SIMT_CONFIGS = family("matmul_simt")
SIMT_CONFIG_CASES = [(1, 127, 255, 511), (1, 1000, 1000, 1000), (1, 130, 300, 777), (3, 70, 130, 200),
                     (1, 33, 64, 4100)]


@pytest.mark.cuda
@pytest.mark.parametrize("config", SIMT_CONFIGS)
@pytest.mark.parametrize("size", SIMT_CONFIG_CASES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("view", ["contiguous", "b_transposed", "sliced", "padded_k"])
def test_matmul_simt_configs_cuda(config, size, view):
    """padded_k: A's rows padded to a multiple of 4 elements, so 16-byte loads apply to each
    K chunk but the remainder chunk's K ends inside a vector (130 x 300 x 777): it must run on its
    own, not as the vectorized launch's last chunk."""
    from tileops import autotune

    B, M, N, K = size
    gen, seed = fresh_generator()
    lead = (B,) if B > 1 else ()
    dt = torch.float32
    if view == "contiguous":
        a, b = randn(lead + (M, K), dt, "cuda", gen), randn(lead + (K, N), dt, "cuda", gen)
    elif view == "b_transposed":
        a, b = randn(lead + (M, K), dt, "cuda", gen), randn(lead + (N, K), dt, "cuda", gen).transpose(-1, -2)
    elif view == "sliced":
        a, b = randn(lead + (M, K + 5), dt, "cuda", gen)[..., 5:], randn(lead + (K, 2 * N), dt, "cuda", gen)[..., ::2]
    else:
        a, b = randn(lead + (M, (K + 3) // 4 * 4), dt, "cuda", gen)[..., :K], randn(lead + (K, N), dt, "cuda", gen)
    with autotune.pinned("matmul_simt", config), tf32(False):
        out = run_poisoned(lambda: tileops.matmul(a, b), B * M * N, dt, "cuda")
        again = tileops.matmul(a, b)
    a64, b64 = a.double().cpu(), b.double().cpu()
    check(out, a64 @ b64, a64.abs() @ b64.abs(), "float32", "SIMT %s %s %s seed=%d" % (config, size, view, seed))
    assert torch.equal(out, again), "SIMT %s differs run to run" % config


@pytest.mark.cuda
@pytest.mark.parametrize("config", SIMT_CONFIGS)
def test_linear_simt_configs_cuda(config):
    from tileops import autotune

    gen, seed = fresh_generator()
    M, N, K = 300, 200, 1500
    dt = torch.float32
    x, w, bias = randn((M, K), dt, "cuda", gen), randn((N, K), dt, "cuda", gen), randn((N,), dt, "cuda", gen)
    res = randn((M, N), dt, "cuda", gen)
    with autotune.pinned("matmul_simt", config), tf32(False):
        out = run_poisoned(lambda: tileops.linear(x, w, bias, "gelu", res), M * N, dt, "cuda")
    x64, w64, b64, r64 = x.double().cpu(), w.double().cpu(), bias.double().cpu(), res.double().cpu()
    mag = x64.abs() @ w64.abs().t() + b64.abs() + r64.abs()
    check(out, F.gelu(x64 @ w64.t() + b64 + r64), mag, "float32", "SIMT linear %s seed=%d" % (config, seed))


# The SIMT heuristic (autotuning off) takes w256 where its tiles are nearly full, each runs at least
# 384 of K and they fill 96% of their waves of one block per SM (1024 x (128 * SMs) x 512: 4 blocks an
# SM, on any GPU), and a 128-wide tile elsewhere (1024^3: K chunks shorter than 384 wherever its 32
# tiles are split; a batch of 64-column outputs, half of w256's tile empty; 2304 x (128 * SMs / 2) x
# 512: 4.5 waves of w256, as ViT-B fc2's 594 tiles on 132 SMs). N < 0: 128 columns an SM / -N.
@pytest.mark.cuda
@pytest.mark.parametrize("case", [(1, 1024, -1, 512, True), (1, 2304, -2, 512, False), (1, 1024, 1024, 1024, False),
                                  (4, 512, 64, 512, False)], ids=lambda c: "x".join(map(str, c[:4])))
def test_simt_heuristic_w256_cuda(case):
    from tileops import autotune

    B, M, N, K, want = case
    if N < 0:
        N = 128 * (torch.cuda.get_device_properties(0).multi_processor_count // -N)
    gen, seed = fresh_generator()
    lead = (B,) if B > 1 else ()
    a, b = randn(lead + (M, K), torch.float32, "cuda", gen), randn(lead + (K, N), torch.float32, "cuda", gen)
    with autotune.enabled(False), tf32(False):
        out, names = cuda_kernels(lambda: run_poisoned(lambda: tileops.matmul(a, b), B * M * N, torch.float32, "cuda"))
    took = any(re.search(r"VecConfig<(\(int\))?256, (\(int\))?128,", n) for n in names)
    assert took == want, "%s: w256 %s expected, kernels %s" % (case, "" if want else "not", names)
    a64, b64 = a.double().cpu(), b.double().cpu()
    check(out, a64 @ b64, a64.abs() @ b64.abs(), "float32", "SIMT heuristic %s seed=%d" % (case, seed))


# The skinny kernel (M <= 16): every row count it rounds up to (1, 2, 4, 8, 16) and the rows
# between; K = 0, K under one 128-deep stage, odd K, K split into many chunks
# (16-byte vectors: N or K not a multiple of 8 leaves a partial vector at the edge)
SKINNY_SIZES = [(1, 4096, 4096), (2, 33, 130), (3, 1000, 1), (5, 257, 5003), (8, 4096, 4096), (9, 64, 0),
                (16, 4096, 4096), (16, 7, 20000), (4, 300, 77)]
# fp16/bf16 and TF32: the skinny tensor-core kernel on Hopper where the operands are 16-byte
# readable, else Hopper split-K (fp16/bf16) or the skinny kernel (fp32)
SKINNY_KINDS = ["float32", "tf32", "float64", "float16", "bfloat16"]


def skinny_ref(op, x, b, bias, res):
    """float64 reference and magnitude bound of the skinny tests: x @ b (b as K x N) for "matmul";
    gelu(x @ b + bias + res) for "linear"."""
    x64, b64 = x.double().cpu(), b.double().cpu()
    if op != "linear":
        return x64 @ b64, x64.abs() @ b64.abs()
    bias64, res64 = bias.double().cpu(), res.double().cpu()
    return F.gelu(x64 @ b64 + bias64 + res64), x64.abs() @ b64.abs() + bias64.abs() + res64.abs()


@pytest.mark.cuda
@pytest.mark.parametrize("kind", SKINNY_KINDS)
@pytest.mark.parametrize("size", SKINNY_SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op", ["linear", "matmul"])  # a linear weight is K-major B; matmul's b N-major
def test_skinny(kind, size, op):
    M, N, K = size
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x = randn((M, K), dt, "cuda", gen)
    w = randn((N, K) if op == "linear" else (K, N), dt, "cuda", gen)
    bias, res = randn((N,), dt, "cuda", gen), randn((M, N), dt, "cuda", gen)
    with tf32(kind == "tf32"):
        if op == "linear":
            fn = lambda: tileops.linear(x, w, bias, "gelu", res)  # noqa: E731
        else:
            fn = lambda: tileops.matmul(x, w)  # noqa: E731
        out = run_poisoned(fn, M * N, dt, "cuda")
        again = fn()
    ref, mag = skinny_ref(op, x, w.t() if op == "linear" else w, bias, res)
    check(out, ref, mag, kind, "skinny %s %s seed=%d" % (op, size, seed))
    assert torch.equal(out, again), "skinny result differs run to run"


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("view", ["batched", "broadcast_b", "a_transposed", "b_sliced", "out_of_both", "b_offset",
                                  "b_odd_rows", "b_kmajor_odd"])
def test_skinny_views(kind, view):
    """Batches (grid z), a broadcast B, transposed and sliced operands through the index maps; B
    views whose pointer or strides forbid 16-byte vectors (the element-wise form in fp32/fp64)."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    B, M, N, K = 3, 6, 300, 2000
    if view == "batched":
        a, b = randn((B, M, K), dt, "cuda", gen), randn((B, K, N), dt, "cuda", gen)
    elif view == "broadcast_b":
        a, b = randn((B, M, K), dt, "cuda", gen), randn((K, N), dt, "cuda", gen).expand(B, K, N)
    elif view == "a_transposed":
        a, b = randn((B, K, M), dt, "cuda", gen).transpose(1, 2), randn((B, N, K), dt, "cuda", gen).transpose(1, 2)
    elif view == "b_sliced":
        a, b = randn((B, M, K), dt, "cuda", gen), randn((B, K, 2 * N), dt, "cuda", gen)[:, :, ::2]
    elif view == "b_offset":  # N-major, pointer one element past a 16-byte boundary
        a, b = randn((B, M, K), dt, "cuda", gen), randn((B, K * N + 1), dt, "cuda", gen)[:, 1:].view(B, K, N)
    elif view == "b_odd_rows":  # N-major, rows of N + 1 elements
        a, b = randn((B, M, K), dt, "cuda", gen), randn((B, K, N + 1), dt, "cuda", gen)[:, :, :N]
    elif view == "b_kmajor_odd":  # K-major (a weight's transpose), rows of K + 1 elements
        a, b = randn((B, M, K), dt, "cuda", gen), randn((B, N, K + 1), dt, "cuda", gen)[:, :, :K].transpose(1, 2)
    else:
        a, b = randn((B, M, 2 * K), dt, "cuda", gen)[:, :, K:], randn((B, 2 * K, N), dt, "cuda", gen)[:, ::2]
    with tf32(False):
        out = run_poisoned(lambda: tileops.matmul(a, b), B * M * N, dt, "cuda")
    a64, b64 = a.double().cpu(), b.double().cpu()
    check(out, a64 @ b64, a64.abs() @ b64.abs(), kind, "skinny matmul %s seed=%d" % (view, seed))


# The skinny tensor-core kernel (skinny/gemm_skinny_tc.cuh), each config pinned: (M, N, K, op, pad) with
# op "linear" (K-major B, bias + gelu + residual) or "matmul" (N-major B). Every operand is a view
# of rows rounded up to 8 elements plus `pad` (16-byte aligned rows, as the kernel needs; K or N not
# a multiple of 8 then ends in a partial 16-byte chunk). Cluster splits of 1 to 8 (long K, few
# column blocks), N past the last block's edge, K past the last 64-deep stage, rows 9-15 in the
# 16-row form. The two long N-major reductions are a conv weight gradient's GEMM (issue 60: dY^T x
# cols(x), K = N P Q = 44,520 for 4 x 16 x 224^2 at stride 2, 16 output channels), which gave
# wrong 16-bit results that changed from run to run on an H100.
SKINNY_TC_CASES = [
    (1, 4096, 4096, "matmul", 0), (16, 4096, 4096, "linear", 0), (8, 11008, 512, "linear", 0),
    (3, 1000, 1032, "linear", 8), (13, 200, 520, "matmul", 0), (9, 61, 300, "matmul", 8), (2, 100, 77, "linear", 0),
    (4, 512, 8, "matmul", 0), (16, 64, 65536, "linear", 0), (11, 136, 4100, "matmul", 8), (7, 24, 3, "linear", 0),
    (16, 4096, 44520, "matmul", 0), (16, 1024, 44520, "matmul", 0)]


def skinny_tc_operands(M, N, K, op, pad, dt, gen, batch=()):
    """x [*batch, M, K] and the matmul's K x N operand (for "linear" the transpose of an N x K
    weight), each a view of rows rounded up to 8 elements plus `pad`."""
    def rows(lead, length):
        return randn(lead + ((length + 7) // 8 * 8 + pad,), dt, "cuda", gen)[..., :length]
    x = rows(batch + (M,), K)
    return x, rows((N,), K).t() if op == "linear" else rows(batch + (K,), N)


def needs_hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the skinny tensor-core kernel runs on compute capability 9.0 only")


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16", "tf32"])
@pytest.mark.parametrize("config", family("matmul_skinny_tc"))
@pytest.mark.parametrize("case", SKINNY_TC_CASES, ids=lambda c: "%dx%dx%d-%s-pad%d" % c)
def test_skinny_tc(kind, config, case):
    needs_hopper()
    M, N, K, op, pad = case
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x, b = skinny_tc_operands(M, N, K, op, pad, dt, gen)
    bias, res = randn((N,), dt, "cuda", gen), randn((M, N), dt, "cuda", gen)
    if op == "linear":
        fn = lambda: tileops.linear(x, b.t(), bias, "gelu", res)  # noqa: E731
    else:
        fn = lambda: tileops.matmul(x, b)  # noqa: E731
    with tileops.autotune.pinned("matmul_skinny_tc", config), tf32(kind == "tf32"):
        out, names = cuda_kernels(lambda: run_poisoned(fn, M * N, dt, "cuda"))
        again = fn()
    # TF32 with a row-major B at one or two rows: the SIMT skinny kernel, in fp32 (skinny/matmul_skinny_tc.cu)
    want = "gemm_skinny_kernel" if kind == "tf32" and op == "matmul" and M <= 2 else "gemm_skinny_tc"
    assert any(want in n for n in names), "%s: expected %s among %s" % (case, want, names)
    ref, mag = skinny_ref(op, x, b, bias, res)
    check(out, ref, mag, kind, "skinny tc %s %s seed=%d" % (config, case, seed))
    assert torch.equal(out, again), "skinny tc result differs run to run"


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16", "tf32"])
@pytest.mark.parametrize("view", ["batched", "broadcast_b", "out_of_both"])
def test_skinny_tc_views(kind, view):
    """Batches (grid z), a broadcast B (batch stride 0), and operands read out of wider tensors
    (A's second half of each row, every other row of B)."""
    needs_hopper()
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    B, M, N, K = 3, 5, 264, 2000
    a, b = skinny_tc_operands(M, N, K, "matmul", 0, dt, gen, batch=(B,))
    if view == "broadcast_b":
        b = b[0].expand(B, K, N)
    elif view == "out_of_both":
        a, b = randn((B, M, 2 * K), dt, "cuda", gen)[..., K:], randn((B, 2 * K, N), dt, "cuda", gen)[:, ::2]
    with tf32(kind == "tf32"):
        out, names = cuda_kernels(lambda: run_poisoned(lambda: tileops.matmul(a, b), B * M * N, dt, "cuda"))
    assert any("gemm_skinny_tc" in n for n in names), "%s: expected gemm_skinny_tc among %s" % (view, names)
    a64, b64 = a.double().cpu(), b.double().cpu()
    check(out, a64 @ b64, a64.abs() @ b64.abs(), kind, "skinny tc %s seed=%d" % (view, seed))


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16", "tf32"])
@pytest.mark.parametrize("config", ["bn64-tma", "bn128-tma"])
@pytest.mark.parametrize("view", ["one_row_odd_stride", "overlapping_rows"])
def test_skinny_tc_tma_strides(kind, config, view):
    """The TMA configs' maps where A's row stride is not what a map can take as it is: one row
    whose stride is not 16-byte aligned (any aligned stride serves an extent of one), and rows that
    overlap (8 elements apart, shorter than the row: the cp.async kernel runs instead)."""
    needs_hopper()
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    N, K = 200, 1000
    if view == "one_row_odd_stride":
        a = randn((2, K + 3), dt, "cuda", gen)[:1, :K]
    else:
        a = randn((8 * 15 + K,), dt, "cuda", gen).as_strided((16, K), (8, 1))
    w = randn((N, K), dt, "cuda", gen)  # a K-major B (TF32 takes this kernel at one row too)
    with tileops.autotune.pinned("matmul_skinny_tc", config), tf32(kind == "tf32"):
        out, names = cuda_kernels(lambda: run_poisoned(lambda: tileops.linear(a, w), a.shape[0] * N, dt, "cuda"))
    assert any("gemm_skinny_tc" in n for n in names), "%s: expected gemm_skinny_tc among %s" % (view, names)
    a64, b64 = a.double().cpu(), w.double().cpu().t()
    check(out, a64 @ b64, a64.abs() @ b64.abs(), kind, "skinny tc %s %s seed=%d" % (config, view, seed))
