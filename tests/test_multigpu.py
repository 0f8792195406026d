"""Two GPUs: inputs on cuda:1 while the current device is cuda:0 give right results on cuda:1,
leave cuda:0 untouched (no allocation, no CUDA context) and the current device unchanged;
cuda:0 mixed with cuda:1 is a named error. Skipped, with a reason, where fewer than 2 GPUs are
visible (also under TILEOPS_REQUIRE_CUDA=1); scripts/device/ddp_run.sh runs them on a 2-GPU machine."""
import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import tileops
import tileops.nn as tnn
from op_cases import CASES
from test_errors import Make, bwd, conv_w
from utils import fresh_generator

pytestmark = [pytest.mark.cuda, pytest.mark.multigpu]


@pytest.fixture(autouse=True)
def _current_device_0():
    torch.cuda.set_device(0)
    yield
    assert torch.cuda.current_device() == 0, "an op changed the current device"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_multigpu_ops_on_second_gpu(case):
    gen, seed = fresh_generator()
    inputs = case.inputs("cuda:1", gen)
    torch.cuda.synchronize(0)
    on_0 = torch.cuda.memory_allocated(0)
    outs = case(inputs)
    torch.cuda.synchronize(1)
    assert all(o.device == torch.device("cuda", 1) for o in outs), [o.device for o in outs]
    assert torch.cuda.memory_allocated(0) == on_0, "memory was allocated on cuda:0"
    case.check(outs, inputs, "on cuda:1 seed=%d" % seed)


def test_multigpu_stream_and_graph_on_second_gpu():
    """A side stream and a captured graph of cuda:1, entered while cuda:0 is current."""
    gen, _ = fresh_generator()
    case = next(c for c in CASES if c.name == "matmul-bf16-tma-padded")  # allocates a workspace
    static = case.inputs("cuda:1", gen)
    expected = case(static)
    side = torch.cuda.Stream(device=1)
    side.wait_stream(torch.cuda.current_stream(1))
    with torch.cuda.stream(side):
        outs = case(static)
    torch.cuda.current_stream(1).wait_stream(side)
    assert all(torch.equal(o, e) for o, e in zip(outs, expected))
    graph = torch.cuda.CUDAGraph()
    # an explicit capture stream of cuda:1: torch.cuda.graph's default capture stream is made
    # once per process, on the device of the first capture (cuda:0 when the single-GPU graph
    # tests ran first), and work on cuda:1 would then go uncaptured ("The CUDA Graph is empty")
    with torch.cuda.device(1):
        with torch.cuda.graph(graph, stream=torch.cuda.Stream(device=1)):
            outs = case(static)
    for _ in range(3):
        new = case.inputs("cuda:1", gen)
        for t, n in zip(static, new):
            t.copy_(n)
        graph.replay()
        assert all(torch.equal(o, e) for o, e in zip(outs, case(new)))


