"""matmul and linear against float64 references: dtypes x odd sizes x layouts x activations."""
import re

import pytest
import torch
import torch.nn.functional as F

import tileops
from conftest import DEVICE_KINDS, DEVICES
from tileops.ops import ALGO_ALIASES
from utils import DTYPES, check, cuda_kernels, family, fresh_generator, persistent, randn, run_poisoned, tf32

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


ACTIVATIONS = {"none": lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu}


def ref_linear(x, w, bias, activation):
    """activation(x @ w^T + bias) in float64 on the CPU, and the magnitude |x| @ |w|^T + |bias|."""
    x64, w64 = x.double().cpu(), w.double().cpu()
    b64 = bias.double().cpu() if bias is not None else None
    mag = F.linear(x64.abs(), w64.abs(), b64.abs() if b64 is not None else None)
    return ACTIVATIONS[activation](F.linear(x64, w64, b64)), mag


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
@pytest.mark.parametrize("size", [(1000, 1000, 1000), (4095, 257, 2049), (64, 4097, 300), (2048, 2048, 512),
                                  (2049, 1537, 1000), (2047, 1537, 1023)], ids=str)
def test_matmul_large_cuda(kind, size):
    """(2047, 1537, 1023) in fp32: rows of odd length, which the 16-byte loads cannot read; 'auto'
    runs it on zero-padded copies (matmul_padded)."""
    M, N, K = size
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    a, b = randn((M, K), dt, "cuda", gen), randn((N, K), dt, "cuda", gen).t()
    with tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.matmul(a, b), M * N, dt, "cuda")
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "large %s seed=%d" % (size, seed))


# Every rung of the kernel ladder with every dtype it takes (see tileops.matmul), plus 'auto'
# and the two aliases. 'mma' and 'wgmma' run float32 as TF32 whatever the flag says.
SIMT_RUNGS = ["naive", "tiled", "tiled_padded", "register", "vectorized"]
RUNG_KINDS = ([(r, k) for r in SIMT_RUNGS for k in ["float64", "float32", "float16", "bfloat16"]]
              + [("mma", k) for k in ["tf32", "float16", "bfloat16"]] + [("wgmma", k) for k in ["tf32", "float16", "bfloat16"]]
              + [("auto", k) for k in KINDS] + [("simt", "float32"), ("wmma", "bfloat16")])


def rung_operands(case, dt, gen):
    """(a, b) for one layout case on CUDA: odd sizes, every 2-D layout, batches, broadcasts,
    misaligned and zero strides, views with aligned rows but a ragged K."""
    def r(*shape):
        return randn(shape, dt, "cuda", gen)

    size = {"1x1x1": (1, 1, 1), "127x255x511": (127, 255, 511), "65x129x33": (65, 129, 33), "k_zero": (7, 9, 0),
            "square_1024": (1024, 1024, 1024), "aligned_rows_ragged_k": (130, 136, 203),
            "aligned_rows_ragged_n": (70, 131, 96)}.get(case, (129, 264, 72))
    if case.startswith("pipelined"):  # 16-byte rows, ragged K and N, enough 128 x 128 tiles to fill an
        # H100/H200: the 'mma' rung's cp.async ring (B along n for CC, along k for CT)
        a = r(12, 520, 208)[..., :203]
        b = r(12, 203, 272)[..., :259] if case.endswith("CC") else r(12, 259, 208)[..., :203].transpose(-1, -2)
        return a, b
    if case.startswith("edges"):  # K a multiple of 16, 16-byte rows: interior blocks take 16-byte loads
        size, case = (320, 264, 128), case[-2:]
    elif case.startswith("ragged"):  # 16-byte rows, K a multiple of 8 but not 16: a ragged last k tile
        size, case = (320, 264, 200), case[-2:]
    M, N, K = size
    if case in ("TC", "TT"):
        a = r(K, M).t()
    elif case == "SS":
        a = r(M, 2 * K + 1)[:, 1::2]
    elif case in ("batched", "broadcast_b"):
        a = r(3, K, M).transpose(1, 2) if case == "batched" else r(3, M, K)  # batched column-major slices
    elif case == "batch_4d":
        a = r(2, 1, M, K)
    elif case == "misaligned":
        a = r(M * K + 1)[1:].view(M, K)  # 4 (fp32) bytes off a 16-byte boundary
    elif case == "aligned_rows_ragged_k":
        a = r(M, 208)[:, :K]  # row stride a multiple of 16 elements, K not
    else:
        a = r(M, K)
    if case in ("CT", "TT", "65x129x33"):
        b = r(N, K).t()  # K-major b, as a linear weight
    elif case == "SS":
        b = r(K, 3 * N)[:, ::3]
    elif case in ("batched", "broadcast_a"):
        b = r(3, K, N)
    elif case == "batch_4d":
        b = r(3, K, N)
    elif case == "zero_stride":
        b = r(K, 1).expand(K, N)  # every column the same memory
    elif case == "misaligned":
        b = r(K * N + 1)[1:].view(K, N)
    elif case == "aligned_rows_ragged_k":
        b = r(K, 144)[:, :N]
    elif case == "aligned_rows_ragged_n":  # 16-byte rows along n, N not a multiple of 8: a partial last vector
        b = r(K, 136)[:, :N]
    else:
        b = r(K, N)
    return a, b


