#!/usr/bin/env bash
# The main job on the embedded defaults (no LLM, no server): the swap flow, then the
# LoCoMo timeline benchmark on one conversation for no_memory, full_history, simple_rag.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
. scripts/env.sh
. .venv/bin/activate
DATASET=${DATASET:-../shared/data/locomo/locomo7.json}
exec nanobot-memory demo --dataset "$DATASET" --out "${OUT:-bench-out/demo}" "$@"
