"""Autotuning: the policy (off / pins / cache / measure), the disk cache and the Python API.

The policy and cache are checked on any machine through tileops._C._autotune_choose_for_test,
which runs the real C++ policy with fake timings. Every test uses a cache directory under
tmp_path (TILEOPS_CACHE_DIR), so the user's ~/.cache is never read or written."""
import contextlib
import json
import os
import re
import subprocess
import sys
import threading

import pytest
import torch

import tileops
from tileops import _C, autotune
from utils import check, cuda_kernel_counts, family, fresh_generator, persistent, poison, randn

NAMES = ["a", "b", "c"]
DEV = "test-device"
# family conv_fwd_sm90 (conv/conv_sm90.cu): one-tile kernels, then the persistent ones (TMA im2col loads only)
CONV_FWD_CANDIDATES = family("conv_fwd_sm90")
CONV_FWD_PERSISTENT = persistent(CONV_FWD_CANDIDATES)
# strided data gradients whose phases run in one Hopper launch (test_conv2d.CUDA_CASES)
PHASES_IN_ONE = ["resnet_3x3s2_128@56", "phases1_3x3_p0", "phases1_3x5_s2x1", "phases1_7x7", "phases1_c20",
                 "phases1_c72_k256", "phases1_dil2", "phases1_1x1_s2"]


def choose(key, times, heuristic=0, names=NAMES, **kw):
    """(index, source, number of candidates measured) for `key` with fake times in ms."""
    index, source, calls = _C._autotune_choose_for_test(key, names, heuristic, [float(t) for t in times], **kw)
    return index, source, calls


def full(key, device=DEV):
    return "%s :: %s" % (device, key)


