"""tileops.fuse_for_inference: BatchNorm folded into convs, activations and residual adds moved into
the conv/linear epilogues; same results as the model it came from, which it leaves unchanged."""
import operator

import pytest
import torch
import torch.nn.functional as F

import tileops
from conftest import DEVICES
from tileops import models
from tileops.fuse import FusedOp


def _randomize_bn(model, gen):
    """Running statistics and affine parameters away from their identity defaults, so a wrong fold shows."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=gen) * 2 - 1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) * 1.5 + 0.5)
            m.weight.data.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
            m.bias.data.copy_(torch.rand(m.bias.shape, generator=gen) - 0.5)
    return model


MODELS = {
    "resnet_bottleneck": (lambda: models.resnet((1, 1, 1), width=8, num_classes=10, small_input=True), (2, 3, 16, 16)),
    "resnet_basic": (lambda: models.resnet((1, 1), width=8, num_classes=10, small_input=True, bottleneck=False),
                     (2, 3, 12, 12)),
    "cnn": (lambda: models.cnn(), (2, 1, 8, 8)),
    "vit": (lambda: models.vit(img_size=32, patch=8, dim=32, depth=2, heads=2, num_classes=10), (2, 3, 32, 32)),
}


def _build(name, dtype, device):
    gen = torch.Generator().manual_seed(0)
    ctor, shape = MODELS[name]
    torch.manual_seed(0)
    model = _randomize_bn(ctor(), gen).to(device=device, dtype=dtype).eval()
    return model, torch.randn(shape, generator=gen).to(device=device, dtype=dtype)


def _counts(gm):
    kinds = {}
    for n in gm.graph.nodes:
        if n.op == "call_module":
            key = type(gm.get_submodule(n.target)).__name__
        else:
            key = getattr(n.target, "__name__", n.target)
        kinds[key] = kinds.get(key, 0) + 1
    return kinds


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_fused_model_matches(device, name, dtype):
    model, x = _build(name, dtype, device)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fused = tileops.fuse_for_inference(model)
    with torch.no_grad():
        ref, out = model(x), fused(x)
    tol = 1e-12 if dtype == torch.float64 else 1e-5  # issue 5's fp32 parity bound
    assert (out - ref).abs().max() <= tol * ref.abs().max()
    # the original is untouched: same module types, same values
    assert not any(isinstance(m, (FusedOp, tileops.nn.Conv2d)) for m in model.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_resnet_graph_is_fully_fused():
    """Every conv (with its BatchNorm, ReLU and the block's residual add) and the classifier is one
    FusedOp: nothing of BatchNorm, relu or add is left in the graph."""
    model, x = _build("resnet_bottleneck", torch.float32, "cpu")
    fused = tileops.fuse_for_inference(model)
    kinds = _counts(fused)
    convs = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    assert kinds.get("FusedOp") == convs + 1
    assert not {"BatchNorm2d", "ReLU", "relu", "add"} & set(kinds)
    ops = [fused.get_submodule(n.target).op for n in fused.graph.nodes if n.op == "call_module"]
    with_residual = [n for n in fused.graph.nodes if n.op == "call_module" and len(n.args) == 2]
    assert len(with_residual) == 3  # one per bottleneck block
    assert all(fused.get_submodule(n.target).op.activation == "relu" for n in with_residual)
    assert all(op.bias is not None for op in ops)  # BatchNorm's shift became the conv's bias


def test_vit_graph_fuses_gelu_and_residuals():
    model, x = _build("vit", torch.float32, "cpu")
    fused = tileops.fuse_for_inference(model)
    calls = [(fused.get_submodule(n.target).op.activation, len(n.args)) for n in fused.graph.nodes
             if n.op == "call_module" and isinstance(fused.get_submodule(n.target), FusedOp)]
    assert calls.count(("gelu", 1)) == 2  # fc1 + GELU in each of the 2 blocks
    assert calls.count(("none", 2)) == 4  # attention proj and fc2, each with the residual stream
    assert _counts(fused).get("GELU") is None


class _Odd(torch.nn.Module):
    """Patterns that must not fuse (or must fall back at run time) and still compute the same."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 6)
        self.fc2 = torch.nn.Linear(6, 6)
        self.shift = torch.nn.Parameter(torch.randn(6))

    def forward(self, x):
        y = self.conv(x)
        z = self.bn(y) + y  # conv output used twice: no fold
        t = z.mean((2, 3))
        u = F.gelu(self.fc(t), approximate="tanh")  # tanh GELU: not tileops' gelu, left alone
        v = self.fc2(u) + self.shift  # broadcast residual: falls back at run time
        return operator.add(torch.relu(v), 1.0)


def test_unfusable_patterns_stay_correct():
    torch.manual_seed(0)
    model = _randomize_bn(_Odd(), torch.Generator().manual_seed(1)).double().eval()
    x = torch.randn(3, 4, 5, 5, dtype=torch.float64)
    fused = tileops.fuse_for_inference(model)
    kinds = _counts(fused)
    assert kinds.get("BatchNorm2d") == 1 and kinds.get("gelu") == 1
    fc2 = [n for n in fused.graph.nodes if n.op == "call_module" and len(n.args) == 2]
    assert len(fc2) == 1 and fused.get_submodule(fc2[0].target).op.activation == "relu"
    with torch.no_grad():
        torch.testing.assert_close(fused(x), model(x), rtol=1e-12, atol=1e-12)


def test_autocast_float32_residual_is_not_fused_into_bf16():
    """Under bf16 autocast a ViT's residual stream is float32: the fused op must not round it to
    bf16; the run-time check sends it to the separate add, as the original does."""
    model, x = _build("vit", torch.float32, "cpu")
    conv = tileops.convert(_build("vit", torch.float32, "cpu")[0])
    fused = tileops.fuse_for_inference(model)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out, ref = fused(x), conv(x)
    assert out.dtype == ref.dtype
    torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=2e-2)


