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
ruff check .
basedpyright   # pyright, basic mode ([tool.basedpyright] in pyproject.toml)
# One worker more than cores, at most 4 (pytest-xdist): many tests wait on a server or a
# child process, and an extra worker fills those waits. From a fresh clone on 2 cores the
# suite took 654 s on 2 workers, 619 s on 3, 674 s on 4, one run each (MemOS's venv,
# installed inside the suite, is slowest beside three busy workers). Tests that share a
# server or a module fixture carry an xdist_group and stay on one worker, the longest
# start first (tests/conftest.py). NANOBOT_MEMORY_TEST_WORKERS=0: all in this process.
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)  # nproc obeys OMP_*
workers=$(( cores + 1 < 4 ? cores + 1 : 4 ))
python -m pytest -n "${NANOBOT_MEMORY_TEST_WORKERS:-$workers}" --dist loadgroup \
  --no-loadscope-reorder "$@"
