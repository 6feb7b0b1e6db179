"""Capabilities are declared data (``ProviderInfo.capabilities``), which may depend on
config: ``supports`` and ``capabilities_of`` read the declaration, so a provider needs no
subclass per capability."""

from __future__ import annotations

import pytest

from nanobot_memory_adapters.backends.memos import MemOSConfig, MemOSStore
from nanobot_memory_adapters.contract import (
    AdapterError,
    FeedbackRequest,
    MemoryScope,
    capabilities_of,
    supports,
    undelivered_capabilities,
)
from nanobot_memory_adapters.store import StoreProvider
from nanobot_memory_adapters.testing.reference import ReferenceStore


async def test_memos_feedback_is_declared_by_config_not_by_a_subclass():
    plain = StoreProvider(MemOSStore(MemOSConfig(base_url="http://127.0.0.1:9")))
    fed = StoreProvider(MemOSStore(MemOSConfig(base_url="http://127.0.0.1:9", feedback=True)))
    try:
        assert type(plain.store) is type(fed.store)  # one class; config declares
        assert capabilities_of(plain) == ["readiness", "native_query"]
        assert capabilities_of(fed) == ["feedback", "readiness", "native_query"]
        assert not supports(plain, "feedback") and supports(fed, "feedback")
        assert supports(plain, "readiness")
        with pytest.raises(AdapterError, match="does not offer apply_feedback"):
            await plain.apply_feedback(FeedbackRequest(
                scope=MemoryScope(run_id="r", persona_id="p"), feedback="no"))
    finally:
        await plain.aclose()
        await fed.aclose()


class Undeclared:
    """A provider written before declarations: its methods are its capabilities."""

    async def readiness(self, scope): ...  # type: ignore[no-untyped-def]
    async def wait_until_ready(self, scope, timeout_s): ...  # type: ignore[no-untyped-def]


def test_an_undeclared_provider_is_read_from_its_methods():
    assert capabilities_of(Undeclared()) == ["readiness"]
    assert undelivered_capabilities(Undeclared()) == []


def test_a_declaration_without_methods_is_reported():
    adapter = StoreProvider(ReferenceStore())
    adapter.info = adapter.info.model_copy(update={"capabilities": ("bulk_ingest",)})
    assert capabilities_of(adapter) == []
    assert undelivered_capabilities(adapter) == ["bulk_ingest"]


class RenameAndPeek:
    """Native operations that write whenever they are reached: only the gate can stop
    them (a store's ``mutations`` object)."""

    operations = frozenset({"rename", "peek"})
    read_operations = frozenset({"peek"})

    def __init__(self) -> None:
        self.reached: list[str] = []

    async def run(self, scope, operation, payload):  # type: ignore[no-untyped-def]
        self.reached.append(operation)
        return {"status": "committed", "operation": operation}


class MutatingStore(ReferenceStore):
    def __init__(self) -> None:
        super().__init__()
        self.info = self.info.model_copy(update={"capabilities": None})  # read off
        self.mutations = RenameAndPeek()


def Mutates() -> StoreProvider:
    return StoreProvider(MutatingStore())


async def test_the_read_only_gate_for_native_mutation_is_the_wrapper_s_not_the_store_s():
    from nanobot_memory_adapters.contract import AdapterMode

    adapter, scope = Mutates(), MemoryScope(run_id="r", persona_id="p")
    await adapter.set_mode(AdapterMode(read_only=True, reason="test_session"))
    # any write operation, declared or not, is refused before the backend sees it
    for operation in ("rename", "no-such-op"):
        answer = await adapter.native_mutation(scope, operation, {})
        assert answer == {"status": "skipped_read_only", "operation": operation}
    # a declared read passes the gate
    assert (await adapter.native_mutation(scope, "peek", {}))["status"] == "committed"
    assert adapter.store.mutations.reached == ["peek"]
    await adapter.set_mode(AdapterMode(read_only=False, reason="test_session_end"))
    assert (await adapter.native_mutation(scope, "rename", {}))["status"] == "committed"


