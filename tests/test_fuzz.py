"""The seeded differential fuzz (tests/fuzz.py) under pytest: a fresh seed each run (printed in a
failure, with each failing case's own seed for `python tests/fuzz.py --replay SEED`)."""
import os

import pytest
import torch

import fuzz


def _report(summary):
    lines = ["fuzz seed %d: %d of %d cases failed" % (summary["seed"], summary["failed"], summary["cases"])]
    for rec in summary["failures"][:10]:
        bad = rec.get("error") or {k: "%.3g (torch %.3g, bound %.3g)" % (v["err"], v["torch_err"], v["bound"])
                                   for k, v in rec["outputs"].items() if not v["ok"]}
        lines.append("case %d %s %s %s: %s" % (rec["seed"], rec["op"], rec["kind"], rec["desc"], bad))
    return "\n".join(lines)


def _seed():
    s = os.environ.get("TILEOPS_TEST_SEED")
    return int(s) if s else int.from_bytes(os.urandom(4), "little") % (2 ** 31)


def test_fuzz_cpu():
    # CPU: tileops' reference kernels; problems of at most 2^20 multiply-adds and sides of 1024,
    # so that CI's share stays a few seconds; each dtype the CPU path takes
    summary = fuzz.fuzz(3000, _seed(), "cpu", cap=2.0 ** 20, hi=1024)
    assert summary["cases"] == 3000
    assert summary["failed"] == 0, _report(summary)


def test_fuzz_conv_family_cpu():
    # conv1d, conv3d and the transposed convs (conv2d's kernels), drawn apart from the default ops
    summary = fuzz.fuzz(400, _seed(), "cpu", cap=2.0 ** 20, hi=1024, ops=fuzz.FAMILY)
    assert summary["cases"] == 400
    assert summary["failed"] == 0, _report(summary)


@pytest.mark.cuda
def test_fuzz_conv_family_cuda():
    summary = fuzz.fuzz(1000, _seed(), "cuda", ops=fuzz.FAMILY)
    assert summary["cases"] == 1000
    assert summary["failed"] == 0, _report(summary)


@pytest.mark.cuda
def test_fuzz_cuda():
    # the suite's share; the GPU script runs 20,000 more (scripts/device/gpu_run.sh, fuzz.json)
    summary = fuzz.fuzz(2000, _seed(), "cuda")
    assert summary["cases"] == 2000
    assert summary["failed"] == 0, _report(summary)


def test_fuzz_cases_are_reproducible():
    # a case is a function of its seed: the replay of a failure shows the same problem
    a, b = fuzz.make_case(12345, "cpu"), fuzz.make_case(12345, "cpu")
    assert a["desc"] == b["desc"] and a["kind"] == b["kind"]
    for k in a["leaves"]:
        assert torch.equal(a["leaves"][k], b["leaves"][k]) and a["leaves"][k].stride() == b["leaves"][k].stride()


def test_fuzz_catches_a_wrong_result():
    # the judge can fail: the right float16 result passes; one element zeroed fails, and so does
    # the whole result rounded through bfloat16 (8 mantissa bits where float16 has 11)
    case = None
    for s in range(1000):
        c = fuzz.make_case(s, "cpu", kinds=("float16",), cap=2.0 ** 20, hi=256)
        if c["op"] == "matmul" and not c["grad"] and c["leaves"]["a"].shape[-2] * c["leaves"]["b"].shape[-1] >= 4096:
            case = c
            break
    assert case is not None
    assert fuzz.evaluate(dict(case))["ok"]
    right = case["tileops"]

    def one_zero(t):
        y = right(t).clone()
        y.view(-1)[y.numel() // 2] = 0
        return y

    for wrong in (one_zero, lambda t: right(t).to(torch.bfloat16).to(torch.float16)):
        assert not fuzz.evaluate(dict(case, tileops=wrong))["ok"]
