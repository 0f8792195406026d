"""conv2d forward and backward against float64 references over kernel paths, layouts and dtypes.

The cases are data, in three tables:
  CASES       tiny problems that run on every device and dtype (the CPU included): each parameter
              edge once, at a size the CPU checks in milliseconds.
  CUDA_CASES  the same edges and more at sizes that span several tiles, CUDA only. On an sm_90 GPU the
              fp16/bf16 groups == 1 rows run the Hopper paths (explicit im2col + wgmma with a fused
              epilogue, the direct 1x1 read of channels_last x, the GEMM + col2im grad_input and the
              split-K grad_weight); the depthwise rows run the direct depthwise kernel in every dtype;
              grouped rows the generic path.
  BWD_CASES   the CUDA_CASES rows whose backward is checked op by op (_conv2d_backward).
Tests that take a case by name (layouts, views, activations, masks) use the CPU size on the CPU and
the CUDA size on CUDA (`sized`), so each runs the same edge on both devices.
"""
from typing import NamedTuple, Tuple, Union

import pytest
import torch
import torch.nn.functional as F
from torch._prims_common import suggest_memory_format

import tileops
from conftest import DEVICE_KINDS, DEVICES
from tileops import autotune
from utils import ATOL, DTYPES, TOL, check, cuda_kernels, fresh_generator, randn, tf32

_Pair = Union[int, Tuple[int, int]]


