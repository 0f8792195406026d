#!/usr/bin/env bash
# Set up (scripts/setup.sh), then the Python 3.9 syntax/lint check and the whole test suite.
# Extra arguments go to pytest (e.g. -k conv, -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check --target-version py39 python tests benchmarks examples scripts setup.py
.venv/bin/python -m pytest tests "$@"
