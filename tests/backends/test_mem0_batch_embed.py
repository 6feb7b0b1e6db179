"""mem0 bulk ingest embeds its turns in one batch of mem0's own embedder (embed_cache):
the vectors are the ones mem0's embedder gives one by one (within 1e-6), so the stored
points and the search results are those of one-by-one ingest. Real mem0, local Qdrant,
real MiniLM."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from nanobot_memory_adapters.backends.mem0 import Mem0Store
from nanobot_memory_adapters.backends.mem0.embed_cache import CachedQueryEmbedder
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    RetrieveRequest,
    capabilities_of,
)
from nanobot_memory_adapters.events import Message
from nanobot_memory_adapters.store import StoreProvider

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
TURNS = [
    "I keep three beehives on the roof.",
    "My sister Ana lives in Porto.",
    "I paddle a kayak on Sundays.",
    "Ok!",
    "I bake rye bread on Fridays, and sometimes a sourdough loaf when the starter is lively.",
    "Ok!",  # the same text twice in one batch
    "We adopted a grey cat called Pixel last spring.",
]
QUESTIONS = ["Where does my sister live?", "What pets do I have?", "What do I bake?",
             "What do I do on Sundays?"]


def _scope() -> MemoryScope:
    return MemoryScope(run_id=f"r-{uuid.uuid4().hex[:8]}", persona_id="alice",
                       agent_id="nanobot")


def _events(scope: MemoryScope) -> list[MemoryEvent]:
    return [MemoryEvent(
        event_id=f"e{i}-{uuid.uuid4().hex[:6]}", run_id=scope.run_id,
        user_id=scope.persona_id, agent_id="nanobot", session_id="s1", turn_id=str(i),
        timestamp=T0 + timedelta(minutes=i),
        messages=[Message(role="user", content=text, name="Alice")],
    ) for i, text in enumerate(TURNS)]


class Counting:
    """mem0's embedder, counting what reaches it."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.single: list[tuple[str, object]] = []
        self.batches: list[list[str]] = []

    def embed(self, text, memory_action=None):
        self.single.append((text, memory_action))
        return self.inner.embed(text, memory_action)

    def embed_batch(self, texts, memory_action="add"):
        self.batches.append(list(texts))
        return self.inner.embed_batch(texts, memory_action)


def _unit(vector) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float64)
    return v / np.linalg.norm(v)


async def test_bulk_ingest_embeds_once_in_a_batch_with_the_vectors_and_results_of_one_by_one(
    data_dir,
):
    adapter = StoreProvider(Mem0Store(data_dir))  # no LLM: simple_rag, add(infer=False)
    try:
        memory = await adapter.store._native()
        proxy = memory.embedding_model
        assert isinstance(proxy, CachedQueryEmbedder)
        inner = proxy._embedder
        counting = Counting(inner)
        proxy._embedder = counting
        batched, single = _scope(), _scope()

        receipts = await adapter.record_events(_events(batched))
        assert [r.status for r in receipts] == ["committed"] * len(TURNS)
        # one batch of the distinct texts; no add reached the embedder one by one
        assert counting.batches == [list(dict.fromkeys(TURNS))]
        assert [c for c in counting.single if c[1] == "add"] == []
        assert proxy._batch == {} and not proxy._holders  # released after the call

        for event in _events(single):  # the old way: one add, one embed per turn
            assert (await adapter.record_event(event)).status == "committed"
        assert len([c for c in counting.single if c[1] == "add"]) == len(TURNS)

        # the stored vectors are mem0's one-by-one vectors (Qdrant keeps them normalized)
        ids = [i for r in receipts for i in r.native_ids]
        store = (await adapter.store._native(batched)).vector_store  # the scope's collection
        points = store.client.retrieve(store.collection_name, ids=ids, with_vectors=True)
        by_id = {str(p.id): p for p in points}
        for receipt, text in zip(receipts, TURNS, strict=True):
            (native_id,) = receipt.native_ids
            stored = _unit(by_id[native_id].vector)
            assert np.abs(stored - _unit(inner.embed(text, "add"))).max() < 1e-6

        # and the results are the same: texts, order and scores
        for question in QUESTIONS:
            got = [await adapter.retrieve(RetrieveRequest(
                query=question, scope=scope, budget=ContextBudget(max_tokens=1000)))
                for scope in (batched, single)]
            assert [i.text for i in got[0].items] == [i.text for i in got[1].items]
            assert [i.score for i in got[0].items] == pytest.approx(
                [i.score for i in got[1].items], abs=1e-6)
            assert got[0].items
    finally:
        await adapter.aclose()