RUNG_CASES = ["CC", "CT", "TC", "TT", "SS", "1x1x1", "127x255x511", "65x129x33", "k_zero", "batched", "broadcast_a",
              "broadcast_b", "batch_4d", "misaligned", "zero_stride", "aligned_rows_ragged_k", "aligned_rows_ragged_n", "edges_CC", "edges_CT",
              "edges_TC", "edges_TT", "ragged_CC", "ragged_TT", "square_1024", "pipelined_CC", "pipelined_CT"]


@pytest.mark.cuda
@pytest.mark.parametrize("algo,kind", RUNG_KINDS, ids=lambda v: str(v))
@pytest.mark.parametrize("case", RUNG_CASES)
def test_matmul_rungs_cuda(algo, kind, case):
    """Each rung pinned through `algo` on every layout case, against a float64 reference."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    a, b = rung_operands(case, dt, gen)
    n_out = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]).numel() * a.shape[-2] * b.shape[-1]
    with tf32(kind == "tf32"):
        if algo == "wgmma" and case == "k_zero":  # TMA cannot describe an empty K: a clear error instead
            with pytest.raises(RuntimeError, match="algo='wgmma' cannot run this problem: K is zero"):
                tileops.matmul(a, b, algo=algo)
            return
        out = run_poisoned(lambda: tileops.matmul(a, b, algo=algo), out_numel=n_out, dtype=dt, device="cuda")
    assert out.dtype == dt
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "algo=%s %s seed=%d" % (algo, case, seed))


@pytest.mark.cuda
@pytest.mark.parametrize("algo", ["naive", "register", "vectorized", "mma"])
def test_matmul_rungs_many_batches_cuda(algo):
    """More batch entries than a grid's z dimension holds (65535): the launchers split them."""
    gen, seed = fresh_generator()
    kind = "tf32" if algo == "mma" else "float32"
    a, b = randn((70000, 3, 5), torch.float32, "cuda", gen), randn((70000, 5, 4), torch.float32, "cuda", gen)
    with tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.matmul(a, b, algo=algo), 70000 * 12, torch.float32, "cuda")
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "algo=%s batch=70000 seed=%d" % (algo, seed))


@pytest.mark.cuda
@pytest.mark.parametrize("kind,shape,family", [
    ("bfloat16", (127, 255, 511), "gemm_tc_kernel"),   # A's rows not 16-byte aligned: no TMA copy
    ("float16", (130, 1000, 255), "gemm_tc_kernel"),
    ("tf32", (200, 384, 384), "gemm_tc_kernel"),       # TF32 copies its operands for wgmma
    ("tf32", (512, 512, 512), "gemm_tc_kernel"),
    ("bfloat16", (200, 384, 384), "gemm_sm90"),        # aligned: TMA reads it in place
    ("bfloat16", (1, 4096, 4096), "gemm_skinny_tc"),   # skinny: the tensor-core GEMV
    ("float16", (16, 4096, 4096), "gemm_skinny_tc"),
    ("tf32", (16, 4096, 4096), "gemm_skinny_tc"),      # TF32 too, rounded in registers
    ("tf32", (1, 4096, 4096), "gemm_skinny_kernel"),   # but one row of a row-major B: SIMT, fp32
    ("tf32", (256, 1024, 1024), "gemm_sm90")])