def read_json(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """A private cache directory, autotuning off, no pins, nothing in memory; restored afterwards."""
    d = tmp_path / "cache"
    monkeypatch.setenv("TILEOPS_CACHE_DIR", str(d))
    old_on, old_pins = autotune.is_enabled(), autotune.pins()
    autotune.disable()
    autotune.unpin()
    autotune.clear(memory=True, disk=False)
    yield d
    autotune.unpin()
    for pattern, cand in old_pins.items():
        autotune.pin(pattern, cand)
    _C._autotune_set_enabled(old_on)
    autotune.clear(memory=True, disk=False)


def test_off_is_the_heuristic(cache_dir):
    assert not autotune.is_enabled()
    assert choose("fam|x", [3, 1, 2], heuristic=2) == (2, "heuristic", 0)
    assert autotune.entries() == {}
    assert not os.path.exists(autotune.cache_path())


def test_miss_measures_picks_fastest_and_stores(cache_dir):
    autotune.enable()
    assert choose("fam|x", [3, 1, 2]) == (1, "measured", 3)
    assert autotune.entries() == {full("fam|x"): "b"}
    assert autotune.cache_path() == str(cache_dir / "autotune.json")
    assert read_json(autotune.cache_path()) == {"version": 1, "entries": {full("fam|x"): "b"}}
    # a hit: nothing measured, whatever the timings would say now
    assert choose("fam|x", [1, 9, 9]) == (1, "cached", 0)
    # another class of the same call site is tuned on its own
    assert choose("fam|y", [9, 9, 1]) == (2, "measured", 3)


def test_heuristic_kept_within_margin():
    autotune.enable()
    assert choose("fam|near", [1.01, 1.0, 5.0])[:2] == (0, "measured")  # 1% faster: noise, keep heuristic
    assert choose("fam|far", [1.05, 1.0, 5.0])[:2] == (1, "measured")


def test_failing_candidates_are_skipped():
    autotune.enable()
    nan, inf = float("nan"), float("inf")
    assert choose("fam|some", [nan, inf, 2.0]) == (2, "measured", 3)
    # none can run: the heuristic (whose real launch will report why), and nothing stored
    assert choose("fam|none", [nan, nan, inf], heuristic=1) == (1, "heuristic", 3)
    assert full("fam|none") not in autotune.entries()


def test_no_measuring_while_capturing():
    autotune.enable()
    assert choose("fam|x", [3, 1, 2], can_measure=False) == (0, "heuristic", 0)
    assert autotune.entries() == {}
    choose("fam|x", [3, 1, 2])
    assert choose("fam|x", [3, 1, 2], can_measure=False) == (1, "cached", 0)  # the cache still serves


def test_disk_round_trip(cache_dir):
    autotune.enable()
    odd = 'fam|"quoted"\\back|\u00e9\u6f22|\U0001f600|tab\there'
    choose("fam|x", [3, 1, 2])
    choose(odd, [1, 2, 0.5])
    before = autotune.entries()
    autotune.reload()  # what a new process sees
    assert autotune.entries() == before == {full("fam|x"): "b", full(odd): "c"}
    assert choose("fam|x", [1, 9, 9]) == (1, "cached", 0)
    assert choose(odd, [1, 9, 9]) == (2, "cached", 0)
    # clear(memory) re-measures, and the new choice replaces the old one on disk
    autotune.clear(memory=True, disk=False)
    assert choose("fam|x", [1, 9, 9]) == (0, "measured", 3)
    assert read_json(autotune.cache_path())["entries"] == {full("fam|x"): "a", full(odd): "c"}


def test_new_entries_merge_with_other_writers(cache_dir):
    """Another process's entries written since this one loaded the file are kept."""
    autotune.enable()
    choose("fam|x", [3, 1, 2])
    doc = read_json(autotune.cache_path())
    doc["entries"]["other :: fam|z"] = "c"
    with open(autotune.cache_path(), "w") as f:
        json.dump(doc, f)
    choose("fam|y", [1, 2, 3])
    assert read_json(autotune.cache_path())["entries"] == {
        full("fam|x"): "b", full("fam|y"): "a", "other :: fam|z": "c"}
    assert not [p for p in os.listdir(cache_dir) if p != "autotune.json"]  # no temp files left


@pytest.mark.parametrize("content", [
    b"", b"{not json", bytes(range(256)), b"[1, 2]", b'{"version": 1}', b'{"version": 2, "entries": {}}',
    b'{"version": 1, "entries": {"k": 3}}', b'{"version": 1, "entries": {"k": "v"}} trailing',
    b'{"version": 1.5, "entries": {}}', b'{"version": 1, "entries": {"k": "\\ud800"}}',
], ids=["empty", "truncated", "binary", "array", "no-entries", "version2", "non-string", "trailing", "float-version",
        "bad-surrogate"])
def test_corrupt_or_foreign_file_is_ignored(cache_dir, content):
    cache_dir.mkdir()
    path = cache_dir / "autotune.json"
    path.write_bytes(content)
    with pytest.warns(UserWarning, match="ignoring the cache file"):
        autotune.reload()
    assert autotune.entries() == {}
    autotune.enable()
    assert choose("fam|x", [3, 1, 2]) == (1, "measured", 3)
    assert read_json(path) == {"version": 1, "entries": {full("fam|x"): "b"}}  # replaced by a valid file


def test_unknown_fields_are_tolerated(cache_dir):
    cache_dir.mkdir()
    (cache_dir / "autotune.json").write_text(json.dumps({
        "note": {"written by": ["a", 1, 2.5e3, True, False, None]},
        "version": 1,
        "entries": {full("fam|x"): "c", "unknown :: thing": "zz"},
    }, indent=3))
    autotune.reload()
    autotune.enable()
    assert choose("fam|x", [1, 2, 3]) == (2, "cached", 0)


def test_stale_candidate_is_measured_again(cache_dir):
    """A cached name the call site no longer offers is a miss (the candidate list changed)."""
    cache_dir.mkdir()
    (cache_dir / "autotune.json").write_text(json.dumps({"version": 1, "entries": {full("fam|x"): "gone"}}))
    autotune.reload()
    autotune.enable()
    assert choose("fam|x", [3, 1, 2]) == (1, "measured", 3)


def test_other_device_key_is_not_reused():
    autotune.enable()
    assert choose("fam|x", [3, 1, 2], device="GPU-A sm_90 132SM tileops-0.1.0-aaa") == (1, "measured", 3)
    assert choose("fam|x", [1, 3, 2], device="GPU-B sm_80 108SM tileops-0.1.0-aaa") == (0, "measured", 3)
    assert choose("fam|x", [1, 3, 2], device="GPU-A sm_90 132SM tileops-0.2.0-bbb") == (0, "measured", 3)
    assert choose("fam|x", [9, 9, 9], device="GPU-A sm_90 132SM tileops-0.1.0-aaa") == (1, "cached", 0)
    assert len(autotune.entries()) == 3


def test_pins_override(cache_dir):
    autotune.pin("fam", "c")  # by family, with autotuning off
    assert choose("fam|x", [1, 2, 3]) == (2, "pinned", 0)
    assert choose("famous|x", [1, 2, 3]) == (0, "heuristic", 0)  # a family is matched whole
    autotune.enable()
    assert choose("fam|x", [1, 2, 3]) == (2, "pinned", 0)  # and with autotuning on
    autotune.pin("fam|*|m64_*", "b")  # a glob; the most recent matching pin wins
    assert choose("fam|bf16|m64_n64_k64|tn", [1, 2, 3]) == (1, "pinned", 0)
    assert choose("fam|bf16|m128_n64_k64|tn", [1, 2, 3]) == (2, "pinned", 0)
    assert autotune.pins() == {"fam": "c", "fam|*|m64_*": "b"}
    autotune.pin("fam", "a")  # re-pinning a pattern replaces it and makes it the most recent
    assert choose("fam|bf16|m64_n64_k64|tn", [1, 2, 3]) == (0, "pinned", 0)
    autotune.unpin("fam")
    autotune.unpin("not pinned")  # no error
    assert autotune.pins() == {"fam|*|m64_*": "b"}
    autotune.unpin()
    assert choose("fam|x", [3, 1, 2]) == (1, "measured", 3)
    assert not any("pinned" in v for v in autotune.entries().values())


def test_pin_of_unknown_candidate_names_the_valid_ones():
    autotune.pin("fam", "bn512")
    with pytest.raises(RuntimeError, match=r"pin 'fam' -> 'bn512' matches fam\|x, whose candidates are 'a', 'b', 'c'"):
        choose("fam|x", [1, 2, 3])
    with pytest.raises(ValueError, match="non-empty strings"):
        autotune.pin("", "a")


# Every autotuned call site of a CUDA build (the pinned-config tests take their lists from here).
FAMILIES = ["conv_depthwise", "conv_dgrad", "conv_dgrad_sm90", "conv_fwd_sm90", "conv_wgrad_sm90", "matmul_simt",
            "matmul_skinny_tc", "matmul_sm90"]


def test_families_list_their_candidates():
    if not tileops.build_info()["with_cuda"]:
        assert autotune.families() == []
        with pytest.raises(RuntimeError, match="no family 'matmul_sm90'; this build has: none"):
            autotune.candidates("matmul_sm90")
        return
    assert autotune.families() == FAMILIES
    for f in FAMILIES:
        names = autotune.candidates(f)
        assert names and len(set(names)) == len(names) and all(isinstance(n, str) and n for n in names), (f, names)
    # the orders the call sites' heuristics index into
    assert autotune.candidates("matmul_simt")[:4] == ["vec128", "vec128x64", "vec64", "reg64"]
    assert autotune.candidates("conv_dgrad") == ["phases", "col2im"]
    assert "pp128-c2" in autotune.candidates("matmul_sm90")
    assert [c + "-im2col" for c in ["coop128x256-c2", "coop128x192-c2", "pp128-c2"]] + ["rows64"] == \
        autotune.candidates("conv_fwd_sm90")[-4:]
    assert autotune.candidates("conv_depthwise") == ["strip4", "strip1", "tile", "strip4-resident", "rows"]
    with pytest.raises(RuntimeError, match="no family 'matmul_sm91'; this build has: conv_depthwise, conv_dgrad"):
        autotune.candidates("matmul_sm91")
    # a pin by family name is checked at once; a glob only where it matches a call
    with pytest.raises(ValueError, match="family 'matmul_sm90' has no candidate 'bn512'; its candidates are bn64, "):
        autotune.pin("matmul_sm90", "bn512")
    assert autotune.pins() == {}
    autotune.pin("matmul_sm90|*", "bn512")
    assert autotune.pins() == {"matmul_sm90|*": "bn512"}


def test_pinned_context_manager():
    autotune.pin("fam", "b")
    with autotune.pinned("fam", "c"):
        assert choose("fam|x", [1, 2, 3])[:2] == (2, "pinned")
    assert autotune.pins() == {"fam": "b"}
    with autotune.pinned("other", "a"):
        assert autotune.pins() == {"fam": "b", "other": "a"}
    assert autotune.pins() == {"fam": "b"}


def test_enabled_context_manager():
    with autotune.enabled():
        assert autotune.is_enabled()
        with autotune.enabled(False):
            assert not autotune.is_enabled()
        assert autotune.is_enabled()
    assert not autotune.is_enabled()
    with pytest.raises(KeyError), autotune.enabled(True):
        raise KeyError("restored on errors too")
    assert not autotune.is_enabled()


def test_clear(cache_dir):
    autotune.enable()
    choose("fam|x", [3, 1, 2])
    path = autotune.cache_path()
    autotune.clear(memory=False, disk=True)
    assert not os.path.exists(path) and autotune.entries() == {full("fam|x"): "b"}
    assert choose("fam|x", [1, 2, 3]) == (1, "cached", 0)
    choose("fam|y", [1, 2, 3])
    assert read_json(path)["entries"] == {full("fam|y"): "a"}
    autotune.clear()
    assert autotune.entries() == {} and not os.path.exists(path)
    autotune.clear()  # nothing left to clear: no error
    assert choose("fam|x", [1, 2, 3]) == (0, "measured", 3)


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    autotune.enable()
    choose("fam|x", [3, 1, 2])
    other = tmp_path / "other"
    other.mkdir()
    (other / "autotune.json").write_text(json.dumps({"version": 1, "entries": {full("fam|x"): "c"}}))
    monkeypatch.setenv("TILEOPS_CACHE_DIR", str(other))
    assert autotune.cache_path() == str(other / "autotune.json")
    assert choose("fam|x", [3, 1, 2]) == (2, "cached", 0)  # the memory cache reloaded from the new file
    monkeypatch.delenv("TILEOPS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert autotune.cache_path() == str(tmp_path / "xdg" / "tileops" / "autotune.json")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert autotune.cache_path() == str(tmp_path / "home" / ".cache" / "tileops" / "autotune.json")
    monkeypatch.delenv("HOME")
    assert autotune.cache_path() is None
    assert choose("fam|x", [3, 1, 2]) == (1, "measured", 3)  # memory only, no file to write
    assert autotune.entries() == {full("fam|x"): "b"}


def test_unwritable_cache_dir_warns_and_keeps_the_choice(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("TILEOPS_CACHE_DIR", str(blocker / "sub"))
    autotune.enable()
    with pytest.warns(UserWarning, match="could not write the cache file"):
        assert choose("fam|x", [3, 1, 2]) == (1, "measured", 3)
    assert choose("fam|x", [3, 1, 2]) == (1, "cached", 0)


def test_concurrent_choices(cache_dir):
    autotune.enable()
    errors = []

    def work(t):
        try:
            for i in range(25):
                choose("fam|t%d|%d" % (t, i), [3, 1, 2])
                choose("fam|shared|%d" % i, [3, 1, 2])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    want = {full("fam|t%d|%d" % (t, i)): "b" for t in range(4) for i in range(25)}
    want.update({full("fam|shared|%d" % i): "b" for i in range(25)})
    assert autotune.entries() == want
    assert read_json(autotune.cache_path())["entries"] == want


def test_bad_call_site_arguments():
    with pytest.raises(RuntimeError, match="heuristic index 3 is not in"):
        choose("fam|x", [1, 2, 3], heuristic=3)
    with pytest.raises(RuntimeError, match="has no candidates"):
        choose("fam|x", [], names=[])
    autotune.enable()
    with pytest.raises(RuntimeError, match="unique and non-empty"):
        choose("fam|x", [1, 2], names=["a", "a"])


def test_shape_class():
    assert autotune.shape_class(4096, 4096, 4096) == "m4096_n4096_k4096"
    assert autotune.shape_class(4095, 4097, 4093) == "m4096_n8192_k4096"
    assert autotune.shape_class(1, 0, 3, batch=1) == "m1_n0_k4"
    assert autotune.shape_class(512, 512, 64, batch=48) == "m512_n512_k64_b64"


def test_environment_read_at_start_up(monkeypatch):
    monkeypatch.delenv("TILEOPS_AUTOTUNE", raising=False)
    monkeypatch.delenv("TILEOPS_AUTOTUNE_PIN", raising=False)
    _C._autotune_reset_from_env_for_test()  # what a new process does
    assert not autotune.is_enabled() and autotune.pins() == {}  # off by default
    for value, on in [("1", True), ("on", True), ("TRUE", True), ("0", False), ("off", False), ("", False)]:
        monkeypatch.setenv("TILEOPS_AUTOTUNE", value)
        _C._autotune_reset_from_env_for_test()
        assert autotune.is_enabled() == on, value
    monkeypatch.setenv("TILEOPS_AUTOTUNE", "maybe")
    with pytest.warns(UserWarning, match="TILEOPS_AUTOTUNE='maybe' is not one of"):
        _C._autotune_reset_from_env_for_test()
    assert not autotune.is_enabled()
    monkeypatch.delenv("TILEOPS_AUTOTUNE")
    monkeypatch.setenv("TILEOPS_AUTOTUNE_PIN", "fam=c,bad,,fam|*|m64*=b")
    with pytest.warns(UserWarning, match="ignoring 'bad' in TILEOPS_AUTOTUNE_PIN"):
        _C._autotune_reset_from_env_for_test()
    assert autotune.pins() == {"fam": "c", "fam|*|m64*": "b"}
    assert choose("fam|bf16|m64_n64_k64|tn", [1, 2, 3]) == (1, "pinned", 0)


def test_fresh_process_reuses_the_disk_cache(cache_dir):
    autotune.enable()
    choose("fam|x", [3, 1, 2])
    code = (
        "from tileops import _C\n"
        "print(_C._autotune_choose_for_test('fam|x', ['a', 'b', 'c'], 0, [1.0, 9.0, 9.0]))\n"
        "print(_C._autotune_choose_for_test('fam|y', ['a', 'b', 'c'], 0, [9.0, 9.0, 1.0]))\n"
    )
    env = dict(os.environ, TILEOPS_AUTOTUNE="1", TILEOPS_AUTOTUNE_VERBOSE="1")
    env.pop("TILEOPS_AUTOTUNE_PIN", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["(1, 'cached', 0)", "(2, 'measured', 3)"]
    assert "tileops autotune: %s: a (heuristic) 9 ms b 9 ms c 1 ms -> c" % full("fam|y") in out.stderr
    autotune.reload()
    assert autotune.entries() == {full("fam|x"): "b", full("fam|y"): "c"}


# ---- CUDA: real timing (CUDA events), graph capture, device keys; and a tuned matmul ----

@pytest.mark.cuda
def test_cuda_timing_and_capture():
    autotune.enable()
    dev = _C._autotune_device_key(torch.cuda.current_device())
    assert dev.startswith(torch.cuda.get_device_name()) and tileops.__version__ in dev
    # candidate i is a float32 mm of size sizes[i]: the 32x32 one is far faster than 2048x2048
    assert _C._autotune_cuda_choose_for_test("selftest|mm", [2048, 32], 0) == (1, "measured")
    assert autotune.entries() == {full("selftest|mm", dev): "mm32"}
    assert _C._autotune_cuda_choose_for_test("selftest|mm", [2048, 32], 0) == (1, "cached")
    # while a graph is captured: the cache serves, a miss takes the heuristic and times nothing
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        hit = _C._autotune_cuda_choose_for_test("selftest|mm", [2048, 32], 0)
        miss = _C._autotune_cuda_choose_for_test("selftest|capture", [2048, 32], 0)
    g.replay()
    torch.cuda.synchronize()
    assert hit == (1, "cached") and miss == (0, "heuristic")
    assert list(autotune.entries()) == [full("selftest|mm", dev)]


@pytest.mark.cuda
def test_matmul_autotuned_cuda():
    """bf16 matmul with autotuning on: correct, tuned once, and an entry for this GPU and build."""
    from test_matmul import SM90_CONFIGS

    gen, seed = fresh_generator()
    M, N, K = 4096, 2048, 1024
    a = randn((M, K), torch.bfloat16, "cuda", gen)
    b = randn((K, N), torch.bfloat16, "cuda", gen)
    before = autotune.entries()
    with autotune.enabled():
        out = tileops.matmul(a, b)  # a miss: every candidate runs, then the chosen one
        again = tileops.matmul(a, b)  # the cached choice
    a64, b64 = a.double(), b.double()
    ref, mag = a64 @ b64, a64.abs() @ b64.abs()
    check(out, ref, mag, "bfloat16", "autotuned matmul seed=%d" % seed)
    check(again, ref, mag, "bfloat16", "autotuned matmul, cached, seed=%d" % seed)
    new = {k: v for k, v in autotune.entries().items() if k not in before}
    assert len(new) == 1 and list(new.values())[0] in SM90_CONFIGS, new
    dev = _C._autotune_device_key(torch.cuda.current_device())
    assert all(k.startswith(dev + " :: matmul_sm90|") for k in new), new


@pytest.mark.cuda
@pytest.mark.parametrize("config", CONV_FWD_CANDIDATES)
@pytest.mark.parametrize("case", ["3x3_c64", "resnet_3x3_64@56", "3x3_c64_s2", "3x3_c64_dilated", "3x5_c64_stride_2x1",
                                  "5x5_c128_p0", "3x3_c64_k264@56", "3x3_c64_pad130"])
def test_conv_fwd_sm90_candidates_cuda(config, case):
    """Each candidate of the Hopper implicit-GEMM conv, pinned, on output-channel counts below, at
    and above its tile width (7, 64, 72, 200, 264; unaligned output rows stored by threads, the
    others by TMA in the persistent kernels), every stride/dilation/padding, unequal kernel sides
    (which pin TMA's im2col conventions), blocks looping over tiles, and a padding past what an
    im2col map takes (the one-tile im2col candidates then gather; the persistent ones, which have
    no gather, refuse with a clear error), against float64."""
    from test_conv2d import run_forward, sized

    refused = case == "3x3_c64_pad130" and config in CONV_FWD_PERSISTENT
    with autotune.pinned("conv_fwd_sm90", config):
        with pytest.raises(RuntimeError, match="im2col mode") if refused else contextlib.nullcontext():
            run_forward(sized(case, "cuda"), case, "cuda", "bfloat16", "channels_last", act="relu", bias=True)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(3, 9, 13, 64, (3, 3), 1), (2, 12, 10, 72, (3, 3), 0), (1, 7, 30, 128, (3, 1), (1, 0)),
                                   (2, 6, 9, 64, (2, 2), 0), (2, 56, 56, 64, (3, 3), 1), (132, 9, 13, 64, (3, 3), 1),
                                   (6, 56, 56, 64, (3, 3), 1)],
                         ids=["13wide_many_rows", "k72_p0", "k128_3x1", "2x2_even", "resnet_64@56", "13wide_b132",
                              "resnet_64@56_b6"])
def test_conv_fwd_rows64_cuda(kind, shape):
    """The 64-channel stride-1 kernel (conv_fwd_sm90's `rows64`, its default for at most 64 output
    channels), forward with bias, a residual and ReLU against float64 on poisoned memory: items of
    64 pixels (where 128-pixel items would number fewer than the SMs, as the first five shapes) and
    of 128 (the last two) spanning many output rows (13 wide), no padding, a partial
    output-channel block (72) and two blocks (128), unequal and even kernels; pinned, and its
    kernel's name checked on sm_90."""
    n, h, wd, k, (r, sk), pad = shape
    gen, seed = fresh_generator()
    dt = getattr(torch, kind)
    x = randn((n, 64, h, wd), dt, "cuda", gen).to(memory_format=torch.channels_last)
    w = randn((k, 64, r, sk), dt, "cuda", gen).to(memory_format=torch.channels_last) / 8
    b = randn((k,), dt, "cuda", gen)
    conv = torch.nn.functional.conv2d
    ref0 = conv(x.double(), w.double(), b.double(), 1, pad)
    res = randn(tuple(ref0.shape), dt, "cuda", gen).to(memory_format=torch.channels_last)
    with autotune.pinned("conv_fwd_sm90", "rows64"):
        poison("cuda", ref0.numel() * x.element_size())
        y, ran = cuda_kernel_counts(lambda: tileops.conv2d(x, w, b, 1, pad, activation="relu", residual=res))
    ref = torch.relu(ref0 + res.double())
    mag = conv(x.double().abs(), w.double().abs(), b.double().abs(), 1, pad) + res.double().abs()
    check(y, ref, mag, kind, "rows64 %s seed %d" % (shape, seed))
    if torch.cuda.get_device_capability() == (9, 0):
        pq = ref0.shape[2] * ref0.shape[3]
        items128 = n * -(-pq // 128) * -(-k // 64)
        mt = 1 if items128 < torch.cuda.get_device_properties(0).multi_processor_count else 2
        assert any(re.search(r"conv_rows64_kernel<[^>]*, %d>" % mt, name) for name in ran), "%s: %s" % (shape, ran)


@pytest.mark.cuda
@pytest.mark.parametrize("config", family("conv_dgrad"))
@pytest.mark.parametrize("kind", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", ["3x3_s2_k64_odd", "3x3_s2_k64_p0", "3x3_s2_k64_p2", "3x3_s2_k64_dil2",
                                  "resnet_3x3s2_128@56", "1x1_stride2", "3x3_s2", "kernel_3x5_stride_2x1", "aniso",
                                  "stem7x7"] + PHASES_IN_ONE[1:])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_conv_dgrad_candidates_cuda(config, kind, case, layout):
    """Both ways of a strided data gradient, pinned: phase convolutions (unequal phases, padding 0
    and 2, dilation with stride, phases without taps, 1x1/2, stride 2x1, few channels, even phases
    written in place by the Hopper kernels) and GEMM + col2im, against float64."""
    from test_conv2d import CUDA_CASES, run_backward_op

    with autotune.pinned("conv_dgrad", config):
        run_backward_op(CUDA_CASES[case], case, "cuda", kind, layout, mask=(True, False, False))


@pytest.mark.cuda
@pytest.mark.parametrize("config", family("conv_dgrad_sm90"))
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", PHASES_IN_ONE)
def test_conv_dgrad_phases_in_one_cuda(config, kind, case):
    """A strided data gradient's phases in one Hopper launch (family conv_dgrad_sm90), each tile
    pinned: the values against float64 (poisoned dx: every phase written, or zeroed where no tap
    reaches it), then the kernels it ran: on sm_90, one phases kernel after one transposition of
    the weight, no per-phase forward convs and no fill of dx (the phases no tap reaches are zeroed
    by the same launch)."""
    from test_conv2d import CUDA_CASES, run_backward_op

    with autotune.pinned("conv_dgrad", "phases"), autotune.pinned("conv_dgrad_sm90", config):
        _, (x, w, gy) = run_backward_op(CUDA_CASES[case], case, "cuda", kind, "channels_last",
                                        mask=(True, False, False))
        st, pd, dl, g = CUDA_CASES[case].params
        pair = [(v, v) if isinstance(v, int) else v for v in (st, pd, dl)]
        _, ran = cuda_kernel_counts(
            lambda: torch.ops.tileops._conv2d_backward(gy, x, w, *pair, g, [True, False, False]))
    if torch.cuda.get_device_capability() == (9, 0):
        gemms = {n: k for n, k in ran.items() if "gemm" in n}
        assert list(gemms.values()) == [1] and "gemm_sm90_phases_kernel" in list(gemms)[0], "%s: %s" % (case, ran)
        assert sum(k for n, k in ran.items() if "tap_transpose" in n) == 1, "%s: %s" % (case, ran)
        assert not any("fill" in n.lower() for n in ran), "%s: %s" % (case, ran)


def backward_kernels(c, case, kind, w_layout, mask):
    """run_backward_op's checks of conv c (x channels_last, the weight in w_layout, the gradients
    in mask) against float64, then {kernel: launches} of one more call of the backward op."""
    from test_conv2d import run_backward_op

    _, (x, w, gy) = run_backward_op(c, case, "cuda", kind, "channels_last", mask=mask, w_layout=w_layout)
    st, pd, dl, g = c.params
    pair = [(v, v) if isinstance(v, int) else v for v in (st, pd, dl)]
    _, ran = cuda_kernel_counts(lambda: torch.ops.tileops._conv2d_backward(gy, x, w, *pair, g, list(mask)))
    return ran


# Weight gradients on the Hopper implicit GEMM: (conv, whether its R*S*C x K weight is small enough
# to be written straight into a KCRS grad_weight, conv/conv_lowered.cu's kWgradDirectMax = 2^17
# elements). A channels_last grad_weight is written straight, down dW^T's columns, at any size.
WGRAD_DIRECT = {
    "1x1_split": ((4, 64, 14, 14, 96, 1, 1), True),          # a long reduction: split-K, the reduce writes dw
    "3x3_split": ((8, 64, 28, 28, 128, 3, 3, 1, 1), True),   # 73728 elements
    "3x3_one_pass": ((1, 64, 16, 16, 64, 3, 3, 1, 1), True),  # 4 k tiles: no split, the epilogue writes dw
    "3x3_strided": ((2, 128, 15, 15, 64, 3, 3, 2, 1), True),
    "3x3_buffered": ((2, 128, 14, 14, 128, 3, 3, 1, 1), False),  # 147456: KCRS through a buffer and tap_transpose
    "3x3_k72_split": ((3, 64, 20, 20, 72, 3, 3, 1, 1), True),  # 576 rows (a half 128-row tile), 72 columns
    "3x3_k200_one_pass": ((1, 192, 6, 6, 200, 3, 3, 1, 1), False),  # 345600 elements, a short reduction
}


@pytest.mark.cuda
@pytest.mark.parametrize("config", family("conv_wgrad_sm90"))
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("w_layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("case", list(WGRAD_DIRECT))
def test_conv_wgrad_direct_cuda(config, kind, w_layout, case):
    """The Hopper weight gradient, each tile pinned, for weights of both layouts: grad_weight
    against float64 on poisoned memory, then the kernels: on sm_90 a channels_last or small
    weight is written by the GEMM (or its split-K reduce) through grad_weight's strides, no
    transposition after it; a larger KCRS one goes through a buffer and one tap_transpose."""
    from test_conv2d import Conv

    shape, small = WGRAD_DIRECT[case]
    direct = small or w_layout == "channels_last" or shape[5] * shape[6] == 1
    with autotune.pinned("conv_wgrad_sm90", config):
        ran = backward_kernels(Conv(*shape), case, kind, w_layout, (False, True, False))
    if torch.cuda.get_device_capability() == (9, 0):
        assert any("gemm_sm90" in n for n in ran), "%s: %s" % (case, ran)
        transposes = sum(k for n, k in ran.items() if "tap_transpose" in n)
        assert transposes == (0 if direct else 1), "%s: %s" % (case, ran)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("w_layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("shape", [(2, 64, 14, 14, 256, 1, 1), (1, 256, 9, 11, 64, 1, 1), (3, 24, 5, 7, 40, 1, 1)],
                         ids=["64to256", "256to64_odd", "24to40"])
def test_conv_dgrad_1x1_one_gemm_cuda(kind, w_layout, shape):
    """A 1x1 stride-1 data gradient in 16 bits: dx against float64 on poisoned memory, then the
    kernels: one GEMM reading the weight in place, no transposition of it."""
    from test_conv2d import Conv, run_backward_op

    c = Conv(*shape)
    _, (x, w, gy) = run_backward_op(c, "1x1", "cuda", kind, "channels_last", mask=(True, False, False),
                                    w_layout=w_layout)
    _, ran = cuda_kernel_counts(
        lambda: torch.ops.tileops._conv2d_backward(gy, x, w, [1, 1], [0, 0], [1, 1], 1, [True, False, False]))
    gemms = [n for n in ran if "gemm" in n]
    assert len(gemms) == 1 and not any("tap_transpose" in n for n in ran), "%s: %s" % (shape, ran)


# Stride-1 data gradients in 16 bits whose forward-conv problem takes a one-tile Hopper kernel:
# (N, C, H, W, K, R, S, stride, padding, dilation). dx's channels (the GEMM's N) are the weight's
# C: 72 and 200 leave partial column tiles; batch1_56 splits K.
DGRAD_FLIPPED = {
    "3x3_c128_k64": (2, 128, 12, 10, 64, 3, 3, 1, 1),
    "3x3_c72_k128_odd": (1, 72, 13, 11, 128, 3, 3, 1, 1),
    "5x5_c200_k64_pad2": (2, 200, 9, 7, 64, 5, 5, 1, 2),
    "3x3_dil2": (1, 128, 15, 15, 64, 3, 3, 1, 2, 2),
    "3x3_256@14_b1": (1, 256, 14, 14, 256, 3, 3, 1, 1),
    "1x3_valid": (2, 96, 8, 9, 128, 1, 3, 1, 0),
}


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("w_layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("case", list(DGRAD_FLIPPED))
def test_conv_dgrad_flipped_in_place_cuda(kind, w_layout, case):
    """A stride-1 16-bit data gradient: dx against float64 on poisoned memory, then the kernels:
    on sm_90 with a channels_last weight, one Hopper GEMM that reads the weight in place, its taps
    flipped (conv_dgrad_flipped_sm90), and no transposition; a KCRS weight is transposed first."""
    from test_conv2d import Conv

    ran = backward_kernels(Conv(*DGRAD_FLIPPED[case]), case, kind, w_layout, (True, False, False))
    if torch.cuda.get_device_capability() == (9, 0):
        assert any("gemm_sm90_kernel" in n for n in ran), "%s: %s" % (case, ran)
        transposes = sum(k for n, k in ran.items() if "tap_transpose" in n)
        assert transposes == (0 if w_layout == "channels_last" else 1), "%s: %s" % (case, ran)


@pytest.mark.cuda
@pytest.mark.parametrize("config", ["bn64x2-im2col", "pp128-c2-im2col"])
def test_conv_dgrad_flipped_steered_by_pin_cuda(config):
    """A pin on conv_fwd_sm90 steers a stride-1 data gradient too: the weight is transposed and
    the pinned kernel runs (the in-place kernel is the heuristic's path only)."""
    from test_conv2d import Conv

    case = "3x3_c128_k64"
    with autotune.pinned("conv_fwd_sm90", config):
        ran = backward_kernels(Conv(*DGRAD_FLIPPED[case]), case, "bfloat16", "channels_last", (True, False, False))
    if torch.cuda.get_device_capability() == (9, 0):
        assert sum(k for n, k in ran.items() if "tap_transpose" in n) == 1, ran
        persistent = any("persistent" in n for n in ran)
        assert persistent == config.startswith("pp"), ran


@pytest.mark.cuda
@pytest.mark.parametrize("config", family("conv_depthwise"))
@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", ["depthwise", "depthwise_p0", "depthwise_96@56", "depthwise_32@112_b1", "96@56_b12"])
def test_conv_depthwise_candidates_cuda(config, kind, case):
    """Each candidate of the 3x3 stride-1 depthwise forward (channels_last), pinned: strips of 4
    and of 1 output rows, the tile kernel, and strips of 4 on resident blocks (several items a
    thread; 96 channels: a cycle of 24 channel vectors that 128-thread blocks do not divide), on outputs that neither strips nor column tiles divide
    (13 x 15), with bias and GELU, and the data gradient (the forward with the kernel flipped),
    against float64."""
    from test_conv2d import CUDA_CASES, Conv, run_backward_op, run_forward

    # 96@56 at batch 12: more strips than resident blocks hold, so those loop over several
    c = Conv(12, 96, 56, 56, 96, 3, 3, 1, 1, groups=96) if case == "96@56_b12" else CUDA_CASES[case]
    with autotune.pinned("conv_depthwise", config):
        run_forward(c, case, "cuda", kind, "channels_last", act="gelu", bias=True)
        run_backward_op(c, case, "cuda", kind, "channels_last", mask=(True, False, False))


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(3, 32, 23, 20), (5, 96, 9, 14), (2, 12, 11, 13)],
                         ids=["c32_many_items", "c96_tail_cols", "c12_unaligned_rows"])
def test_conv_depthwise_rows_cuda(kind, shape):
    """The row ring (conv_depthwise "rows"), pinned, forward with bias, a residual and ReLU against
    float64 on poisoned memory: it runs on sm_90 where x's channels_last rows are 16-byte runs
    (15 batches x rows: blocks walk several items, the ring wraps; 14 columns: a partial column
    tile), and the strips stand in where they are not (12 channels x 13 columns of fp16)."""
    n, ch, h, wd = shape
    gen, seed = fresh_generator()
    dt = getattr(torch, kind)
    x = randn((n, ch, h, wd), dt, "cuda", gen).to(memory_format=torch.channels_last)
    w = randn((ch, 1, 3, 3), dt, "cuda", gen)
    b = randn((ch,), dt, "cuda", gen)
    r = randn((n, ch, h, wd), dt, "cuda", gen).to(memory_format=torch.channels_last)
    with autotune.pinned("conv_depthwise", "rows"):
        poison("cuda", x.numel() * x.element_size())
        y, ran = cuda_kernel_counts(lambda: tileops.conv2d(x, w, b, 1, 1, 1, ch, activation="relu", residual=r))
    conv = torch.nn.functional.conv2d
    ref = torch.relu(conv(x.double(), w.double(), b.double(), 1, 1, 1, ch) + r.double())
    mag = conv(x.double().abs(), w.double().abs(), b.double().abs(), 1, 1, 1, ch) + r.double().abs()
    check(y, ref, mag, kind, "rows %s seed %d" % (shape, seed))
    runs = wd * ch * x.element_size() % 16 == 0
    if torch.cuda.get_device_capability()[0] >= 9:
        assert any("dw_fwd_rows_kernel" in k for k in ran) == runs, "%s: %s" % (shape, ran)


@pytest.mark.cuda
def test_conv_depthwise_rows_default_cuda():
    """Unpinned, a large-batch 3x3 depthwise layer (MobileNet's 96@56 at batch 16, where resident strips
    of 4 would leave two blocks per SM) takes the row ring on sm_90, forward and data gradient."""
    x = torch.randn(16, 96, 56, 56, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    w = torch.randn(96, 1, 3, 3, device="cuda", dtype=torch.bfloat16)
    gy = torch.randn_like(x)
    _, fwd = cuda_kernel_counts(lambda: tileops.conv2d(x, w, None, 1, 1, 1, 96))
    _, bwd = cuda_kernel_counts(lambda: torch.ops.tileops._conv2d_backward(gy, x, w, [1, 1], [1, 1], [1, 1], 96,
                                                                        [True, False, False]))
    if torch.cuda.get_device_capability()[0] >= 9:
        assert any("dw_fwd_rows_kernel" in k for k in fwd), fwd
        assert any("dw_fwd_rows_kernel" in k for k in bwd), bwd


@pytest.mark.cuda
@pytest.mark.parametrize("config", CONV_FWD_PERSISTENT)
def test_conv_fwd_sm90_persistent_refuses_residual_cuda(config):
    """A pinned persistent conv candidate asked for a fused residual (which its epilogue does not
    add) says so instead of dropping it; unpinned, the same call takes a kernel that adds it."""
    gen = fresh_generator()[0]
    x = randn((2, 64, 9, 9), torch.bfloat16, "cuda", gen).to(memory_format=torch.channels_last)
    w = randn((128, 64, 3, 3), torch.bfloat16, "cuda", gen).to(memory_format=torch.channels_last)
    r = randn((2, 128, 9, 9), torch.bfloat16, "cuda", gen).to(memory_format=torch.channels_last)
    with autotune.pinned("conv_fwd_sm90", config):
        with pytest.raises(RuntimeError, match="without a residual"):
            tileops.conv2d(x, w, None, 1, 1, residual=r)
    y = tileops.conv2d(x, w, None, 1, 1, residual=r)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), None, 1, 1) + r.double()
    mag = torch.nn.functional.conv2d(x.double().abs(), w.double().abs(), None, 1, 1) + r.double().abs()
    check(y, ref, mag, "bfloat16", "conv2d + residual, unpinned")


@pytest.mark.cuda
@pytest.mark.parametrize("config", family("conv_wgrad_sm90"))
@pytest.mark.parametrize("kind", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", ["resnet_3x3_64@56", "3x3_big", "3x3_c64_s2", "3x3_c64_dilated", "3x5_c64_stride_2x1",
                                  "5x5_c128_p0", "1x1_stride2", "resnet_1x1_256to64@56", "3x3_c64_pad130"])
