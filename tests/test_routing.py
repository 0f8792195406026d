"""Routing as data (csrc/routing/route.h): the tables, docs/dispatch.md made from them,
tileops.explain (the decision without launching anything), the trace, and the routing of
representative problems pinned through explain, checked against what a real call runs."""
import importlib.util
import os
import re
from collections import Counter

import pytest
import torch

import tileops
from utils import cuda_kernels, tf32

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA_BUILD = tileops.build_info()["with_cuda"]


def _gen_dispatch():
    spec = importlib.util.spec_from_file_location("gen_dispatch", os.path.join(ROOT, "scripts", "dev", "gen_dispatch.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _anchor(heading):
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_tables_registered():
    names = [t["op"] for t in tileops.routing.tables()]
    assert "cpu" in names
    if CUDA_BUILD:
        for op in ("matmul", "conv2d.forward", "conv2d.grad_input", "conv2d.grad_weight", "conv2d.depthwise.forward",
                   "conv2d.depthwise.grad_input", "conv2d.depthwise.grad_weight"):
            assert op in names, "no routing table %s (tables: %s)" % (op, names)
    for t in tileops.routing.tables():
        rows = [r["name"] for r in t["rows"]]
        assert rows and len(set(rows)) == len(rows), "%s: empty or duplicate candidate names %s" % (t["op"], rows)


def test_table_docs_exist():
    """Each candidate's page, and its anchor, exist under docs/."""
    for t in tileops.routing.tables():
        for r in t["rows"]:
            page, _, anchor = r["doc"].partition("#")
            path = os.path.join(ROOT, "docs", page)
            assert os.path.exists(path), "%s / %s: no page docs/%s" % (t["op"], r["name"], page)
            if anchor:
                anchors = {_anchor(line.lstrip("#")) for line in open(path) if line.startswith("#")}
                assert anchor in anchors, "%s / %s: docs/%s has no heading #%s" % (t["op"], r["name"], page, anchor)


@pytest.mark.skipif(not CUDA_BUILD, reason="docs/dispatch.md lists the CUDA tables: a build without CUDA has the CPU's only")
def test_dispatch_doc_is_fresh():
    text = _gen_dispatch().render(tileops.routing.tables())
    with open(os.path.join(ROOT, "docs", "dispatch.md")) as f:
        assert f.read() == text, "docs/dispatch.md is stale: run python scripts/dev/gen_dispatch.py"


# the CPU's packed rows, widest first: this machine's is the first its CPU (and ATEN_CPU_CAPABILITY) allows
CPU_PACKED = ("cpu_avx512", "cpu_avx2", "cpu_packed")


def test_explain_cpu():
    (d,) = tileops.explain("matmul", torch.randn(5, 7), torch.randn(7, 40))
    assert d["op"] == "cpu" and d["kernel"] in CPU_PACKED and "M=5 N=40 K=7" in d["problem"]
    assert [name for name, _ in d["passed_over"]] == list(CPU_PACKED[:CPU_PACKED.index(d["kernel"])])
    widest = d["kernel"]
    assert d["config"] == "blocked" and "not contiguous along k" in d["why"]
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    (d,) = tileops.explain("matmul", a, b)  # 3 columns: a 16-column panel pads them less than a 32-column one
    assert d["kernel"] == ("cpu_avx2" if widest == "cpu_avx512" else widest), d
    if widest == "cpu_avx512":
        assert "N <= 16" in dict(d["passed_over"])["cpu_avx512"], d
    (d,) = tileops.explain("linear", a, torch.randn(3, 7))  # few rows, B = weight.t(): read in place
    assert d["config"] == "gemv" and "M <= 8" in d["why"]
    (d,) = tileops.explain("linear", torch.randn(9, 7), torch.randn(3, 7))
    assert d["config"] == "blocked" and "M > 8" in d["why"]
    x, w = torch.randn(2, 20, 9, 9, requires_grad=True), torch.randn(20, 20, 3, 3, requires_grad=True)
    ds = tileops.explain("conv2d", x, w, padding=1)
    assert [d["kernel"] for d in ds] == [widest] * 3  # fwd, dgrad, wgrad
    assert tileops.explain("conv2d", x, w, padding="same", backward=False)[0]["problem"].count("pad 1x1") == 1
    xd, wd = torch.randn(1, 8, 6, 6, requires_grad=True), torch.randn(8, 1, 3, 3, requires_grad=True)
    assert [d["config"] for d in tileops.explain("conv2d", xd, wd, padding=1, groups=8)] == ["depthwise"] * 3
    w2 = torch.randn(16, 1, 3, 3)  # a channel multiplier: still one input channel a group
    assert tileops.explain("conv2d", xd, w2, padding=1, groups=8, backward=False)[0]["config"] == "depthwise"
    xg, wg = torch.randn(1, 16, 6, 6, requires_grad=True), torch.randn(16, 4, 3, 3, requires_grad=True)
    ds = tileops.explain("conv2d", xg, wg, padding=1, groups=4)
    assert [d["config"] for d in ds] == ["grouped"] * 3
    # the grouped form runs in 8-lane vectors: never on the AVX-512 row, which says so where it could run
    assert all(d["kernel"] in CPU_PACKED[1:] for d in ds), ds
    if widest == "cpu_avx512":
        assert all(d["kernel"] == "cpu_avx2" and "grouped form" in dict(d["passed_over"])["cpu_avx512"] for d in ds), ds
    wg = torch.randn(40, 8, 3, 3)  # 8 channels a group: one vector of outputs, each read broadcast
    assert tileops.explain("conv2d", torch.randn(1, 40, 6, 6), wg, groups=5, backward=False)[0]["config"] == "grouped"
    wg = torch.randn(30, 6, 3, 3)  # 6 a group: neither (kernels/cpu.md#forms)
    assert tileops.explain("conv2d", torch.randn(1, 30, 6, 6), wg, groups=5, backward=False)[0]["config"] == "blocked"
    # K = 0 (an empty inner dimension): nothing to pack, the reference loop writes the epilogue of 0
    (d,) = tileops.explain("linear", torch.randn(4, 0), torch.randn(3, 0), torch.randn(3))
    assert d["kernel"] == "cpu_reference", d
    assert dict(d["passed_over"])["cpu_packed"] == "K is 0: nothing to pack"


def test_explain_errors():
    with pytest.raises(ValueError, match="op_name must be one of"):
        tileops.explain("conv4d", torch.randn(2, 2))
    with pytest.raises(RuntimeError, match="inner dimensions differ"):
        tileops.explain("matmul", torch.randn(2, 3), torch.randn(4, 5))


def test_trace_cpu(capfd):
    a, b = torch.randn(4, 6), torch.randn(6, 5)
    with tileops.routing.trace():
        tileops.matmul(a, b)
    err = capfd.readouterr().err
    assert re.search(r"tileops route cpu \[.*M=4 N=5 K=6.*\]: .*-> cpu_(avx512|avx2|packed)$", err, re.M), err
    tileops.matmul(a, b)
    assert "tileops route" not in capfd.readouterr().err


def _flat(decisions):
    for d in decisions:
        yield d
        yield from _flat(d["lowered"])


def _traced(fn, capfd):
    """(depth, op, kernel) of every routed problem a real call ran, from the trace (depth 0: the
    op's own problems; deeper: the problems a candidate lowered to)."""
    capfd.readouterr()
    with tileops.routing.trace():
        fn()
        torch.cuda.synchronize()
    lines = re.findall(r"tileops route ( *)(\S+) \[.*?\]: .*?-> (\S+)", capfd.readouterr().err)
    return [(len(indent) // 2, op, kernel) for indent, op, kernel in lines]


def _agree(explained, ran, what):
    """explain's decisions against a real call's trace: the op's own problems the same (as a
    multiset: a conv's two gradients are issued in either order), and every lowered problem
    explain names among those the call lowered (a call may lower in chunks, or per phase, where
    explain names the first)."""
    top = [(d["op"], d["kernel"]) for d in explained]
    ran_top = [(op, k) for depth, op, k in ran if depth == 0]
    assert Counter(top) == Counter(ran_top), "%s: explain %s, but the call ran %s" % (what, top, ran_top)
    nested = Counter((d["op"], d["kernel"]) for e in explained for d in _flat(e["lowered"]))
    ran_nested = Counter((op, k) for depth, op, k in ran if depth > 0)
    assert not nested - ran_nested, "%s: explain lowers to %s, the call to %s" % (what, dict(nested), dict(ran_nested))


def _hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0) and "9.0a" in tileops.build_info()["arch_list"]


def _t(shape, dtype, cl=False, gen=None):
    t = torch.randn(shape, device="cuda", generator=gen).to(dtype)
    return t.contiguous(memory_format=torch.channels_last if t.dim() == 4 else torch.channels_last_3d) if cl else t


BF16, F16, F32, F64 = torch.bfloat16, torch.float16, torch.float32, torch.float64

# (id, op, args builder, kwargs, TF32, expected (op path, kernel) chain on Hopper, or None to only
# compare explain with the trace): representative problems of each table's rows
CASES = [
    ("matmul_bf16_4096", "matmul", lambda: (_t((4096, 4096), BF16), _t((4096, 4096), BF16)), {}, False,
     [("matmul", "sm90")]),
    ("linear_m8_bf16", "linear", lambda: (_t((8, 4096), BF16), _t((4096, 4096), BF16)), {}, False,
     [("matmul", "skinny_tc")]),
    ("matmul_m8_f32", "matmul", lambda: (_t((8, 512), F32), _t((512, 300), F32)), {}, False, [("matmul", "skinny")]),
    ("matmul_f64", "matmul", lambda: (_t((100, 70), F64), _t((70, 90), F64)), {}, False, [("matmul", "simt")]),
    ("matmul_f32_strict", "matmul", lambda: (_t((300, 256), F32), _t((256, 200), F32)), {}, False, [("matmul", "simt")]),
    ("matmul_pinned_mma", "matmul", lambda: (_t((64, 64), BF16), _t((64, 64), BF16)), {"algo": "mma"}, False,
     [("matmul", "rung")]),
    ("matmul_small_tf32_strided", "matmul", lambda: (_t((100, 70), F32), _t((90, 70), F32).t()), {}, True,
     [("matmul", "mma")]),
    ("conv_bf16_cl_3x3_c64", "conv2d", lambda: (_t((8, 64, 56, 56), BF16, True), _t((64, 64, 3, 3), BF16, True)),
     {"padding": 1}, False, [("conv2d.forward", "sm90_implicit")]),
    ("conv_bf16_cl_1x1", "conv2d", lambda: (_t((8, 256, 28, 28), BF16, True), _t((128, 256, 1, 1), BF16, True)), {},
     False, [("conv2d.forward", "gemm_1x1"), ("matmul", "sm90")]),
    ("conv_bf16_stem", "conv2d", lambda: (_t((4, 3, 64, 64), BF16, True), _t((32, 3, 7, 7), BF16)),
     {"stride": 2, "padding": 3}, False, [("conv2d.forward", "smallc")]),
    ("conv_f32_nchw", "conv2d", lambda: (_t((2, 64, 20, 20), F32), _t((32, 64, 3, 3), F32)), {"padding": 1}, False,
     [("conv2d.forward", "simt_f32")]),
    ("conv_f32_nchw_1x1", "conv2d", lambda: (_t((2, 64, 20, 20), F32), _t((128, 64, 1, 1), F32)), {}, False,
     [("conv2d.forward", "nchw_1x1"), ("matmul", "simt")]),
    ("conv_f32_stem", "conv2d", lambda: (_t((2, 3, 40, 40), F32), _t((16, 3, 7, 7), F32)), {"stride": 2, "padding": 3},
     False, [("conv2d.forward", "smallc_f32")]),
    ("conv_f64", "conv2d", lambda: (_t((2, 5, 9, 9), F64), _t((4, 5, 3, 3), F64)), {}, False,
     [("conv2d.forward", "ladder")]),
    # grouped: one dense conv over a block-diagonal weight, back into the same table; fp32 and fp64 stay
    ("conv_grouped", "conv2d", lambda: (_t((2, 8, 9, 9), BF16), _t((8, 2, 3, 3), BF16)), {"groups": 4}, False,
     [("conv2d.forward", "grouped_dense"), ("conv2d.forward", "im2col_gemm")]),
    ("conv_grouped_resnext", "conv2d", lambda: (_t((4, 128, 14, 14), BF16, True), _t((128, 4, 3, 3), BF16, True)),
     {"padding": 1, "groups": 32}, False, [("conv2d.forward", "grouped_dense"), ("conv2d.forward", "sm90_implicit")]),
    ("conv_grouped_f32_strict", "conv2d", lambda: (_t((2, 8, 9, 9), F32), _t((8, 2, 3, 3), F32)), {"groups": 4},
     False, [("conv2d.forward", "ladder")]),
    ("conv_depthwise", "conv2d", lambda: (_t((2, 32, 28, 28), BF16, True), _t((32, 1, 3, 3), BF16, True)),
     {"padding": 1, "groups": 32}, False, None),
    ("conv_tf32_cl_3x3", "conv2d", lambda: (_t((2, 32, 20, 20), F32, True), _t((32, 32, 3, 3), F32, True)),
     {"padding": 1}, True, [("conv2d.forward", "im2col_gemm"), ("matmul", "mma")]),
    # the rest of the conv family: conv1d as conv2d with H = 1, a transposed conv as its data gradient
    ("conv1d_bf16_cl", "conv1d", lambda: (_t((4, 300, 64), BF16).transpose(1, 2), _t((64, 64, 3), BF16)),
     {"padding": 1}, False, [("conv2d.forward", "sm90_implicit")]),
    ("conv_transpose2d_bf16_cl", "conv_transpose2d", lambda: (_t((2, 64, 16, 16), BF16, True),
                                                              _t((64, 64, 4, 4), BF16, True)),
     {"stride": 2, "padding": 1}, False, None),
    ("conv_transpose1d_f32_op1", "conv_transpose1d", lambda: (_t((2, 32, 65), F32), _t((32, 16, 3), F32)),
     {"stride": 2, "padding": 1, "output_padding": 1}, False, None),
    # conv3d as one conv2d over batch x depth, the depth taps as channels; conv_transpose3d likewise
    ("conv3d_bf16_cl3d", "conv3d", lambda: (_t((2, 64, 8, 28, 28), BF16, True), _t((64, 64, 3, 3, 3), BF16, True)),
     {"padding": 1}, False, None),
    ("conv3d_f32_1x1x1_s2", "conv3d", lambda: (_t((2, 32, 8, 14, 14), F32), _t((64, 32, 1, 1, 1), F32)),
     {"stride": 2}, False, None),
    ("conv_transpose3d_bf16_cl3d", "conv_transpose3d", lambda: (_t((2, 64, 4, 14, 14), BF16, True),
                                                                _t((64, 32, 2, 2, 2), BF16, True)),
     {"stride": 2}, False, None),
]


@pytest.mark.cuda
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_explain_matches_a_real_call(case, capfd):
    """explain's chain of (op path, kernel) is what a real call runs (its trace), forward and
    backward; on Hopper, the forward's first decisions are the ones listed."""
    _, op, build, kwargs, allow_tf32, expected = case
    args = build()
    fn = getattr(tileops, op)
    with tf32(allow_tf32):
        decisions = tileops.explain(op, *args, backward=False, **kwargs)
        _agree(decisions, _traced(lambda: fn(*args, **kwargs), capfd), "forward")
        chain = [(d["op"], d["kernel"]) for d in _flat(decisions)]
        if expected is not None and _hopper():
            assert chain[: len(expected)] == expected, chain
        if op != "matmul" or "algo" not in kwargs:  # the backward's problems too
            leaves = [a.detach().requires_grad_(True) for a in args]
            out = fn(*leaves, **kwargs)
            gy = torch.randn_like(out)
            decisions = tileops.explain(op, *leaves, **kwargs)
            n_fwd = len(tileops.explain(op, *leaves, backward=False, **kwargs))
            _agree(decisions[n_fwd:], _traced(lambda: out.backward(gy), capfd), "backward")


@pytest.mark.cuda
def test_explain_launches_nothing():
    x, w = _t((4, 64, 32, 32), BF16, True), _t((64, 64, 3, 3), BF16, True)
    x.requires_grad_(True)
    ds, kernels = cuda_kernels(lambda: tileops.explain("conv2d", x, w, padding=1))
    assert kernels == [], kernels
    assert [d["op"] for d in ds] == ["conv2d.forward", "conv2d.grad_input", "conv2d.grad_weight"]


@pytest.mark.cuda
def test_explain_issue60_grad_weight():
    """The grad_weight of the issue-60 conv (K = 16 output channels, a 44,520-long reduction, gy
    NCHW) lowers to a skinny GEMM; its config comes from the heuristic unless pinned."""
    x, w = _t((4, 16, 224, 224), BF16, True), _t((16, 16, 16, 16), BF16)
    x.requires_grad_(True)
    w.requires_grad_(True)
    ds = tileops.explain("conv2d", x, w, stride=2, padding=(1, 0))
    gw = [d for d in ds if d["op"] == "conv2d.grad_weight"][0]
    assert gw["kernel"] in {"im2col_gemm", "sm90_implicit"}, gw
    if _hopper() and gw["kernel"] == "im2col_gemm":
        (mm,) = gw["lowered"]
        assert mm["op"] == "matmul" and "M=16" in mm["problem"], mm
        family = {"skinny_tc": "matmul_skinny_tc", "sm90": "matmul_sm90"}[mm["kernel"]]
        assert mm["config"] in tileops.autotune.candidates(family), mm
        assert mm["why"].startswith(("heuristic", "pinned", "cached")), mm


# ----------------------------------------------------------------------------------------------
# TILEOPS_PORTABLE=1: every op routed as on a GPU before Hopper (read once: a process of its own)

HOPPER_ONLY = {"sm90", "skinny_tc", "sm90_implicit", "sm90_implicit_strided"}  # the candidates that need sm_90a
PORTABLE_PROBE = r"""
import json, sys
import torch, torch.nn.functional as F
import tileops
sys.path.insert(0, "tests")
from test_routing import _flat
torch.manual_seed(0)
bf = torch.bfloat16
cl = lambda t: t.contiguous(memory_format=torch.channels_last)
r = lambda *s: torch.randn(*s, device="cuda", dtype=bf)
cases = [
    ("matmul", (r(1024, 1024), r(1024, 1024)), {}, torch.matmul),
    ("matmul", (r(8, 4096), r(4096, 4096)), {}, torch.matmul),  # skinny
    ("conv2d", (cl(r(8, 64, 56, 56)), cl(r(64, 64, 3, 3))), {"padding": 1}, F.conv2d),
    ("conv2d", (cl(r(4, 3, 64, 64)), cl(r(32, 3, 7, 7))), {"stride": 2, "padding": 3}, F.conv2d),  # small C
    ("conv2d", (cl(r(2, 96, 56, 56)), cl(r(96, 1, 3, 3))), {"padding": 1, "groups": 96}, F.conv2d),  # depthwise
]
chains, errs = [], []
for op, args, kw, ref in cases:
    leaves = [a.detach().requires_grad_() for a in args]
    chains += [(d["op"], d["kernel"], d["config"]) for d in _flat(tileops.explain(op, *leaves, **kw))]
    y = getattr(tileops, op)(*leaves, **kw)
    y.backward(torch.ones_like(y))
    want = ref(*[a.double() for a in args], **kw)
    errs.append(float((y.double() - want).norm() / want.norm()))
print(json.dumps({"portable": tileops.routing.portable(), "chains": chains, "errs": errs}))
"""


# where this process's tileops lives (the tree's python/, or an installed wheel): subprocesses import that one
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tileops.__file__)))