def test_multigpu_training_step_on_second_gpu():
    """A converted model on cuda:1 trains like the stock one (same weights, data)."""
    torch.manual_seed(0)
    stock = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(1),
                                torch.nn.Linear(8 * 6 * 6, 10)).to("cuda:1")
    tile = tileops.convert(copy.deepcopy(stock))
    assert isinstance(tile[0], tnn.Conv2d) and isinstance(tile[3], tnn.Linear)
    x, y = torch.randn(5, 3, 6, 6, device="cuda:1"), torch.randint(0, 10, (5,), device="cuda:1")
    for m in (stock, tile):
        F.cross_entropy(m(x), y).backward()
    for (name, p), q in zip(tile.named_parameters(), stock.parameters()):
        assert p.grad.device == torch.device("cuda", 1)
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_multigpu_mixed_devices_raise():
    g0, g1 = Make("cuda:0"), Make("cuda:1")
    cases = [
        (lambda: tileops.matmul(g0.f(3, 4), g1.f(4, 5)), r"tileops.matmul: expected b on the same device as a \(cuda:0\), got cuda:1"),
        (lambda: tileops.matmul(g1.f(3, 4), g0.f(4, 5)), r"tileops.matmul: expected b on the same device as a \(cuda:1\), got cuda:0"),
        (lambda: tileops.linear(g1.f(3, 4), g0.f(5, 4)), r"tileops.linear: expected weight on the same device as x \(cuda:1\), got cuda:0"),
        (lambda: tileops.linear(g0.f(3, 4), g0.f(5, 4), g1.f(5)), r"tileops.linear: expected bias on the same device as x \(cuda:0\), got cuda:1"),
        (lambda: tileops.conv2d(g0.f(1, 2, 5, 5), g1.f(3, 2, 3, 3)), r"tileops.conv2d: expected weight on the same device as x \(cuda:0\), got cuda:1"),
        (lambda: tileops.conv2d(g1.f(1, 2, 5, 5), g1.f(3, 2, 3, 3), g0.f(3)), r"tileops.conv2d: expected bias on the same device as x \(cuda:1\), got cuda:0"),
        (lambda: bwd(g1, grad_out=g0.f(2, 6, 6, 6)), r"tileops._conv2d_backward: expected grad_out on the same device as x \(cuda:1\), got cuda:0"),
        (lambda: bwd(g0, w=conv_w(g1)), r"tileops._conv2d_backward: expected weight on the same device as x \(cuda:0\), got cuda:1"),
        (lambda: tnn.Linear(4, 5, device="cuda:1")(g0.f(3, 4)), r"tileops.linear: expected weight on the same device as x \(cuda:0\), got cuda:1"),
    ]
    for fn, pattern in cases:
        with pytest.raises(RuntimeError, match=pattern):
            fn()
    for d in (0, 1):  # both GPUs still work
        a = torch.randn(3, 4, device="cuda:%d" % d)
        torch.testing.assert_close(tileops.matmul(a, a.t()), a @ a.t())
        torch.cuda.synchronize(d)


# Runs in a fresh process: only cuda:1 is ever used, so a CUDA context on cuda:0 afterwards
# can only come from an op that ran (or set the device) on the wrong GPU. torch's own check
# of a primary context is the probe; the baseline confirms torch itself leaves cuda:0 alone.
NO_CONTEXT_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import tileops
    from op_cases import CASES
    from utils import fresh_generator

    def ctx(d):
        return torch._C._cuda_hasPrimaryContext(d)

    a = torch.randn(64, 64, device="cuda:1")
    (a @ a).sum().item()
    if ctx(0):
        print("BASELINE: torch alone created a context on cuda:0; the check cannot be made")
        sys.exit(2)
    gen, _ = fresh_generator()
    for case in CASES:
        inputs = case.inputs("cuda:1", gen)
        outs = case(inputs)
        torch.cuda.synchronize(1)
        if ctx(0):
            print("FAIL: %s created a CUDA context on cuda:0" % case.name)
            sys.exit(1)
    x = torch.randn(4, 3, 8, 8, device="cuda:1", requires_grad=True)
    m = tileops.convert(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(1), torch.nn.Linear(144, 5)))
    m.to("cuda:1")(x).sum().backward()
    torch.cuda.synchronize(1)
    print("contexts: cuda:0 %s, cuda:1 %s, current device %d" % (ctx(0), ctx(1), torch.cuda.current_device()))
    sys.exit(1 if ctx(0) or not ctx(1) else 0)
""")


def test_multigpu_no_context_on_first_gpu():
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        r = subprocess.run([sys.executable, "-c", NO_CONTEXT_SCRIPT], env=env, cwd=here, capture_output=True,
                           text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        pytest.fail("the probe process did not finish in 300 s: %s" % (e.stdout or "")[-2000:])
    assert r.returncode == 0, "probe exited %d:\n%s\n%s" % (r.returncode, r.stdout[-4000:], r.stderr[-4000:])
