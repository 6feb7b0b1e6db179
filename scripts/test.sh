#!/usr/bin/env bash
# The test command: installs what it needs into .venv, then lint, types and the whole suite.
# The fast suite (no test that starts a process): ./scripts/test.sh -m "not servers"
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
# MemOS's own venv (pip, ~75 s on a fresh clone; the MemOS tests need it) provisions
# beside lint, types and the first tests: those tests take the same file lock and find it
# done, or provision it themselves if this failed (its log: .nanobot-memory/memos/logs).
provision=
if [ -z "${NANOBOT_MEMORY_MEMOS_VENV:-}${NANOBOT_MEMORY_HOME:-}" ]; then
  python -c 'from pathlib import Path
from nanobot_memory_adapters.backends.memos.services import provision
home = Path(".nanobot-memory/memos")
provision(home, venv=home / "venv")' >/dev/null 2>&1 &
  provision=$!
fi
trap '[ -z "$provision" ] || kill "$provision" 2>/dev/null || true' INT TERM
ruff check .
basedpyright   # pyright, basic mode ([tool.basedpyright] in pyproject.toml)
# One worker more than cores, at most 4 (pytest-xdist): many tests wait on a server or a
# child process, and a third worker on 2 cores fills those waits (the suite took 550 s
# on 3 workers where 2 kept the cores 75 % busy). Tests that share a server or a module
# fixture carry an xdist_group and stay on one worker, the longest start first
# (tests/conftest.py). NANOBOT_MEMORY_TEST_WORKERS=0 runs everything in this process.
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)  # nproc obeys OMP_*
workers=$(( cores + 1 < 4 ? cores + 1 : 4 ))
rc=0
python -m pytest -n "${NANOBOT_MEMORY_TEST_WORKERS:-$workers}" --dist loadgroup \
  --no-loadscope-reorder "$@" || rc=$?
[ -z "$provision" ] || wait "$provision" || true  # a run without MemOS tests: let it end
exit "$rc"
