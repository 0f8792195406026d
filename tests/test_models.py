"""Whole models converted with tileops.convert against the same model unconverted (same weights,
same inputs): fp32 and autocast parity of outputs and of every parameter's gradient, torch.compile
(no graph breaks; default / max-autotune / reduce-overhead), torch.export, channels_last,
no_grad / inference_mode, and profiler traces that name the tileops ops.

CPU variants are tiny (CI: 2 cores, the CPU GEMM is a plain blocked loop); on CUDA the parity
tests run the full ViT-S/16 and ResNet-50 at batch 2. Relative error is ||a - b|| / ||b|| over a
whole output or gradient, in float64.

Conditioning: a randomly initialised deep BatchNorm net in train mode is chaotic (batch statistics
amplify perturbations with depth): measured on CPU, torch's own fp32 ResNet-50 at batch 2 in train
mode is 1.5e-5 off float64 in the output and 3% in gradients. So the full-size ResNet-50 is compared
in eval mode (running statistics; fp32 vs float64 there: 3e-7 output), the smaller models in train
mode. ReLU / max-pool branch flips make fp32 gradients of ReLU nets agree only to ~1% (GRAD_TOL);
the exact check of every gradient is the float64 test.
"""
import contextlib
import copy
import math
import os
import re

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

import tileops
import tileops.nn as tnn
from conftest import DEVICES
from tileops import models
from utils import fresh_generator

FWD_TOL = 1e-5  # fp32 forward, TF32 off (the number)
AUTOCAST_TOL = 2e-2  # autocast forward (the number)
F64_TOL = 1e-9  # float64 outputs and gradients: the exact check of the whole backward graph
# fp32 parameter gradients. The ViT is smooth (GELU, LayerNorm): 1e-4. In ReLU / max-pool nets a
# pre-activation within fp32 rounding of zero takes the other branch in one of the two models
# (different summation orders) and moves upstream gradients by up to ~1% (measured on the CPU:
# torch against torch-in-float64 shows the same); there the float64 test is the tight check and
# fp32 gradients must only agree to 5e-2, which a wrong backward (error ~1) still fails.
GRAD_TOL = {"smooth": 1e-4, "relu": 5e-2}
SMOOTH = ("vit", "whisper")
# autocast gradients: within 2x torch's error against float64, plus this floor. In a ReLU net one
# pre-activation that rounds to the other side of zero in one model and not the other moves
# gradients by several percent: cnn fp16 on the CPU, seed 65174373, tileops's forward as close to
# float64 as torch's (the last ReLU's output 8.3e-4 off, torch's 8.4e-4) but 2 of its 2048 values
# on the other side of zero against torch's 1: gradients up to 7.4% off float64, torch's at most
# 0.9%. A wrong backward (error ~1) still fails 1e-1.
AUTOCAST_GRAD_FLOOR = {"smooth": 1e-2, "relu": 1e-1}


def smoothness(name):
    return "smooth" if name in SMOOTH else "relu"


def grad_tol(name):
    return GRAD_TOL[smoothness(name)]


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    d, n = float((a - b).norm()), float(b.norm())
    return d / n if n > 0 else d