async def test_the_wrapper_offers_a_capability_only_when_the_store_fills_its_attribute():
    plain = StoreProvider(ReferenceStore())
    assert not supports(plain, "native_mutation") and not supports(plain, "feedback")
    assert capabilities_of(Mutates()) == ["native_mutation"]
    with pytest.raises(AdapterError, match="does not offer apply_feedback"):
        await plain.apply_feedback(FeedbackRequest(
            scope=MemoryScope(run_id="r", persona_id="p"), feedback="no"))
    # declared without its attribute: reported, not offered
    hollow = StoreProvider(ReferenceStore())
    hollow.info = hollow.info.model_copy(update={"capabilities": ("session_end",)})
    assert undelivered_capabilities(hollow) == ["session_end"] and not capabilities_of(hollow)


def test_a_store_that_declares_what_it_does_not_fill_is_refused_when_wrapped():
    store = ReferenceStore()
    store.info = store.info.model_copy(update={"capabilities": ("feedback",)})
    with pytest.raises(TypeError, match="declares feedback but does not set feedback"):
        StoreProvider(store)


class BatchingStore(ReferenceStore):
    """Bulk ingest as a store attribute: one native call per batch."""

    def __init__(self) -> None:
        super().__init__()
        self.info = self.info.model_copy(update={"capabilities": None})
        self.batches: list[int] = []
        self.record_batch = self._batch

    async def _batch(self, events):  # type: ignore[no-untyped-def]
        self.batches.append(len(events))
        return [await self.record(e) for e in events]


async def test_a_store_s_record_batch_is_bulk_ingest_behind_the_wrapper_s_gate():
    from datetime import UTC, datetime

    from nanobot_memory_adapters.contract import AdapterMode, MemoryEvent

    provider = StoreProvider(BatchingStore())
    assert capabilities_of(provider) == ["bulk_ingest"]
    events = [MemoryEvent(event_id=f"e{i}", run_id="r", user_id="p", agent_id="bot",
                          session_id="s", turn_id=str(i), timestamp=datetime.now(UTC),
                          messages=[{"role": "user", "content": f"turn {i}"}])
              for i in range(3)]
    await provider.set_mode(AdapterMode(read_only=True, reason="test_session"))
    assert {r.status for r in await provider.record_events(events)} == {"skipped_read_only"}
    assert provider.store.batches == []
    await provider.set_mode(AdapterMode(read_only=False, reason="test_session_end"))
    receipts = await provider.record_events(events)
    assert [r.status for r in receipts] == ["committed"] * 3 and provider.store.batches == [3]
    with pytest.raises(AdapterError, match="does not offer readiness"):
        await provider.readiness(MemoryScope(run_id="r", persona_id="p"))


class DiagnosingStore(ReferenceStore):
    """Provenance and a native query as store attributes (diagnostics, read-only)."""

    def __init__(self) -> None:
        super().__init__()
        self.info = self.info.model_copy(update={"capabilities": None})
        self.provenance = self._provenance
        self.native_query = self._ask

    async def _provenance(self, scope, native_id=None, **query):  # type: ignore[no-untyped-def]
        return {"native_id": native_id, "rows": len(self._rows.get(scope.key, []))}

    async def _ask(self, scope, query, **options):  # type: ignore[no-untyped-def]
        if query == "explode":
            raise RuntimeError("backend exploded")
        return {"query": query, **options}


async def test_every_capability_of_the_contract_has_a_store_attribute():
    from nanobot_memory_adapters.contract import CAPABILITIES
    from nanobot_memory_adapters.store import STORE_CAPABILITIES

    assert set(STORE_CAPABILITIES) == set(CAPABILITIES)
    provider = StoreProvider(DiagnosingStore())
    assert capabilities_of(provider) == ["provenance", "native_query"]
    scope = MemoryScope(run_id="r", persona_id="p")
    assert await provider.provenance(scope, "m1") == {"native_id": "m1", "rows": 0}
    assert await provider.native_query(scope, "who", k=3) == {"query": "who", "k": 3}
    with pytest.raises(AdapterError, match="backend exploded") as raised:
        await provider.native_query(scope, "explode")
    assert raised.value.operation == "native_query"
    with pytest.raises(AdapterError, match="does not offer provenance"):
        await StoreProvider(ReferenceStore()).provenance(scope)