def _portable_probe(env_value):
    import json
    import subprocess
    import sys

    env = dict(os.environ, TILEOPS_PORTABLE=env_value, PYTHONPATH=os.pathsep.join(
        [_PACKAGE_ROOT, os.path.join(ROOT, "tests"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", PORTABLE_PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_portable_switch_read_from_the_environment():
    import subprocess
    import sys

    code = "import tileops; print(tileops.routing.portable())"
    for value, want in (("1", "True"), ("0", "False"), ("", "False")):
        env = dict(os.environ, TILEOPS_PORTABLE=value, PYTHONPATH=os.pathsep.join(
            [_PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")]))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert out.stdout.strip() == want, (value, out.stdout, out.stderr[-2000:])


@pytest.mark.cuda
def test_portable_switch_routes_no_hopper_kernel():
    """Under TILEOPS_PORTABLE=1 the calls that take the Hopper kernels here (a large and a skinny bf16
    GEMM, a channels_last 3x3 conv, a stem, a depthwise conv; forward and gradients) run the portable
    ones, with torch's results; on an H100 the same calls without the switch take Hopper kernels (so
    the switch is what changed them)."""
    on = _portable_probe("1")
    assert on["portable"] is True
    used = {k for _, k, _ in on["chains"]}
    assert not used & HOPPER_ONLY, on["chains"]
    assert not any(cfg == "rows" for _, _, cfg in on["chains"]), on["chains"]  # the depthwise row ring (TMA)
    assert max(on["errs"]) < 2e-2, on["errs"]
    if _hopper():
        off = _portable_probe("0")
        assert off["portable"] is False and {k for _, k, _ in off["chains"]} & HOPPER_ONLY, off["chains"]
