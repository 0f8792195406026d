"""Shared fixtures. CUDA tests carry the `cuda` mark and skip, with a reason, only where no
GPU is visible; with TILEOPS_REQUIRE_CUDA=1 (the GPU script) a missing GPU is an error.
Tests that need two GPUs also carry the `multigpu` mark: they skip where fewer than two are
visible, and that one skip stays a skip under TILEOPS_REQUIRE_CUDA=1 (a one-GPU machine)."""
import os
import tempfile

import pytest
import torch

# autotune choices made by tests (TILEOPS_AUTOTUNE=1) never land in the user's cache
os.environ.setdefault("TILEOPS_CACHE_DIR", tempfile.mkdtemp(prefix="tileops-test-cache-"))

HAS_CUDA = torch.cuda.is_available()
REQUIRE_CUDA = os.environ.get("TILEOPS_REQUIRE_CUDA", "0") == "1"
N_GPUS = torch.cuda.device_count() if HAS_CUDA else 0
# scripts/device/junit_summary.py recognises this skip by its reason's first words
MULTIGPU_SKIP = "needs 2 CUDA GPUs (torch.cuda.device_count() is %d)" % N_GPUS

# Device parameters: use as @pytest.mark.parametrize("device", DEVICES).
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]

# (device, dtype kind) pairs; "tf32" is a CUDA mode (the CPU path is always full fp32).
_KINDS = ["float64", "float32", "tf32", "float16", "bfloat16"]
DEVICE_KINDS = [("cpu", k) for k in _KINDS if k != "tf32"] + [
    pytest.param("cuda", k, marks=pytest.mark.cuda) for k in _KINDS
]


def pytest_configure(config):
    if REQUIRE_CUDA and not HAS_CUDA:
        raise pytest.UsageError("TILEOPS_REQUIRE_CUDA=1 but torch.cuda.is_available() is False")


def _shard():
    """TILEOPS_SHARD="i/n" (0 <= i < n): this process runs every n-th collected test from the i-th on,
    so n processes, one a shard, run the suite between them at once (scripts/device/gpu_focus.sh's
    step `suite`: on one GPU the tests mostly wait on the host, which has cores to spare). Round-robin
    over the collected order spreads each test's parametrizations over the shards."""
    spec = os.environ.get("TILEOPS_SHARD", "")
    if not spec:
        return None
    try:
        i, n = (int(v) for v in spec.split("/"))
    except ValueError:
        i, n = -1, 0
    if not 0 <= i < n:
        raise pytest.UsageError("TILEOPS_SHARD=%r: expected i/n with 0 <= i < n, e.g. 0/4" % spec)
    return i, n


def pytest_collection_modifyitems(config, items):
    shard = _shard()
    if shard is not None:
        i, n = shard
        keep = items[i::n]
        config.hook.pytest_deselected(items=[t for k, t in enumerate(items) if k % n != i])
        items[:] = keep
    no_gpu = pytest.mark.skip(reason="no CUDA GPU visible (torch.cuda.is_available() is False)")
    few_gpus = pytest.mark.skip(reason=MULTIGPU_SKIP)
    for item in items:
        if "cuda" in item.keywords and not HAS_CUDA:
            item.add_marker(no_gpu)
        elif "multigpu" in item.keywords and N_GPUS < 2:
            item.add_marker(few_gpus)
            item._tileops_few_gpus = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Under TILEOPS_REQUIRE_CUDA=1 a CUDA test may not skip for any reason but one: a
    # `multigpu` test on a machine with one GPU, skipped by the mark added above.
    outcome = yield
    rep = outcome.get_result()
    if REQUIRE_CUDA and rep.skipped and ("cuda" in item.keywords or "multigpu" in item.keywords):
        if getattr(item, "_tileops_few_gpus", False) and MULTIGPU_SKIP in str(rep.longrepr):
            return
        rep.outcome = "failed"
        rep.longrepr = "CUDA test skipped under TILEOPS_REQUIRE_CUDA=1: %s" % (rep.longrepr,)


@pytest.fixture(autouse=True)
def _strict_fp32():
    """Every test starts with TF32 off; tests that want TF32 turn it on themselves."""
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old
