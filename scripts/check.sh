#!/usr/bin/env bash
# The whole test suite: set up, then the lit suite (passes, dialect, autosp-opt) and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=${PYTHON:-python3}
"$PY" -c 'import sys, lit.main; sys.argv[0] = "lit"; lit.main.main()' -sv test/lit
"$PY" -m pytest -q test/python
