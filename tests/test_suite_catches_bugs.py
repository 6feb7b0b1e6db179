"""The contract suite must fail on adapters that break the contract (it is not a rubber stamp)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import pytest

from nanobot_memory_adapters.base import BaseAdapter, NativeRetrieval, NativeWrite
from nanobot_memory_adapters.conditions.full_history import FullHistory
from nanobot_memory_adapters.contract import (
    ContextBudget,
    MemoryEvent,
    MemoryScope,
    RetrieveRequest,
    WriteReceipt,
)
from nanobot_memory_adapters.store import StoreProvider, as_provider
from nanobot_memory_adapters.testing import SuiteTarget, run_item
from nanobot_memory_adapters.testing.reference import ReferenceStore


def reference() -> StoreProvider:
    return StoreProvider(ReferenceStore())


def event(run: str, persona: str, text: str, n: int = 1) -> MemoryEvent:
    return MemoryEvent(
        event_id=f"{run}-{persona}-{n}",
        run_id=run,
        user_id=persona,
        agent_id="bot",
        session_id="s",
        turn_id=str(n),
        timestamp=datetime(2024, 1, 1, tzinfo=UTC),
        messages=[{"role": "user", "content": text}],
    )


def request(run: str, persona: str, query: str, max_tokens: int = 500) -> RetrieveRequest:
    return RetrieveRequest(
        query=query,
        scope=MemoryScope(run_id=run, persona_id=persona),
        budget=ContextBudget(max_tokens=max_tokens),
    )


class OnStore(BaseAdapter):
    """A provider written on ``BaseAdapter`` over a store (not the store wrapper): how a
    provider-level defect, one the wrapper makes impossible, is built."""

    def __init__(self, store) -> None:  # type: ignore[no-untyped-def]
        self.store = store
        super().__init__(info=store.info)

    async def _setup(self, scope):  # type: ignore[no-untyped-def]
        if hasattr(self.store, "setup"):
            await self.store.setup(scope)

    async def _record(self, event):  # type: ignore[no-untyped-def]
        return await self.store.record(event)

    async def _retrieve(self, request):  # type: ignore[no-untyped-def]
        return await self.store.retrieve(request)

    async def _reset(self, scope):  # type: ignore[no-untyped-def]
        return await self.store.reset(scope)

    def render(self, scope, items, budget):  # type: ignore[no-untyped-def]
        render = getattr(self.store, "render", None)
        return super().render(scope, items, budget) if render is None else render(
            scope, items, budget)

    async def aclose(self) -> None:
        if hasattr(self.store, "aclose"):
            await self.store.aclose()


class OnFullHistory(OnStore):
    def __init__(self, path) -> None:  # type: ignore[no-untyped-def]
        super().__init__(FullHistory(path))


class IgnoresReadOnly(OnFullHistory):
    async def record_event(self, event: MemoryEvent) -> WriteReceipt:
        native = await self._record(event)
        return WriteReceipt(
            status="committed",
            event_id=event.event_id,
            trace=self._trace("record_event", status=native.status),
        )


class LeaksAcrossScopes(FullHistory):
    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        rows = self._run("SELECT event_id, transcript FROM events")
        from nanobot_memory_adapters.contract import RetrievedItem

        return NativeRetrieval(
            items=[RetrievedItem(native_id=i, text=t) for i, t in rows],
            raw=rows,
            native_operation="leak",
        )


class ResetsEverything(FullHistory):
    async def reset(self, scope: MemoryScope) -> str | None:
        self._run("DELETE FROM events")
        return "deleted all"


class LosesWrites(FullHistory):
    async def record(self, event: MemoryEvent) -> NativeWrite:
        return NativeWrite(status="committed", native_ids=[], native_operation="drop")


class RaisesRawErrors(OnFullHistory):
    async def retrieve(self, request: RetrieveRequest):  # type: ignore[override]
        raise RuntimeError("backend exploded")

    async def record_event(self, event: MemoryEvent):  # type: ignore[override]
        raise RuntimeError("backend exploded")

    async def setup_scope(self, scope: MemoryScope) -> None:
        raise RuntimeError("backend exploded")


class BudgetBlind(FullHistory):
    """Packs and renders as if the budget were unlimited."""

    async def retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        huge = request.model_copy(update={"budget": ContextBudget(max_tokens=100_000)})
        return await super().retrieve(huge)

    def render(self, scope, items, budget):  # type: ignore[override]
        return super().render(scope, items, ContextBudget(max_tokens=100_000))


@pytest.mark.parametrize(
    ("cls", "item"),
    [
        (IgnoresReadOnly, 4),
        (IgnoresReadOnly, 11),
        (LeaksAcrossScopes, 3),
        (ResetsEverything, 6),
        (LosesWrites, 2),
        (BudgetBlind, 5),
    ],
)
async def test_suite_fails_a_broken_adapter(tmp_path, cls, item):
    async def make():
        return as_provider(cls(tmp_path / "h.sqlite3"))

    result = await run_item(item, SuiteTarget(make=make, make_failing=make))
    assert result.status == "failed", result


class MisstatesItsLines(StoreProvider):
    """Gives section lines that are not its context's (a composition from them would
    show what the provider never rendered)."""

    async def retrieve(self, request: RetrieveRequest):  # type: ignore[no-untyped-def]
        result = await super().retrieve(request)
        return result.model_copy(update={
            "section_lines": [*result.section_lines, "a line the context does not hold"]})


async def test_item_5_fails_section_lines_that_are_not_the_context_s(tmp_path):
    async def make():  # type: ignore[no-untyped-def]
        return MisstatesItsLines(FullHistory(tmp_path / "h.sqlite3"))

    result = await run_item(5, SuiteTarget(make=make, make_failing=make))
    assert result.status == "failed" and "section_lines" in result.detail, result

    async def honest():  # type: ignore[no-untyped-def]
        return StoreProvider(FullHistory(tmp_path / "h2.sqlite3"))

    assert (await run_item(5, SuiteTarget(make=honest, make_failing=honest))).status == "passed"


async def test_item_7_fails_when_errors_are_not_wrapped(tmp_path):
    async def make():
        return StoreProvider(FullHistory(tmp_path / "h.sqlite3"))

    async def make_failing():
        return RaisesRawErrors(tmp_path / "h2.sqlite3")

    result = await run_item(7, SuiteTarget(make=make, make_failing=make_failing))
    assert result.status == "failed" and "instead of AdapterError" in result.detail


async def test_item_7_requires_a_failing_target_or_a_reason(tmp_path):
    async def make():
        return StoreProvider(FullHistory(tmp_path / "h.sqlite3"))

    assert (await run_item(7, SuiteTarget(make=make))).status == "failed"
    na = await run_item(7, SuiteTarget(make=make, no_native_backend="none"))
    assert na.status == "not_applicable"


def EmptyWhenSmall() -> StoreProvider:
    """Finds items but renders none under a small budget: an empty section always fits."""
    provider = reference()
    whole = provider.render

    def render(scope, items, budget):  # type: ignore[no-untyped-def]
        return whole(scope, items if budget.max_tokens > 500 else [], budget)

    provider.render = render  # type: ignore[method-assign]
    return provider


@pytest.mark.parametrize("visits", ["turns", "one_turn"])
async def test_item_5_needs_a_non_empty_small_section_when_items_exist(visits):
    async def make():
        return EmptyWhenSmall()

    target = SuiteTarget(make=make, no_native_backend="dict", budget_visits=visits)
    result = await run_item(5, target)
    assert result.status == "failed" and "none shown within 120 tokens" in result.detail

    async def make_sound():
        return reference()

    sound = SuiteTarget(make=make_sound, no_native_backend="dict", budget_visits=visits)
    assert (await run_item(5, sound)).status == "passed"


async def test_item_5_in_one_turn_records_the_same_four_sentences_once():
    """The real-model lane's cheaper item 5: one event holding the four visits."""
    made: list[StoreProvider] = []

    async def make():
        made.append(reference())
        return made[-1]

    result = await run_item(5, SuiteTarget(make=make, no_native_backend="dict",
                                           budget_visits="one_turn"))
    assert result.status == "passed", result
    [rows] = made[0].store._rows.values()
    [row] = rows
    assert all(f"visited {city} and loved" in row["text"]
               for city in ("Lisbon", "Kyoto", "Nairobi", "Quito"))


