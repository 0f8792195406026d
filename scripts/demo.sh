#!/usr/bin/env bash
# Set up (scripts/setup.sh), then the demo: tileops against torch on a few shapes and a model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m tileops demo "$@"