def test_matmul_small_auto_family_cuda(kind, shape, family):
    """On Hopper, 'auto' runs the small matmuls that the wgmma path would first copy on the 'mma'
    rung (routing/matmul.cu, kTcSmallWork*), 16-bit and TF32 ones of at most 16 rows on the skinny
    tensor-core kernel (TF32 at one or two rows of a row-major B: the SIMT skinny kernel, fp32),
    and the rest on wgmma; the values are checked too."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the family choice under test is Hopper's (elsewhere 'auto' takes 'mma' throughout)")
    M, N, K = shape
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    a, b = randn((M, K), dt, "cuda", gen), randn((K, N), dt, "cuda", gen)
    with tf32(kind == "tf32"):
        out, names = cuda_kernels(lambda: run_poisoned(lambda: tileops.matmul(a, b), M * N, dt, "cuda"))
    assert any(family in n for n in names), "%s %s: expected %s among %s" % (kind, shape, family, names)
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "auto %s seed=%d" % (shape, seed))


@pytest.mark.cuda
def test_matmul_algo_errors_cuda():
    """A rung pinned on a problem it cannot run says which and why; everything else runs."""
    a = torch.randn(64, 72, device="cuda", dtype=torch.float16)
    with pytest.raises(RuntimeError, match=r"algo='wgmma' cannot run this problem: it takes float16, bfloat16 and "
                                           r"float32 \(as TF32\) only"):
        tileops.matmul(a.double(), a.double().t(), algo="wgmma")
    for name in ("mma", "wmma"):
        with pytest.raises(RuntimeError, match=r"algo='mma' \(tensor cores, alias 'wmma'\) takes float32 .*got float64"):
            tileops.matmul(a.double(), a.double().t(), algo=name)


@pytest.mark.parametrize("algo", [n for n in tileops.ALGOS + tuple(ALGO_ALIASES) if n != "auto"])
def test_algo_names_cpu(algo):
    """Every rung name and alias parses; on the CPU only 'auto' runs, and the error says so."""
    with pytest.raises(RuntimeError, match="algo='%s' names a CUDA kernel family; on cpu only 'auto'" % algo):
        tileops.matmul(torch.randn(3, 4), torch.randn(4, 2), algo=algo)


def test_algo_unknown_lists_choices():
    with pytest.raises(RuntimeError, match="expected algo to be one of 'auto', 'naive', 'tiled', 'tiled_padded', "
                                           "'register', 'vectorized', 'mma', 'wgmma', 'simt', 'wmma', got 'fastest'"):
        tileops.matmul(torch.randn(3, 4), torch.randn(4, 2), algo="fastest")


@pytest.mark.cuda
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("shape", [(300, 200, 257), (2, 150, 256, 256), (2304, 256, 1024), (2333, 200, 1100)],
                         ids=str)
@pytest.mark.parametrize("weight_layout", ["contiguous", "transposed"])
def test_linear_epilogue_cuda(kind, activation, with_bias, shape, weight_layout):
    """Bias + each activation on the kernels linear reaches ('auto': vectorized or register for
    float32, register for float64, mma for TF32, wgmma/mma for float16/bfloat16), with tile
    tails, an nn.Linear weight (K-major) or a transposed one, and grids big enough for
    'vectorized' (2304 x 1024: 144 tiles of 128 x 128, all interior; 2333 x 1100: 171 with
    tails and K = 200, not a multiple of its 16)."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    *lead, fin, fout = shape
    x = randn((*lead, fin), dt, "cuda", gen)
    w = randn((fout, fin), dt, "cuda", gen) if weight_layout == "contiguous" else randn((fin, fout), dt, "cuda", gen).t()
    bias = randn((fout,), dt, "cuda", gen) if with_bias else None
    with tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.linear(x, w, bias, activation), x.numel() // fin * fout, dt, "cuda")
    ref, mag = ref_linear(x, w, bias, activation)
    check(out, ref, mag, kind, "linear %s %s %s seed=%d" % (shape, activation, weight_layout, seed))


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
    ref, mag = ref_linear(x, w, bias, activation)
    check(out, ref, mag, kind, "linear %s %s seed=%d" % (x_shape, activation, seed))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("activation", ["gelu", "silu"])
