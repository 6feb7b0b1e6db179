"""Ask and ingest against their embedding floors, in one process.

    python benchmarks/bench_phases.py [--data PATH] [--sample conv-26] [--rounds 3]

Each round, on a fresh store, in turn:

- ``ingest``: the conversation's sessions through the simple_rag provider's ``record_events`` (mem0
  ``add(infer=False)``, the bench's bulk ingest: one call per session);
- ``ingest floor``: the same turns embedded in one call by the bundled MiniLM on ONNX
  Runtime (the adapter's own default runtime), model already loaded;
- ``ask``: every question through its ``retrieve`` at 2,000 tokens, the
  query cache cleared first (each question embedded once, as at a bench's first test
  point): mem0's search on the local Qdrant, then packing the section;
- ``ask floor``: per question, one query embedding and a dot product with the stored
  turns' vectors (numpy), as the issue defines it;
- ``mem0 search`` (the bound of any adapter on mem0): per question, mem0's own
  ``AsyncMemory.search`` with exactly the arguments the adapter passes, on the same store,
  its query embedded by mem0's embedder (no query cache): no adapter, packing or trace;
  timed from inside by part (its query embedding, the entity embeddings and entity-store
  search of its entity boost, its semantic vector-store search, its keyword search, the
  rest), and its semantic search repeated right after without the scope filter (the same
  vectors and ``top_k``), which shows what the local Qdrant's filter costs;
- ``ingest held``: a second fresh store, the same sessions inside one
  ``ingest_lookahead`` over the whole conversation (its turns embedded in one batch of
  mem0's embedder first, as a bench unit does since 2026-11-29); ``ingest`` is without it.

The three asks of a question run in a rotating order, as do the two ingests of a round.
Printed: wall and CPU of the ingests and their ratios; per-ask p50s and their ratios;
over rounds, the mean of the per-round ratios with a 95 % bootstrap interval.
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
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from _datasets import load_or_refuse  # noqa: E402
from _ratios import ratio_line  # noqa: E402

from nanobot_memory_adapters.harness.datasets.locomo import Conversation  # noqa: E402
from nanobot_memory_adapters.store import StoreProvider  # noqa: E402

BUDGET = 2000


SEARCH_PARTS = ("query embedding", "entity embeddings", "vector store search",
                "keyword search", "entity store search", "the rest of mem0's search",
                "vector store search, no filter")


async def one_round(conv: Conversation, model: object, tmp: Path, flip: bool
                    ) -> dict[str, float]:
    from nanobot_memory_adapters.backends.mem0 import embed_cache, simple_rag_store
    from nanobot_memory_adapters.contract import ContextBudget, MemoryScope, RetrieveRequest
    from nanobot_memory_adapters.harness.locomo_mapping import turn_event
    from nanobot_memory_adapters.tokens import clear_token_count_cache

    clear_token_count_cache()  # each round as a fresh process: no counts from an earlier one
    scope = MemoryScope(run_id="phases", persona_id=conv.sample_id)
    store = simple_rag_store(tmp / "store")
    adapter = StoreProvider(store)
    held_adapter = StoreProvider(simple_rag_store(tmp / "store-held"))
    budget = ContextBudget(max_tokens=BUDGET)
    out: dict[str, float] = {}

    async def sessions(which: StoreProvider) -> None:
        for session in conv.sessions:
            receipts = await which.record_events(
                [turn_event(conv, t, scope) for t in session.turns])
            assert all(r.status == "committed" for r in receipts), receipts

    async def ingest(which: StoreProvider, ahead: bool) -> None:
        if not ahead:
            return await sessions(which)
        # the whole conversation in one batch before any session, as a bench unit does
        async with which.ingest_lookahead([turn_event(conv, t, scope) for t in conv.turns]):
            await sessions(which)

    try:
        for which in (adapter, held_adapter):
            await which.setup_scope(scope)
            await which.retrieve(RetrieveRequest(  # loads mem0, Qdrant and the model
                query="warm-up", scope=scope, budget=budget))
        for name in (("ingest", "ingest_held") if flip else ("ingest_held", "ingest")):
            wall, cpu = time.perf_counter(), time.process_time()
            await ingest(adapter if name == "ingest" else held_adapter, name == "ingest_held")
            out[f"{name}_s"] = time.perf_counter() - wall
            out[f"{name}_cpu_s"] = time.process_time() - cpu
        texts = [t.content for t in conv.turns]
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = model.encode(texts)  # type: ignore[attr-defined]
        out["ingest_floor_s"] = time.perf_counter() - wall
        out["ingest_floor_cpu_s"] = time.process_time() - cpu
        embed_cache.clear()
        memory = await store._native(scope)  # the scope's collection
        cached, own = memory.embedding_model, memory.embedding_model._embedder
        spent: dict[str, list[float]] = {"ask": [], "floor": [], "native": []}
        # Where mem0's own search spends its time: its calls timed from inside, plus its
        # semantic search repeated without the scope filter (same vectors and top_k).
        inside: dict[str, float] = {}
        searched: dict[str, Any] = {}
        split: dict[str, list[float]] = {part: [] for part in SEARCH_PARTS}
        store_search = memory.vector_store.search

        def timed(part: str, call: Any) -> Any:
            def run(*args: Any, **kwargs: Any) -> Any:
                if part == "vector store search":
                    searched.update(kwargs)
                started = time.perf_counter()
                try:
                    return call(*args, **kwargs)
                finally:
                    inside[part] = inside.get(part, 0.0) + (time.perf_counter() - started) * 1000
            return run

        entities = getattr(memory, "entity_store", None)
        if entities is memory.vector_store:  # one store: its searches are not told apart
            entities = None
        for part, owner, name in (("query embedding", own, "embed"),
                                  ("entity embeddings", own, "embed_batch"),
                                  ("vector store search", memory.vector_store, "search"),
                                  ("keyword search", memory.vector_store, "keyword_search"),
                                  ("entity store search", entities, "search")):
            if owner is not None and hasattr(owner, name):
                setattr(owner, name, timed(part, getattr(owner, name)))
        for i, q in enumerate(conv.questions):
            for kind in ("ask", "floor", "native")[i % 3:] + ("ask", "floor", "native")[:i % 3]:
                request = RetrieveRequest(query=q.question, scope=scope, budget=budget)
                t = time.perf_counter()
                if kind == "ask":
                    await adapter.retrieve(request)
                elif kind == "floor":
                    query = model.encode([q.question])[0]  # type: ignore[attr-defined]
                    np.argsort(-(vectors @ query))
                else:  # mem0 alone: the adapter's own arguments, mem0's own embedder
                    memory.embedding_model = own
                    inside.clear()
                    try:
                        text, kwargs = store.search_arguments(request)
                        await memory.search(text, **kwargs)
                    finally:
                        memory.embedding_model = cached
                spent[kind].append((time.perf_counter() - t) * 1000)
                if kind == "native":
                    for part in SEARCH_PARTS[:-2]:
                        split[part].append(inside.get(part, 0.0))
                    split["the rest of mem0's search"].append(
                        spent["native"][-1] - sum(inside.values()))
                    unfiltered = {**searched, "filters": None}
                    t = time.perf_counter()
                    store_search(**unfiltered)
                    split["vector store search, no filter"].append(
                        (time.perf_counter() - t) * 1000)
        out["ask_p50_ms"] = statistics.median(spent["ask"])
        out["ask_floor_p50_ms"] = statistics.median(spent["floor"])
        out["native_p50_ms"] = statistics.median(spent["native"])
        for part in SEARCH_PARTS:
            out[f"split {part}"] = statistics.median(split[part])
    finally:
        await adapter.aclose()
        await held_adapter.aclose()
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

    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give 1 or more")
    conv = load_or_refuse(parser, "locomo", args.data, args.sample)
    model = load_onnx_embedder(bundled_minilm_path(extra="mem0", setting="bench"))
    print(f"{conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions, "
          f"{len(conv.sessions)} sessions")
    rounds = []
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            got = await one_round(conv, model, Path(tmp), flip=r % 2 == 0)
        rounds.append(got)
        print(f"round {r + 1}: ingest {got['ingest_s']:.2f} s ({got['ingest_cpu_s']:.2f} CPU), "
              f"held {got['ingest_held_s']:.2f} s ({got['ingest_held_cpu_s']:.2f} CPU), "
              f"floor {got['ingest_floor_s']:.2f} s ({got['ingest_floor_cpu_s']:.2f} CPU); "
              f"ask p50 {got['ask_p50_ms']:.1f} ms, mem0 search p50 "
              f"{got['native_p50_ms']:.1f} ms, floor p50 {got['ask_floor_p50_ms']:.1f} ms",
              flush=True)
    print("mem0's search, p50 per part (ms) by round; 'no filter' is its semantic search "
          "repeated without the scope filter, outside the search:")
    for part in SEARCH_PARTS:
        print(f"  {part:32}: " + ", ".join(f"{x[f'split {part}']:.1f}" for x in rounds))
    print(ratio_line("vector store search p50 / mem0 search p50",
                     [x["split vector store search"] / x["native_p50_ms"] for x in rounds]))
    print(ratio_line("vector store search, no filter / with it",
                     [x["split vector store search, no filter"] / x["split vector store search"]
                      for x in rounds]))
    for label, a, b in (("ingest / floor, wall", "ingest_s", "ingest_floor_s"),
                        ("ingest / floor, CPU", "ingest_cpu_s", "ingest_floor_cpu_s"),
                        ("ingest held / floor, wall", "ingest_held_s", "ingest_floor_s"),
                        ("ingest held / floor, CPU", "ingest_held_cpu_s", "ingest_floor_cpu_s"),
                        ("ingest held / ingest, wall", "ingest_held_s", "ingest_s"),
                        ("ask p50 / floor p50", "ask_p50_ms", "ask_floor_p50_ms"),
                        ("mem0 search p50 / floor p50", "native_p50_ms", "ask_floor_p50_ms"),
                        ("ask p50 / mem0 search p50", "ask_p50_ms", "native_p50_ms")):
        print(ratio_line(label, [x[a] / x[b] for x in rounds]))


if __name__ == "__main__":
    asyncio.run(main())