def test_held_vectors_are_served_for_add_only_and_dropped_on_release():
    """Two bulk calls may hold the same text; it stays until the last releases it, and
    a search (or an add after release) goes to the embedder."""

    class Embedder:
        def __init__(self) -> None:
            self.calls: list[tuple[str, object]] = []

        def embed(self, text, memory_action=None):
            self.calls.append((text, memory_action))
            return [1.0, float(len(text))]

        def embed_batch(self, texts, memory_action="add"):
            self.calls.append(("<batch>", tuple(texts)))
            return [[2.0, float(len(t))] for t in texts]

    inner = Embedder()
    proxy = CachedQueryEmbedder(inner, f"fake-{uuid.uuid4().hex}")
    first = proxy.hold(["a", "bb", "a"])
    second = proxy.hold(["bb", "ccc"])  # only "ccc" is new
    assert inner.calls == [("<batch>", ("a", "bb")), ("<batch>", ("ccc",))]
    assert proxy.embed("a", "add") == [2.0, 1.0]
    assert proxy.embed("bb", "update") == [1.0, 2.0]  # only adds are served
    proxy.release(first)
    assert proxy.embed("bb", "add") == [2.0, 2.0]  # still held by the second call
    assert proxy.embed("a", "add") == [1.0, 1.0]
    proxy.release(second)
    assert proxy.embed("ccc", "add") == [1.0, 3.0]
    assert proxy._batch == {} and not proxy._holders


async def test_a_failed_batch_embedding_leaves_each_add_to_embed_on_its_own(data_dir):
    """The batch is only a shortcut: when mem0's embedder cannot embed the batch, every
    turn is still added (embedded one by one) and committed, nothing raised."""
    adapter = StoreProvider(Mem0Store(data_dir))
    try:
        proxy = (await adapter.store._native()).embedding_model
        counting = Counting(proxy._embedder)

        def broken_batch(texts, memory_action="add"):
            raise RuntimeError("batch endpoint down")

        counting.embed_batch = broken_batch
        proxy._embedder = counting
        receipts = await adapter.record_events(_events(_scope()))
        assert [r.status for r in receipts] == ["committed"] * len(TURNS)
        assert [t for t, action in counting.single if action == "add"] == TURNS
    finally:
        await adapter.aclose()


async def test_ingest_lookahead_embeds_a_conversation_once_and_stores_nothing_ahead(data_dir):
    """simple_rag's ``ingest_lookahead``: the events' distinct texts in one batch of mem0's
    embedder when the context opens; the sessions recorded inside it embed nothing more;
    nothing is retrievable before its session is recorded; leaving drops the vectors,
    and the stored vectors are mem0's one-by-one ones."""
    adapter = StoreProvider(Mem0Store(data_dir))
    try:
        assert "ingest_lookahead" in capabilities_of(adapter)
        memory = await adapter.store._native()
        proxy = memory.embedding_model
        inner = proxy._embedder
        counting = Counting(inner)
        proxy._embedder = counting
        scope = _scope()
        events = _events(scope)
        first, second = events[:3], events[3:]
        async with adapter.ingest_lookahead(events):
            assert counting.batches == [list(dict.fromkeys(TURNS))]
            assert (await adapter.retrieve(RetrieveRequest(  # held is not stored
                query="Where does my sister live?", scope=scope,
                budget=ContextBudget(max_tokens=1000)))).items == []
            receipts = [*await adapter.record_events(first),
                        *await adapter.record_events(second)]
            assert [r.status for r in receipts] == ["committed"] * len(TURNS)
            assert counting.batches == [list(dict.fromkeys(TURNS))]  # no other batch
            assert [c for c in counting.single if c[1] == "add"] == []
            assert proxy._batch  # held until the context ends
        assert proxy._batch == {} and not proxy._holders
        store = (await adapter.store._native(scope)).vector_store  # the scope's collection
        points = store.client.retrieve(
            store.collection_name,
            ids=[i for r in receipts for i in r.native_ids], with_vectors=True)
        by_id = {str(p.id): p for p in points}
        for receipt, text in zip(receipts, TURNS, strict=True):
            (native_id,) = receipt.native_ids
            assert np.abs(_unit(by_id[native_id].vector)
                          - _unit(inner.embed(text, "add"))).max() < 1e-6
        found = await adapter.retrieve(RetrieveRequest(
            query="Where does my sister live?", scope=scope,
            budget=ContextBudget(max_tokens=1000)))
        assert "My sister Ana lives in Porto." in [i.text for i in found.items]
    finally:
        await adapter.aclose()


