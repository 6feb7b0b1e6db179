#!/usr/bin/env bash
# Create/refresh the project-local venv (.venv) with everything the main job and the
# tests need. Idempotent: skips pip when pyproject.toml has not changed since last time.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -x "$VENV/bin/python" ]; then
  echo "[bootstrap] creating $VENV"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "[bootstrap] installing (torch CPU build first, then the package with all extras)"
  # torch==2.13.0 first: a plain 'torch' requirement would pull a multi-GB CUDA build.
  "$VENV/bin/pip" install -q "torch==2.13.0"
  "$VENV/bin/pip" install -q -e ".[dev]"
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