# name -> {device: (constructor, input shape, train mode)}
SPECS = {
    "vit": {
        "cpu": (lambda: models.vit(img_size=32, patch=8, dim=32, depth=2, heads=2, num_classes=10), (4, 3, 32, 32), True),
        "cuda": (models.vit_s16, (2, 3, 224, 224), True),
    },
    "resnet": {
        "cpu": (lambda: models.resnet((1, 1), width=8, num_classes=10, small_input=True), (4, 3, 32, 32), True),
        "cuda": (models.resnet50, (2, 3, 224, 224), False),
    },
    "resnet_train": {  # a shallower ResNet in train mode (batch statistics) on the GPU too
        "cpu": (lambda: models.resnet((1, 1), width=8, num_classes=10, bottleneck=False, small_input=True), (4, 3, 16, 16), True),
        "cuda": (lambda: models.resnet((1, 1, 1, 1), width=32, num_classes=100), (8, 3, 64, 64), True),
    },
    "cnn": {
        "cpu": (lambda: models.cnn(10, 3, 8), (4, 3, 16, 16), True),
        "cuda": (lambda: models.cnn(10, 3, 32), (16, 3, 32, 32), True),
    },
    "resnext": {  # grouped 3x3 convs (4 channels a group on the CPU; ResNeXt-50 32x4d on CUDA, eval mode)
        "cpu": (lambda: models.resnet((1, 1), width=16, num_classes=10, small_input=True, groups=4,
                                      width_per_group=16), (4, 3, 16, 16), True),
        "cuda": (lambda: models.resnext50_32x4d(num_classes=100), (2, 3, 224, 224), False),
    },
    "regnet": {  # grouped convs of group width 8, squeeze-and-excitation; RegNetY-400MF on CUDA, eval mode
        "cpu": (lambda: models.regnet((1, 1), (16, 32), group_width=8, stem=8, num_classes=10), (4, 3, 16, 16), True),
        "cuda": (lambda: models.regnet_y_400mf(num_classes=100), (4, 3, 224, 224), False),
    },
    "r3d": {  # conv3d: torchvision's r3d_18 layout; on CUDA the whole r3d_18 at 2 clips of 16x112^2, eval mode
        "cpu": (lambda: models.r3d((1, 1), width=8, num_classes=10), (2, 3, 4, 16, 16), True),
        "cuda": (lambda: models.r3d_18(num_classes=100), (2, 3, 16, 112, 112), False),
    },
    "whisper": {  # conv1d: Whisper's encoder front end; on CUDA whisper-tiny's encoder over 30 s of audio
        "cpu": (lambda: models.whisper_encoder(n_mels=16, n_ctx=16, dim=32, depth=2, heads=2, num_classes=10),
                (4, 16, 32), True),
        "cuda": (lambda: models.whisper_encoder(num_classes=100), (2, 80, 3000), True),
    },
}
# Shallow variants for torch.compile (compile time grows with the graph, not the tensors).
COMPILE_SPECS = {
    "vit": {
        "cpu": SPECS["vit"]["cpu"],
        "cuda": (lambda: models.vit(img_size=64, patch=16, dim=384, depth=2, heads=6, num_classes=100), (8, 3, 64, 64), True),
    },
    "resnet": {
        "cpu": SPECS["resnet"]["cpu"],
        "cuda": (lambda: models.resnet((1, 1), width=32, num_classes=100, small_input=True), (8, 3, 32, 32), True),
    },
}


def build(spec, device, seed, memory_format=torch.contiguous_format, train=None):
    """(reference, converted deep copy, input, labels); the same weights in both. train=None: the
    spec's mode (BatchNorm batch statistics or running statistics)."""
    make, shape, spec_train = spec[device]
    train = spec_train if train is None else train
    torch.manual_seed(seed)
    ref = make().to(device=device, memory_format=memory_format).train(train)
    tile = tileops.convert(copy.deepcopy(ref))
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=gen).to(device=device, memory_format=memory_format)
    labels = torch.randint(0, ref_classes(ref), (shape[0],), generator=gen).to(device)
    return ref, tile, x, labels


def ref_classes(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1].out_features