@pytest.mark.parametrize("shape", [(512, 64), (4096, 256)], ids=str)
def test_fast_activation_elementwise(device, dtype, activation, shape):
    """16-bit outputs take cheaper GELU / SiLU forms (csrc/common/epilogue.h) than erff / expf.
    Through an identity weight (so the pre-activation is x itself, exactly) every element over
    [-12, 12] must lie within one ulp of the dtype of the float64 activation (a rounding may differ
    only near a tie), or within 1e-6 of it (GELU below x = -6, where the fast form clamps and
    torch's own fp32 erf form returns 0), on the CPU (exp2f) and on the GPU (MUFU ex2 / rcp;
    4096 x 256 reaches the Hopper kernels)."""
    gen, seed = fresh_generator()
    rows, k = shape
    x = (torch.rand((rows, k), generator=gen, dtype=torch.float64) * 24 - 12).to(dtype).to(device)
    x[0, :7] = torch.tensor([0.0, -0.0, 1e-3, -1e-3, 6.0, -6.0, -11.5], dtype=dtype)
    eye = torch.eye(k, dtype=dtype, device=device)
    out = tileops.linear(x, eye, None, activation).double().cpu()
    ref = ACTIVATIONS[activation](x.double().cpu())
    bad = (out - ref).abs() > torch.finfo(dtype).eps * ref.abs() + 1e-6
    assert not bad.any(), "%s %s seed=%d: %d elements off by more than an ulp, e.g. x=%s out=%s ref=%s" % (
        activation, dtype, seed, int(bad.sum()), x.cpu()[bad][:4].tolist(), out[bad][:4].tolist(), ref[bad][:4].tolist())


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


# MN-major A on Hopper (fp16/bf16): a column-major A whose row stride is 1 and column stride
# 16-byte aligned is read in place (dY^T and x^T of weight gradients); M past one 64-row atom,
# partial atoms, K tails, batches (broadcast or not), B in both layouts, split-K (few tiles)
A_MN_CASES = [(8, 64, 128), (64, 256, 1000), (200, 136, 77), (1000, 96, 4096), (128, 2048, 8192)]


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("size", A_MN_CASES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("b_layout", ["N", "T"])
@pytest.mark.parametrize("batch", [0, 3, -3], ids=["2d", "batched", "broadcast_a"])
def test_matmul_a_mn_major_cuda(kind, size, b_layout, batch):
    M, N, K = size
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    Mp = (M + 7) // 8 * 8  # column stride of A: 16-byte aligned
    B = abs(batch)
    if batch > 0:
        a = randn((B, K, Mp), dt, "cuda", gen)[:, :, :M].transpose(1, 2)
    else:
        a = randn((K, Mp), dt, "cuda", gen)[:, :M].t()
        a = a.expand(B, M, K) if batch < 0 else a
    if b_layout == "T":
        b = randn((B, N, K) if batch else (N, K), dt, "cuda", gen).transpose(-1, -2)
    else:
        b = randn((B, K, N) if batch else (K, N), dt, "cuda", gen)
    out = run_poisoned(lambda: tileops.matmul(a, b), max(B, 1) * M * N, dt, "cuda")
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "MN-major A %s b=%s batch=%d seed=%d" % (size, b_layout, batch, seed))


# Each Hopper config pinned (autotune family "matmul_sm90"): tile widths, split-K or not,
# bn64x2 (two blocks per SM, a 4-stage ring, no register rebalance) and the persistent kernels
# (ping-pong pp128, cooperative coop256x128, coop128x256 and coop128x192, alone or in clusters
# of two blocks sharing B), on tails in M, N and K, both B layouts, batches and split-K-sized
# problems (C stored by TMA where its rows are 16-byte aligned: N = 72, 136, 264, 64; by threads at
# N = 100); tf32 reads A in place where it is K-major and 16-byte aligned (rounded in registers),
# and B in place through the producer's registers on the one-tile configs up to 128 wide, else
# from a rounded K-major copy (test_tf32_b_in_place_cuda).
# SM90_CONFIGS is the whole family as sm90/host.cu lists it (test_autotune checks the autotuner's
# choice against it).
SM90_CONFIGS = family("matmul_sm90")
PERSISTENT = persistent(SM90_CONFIGS)
SM90_CASES = [(1, 200, 72, 136), (1, 8, 264, 4096), (3, 130, 100, 64), (2, 130, 136, 72), (1, 1000, 64, 1000)]


