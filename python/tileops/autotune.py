"""Autotuning: pick each kernel's best config by timing, once per problem class, and cache it.

Some tileops kernels have several configurations (tile widths, split-K factors...). By default
tileops picks one with a fixed heuristic, so runs are deterministic and nothing is timed. With
autotuning on, the first call of each problem class times every candidate config on the GPU
(CUDA events on the current stream: one warm-up, median of 5 launches) and keeps the fastest; the
choice is remembered in memory and in a JSON file and reused by every later call and process,
like ``torch.backends.cudnn.benchmark``::

    import tileops
    tileops.autotune.enable()                  # or TILEOPS_AUTOTUNE=1 in the environment
    y = tileops.matmul(a, b)                   # first call of this class: times the candidates
    y = tileops.matmul(a, b)                   # cached: no timing
    with tileops.autotune.enabled(False):      # the heuristic again, in this block
        ...
    tileops.autotune.pin("matmul_sm90", "bn128")   # force a config (also with autotuning off)
    tileops.autotune.candidates("matmul_sm90")     # the configs a pin may name
    tileops.autotune.entries()                 # {"<gpu> :: <op key>": "<config>", ...}
    tileops.autotune.clear()                   # forget everything, in memory and on disk

A problem class is an op key ``family|dtype|shape class|layout`` on one device. The family names
one kernel call site with its list of candidates; the shape class rounds each of M, N, K (and the
batch, when more than 1) up to a power of two (see :func:`shape_class`). The disk cache key adds the
GPU name, compute capability, SM count and the tileops version and git sha, so a choice made on
another GPU or by another build is never reused.

Timing details: it happens on a cache miss only, synchronizes the host with the stream once per
candidate, and runs the real kernels on the real inputs and output (harmless: every candidate
computes the same result). It never happens while the current stream is capturing a CUDA graph: the
cached choice, else the heuristic, is used there, so warm up (with autotuning on) before capturing.
A candidate replaces the heuristic only when it is more than 2% faster. The mode and the pins are
process-wide, not per thread.

Cache file: ``$TILEOPS_CACHE_DIR/autotune.json``, else ``$XDG_CACHE_HOME/tileops/autotune.json``,
else ``~/.cache/tileops/autotune.json`` (see :func:`cache_path`). It is written atomically with each
new choice, merged with what other processes wrote; a corrupt file or one from another format
version is ignored with a warning and replaced. Environment: ``TILEOPS_AUTOTUNE=1`` starts with
autotuning on, ``TILEOPS_AUTOTUNE_PIN="pattern=config,..."`` sets pins,
``TILEOPS_AUTOTUNE_VERBOSE=1`` prints every measurement to stderr.
"""
import contextlib
from typing import Dict, Iterator, List, Optional

from . import _C

__all__ = [
    "cache_path",
    "candidates",
    "clear",
    "disable",
    "enable",
    "enabled",
    "entries",
    "families",
    "is_enabled",
    "pin",
    "pinned",
    "pins",
    "reload",
    "shape_class",
    "unpin",
]


def enable() -> None:
    """Turn autotuning on: time the candidates of each new problem class, reuse cached choices."""
    _C._autotune_set_enabled(True)


def disable() -> None:
    """Turn autotuning off (the default): every call site uses its heuristic; pins still apply."""
    _C._autotune_set_enabled(False)


def is_enabled() -> bool:
    """Whether autotuning is on."""
    return bool(_C._autotune_enabled())


@contextlib.contextmanager
def enabled(flag: bool = True) -> Iterator[None]:
    """Context manager: autotuning on (or off, with ``flag=False``) inside the block, then as it was.

    The mode is process-wide: other threads see it too while the block runs."""
    old = is_enabled()
    _C._autotune_set_enabled(bool(flag))
    try:
        yield
    finally:
        _C._autotune_set_enabled(old)


def clear(memory: bool = True, disk: bool = True) -> None:
    """Forget cached choices. ``memory``: in this process (the file is not read again, so each
    class is timed again and its new choice overwrites the old one on disk); ``disk``: delete the
    cache file (:func:`cache_path`), which holds the choices of every GPU and build."""
    _C._autotune_clear(bool(memory), bool(disk))


def reload() -> None:
    """Drop the choices held in memory and read the cache file again."""
    _C._autotune_reload()


def pin(pattern: str, candidate: str) -> None:
    """Force ``candidate`` wherever ``pattern`` matches, whether autotuning is on or off.

    ``pattern`` matches an op key when it equals its family (``"matmul_sm90"``) or glob-matches
    the whole key (``"matmul_sm90|BFloat16|*"``; ``*`` any run of characters, ``?`` one). The most
    recent matching pin wins; pinning a pattern again replaces it. A pattern that is a family
    (:func:`families`) and a candidate it does not have raise a ValueError here; under a glob, a
    matching call site without ``candidate`` raises a RuntimeError that lists its candidates."""
    if not isinstance(pattern, str) or not isinstance(candidate, str) or not pattern or not candidate:
        raise ValueError(
            "tileops.autotune.pin: pattern and candidate must be non-empty strings, got %r, %r" % (pattern, candidate)
        )
    _C._autotune_pin(pattern, candidate)


def unpin(pattern: Optional[str] = None) -> None:
    """Remove the pin of ``pattern`` (no error when there is none), or every pin when None."""
    _C._autotune_unpin(pattern)


def pins() -> Dict[str, str]:
    """The pins in force, pattern -> candidate, oldest first."""
    return dict(_C._autotune_pins())


@contextlib.contextmanager
def pinned(pattern: str, candidate: str) -> Iterator[None]:
    """Context manager: :func:`pin` inside the block, then the pins as they were."""
    old = pins()
    pin(pattern, candidate)
    try:
        yield
    finally:
        unpin(pattern)
        if pattern in old:
            pin(pattern, old[pattern])


def cache_path() -> Optional[str]:
    """The cache file used now (it may not exist yet), or None where no directory is known (no
    ``$TILEOPS_CACHE_DIR``, ``$XDG_CACHE_HOME`` or ``$HOME``): choices then stay in memory."""
    return _C._autotune_cache_path() or None


def entries() -> Dict[str, str]:
    """The cached choices: ``"<device key> :: <op key>"`` -> candidate name, for every GPU and
    build in the cache file plus what this process measured."""
    return dict(_C._autotune_entries())


def families() -> List[str]:
    """The autotuned kernel families of this build, sorted (none in a build without CUDA)."""
    return list(_C._autotune_families())


def candidates(family: str) -> List[str]:
    """The candidate configs of ``family``, in its own order: the names :func:`pin` takes.
    RuntimeError for a family this build does not have."""
    return list(_C._autotune_candidates(family))


def shape_class(M: int, N: int, K: int, batch: int = 1) -> str:
    """The shape class of a GEMM-shaped problem, as used in op keys: each size rounded up to a
    power of two (0 and 1 stay), e.g. ``shape_class(4095, 4097, 4093) == "m4096_n8192_k4096"``."""
    return _C._autotune_shape_class(int(M), int(N), int(K), int(batch))
