"""Per-turn ingest cost of the mem0 adapter (infer=False) with 0 vs N turns already stored.

    python benchmarks/bench_ingest_scaling.py [--stored 2000] [--turns 41]

Two stores in one process: one empty, one pre-filled with ``--stored`` memories of the
same scope (put there through mem0's own ``vector_store.insert``, with the payload mem0
writes for a verbatim message: data, hash, user_id, run_id, event_id; random unit vectors,
since only the store's size matters here). Then ``--turns`` new turns are written with
``record_event`` (one mem0 ``add`` each, the replay check included), alternating the
two stores turn by turn so machine load hits both alike. Prints the median per-turn
cost on each and their ratio (target: within 1.2x) with a 95 % bootstrap interval over
the turns (the difference of the medians of the log costs, each store resampled on its
own; an odd ``--turns`` makes it exactly the ratio of the medians). The first write of
a scope lists the scope once (the replay index); it is reported apart, not in the median.
Not a timed test: run it by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MEM0_TELEMETRY", "False")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from nanobot_memory_adapters.backends.mem0 import Mem0Store  # noqa: E402
from nanobot_memory_adapters.contract import MemoryEvent, MemoryScope, Message  # noqa: E402
from nanobot_memory_adapters.store import StoreProvider  # noqa: E402

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _event(scope: MemoryScope, i: int) -> MemoryEvent:
    return MemoryEvent(
        event_id=f"new-{i}-{uuid.uuid4().hex[:6]}", run_id=scope.run_id,
        user_id=scope.persona_id, agent_id="nanobot", session_id="s1", turn_id=str(i),
        timestamp=T0 + timedelta(minutes=i),
        messages=[Message(role="user", content=f"On day {i} I watered the ferns and "
                          f"repotted {i % 7 + 1} cactus plants before lunch.")],
    )


async def _prefill(adapter: StoreProvider, scope: MemoryScope, n: int) -> None:
    if not n:
        return
    memory = await adapter.store._native(scope)  # the scope's collection
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, adapter.store.config.embedding_dims))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    payloads = [{"data": f"stored turn {i}", "hash": uuid.uuid4().hex,
                 "user_id": scope.persona_id, "run_id": scope.run_id,
                 "event_id": f"old-{i}", "created_at": T0.isoformat()} for i in range(n)]
    ids = [str(uuid.uuid4()) for _ in range(n)]
    await asyncio.to_thread(memory.vector_store.insert, vectors.tolist(), payloads, ids)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stored", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=41)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scope = MemoryScope(run_id="scaling", persona_id="p1", agent_id="nanobot")
        stores = {0: StoreProvider(Mem0Store(Path(tmp) / "empty")),
                  args.stored: StoreProvider(Mem0Store(Path(tmp) / "full"))}
        try:
            for n, adapter in stores.items():
                await adapter.store._native()
                await _prefill(adapter, scope, n)
            times: dict[int, list[float]] = {n: [] for n in stores}
            for i in range(args.turns + 1):
                for n, adapter in (stores.items() if i % 2 else reversed(stores.items())):
                    t = time.perf_counter()
                    receipt = await adapter.record_event(_event(scope, i))
                    times[n].append(time.perf_counter() - t)
                    assert receipt.status == "committed" and receipt.native_ids
        finally:
            for adapter in stores.values():
                await adapter.aclose()
    med = {n: statistics.median(ts[1:]) * 1000 for n, ts in times.items()}
    for n, ts in times.items():
        print(f"stored={n:>5}: first write {ts[0] * 1000:7.1f} ms (lists the scope once); "
              f"per turn median {med[n]:6.1f} ms over {len(ts) - 1} turns")
    from nanobot_memory_adapters.stats import median_difference

    est = median_difference([float(x) for x in np.log(times[args.stored][1:])],
                            [float(x) for x in np.log(times[0][1:])])
    print(f"per-turn cost ratio n={args.stored} / n=0: {med[args.stored] / med[0]:.2f} "
          f"[{np.exp(est.low):.2f}, {np.exp(est.high):.2f}] (95 % bootstrap over "
          f"{est.n} turns each)")


if __name__ == "__main__":
    asyncio.run(main())
