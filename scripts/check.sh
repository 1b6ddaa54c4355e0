#!/usr/bin/env bash
# The whole test suite: set up, then the lit suite (passes, dialect, autosp-opt) and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=${PYTHON:-python3}
"$PY" -c 'import sys, lit.main; sys.argv[0] = "lit"; lit.main.main()' -sv test/lit
"$PY" -m pytest -q test/python
# A verdict must not depend on the thread count: spawned ranks pin theirs (one each); the comparisons
# made in the pytest process itself run again with one thread (CI has as many as cores).
OMP_NUM_THREADS=1 "$PY" -m pytest -q -m in_process test/python
