"""Execution context: every op and kernel path (op_cases.CASES) gives bitwise-identical results
run to run, runs on the caller's current stream, replays inside a captured CUDA graph with new
inputs, and allocates only through the caching allocator without growing it.
scripts/device/sanitize.sh runs test_deterministic under compute-sanitizer with TILEOPS_SANITIZE=1:
one repeat instead of three there, since the sanitizer checks every launch anyway."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import tileops
import tileops.nn as tnn
from conftest import DEVICES
from op_cases import CASES, CPU_CASES
from utils import fresh_generator

CUDA_CASES = [pytest.param(c, id=c.name) for c in CASES]


def device_cases():
    """(device, case) pairs: every case on CUDA, those without a CUDA-only algo on the CPU."""
    return [pytest.param("cpu", c, id="cpu-" + c.name) for c in CPU_CASES] + [
        pytest.param("cuda", c, id="cuda-" + c.name, marks=pytest.mark.cuda) for c in CASES]


def same_bits(outs, refs, what):
    for i, (o, r) in enumerate(zip(outs, refs)):
        assert o.shape == r.shape and o.dtype == r.dtype, what
        # compare the bit patterns: NaN == NaN and -0.0 != 0.0, as "bitwise identical" means
        assert torch.equal(o.contiguous().view(torch.uint8), r.contiguous().view(torch.uint8)), \
            "%s: output %d differs" % (what, i)


@pytest.mark.parametrize("device,case", device_cases())
def test_deterministic(device, case):
    """Same inputs and config: the same bits on every call; right against float64 once."""
    gen, seed = fresh_generator()
    inputs = case.inputs(device, gen)
    first = case(inputs)
    case.check(first, inputs, "seed=%d" % seed)
    for _ in range(1 if os.environ.get("TILEOPS_SANITIZE") == "1" else 3):
        same_bits(case(inputs), first, "%s seed=%d" % (case.name, seed))


@pytest.mark.cuda
def test_dependent_launches_change_no_bits_cuda(tmp_path):
    """On sm_90 kernels that follow another of tileops' (a split's reduce, a GEMM after a weight
    transposition) are launched as its programmatic dependents: every case gives the bits it gives
    with ordinary launches (TILEOPS_PDL=0, read once a process: a subprocess)."""
    path = tmp_path / "ordinary.pt"
    code = (
        "import sys, torch\n"
        "sys.path.insert(0, %r)\n"
        "from op_cases import CASES\n"
        "out = {c.name: [o.cpu() for o in c(c.inputs('cuda', torch.Generator().manual_seed(7)))] for c in CASES}\n"
        "torch.save(out, %r)\n" % (os.path.dirname(os.path.abspath(__file__)), str(path)))
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TILEOPS_PDL="0"), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ordinary = torch.load(path)
    for c in CASES:
        outs = [o.cpu() for o in c(c.inputs("cuda", torch.Generator().manual_seed(7)))]
        same_bits(outs, ordinary[c.name], c.name + ": dependent launches against ordinary ones")


@pytest.mark.cuda
@pytest.mark.parametrize("case", CUDA_CASES)
def test_side_stream_cuda(case):
    """On a side stream, the op reads inputs written on that stream and its output is valid once
    that stream is done: it would read stale inputs if it ran on any other stream, since the
    copy of the new inputs is queued behind a ~50 ms sleep on the side stream."""
    gen, _ = fresh_generator()
    inputs = case.inputs("cuda", gen)
    fresh = case.inputs("cuda", gen)
    expected = case(fresh)  # on the default stream, from the new values
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # ~50 ms of spinning on the side stream
        for t, f in zip(inputs, fresh):
            t.copy_(f)
        outs = case(inputs)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()
    same_bits(outs, expected, case.name + " on a side stream")
    assert all(o.device.index == torch.cuda.current_device() for o in outs)


@pytest.mark.cuda
@pytest.mark.parametrize("case", CUDA_CASES)
def test_graph_replay_cuda(case):
    """Captured once, replayed with new inputs copied into the captured ones: each replay gives
    the bits an eager call on those inputs gives."""
    gen, seed = fresh_generator()
    static = case.inputs("cuda", gen)
    side = torch.cuda.Stream()  # warm-up off the default stream, as torch's graph docs do
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        case(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = case(static)
    for step in range(10):
        new = case.inputs("cuda", gen)
        for t, n in zip(static, new):
            t.copy_(n)
        graph.replay()
        expected = case(new)
        same_bits(outs, expected, "%s replay %d seed=%d" % (case.name, step, seed))
    case.check(outs, static, "after replays, seed=%d" % seed)


@pytest.mark.cuda
def test_graphed_training_step_cuda():
    """A tileops model's whole forward and backward captured in one CUDA graph (PyTorch's
    whole-network capture recipe): replays with new data give the gradients of an eager copy."""
    torch.manual_seed(0)

    def model():
        return torch.nn.Sequential(
            tnn.Conv2d(3, 8, 3, padding=1, activation="relu"), tnn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2),
            torch.nn.Flatten(1), tnn.Linear(8 * 4 * 4, 32, activation="gelu"), tnn.Linear(32, 10)).cuda()

    graphed, eager = model(), model()
    eager.load_state_dict(graphed.state_dict())
    static_x = torch.randn(4, 3, 8, 8, device="cuda")
    static_t = torch.randint(0, 10, (4,), device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capturing stream
        for _ in range(3):
            graphed.zero_grad(set_to_none=True)
            F.cross_entropy(graphed(static_x), static_t).backward()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    graphed.zero_grad(set_to_none=True)  # the grads are allocated inside the graph's pool
    with torch.cuda.graph(graph):
        F.cross_entropy(graphed(static_x), static_t).backward()
    for _ in range(3):
        x, target = torch.randn(4, 3, 8, 8, device="cuda"), torch.randint(0, 10, (4,), device="cuda")
        static_x.copy_(x)
        static_t.copy_(target)
        graph.replay()
        eager.zero_grad(set_to_none=True)
        F.cross_entropy(eager(x), target).backward()
        torch.cuda.synchronize()
        for (name, p), q in zip(graphed.named_parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.cuda
def test_no_allocation_growth_cuda():
    """10,000 calls over every case (workspaces included: the padded copies of the Hopper path)
    leave the allocated bytes where they were, make no new cudaMalloc through the caching
    allocator and take no device memory outside it."""
    gen, _ = fresh_generator()
    work = [(c, c.inputs("cuda", gen)) for c in CASES]
    for _ in range(2):  # warm-up: every size the calls need is in the cache afterwards
        for c, inputs in work:
            c(inputs)
    torch.cuda.synchronize()
    allocated, stats = torch.cuda.memory_allocated(), torch.cuda.memory_stats()
    free = torch.cuda.mem_get_info()[0]
    calls = 0
    while calls < 10_000:
        for c, inputs in work:
            c(inputs)
            calls += 1
    torch.cuda.synchronize()
    after = torch.cuda.memory_stats()
    grown = torch.cuda.memory_allocated() - allocated
    if grown:  # name the cases that still grow, one at a time, for the message
        growing = []
        for c, inputs in work:
            before = torch.cuda.memory_allocated()
            for _ in range(20):
                c(inputs)
            torch.cuda.synchronize()
            if torch.cuda.memory_allocated() != before:
                growing.append(c.name)
        pytest.fail("bytes allocated grew by %d over %d calls; growing alone: %s" % (grown, calls, growing or "none"))
    for key in ("segment.all.allocated", "num_alloc_retries"):
        assert after.get(key, 0) == stats.get(key, 0), "%s: %s -> %s over %d calls" % (
            key, stats.get(key), after.get(key), calls)
    lost = free - torch.cuda.mem_get_info()[0]
    assert lost < 64 << 20, "%d MiB of device memory taken outside the allocator" % (lost >> 20)


@pytest.mark.parametrize("device", DEVICES)
def test_results_never_alias_inputs(device):
    """Every output is fresh memory, never an input's, even when inputs alias each other."""
    gen, _ = fresh_generator()
    for c in CASES if device == "cuda" else CPU_CASES:
        inputs = c.inputs(device, gen)
        before = [t.clone() for t in inputs]
        outs = c(inputs)
        for o in outs:
            for t in inputs:
                assert not overlaps(o, t), "%s: an output shares memory with an input" % c.name
        same_bits(inputs, before, c.name + " wrote to an input")
        o1, o2 = c(inputs), c(inputs)
        assert all(not overlaps(a, b) for a in o1 for b in o2), c.name + ": two calls share an output"


