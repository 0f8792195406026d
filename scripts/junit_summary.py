"""Summarise a pytest JUnit XML: counts by device (CPU / CUDA tests), and fail when any CUDA
test was skipped. Usage: junit_summary.py junit.xml summary.json"""
import json
import sys
import xml.etree.ElementTree as ET


def main(src, dst):
    counts = {"cpu": {}, "cuda": {}}
    skipped_cuda = []
    for case in ET.parse(src).getroot().iter("testcase"):
        name = case.get("name", "")
        where = "cuda" if "cuda" in name.lower() else "cpu"
        if case.find("failure") is not None or case.find("error") is not None:
            state = "failed"
        elif case.find("skipped") is not None:
            state = "skipped"
            if where == "cuda":
                skipped_cuda.append(case.get("classname", "") + "::" + name)
        else:
            state = "passed"
        counts[where][state] = counts[where].get(state, 0) + 1
    summary = {"counts": counts, "skipped_cuda_tests": skipped_cuda}
    with open(dst, "w") as f:
        json.dump(summary, f, indent=1)
    print("tests:", json.dumps(counts))
    failed = any(c.get("failed") for c in counts.values())
    return 1 if failed or skipped_cuda else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