@pytest.mark.cuda
@pytest.mark.parametrize("config", SM90_CONFIGS)
@pytest.mark.parametrize("kind", ["bfloat16", "float16", "tf32"])
@pytest.mark.parametrize("size", SM90_CASES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("b_layout", ["N", "T"])
def test_matmul_sm90_configs_cuda(config, kind, size, b_layout):
    from tileops import autotune

    batch, M, N, K = size
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    lead = (batch,) if batch > 1 else ()
    a = randn(lead + (M, K), dt, "cuda", gen)
    b = randn(lead + (N, K), dt, "cuda", gen).transpose(-1, -2) if b_layout == "T" else randn(lead + (K, N), dt,
                                                                                                "cuda", gen)
    with autotune.pinned("matmul_sm90", config), tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.matmul(a, b, algo="wgmma"), batch * M * N, dt, "cuda")
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "sm90 %s %s b=%s seed=%d" % (config, size, b_layout, seed))


def pitched(shape, dtype, gen, transposed=False):
    """A (rows, cols) matrix as a view of rows `pitch` elements apart (pitch > cols, a multiple
    of 8), or, transposed, the transpose of such a view of (cols, rows)."""
    *lead, r, c = shape
    if transposed:
        r, c = c, r
    pitch = (c + 7) // 8 * 8 + 8
    m = randn(tuple(lead) + (r, pitch), dtype, "cuda", gen)[..., :c]
    return m.transpose(-1, -2) if transposed else m


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["bfloat16", "float16", "tf32"])
@pytest.mark.parametrize("activation", ["none", "gelu"])
@pytest.mark.parametrize("out_features", [1000, 1001], ids=["n1000", "n1001"])
@pytest.mark.parametrize("config", ["bn64", "bn64-nosplit", "bn128-nosplit", "bn256-nosplit", "bn64x2"])
def test_linear_one_tile_stores_cuda(kind, activation, out_features, config):
    """The one-tile kernels' epilogue: bias + activation stored by TMA from the swizzled staging
    where C's rows are 16-byte aligned (1000), by threads where not (1001); with a residual (by
    threads: the store loop adds it) on the same shapes. TF32: A rounded in registers, B's rows
    (1008 floats apart) by the producer's loads or a rounded copy."""
    from tileops import autotune

    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x, w = pitched((333, 1000), dt, gen), pitched((out_features, 1000), dt, gen)
    bias = randn((out_features,), dt, "cuda", gen)
    res = randn((333, out_features), dt, "cuda", gen)
    ref, mag = ref_linear(x, w, bias, activation)
    ref_r, mag_r = ref_linear(x, w, bias, "none")
    ref_r = ACTIVATIONS[activation](ref_r + res.double().cpu())
    with autotune.pinned("matmul_sm90", config), tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.linear(x, w, bias, activation), 333 * out_features, dt, "cuda")
        out_r = run_poisoned(lambda: tileops.linear(x, w, bias, activation, res), 333 * out_features, dt, "cuda")
    check(out, ref, mag, kind, "linear %s n=%d %s seed=%d" % (config, out_features, activation, seed))
    check(out_r, ref_r, mag_r + res.double().abs().cpu(), kind,
          "linear + residual %s n=%d %s seed=%d" % (config, out_features, activation, seed))


# The persistent kernels' own structure: blocks that walk several tiles (ping-pong's consumer
# warpgroups alternating, the ring running on across tiles, both the ring's wrap and a K shorter
# than it), grouped tile order with a partial last group, tails in M, N and K, an odd count of
# tile rows (a cluster's second block past M), batches (one operand broadcast), every epilogue,
# C's rows 16-byte aligned (16-bit: stored by TMA, N = 264, 712; TF32: float2 stores, every N
# but 263) or not (stored by threads; 16-bit: N = 2100, 1500, 700, 263; TF32: 263), A read in
# place and (K = 77, rows not 16-byte aligned) copied: TF32 then reads a rounded copy from shared
# memory instead of rounding A in registers; and the problems they refuse.
PP_CASES = [(1, 4100, 2100, 72), (1, 3000, 1500, 200), (2, 1100, 700, 1000), (3, 129, 264, 8), (2, 1000, 712, 300),
            (1, 700, 264, 77), (2, 300, 263, 128)]


