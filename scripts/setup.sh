#!/usr/bin/env bash
# Install autosp and everything it needs on a fresh machine (CPU; no downloads from any model hub).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# torch first and pinned: a bare requirement would pull a multi-GB CUDA build
"$PY" -m pip install -q torch==2.13.0
"$PY" -m pip install -q -e ".[compiler,hf,test]"
