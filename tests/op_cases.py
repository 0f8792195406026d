"""One small call per op x dtype x kernel path, shared by the execution-context tests (streams,
graphs, allocations, determinism), the multi-GPU tests and scripts/device/sanitize.sh.

On CUDA the shapes are picked to reach each kernel family: SIMT (fp64, strict fp32, algo=simt),
WMMA (tf32, small or unaligned fp16/bf16, conv), Hopper wgmma + TMA (aligned bf16/fp16 matmul
and linear, both B layouts and tile widths, with the bias epilogue) and its zero-padded copies
(a transposed a), plus every conv problem (forward, dgrad, wgrad) in both memory formats. Sizes
are odd so tile tails are exercised, and small so a sanitizer can run them all.
"""
import torch
import torch.nn.functional as F

import tileops
from utils import DTYPES, check, randn, tf32

ops = torch.ops.tileops
ACT = {"none": lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu}


class Case:
    """make(dtype, device, gen) -> inputs; run(inputs) -> tensor or tuple; ref(inputs64) -> (refs, mags)."""

    def __init__(self, name, kind, make, run, ref, cuda_only=False):
        self.name, self.kind, self.make, self.run, self.ref, self.cuda_only = name, kind, make, run, ref, cuda_only

    def __repr__(self):
        return self.name

    def inputs(self, device, gen):
        return self.make(DTYPES[self.kind], device, gen)

    def __call__(self, inputs):
        """The outputs as a tuple; float32 runs as TF32 exactly when the kind is "tf32"."""
        with tf32(self.kind == "tf32"):
            out = self.run(inputs)
        return out if isinstance(out, tuple) else (out,)

    def check(self, outs, inputs, what=""):
        """Every output against the float64 reference computed on the CPU."""
        x64 = [t.detach().double().cpu() if isinstance(t, torch.Tensor) else t for t in inputs]
        refs, mags = self.ref(x64)
        for i, (o, r, m) in enumerate(zip(outs, refs, mags)):
            check(o, r, m, self.kind, "%s output %d %s" % (self.name, i, what))


def _mm(algo):
    return lambda i: tileops.matmul(i[0], i[1], algo=algo)


def _mm_ref(i):
    return [i[0] @ i[1]], [i[0].abs() @ i[1].abs()]


def matmul_case(name, kind, a_shape, b_shape, a_transposed=False, algo="auto", a_interleaved=False):
    """a_transposed: a is a column-major view; a_interleaved: a (B, M, K) is a view of a (M, B, K)
    tensor, so its batch stride is smaller than its row stride (heads split off a sequence)."""

    def make(dt, device, gen):
        if a_transposed:
            a = randn(a_shape[:-2] + a_shape[-2:][::-1], dt, device, gen).mT
        elif a_interleaved:
            a = randn((a_shape[1], a_shape[0], a_shape[2]), dt, device, gen).transpose(0, 1)
        else:
            a = randn(a_shape, dt, device, gen)
        return [a, randn(b_shape, dt, device, gen)]

    return Case(name, kind, make, _mm(algo), _mm_ref, cuda_only=algo != "auto")


def _with_residual(inputs, out_shape, residual, dt, device, gen):
    """inputs + [a residual of the output's shape] when residual is on (the fused residual add)."""
    return inputs + [randn(out_shape, dt, device, gen)] if residual else inputs


def _residual_ref(i, n, op):
    """op over the first n inputs, plus the residual (input n) when there is one; and the bound."""
    ref, mag = op(*i[:n]), op(*(t.abs() for t in i[:n]))
    return (ref + i[n], mag + i[n].abs()) if len(i) > n else (ref, mag)


def linear_case(name, kind, x_shape, out_features, act, residual=False):
    def make(dt, device, gen):
        inputs = [randn(x_shape, dt, device, gen), randn((out_features, x_shape[-1]), dt, device, gen),
                  randn((out_features,), dt, device, gen)]
        return _with_residual(inputs, (*x_shape[:-1], out_features), residual, dt, device, gen)

    def ref(i):
        z, mag = _residual_ref(i, 3, F.linear)
        return [ACT[act](z)], [mag]

    return Case(name, kind, make, lambda i: tileops.linear(i[0], i[1], i[2], act, *i[3:]), ref)


def _x(shape, dt, device, gen, channels_last):
    x = randn(shape, dt, device, gen)
    return x.to(memory_format=torch.channels_last) if channels_last else x


