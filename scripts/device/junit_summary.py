"""Summarise a pytest JUnit XML: counts by device (CPU / CUDA tests), and fail when any CUDA
test was skipped, except a `multigpu` test skipped because fewer than 2 GPUs are visible
(tests/conftest.py gives that skip a reason starting "needs 2 CUDA GPUs").
Usage: junit_summary.py junit.xml summary.json"""
import json
import sys
import xml.etree.ElementTree as ET

MULTIGPU_SKIP = "needs 2 CUDA GPUs"


def main(src, dst):
    counts = {"cpu": {}, "cuda": {}}
    skipped_cuda, skipped_multigpu = [], []
    for case in ET.parse(src).getroot().iter("testcase"):
        name = case.get("name", "")
        full = case.get("classname", "") + "::" + name
        where = "cuda" if "cuda" in name.lower() or "multigpu" in full.lower() else "cpu"
        skip = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            state = "failed"
        elif skip is not None:
            state = "skipped"
            if MULTIGPU_SKIP in (skip.get("message", "") + (skip.text or "")):
                skipped_multigpu.append(full)
            elif where == "cuda":
                skipped_cuda.append(full)
        else:
            state = "passed"
        counts[where][state] = counts[where].get(state, 0) + 1
    summary = {"counts": counts, "skipped_cuda_tests": skipped_cuda, "skipped_multigpu_tests": skipped_multigpu}
    with open(dst, "w") as f:
        json.dump(summary, f, indent=1)
    print("tests:", json.dumps(counts))
    if skipped_multigpu:
        print("%d multigpu tests skipped (fewer than 2 GPUs): run scripts/device/ddp_run.sh on a 2-GPU machine"
              % len(skipped_multigpu))
    failed = any(c.get("failed") for c in counts.values())
    return 1 if failed or skipped_cuda else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