def overlaps(a, b):
    if a.numel() == 0 or b.numel() == 0:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    a0, b0 = sa.data_ptr(), sb.data_ptr()
    return a0 < b0 + sb.nbytes() and b0 < a0 + sa.nbytes()


@pytest.mark.parametrize("device", DEVICES)
def test_inputs_that_alias_each_other(device):
    """matmul(x, x), linear(x, w) with w (and bias) views of x's storage, conv2d with weight and
    bias cut from x: right results, inputs untouched, outputs in fresh memory; autograd through
    an aliased call accumulates both gradients into x."""
    gen, seed = fresh_generator()
    dt = torch.float64 if device == "cpu" else torch.float32
    x = torch.randn(64, 64, generator=gen, dtype=torch.float64).to(dtype=dt, device=device)
    keep = x.clone()
    calls = [
        (lambda: tileops.matmul(x, x), lambda: x @ x),
        (lambda: tileops.matmul(x, x.t()), lambda: x @ x.t()),
        (lambda: tileops.matmul(x.t(), x[:, :7]), lambda: x.t() @ x[:, :7]),
        (lambda: tileops.linear(x, x), lambda: F.linear(x, x)),
        (lambda: tileops.linear(x[:, :32], x[:10, 32:], x[3, :10]), lambda: F.linear(x[:, :32], x[:10, 32:], x[3, :10])),
        (lambda: tileops.linear(x, x[:8], x[:8, 0], "relu"), lambda: F.relu(F.linear(x, x[:8], x[:8, 0]))),
        # the residual is an input too (read in place when it has the output's strides, else copied)
        (lambda: tileops.linear(x, x, None, "gelu", x), lambda: F.gelu(F.linear(x, x) + x)),
        (lambda: tileops.linear(x, x, x[0], "none", x.t()), lambda: F.linear(x, x, x[0]) + x.t()),
    ]
    xc = x.view(-1)[:2 * 4 * 8 * 8].view(2, 4, 8, 8)
    wc, bc = x.view(-1)[100:100 + 6 * 4 * 9].view(6, 4, 3, 3), x.view(-1)[7:13]
    calls.append((lambda: tileops.conv2d(xc, wc, bc, 1, 1), lambda: F.conv2d(xc, wc, bc, 1, 1)))
    rc = x.view(-1)[50:50 + 2 * 6 * 8 * 8].view(2, 6, 8, 8)
    calls.append((lambda: tileops.conv2d(xc, wc, bc, 1, 1, 1, 1, "relu", rc), lambda: F.relu(F.conv2d(xc, wc, bc, 1, 1) + rc)))
    gy = x.view(-1)[:2 * 6 * 6 * 6].view(2, 6, 6, 6)
    calls.append((lambda: torch.ops.tileops._conv2d_backward(gy, xc, wc, [1, 1], [0, 0], [1, 1], 1, [True, True, True])[:2],
                  lambda: (torch.nn.grad.conv2d_input(xc.shape, wc, gy), torch.nn.grad.conv2d_weight(xc, wc.shape, gy))))
    tol = dict(rtol=1e-10, atol=1e-10) if dt == torch.float64 else dict(rtol=1e-4, atol=1e-4)
    for i, (fn, ref) in enumerate(calls):
        out, expected = fn(), ref()
        outs, exps = (out, expected) if isinstance(out, tuple) else ((out,), (expected,))
        for o, e in zip(outs, exps):
            torch.testing.assert_close(o, e, msg="aliased call %d seed=%d" % (i, seed), **tol)
            assert not overlaps(o, x), "aliased call %d: the output shares x's memory" % i
        same_bits([x], [keep], "aliased call %d wrote to its input" % i)
    # gradients of linear(x, x) and linear(x, x, residual=x): every use accumulates into x.grad
    for residual in (False, True):
        xg = x.detach().clone().requires_grad_()
        xr = x.detach().clone().requires_grad_()
        tileops.linear(xg, xg, None, "silu", xg if residual else None).sum().backward()
        F.silu(F.linear(xr, xr) + (xr if residual else 0)).sum().backward()
        torch.testing.assert_close(xg.grad, xr.grad, **tol)