def DeclaresFeedbackItLacks() -> StoreProvider:
    provider = reference()
    provider.info = provider.info.model_copy(update={"capabilities": ("feedback",)})
    return provider


async def test_a_declared_capability_without_its_methods_fails_the_suite():
    async def make():
        return DeclaresFeedbackItLacks()

    result = await run_item(1, SuiteTarget(make=make, no_native_backend="dict"))
    assert result.status == "failed" and "['feedback']" in result.detail


class RecordsAhead(FullHistory):
    """Declares ``ingest_lookahead`` and stores the announced events at once."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.info = self.info.model_copy(update={
            "capabilities": (*(self.info.capabilities or ()), "ingest_lookahead")})

    @contextlib.asynccontextmanager
    async def ingest_lookahead(self, events):  # type: ignore[no-untyped-def]
        for e in events:
            await self.record(e)
        yield


class LookaheadChangesResults(RecordsAhead):
    """Stores nothing ahead, but shows only one of the announced events afterwards."""

    @contextlib.asynccontextmanager
    async def ingest_lookahead(self, events):  # type: ignore[no-untyped-def]
        yield
        for e in events[1:]:
            self._run("DELETE FROM events WHERE event_id = ?", (e.event_id,))


@pytest.mark.parametrize(("cls", "says"), [
    (RecordsAhead, "retrievable before it was recorded"),
    (LookaheadChangesResults, "with the lookahead"),
])
async def test_item_12_catches_a_lookahead_that_stores_ahead_or_changes_results(
    tmp_path, cls, says
):
    async def make():
        return StoreProvider(cls(tmp_path / "h.sqlite3"))

    result = await run_item(12, SuiteTarget(make=make))
    assert result.status == "failed" and says in result.detail, result.detail
    plain = await run_item(12, SuiteTarget(make=lambda: _full_history(tmp_path)))
    assert plain.status == "not_applicable"


async def _full_history(tmp_path):  # type: ignore[no-untyped-def]
    return StoreProvider(FullHistory(tmp_path / "plain.sqlite3"))


class IgnoresOwnWrites(FullHistory):
    """A version from SQLite's data_version alone: blind to this connection's commits."""

    async def store_version(self, scope):  # type: ignore[no-untyped-def]
        return str(self._run("PRAGMA data_version")[0][0])


class BlindToOtherWriters(FullHistory):
    """A version that counts only this adapter's writes: another process's go unseen."""

    async def store_version(self, scope):  # type: ignore[no-untyped-def]
        return str(self._writes.get(scope.key, 0))


class FollowsTheQuery(FullHistory):
    """Declares query_independent but shows only items that share a word with the query."""

    async def retrieve(self, request):  # type: ignore[no-untyped-def]
        native = await super().retrieve(request)
        words = set(request.query.lower().split())
        native.items = [i for i in native.items if words & set(i.text.lower().split())]
        return native


@pytest.mark.parametrize(("cls", "says"), [
    (IgnoresOwnWrites, "two writes to the scope left the version unchanged"),
    (BlindToOtherWriters, "another adapter's write changed this one's section"),
    (FollowsTheQuery, "gave two queries different sections"),
])
async def test_item_13_catches_a_stale_version_or_a_query_dependent_section(
    tmp_path, cls, says
):
    async def make():
        return StoreProvider(cls(tmp_path / "h.sqlite3"))  # one file: two writers

    result = await run_item(13, SuiteTarget(make=make))
    assert result.status == "failed" and says in result.detail, result.detail
    plain = await run_item(13, SuiteTarget(make=lambda: _full_history(tmp_path)))
    assert plain.status == "passed", plain.detail
    assert "another writer seen" in plain.detail


async def test_item_13_does_not_apply_without_either_declaration():
    async def make():
        return reference()

    result = await run_item(13, SuiteTarget(make=make))
    assert result.status == "not_applicable", result.detail


class MutatesPastTheGate(OnStore):
    """A provider written on ``BaseAdapter`` (not a store behind the wrapper) that declares
    native_mutation and overrides the gated public method itself, so its 'forget' writes
    while read-only (the defect item 11 exists for)."""

    native_mutations = frozenset({"forget"})

    def __init__(self) -> None:
        super().__init__(ReferenceStore())
        self.info = self.info.model_copy(update={"capabilities": ("native_mutation",)})

    async def native_mutation(self, scope, operation, payload):  # type: ignore[no-untyped-def]
        self.store._rows.pop(scope.key, None)
        return {"status": "committed", "operation": operation}


class MutatesThroughTheGate(MutatesPastTheGate):
    async def _native_mutation(self, scope, operation, payload):  # type: ignore[no-untyped-def]
        return await MutatesPastTheGate.native_mutation(self, scope, operation, payload)

    native_mutation = BaseAdapter.native_mutation  # the base class's gate


@pytest.mark.parametrize(("cls", "status"), [(MutatesPastTheGate, "failed"),
                                             (MutatesThroughTheGate, "passed")])
async def test_item_11_gates_native_mutation(cls, status):
    async def make():
        return cls()

    result = await run_item(11, SuiteTarget(make=make, no_native_backend="dict"))
    assert result.status == status, result
    if status == "passed":
        assert "native_mutation.forget" in result.detail