class ConsolidatingStore(ReferenceStore):
    """Derives memory on request (as nanobot's Dream): ``consolidate`` writes."""

    def __init__(self) -> None:
        super().__init__()
        self.info = self.info.model_copy(update={"capabilities": None})
        self.consolidated: list[str] = []
        self.readiness = self._readiness
        self.consolidate = self._consolidate

    async def _readiness(self, scope):  # type: ignore[no-untyped-def]
        from nanobot_memory_adapters.contract import Readiness

        return Readiness(status="ready" if self.consolidated else "pending")

    async def _consolidate(self, scope, timeout_s):  # type: ignore[no-untyped-def]
        self.consolidated.append(scope.key)


async def test_the_wrapper_never_consolidates_while_read_only():
    """wait_until_ready runs a store's consolidation (a write) only outside read-only
    mode: a test session must not change memory by asking whether it is ready."""
    from nanobot_memory_adapters.contract import AdapterMode

    provider = StoreProvider(ConsolidatingStore())
    scope = MemoryScope(run_id="r", persona_id="p")
    await provider.set_mode(AdapterMode(read_only=True, reason="test_session"))
    state = await provider.wait_until_ready(scope, timeout_s=5)
    assert state.status == "pending" and provider.store.consolidated == []
    await provider.set_mode(AdapterMode(read_only=False, reason="test_session_end"))
    state = await provider.wait_until_ready(scope, timeout_s=5)
    assert state.status == "ready" and provider.store.consolidated == [scope.key]
    assert state.waited_ms is not None


class ServerDown(Exception):
    """An SDK's own error type, which only its store knows how to read."""


class ExplainingStore(ReferenceStore):
    """A store that says what its SDK's errors mean (``native_error``)."""

    def __init__(self, failure: Exception) -> None:
        super().__init__()
        self.failure = failure

    async def retrieve(self, request):  # type: ignore[no-untyped-def]
        raise self.failure

    def native_error(self, exc: Exception, operation: str) -> AdapterError | None:
        if isinstance(exc, ServerDown):
            return AdapterError(f"the server at :9 is down ({exc})", backend_name="ref",
                                operation=operation, retryable=True, raw={"url": ":9"})
        return None


async def test_a_store_says_what_its_sdks_errors_mean_and_the_wrapper_wraps_the_rest():
    from nanobot_memory_adapters.contract import ContextBudget, RetrieveRequest

    scope = MemoryScope(run_id="r", persona_id="p")
    request = RetrieveRequest(scope=scope, query="q", budget=ContextBudget(max_tokens=100))
    down = StoreProvider(ExplainingStore(ServerDown("refused")))
    with pytest.raises(AdapterError, match=r"the server at :9 is down \(refused\)") as said:
        await down.retrieve(request)
    assert said.value.retryable and said.value.raw == {"url": ":9"}
    assert said.value.operation == "retrieve" and isinstance(said.value.__cause__, ServerDown)
    other = StoreProvider(ExplainingStore(ValueError("bad row")))
    with pytest.raises(AdapterError, match="ValueError: bad row") as generic:
        await other.retrieve(request)
    assert generic.value.operation == "retrieve" and not generic.value.retryable


class OneFailsStore(BatchingStore):
    """A bulk hook that stored every event but one, whose own failure stands in its place;
    runs are one per session (``batch_key``)."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_key = lambda event: event.session_id

    async def _batch(self, events):  # type: ignore[no-untyped-def]
        self.batches.append(len(events))
        return [ConnectionError("socket closed") if e.event_id == "e1" else await self.record(e)
                for e in events]


async def test_a_bulk_hook_may_put_any_exception_in_an_events_place():
    from datetime import UTC, datetime

    from nanobot_memory_adapters.contract import MemoryEvent

    provider = StoreProvider(OneFailsStore())
    events = [MemoryEvent(event_id=f"e{i}", run_id="r", user_id="p", agent_id="bot",
                          session_id=f"s{i // 2}", turn_id=str(i), timestamp=datetime.now(UTC),
                          messages=[{"role": "user", "content": f"turn {i}"}])
              for i in range(3)]
    receipts = await provider.record_events(events)
    assert [r.status for r in receipts] == ["committed", "failed", "committed"]
    assert provider.store.batches == [2, 1]  # the store's own runs: one per session
    failed = receipts[1]
    assert failed.error and "ConnectionError: socket closed" in failed.error["message"]
    assert failed.retryable  # a connection error: worth a retry