def step(model, x, labels, autocast_dtype=None, upstream=None):
    """Forward (under autocast if asked) and backward of cross-entropy, or of `upstream` as the
    output's gradient where given; returns the output."""
    ctx = torch.autocast(x.device.type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    with ctx:
        out = model(x)
    if upstream is None:
        F.cross_entropy(out.float(), labels).backward()
    else:
        o = out if out.dtype == torch.float64 else out.float()
        o.backward(upstream.to(o))
    return out


def fixed_upstream(out_shape, seed):
    """An output gradient that depends on the seed only (not on either model's rounding)."""
    return torch.randn(out_shape, generator=torch.Generator().manual_seed(seed ^ 0x5EED), dtype=torch.float64)


def grads(model):
    return {n: p.grad for n, p in model.named_parameters()}


def autocast_dtypes(device):
    """The autocast dtypes torch supports on `device` (fp16 on CPU depends on the torch version)."""
    out = []
    for dt in (torch.bfloat16, torch.float16):
        try:
            with torch.autocast(device, dtype=dt):
                ok = F.linear(torch.ones(2, 2, device=device), torch.ones(2, 2, device=device)).dtype == dt
        except (RuntimeError, AssertionError):
            ok = False
        if ok or device == "cuda":
            out.append(dt)
    return out


def test_full_size_shapes_and_convert_swaps_everything():
    with torch.device("meta"):
        vit, rn = models.vit_s16(), models.resnet50()
    assert sum(p.numel() for p in vit.parameters()) == 22_050_664  # timm vit_small_patch16_224
    assert sum(p.numel() for p in rn.parameters()) == 25_557_032  # torchvision resnet50
    for model, n_linear, n_conv in ((vit, 12 * 4 + 1, 1), (rn, 1, 53)):
        tileops.convert(model)
        kinds = [type(m) for m in model.modules()]
        assert kinds.count(tnn.Linear) == n_linear and kinds.count(tnn.Conv2d) == n_conv
        assert torch.nn.Linear not in kinds and torch.nn.Conv2d not in kinds
    with pytest.raises(ValueError, match="multiple of patch"):
        models.vit(img_size=30, patch=8)
    with torch.device("meta"):
        video, audio = models.r3d_18(), models.whisper_encoder()
        rx, rg = models.resnext50_32x4d(), models.regnet_y_400mf()
    assert sum(p.numel() for p in video.parameters()) == 33_371_472  # torchvision r3d_18
    assert sum(p.numel() for p in rx.parameters()) == 25_028_904  # torchvision resnext50_32x4d
    assert sum(p.numel() for p in rg.parameters()) == 4_344_144  # torchvision regnet_y_400mf
    for model, n_conv, groups in ((rx, 53, 32), (rg, 85, None)):  # RegNet: 16 blocks of 5, 4 projections, the stem
        tileops.convert(model)
        convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        assert len(convs) == n_conv and all(type(m) is tnn.Conv2d for m in convs)
        assert any(1 < m.groups < m.in_channels for m in convs) and (groups is None or max(m.groups for m in convs) == groups)
    for model, kind, n in ((video, tnn.Conv3d, 20), (audio, tnn.Conv1d, 2)):
        tileops.convert(model)
        kinds = [type(m) for m in model.modules()]
        assert kinds.count(kind) == n, kinds
        assert not {torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv3d} & set(kinds)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SPECS))
def test_fp32_parity_forward_and_gradients(device, name):
    _, seed = fresh_generator()
    ref, tile, x, labels = build(SPECS[name], device, seed)
    out_ref, out = step(ref, x, labels), step(tile, x, labels)
    assert out.dtype == torch.float32
    e = rel(out, out_ref)
    assert e <= FWD_TOL, "%s seed %d: output relative error %.3g" % (name, seed, e)
    check_grads(tile, ref, grad_tol(name), "%s seed %d" % (name, seed))


def check_grads(model, ref, tol, what):
    g_ref = grads(ref)
    for n, g in grads(model).items():
        assert g is not None and g_ref[n] is not None, "%s: no gradient for %s" % (what, n)
        e = rel(g, g_ref[n])
        assert e <= tol, "%s: gradient of %s relative error %.3g > %.3g" % (what, n, e, tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SPECS))