def _conv_out_shape(x_shape, w_shape, p):
    return F.conv2d(torch.empty(x_shape, device="meta"), torch.empty(w_shape, device="meta"), None, *p).shape


def conv_case(name, kind, x_shape, w_shape, stride, padding, dilation, groups, act, channels_last=False,
              residual=False, bias=True):
    p = (stride, padding, dilation, groups)

    def make(dt, device, gen):
        inputs = [_x(x_shape, dt, device, gen, channels_last), randn(w_shape, dt, device, gen),
                  randn((w_shape[0],), dt, device, gen) if bias else torch.zeros(w_shape[0], dtype=dt, device=device)]
        return _with_residual(inputs, _conv_out_shape(x_shape, w_shape, p), residual, dt, device, gen)

    def ref(i):
        z, mag = _residual_ref(i, 3, lambda x, w, b: F.conv2d(x, w, b, *p))
        return [ACT[act](z)], [mag]

    # bias=False: the op gets None (the reference adds the zeros in inputs[2])
    return Case(name, kind, make, lambda i: tileops.conv2d(i[0], i[1], i[2] if bias else None, *p, act, *i[3:]), ref)


def conv_bwd_case(name, kind, x_shape, w_shape, stride, padding, dilation, groups, mask, channels_last=False,
                  gy_channels_last=False, w_channels_last=False):
    p = (stride, padding, dilation, groups)

    def make(dt, device, gen):
        x, w = _x(x_shape, dt, device, gen, channels_last), _x(w_shape, dt, device, gen, w_channels_last)
        return [_x(tuple(_conv_out_shape(x_shape, w_shape, p)), dt, device, gen, gy_channels_last), x, w]

    def run(i):
        gx, gw, gb = ops._conv2d_backward(i[0], i[1], i[2], list(stride), list(padding), list(dilation), groups, mask)
        return tuple(t for t, m in zip((gx, gw, gb), mask) if m)

    def ref(i):
        gy, x, w = i
        ga, xa, wa = gy.abs(), x.abs(), w.abs()
        refs = [torch.nn.grad.conv2d_input(x.shape, w, gy, *p), torch.nn.grad.conv2d_weight(x, w.shape, gy, *p),
                gy.sum((0, 2, 3))]
        mags = [torch.nn.grad.conv2d_input(x.shape, wa, ga, *p), torch.nn.grad.conv2d_weight(xa, w.shape, ga, *p),
                ga.sum((0, 2, 3))]
        return [r for r, m in zip(refs, mask) if m], [m_ for m_, m in zip(mags, mask) if m]

    return Case(name, kind, make, run, ref)


def family_case(name, kind, op, x_shape, w_shape, args, act, channels_last=False, residual=False):
    """conv1d / conv3d / conv_transpose1d/2d/3d (conv2d's kernels), args after bias in torch's order.
    channels_last: x stored channels last (3-D: (N, L, C) storage, 5-D: channels_last_3d)."""
    fn, out_channels = getattr(F, op), w_shape[1] * args[3] if op.startswith("conv_transpose") else w_shape[0]
    # a transposed conv's bias, residual and activation run unfused: a 16-bit rounding after each
    steps = 1 + (op.startswith("conv_transpose") and kind in ("float16", "bfloat16")) * (2 + residual)

    def make(dt, device, gen):
        if channels_last:
            x = randn((x_shape[0], *x_shape[2:], x_shape[1]), dt, device, gen).movedim(-1, 1)
        else:
            x = randn(x_shape, dt, device, gen)
        inputs = [x, randn(w_shape, dt, device, gen), randn((out_channels,), dt, device, gen)]
        out = fn(torch.empty(x_shape, device="meta"), torch.empty(w_shape, device="meta"), None, *args).shape
        return _with_residual(inputs, out, residual, dt, device, gen)

    def ref(i):
        z, mag = _residual_ref(i, 3, lambda x, w, b: fn(x, w, b, *args))
        return [ACT[act](z)], [mag * steps]

    return Case(name, kind, make, lambda i: getattr(tileops, op)(i[0], i[1], i[2], *args, act, *i[3:]), ref)


