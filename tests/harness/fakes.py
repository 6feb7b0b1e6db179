"""Test-only providers for the harness: each breaks one thing the swap flow or the
timeline must catch, or exercises a capability path (bulk ingest, readiness)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from nanobot_memory_adapters.base import BaseAdapter, NativeHealth, NativeRetrieval, NativeWrite
from nanobot_memory_adapters.contract import (
    FeedbackRequest,
    MemoryEvent,
    MemoryScope,
    ProviderInfo,
    Readiness,
    RetrievedItem,
    RetrieveRequest,
    RetrieveResult,
    WriteReceipt,
)


class Empty(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Store(BaseAdapter):
    """Keeps every turn per scope; retrieve returns them all, newest first."""

    config_model = Empty
    NAME = "fake_store"
    CONSISTENCY = "immediate"
    REQUIRES_LLM = False

    def __init__(self) -> None:
        super().__init__(
            info=ProviderInfo(
                name=self.NAME,
                condition_kind="architecture",
                consistency_model=self.CONSISTENCY,
                stores_events=True,
                requires_llm=self.REQUIRES_LLM,
            )
        )
        self.rows: dict[str, list[MemoryEvent]] = {}

    @classmethod
    def from_config(cls, config, env):  # type: ignore[no-untyped-def]
        return cls()

    def _key(self, scope: MemoryScope) -> str:
        return scope.key

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        rows = self.rows.setdefault(self._key(event.scope()), [])
        if event.event_id not in {e.event_id for e in rows}:
            rows.append(event)
        return NativeWrite("committed", [event.event_id], "list.append")

    async def _retrieve(self, request: RetrieveRequest) -> NativeRetrieval:
        rows = self.rows.get(self._key(request.scope), [])
        items = [RetrievedItem(native_id=e.event_id, text=e.transcript()) for e in reversed(rows)]
        return NativeRetrieval(
            items,
            {"n": len(rows)},
            "list.scan",
            native_request={"max_tokens": request.budget.max_tokens},
        )

    async def _reset(self, scope: MemoryScope) -> str | None:
        self.rows.pop(self._key(scope), None)
        return "dropped"


class LeakyAdapter(_Store):
    """Ignores the scope: every persona and run sees every write (isolation must fail)."""

    NAME = "leaky"

    def _key(self, scope: MemoryScope) -> str:
        return "everyone"


class DownAdapter(_Store):
    NAME = "down"

    async def _health(self) -> NativeHealth:
        return NativeHealth("unavailable", {"error": {"message": "connection refused"}})


class GateLeakAdapter(_Store):
    """Writes even while read-only (the read-only gate must catch it)."""

    NAME = "gate_leak"

    async def record_event(self, event: MemoryEvent) -> WriteReceipt:
        saved, self._mode = self._mode, self._mode.model_copy(update={"read_only": False})
        try:
            return await super().record_event(event)
        finally:
            self._mode = saved


class SelectiveAdapter(_Store):
    """Keeps every other turn, as an extracting memory keeps only the turns with a fact:
    the others are committed, stored nothing."""

    NAME = "selective"

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        self.turns = getattr(self, "turns", 0) + 1
        if self.turns % 2:
            return await super()._record(event)
        return NativeWrite("committed", [], "list.append", stored_nothing=True)


class NeedsLLMAdapter(_Store):
    NAME = "needs_llm"
    REQUIRES_LLM = True


class BulkReadyAdapter(_Store):
    """Declares bulk ingest and readiness; writes become visible only after a wait."""

    NAME = "bulk_ready"
    CONSISTENCY = "eventual"

    def __init__(self) -> None:
        super().__init__()
        self.pending: dict[str, list[MemoryEvent]] = {}
        self.bulk_calls = 0
        self.waits = 0

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        self.pending.setdefault(self._key(event.scope()), []).append(event)
        return NativeWrite("queued", [event.event_id], "queue.put")

    async def record_events(self, events: Sequence[MemoryEvent]) -> list[WriteReceipt]:
        self.bulk_calls += 1
        return [await self.record_event(e) for e in events]

    async def readiness(self, scope: MemoryScope) -> Readiness:
        n = len(self.pending.get(self._key(scope), []))
        return Readiness(status="ready" if n == 0 else "pending", pending_count=n)

    async def wait_until_ready(self, scope: MemoryScope, timeout_s: float) -> Readiness:
        self.waits += 1
        for event in self.pending.pop(self._key(scope), []):
            await _Store._record(self, event)
        return Readiness(status="ready", pending_count=0, waited_ms=0.0)


class PendingAdapter(BulkReadyAdapter):
    """Never finishes deriving: the readiness gate must say pending, never green."""

    NAME = "never_ready"

    async def wait_until_ready(self, scope: MemoryScope, timeout_s: float) -> Readiness:
        return Readiness(status="pending", pending_count=1, detail="still deriving")


class FeedbackAdapter(_Store):
    """Declares native feedback: a feedback text becomes a remembered turn of the scope
    (what a feedback-learning backend would keep)."""

    NAME = "with_feedback"

    def __init__(self) -> None:
        super().__init__()
        self.feedback: list[FeedbackRequest] = []

    async def apply_feedback(self, request: FeedbackRequest) -> WriteReceipt:
        if self.mode.read_only:
            return WriteReceipt(status="skipped_read_only",
                                trace=self._trace("apply_feedback", status="skipped_read_only"))
        self.feedback.append(request)
        trace = self._trace("apply_feedback", status="committed", scope=request.scope.key)
        self._emit(trace)
        return WriteReceipt(status="committed", trace=trace)


class ExitingAdapter(_Store):
    """Calls ``sys.exit(3)`` on its first write, as a careless SDK might (3 is also the
    bench's own "readiness pending" exit code)."""

    NAME = "exits"

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        import sys

        sys.exit(3)


class _BrokenSettings(BaseModel):
    """A third party's settings model whose own code raises (not a ValueError, so pydantic
    does not wrap it), quoting a key as a careless message might."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="after")
    def _explode(self) -> _BrokenSettings:
        raise RuntimeError("could not parse key sk-test-BROKEN0123456789abcdef")


class BrokenSettingsAdapter(_Store):
    config_model = _BrokenSettings
    NAME = "broken_settings"


class LookaheadAdapter(_Store):
    """Declares ``ingest_lookahead`` and logs what the harness does with it: each window's
    announced event ids when it opens, each record, each close. ``FAIL`` makes the call,
    the opening or the closing raise."""

    NAME = "lookahead"
    LOG: ClassVar[list[tuple[str, ...]]] = []
    FAIL: ClassVar[str | None] = None  # "call" | "enter" | "exit"

    def __init__(self) -> None:
        super().__init__()
        self.info = self.info.model_copy(update={"capabilities": ("ingest_lookahead",)})

    def ingest_lookahead(self, events: Sequence[MemoryEvent]
                         ) -> AbstractAsyncContextManager[None]:
        if self.FAIL == "call":
            raise RuntimeError("lookahead refused")
        return self._window([e.event_id for e in events])

    @contextlib.asynccontextmanager
    async def _window(self, ids: list[str]) -> AsyncIterator[None]:
        if self.FAIL == "enter":
            raise RuntimeError("lookahead failed to open")
        self.LOG.append(("open", *ids))
        try:
            yield
        finally:
            self.LOG.append(("close",))
            if self.FAIL == "exit":
                raise RuntimeError("lookahead failed to close")

    async def _record(self, event: MemoryEvent) -> NativeWrite:
        self.LOG.append(("record", event.event_id))
        return await super()._record(event)


class UnsectionedAdapter(_Store):
    """A provider built without the section's lines (as a third party's own retrieve
    may be): a question asked of two people cannot compose from it."""

    NAME = "unsectioned"

    async def retrieve(self, request: RetrieveRequest) -> RetrieveResult:
        result = await super().retrieve(request)
        return result.model_copy(update={"section_lines": []})


FAKES = {
    "unsectioned": UnsectionedAdapter,
    "exits": ExitingAdapter,
    "with_feedback": FeedbackAdapter,
    "leaky": LeakyAdapter,
    "selective": SelectiveAdapter,
    "down": DownAdapter,
    "gate_leak": GateLeakAdapter,
    "needs_llm": NeedsLLMAdapter,
    "bulk_ready": BulkReadyAdapter,
    "never_ready": PendingAdapter,
    "lookahead": LookaheadAdapter,
    "broken_settings": BrokenSettingsAdapter,
}