@pytest.mark.cuda
@pytest.mark.parametrize("config", PERSISTENT)
@pytest.mark.parametrize("kind", ["bfloat16", "float16", "tf32"])
@pytest.mark.parametrize("size", PP_CASES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("b_layout", ["N", "T", "broadcast"])
def test_matmul_persistent_cuda(config, kind, size, b_layout):
    from tileops import autotune

    batch, M, N, K = size
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    a = randn((batch, M, K), dt, "cuda", gen)
    if b_layout == "broadcast":
        b = randn((K, N), dt, "cuda", gen).expand(batch, K, N)
    else:
        b = randn((batch, N, K), dt, "cuda", gen).transpose(-1, -2) if b_layout == "T" else randn((batch, K, N), dt,
                                                                                                  "cuda", gen)
    with autotune.pinned("matmul_sm90", config), tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.matmul(a, b, algo="wgmma"), batch * M * N, dt, "cuda")
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, kind, "%s %s b=%s seed=%d" % (config, size, b_layout, seed))


@pytest.mark.cuda
@pytest.mark.parametrize("config", PERSISTENT)
@pytest.mark.parametrize("kind", ["bfloat16", "float16", "tf32"])
@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("out_features", [1102, 1104], ids=["n1102", "n1104"])
def test_linear_persistent_cuda(config, kind, activation, with_bias, out_features):
    """Every epilogue on the persistent kernels, C's rows not 16-byte aligned (1102: stored by
    threads, element by element) and aligned (1104: 16-bit by TMA, TF32 as float2)."""
    from tileops import autotune

    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    n = out_features
    x, w = randn((3001, 520), dt, "cuda", gen), randn((n, 520), dt, "cuda", gen)
    bias = randn((n,), dt, "cuda", gen) if with_bias else None
    with autotune.pinned("matmul_sm90", config), tf32(kind == "tf32"):
        out = run_poisoned(lambda: tileops.linear(x, w, bias, activation), 3001 * n, dt, "cuda")
        res = randn((3001, n), dt, "cuda", gen)
        with pytest.raises(RuntimeError, match="without a residual"):
            tileops.linear(x, w, bias, activation, res)
        if kind != "tf32":  # fp32 A is never MN-major: a column-major one is copied, K-major
            with pytest.raises(RuntimeError, match="take K-major A"):
                tileops.matmul(randn((520, 3008), dt, "cuda", gen).t(), w.t(), algo="wgmma")  # column-major A
    ref, mag = ref_linear(x, w, bias, activation)
    check(out, ref, mag, kind, "%s linear %s seed=%d" % (config, activation, seed))


# The persistent pick (autotuning off) for a SiLU epilogue: ping-pong up to K = 1024 where its tiles
# make at least 4 waves (ping-pong runs the activation beside the other warpgroup's main loop); past
# that K, on fewer waves, with GELU (whose epilogue the cooperative tiles now run faster, NOTES 77)
# and without an activation past K = 256, the wave scores pick. The shape is sized by the SM count
# so that those scores pick the cooperative 128 x 256 tiles on any even SM count (every Hopper
# part): with N = 512, 256 x 512 for each resident cluster of two fills exactly two waves, where
# 192- and 128-wide tiles fill three and four (ping-pong's 4: the rule's least) at lower speeds;
# with N = 256, one wave against ping-pong's two.
@pytest.mark.cuda
@pytest.mark.parametrize("activation,K,N,want", [
    ("gelu", 768, 512, False), ("gelu", 256, 512, True), ("silu", 1024, 512, True), ("none", 768, 512, False),
    ("relu", 768, 512, False), ("none", 256, 512, True), ("gelu", 2048, 512, False), ("silu", 2048, 512, False),
    ("gelu", 768, 256, False), ("silu", 512, 256, False)])
