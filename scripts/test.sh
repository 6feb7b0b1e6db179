#!/usr/bin/env bash
# The test command: installs what it needs into .venv, then lint, types and the whole suite.
# The fast suite (no server provisioning): ./scripts/test.sh -m "not servers"
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
# MemOS's scheduler queue needs Redis for real task status (Debian's redis-server).
if ! command -v redis-server >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "[test] installing redis-server (Debian) for MemOS's scheduler queue"
  (apt-get update -qq && apt-get install -y -qq redis-server >/dev/null) \
    || echo "[test] could not install redis-server; MemOS readiness tests will report why"
fi
. scripts/env.sh
. .venv/bin/activate
ruff check .
basedpyright   # pyright, basic mode ([tool.basedpyright] in pyproject.toml)
python -m pytest "$@"