def test_float64_parity_forward_and_gradients(device, name):
    _, seed = fresh_generator()
    ref, tile, x, labels = build(SPECS[name], device, seed)
    ref, tile, x = ref.double(), tile.double(), x.double()
    out_ref, out = step(ref, x, labels), step(tile, x, labels)
    assert out.dtype == torch.float64
    e = rel(out, out_ref)
    assert e <= F64_TOL, "%s seed %d: output relative error %.3g" % (name, seed, e)
    check_grads(tile, ref, F64_TOL, "%s seed %d float64" % (name, seed))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_llama_parity(device, dtype):
    """A Llama-style decoder (grouped-query attention, SwiGLU, RMSNorm, tied to nothing): every
    nn.Linear swapped; logits and every parameter's gradient as the stock model's (float64: to
    rounding; fp32: FWD_TOL and the smooth GRAD_TOL)."""
    _, seed = fresh_generator()
    cfg = (dict(vocab=64, dim=32, depth=2, heads=4, kv_heads=2, hidden=48, max_len=32) if device == "cpu" else
           dict(vocab=4096, dim=512, depth=2, heads=8, kv_heads=2, hidden=1408, max_len=256))
    torch.manual_seed(seed)
    ref = models.llama(**cfg).to(device=device, dtype=dtype)
    tile = tileops.convert(copy.deepcopy(ref))
    assert not any(type(m) is torch.nn.Linear for m in tile.modules())
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, cfg["vocab"], (2, cfg["max_len"] // 2), generator=gen).to(device)
    upstream = torch.randn((*tokens.shape, cfg["vocab"]), generator=gen, dtype=torch.float64).to(device)
    outs = []
    for m in (ref, tile):
        out = m(tokens)
        out.backward(upstream.to(out.dtype))
        outs.append(out)
    tol, gtol = (F64_TOL, F64_TOL) if dtype == torch.float64 else (FWD_TOL, GRAD_TOL["smooth"])
    e = rel(outs[1], outs[0])
    assert e <= tol, "llama seed %d: logits relative error %.3g" % (seed, e)
    check_grads(tile, ref, gtol, "llama seed %d %s" % (seed, dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_autocast_parity(device, name, dtype):
    if dtype not in autocast_dtypes(device):
        pytest.skip("torch %s has no %s autocast on %s" % (torch.__version__, dtype, device))
    _, seed = fresh_generator()
    # eval mode: in train mode BatchNorm's chaos (see the top) turns half-precision rounding into
    # gradients whose error against float64 swings several-fold from seed to seed
    ref, tile, x, labels = build(SPECS[name], device, seed, train=False)
    exact = copy.deepcopy(ref).double()
    # The backward starts from one fixed output gradient in all three models, not from each
    # model's own cross-entropy: that gradient is softmax(logits) - onehot, evaluated at the
    # model's own half-precision logits, and for some seeds a few large logits make it swing with
    # their last rounding. Measured on ResNet-50 bf16 (results/h100/5558dcf/a/autocast_diag.log,
    # in git at 1f54b6f):
    # features equally far from float64 in both models (0.4%), yet fc.weight's gradient 2.3% off
    # for tileops and 0.45% for torch on one seed, 2.9% for torch and 0.8% for tileops on another.
    upstream = fixed_upstream((x.shape[0], ref_classes(ref)), seed)
    step(exact, x.double(), labels, upstream=upstream)
    out_ref, out = step(ref, x, labels, dtype, upstream), step(tile, x, labels, dtype, upstream)
    assert out.dtype == out_ref.dtype == dtype
    e = rel(out, out_ref)
    assert e <= AUTOCAST_TOL, "%s seed %d: output relative error %.3g" % (name, seed, e)
    # Half-precision gradients of a random-init net are themselves noisy (torch's own bf16
    # ResNet-50 gradients are ~5% off float64 in eval mode), so each gradient is held to the
    # accuracy torch reaches on the same model: within 2x torch's error against float64.
    g_ref, g_exact = grads(ref), grads(exact)
    for n, g in grads(tile).items():
        assert g is not None and torch.isfinite(g).all(), "%s: gradient of %s missing or not finite" % (name, n)
        e_tile, e_torch = rel(g, g_exact[n]), rel(g_ref[n], g_exact[n])
        # torch 2.11's own CPU bf16 conv3d weight gradient is sometimes not finite (x (2, 16, 2, 4, 4),
        # 3x3x3 padding 1 under autocast: 6 of 40 draws): tileops is then held to the floor alone
        e_torch = e_torch if math.isfinite(e_torch) else 0.0
        floor = AUTOCAST_GRAD_FLOOR[smoothness(name)]
        assert e_tile <= 2 * e_torch + floor, "%s seed %d: gradient of %s is %.3g off float64, torch's %.3g" % (
            name, seed, n, e_tile, e_torch)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["resnet", "cnn"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_channels_last(device, name, dtype):
    _, seed = fresh_generator()
    ref, tile, x, labels = build(SPECS[name], device, seed, memory_format=torch.channels_last)
    formats = []
    for m in tile.modules():
        if isinstance(m, tnn.Conv2d):
            m.register_forward_hook(lambda mod, inp, out: formats.append(out.is_contiguous(memory_format=torch.channels_last)))
    autocast_dtype = None if dtype == torch.float32 else dtype
    out_ref, out = step(ref, x, labels, autocast_dtype), step(tile, x, labels, autocast_dtype)
    assert formats and all(formats), "tileops conv outputs must stay channels_last"
    e = rel(out, out_ref)
    assert e <= (FWD_TOL if autocast_dtype is None else AUTOCAST_TOL), "%s seed %d: relative error %.3g" % (name, seed, e)
    if autocast_dtype is None:
        check_grads(tile, ref, grad_tol(name), "%s seed %d channels_last" % (name, seed))
        g_ref = grads(ref)
        for n, g in grads(tile).items():
            if g.dim() == 4:  # weight gradients come back in the weight's format, as torch's do
                assert g.is_contiguous(memory_format=torch.channels_last) == g_ref[n].is_contiguous(
                    memory_format=torch.channels_last), n


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["vit", "resnet"])
def test_no_grad_and_inference_mode(device, name):
    _, seed = fresh_generator()
    ref, tile, x, _ = build(SPECS[name], device, seed)
    ref.eval(), tile.eval()
    expected = ref(x)
    with_grad = tile(x)
    for ctx in (torch.no_grad, torch.inference_mode):
        with ctx():
            out = tile(x)
        assert not out.requires_grad and out.grad_fn is None
        assert rel(out, with_grad) <= 1e-6, ctx.__name__
        assert rel(out, expected) <= FWD_TOL, "%s seed %d under %s" % (name, seed, ctx.__name__)


def _explain_breaks(model, x):
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(x)
    return explanation.graph_break_count, explanation.break_reasons


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(COMPILE_SPECS))
def test_compile_training_no_graph_breaks(device, name):
    """dynamo + AOTAutograd (fake kernels, registered backward) over a whole training step;
    backend aot_eager skips code generation, so this runs in seconds on the CPU."""
    _, seed = fresh_generator()
    _, tile, x, labels = build(COMPILE_SPECS[name], device, seed)
    n, reasons = _explain_breaks(tile, x)
    assert n == 0, reasons
    eager = copy.deepcopy(tile)
    out_eager = step(eager, x, labels)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(tile, fullgraph=True, backend="aot_eager")
    out = step(compiled, x, labels)
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert rel(out, out_eager) <= FWD_TOL
    check_grads(tile, eager, grad_tol(name), "%s seed %d aot_eager" % (name, seed))


# Inductor on the CPU compiles C++ per kernel (slow on 2 cores), and max-autotune / reduce-overhead
# only change GPU code generation (GEMM templates, CUDA graphs): the CPU runs one mode on one model.
# Both GPU modes other than default use CUDA graphs (checked: no skips).
COMPILE_MODES = [("cpu", "vit", "default")] + [
    pytest.param("cuda", name, mode, marks=pytest.mark.cuda)
    for name in COMPILE_SPECS for mode in ("default", "max-autotune", "reduce-overhead")
]


@pytest.mark.parametrize("device,name,mode", COMPILE_MODES)
def test_compile_inductor_modes(device, name, mode):
    _, seed = fresh_generator()
    # A training step (forward and backward graphs) on the GPU; inference (eval, no_grad) on the CPU,
    # where a backward graph doubles the C++ to build, and for max-autotune, whose autotuning is
    # the slow part of compiling and is the same for both graphs.
    train = device == "cuda" and mode != "max-autotune"
    _, tile, x, labels = build(COMPILE_SPECS[name], device, seed, train=train)
    eager = copy.deepcopy(tile)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(tile, fullgraph=True, mode=None if mode == "default" else mode)
    outs = []
    for _ in range(2):  # CUDA graphs: the second call replays the recorded graph
        if mode != "default":
            torch.compiler.cudagraph_mark_step_begin()
        if train:
            tile.zero_grad(set_to_none=True)
            outs.append(step(compiled, x, labels).detach().clone())
        else:
            with torch.no_grad():
                outs.append(compiled(x).clone())
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    if device == "cuda" and mode != "default":  # both modes use CUDA graphs; tileops ops must be capturable
        assert counters["inductor"]["cudagraph_skips"] == 0, "CUDA graphs skipped"
    if train:
        eager_outs = []
        for _ in range(2):  # BN running stats move each step, in both copies alike
            eager.zero_grad(set_to_none=True)
            eager_outs.append(step(eager, x, labels).detach())
    else:
        with torch.no_grad():
            eager_outs = [eager(x)] * 2
    for o, e in zip(outs, eager_outs):
        assert rel(o, e) <= FWD_TOL, "%s %s seed %d: compiled vs eager %.3g" % (name, mode, seed, rel(o, e))
    if train:  # inductor's own BatchNorm / GELU code: the fp32 branch flips of the top apply
        check_grads(tile, eager, grad_tol(name), "%s %s seed %d" % (name, mode, seed))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["vit", "resnet"])
def test_export(device, name):
    _, seed = fresh_generator()
    ref, tile, x, _ = build(SPECS[name], device, seed)
    ref.eval(), tile.eval()
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(tile, (x,), dynamic_shapes={"x": {0: batch}})
    for program in (ep, ep.run_decompositions()):  # custom ops survive lowering to core ATen
        targets = {str(n.target) for n in program.graph.nodes}
        assert {"tileops.linear.default", "tileops.conv2d.default"} <= targets, sorted(targets)
    run = ep.module()
    with torch.no_grad():
        assert rel(run(x), ref(x)) <= FWD_TOL
        x1 = torch.cat([x, x[:1]])  # another batch size through the same program
        assert rel(run(x1), ref(x1)) <= FWD_TOL


@pytest.mark.parametrize("device", DEVICES)
def test_profiler_names_tileops_ops(device, tmp_path):
    _, seed = fresh_generator()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    names = set()
    for name in ("vit", "resnet"):
        _, tile, x, labels = build(SPECS[name], device, seed)
        with torch.profiler.profile(activities=activities) as prof:
            step(tile, x, labels)
        names |= {e.key for e in prof.key_averages()}
        trace = os.path.join(str(tmp_path), name + ".json")
        prof.export_chrome_trace(trace)
        with open(trace) as f:
            assert re.search(r'"name": "tileops::(linear|conv2d)"', f.read()), "no tileops op in " + trace
    expected = {"tileops::linear", "tileops::conv2d", "tileops::matmul", "tileops::_conv2d_backward"}
    assert expected <= names, sorted(n for n in names if "tileops" in n)
    if device == "cuda":  # the kernels ran on the GPU, under the op's profiler range
        assert any(e.key.startswith("tileops::") and e.device_time_total > 0 for e in prof.key_averages())