def test_persistent_pick_activation_cuda(activation, K, N, want):
    from tileops import autotune

    gen, seed = fresh_generator()
    M, dt = 256 * (torch.cuda.get_device_properties(0).multi_processor_count // 2), torch.bfloat16
    x, w, bias = randn((M, K), dt, "cuda", gen), randn((N, K), dt, "cuda", gen), randn((N,), dt, "cuda", gen)
    ping_pong = re.compile(r"persistent_kernel<[^,]+, (false|true), 128, 128, false,")
    with autotune.enabled(False):
        out, names = cuda_kernels(lambda: run_poisoned(lambda: tileops.linear(x, w, bias, activation), M * N, dt, "cuda"))
    assert any("persistent_kernel" in n for n in names), "%s K=%d N=%d: not persistent: %s" % (activation, K, N, names)
    took = any(ping_pong.search(n) for n in names)
    assert took == want, "%s K=%d N=%d: ping-pong %sexpected, kernels %s" % (
        activation, K, N, "" if want else "not ", names)
    ref, mag = ref_linear(x, w, bias, activation)
    check(out, ref, mag, "bfloat16", "persistent pick %s K=%d N=%d seed=%d" % (activation, K, N, seed))


# The heuristic on problems of a few waves (autotuning off; NOTES 78), sized by the SM count:
# "waves", 128-row tiles 192 wide fill exactly three waves of blocks (one an SM) where 256-row
# cluster tiles leave a fourth of theirs idle: the unclustered coop128x192; "gate", between one and
# two 128 x 128 tiles an SM: a persistent kernel (the one-tile bn256 before); "band", 64-wide tiles
# outnumbering the SMs, 128-wide ones not, over K = 3072: the one-tile bn128, not bn64x2; the same
# over K = 768 in 16-bit ("band_short"): bn128 too; and with both operands' rows ragged for TMA
# (N, K = 744, 1000: "band_ragged"), the ping-pong tiles in clusters of two; TF32 over K = 768
# ("band_tf32", where bn64x2 would copy B as bn128 does): bn128.
# TF32, where clustered and unclustered 128 x 192 tiles make one wave alike: "resident", B (9 MB)
# within half the L2: the unclustered tiles; "streamed", B as large as the L2 and one wave of 256-wide
# tiles either way: the clusters, whose multicast pays there. "mn_many", a bf16 matmul of a row-major
# (MN-major) B making 7 waves of 128 x 192 tiles either way: the clusters, which keep an edge there
# over many waves whatever B's size (a linear's K-major B of that shape would take the unclustered).
@pytest.mark.cuda
@pytest.mark.parametrize("case", ["waves", "gate", "band", "band_short", "band_ragged", "band_tf32", "resident",
                                  "streamed", "mn_many"])
def test_heuristic_few_waves_cuda(case):
    from tileops import autotune

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the configs under test are Hopper's")
    props = torch.cuda.get_device_properties(0)
    sms, l2_k = props.multi_processor_count, -(-props.L2_cache_size // (4096 * 4 * 128)) * 128
    band = sms // 8 + 1
    rows, N, K = {"waves": (3 * sms // 4, 768, 768), "gate": (sms // 3 + 1, 384, 768),
                  "band": (band, 768, 3072), "band_short": (band, 768, 768), "band_ragged": (band, 744, 1000),
                  "band_tf32": (band, 768, 768), "resident": (3 * sms // 16, 768, 3072),
                  "streamed": (2 * (sms // 32), 4096, l2_k), "mn_many": (2 * (7 * (sms // 2) // 16), 3072, 768)}[case]
    M = 128 * rows - 5  # the last tile row partial
    dt = torch.float32 if case in ("resident", "streamed", "band_tf32") else torch.bfloat16
    gen, seed = fresh_generator()
    x, w, bias = randn((M, K), dt, "cuda", gen), randn((N, K), dt, "cuda", gen), randn((N,), dt, "cuda", gen)
    if case == "mn_many":
        b = w.t().contiguous()  # K x N, row-major
        call, (ref, mag) = (lambda: tileops.matmul(x, b)), ref_mm(x, b)
    else:
        call, (ref, mag) = (lambda: tileops.linear(x, w, bias)), ref_linear(x, w, bias, "none")
    with autotune.enabled(False), tf32(dt == torch.float32):
        out, names = cuda_kernels(lambda: run_poisoned(call, M * N, dt, "cuda"))
    want = {"waves": r"persistent_kernel<[^,]+, false, 128, 192, true, 1,", "gate": r"persistent_kernel<",
            "band": r"gemm_sm90_kernel<[^,]+, 128,", "band_short": r"gemm_sm90_kernel<[^,]+, 128,",
            "band_ragged": r"persistent_kernel<[^,]+, false, 128, 128, false, 2,",
            "band_tf32": r"gemm_sm90_kernel<float, 128,",
            "resident": r"persistent_kernel<float, false, 128, 192, true, 1,",
            "streamed": r"persistent_kernel<float, false, 128, 256, true, 2,",
            "mn_many": r"persistent_kernel<[^,]+, true, 128, 192, true, 2,"}[case]
    assert any(re.search(want, n) for n in names), "%s %dx%dx%d: expected %s among %s" % (case, M, N, K, want, names)
    check(out, ref, mag, "tf32" if dt == torch.float32 else "bfloat16", "heuristic %s seed=%d" % (case, seed))


# TF32's B read in place by the one-tile kernels' producer threads where K <= 512, rounded on the
# way (the persistent configs, bn256 and longer K take a rounded copy): row-major (MN-major) and
# transposed (K-major) views whose last chunk of 4 words is partial (N = 262 of 264 columns, K =
# 510 of 512), the hidden words past them NaN (a producer that read them would spread NaN into
# C), batched and broadcast, a base one word off 16 bytes (copied instead), and K = 600 (copied).
@pytest.mark.cuda
@pytest.mark.parametrize("config", SM90_CONFIGS)
@pytest.mark.parametrize("form", ["mn_tail", "k_tail", "batched_mn", "broadcast_k", "unaligned", "long_k"])
def test_tf32_b_in_place_cuda(config, form):
    from tileops import autotune

    gen, seed = fresh_generator()
    M, N, K, batch = {"mn_tail": (300, 262, 77, 1), "k_tail": (200, 136, 510, 1), "batched_mn": (130, 100, 64, 3),
                      "broadcast_k": (150, 72, 200, 2), "unaligned": (100, 64, 64, 1), "long_k": (100, 72, 600, 1)}[form]
    a = randn((batch, M, K), torch.float32, "cuda", gen)
    if form == "mn_tail":
        full = randn((K + 1, 264), torch.float32, "cuda", gen)
        full[:, N:] = float("nan")
        full[K:] = float("nan")
        b = full[:K, :N]
    elif form == "k_tail":
        full = randn((N, 512), torch.float32, "cuda", gen)
        full[:, K:] = float("nan")
        b = full[:, :K].t()
    elif form in ("batched_mn", "long_k"):
        b = randn((batch, K, N), torch.float32, "cuda", gen)
    elif form == "broadcast_k":
        b = randn((N, K), torch.float32, "cuda", gen).t().expand(batch, K, N)
    else:
        b = randn((K * N + 1,), torch.float32, "cuda", gen)[1:].view(K, N)
    a = a[0] if batch == 1 else a
    with autotune.pinned("matmul_sm90", config), tf32(True):
        out = run_poisoned(lambda: tileops.matmul(a, b, algo="wgmma"), batch * M * N, torch.float32, "cuda")
    ref, mag = ref_mm(a, b)
    check(out, ref, mag, "tf32", "%s B %s seed=%d" % (config, form, seed))


# TF32 rounds to nearest on every Hopper config: each input is 1 + 0.75 ulp(TF32), which rounds
# up to 1 + 2^-10 (wgmma's own truncation would give 1), so every product is (1 + 2^-10)^2 and
# each output K (1 + 2^-10)^2, to fp32 accumulation error (< 1e-4 relative at K = 1000). An
# operand left unrounded, in the copies, the persistent kernels' registers or split-K, is off by
# 1e-3 relative or more. A read in place (K = 1000: rows 16-byte aligned) and copied (K = 999);
# K = 500: B read in place by the one-tile kernels' producer threads, rounded there.
@pytest.mark.cuda
@pytest.mark.parametrize("config", SM90_CONFIGS)
@pytest.mark.parametrize("K", [1000, 999, 500])
@pytest.mark.parametrize("b_layout", ["N", "T"])
def test_tf32_rounds_to_nearest_cuda(config, K, b_layout):
    from tileops import autotune

    M, N = 300, 264
    x = 1.0 + 0.75 * 2.0 ** -10
    a = torch.full((M, K), x, device="cuda")
    b = torch.full((N, K), x, device="cuda").t() if b_layout == "T" else torch.full((K, N), x, device="cuda")
    with autotune.pinned("matmul_sm90", config), tf32(True):
        out = run_poisoned(lambda: tileops.matmul(a, b, algo="wgmma"), M * N, torch.float32, "cuda")
    want = K * (1.0 + 2.0 ** -10) ** 2
    rel = ((out.double() - want).abs() / want).max().item()
    assert rel < 1e-4, "%s K=%d b=%s: relative error %.3g (truncated operands give >= 1e-3)" % (config, K, b_layout, rel)
