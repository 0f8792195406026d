"""tileops inside models: nn modules, convert(), torch.compile, autocast, build facts."""
import pytest
import torch
import torch.nn.functional as F

import tileops
import tileops.nn as tnn
from conftest import DEVICES, HAS_CUDA


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False)
        self.conv2 = torch.nn.Conv2d(8, 16, 1, padding_mode="zeros")
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 10))

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = self.conv2(self.dw(x))
        t = x.flatten(2).transpose(1, 2)
        t = t + self.attn(t, t, t, need_weights=False)[0]
        return self.head(t.mean(1))


def tile_model():
    return torch.nn.Sequential(
        tnn.Conv2d(3, 8, 3, padding=1, activation="relu"),
        tnn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8, bias=False),
        tnn.Conv2d(8, 16, 3, padding=1, padding_mode="reflect", activation="silu"),
        torch.nn.Flatten(1),
        tnn.Linear(16 * 4 * 4, 32, activation="gelu"),
        tnn.Linear(32, 10),
    )


@pytest.mark.parametrize("device", DEVICES)
def test_convert_keeps_outputs_and_parameters(device):
    torch.manual_seed(0)
    model = SmallNet().to(device).double().eval()
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64, device=device)
    ref = model(x)
    params = dict(model.named_parameters())
    keys = set(model.state_dict())
    out = tileops.convert(model)
    assert out is model
    assert isinstance(model.conv1, tnn.Conv2d) and isinstance(model.head[0], tnn.Linear)
    assert isinstance(model.attn.out_proj, tnn.Linear)
    assert set(model.state_dict()) == keys
    assert all(p is params[n] for n, p in model.named_parameters()), "parameters must be shared, not copied"
    torch.testing.assert_close(model(x), ref, rtol=1e-10, atol=1e-10)


def test_convert_include_exclude():
    m = SmallNet()
    tileops.convert(m, include=["head.*", "conv*"], exclude=lambda name, mod: name == "conv2")
    assert type(m.conv1) is tnn.Conv2d and type(m.conv2) is torch.nn.Conv2d and type(m.dw) is torch.nn.Conv2d
    assert type(m.head[0]) is tnn.Linear and type(m.attn.out_proj) is not tnn.Linear
    lin = torch.nn.Linear(3, 4)
    assert type(tileops.convert(lin)) is tnn.Linear  # a root module is returned swapped


@pytest.mark.parametrize("device", DEVICES)
def test_modules_match_torch_and_train(device):
    torch.manual_seed(0)
    lin = tnn.Linear(7, 5, device=device, dtype=torch.float64)
    ref = torch.nn.Linear(7, 5, device=device, dtype=torch.float64)
    ref.load_state_dict(lin.state_dict())
    x = torch.randn(3, 7, device=device, dtype=torch.float64)
    torch.testing.assert_close(lin(x), ref(x))
    conv = tnn.Conv2d(4, 6, 3, padding=1, padding_mode="circular", device=device, dtype=torch.float64)
    cref = torch.nn.Conv2d(4, 6, 3, padding=1, padding_mode="circular", device=device, dtype=torch.float64)
    cref.load_state_dict(conv.state_dict())
    xi = torch.randn(2, 4, 5, 5, device=device, dtype=torch.float64)
    torch.testing.assert_close(conv(xi), cref(xi))
    # a few SGD steps move the loss down
    model = tile_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    xb, yb = torch.randn(16, 3, 8, 8, device=device), torch.randint(0, 10, (16,), device=device)
    losses = []
    for _ in range(8):
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = tile_model().to(device)
    x = torch.randn(4, 3, 8, 8, device=device)
    eager = model(x)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), eager, rtol=1e-5, atol=1e-5)
    # training through the compiled graph uses the registered backward
    compiled(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("device", DEVICES)
def test_autocast(device):
    dtype = torch.bfloat16
    a, b = torch.randn(33, 65, device=device), torch.randn(65, 17, device=device)
    w, bias = torch.randn(9, 65, device=device), torch.randn(9, device=device)
    x, cw = torch.randn(2, 3, 9, 9, device=device), torch.randn(4, 3, 3, 3, device=device)
    with torch.autocast(device, dtype=dtype):
        outs = [tileops.matmul(a, b), tileops.linear(a, w, bias, "relu"), tileops.conv2d(x, cw, None, 1, 1)]
        refs = [torch.matmul(a, b), F.relu(F.linear(a, w, bias)), F.conv2d(x, cw, None, 1, 1)]
    for o, r in zip(outs, refs):
        assert o.dtype == r.dtype == dtype
        torch.testing.assert_close(o.float(), r.float(), rtol=2e-2, atol=2e-2)
    d = torch.randn(5, 5, device=device, dtype=torch.float64)
    with torch.autocast(device, dtype=dtype):
        assert tileops.matmul(d, d).dtype == torch.float64  # float64 is never cast down, as in torch


def test_build_info():
    info = tileops.build_info()
    assert info["version"] == tileops.__version__
    assert info["torch_version"].split("+")[0] == torch.__version__.split("+")[0]
    assert set(info) >= {"git_sha", "with_cuda", "cuda_version", "arch_list"}
    if HAS_CUDA:
        assert info["with_cuda"], "a GPU is visible but tileops was built without CUDA kernels"


@pytest.mark.cuda
def test_cuda_device_query():
    q = tileops._C.device_query(0)
    props = torch.cuda.get_device_properties(0)
    assert q["sm_count"] == props.multi_processor_count and q["capability"] == (props.major, props.minor)
    assert q["shared_mem_per_sm"] > 0 and q["l2_bytes"] > 0