class Conv(NamedTuple):
    """x (N, C, H, W) * weight (K, C // groups, R, S)."""

    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride: _Pair = 1
    padding: _Pair = 0
    dilation: _Pair = 1
    groups: int = 1

    @property
    def params(self):
        return self.stride, self.padding, self.dilation, self.groups

    @property
    def x_shape(self):
        return (self.N, self.C, self.H, self.W)

    @property
    def w_shape(self):
        return (self.K, self.C // self.groups, self.R, self.S)

    @property
    def out_shape(self):
        def pair(v):
            return (v, v) if isinstance(v, int) else tuple(v)

        st, pd, dl = pair(self.stride), pair(self.padding), pair(self.dilation)
        p, q = ((n + 2 * pd[i] - dl[i] * (k - 1) - 1) // st[i] + 1
                for i, (n, k) in enumerate(((self.H, self.R), (self.W, self.S))))
        return (self.N, self.K, p, q)


CASES = {
    "3x3": Conv(2, 3, 7, 7, 5, 3, 3, 1, 1),
    "3x3_s2": Conv(2, 8, 9, 9, 16, 3, 3, 2, 1),
    "3x3_c64": Conv(1, 64, 4, 5, 8, 3, 3, 1, 1),
    "odd_kernel_stride2": Conv(1, 4, 9, 11, 6, 3, 2, 2, (1, 0)),
    "kernel_3x5_stride_2x1": Conv(1, 6, 11, 10, 9, 3, 5, (2, 1), (1, 2)),
    "dilated": Conv(2, 8, 8, 8, 8, 3, 3, 1, 2, 2),
    "aniso": Conv(1, 5, 13, 6, 7, 2, 3, (2, 1), (0, 2), (2, 1)),
    "1x1": Conv(3, 16, 5, 5, 32, 1, 1),
    "1x1_c5_k7": Conv(2, 5, 7, 9, 7, 1, 1),
    "1x1_stride2": Conv(2, 16, 9, 9, 8, 1, 1, 2),  # odd rows and columns get no gradient
    "1x1_pad1": Conv(1, 8, 5, 6, 8, 1, 1, 1, 1),
    "2x2_stride3": Conv(1, 4, 10, 11, 6, 2, 2, 3),  # stride > kernel: gaps without gradient
    "stem7x7": Conv(1, 3, 31, 31, 8, 7, 7, 2, 3),  # R*S*C = 147, not a multiple of 8
    "patch16": Conv(1, 3, 32, 32, 16, 16, 16, 16),
    "patch14": Conv(1, 3, 28, 28, 8, 14, 14, 14),
    "runs_c6_4x4_tail": Conv(1, 6, 9, 10, 5, 4, 4, 4),
    "kernel_is_input": Conv(1, 2, 5, 5, 3, 5, 5),
    "one_pixel": Conv(1, 7, 1, 1, 127, 1, 1),
    "single_channel": Conv(2, 1, 6, 7, 3, 3, 3, 1, 1),  # groups == 1 == C: both depthwise and dense
    "empty_batch": Conv(0, 4, 6, 6, 4, 3, 3, 1, 1),
    "groups2": Conv(2, 8, 6, 7, 8, 1, 1, groups=2),
    "groups3": Conv(2, 6, 10, 9, 9, 3, 3, 2, 1, groups=3),
    "groups4": Conv(1, 8, 7, 7, 12, 3, 3, 1, 1, groups=4),
    "depthwise": Conv(2, 8, 12, 12, 8, 3, 3, 1, 1, groups=8),
    "depthwise_x2": Conv(1, 8, 9, 9, 16, 3, 3, 2, 1, groups=8),
    "depthwise_5x5_p2": Conv(1, 6, 11, 9, 6, 5, 5, 1, 2, groups=6),
    "depthwise_x2_dil2_p0": Conv(2, 5, 10, 11, 10, 3, 3, 1, 0, 2, groups=5),
}

CUDA_CASES = {
    # dense (groups == 1): the sm_90 fp16/bf16 paths; 1x1 s1 p0 on channels_last x reads x directly
    "1x1": Conv(4, 64, 14, 14, 96, 1, 1),
    "1x1_c5_k7": Conv(2, 5, 13, 17, 7, 1, 1),  # rows of 5 channels: no 16-byte alignment
    "1x1_stride2": Conv(2, 64, 15, 15, 128, 1, 1, 2),
    "1x1_pad1": Conv(2, 16, 7, 9, 24, 1, 1, 1, 1),
    "1x1_m_tail": Conv(3, 256, 13, 15, 64, 1, 1),  # M = 585
    "1x1_big_k65": Conv(8, 128, 28, 28, 65, 1, 1),
    "resnet_1x1_256to64@56": Conv(2, 256, 56, 56, 64, 1, 1),
    "3x3": Conv(2, 32, 20, 20, 64, 3, 3, 1, 1),
    "3x3_s2": Conv(2, 32, 21, 19, 48, 3, 3, 2, 1),
    "3x3_big": Conv(8, 64, 28, 28, 128, 3, 3, 1, 1),  # many tiles both ways; N*P*Q = 6272
    "3x3_m_tail": Conv(3, 64, 27, 29, 130, 3, 3, 1, 1),  # M = 2349, 130 output channels
    "3x3_k264": Conv(2, 32, 15, 15, 264, 3, 3, 1, 1),  # more output channels than one 256-wide tile
    "3x3_c256": Conv(2, 256, 9, 9, 64, 3, 3, 1, 1),  # reduction of 2304
    # C % 64 == 0: sm_90 implicit GEMM (x gathered inside the kernel), every geometry
    "3x3_c64": Conv(2, 64, 13, 11, 7, 3, 3, 1, 1),
    "3x3_c64_s2": Conv(2, 64, 15, 13, 72, 3, 3, 2, 1),
    "3x3_c64_dilated": Conv(2, 64, 11, 12, 40, 3, 3, 1, 2, 2),
    "3x5_c64_stride_2x1": Conv(1, 64, 13, 17, 24, 3, 5, (2, 1), (1, 2)),
    "7x7_c64_k7": Conv(1, 64, 9, 10, 7, 7, 7, 1, 3),
    "5x5_c128_p0": Conv(2, 128, 9, 9, 200, 5, 5),
    "resnet_3x3_64@56": Conv(4, 64, 56, 56, 64, 3, 3, 1, 1),
    # bf16/fp16 channels_last: the persistent kernels by the heuristic (98 cluster tiles of 256 rows
    # x 2-3 column tiles: blocks loop over tiles), an output-channel tail, TMA-stored rows
    "3x3_c64_k264@56": Conv(4, 64, 56, 56, 264, 3, 3, 1, 1),
    "3x3_c64_pad130": Conv(1, 64, 3, 4, 8, 3, 3, (5, 7), 130),  # past the [-128, 127] of a TMA im2col map
    # strided data gradients as stride-1 phase convolutions (conv/dgrad_phases.h dgrad_phase; test_autotune pins
    # them), 64 output channels so the phases run on the implicit kernels: phases of unequal sizes (odd H, W), a 1x1 phase with more
    # outputs than dy rows (padding 0), dy rows skipped (padding 2 > (3 - 1) / 2), dilation 2 with
    # stride 2 (one phase per dimension gets no tap: zeros), ResNet-50's downsampling 3x3/2
    "3x3_s2_k64_odd": Conv(2, 32, 21, 19, 64, 3, 3, 2, 1),
    "3x3_s2_k64_p0": Conv(2, 64, 16, 15, 64, 3, 3, 2, 0),
    "3x3_s2_k64_p2": Conv(2, 64, 12, 13, 64, 3, 3, 2, 2),
    "3x3_s2_k64_dil2": Conv(2, 64, 17, 16, 64, 3, 3, 2, 2, 2),
    "resnet_3x3s2_128@56": Conv(2, 128, 56, 56, 128, 3, 3, 2, 1),
    # ... all phases in one Hopper launch (conv/conv_sm90.cu conv_dgrad_phases_sm90: a channels_last dx
    # whose sides the strides divide): a phase padded below (padding 0), stride 2x1 with a 3x5
    # kernel, 7x7/2 (phases of 16, 12, 12 and 9 taps), dx channels below a tile and past one (20,
    # 72) under 256 dy channels, dilation 2 with stride 2 (one phase live, three zeros)
    "phases1_3x3_p0": Conv(2, 64, 16, 14, 64, 3, 3, 2, 0),
    "phases1_3x5_s2x1": Conv(2, 64, 18, 11, 64, 3, 5, (2, 1), (1, 2)),
    "phases1_7x7": Conv(1, 64, 20, 22, 64, 7, 7, 2, 3),
    "phases1_c20": Conv(2, 20, 14, 14, 64, 3, 3, 2, 1),
    "phases1_c72_k256": Conv(2, 72, 14, 16, 256, 3, 3, 2, 1),
    "phases1_dil2": Conv(2, 64, 16, 16, 64, 3, 3, 2, 2, 2),
    "phases1_1x1_s2": Conv(2, 64, 14, 12, 128, 1, 1, 2),  # one phase live, three zeros
    "batch1": Conv(1, 16, 9, 9, 8, 3, 3, 1, 1),
    "batch1_56": Conv(1, 32, 56, 56, 32, 3, 3, 1, 1),
    "long_reduction": Conv(32, 16, 28, 28, 16, 3, 3, 1, 1),  # grad_weight reduces over 25088
    "2x2_stride3": Conv(2, 16, 14, 13, 32, 2, 2, 3),
    "dilated": Conv(2, 16, 17, 17, 24, 3, 3, 1, 2, 2),
    "kernel_3x5_stride_2x1": Conv(2, 12, 19, 23, 20, 3, 5, (2, 1), (1, 2)),
    "aniso": Conv(2, 5, 13, 17, 7, 3, 5, (2, 1), (1, 2), (1, 2)),
    "odd_13x17_c5_k65": Conv(3, 5, 13, 17, 65, 3, 3, 1, 1),
    "c3_k7": Conv(2, 3, 13, 17, 7, 3, 3, 1, 1),
    # C % 8 != 0 with many channels: the row-staging im2col halves its 64-pixel tile to fit shared memory
    "c100_7x7": Conv(1, 100, 9, 40, 16, 7, 7, 1, 3),
    # fp32 NCHW's implicit GEMM (conv/gemm_conv_vec.cuh): C % 16 != 0 (a zero-padded last channel chunk),
    # K % 4 != 0 (weight rows padded to 72), 81 k tiles over 10 split-K chunks (one 128-pixel tile)
    "nchw_c130_k70": Conv(1, 130, 9, 11, 70, 3, 3, 1, 1),
    # ... its weight gradient unsplit (72 output tiles of 9216 taps x 120 channels), 49 pixels per image
    "nchw_c1024_k120@7": Conv(2, 1024, 7, 7, 120, 3, 3, 1, 1),
    "stem7x7": Conv(2, 3, 61, 61, 64, 7, 7, 2, 3),
    "stem7x7_224": Conv(1, 3, 224, 224, 64, 7, 7, 2, 3),
    # C % 8 != 0 and R*S*C <= 256 (fp16/bf16, channels_last x: conv/conv_smallc_fwd.cu's fused kernel):
    # rows of more than one 128-pixel chunk, several 64-channel blocks with a partial last one,
    # dilation with stride 3, a 1x7 kernel, R*S*C = 256 exactly, and staged rows over 48 KiB
    "c3_q300": Conv(1, 3, 12, 300, 24, 3, 3, 1, 1),
    "c3_k130": Conv(2, 3, 9, 11, 130, 3, 3, 1, 1),
    "c6_5x5_s3_dil2": Conv(2, 6, 23, 25, 40, 5, 5, 3, 4, 2),
    "c7_1x7": Conv(1, 7, 10, 33, 16, 1, 7, 1, (0, 3)),
    "c4_8x8_k256": Conv(1, 4, 12, 12, 8, 8, 8, 2, 3),
    "c7_5x5_sw4_wide": Conv(1, 7, 9, 520, 16, 5, 5, (1, 4), 2),
    # ... its quads (C <= 4, even stride along w, S <= 8, rows of whole 16-byte chunks): 4 taps a row
    # with one masked and a partial channel block; 3 chunks of 128 pixels with 3 taps masked; one
    # channel, dilation along h, two channel blocks (the second of 8); stride 4 with all 8 taps
    "q3_3x3_s2": Conv(2, 3, 24, 40, 32, 3, 3, 2, 1),
    "q2_5x5_s2_wide": Conv(1, 2, 9, 520, 16, 5, 5, 2, 2),
    "q1_3x5_s2_dil": Conv(2, 1, 17, 40, 72, 3, 5, 2, (1, 2), (2, 1)),
    "q4_3x8_sw4": Conv(1, 4, 10, 64, 24, 3, 8, (1, 4), (1, 3)),
    # ... and fp32 (TF32 off): the direct kernel's tiles of 8 and 16 output rows (enough blocks for
    # two a SM), the taller with a partial last tile each way and rows of 115 pixels (no float4 stores)
    "stem7x7_b3": Conv(3, 3, 224, 224, 64, 7, 7, 2, 3),
    "stem7x7_b6_odd": Conv(6, 3, 200, 230, 64, 7, 7, 2, 3),
    # ... its generic taps (not the stem's 7 and 2) with three 64-channel blocks, each walking 1-2 tiles
    "c3_k130_b8": Conv(8, 3, 64, 64, 130, 3, 3, 1, 1),
    "patch16": Conv(2, 3, 64, 64, 96, 16, 16, 16),
    "patch16_224": Conv(2, 3, 224, 224, 768, 16, 16, 16),
    "patch14": Conv(2, 3, 56, 56, 80, 14, 14, 14),
    # windows that do not overlap (stride >= kernel), C % 8 != 0: im2col_runs_kernel copies each tap
    # row as one run, in the widest vector no run, row or window edge splits: padding on both sides
    # (2-byte vectors), a right-hand tail of unread columns and rows (8-byte), stride past the kernel
    "runs_c5_3x3_s3_p1": Conv(2, 5, 17, 19, 24, 3, 3, 3, 1),
    "runs_c6_4x4_tail": Conv(2, 6, 18, 19, 40, 4, 4, 4),
    "runs_c3_2x2_s3": Conv(1, 3, 14, 13, 16, 2, 2, 3),
    # windows that tile x exactly: the data gradient scatters dcols' runs into dx (16-byte vectors)
    "tiles_c16_2x2": Conv(2, 16, 14, 12, 32, 2, 2, 2),
    "single_channel": Conv(2, 1, 30, 31, 8, 3, 3, 1, 1),
    # more than 2^28 column elements (N*P*Q*R*S*C): the column buffer runs in chunks of images
    "chunked_cols": Conv(52, 136, 28, 28, 8, 7, 7, 1, 3),
    # depthwise (groups == C, K = multiplier * C): the direct kernel, every dtype
    "depthwise": Conv(2, 32, 28, 28, 32, 3, 3, 1, 1, groups=32),
    "depthwise_s2": Conv(2, 32, 29, 27, 32, 3, 3, 2, 1, groups=32),
    "depthwise_p0": Conv(2, 24, 15, 17, 24, 3, 3, 1, 0, groups=24),
    "depthwise_5x5_p2": Conv(2, 24, 19, 21, 24, 5, 5, 1, 2, groups=24),
    "depthwise_5x5_s2": Conv(1, 40, 23, 23, 40, 5, 5, 2, 2, groups=40),
    "depthwise_7x7": Conv(1, 16, 20, 20, 16, 7, 7, 1, 3, groups=16),
    # a kernel over 16 KiB (49 taps x 192 channels): the tile kernel reads a permuted copy instead
    # of staging it in shared memory, and the data gradient flips a copy
    "depthwise_7x7_c192": Conv(2, 192, 9, 11, 192, 7, 7, 1, 3, groups=192),
    "depthwise_x2": Conv(2, 16, 20, 20, 32, 3, 3, 1, 1, groups=16),
    "depthwise_x2_s2": Conv(1, 12, 17, 13, 24, 3, 3, 2, 1, groups=12),
    "depthwise_dil2": Conv(2, 16, 20, 20, 16, 3, 3, 1, 2, 2, groups=16),
    "depthwise_c67": Conv(2, 67, 13, 11, 67, 3, 3, 1, 1, groups=67),
    "depthwise_1x1": Conv(2, 16, 9, 9, 16, 1, 1, groups=16),
    "depthwise_3x5_aniso": Conv(1, 8, 12, 14, 8, 3, 5, (1, 2), (1, 2), groups=8),
    "depthwise_96@56": Conv(2, 96, 56, 56, 96, 3, 3, 1, 1, groups=96),
    "depthwise_32@112_b1": Conv(1, 32, 112, 112, 32, 3, 3, 1, 1, groups=32),
    # grouped with more than one channel per group: one dense conv over a block-diagonal weight
    # (kernels/grouped.md) in the tensor-core dtypes, whose rows then vary with the dense problem
    # (C % 64 == 0: the implicit GEMM; else im2col), the ladder in fp64 / fp32 and past 64 groups
    "groups2": Conv(2, 32, 14, 14, 64, 3, 3, 1, 1, groups=2),
    "groups4": Conv(2, 32, 15, 13, 32, 3, 3, 2, 1, groups=4),
    "groups4_1x1": Conv(2, 64, 14, 14, 64, 1, 1, groups=4),
    "resnext_g32_128@14": Conv(2, 128, 14, 14, 128, 3, 3, 1, 1, groups=32),
    "resnext_g32_s2_256": Conv(2, 256, 15, 13, 256, 3, 3, 2, 1, groups=32),
    "regnet_g6_48": Conv(2, 48, 11, 9, 48, 3, 3, 1, 1, groups=6),
    "groups8_kg16": Conv(1, 64, 10, 10, 128, 3, 3, 1, 1, groups=8),
    "groups3_dil2": Conv(2, 24, 13, 12, 36, 3, 3, 1, 2, 2, groups=3),
    "groups64_cg2": Conv(1, 128, 7, 9, 128, 3, 3, 1, 1, groups=64),
    "groups128_ladder": Conv(1, 256, 6, 5, 256, 3, 3, 1, 1, groups=128),
}

BWD_CASES = ["1x1", "1x1_stride2", "1x1_pad1", "1x1_big_k65", "3x3", "3x3_s2", "3x3_big", "3x3_m_tail",
             "batch1", "batch1_56", "long_reduction", "2x2_stride3", "dilated", "kernel_3x5_stride_2x1", "aniso",
             "odd_13x17_c5_k65", "c3_k7", "c100_7x7", "nchw_c130_k70", "nchw_c1024_k120@7", "stem7x7", "stem7x7_224", "patch16", "patch14", "runs_c5_3x3_s3_p1",
             "runs_c6_4x4_tail", "tiles_c16_2x2", "chunked_cols", "groups2", "groups4", "resnext_g32_128@14",
             "resnext_g32_s2_256", "regnet_g6_48", "groups8_kg16", "groups3_dil2", "groups64_cg2", "groups128_ladder", "depthwise", "depthwise_x2", "depthwise_s2", "depthwise_5x5_s2", "depthwise_7x7",
             "depthwise_dil2", "depthwise_c67", "depthwise_96@56", "depthwise_7x7_c192", "resnet_3x3_64@56", "3x3_c64_pad130",
             "3x3_s2_k64_odd", "3x3_s2_k64_p0", "3x3_s2_k64_p2", "3x3_s2_k64_dil2", "resnet_3x3s2_128@56",
             "q3_3x3_s2", "q2_5x5_s2_wide", "q1_3x5_s2_dil", "q4_3x8_sw4", "stem7x7_b3"]

ACTS = ["none", "relu", "gelu", "silu"]
ACT_FN = {"none": lambda t: t, "relu": F.relu, "gelu": F.gelu, "silu": F.silu}
LAYOUTS = ["contiguous", "channels_last"]
# x views that no fast path may take for contiguous (each needs its strides honoured or a copy)
VIEWS = ["strided", "slice_c", "slice_hw", "permuted", "misaligned"]
CUDA_KINDS = ["float64", "float32", "tf32", "float16", "bfloat16"]
# (device, kind) for the layout / view / activation tests: the CPU once, CUDA in every GEMM family
SOME_KINDS = [("cpu", "float32"), ("cpu", "bfloat16")] + [
    pytest.param("cuda", k, marks=pytest.mark.cuda) for k in ("float32", "tf32", "float16", "bfloat16")]


def sized(name, device):
    """Case `name` at the CPU size on the CPU, at the multi-tile size on CUDA."""
    return (CUDA_CASES if device == "cuda" else CASES)[name]


def pick_act(*keys):
    """Every activation over a test matrix without taking every pair: a fixed pick per row."""
    return ACTS[sum(len(str(k)) for k in keys) % len(ACTS)]


# ----------------------------------------------------------------------------------------------
# Inputs: fresh random values in every layout a caller can hand over.


def _misaligned(t):
    """A copy of t (dense: contiguous or channels_last) whose data starts one element past its
    allocation: 2-byte (fp16) aligned only, which TMA and vector loads cannot take as is."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    out = buf.as_strided(t.shape, t.stride(), 1)
    out.copy_(t)
    return out


def make_x(shape, layout, dtype, device, gen):
    n, c, h, w = shape

    def rnd(s):
        return randn(s, dtype, device, gen)

    cl = torch.channels_last
    if layout == "contiguous":
        return rnd(shape)
    if layout == "channels_last":
        return rnd(shape).to(memory_format=cl)
    if layout == "strided":  # every other column of a wider tensor: no memory format fits
        return rnd((n, c, h, 2 * w))[..., ::2]
    if layout == "slice_c":  # channels_last rows longer than C
        return rnd((n, c + 3, h, w)).to(memory_format=cl)[:, 2:2 + c]
    if layout == "slice_hw":  # a crop of a channels_last image
        return rnd((n, c, h + 3, w + 2)).to(memory_format=cl)[:, :, 1:1 + h, 2:2 + w]
    if layout == "permuted":  # stored (N, H, C, W)
        return rnd((n, h, c, w)).permute(0, 2, 1, 3)
    if layout == "misaligned":
        return _misaligned(rnd(shape).to(memory_format=cl))
    raise ValueError(layout)


def make_w(shape, layout, dtype, device, gen):
    k, c, r, s = shape
    if layout == "sliced":  # input channels of a larger weight
        return randn((k, c + 2, r, s), dtype, device, gen)[:, 1:1 + c]
    return make_x(shape, layout, dtype, device, gen)  # misaligned: channels_last, (K, R, S, C) rows in place


def like_x(layout):
    """The weight layout a model in x's memory format has."""
    return "channels_last" if layout == "channels_last" else "contiguous"


def make_grad_out(shape, gy_layout, x_layout, dtype, device, gen):
    if gy_layout == "like_x":
        return make_x(shape, like_x(x_layout), dtype, device, gen)
    if gy_layout == "other_format":
        return make_x(shape, "contiguous" if x_layout == "channels_last" else "channels_last", dtype, device, gen)
    if gy_layout == "expanded":  # what y.sum() hands back: stride 0 everywhere but the channels
        return randn((1, shape[1], 1, 1), dtype, device, gen).expand(shape)
    return make_x(shape, gy_layout, dtype, device, gen)


def poisoned(fn, device):
    """fn() with the CUDA caching allocator's free memory set to 0xFF bytes, NaN in every float dtype
    (a float32 NaN would read as 0.0 in the low half of each bf16 pair): an output element, padding
    column or workspace byte that is read before it is written turns the result into NaN."""
    if device == "cuda":
        torch.cuda.empty_cache()
        # one large-pool block every larger allocation splits, and eight 2 MiB small-pool segments
        blocks = [torch.full((n // 4,), -1, dtype=torch.int32, device=device) for n in [128 << 20] + [512 << 10] * 32]
        del blocks
    return fn()


# ----------------------------------------------------------------------------------------------
# References and tolerances.


def conv_ref(x, w, b, params):
    """float64 F.conv2d of the same values, and the bound |x| * |w| + |b|, on x's device."""
    x64, w64 = x.detach().double(), w.detach().double()
    b64 = None if b is None else b.detach().double()
    ref = F.conv2d(x64, w64, b64, *params)
    mag = F.conv2d(x64.abs(), w64.abs(), None if b64 is None else b64.abs(), *params)
    return ref, mag


def grad_ref(x, w, gy, params):
    """float64 grad_input and grad_weight of the same values, with their bounds (|.| operands)."""
    x64, w64, g64 = x.detach().double(), w.detach().double(), gy.detach().double()
    gx = torch.nn.grad.conv2d_input(x.shape, w64, g64, *params)
    gw = torch.nn.grad.conv2d_weight(x64, w.shape, g64, *params)
    mag_x = torch.nn.grad.conv2d_input(x.shape, w64.abs(), g64.abs(), *params)
    mag_w = torch.nn.grad.conv2d_weight(x64.abs(), w.shape, g64.abs(), *params)
    return gx, gw, mag_x, mag_w


def check_conv(out, ref, mag, kind, L, what):
    """check() plus, for fp16/bf16, a per-element bound that stays tight for long reductions.

    check()'s TOL * mag grows like the reduction length L while the values grow like sqrt(L), so on
    grad_weight (L = N*P*Q) it alone would let a dropped split-K chunk through element by element
    (its norm test still catches it). In fp16/bf16 the inputs are exact, their products are exact
    in fp32, so the error is one output rounding (<= TOL |ref|) plus fp32 accumulation (<= L u mag,
    taken here as L * 2^-21 * mag: 8 fp32 units, for tensor-core adders that truncate). Activations
    stretch errors by at most 1.13 (gelu); 1e-6 mag covers their fp32 evaluation.
    Not for grad_input: its column buffer may be rounded to the dtype once (<= u mag, check()'s)."""
    check(out, ref, mag, kind, what)
    if kind not in ("float16", "bfloat16") or out.numel() == 0:
        return
    o, r, m = (t.detach().double().cpu() for t in (out, ref, mag))
    err = (o - r).abs()
    bound = TOL[kind] * r.abs() + (1.2 * L * 2.0 ** -21 + 1e-6) * m + ATOL.get(kind, 0.0)
    bad = err > bound
    assert not bad.any(), "%s: %d of %d elements beyond rounding + fp32 accumulation (L=%d); worst err %.3g at bound %.3g" % (
        what, int(bad.sum()), o.numel(), L, float(err[bad].max()), float(bound[bad][err[bad].argmax()]))


def check_format(t, like, what):
    """t keeps like's memory format (torch's rule for conv outputs; unbatched: as if batched)."""
    t4, like4 = (v.unsqueeze(0) if v.dim() == 3 else v for v in (t, like))
    fmt = suggest_memory_format(like4)
    assert t4.is_contiguous(memory_format=fmt), "%s: strides %s, expected %s like %s" % (
        what, t.stride(), fmt, like.stride())


def run_forward(c, name, device, kind, layout, w_layout=None, act=None, bias=True, unbatched=False, bias_view=False):
    """tileops.conv2d on fresh inputs into poisoned memory, checked against float64."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    act = act or pick_act(name, layout, kind)
    w_layout = w_layout or like_x(layout)
    x = make_x(c.x_shape, layout, dt, device, gen)
    w = make_w(c.w_shape, w_layout, dt, device, gen)
    b = None
    if bias:
        b = randn((2 * c.K,), dt, device, gen)[::2] if bias_view else randn((c.K,), dt, device, gen)
    xin = x[0] if unbatched else x
    with tf32(kind == "tf32"):
        y = poisoned(lambda: tileops.conv2d(xin, w, b, *c.params, act), device)
    what = "conv %s x=%s w=%s %s %s bias=%s seed=%d" % (name, layout, w_layout, kind, act, bias, seed)
    assert y.dtype == dt and y.device == x.device and y.dim() == xin.dim(), what
    ref, mag = conv_ref(x, w, b, c.params)
    check_conv(y.unsqueeze(0) if unbatched else y, ACT_FN[act](ref), mag, kind, c.w_shape[1] * c.R * c.S, what)
    check_format(y, xin, what)
    if layout in LAYOUTS and not unbatched and y.numel() > 0:  # the named formats spelled out: NCHW in, NCHW out
        fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        assert y.is_contiguous(memory_format=fmt), "%s: output not %s" % (what, fmt)


# ----------------------------------------------------------------------------------------------
# Forward


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", LAYOUTS + ["strided"])
def test_conv2d_forward(device, kind, case, layout):
    run_forward(CASES[case], case, device, kind, layout)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", CUDA_KINDS)
@pytest.mark.parametrize("case", list(CUDA_CASES))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_forward_cuda(kind, case, layout):
    run_forward(CUDA_CASES[case], case, "cuda", kind, layout)


FAST_PATHS = [(k, case, layout, kernel) for k in ("float16", "bfloat16") for case, layout, kernel in [
    ("stem7x7_224", "channels_last", "conv_smallc4_kernel"), ("c7_5x5_sw4_wide", "channels_last", "conv_smallc_kernel"),
    ("stem7x7", "contiguous", "conv_smallc_kernel"), ("stem7x7_224", "contiguous", "conv_smallc4_kernel"),
    ("q3_3x3_s2", "channels_last", "conv_smallc4_kernel"), ("q4_3x8_sw4", "channels_last", "conv_smallc4_kernel"),
    ("depthwise_96@56", "channels_last", "dw_fwd_strip_kernel")]] + [
    ("float32", case, layout, "conv_smallc_f32_kernel") for case, layout in [
        ("stem7x7_224", "contiguous"), ("stem7x7_b6_odd", "contiguous"), ("stem7x7", "channels_last"),
        ("c7_5x5_sw4_wide", "contiguous"), ("c4_8x8_k256", "contiguous"), ("c3_k130_b8", "channels_last")]]


@pytest.mark.cuda
@pytest.mark.parametrize("kind,case,layout,kernel", FAST_PATHS)
def test_conv2d_fast_path_taken_cuda(kind, case, layout, kernel):
    """The fast paths run where they should (a silent fallback would still pass the value tests):
    the forward's CUDA kernels, by name, from the profiler, and nothing else (no layout copy, no
    column buffer) where the kernel reads x in place. An NCHW stem in 16 bits reaches the small-C
    kernel after one channels_last copy of x; in fp32 (TF32 off) the direct kernel reads any layout."""
    c = CUDA_CASES[case]
    fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
    x = torch.randn(c.x_shape, device="cuda", dtype=DTYPES[kind]).to(memory_format=fmt)
    w = torch.randn(c.w_shape, device="cuda", dtype=DTYPES[kind])
    with tf32(False):
        _, names = cuda_kernels(lambda: tileops.conv2d(x, w, None, *c.params))
    assert any(kernel in n for n in names), "%s %s: expected %s among %s" % (case, kind, kernel, names)
    if kind == "float32":
        assert len(names) == 1, "%s: %s" % (case, names)


def backward_kernels(case, kind, mask):
    """The CUDA kernels torch.ops.tileops._conv2d_backward runs on a CUDA_CASES row, channels_last x and
    dy, for the gradients `mask` asks for."""
    c = CUDA_CASES[case]
    x = torch.randn(c.x_shape, device="cuda", dtype=DTYPES[kind]).to(memory_format=torch.channels_last)
    w = torch.randn(c.w_shape, device="cuda", dtype=DTYPES[kind])
    gy = torch.randn(c.out_shape, device="cuda", dtype=DTYPES[kind]).to(memory_format=torch.channels_last)
    st, pd, dl, g = c.params
    pair = [(v, v) if isinstance(v, int) else v for v in (st, pd, dl)]
    return cuda_kernels(lambda: torch.ops.tileops._conv2d_backward(gy, x, w, *pair, g, list(mask)))[1]


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", ["stem7x7_224", "q3_3x3_s2", "q1_3x5_s2_dil", "q4_3x8_sw4"])
def test_conv2d_wgrad_smallc_taken_cuda(kind, case):
    """The quads' weight gradient (C <= 4 at an even stride, channels_last x and dy) runs its own kernel
    and a reduce, with no column buffer (the values: the backward tests of the same cases)."""
    names = backward_kernels(case, kind, [False, True, False])
    assert any("conv_wgrad_smallc4_kernel" in n for n in names), "%s %s: %s" % (case, kind, names)
    assert not any("im2col" in n for n in names), "%s %s: %s" % (case, kind, names)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("case", ["stem7x7_224", "q3_3x3_s2", "q2_5x5_s2_wide", "stem7x7", "c3_k130"])
def test_conv2d_nonfinite_cuda(kind, case):
    """An Inf or NaN of x reaches exactly the outputs whose windows hold it. The small-C kernels read
    padding taps and columns that no window holds (the quads' taps past S are real pixels of x):
    multiplied by a zero weight, an Inf there would turn a finite output into NaN."""
    c = CUDA_CASES[case]
    gen, seed = fresh_generator()
    x = randn(c.x_shape, DTYPES[kind], "cuda", gen).to(memory_format=torch.channels_last)
    w = randn(c.w_shape, DTYPES[kind], "cuda", gen)
    n, ch, h, wd = c.x_shape
    for i, v in enumerate([float("inf"), float("-inf"), float("nan")]):  # columns 1, 6 and 11 of three rows
        x[i % n, i % ch, (3 + 5 * i) % h, (1 + 5 * i) % wd] = v
    with tf32(False):
        y = tileops.conv2d(x, w, None, *c.params)
    ref = F.conv2d(x.double(), w.double(), None, *c.params)
    what = "conv %s %s seed=%d" % (case, kind, seed)
    assert torch.equal(torch.isfinite(y), torch.isfinite(ref)), "%s: %d outputs finite in one only" % (
        what, int((torch.isfinite(y) != torch.isfinite(ref)).sum()))
    assert torch.equal(torch.isnan(y), torch.isnan(ref)), what


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["3x3_big", "1x1_stride2", "nchw_c130_k70", "c100_7x7", "nchw_c1024_k120@7"])
def test_conv2d_fp32_nchw_implicit_taken_cuda(case):
    """fp32 (TF32 off) NCHW runs the implicit GEMMs that read x and dy in place: the forward, the data
    gradient of stride 1 (a forward) and, with at most 128 output channels or a 1x1 kernel, the weight
    gradient, with no column buffer and no layout copies (the values: the forward and backward tests,
    whose fp32 contiguous rows with C >= 16 take them)."""
    c = CUDA_CASES[case]
    x = torch.randn(c.x_shape, device="cuda")
    w = torch.randn(c.w_shape, device="cuda")
    b = torch.randn(c.K, device="cuda")
    gy = torch.randn(c.out_shape, device="cuda")
    st, pd, dl, g = c.params
    pair = [(v, v) if isinstance(v, int) else v for v in (st, pd, dl)]
    stride1 = pair[0] == (1, 1)  # strided data gradients keep col2im
    with tf32(False), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        tileops.conv2d(x, w, b, *c.params)
        torch.ops.tileops._conv2d_backward(gy, x, w, *pair, g, [stride1, True, False])
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    names = [e.key for e in events]

    def launches(kernel):
        return sum(e.count for e in events if kernel + "<" in e.key)

    # the data gradient's forward reads dy's K channels in chunks of 16, taken where they pad at most 1/8
    dgrad = stride1 and -(-c.K // 16) * 16 * 8 <= c.K * 9
    assert launches("conv_vec_kernel") == 1 + dgrad and launches("conv_wgrad_vec_kernel") == 1, "%s: %s" % (
        case, names)
    if dgrad or not stride1:
        assert not any("im2col" in n or "elementwise" in n.lower() for n in names), "%s: %s" % (case, names)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", ["resnet_3x3s2_128@56", "1x1_stride2", "3x3_s2_k64_p2"])
def test_conv2d_dgrad_phases_taken_cuda(kind, case):
    """A data gradient of stride 2 with conv_dgrad's "phases" candidate runs as phase convolutions,
    no column buffer gathered by col2im (the values: test_conv_dgrad_candidates_cuda)."""
    with autotune.pinned("conv_dgrad", "phases"):
        names = backward_kernels(case, kind, [True, False, False])
    assert names and not any("col2im" in n for n in names), "%s %s: %s" % (case, kind, names)
    if kind == "bfloat16" and torch.cuda.get_device_capability() == (9, 0):
        assert any("gemm_sm90" in n for n in names), "%s: expected the Hopper kernels among %s" % (case, names)


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("case,layout", [("1x1", "channels_last"), ("1x1", "contiguous"), ("3x3_s2", "channels_last"),
                                         ("3x3_c64", "channels_last"), ("stem7x7", "contiguous"),
                                         ("stem7x7", "channels_last"), ("depthwise", "channels_last")])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_conv2d_bias_activation(device, kind, case, layout, act, bias):
    """Every epilogue (bias or not, each activation) on each forward path: the direct 1x1 read,
    1x1 on NCHW, im2col (3x3/2, the NCHW stem), sm_90 implicit GEMM (C % 64 == 0), the small-C
    kernel (the channels_last stem in fp16/bf16), depthwise."""
    run_forward(sized(case, device), case, device, kind, layout, act=act, bias=bias)


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("case", ["1x1", "1x1_stride2", "3x3_s2", "3x3_c64", "stem7x7", "patch16", "runs_c6_4x4_tail",
                                  "depthwise"])
@pytest.mark.parametrize("layout", VIEWS)
def test_conv2d_input_views(device, kind, case, layout):
    """x as a strided view: channel or spatial slices, a permutation, a data pointer off alignment."""
    run_forward(sized(case, device), case, device, kind, layout)


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("case", ["1x1", "3x3", "3x3_c64", "stem7x7", "patch14", "depthwise_x2"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("w_layout", ["contiguous", "channels_last", "sliced", "misaligned"])
def test_conv2d_weight_layouts(device, kind, case, layout, w_layout):
    run_forward(sized(case, device), case, device, kind, layout, w_layout=w_layout)


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("case", ["1x1", "3x3", "depthwise"])
def test_conv2d_bias_view(device, kind, case):
    """A bias that is a strided view (every other element of a longer tensor)."""
    run_forward(sized(case, device), case, device, kind, "channels_last", bias_view=True)


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("case", ["1x1", "3x3", "stem7x7", "depthwise"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_unbatched(device, kind, case, layout):
    """3-D (C, H, W) x: (C, H, W) contiguous, or (H, W, C) storage from a channels_last image."""
    run_forward(sized(case, device)._replace(N=1), case, device, kind, layout, unbatched=True)


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_unbatched_and_padding_modes(device):
    gen, _ = fresh_generator()
    x = randn((3, 10, 11), torch.float64, device, gen)
    w = randn((4, 3, 3, 2), torch.float64, device, gen)
    for pad in ["same", "valid", 1, (2, 0)]:
        y = tileops.conv2d(x, w, None, 1, pad, 1, 1)
        ref = F.conv2d(x.cpu(), w.cpu(), None, 1, pad, 1, 1)
        assert y.shape == ref.shape and torch.allclose(y.cpu(), ref, atol=1e-10), pad
    y = tileops.conv2d(x, w, None, 1, "same", 2, 1)  # dilation with odd total padding
    assert torch.allclose(y.cpu(), F.conv2d(x.cpu(), w.cpu(), None, 1, "same", 2, 1), atol=1e-10)


# ----------------------------------------------------------------------------------------------
# Backward through autograd (activation, bias), and the backward op on its own.


@pytest.mark.parametrize("device,kind", DEVICE_KINDS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_backward(device, kind, case, layout):
    """grad_input, grad_weight, grad_bias of activation(conv + bias) against float64 autograd."""
    c = CASES[case]
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x = make_x(c.x_shape, layout, dt, device, gen).requires_grad_()
    w = make_w(c.w_shape, like_x(layout), dt, device, gen).requires_grad_()
    b = randn((c.K,), dt, device, gen).requires_grad_()
    act = pick_act(case, layout)
    with tf32(kind == "tf32"):
        y = tileops.conv2d(x, w, b, *c.params, act)
        gy = randn(y.shape, dt, device, gen)
        poisoned(lambda: y.backward(gy), device)
    x64, w64, b64 = (t.detach().double().cpu().requires_grad_() for t in (x, w, b))
    gy64 = gy.double().cpu()
    pre64 = F.conv2d(x64, w64, b64, *c.params)
    if act == "relu":  # the kink: the mask comes from the tested forward, so a pre-activation
        (pre64 * (y.detach().double().cpu() > 0)).backward(gy64)  # within rounding of 0 cannot flip it
    else:
        ACT_FN[act](pre64).backward(gy64)
    # bounds: the same products on absolute values; |act'| <= 1.13
    _, _, mag_x, mag_w = grad_ref(x64, w64, gy64.abs() * 1.2, c.params)
    what = "conv bwd %s %s %s seed=%d" % (case, layout, act, seed)
    chained = 2 if act in ("gelu", "silu") else 1  # the recomputed pre-activation is rounded too
    check(x.grad, x64.grad, mag_x, kind, what + " grad_input", chained)
    check(w.grad, w64.grad, mag_w, kind, what + " grad_weight", chained)
    check(b.grad, b64.grad, gy64.abs().sum((0, 2, 3)) * 1.2, kind, what + " grad_bias")
    check_format(x.grad, x, what + " grad_input")
    check_format(w.grad, w, what + " grad_weight")


def run_backward_op(c, name, device, kind, layout, gy_layout="like_x", mask=(True, True, True), w_layout=None):
    """torch.ops.tileops._conv2d_backward against float64; returns its outputs and inputs."""
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x = make_x(c.x_shape, layout, dt, device, gen)
    w = make_w(c.w_shape, w_layout or like_x(layout), dt, device, gen)
    gy = make_grad_out(c.out_shape, gy_layout, layout, dt, device, gen)
    st, pd, dl, g = c.params
    pair = [(v, v) if isinstance(v, int) else v for v in (st, pd, dl)]
    with tf32(kind == "tf32"):
        gx, gw, gb = poisoned(lambda: torch.ops.tileops._conv2d_backward(gy, x, w, *pair, g, list(mask)), device)
    what = "conv bwd op %s x=%s gy=%s w=%s %s mask=%s seed=%d" % (name, layout, gy_layout, w_layout, kind, mask, seed)
    ref_x, ref_w, mag_x, mag_w = grad_ref(x, w, gy, c.params)
    for out, on, name_ in zip((gx, gw, gb), mask, ("grad_input", "grad_weight", "grad_bias")):
        assert on or out.numel() == 0, "%s: %s not asked for but has shape %s" % (what, name_, tuple(out.shape))
        assert not on or out.dtype == dt, "%s: %s dtype %s" % (what, name_, out.dtype)
    if mask[0]:
        check(gx, ref_x, mag_x, kind, what + " grad_input")
        check_format(gx, x, what + " grad_input")
    if mask[1]:
        assert gw.numel() >= 64, "grad_weight under 64 elements skips check()'s norm test: make the case larger"
        check_conv(gw, ref_w, mag_w, kind, c.N * c.out_shape[2] * c.out_shape[3], what + " grad_weight")
        check_format(gw, w, what + " grad_weight")
    if mask[2]:
        g64 = gy.double()
        check(gb, g64.sum((0, 2, 3)), g64.abs().sum((0, 2, 3)), kind, what + " grad_bias")
    return (gx, gw, gb), (x, w, gy)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", BWD_CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_backward_op_cuda(kind, case, layout):
    """dgrad (phase convolutions for strides <= 2, else GEMM + col2im gather) and wgrad (split-K) at multi-tile sizes,
    including pixels that no output touches (1x1/2, 2x2/3) and long grad_weight reductions."""
    run_backward_op(CUDA_CASES[case], case, "cuda", kind, layout)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", ["3x3_big", "3x3_c64_dilated", "3x3_s2_k64_odd", "3x3_s2_k64_dil2", "batch1_56",
                                  "resnext_g32_s2_256", "regnet_g6_48"])
@pytest.mark.parametrize("w_layout", ["contiguous", "channels_last", "sliced", "misaligned"])
def test_conv2d_backward_weight_layouts_cuda(kind, case, w_layout):
    """The data gradient reads each phase's taps, flipped, through the weight's strides (one
    tap_transpose per phase) and the weight gradient writes grad_weight through its strides:
    every weight layout, stride 1 and the strided phases (pinned), split-K (batch1_56) included; grouped
    convs read and write the weight's diagonal blocks through its strides (kernels/grouped.md)."""
    with autotune.pinned("conv_dgrad", "phases"):
        run_backward_op(CUDA_CASES[case], case, "cuda", kind, "channels_last", w_layout=w_layout)


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("case", ["1x1", "3x3_s2", "2x2_stride3"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("gy_layout", ["other_format", "expanded", "strided", "slice_c", "misaligned"])
def test_conv2d_backward_grad_out_layouts(device, kind, case, layout, gy_layout):
    """grad_out in a format other than x's, expanded (stride 0, as y.sum() gives), a view."""
    run_backward_op(sized(case, device), case, device, kind, layout, gy_layout)


MASKS = [(True, False, False), (False, True, False), (False, False, True), (True, True, False), (False, True, True),
         (True, True, True), (False, False, False)]


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("mask", MASKS, ids=lambda m: "".join("xwb"[i] if on else "-" for i, on in enumerate(m)))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_backward_output_mask(device, kind, mask, layout):
    """Each output of _conv2d_backward alone and together; the others come back empty."""
    run_backward_op(sized("3x3_s2", device), "3x3_s2", device, kind, layout, mask=mask)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", ["3x3_big", "long_reduction", "batch1_56", "1x1_stride2", "stem7x7", "depthwise_96@56"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_backward_deterministic_cuda(kind, case, layout):
    """Two runs on the same inputs (into differently poisoned memory) agree bit for bit: the split-K
    reduction of grad_weight and the col2im gather have a fixed order."""
    (gx, gw, gb), (x, w, gy) = run_backward_op(CUDA_CASES[case], case, "cuda", kind, layout)
    st, pd, dl, g = CUDA_CASES[case].params
    pair = [(v, v) if isinstance(v, int) else v for v in (st, pd, dl)]
    again = poisoned(lambda: torch.ops.tileops._conv2d_backward(gy, x, w, *pair, g, [True, True, True]), "cuda")
    for a, b, name in zip((gx, gw, gb), again, ("grad_input", "grad_weight", "grad_bias")):
        assert torch.equal(a, b), "%s %s %s: %s differs between two runs" % (case, layout, kind, name)


@pytest.mark.parametrize("device,kind", SOME_KINDS)
@pytest.mark.parametrize("case", ["1x1", "3x3_s2"])
@pytest.mark.parametrize("needs", ["x", "weight", "weight+bias", "x+weight+bias"])
def test_conv2d_autograd_partial(device, kind, case, needs):
    """loss = y.sum() (an expanded grad) with only some inputs requiring grad, as for a first layer
    (x without grad) or a frozen backbone (weight without grad)."""
    c = sized(case, device)
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    x = make_x(c.x_shape, "channels_last", dt, device, gen).requires_grad_("x" in needs.split("+"))
    w = make_w(c.w_shape, "channels_last", dt, device, gen).requires_grad_("weight" in needs)
    b = randn((c.K,), dt, device, gen).requires_grad_("bias" in needs)
    with tf32(kind == "tf32"):
        poisoned(lambda: tileops.conv2d(x, w, b, *c.params).sum().backward(), device)
    gy = torch.ones(c.out_shape, dtype=torch.float64, device=device)
    ref_x, ref_w, mag_x, mag_w = grad_ref(x, w, gy, c.params)
    what = "conv %s sum().backward() needs=%s %s seed=%d" % (case, needs, kind, seed)
    for t, ref, mag, name in ((x, ref_x, mag_x, "grad_input"), (w, ref_w, mag_w, "grad_weight")):
        if t.requires_grad:
            check(t.grad, ref, mag, kind, what + " " + name)
        else:
            assert t.grad is None, what
    if b.requires_grad:
        n = float(c.N * c.out_shape[2] * c.out_shape[3])
        check(b.grad, torch.full((c.K,), n, dtype=torch.float64), torch.full((c.K,), n, dtype=torch.float64), kind, what)


# ----------------------------------------------------------------------------------------------
# The tolerance itself


@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
def test_grad_weight_check_catches_a_dropped_chunk(kind):
    """check_conv stays meaningful for a long reduction (N*P*Q = 4096): the exact grad_weight rounded
    to the dtype passes; one that misses 128 of the 4096 terms (a split-K chunk) fails."""
    gen, seed = fresh_generator()
    c = Conv(4, 8, 32, 32, 8, 3, 3, 1, 1)
    x = randn(c.x_shape, DTYPES[kind], "cpu", gen).double()  # values exact in the dtype
    gy = randn(c.out_shape, DTYPES[kind], "cpu", gen).double()
    w = torch.zeros(c.w_shape, dtype=torch.float64)  # only its shape is used
    _, ref, _, mag = grad_ref(x, w, gy, c.params)
    L = c.N * c.H * c.W
    check_conv(ref.to(DTYPES[kind]), ref, mag, kind, L, "exact seed=%d" % seed)
    gy_dropped = gy.clone()
    gy_dropped[-1, :, -4:, :] = 0  # the last 4 rows of the last image: 128 terms of every sum
    dropped = torch.nn.grad.conv2d_weight(x, c.w_shape, gy_dropped, *c.params).to(DTYPES[kind])
    with pytest.raises(AssertionError):
        check_conv(dropped, ref, mag, kind, L, "dropped chunk seed=%d" % seed)


# Issue 60: 16-bit grad_weight of long reductions (N P Q in the tens of thousands) over few output
# rows (K = 16: the weight gradient's GEMM is skinny, M <= 16), the fuzz's finding, with the weight
# and grad_out in either layout and the gradients of x and w taken together (two streams) or alone.
# Judged as the fuzz judges: within 4x torch's own error at the same dtype.
@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("w_cl", [False, True], ids=["w_nchw", "w_cl"])
@pytest.mark.parametrize("gy_cl", [False, True], ids=["gy_nchw", "gy_cl"])
@pytest.mark.parametrize("mask", [(True, True, False), (False, True, False)], ids=["x+w", "w"])
@pytest.mark.parametrize("shape", [((4, 16, 224, 224), (16, 16, 16, 16), 2, (1, 0)),
                                   ((2, 32, 96, 96), (16, 32, 3, 3), 1, (1, 1)),
                                   ((8, 8, 64, 64), (8, 8, 5, 5), 2, (2, 2))], ids=["issue60", "k16c32", "k8c8"])
def test_conv2d_grad_weight_16bit_long_reduction(kind, w_cl, gy_cl, mask, shape):
    gen, seed = fresh_generator()
    dt = DTYPES[kind]
    xs, ws, stride, pad = shape
    x = randn(xs, dt, "cuda", gen).contiguous(memory_format=torch.channels_last)
    w = randn(ws, dt, "cuda", gen)
    if w_cl:
        w = w.contiguous(memory_format=torch.channels_last)
    ys = F.conv2d(torch.empty(xs, device="meta"), torch.empty(ws, device="meta"), None, stride, pad).shape
    gy = randn(ys, dt, "cuda", gen)
    if gy_cl:
        gy = gy.contiguous(memory_format=torch.channels_last)
    ref = torch.nn.grad.conv2d_weight(x.double(), ws, gy.double(), stride, pad)
    theirs = torch.nn.grad.conv2d_weight(x, ws, gy, stride, pad)
    errs = []
    for _ in range(3):  # a wrong result that comes and goes is a race: three tries
        gw = torch.ops.tileops._conv2d_backward(gy, x, w, [stride] * 2, list(pad), [1, 1], 1, list(mask))[1]
        errs.append(float((gw.double() - ref).norm() / ref.norm()))
    torch_err = float((theirs.double() - ref).norm() / ref.norm())
    assert max(errs) <= 4 * torch_err + 1e-6, "seed %d: grad_weight errors %s against torch's %.3g" % (
        seed, ["%.3g" % e for e in errs], torch_err)


# Issue 60's weight gradient alone on a stream of the caller's while other work runs on the current
# stream: GEMMs (torch's, tileops' Hopper ones), or tileops' data gradient of the same conv, beside
# which the skinny TMA GEMM once gave wrong results (every try on an H100) however the op orders them.
@pytest.mark.cuda
@pytest.mark.parametrize("beside", ["torch", "tileops", "dgrad"])
def test_conv2d_grad_weight_skinny_beside_other_work(beside):
    gen, seed = fresh_generator()
    dt = torch.bfloat16
    x = randn((4, 16, 224, 224), dt, "cuda", gen).contiguous(memory_format=torch.channels_last)
    w = randn((16, 16, 16, 16), dt, "cuda", gen).contiguous(memory_format=torch.channels_last)
    gy = randn((4, 16, 106, 105), dt, "cuda", gen)
    ref = torch.nn.grad.conv2d_weight(x.double(), w.shape, gy.double(), 2, (1, 0))
    torch_err = float((torch.nn.grad.conv2d_weight(x, w.shape, gy, 2, (1, 0)).double() - ref).norm() / ref.norm())
    a, b = randn((4096, 4096), dt, "cuda", gen), randn((4096, 4096), dt, "cuda", gen)
    mm = torch.matmul if beside == "torch" else tileops.matmul
    side = torch.cuda.Stream()
    errs = []
    for _ in range(4):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            gw = torch.ops.tileops._conv2d_backward(gy, x, w, [2, 2], [1, 0], [1, 1], 1, [False, True, False])[1]
        if beside == "dgrad":  # queued on the current stream after the weight gradient's kernels
            busy = [torch.ops.tileops._conv2d_backward(gy, x, w, [2, 2], [1, 0], [1, 1], 1, [True, False, False])[0]]
        else:
            busy = [mm(a, b) for _ in range(8)]
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        del busy
        errs.append(float((gw.double() - ref).norm() / ref.norm()))
    assert max(errs) <= 4 * torch_err + 1e-6, "seed %d: grad_weight errors %s against torch's %.3g" % (
        seed, ["%.3g" % e for e in errs], torch_err)
