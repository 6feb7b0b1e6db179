"""Ask and ingest against their embedding floors (issue 31), in one process.

    python benchmarks/bench_phases.py [--data PATH] [--sample conv-26] [--rounds 3]

Each round, on a fresh store, in turn:

- ``ingest``: the conversation's sessions through ``SimpleRagAdapter.record_events`` (mem0
  ``add(infer=False)``, the bench's bulk ingest: one call per session);
- ``ingest floor``: the same turns embedded in one call by the bundled MiniLM on ONNX
  Runtime (the adapter's own default runtime), model already loaded;
- ``ask``: every question through ``SimpleRagAdapter.retrieve`` at 2,000 tokens, the
  query cache cleared first (each question embedded once, as at a bench's first test
  point): mem0's search on the local Qdrant, then packing the section;
- ``ask floor``: per question, one query embedding and a dot product with the stored
  turns' vectors (numpy), as the issue defines it.

Printed: wall and CPU of both ingests and their ratio; per-ask p50 of both and their
ratio; over rounds, the mean of the per-round ratios with a 95 % bootstrap interval.
Not a timed test: run it by hand on an idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from _ratios import ratio_line  # noqa: E402

from nanobot_memory_adapters.harness.datasets.locomo import Conversation, load_locomo  # noqa: E402

BUDGET = 2000


async def one_round(conv: Conversation, model: object, tmp: Path) -> dict[str, float]:
    from nanobot_memory_adapters.backends.mem0 import SimpleRagAdapter, embed_cache
    from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
    from nanobot_memory_adapters.harness.locomo_mapping import turn_event
    from nanobot_memory_adapters.tokens import clear_token_count_cache

    clear_token_count_cache()  # each round as a fresh process: no counts from an earlier one
    scope = MemoryScope(run_id="phases", persona_id=conv.sample_id)
    adapter = SimpleRagAdapter(tmp / "store")
    out: dict[str, float] = {}
    try:
        await adapter.setup_scope(scope)
        await adapter.retrieve(RetrieveRequest(  # loads mem0, Qdrant and the model
            query="warm-up", scope=scope, budget=ContextBudget(max_tokens=BUDGET)))
        wall, cpu = time.perf_counter(), time.process_time()
        for session in conv.sessions:
            receipts = await adapter.record_events(
                [turn_event(conv, t, scope) for t in session.turns])
            assert all(r.status == "committed" for r in receipts), receipts
        out["ingest_s"] = time.perf_counter() - wall
        out["ingest_cpu_s"] = time.process_time() - cpu
        texts = [t.content for t in conv.turns]
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = model.encode(texts)  # type: ignore[attr-defined]
        out["ingest_floor_s"] = time.perf_counter() - wall
        out["ingest_floor_cpu_s"] = time.process_time() - cpu
        embed_cache.clear()
        asks, floors = [], []
        for q in conv.questions:
            t = time.perf_counter()
            await adapter.retrieve(RetrieveRequest(
                query=q.question, scope=scope, budget=ContextBudget(max_tokens=BUDGET)))
            asks.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            query = model.encode([q.question])[0]  # type: ignore[attr-defined]
            np.argsort(-(vectors @ query))
            floors.append((time.perf_counter() - t) * 1000)
        out["ask_p50_ms"] = statistics.median(asks)
        out["ask_floor_p50_ms"] = statistics.median(floors)
    finally:
        await adapter.aclose()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    shared = REPO.parent / "shared"
    parser.add_argument("--data", type=Path,
                        default=shared / "data" / "locomo" / "locomo7.json")
    parser.add_argument("--sample", default="conv-26")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from nanobot_memory_adapters.local_models import bundled_minilm_path
    from nanobot_memory_adapters.onnx_embedder import load_onnx_embedder

    conv = load_locomo(args.data, [args.sample])[0]
    model = load_onnx_embedder(bundled_minilm_path(extra="mem0", setting="bench"))
    print(f"{conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions, "
          f"{len(conv.sessions)} sessions")
    rounds = []
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            got = await one_round(conv, model, Path(tmp))
        rounds.append(got)
        print(f"round {r + 1}: ingest {got['ingest_s']:.2f} s ({got['ingest_cpu_s']:.2f} CPU), "
              f"floor {got['ingest_floor_s']:.2f} s ({got['ingest_floor_cpu_s']:.2f} CPU); "
              f"ask p50 {got['ask_p50_ms']:.1f} ms, floor p50 {got['ask_floor_p50_ms']:.1f} ms",
              flush=True)
    for label, a, b in (("ingest / floor, wall", "ingest_s", "ingest_floor_s"),
                        ("ingest / floor, CPU", "ingest_cpu_s", "ingest_floor_cpu_s"),
                        ("ask p50 / floor p50", "ask_p50_ms", "ask_floor_p50_ms")):
        print(ratio_line(label, [x[a] / x[b] for x in rounds]))


if __name__ == "__main__":
    asyncio.run(main())