def test_training_model_is_refused():
    with pytest.raises(ValueError, match="expected a model in eval mode"):
        tileops.fuse_for_inference(models.cnn().train())


def test_fused_model_compiles_fullgraph():
    model, x = _build("resnet_bottleneck", torch.float32, "cpu")
    fused = tileops.fuse_for_inference(model)
    compiled = torch.compile(fused, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), fused(x), rtol=1e-6, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["resnet_bottleneck", "vit"])
def test_fused_model_bf16_channels_last_cuda(name):
    """The benchmark's setting: bf16 autocast, channels_last for the CNN, against the stock model."""
    model, x = _build(name, torch.float32, "cuda")
    if name.startswith("resnet"):
        model, x = model.to(memory_format=torch.channels_last), x.to(memory_format=torch.channels_last)
    fused = tileops.fuse_for_inference(model)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        out, ref = fused(x), model(x)
    torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=2e-2 * ref.abs().max().item())


class _Doubled(torch.nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


def test_subclass_with_own_forward_is_left_alone():
    """As convert(): only exact nn.Linear / nn.Conv2d (and tileops') are replaced; a subclass keeps its
    forward, and what follows it is not fused into it."""
    model = torch.nn.Sequential(_Doubled(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)).eval()
    fused = tileops.fuse_for_inference(model)
    assert isinstance(fused.get_submodule("0"), _Doubled) and _counts(fused).get("ReLU") == 1
    x = torch.randn(5, 4)
    with torch.no_grad():
        torch.testing.assert_close(fused(x), model(x))


def test_untraceable_model_names_the_cause():
    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x) if x.sum() > 0 else x

    with pytest.raises(RuntimeError, match="torch.fx could not trace Branchy"):
        tileops.fuse_for_inference(Branchy().eval())


@pytest.mark.parametrize("padding", ["same", "valid", 1])
@pytest.mark.parametrize("unbatched", [False, True])
def test_conv_residual_shapes(padding, unbatched):
    """The run-time fit check computes the conv's output shape for every padding form and for 3-D
    input: a fitting residual is fused (no fallback), the result is the original's."""
    conv = torch.nn.Conv2d(4, 4, 3, padding=padding).double().eval()

    class Res(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, x, r):
            return torch.relu(self.conv(x) + r)

    model = Res().eval()
    x = torch.randn((2, 4, 7, 6) if not unbatched else (4, 7, 6), dtype=torch.float64)
    r = torch.randn_like(conv(x))
    fused = tileops.fuse_for_inference(model)
    op = [m for m in fused.modules() if isinstance(m, FusedOp)]
    assert len(op) == 1 and op[0]._fits(x, r)
    with torch.no_grad():
        torch.testing.assert_close(fused(x, r), model(x, r), rtol=1e-12, atol=1e-12)
