"""Reference checks: float64 references, poisoned outputs, fresh random inputs."""
import contextlib
import os

import torch

# Per-element bound |out - ref| <= TOL * (|A| |B| + |bias|) (the GEMM error bound's form),
# and the relative norm ||out - ref|| / ||ref|| under NORM_TOL.
TOL = {"float64": 1e-12, "float32": 1e-5, "tf32": 2e-3, "float16": 2e-3, "bfloat16": 1e-2}
# absolute floor: float16 has subnormals below 6e-5 with a fixed spacing of 2^-24
ATOL = {"float16": 2.0 ** -24}
NORM_TOL = {"float64": 1e-12, "float32": 1e-5, "tf32": 1e-3, "float16": 1e-2, "bfloat16": 1e-2}
DTYPES = {"float64": torch.float64, "float32": torch.float32, "tf32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}


def fresh_generator():
    """A generator seeded from the OS: new inputs every run; the seed goes into messages.
    TILEOPS_TEST_SEED=<seed from a message> replays that run's inputs."""
    seed = int(os.environ["TILEOPS_TEST_SEED"]) if os.environ.get("TILEOPS_TEST_SEED") else int.from_bytes(
        os.urandom(4), "little")
    return torch.Generator().manual_seed(seed), seed


def randn(shape, dtype, device, gen):
    # drawn on the CPU in float64 so every device and dtype sees the same values for a seed
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype=dtype, device=device)


@contextlib.contextmanager
def tf32(enabled):
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def poison(device, nbytes):
    """Leave a freed NaN block of `nbytes` where the next allocation of that size will land
    (the CUDA caching allocator hands back the same block), so unwritten outputs read NaN."""
    n = max(1, nbytes // 4)
    block = torch.full((n,), float("nan"), dtype=torch.float32, device=device)
    del block


def cuda_kernel_counts(fn):
    """fn()'s result and {name: launches} of the CUDA kernels it ran (torch.profiler)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    return out, {e.key: e.count for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA}


def cuda_kernels(fn):
    """fn()'s result and the names of the CUDA kernels it ran, for the tests of which kernel
    family a problem takes."""
    out, counts = cuda_kernel_counts(fn)
    return out, list(counts)


def family(name):
    """The candidates of autotune family `name` as the extension lists them (autotune.candidates),
    to parametrize the pinned-config tests from that one list: [] in a build without CUDA, whose
    CUDA tests skip (test_autotune checks that a CUDA build has every family)."""
    from tileops import autotune

    try:
        return autotune.candidates(name)
    except RuntimeError:
        return []


def persistent(names):
    """The persistent Hopper configs among a family's candidates (ping-pong and cooperative)."""
    return [c for c in names if c.startswith(("pp", "coop"))]


def run_poisoned(fn, out_numel, dtype, device):
    poison(device, out_numel * torch.tensor([], dtype=dtype).element_size())
    return fn()


def check(out, ref, mag, kind, what="", chained=1):
    """out: result; ref: float64 reference; mag: float64 magnitude bound (|A||B| + |bias|).
    chained: how many rounded GEMMs the result went through in sequence (a gelu/silu backward
    recomputes the pre-activation with one more forward, whose rounding reaches the gradient
    through act'); the relative-norm bound grows with it."""
    assert out.shape == ref.shape, "%s: shape %s, expected %s" % (what, tuple(out.shape), tuple(ref.shape))
    o = out.detach().double().cpu()
    ref, mag = ref.detach().double().cpu(), mag.detach().double().cpu()
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(o), finite) or not finite.all(), "%s: non-finite output (unwritten or overflow)" % what
    if o.numel() == 0:
        return
    err = (o - ref).abs()
    bound = TOL[kind] * mag + ATOL.get(kind, 1e-30)
    bad = err > bound
    assert not bad.any(), "%s: %d of %d elements out of bound; worst err %.3g at bound %.3g" % (
        what, int(bad.sum()), o.numel(), float(err[bad].max()), float(bound[bad][err[bad].argmax()]))
    if o.numel() < 64:  # the relative norm is a statistic; on a handful of elements the bound above decides
        return
    # relative to ||ref||; an activation can squash ref to ~0, so never below 1e-3 ||mag||
    rn = float((o - ref).norm() / torch.maximum(ref.norm(), 1e-3 * mag.norm()).clamp_min(1e-300))
    assert rn <= chained * NORM_TOL[kind], "%s: relative error %.3g > %.3g" % (what, rn, chained * NORM_TOL[kind])