CASES = [
    matmul_case("matmul-f64", "float64", (67, 45), (45, 33)),
    matmul_case("matmul-f32", "float32", (130, 70), (70, 90), a_transposed=True),
    matmul_case("matmul-tf32", "tf32", (129, 70), (70, 91)),
    matmul_case("matmul-tf32-tma-transposed-b", "tf32", (257, 72), (72, 264)),  # B copied K-major
    matmul_case("matmul-tf32-wgmma-padded", "tf32", (70, 33), (33, 45), a_transposed=True, algo="wgmma"),
    matmul_case("matmul-f16-small", "float16", (65, 130), (130, 70)),
    matmul_case("matmul-bf16-tma-bn256", "bfloat16", (257, 72), (72, 264)),
    matmul_case("matmul-bf16-tma-padded", "bfloat16", (257, 72), (72, 264), a_transposed=True),
    matmul_case("matmul-f16-tma-batched", "float16", (3, 129, 64), (64, 128)),
    matmul_case("matmul-f16-tma-interleaved", "float16", (3, 129, 64), (64, 136), a_interleaved=True),
    matmul_case("matmul-bf16-simt", "bfloat16", (2, 65, 33), (2, 33, 70), algo="simt"),
    matmul_case("matmul-f16-wmma", "float16", (129, 72), (72, 136), algo="wmma"),
    matmul_case("matmul-bf16-wgmma-padded", "bfloat16", (70, 33), (33, 45), a_transposed=True, algo="wgmma"),
    linear_case("linear-bf16-tma-bias-gelu", "bfloat16", (2, 129, 72), 120, "gelu"),
    linear_case("linear-tf32-tma-bias-silu", "tf32", (2, 129, 72), 120, "silu"),
    linear_case("linear-f32-relu", "float32", (70, 33), 45, "relu"),
    linear_case("linear-f16-silu", "float16", (70, 33), 45, "silu"),
    linear_case("linear-bf16-tma-residual-relu", "bfloat16", (2, 129, 72), 120, "relu", residual=True),
    linear_case("linear-f16-splitk-residual", "float16", (8, 2048), 64, "none", residual=True),
    linear_case("linear-f32-residual-gelu", "float32", (70, 33), 45, "gelu", residual=True),
    matmul_case("matmul-f32-skinny-splitk", "float32", (5, 3000), (3000, 300)),  # skinny, B N-major, K chunks
    linear_case("linear-f64-skinny-residual", "float64", (3, 2000), 130, "silu", residual=True),  # B K-major
    matmul_case("matmul-f32-simt-splitk", "float32", (40, 5000), (5000, 100)),  # one tile: SIMT split-K
    # rows not 16-byte aligned, small: 'auto' takes the 'mma' rung, two tiles split K, the reduce a dependent
    matmul_case("matmul-bf16-mma-splitk", "bfloat16", (61, 1001), (1001, 70)),
    matmul_case("matmul-bf16-tma-a-mn", "bfloat16", (256, 136), (136, 264), a_transposed=True),  # MN-major A
    conv_case("conv-f32", "float32", (2, 5, 11, 9), (7, 5, 3, 3), (2, 2), (1, 1), (1, 1), 1, "relu"),
    conv_case("conv-tf32-groups-cl", "tf32", (2, 6, 10, 9), (9, 2, 3, 3), (1, 1), (2, 2), (2, 2), 3, "none",
              channels_last=True),
    conv_case("conv-bf16-cl", "bfloat16", (2, 16, 12, 12), (24, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1, "silu",
              channels_last=True),
    conv_case("conv-f64-depthwise", "float64", (1, 8, 9, 9), (8, 1, 3, 3), (1, 1), (1, 1), (1, 1), 8, "gelu"),
    conv_case("conv-bf16-cl-c64-residual", "bfloat16", (2, 64, 9, 9), (72, 64, 3, 3), (1, 1), (1, 1), (1, 1), 1, "relu",
              channels_last=True, residual=True),
    # batch 1, 128 channels at 14x14: K split 4 ways, the reduce a dependent launch on sm_90
    conv_case("conv-bf16-cl-b1-split", "bfloat16", (1, 128, 14, 14), (128, 128, 3, 3), (1, 1), (1, 1), (1, 1), 1,
              "relu", channels_last=True),
    conv_case("conv-f16-nchw-residual", "float16", (2, 16, 9, 9), (24, 16, 1, 1), (1, 1), (0, 0), (1, 1), 1, "silu",
              residual=True),
    conv_case("conv-f32-nchw-1x1-nobias", "float32", (2, 16, 9, 9), (24, 16, 1, 1), (1, 1), (0, 0), (1, 1), 1, "relu",
              bias=False),  # NCHW 1x1 without bias: one batched GEMM on x and y in place
    conv_case("conv-f32-depthwise-cl-residual", "float32", (2, 16, 9, 9), (16, 1, 3, 3), (1, 1), (1, 1), (1, 1), 16,
              "relu", channels_last=True, residual=True),
    conv_bwd_case("conv-bwd-f32", "float32", (2, 4, 9, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 1), 2, [True, True, True]),
    conv_bwd_case("conv-bwd-bf16-cl", "bfloat16", (2, 8, 10, 10), (8, 8, 3, 3), (1, 1), (1, 1), (1, 1), 1,
                  [True, True, False], channels_last=True),
    # C % 64 == 0, x and grad_out channels_last: the Hopper implicit weight gradient (split-K)
    conv_bwd_case("conv-bwd-bf16-cl-c64-wgrad", "bfloat16", (2, 64, 9, 9), (24, 64, 3, 3), (2, 1), (1, 1), (1, 1), 1,
                  [False, True, False], channels_last=True, gy_channels_last=True),
    # all channels_last, stride 1, 16-bit, C % 64 == 0: the data gradient reads w in place, taps
    # flipped (B_FLIP); the weight gradient's epilogue writes dw down its columns (Store::Cols)
    conv_bwd_case("conv-bwd-bf16-all-cl", "bfloat16", (2, 128, 12, 10), (64, 128, 3, 3), (1, 1), (1, 1), (1, 1), 1,
                  [True, True, False], channels_last=True, gy_channels_last=True, w_channels_last=True),
    # as above with 72 columns of dw^T and a longer reduction: split-K, column-major partials
    conv_bwd_case("conv-bwd-f16-all-cl-split", "float16", (3, 64, 20, 20), (72, 64, 3, 3), (1, 1), (1, 1), (1, 1), 1,
                  [False, True, False], channels_last=True, gy_channels_last=True, w_channels_last=True),
    conv_bwd_case("conv-bwd-bf16-cl-b1-split", "bfloat16", (1, 128, 14, 14), (128, 128, 3, 3), (1, 1), (1, 1), (1, 1),
                  1, [True, True, False], channels_last=True, gy_channels_last=True, w_channels_last=True),
    conv_bwd_case("conv-bwd-f16-dilated", "float16", (1, 3, 12, 11), (5, 3, 3, 3), (1, 2), (2, 1), (2, 1), 1,
                  [True, True, True]),
    # the rest of the conv family on conv2d's kernels: conv1d as conv2d with H = 1, the transposed
    # convs as its data gradient (unfused bias, residual, activation after it)
    family_case("conv1d-bf16-cl-residual", "bfloat16", "conv1d", (2, 16, 33), (24, 16, 3), (1, 1, 1, 1), "relu",
                channels_last=True, residual=True),
    family_case("conv1d-f32-depthwise-s2", "float32", "conv1d", (2, 8, 31), (8, 1, 5), (2, 2, 1, 8), "gelu"),
    family_case("conv_transpose2d-f32-s2", "float32", "conv_transpose2d", (2, 8, 7, 6), (8, 6, 4, 4),
                ((2, 2), (1, 1), (0, 0), 1, (1, 1)), "silu"),
    family_case("conv_transpose2d-bf16-cl-c64", "bfloat16", "conv_transpose2d", (2, 64, 9, 9), (64, 32, 3, 3),
                ((2, 2), (1, 1), (1, 1), 1, (1, 1)), "none", channels_last=True, residual=True),
    family_case("conv_transpose1d-f16-groups", "float16", "conv_transpose1d", (2, 8, 17), (8, 3, 4), (2, 1, 0, 2, 1),
                "relu"),
    family_case("conv3d-bf16-cl3d-residual", "bfloat16", "conv3d", (2, 16, 5, 9, 8), (24, 16, 3, 3, 3),
                ((1, 2, 2), (1, 1, 1), (1, 1, 1), 1), "relu", channels_last=True, residual=True),
    family_case("conv3d-f32-1x3x3-groups", "float32", "conv3d", (1, 8, 4, 7, 7), (8, 4, 1, 3, 3),
                ((1, 1, 1), (0, 1, 1), (1, 1, 1), 2), "gelu"),
    family_case("conv_transpose3d-f16-s2", "float16", "conv_transpose3d", (1, 8, 3, 5, 4), (8, 6, 2, 2, 2),
                ((2, 2, 2), (0, 0, 0), (0, 0, 0), 1, (1, 1, 1)), "silu", channels_last=True),
]
CPU_CASES = [c for c in CASES if not c.cuda_only]