async def test_ingest_lookahead_releases_on_error_and_a_failed_batch_is_only_skipped(data_dir):
    """An exception inside the context still drops what was held; an embedder that cannot
    embed the batch leaves the context a no-op (each add then embeds on its own)."""
    adapter = StoreProvider(Mem0Store(data_dir))
    try:
        proxy = (await adapter.store._native()).embedding_model
        with pytest.raises(RuntimeError, match="cut"):
            async with adapter.ingest_lookahead(_events(_scope())):
                assert proxy._batch
                raise RuntimeError("cut")
        assert proxy._batch == {} and not proxy._holders
        counting = Counting(proxy._embedder)

        def broken_batch(texts, memory_action="add"):
            raise RuntimeError("batch endpoint down")

        counting.embed_batch = broken_batch
        proxy._embedder = counting
        scope = _scope()
        async with adapter.ingest_lookahead(_events(scope)):
            receipts = await adapter.record_events(_events(scope))
        assert [r.status for r in receipts] == ["committed"] * len(TURNS)
        assert [t for t, action in counting.single if action == "add"] == TURNS
    finally:
        await adapter.aclose()


def test_mem0_with_extraction_does_not_offer_the_lookahead(data_dir):
    """With infer=True mem0 embeds the facts its LLM extracts, not the turns."""
    from nanobot_memory_adapters.backends.mem0.config import LLMSettings, Mem0Config

    adapter = StoreProvider(Mem0Store(data_dir, Mem0Config(
        llm=LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key="k"))))
    assert "ingest_lookahead" not in capabilities_of(adapter)


async def test_a_cancelled_hold_releases_what_its_thread_held():
    """The batch runs in a worker thread that a cancelled caller cannot stop: what it holds
    once it finishes is released, not left held for the adapter's life."""
    import asyncio
    import threading

    from nanobot_memory_adapters.backends.mem0.store import _held_or_released

    started, go = threading.Event(), threading.Event()

    class Slow:
        def embed(self, text, memory_action=None):
            return [0.0]

        def embed_batch(self, texts, memory_action="add"):
            started.set()
            go.wait(5)
            return [[1.0] for _ in texts]

    proxy = CachedQueryEmbedder(Slow(), f"slow-{uuid.uuid4().hex}")
    finished = threading.Event()
    hold = proxy.hold

    def hold_then_say(texts):  # type: ignore[no-untyped-def]
        try:
            return hold(texts)
        finally:
            finished.set()

    proxy.hold = hold_then_say  # type: ignore[method-assign]
    task = asyncio.ensure_future(_held_or_released(proxy, ["a", "b"]))
    while not started.is_set():
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    go.set()
    assert await asyncio.to_thread(finished.wait, 5)  # the thread held "a" and "b"
    for _ in range(200):  # and the loop then runs the release
        if proxy._batch == {} and not proxy._holders:
            break
        await asyncio.sleep(0.01)
    assert proxy._batch == {} and not proxy._holders
    assert await _held_or_released(proxy, ["c"]) == ["c"]  # uncancelled: held
    assert "c" in proxy._batch