def test_conv_wgrad_sm90_candidates_cuda(config, kind, case):
    """Each candidate of the Hopper implicit weight gradient, pinned (split-K where the reduction is
    long), channels_last x and grad_out, output channels below, at and above its tile width, every
    stride/dilation/padding of the C % 64 cases, against float64."""
    from test_conv2d import CUDA_CASES, run_backward_op

    with autotune.pinned("conv_wgrad_sm90", config):
        run_backward_op(CUDA_CASES[case], case, "cuda", kind, "channels_last", mask=(False, True, False))


@pytest.mark.cuda
def test_conv_wgrad_sm90_runs_cuda():
    """The implicit weight gradient is what a channels_last bf16 backward takes (its autotune
    family gets an entry), and a contiguous one (NCHW grad_out) is still right."""
    from test_conv2d import CUDA_CASES, run_backward_op

    before = autotune.entries()
    with autotune.enabled():
        run_backward_op(CUDA_CASES["3x3_big"], "3x3_big", "cuda", "bfloat16", "channels_last")
    new = {k: v for k, v in autotune.entries().items() if k not in before}
    assert any("conv_wgrad_sm90|" in k for k in new), new
    run_backward_op(CUDA_CASES["3x3_big"], "3x3_big", "cuda", "bfloat16", "contiguous")


@pytest.mark.cuda
def test_conv_autotuned_cuda():
    """bf16 channels_last 3x3 conv with autotuning on: the implicit-GEMM conv is timed once and
    its choice kept under its own family; the result is right either way."""
    from test_conv2d import run_forward, sized

    before = autotune.entries()
    with autotune.enabled():
        for _ in range(2):  # a miss (every candidate runs), then the cached choice
            run_forward(sized("resnet_3x3_64@56", "cuda"), "resnet_3x3_64@56", "cuda", "bfloat16", "channels_last")
    new = {k: v for k, v in autotune.entries().items() if k not in before}
    assert len(new) == 1 and "conv_fwd_sm90|" in list(new)[0] and list(new.values())[0] in CONV_FWD_CANDIDATES, new
