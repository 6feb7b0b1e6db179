#!/usr/bin/env bash
# The test command: installs what it needs into .venv, then lint + the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
. scripts/env.sh
. .venv/bin/activate
ruff check .
python -m pytest "$@"
