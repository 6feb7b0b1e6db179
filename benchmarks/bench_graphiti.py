"""Benchmark the Graphiti adapter: add_episode and search p50/p95, and the adapter's
overhead against calling Graphiti directly. Embedded Kuzu, the bundled MiniLM, and the
deterministic LLM double from ``tests/llm_double`` (instant answers over local HTTP, so
the figures are Graphiti + adapter cost, not a model's).

    python benchmarks/bench_graphiti.py [--turns 60] [--queries 40] [--bulk 20]
                                        [--json out.json]

- Ingest: a deterministic conversation (one persona moving between cities, changing
  jobs, stating preferences: facts that Graphiti extracts, dedupes and invalidates).
  Turn i goes through ``adapter.record_event`` into group A and, with the exact
  arguments the adapter builds, through ``Graphiti.add_episode`` into group B on the same
  Graphiti instance; which goes first alternates. Both groups grow identically.
- Search: each query goes through ``adapter.retrieve`` and through ``Graphiti.search_``
  with the adapter's own query text, copied SearchConfig and filters, both on group A
  (alternating order); the returned facts must match one for one.
- Bulk: ``record_events`` (one ``add_episode_bulk`` call) for ``--bulk`` more turns.
Not a timed test: run it by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from graphiti_core.nodes import EpisodeType  # noqa: E402

from nanobot_memory_adapters.backends.graphiti import GraphitiConfig, GraphitiStore  # noqa: E402
from nanobot_memory_adapters.backends.graphiti.ids import source_description  # noqa: E402
from nanobot_memory_adapters.contract import (  # noqa: E402
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    RetrieveRequest,
)
from nanobot_memory_adapters.sizing import top_k  # noqa: E402
from nanobot_memory_adapters.stats import percentile  # noqa: E402
from nanobot_memory_adapters.store import StoreProvider  # noqa: E402
from tests.llm_double import LLMDouble  # noqa: E402

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
CITIES = ["Paris", "Berlin", "Lisbon", "Kyoto", "Quito", "Oslo", "Nairobi", "Hanoi"]
ORGS = ["Acme Corp", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries"]
THINGS = ["green tea", "jazz", "road cycling", "chess", "sourdough", "birdwatching",
          "oboe music", "sci-fi novels", "hiking", "pottery"]
QUERIES = [
    "Where do I live now?", "Where did I live before?", "Where do I work?",
    "What do I like?", "What is my favorite colour?", "Which cities have I lived in?",
    "What hobbies do I have?", "Which companies did I join?", "What music do I enjoy?",
    "What did I visit last year?",
]


def statement(i: int) -> str:
    kind = i % 5
    if kind == 0:
        return f"I live in {CITIES[i // 5 % len(CITIES)]}."
    if kind == 1:
        return f"I like {THINGS[i % len(THINGS)]}."
    if kind == 2:
        return f"I joined {ORGS[i // 5 % len(ORGS)]}."
    if kind == 3:
        return f"I moved to {CITIES[(i // 5 + 3) % len(CITIES)]} last month."
    return f"My favorite colour is {['teal', 'amber', 'crimson', 'olive'][i // 5 % 4]}."


def event(scope: MemoryScope, i: int) -> MemoryEvent:
    return MemoryEvent(
        event_id=f"{scope.run_id}-{scope.persona_id}-{i}",
        run_id=scope.run_id,
        user_id=scope.persona_id,
        agent_id="nanobot",
        session_id=f"s{i // 10}",
        turn_id=str(i),
        timestamp=T0 + timedelta(days=i),
        messages=[
            {"role": "user", "content": statement(i)},
            {"role": "assistant", "content": "Noted, thanks for telling me."},
        ],
        context="personal",
    )


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 50), 2),
        "p95_ms": round(percentile(values, 95), 2),
        "mean_ms": round(statistics.fmean(values), 2),
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    with LLMDouble() as double, tempfile.TemporaryDirectory() as tmp:
        config = GraphitiConfig.model_validate(
            {"llm": {"base_url": double.base_url, "model": "double"}}
        )
        adapter = StoreProvider(GraphitiStore(config, data_dir=Path(tmp)))
        started = time.perf_counter()
        scope_a = MemoryScope(run_id="bench", persona_id="alice")
        await adapter.setup_scope(scope_a)
        open_ms = (time.perf_counter() - started) * 1000
        graphiti = await adapter.store.graph.graphiti()
        scope_b = MemoryScope(run_id="bench", persona_id="alice-direct")
        group_b = adapter.store.graph.group_id(scope_b)

        async def direct_add(ev: MemoryEvent) -> float:
            t = time.perf_counter()
            await graphiti.add_episode(
                name=f"{ev.session_id}:{ev.turn_id}",
                episode_body=adapter.store.writes.episode_body(ev),
                source_description=source_description(ev),
                reference_time=ev.timestamp,
                source=EpisodeType.message,
                group_id=group_b,
                **adapter.store.writes.episode_kwargs(),
            )
            return (time.perf_counter() - t) * 1000

        async def adapter_add(ev: MemoryEvent) -> float:
            t = time.perf_counter()
            receipt = await adapter.record_event(ev)
            assert receipt.status == "committed", receipt
            return (time.perf_counter() - t) * 1000

        add_adapter: list[float] = []
        add_direct: list[float] = []
        for i in range(args.turns):
            ev_a, ev_b = event(scope_a, i), event(scope_b, i)
            if i % 2:
                add_direct.append(await direct_add(ev_b))
                add_adapter.append(await adapter_add(ev_a))
            else:
                add_adapter.append(await adapter_add(ev_a))
                add_direct.append(await direct_add(ev_b))

        search_adapter: list[float] = []
        search_direct: list[float] = []
        mismatches = 0
        budget = ContextBudget(max_tokens=1200)
        for q in range(args.queries):
            query = QUERIES[q % len(QUERIES)]
            req_a = RetrieveRequest(query=query, scope=scope_a, budget=budget)

            async def via_adapter(req: RetrieveRequest = req_a) -> list[str]:
                t = time.perf_counter()
                result = await adapter.retrieve(req)
                search_adapter.append((time.perf_counter() - t) * 1000)
                return [i.text for i in result.items]

            async def via_graphiti(req: RetrieveRequest = req_a) -> list[str]:
                t = time.perf_counter()
                limit = top_k(req.budget, config.search.item_text_tokens,
                              config.search.max_results)
                filters, _, _ = adapter.store.search.search_filters(req)
                search = adapter.store.search
                results = await graphiti.search_(
                    search.query_text(req), config=search.search_config(limit),
                    group_ids=[adapter.store.graph.group_id(req.scope)], search_filter=filters,
                )
                search_direct.append((time.perf_counter() - t) * 1000)
                return [e.fact for e in results.edges]

            if q % 2:
                direct_facts = await via_graphiti()
                adapter_facts = await via_adapter()
            else:
                adapter_facts = await via_adapter()
                direct_facts = await via_graphiti()
            mismatches += adapter_facts != direct_facts

        bulk_scope = MemoryScope(run_id="bench", persona_id="alice-bulk")
        t = time.perf_counter()
        receipts = await adapter.record_events([event(bulk_scope, i) for i in range(args.bulk)])
        bulk_ms = (time.perf_counter() - t) * 1000
        assert all(r.status == "committed" for r in receipts)
        one = await adapter.retrieve(RetrieveRequest(query="Where do I live now?",
                                                     scope=scope_a, budget=budget))
        await adapter.aclose()

    def overhead(a: list[float], d: list[float]) -> dict[str, float]:
        return {
            "p50_ms": round(percentile(a, 50) - percentile(d, 50), 2),
            "p50_pct": round(100 * (percentile(a, 50) - percentile(d, 50)) / percentile(d, 50), 1),
        }

    return {
        "setup": {"open_ms": round(open_ms, 1), "turns": args.turns, "queries": args.queries},
        "add_episode": {"adapter": summary(add_adapter), "direct": summary(add_direct),
                        "overhead": overhead(add_adapter, add_direct)},
        "search": {"adapter": summary(search_adapter), "direct": summary(search_direct),
                   "overhead": overhead(search_adapter, search_direct),
                   "result_mismatches": mismatches},
        "bulk": {"turns": args.bulk, "total_ms": round(bulk_ms, 1),
                 "per_turn_ms": round(bulk_ms / max(1, args.bulk), 1)},
        "final_context_items": len(one.items),
        "llm_calls": len(double.chat_requests()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--bulk", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = asyncio.run(bench(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
